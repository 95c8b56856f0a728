// metrics: Prometheus text exposition and JSON of actor, shard and process samples (see metrics.h).
//
// Invariants of the exposition (checked by tests/actors/metrics_text_test.cpp):
// - Bounded cardinality: the rill_partition_* families have at most max(partition_series_max, 1) series each (the
//   finest of partition, topic, stream and node level that fits; node level is one series), and rill_group_lag at
//   most one per group and partition at partition level, one per group above it. The rill_actor_* families of a
//   kind of actor have one series per actor while the kind has at most actor_series_max actors, else one per shard
//   (rill_connection_* follow the connection kind). What remains per group (rill_group_members and the like) is
//   bounded by limits.groups_max.
// - An aggregate is exact: each counter, gauge, bucket, sum and count of an aggregated series is the sum of the
//   series it replaces, so sum() in PromQL gives the same figure at every level.
// - The page says what it did: rill_metrics_partition_series_aggregated and rill_metrics_actor_series_aggregated.
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "actors/runtime/metrics.h"
#include "base/assert.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>

namespace rill::actors {
namespace {

// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string actor_labels(const actor_sample& a) {
  // Partitions and groups are named by ids (name="0/0/1", stable across renames); display_name="shop/orders/1" says
  // which by the names of now.
  if (!a.display_name.empty() && a.display_name != a.name) {
    return fmt::format(R"(kind="{}",name="{}",shard="{}",id="{}",display_name="{}")", escape(a.kind), escape(a.name),
                       a.shard, a.id, escape(a.display_name));
  }
  return fmt::format(R"(kind="{}",name="{}",shard="{}",id="{}")", escape(a.kind), escape(a.name), a.shard, a.id);
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string seconds(std::uint64_t ns) {
  return fmt::format("{:.9f}", static_cast<double>(ns) / 1e9);
}

// One sample line: `name{labels} value`, or `name value` when there are no labels.
template <class Value>
void sample(std::string& out, std::string_view name, std::string_view labels, const Value& value) {
  if (labels.empty()) {
    fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
  } else {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, value);
  }
}

// The `le` label values of the finite buckets, formatted once.
const std::array<std::string, latency_histogram::bounds_ns.size()>& bucket_bounds_text() {
  static const auto texts = [] {
    std::array<std::string, latency_histogram::bounds_ns.size()> t;
    for (std::size_t b = 0; b < t.size(); ++b) {
      t[b] = fmt::format("{}", static_cast<double>(latency_histogram::bounds_ns[b]) / 1e9);
    }
    return t;
  }();
  return texts;
}

// One Prometheus histogram series (`labels` without `le`; may be empty).
void histogram_series(std::string& out, const char* name, const std::string& labels,
                      const latency_histogram::snapshot& h) {
  const auto& bounds = bucket_bounds_text();
  const std::string_view comma = labels.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < latency_histogram::bounds_ns.size(); ++b) {
    cumulative += h.counts[b];
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, comma, bounds[b],
                   cumulative);
  }
  cumulative += h.counts.back();
  // +Inf and _count come from the same bucket reads, so they agree.
  fmt::format_to(std::back_inserter(out), "{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, comma, cumulative);
  sample(out, fmt::format("{}_sum", name), labels, seconds(h.sum_ns));
  sample(out, fmt::format("{}_count", name), labels, cumulative);
}

void add(latency_histogram::snapshot& into, const latency_histogram::snapshot& h) {
  for (std::size_t b = 0; b < latency_histogram::bucket_count; ++b) {
    into.counts[b] += h.counts[b];
  }
  into.count += h.count;
  into.sum_ns += h.sum_ns;
}

using partition_key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>;

// The series a partition belongs to at `level`: its ids, with those below the level zeroed.
partition_key key_at(const partition_sample& p, partition_level level) {
  switch (level) {
    case partition_level::partition:
      return {p.stream_id, p.topic_id, p.partition_id};
    case partition_level::topic:
      return {p.stream_id, p.topic_id, 0};
    case partition_level::stream:
      return {p.stream_id, 0, 0};
    case partition_level::node:
      return {0, 0, 0};
  }
  return {0, 0, 0};
}

