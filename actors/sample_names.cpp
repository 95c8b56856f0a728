// sample_names: the names of stream and topic ids, looked up when a page is rendered (see sample_names.h).
#include "actors/sample_names.h"

#include <fmt/core.h>

namespace rill::actors {
static_assert(topic_groups_json_max >= groups_per_topic_max, "/api/topics shows every group of a topic");
namespace {

struct names {
  const stream_meta* stream = nullptr;
  const topic_meta* topic = nullptr;
};

names names_of(const metadata_view& view, std::uint32_t stream_id, std::uint32_t topic_id) {
  names out;
  const auto s = view.streams.find(stream_id);
  if (s == view.streams.end()) {
    return out;
  }
  out.stream = &s->second;
  const auto t = s->second.topics.find(topic_id);
  if (t != s->second.topics.end()) {
    out.topic = &t->second;
  }
  return out;
}

}  // namespace

void name_samples(std::vector<actor_sample>& actors, const metadata_view& view) {
  for (auto& a : actors) {
    a.display_name = a.name;
    if (a.partition) {
      auto& p = *a.partition;
      const auto n = names_of(view, p.stream_id, p.topic_id);
      if (n.stream == nullptr || n.topic == nullptr) {
        continue;
      }
      p.stream_name = n.stream->name;
      p.topic_name = n.topic->name;
      a.display_name = fmt::format("{}/{}/{}", p.stream_name, p.topic_name, p.partition_id);
    }
    if (a.group) {
      auto& g = *a.group;
      const auto n = names_of(view, g.stream_id, g.topic_id);
      if (n.stream == nullptr || n.topic == nullptr) {
        continue;
      }
      g.stream_name = n.stream->name;
      g.topic_name = n.topic->name;
      a.display_name = fmt::format("{}/{}/{}", g.stream_name, g.topic_name, g.name);
    }
  }
}

node_totals node_totals_of(const metadata_view& view, std::uint32_t connections) {
  node_totals out;
  out.streams = view.streams.size();
  for (const auto& [id, s] : view.streams) {
    out.topics += s.topics.size();
  }
  out.partitions = view.partition_count();
  out.groups = view.group_count();
  out.connections = connections;
  return out;
}

}  // namespace rill::actors
