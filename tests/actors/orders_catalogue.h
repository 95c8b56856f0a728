#pragma once
// The small catalogue the router's tests and the request fuzzer route against: stream 3 'orders' with topic 5 'eu'
// (4 partitions, group 7 'billing', batches up to 1 MiB) and topic 6 'us' (1 partition).
#include "actors/metadata_state.h"

namespace rill::testing {

inline actors::metadata_view orders_catalogue() {
  actors::metadata_view v;
  actors::stream_meta s;
  s.id = 3;
  s.name = "orders";
  actors::topic_meta eu;
  eu.id = 5;
  eu.name = "eu";
  eu.config.set_partitions(4);
  eu.config.set_max_message_bytes(1 << 20);  // 'us' has none: the router then applies the absolute limit
  actors::group_meta g;
  g.id = 7;
  g.name = "billing";
  eu.groups.emplace(7, g);
  actors::topic_meta us;
  us.id = 6;
  us.name = "us";
  us.config.set_partitions(1);
  s.topics.emplace(5, eu);
  s.topics.emplace(6, us);
  v.streams.emplace(3, s);
  return v;
}

}  // namespace rill::testing