// The name labels beside the ids: `stream_name` (and `topic_name` with `with_topic`), when the names are known (a
// partition whose metadata is gone has none; every partition of a topic has the same, so an aggregate takes its
// first partition's).
std::string name_labels(const std::string& stream_name, const std::string& topic_name, bool with_topic) {
  if (stream_name.empty()) {
    return {};
  }
  if (!with_topic) {
    return fmt::format(R"(,stream_name="{}")", escape(stream_name));
  }
  return fmt::format(R"(,stream_name="{}",topic_name="{}")", escape(stream_name), escape(topic_name));
}

std::string labels_at(const partition_sample& p, partition_level level) {
  switch (level) {
    case partition_level::partition:
      return fmt::format(R"(stream="{}",topic="{}",partition="{}"{})", p.stream_id, p.topic_id, p.partition_id,
                         name_labels(p.stream_name, p.topic_name, true));
    case partition_level::topic:
      return fmt::format(R"(stream="{}",topic="{}"{})", p.stream_id, p.topic_id,
                         name_labels(p.stream_name, p.topic_name, true));
    case partition_level::stream:
      return fmt::format(R"(stream="{}"{})", p.stream_id, name_labels(p.stream_name, p.topic_name, false));
    case partition_level::node:
      return {};
  }
  return {};
}

using partition_index = std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, const partition_sample*>;

partition_index partitions_of(const std::vector<actor_sample>& actors) {
  partition_index out;
  for (const auto& a : actors) {
    if (a.partition) {
      out[{a.partition->stream_id, a.partition->topic_id, a.partition->partition_id}] = &*a.partition;
    }
  }
  return out;
}

// A group's lag on each of its topic's partitions that `parts` has: the high watermark minus the committed offset
// (or the log start, when nothing is committed or retention passed the commit), never below 0.
std::vector<std::pair<std::uint32_t, std::int64_t>> group_lags(const group_sample& g, const partition_index& parts) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> out;
  for (std::uint32_t p = 0; p < g.committed.size(); ++p) {
    auto it = parts.find({g.stream_id, g.topic_id, p});
    if (it == parts.end()) {
      continue;
    }
    const auto from =
        std::max<std::int64_t>(static_cast<std::int64_t>(g.committed[p].value_or(0)), it->second->log_start);
    out.emplace_back(p, std::max<std::int64_t>(0, it->second->high_watermark - from));
  }
  return out;
}

// One series of the rill_partition_* families: a partition, or the sum of the partitions of a topic, stream or node.
struct partition_series {
  std::string labels;
  partition_sample total;
  std::uint64_t partitions = 0;
};

void add(partition_sample& into, const partition_sample& p) {
  into.log_start += p.log_start;
  into.high_watermark += p.high_watermark;
  into.log_end += p.log_end;
  into.segments += p.segments;
  into.bytes += p.bytes;
  into.produce_errors += p.produce_errors;
  into.retention_runs += p.retention_runs;
  into.fenced += p.fenced;
  into.recoveries += p.recoveries;
  into.under_replicated += p.under_replicated;
  into.records_read += p.records_read;
  into.bytes_read += p.bytes_read;
  add(into.produce, p.produce);
  add(into.write, p.write);
  add(into.sync, p.sync);
}

// At partition level one series per partition sample, in the actors' order; above it one per key, in key order.
std::vector<partition_series> partition_series_at(const std::vector<actor_sample>& actors, partition_level level) {
  std::vector<partition_series> out;
  std::map<partition_key, std::size_t> at;
  for (const auto& a : actors) {
    if (!a.partition) {
      continue;
    }
    if (level == partition_level::partition) {
      out.push_back(partition_series{labels_at(*a.partition, level), *a.partition, 1});
      continue;
    }
    const auto [it, fresh] = at.try_emplace(key_at(*a.partition, level), out.size());
    if (fresh) {
      out.push_back(partition_series{labels_at(*a.partition, level), {}, 0});
    }
    add(out[it->second].total, *a.partition);
    ++out[it->second].partitions;
  }
  if (level != partition_level::partition) {
    std::vector<partition_series> sorted;
    sorted.reserve(out.size());
    for (const auto& [key, index] : at) {
      sorted.push_back(std::move(out[index]));
    }
    out = std::move(sorted);
  }
  RILL_ASSERT(level != partition_level::node || out.size() <= 1, "node level is one series, not {}", out.size());
  return out;
}

