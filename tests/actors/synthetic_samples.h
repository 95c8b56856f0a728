#pragma once
// synthetic_samples: what the metrics registry would hand /metrics on a node of many partitions, built without a
// broker, for the renderer's unit test (tests/actors/metrics_text_test.cpp) and its benchmark (bench/micro).
//
// The node: `partitions` partition actors spread over topics of `partitions_per_topic` partitions each (topic ids
// 0.., stream 0; the last topic may be short), round-robin over `shards` shards, each with three message types
// (produce, reply, other) and produce/write/sync histograms; `connections` connection actors; one group per topic
// with an offset committed for every partition; one metadata actor. Every value is a function of the partition's
// index, so two calls build the same samples and a test can compute what a sum must be.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/runtime/metrics.h"

namespace rill::test {

struct synthetic_node {
  std::uint32_t partitions = 10'000;
  std::uint32_t partitions_per_topic = 1'000;
  std::uint32_t connections = 100;
  std::uint32_t shards = 2;
};

// A histogram with `seed`-dependent counts in a few buckets.
inline latency_histogram::snapshot synthetic_histogram(std::uint64_t seed) {
  latency_histogram::snapshot h;
  for (std::size_t b = 0; b < latency_histogram::bucket_count; b += 3) {
    h.counts[b] = (seed * 7 + b) % 13;
    h.count += h.counts[b];
    h.sum_ns += h.counts[b] * (b + 1) * 1'000;
  }
  return h;
}

inline std::vector<actors::actor_sample> synthetic_actors(const synthetic_node& node) {
  std::vector<actors::actor_sample> out;
  out.reserve(node.partitions + node.connections + node.partitions / node.partitions_per_topic + 2);
  std::uint64_t id = 1;
  {
    actors::actor_sample a;
    a.id = id++;
    a.kind = "metadata";
    a.name = "metadata";
    a.received = 10;
    a.processed = 10;
    out.push_back(std::move(a));
  }
  for (std::uint32_t i = 0; i < node.partitions; ++i) {
    actors::actor_sample a;
    a.id = id++;
    a.kind = "partition";
    const std::uint32_t topic = i / node.partitions_per_topic;
    const std::uint32_t partition = i % node.partitions_per_topic;
    a.name = "0/" + std::to_string(topic) + "/" + std::to_string(partition);
    a.shard = i % node.shards;
    a.received = 1'000 + i;
    a.processed = 1'000 + i - (i % 3);
    a.busy_ns = 1'000'000ull * (i % 17);
    for (const char* type : {"produce", "reply", "other"}) {
      a.types.push_back(actors::message_type_sample{type, synthetic_histogram(i + a.types.size())});
    }
    actors::partition_sample p;
    p.stream_id = 0;
    p.topic_id = topic;
    p.partition_id = partition;
    p.log_start = i % 5;
    p.high_watermark = 100 + i;
    p.log_end = 100 + i + (i % 2);
    p.segments = 1 + i % 4;
    p.bytes = 4'096ull * (1 + i % 100);
    p.produce_errors = i % 7;
    p.retention_runs = i % 11;
    p.produce = synthetic_histogram(i);
    p.write = synthetic_histogram(i + 1);
    p.sync = synthetic_histogram(i + 2);
    a.partition = p;
    out.push_back(std::move(a));
  }
  const std::uint32_t topics = (node.partitions + node.partitions_per_topic - 1) / node.partitions_per_topic;
  for (std::uint32_t t = 0; t < topics; ++t) {
    actors::actor_sample a;
    a.id = id++;
    a.kind = "group";
    a.name = "0/" + std::to_string(t) + "/readers";
    a.shard = t % node.shards;
    actors::group_sample g;
    g.stream_id = 0;
    g.topic_id = t;
    g.name = "readers";
    g.members = 2;
    g.generation = 3;
    g.rebalances = 3;
    for (std::uint32_t p = 0; p < node.partitions_per_topic && t * node.partitions_per_topic + p < node.partitions;
         ++p) {
      g.committed.emplace_back(50);
    }
    a.group = g;
    out.push_back(std::move(a));
  }
  for (std::uint32_t c = 0; c < node.connections; ++c) {
    actors::actor_sample a;
    a.id = id++;
    a.kind = "connection";
    a.name = "127.0.0.1:" + std::to_string(40'000 + c);
    a.shard = c % node.shards;
    a.received = 500 + c;
    a.processed = 500 + c;
    a.types.push_back(actors::message_type_sample{"frame", synthetic_histogram(c)});
    actors::connection_sample s;
    s.requests = 100 + c;
    s.errors = c % 3;
    s.bytes_in = 10'000 + c;
    s.bytes_out = 20'000 + c;
    s.recv_buffer_bytes = c % 2 ? 65'536 : 0;
    s.produce_bytes = 30'000 + c;
    s.produce_copied_bytes = 30'000 + c;
    s.recv_copied_bytes = c % 5;
    a.connection = s;
    out.push_back(std::move(a));
  }
  return out;
}

inline std::vector<actors::shard_sample> synthetic_shards(const synthetic_node& node) {
  std::vector<actors::shard_sample> out(node.shards);
  for (std::uint32_t i = 0; i < node.shards; ++i) {
    out[i].index = i;
    out[i].actors = node.partitions / node.shards;
  }
  return out;
}

}  // namespace rill::test