const char* to_string(partition_level level) noexcept {
  switch (level) {
    case partition_level::partition:
      return "partition";
    case partition_level::topic:
      return "topic";
    case partition_level::stream:
      return "stream";
    case partition_level::node:
      return "node";
  }
  return "node";
}

// One series of the rill_actor_* families: an actor, or the sum of the actors of one kind on one shard.
struct actor_series {
  std::string labels;
  const actor_sample* one = nullptr;  // the actor, when it is shown alone
  std::uint64_t received = 0;
  std::uint64_t processed = 0;
  std::uint64_t busy_ns = 0;
  std::uint64_t mailbox = 0;
  std::vector<message_type_sample> merged;  // aggregated only: per type, in type order
  [[nodiscard]] const std::vector<message_type_sample>& types() const { return one ? one->types : merged; }
};

// Actors per kind.
std::map<std::string, std::uint64_t> kinds_of(const std::vector<actor_sample>& actors) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& a : actors) {
    ++out[a.kind];
  }
  return out;
}

// Actors of kinds within actor_series_max one by one, in the actors' order; then one series per kind and shard of
// the kinds beyond it, in (kind, shard) order.
std::vector<actor_series> actor_series_for(const std::vector<actor_sample>& actors,
                                           const std::map<std::string, std::uint64_t>& kinds,
                                           std::uint64_t actor_series_max) {
  std::vector<actor_series> out;
  std::map<std::pair<std::string, std::size_t>, actor_series> aggregates;
  std::map<std::pair<std::string, std::size_t>, std::map<std::string, latency_histogram::snapshot>> types;
  for (const auto& a : actors) {
    if (kinds.at(a.kind) <= actor_series_max) {
      out.push_back(actor_series{actor_labels(a), &a, a.received, a.processed, a.busy_ns, a.mailbox(), {}});
      continue;
    }
    auto& s = aggregates[{a.kind, a.shard}];
    s.received += a.received;
    s.processed += a.processed;
    s.busy_ns += a.busy_ns;
    s.mailbox += a.mailbox();
    auto& by_type = types[{a.kind, a.shard}];
    for (const auto& t : a.types) {
      add(by_type[t.type], t.latency);
    }
  }
  for (auto& [key, s] : aggregates) {
    s.labels = fmt::format(R"(kind="{}",shard="{}")", escape(key.first), key.second);
    for (const auto& [type, latency] : types[key]) {
      s.merged.push_back(message_type_sample{type, latency});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

partition_level partition_level_for(const std::vector<actor_sample>& actors, std::uint64_t partition_series_max) {
  for (const auto level : {partition_level::partition, partition_level::topic, partition_level::stream}) {
    std::vector<partition_key> keys;
    for (const auto& a : actors) {
      if (a.partition) {
        keys.push_back(key_at(*a.partition, level));
      }
    }
    std::sort(keys.begin(), keys.end());
    const auto distinct = static_cast<std::uint64_t>(std::unique(keys.begin(), keys.end()) - keys.begin());
    if (distinct <= partition_series_max) {
      return level;
    }
  }
  return partition_level::node;
}

std::string render_prometheus(const std::vector<actor_sample>& actors, const std::vector<shard_sample>& shards,
                              const process_sample& process, const series_limits& limits) {
  std::string out;
  const auto level = partition_level_for(actors, limits.partition_series_max);
  const auto kinds = kinds_of(actors);
  family(out, "rill_metrics_partition_series_aggregated", "gauge",
         "1: the node has more partitions than monitoring.partition_series_max, so each rill_partition_* series "
         "(and rill_group_lag) sums the partitions of a topic, a stream or the node, as label level says; 0: one "
         "series per partition.");
  fmt::format_to(std::back_inserter(out), "rill_metrics_partition_series_aggregated{{level=\"{}\"}} {}\n",
                 to_string(level), level == partition_level::partition ? 0 : 1);
  family(out, "rill_metrics_actor_series_aggregated", "gauge",
         "1: the kind has more actors than monitoring.actor_series_max, so its rill_actor_* series (and "
         "rill_connection_* for connections) sum its actors per shard; 0: one series per actor.");
  for (const auto& [kind, count] : kinds) {
    fmt::format_to(std::back_inserter(out), "rill_metrics_actor_series_aggregated{{kind=\"{}\"}} {}\n", escape(kind),
                   count > limits.actor_series_max ? 1 : 0);
  }
  // Actors.
  const auto actor_rows = actor_series_for(actors, kinds, limits.actor_series_max);
  family(out, "rill_actor_messages_received_total", "counter", "Messages enqueued to the actor.");
  for (const auto& s : actor_rows) {
    sample(out, "rill_actor_messages_received_total", s.labels, s.received);
  }
  family(out, "rill_actor_messages_processed_total", "counter", "Messages the actor has handled.");
  for (const auto& s : actor_rows) {
    sample(out, "rill_actor_messages_processed_total", s.labels, s.processed);
  }
  family(out, "rill_actor_mailbox_depth", "gauge", "Messages received and not yet handled.");
  for (const auto& s : actor_rows) {
    sample(out, "rill_actor_mailbox_depth", s.labels, s.mailbox);
  }
  family(out, "rill_actor_busy_seconds_total", "counter", "Time the actor spent handling messages.");
  for (const auto& s : actor_rows) {
    sample(out, "rill_actor_busy_seconds_total", s.labels, seconds(s.busy_ns));
  }
  family(out, "rill_actor_handling_seconds", "histogram", "Time to handle one message, by message type.");
  for (const auto& s : actor_rows) {
    for (const auto& t : s.types()) {
      histogram_series(out, "rill_actor_handling_seconds", fmt::format(R"({},type="{}")", s.labels, escape(t.type)),
                       t.latency);
    }
  }
  // Partitions, at `level`.
  const auto partition_rows = partition_series_at(actors, level);
  if (level == partition_level::topic || level == partition_level::stream) {
    RILL_ASSERT(partition_rows.size() <= limits.partition_series_max, "{} series at level {} above {}",
                partition_rows.size(), to_string(level), limits.partition_series_max);
  }
  if (level != partition_level::partition) {
    family(out, "rill_partitions", "gauge",
           "Partitions one series of the rill_partition_* families sums (only while they are aggregated).");
    for (const auto& s : partition_rows) {
      sample(out, "rill_partitions", s.labels, s.partitions);
    }
  }
  // Every gauge and counter of a partition, in page order (histograms follow).
  struct number_family {
    const char* name;
    const char* type;
    const char* help;
    std::int64_t (*value)(const partition_sample&);
  };
  static const number_family partition_numbers[] = {
      {"rill_partition_log_start_offset", "gauge", "First offset still in the log.",
       [](const partition_sample& p) { return p.log_start; }},
      {"rill_partition_high_watermark", "gauge", "Offset below which records are committed (visible to consumers).",
       [](const partition_sample& p) { return p.high_watermark; }},
      {"rill_partition_log_end_offset", "gauge", "Offset the next record gets.",
       [](const partition_sample& p) { return p.log_end; }},
      {"rill_partition_segments", "gauge", "Segment files of the log.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.segments); }},
      {"rill_partition_bytes", "gauge", "Bytes of the log's segments.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.bytes); }},
      {"rill_partition_produce_errors_total", "counter", "Produce requests the partition refused or failed.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.produce_errors); }},
      {"rill_partition_fenced", "gauge",
       "1 while a storage failure (a failed fdatasync, a write that could not be cut back) fences the partition: "
       "writes fail until it recovers by itself (aggregated: how many of the partitions are fenced).",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.fenced); }},
      {"rill_partition_under_replicated", "gauge",
       "1 while this node leads the replicated partition and one of its backups is out of reach or has left a prepare "
       "unacknowledged for a second (aggregated: how many of the partitions led here are under-replicated).",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.under_replicated); }},
      {"rill_partition_recoveries_total", "counter", "Recoveries of the partition from a fence.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.recoveries); }},
      {"rill_partition_retention_runs_total", "counter", "Retention passes over the partition.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.retention_runs); }},
      {"rill_partition_read_records_total", "counter",
       "Records of the batches the partition returned to consumers (whole batches).",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.records_read); }},
      {"rill_partition_read_bytes_total", "counter", "Bytes of the batches the partition returned to consumers.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.bytes_read); }},
  };
  for (const auto& f : partition_numbers) {
    family(out, f.name, f.type, f.help);
    for (const auto& s : partition_rows) {
      sample(out, f.name, s.labels, f.value(s.total));
    }
  }
  family(out, "rill_partition_produce_seconds", "histogram",
         "A produce request at the partition, from its arrival to its acknowledgement.");
  for (const auto& s : partition_rows) {
    histogram_series(out, "rill_partition_produce_seconds", s.labels, s.total.produce);
  }
  family(out, "rill_partition_write_seconds", "histogram",
         "A group of appends written to the log (with its fdatasync under sync_before_ack).");
  for (const auto& s : partition_rows) {
    histogram_series(out, "rill_partition_write_seconds", s.labels, s.total.write);
  }
  family(out, "rill_partition_sync_seconds", "histogram", "An fdatasync of a relaxed durability policy.");
  for (const auto& s : partition_rows) {
    histogram_series(out, "rill_partition_sync_seconds", s.labels, s.total.sync);
  }
  // Connections: one series per connection, or per shard when connections are beyond actor_series_max.
  const bool connections_aggregated = kinds.contains("connection") && kinds.at("connection") > limits.actor_series_max;
  std::vector<std::pair<std::string, connection_sample>> connection_rows;
  {
    std::map<std::size_t, connection_sample> per_shard;
    for (const auto& a : actors) {
      if (!a.connection) {
        continue;
      }
      if (!connections_aggregated) {
        connection_rows.emplace_back(fmt::format(R"(peer="{}",id="{}")", escape(a.name), a.id), *a.connection);
        continue;
      }
      auto& c = per_shard[a.shard];
      c.requests += a.connection->requests;
      c.errors += a.connection->errors;
      c.bytes_in += a.connection->bytes_in;
      c.bytes_out += a.connection->bytes_out;
      c.recv_buffer_bytes += a.connection->recv_buffer_bytes;
      c.produce_bytes += a.connection->produce_bytes;
      c.produce_copied_bytes += a.connection->produce_copied_bytes;
      c.recv_copied_bytes += a.connection->recv_copied_bytes;
    }
    for (const auto& [shard, c] : per_shard) {
      connection_rows.emplace_back(fmt::format(R"(shard="{}")", shard), c);
    }
  }
  struct counter {
    const char* name;
    const char* help;
    std::uint64_t (*value)(const connection_sample&);
  };
  static const counter connection_counters[] = {
      {"rill_connection_requests_total", "Requests read from the connection.",
       [](const connection_sample& c) { return c.requests; }},
      {"rill_connection_errors_total", "Replies with an error status.",
       [](const connection_sample& c) { return c.errors; }},
      {"rill_connection_received_bytes_total", "Request bytes read.",
       [](const connection_sample& c) { return c.bytes_in; }},
      {"rill_connection_sent_bytes_total", "Reply bytes queued to the client.",
       [](const connection_sample& c) { return c.bytes_out; }},
      {"rill_connection_produce_bytes_total", "Batch bytes of produce requests routed to a partition.",
       [](const connection_sample& c) { return c.produce_bytes; }},
      {"rill_connection_produce_copied_bytes_total",
       "Produced batch bytes copied out of the receive buffer (once, after validation).",
       [](const connection_sample& c) { return c.produce_copied_bytes; }},
      {"rill_connection_receive_copied_bytes_total",
       "Received bytes copied when the receive buffer grew for a large frame or was compacted.",
       [](const connection_sample& c) { return c.recv_copied_bytes; }},
  };
  for (const auto& c : connection_counters) {
    family(out, c.name, "counter", c.help);
    for (const auto& [labels, s] : connection_rows) {
      sample(out, c.name, labels, c.value(s));
    }
  }
  family(out, "rill_connection_receive_buffer_bytes", "gauge",
         "The pooled receive buffer the connection holds (0 while it is idle).");
  for (const auto& [labels, s] : connection_rows) {
    sample(out, "rill_connection_receive_buffer_bytes", labels, s.recv_buffer_bytes);
  }
  // Groups; lag from the partitions' high watermarks.
  const auto parts = partitions_of(actors);
  auto group_labels = [](const group_sample& g) {
    return fmt::format(R"(stream="{}",topic="{}",group="{}"{})", g.stream_id, g.topic_id, escape(g.name),
                       name_labels(g.stream_name, g.topic_name, true));
  };
  family(out, "rill_group_members", "gauge", "Members of the consumer group.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_members{{{}}} {}\n", group_labels(*a.group), a.group->members);
    }
  }
  family(out, "rill_group_generation", "gauge", "The consumer group's generation.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_generation{{{}}} {}\n", group_labels(*a.group), a.group->generation);
    }
  }
  family(out, "rill_group_rebalances_total", "counter", "Generations the group started since rilld started.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_rebalances_total{{{}}} {}\n", group_labels(*a.group), a.group->rebalances);
    }
  }
  family(out, "rill_group_lag", "gauge",
         "Committed records the group has not consumed: high watermark minus the committed offset (or the log start); "
         "per partition, or summed over the topic's partitions while rill_partition_* series are aggregated.");
  for (const auto& a : actors) {
    if (!a.group) {
      continue;
    }
    const auto labels = group_labels(*a.group);
    std::int64_t lag_sum = 0;
    for (const auto& [p, lag] : group_lags(*a.group, parts)) {
      if (level == partition_level::partition) {
        fmt::format_to(std::back_inserter(out), "rill_group_lag{{{},partition=\"{}\"}} {}\n", labels, p, lag);
      }
      lag_sum += lag;
    }
    if (level != partition_level::partition) {
      sample(out, "rill_group_lag", labels, lag_sum);
    }
  }
  // Shards: one family per field, one sample per shard.
  struct shard_family {
    const char* name;
    const char* type;
    const char* help;
    std::string (*value)(const shard_sample&);
  };
  static const shard_family shard_families[] = {
      {"rill_shard_jobs_total", "counter", "Actor runs the shard's worker performed.",
       [](const shard_sample& s) { return std::to_string(s.jobs_run); }},
      {"rill_shard_run_queue_length", "gauge", "Actors waiting to run on the shard.",
       [](const shard_sample& s) { return std::to_string(s.run_queue); }},
      {"rill_shard_actors", "gauge", "Actors living on the shard.",
       [](const shard_sample& s) { return std::to_string(s.actors); }},
      {"rill_shard_busy_seconds_total", "counter", "Time the shard's actors spent handling messages.",
       [](const shard_sample& s) { return seconds(s.busy_ns); }},
      {"rill_shard_io_completions_total", "counter", "io_uring completions the shard reaped.",
       [](const shard_sample& s) { return std::to_string(s.completions); }},
      {"rill_shard_io_submissions_total", "counter", "io_uring submissions of the shard.",
       [](const shard_sample& s) { return std::to_string(s.submissions); }},
      {"rill_shard_io_inline_syncs_total", "counter",
       "Log writes + fdatasyncs the shard ran on its own thread while otherwise idle (storage.inline_syncs).",
       [](const shard_sample& s) { return std::to_string(s.inline_syncs); }},
      {"rill_shard_io_in_flight", "gauge", "io_uring operations submitted and not yet completed.",
       [](const shard_sample& s) { return std::to_string(s.in_flight); }},
      {"rill_shard_buffer_pool_cached_bytes", "gauge", "Freed I/O buffers the shard keeps for reuse.",
       [](const shard_sample& s) { return std::to_string(s.pool_cached_bytes); }},
      {"rill_shard_buffer_pool_outstanding_buffers", "gauge", "I/O buffers of the shard in use.",
       [](const shard_sample& s) { return std::to_string(s.pool_outstanding); }},
      {"rill_shard_timers_fired_total", "counter", "Deadline-heap timers that fired on the shard.",
       [](const shard_sample& s) { return std::to_string(s.timers_fired); }},
      {"rill_shard_sleeps_total", "counter", "Times the shard's worker slept waiting for work.",
       [](const shard_sample& s) { return std::to_string(s.sleeps); }},
  };
  for (const auto& f : shard_families) {
    family(out, f.name, f.type, f.help);
    for (const auto& s : shards) {
      out += fmt::format("{}{{shard=\"{}\"}} {}\n", f.name, s.index, f.value(s));
    }
  }
  // Storage descriptors (storage/file_cache.h): each shard's cache of open segment and superblock files.
  family(out, "rill_storage_open_files", "gauge",
         "Storage file descriptors the shard holds open (segments, superblocks), under limits.open_files_max.");
  for (const auto& s : shards) {
    out += fmt::format("rill_storage_open_files{{shard=\"{}\"}} {}\n", s.index, s.open_files);
  }
  family(out, "rill_storage_open_file_evictions_total", "counter",
         "Idle storage files the shard closed to stay under limits.open_files_max (reopened when next used).");
  for (const auto& s : shards) {
    out += fmt::format("rill_storage_open_file_evictions_total{{shard=\"{}\"}} {}\n", s.index, s.open_file_evictions);
  }
  family(out, "rill_process_uptime_seconds", "gauge", "Time since rilld started.");
  out += fmt::format("rill_process_uptime_seconds {}\n", static_cast<double>(process.uptime_ms) / 1000.0);
  family(out, "rill_process_resident_memory_bytes", "gauge", "Resident memory of rilld.");
  out += fmt::format("rill_process_resident_memory_bytes {}\n", process.resident_bytes);
  family(out, "rill_process_open_fds", "gauge", "Open file descriptors of rilld.");
  out += fmt::format("rill_process_open_fds {}\n", process.open_files);
  family(out, "rill_connections", "gauge", "Open client connections.");
  out += fmt::format("rill_connections {}\n", process.connections);
  return out;
}

std::string render_actors_json(const std::vector<actor_sample>& actors) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& a : actors) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& t : a.types) {
      types[t.type] = {{"count", t.latency.count}, {"sum_ns", t.latency.sum_ns}};
    }
    all.push_back({{"id", a.id},
                   {"kind", a.kind},
                   {"name", a.name},
                   {"display_name", a.display_name.empty() ? a.name : a.display_name},
                   {"shard", a.shard},
                   {"received", a.received},
                   {"processed", a.processed},
                   {"mailbox", a.mailbox()},
                   {"busy_ns", a.busy_ns},
                   {"types", types}});
  }
  return all.dump();
}

std::string render_partitions_json(const std::vector<actor_sample>& actors) {
  nlohmann::json all = nlohmann::json::array();
  auto hist = [](const latency_histogram::snapshot& h) {
    return nlohmann::json{{"count", h.count}, {"sum_ns", h.sum_ns}};
  };
  for (const auto& a : actors) {
    if (!a.partition) {
      continue;
    }
    const auto& p = *a.partition;
    all.push_back({{"stream", p.stream_id},
                   {"topic", p.topic_id},
                   {"partition", p.partition_id},
                   {"stream_name", p.stream_name},
                   {"topic_name", p.topic_name},
                   {"shard", a.shard},
                   {"log_start", p.log_start},
                   {"high_watermark", p.high_watermark},
                   {"log_end", p.log_end},
                   {"segments", p.segments},
                   {"bytes", p.bytes},
                   {"produce_errors", p.produce_errors},
                   {"retention_runs", p.retention_runs},
                   {"fenced", p.fenced},
                   {"recoveries", p.recoveries},
                   {"under_replicated", p.under_replicated},
                   {"records_read", p.records_read},
                   {"bytes_read", p.bytes_read},
                   {"mailbox", a.mailbox()},
                   {"produce", hist(p.produce)},
                   {"write", hist(p.write)},
                   {"sync", hist(p.sync)}});
  }
  return all.dump();
}

std::string render_topics_json(const std::vector<actor_sample>& actors, const node_totals& totals) {
  struct topic_row {
    const partition_sample* first = nullptr;
    partition_sample sum;
    std::uint64_t partitions = 0;
    std::int64_t records = 0;  // stored: high watermark minus log start, summed
    std::vector<const group_sample*> groups;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, topic_row> topics;
  partition_sample node;
  std::int64_t node_records = 0;
  for (const auto& a : actors) {
    if (!a.partition) {
      continue;
    }
    const auto& p = *a.partition;
    auto& t = topics[{p.stream_id, p.topic_id}];
    if (t.first == nullptr) {
      t.first = &p;
    }
    add(t.sum, p);
    ++t.partitions;
    t.records += std::max<std::int64_t>(0, p.high_watermark - p.log_start);
    add(node, p);
    node_records += std::max<std::int64_t>(0, p.high_watermark - p.log_start);
  }
  for (const auto& a : actors) {
    if (a.group) {
      auto it = topics.find({a.group->stream_id, a.group->topic_id});
      if (it != topics.end() && it->second.groups.size() < topic_groups_json_max) {
        it->second.groups.push_back(&*a.group);
      }
    }
  }
  const auto parts = partitions_of(actors);
  auto hist = [](const latency_histogram::snapshot& h) {
    return nlohmann::json{{"count", h.count}, {"sum_ns", h.sum_ns}, {"buckets", h.counts}};
  };
  nlohmann::json rows = nlohmann::json::array();
  std::size_t shown = 0;
  for (const auto& [key, t] : topics) {
    if (shown == topics_json_max) {
      break;
    }
    ++shown;
    nlohmann::json groups = nlohmann::json::array();
    for (const auto* g : t.groups) {
      std::int64_t lag = 0;
      for (const auto& [p, l] : group_lags(*g, parts)) {
        lag += l;
      }
      groups.push_back({{"name", g->name}, {"members", g->members}, {"generation", g->generation}, {"lag", lag}});
    }
    rows.push_back({{"stream", key.first},
                    {"topic", key.second},
                    {"stream_name", t.first->stream_name},
                    {"topic_name", t.first->topic_name},
                    {"partitions", t.partitions},
                    {"high_watermark", t.sum.high_watermark},
                    {"records", t.records},
                    {"bytes", t.sum.bytes},
                    {"segments", t.sum.segments},
                    {"records_read", t.sum.records_read},
                    {"bytes_read", t.sum.bytes_read},
                    {"produce_errors", t.sum.produce_errors},
                    {"fenced", t.sum.fenced},
                    {"under_replicated", t.sum.under_replicated},
                    {"produce", hist(t.sum.produce)},
                    {"groups", groups}});
  }
  RILL_ASSERT(rows.size() <= topics_json_max, "{} topics above {}", rows.size(), topics_json_max);
  nlohmann::json out;
  out["totals"] = {{"streams", totals.streams},         {"topics", totals.topics},
                   {"partitions", totals.partitions},   {"groups", totals.groups},
                   {"connections", totals.connections}, {"high_watermark", node.high_watermark},
                   {"records", node_records},           {"bytes", node.bytes},
                   {"records_read", node.records_read}, {"bytes_read", node.bytes_read},
                   {"produce", hist(node.produce)}};
  out["bucket_bounds_ns"] = latency_histogram::bounds_ns;
  out["topics"] = std::move(rows);
  out["topics_omitted"] = topics.size() - shown;
  return out.dump();
}

std::string render_shards_json(const std::vector<shard_sample>& shards) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& s : shards) {
    all.push_back({{"shard", s.index},
                   {"jobs", s.jobs_run},
                   {"run_queue", s.run_queue},
                   {"actors", s.actors},
                   {"busy_ns", s.busy_ns},
                   {"io_completions", s.completions},
                   {"io_submissions", s.submissions},
                   {"io_inline_syncs", s.inline_syncs},
                   {"io_in_flight", s.in_flight},
                   {"buffer_pool_cached_bytes", s.pool_cached_bytes},
                   {"buffer_pool_outstanding", s.pool_outstanding},
                   {"timers_fired", s.timers_fired},
                   {"sleeps", s.sleeps},
                   {"wakes_sent", s.wakes_sent}});
  }
  return all.dump();
}

}  // namespace rill::actors
