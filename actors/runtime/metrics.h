#pragma once
// metrics: what the runtime measures about its actors and shards, as plain data (no CAF), and its renderings:
// Prometheus text exposition (format 0.0.4) and JSON. docs/monitoring.md lists every metric.
//
// Counting takes no lock: an actor's counters are atomics (received is bumped by senders on any thread; processed,
// busy time and the per-message-type latency histograms only by the actor's own thread). Readers (the HTTP thread)
// copy them into samples; the registry's mutex guards only the set of actors, taken when one is spawned or gone and
// when a snapshot is taken.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/latency_histogram.h"

namespace rill::actors {

// Per message type (the atom a message starts with; replies and others have keys of their own).
struct message_type_metrics {
  std::atomic<std::uint64_t> key{0};  // 0: slot free
  latency_histogram latency;
};

struct actor_metrics {
  static constexpr std::size_t type_slots = 12;     // the last one collects every further type
  static constexpr std::uint64_t key_reply = 1;     // a response to a request this actor made
  static constexpr std::uint64_t key_other = 2;     // a message that does not start with an atom
  static constexpr std::uint64_t key_overflow = 3;  // types beyond the slots

  std::string kind;  // "partition", "connection", ...
  std::size_t shard = 0;
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> processed{0};
  std::atomic<std::uint64_t> busy_ns{0};
  std::array<message_type_metrics, type_slots> types;

  // On the actor's own thread: one message of type `key` took `d` to handle.
  void handled(std::uint64_t key, std::chrono::nanoseconds d) noexcept {
    processed.store(processed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    busy_ns.store(busy_ns.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(d.count()),
                  std::memory_order_relaxed);
    for (std::size_t i = 0; i + 1 < type_slots; ++i) {
      const auto k = types[i].key.load(std::memory_order_relaxed);
      if (k == key) {
        types[i].latency.record(d);
        return;
      }
      if (k == 0) {
        types[i].key.store(key, std::memory_order_release);  // single writer: no race for the slot
        types[i].latency.record(d);
        return;
      }
    }
    types[type_slots - 1].key.store(key_overflow, std::memory_order_release);
    types[type_slots - 1].latency.record(d);
  }
};

// What a partition actor publishes (its own thread writes; gauges are refreshed after every produce, retention run
// and sync).
struct partition_metrics {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
  std::atomic<std::int64_t> log_start{0};
  std::atomic<std::int64_t> high_watermark{0};
  std::atomic<std::int64_t> log_end{0};
  std::atomic<std::uint64_t> segments{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> produce_errors{0};
  std::atomic<std::uint64_t> retention_runs{0};
  std::atomic<std::uint64_t> fenced{0};      // gauge: 1 while a storage failure fences the partition
  std::atomic<std::uint64_t> recoveries{0};  // recoveries from a fence
  // gauge: 1 while this node's replica leads a replicated partition and a backup is out of reach or has left a
  // prepare unacknowledged for a second (docs/replication.md, Watching it)
  std::atomic<std::uint64_t> under_replicated{0};
  // Read by consumers: the records and bytes of the whole batches the partition's polls returned (a poll that starts
  // inside a batch counts the batch's records before that position too).
  std::atomic<std::uint64_t> records_read{0};
  std::atomic<std::uint64_t> bytes_read{0};
  latency_histogram produce;  // a produce request, from when the partition handles it to its reply
  latency_histogram write;    // a group of appends written (and synced, under sync_before_ack)
  latency_histogram sync;     // an fdatasync of a relaxed durability policy
};

// What a connection actor publishes.
struct connection_metrics {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> errors{0};  // replies with a status other than ok
  std::atomic<std::uint64_t> bytes_in{0};
  std::atomic<std::uint64_t> bytes_out{0};
  std::atomic<std::uint64_t> recv_buffer_bytes{0};  // gauge: the pooled receive buffer held (0 while idle)
  // Copies per produced byte: (produce_copied_bytes + recv_copied_bytes) / produce_bytes on a produce-only load.
  std::atomic<std::uint64_t> produce_bytes{0};         // batch bytes of produce requests routed to a partition
  std::atomic<std::uint64_t> produce_copied_bytes{0};  // of them, copied out of the receive buffer (the router's copy)
  std::atomic<std::uint64_t> recv_copied_bytes{0};     // received bytes moved between or within receive buffers
};

// What a group actor publishes. Committed offsets change only on commits (not a hot path): under a mutex.
struct group_metrics {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::string name;
  std::atomic<std::uint64_t> members{0};
  std::atomic<std::uint64_t> generation{0};
  std::atomic<std::uint64_t> rebalances{0};  // generations started since rilld started
  mutable std::mutex mutex;
  std::vector<std::optional<std::uint64_t>> committed;  // per partition
};

inline void bump(std::atomic<std::uint64_t>& a, std::uint64_t by = 1) noexcept {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);  // single writer
}

struct partition_sample {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
  std::int64_t log_start = 0;
  std::int64_t high_watermark = 0;
  std::int64_t log_end = 0;
  std::uint64_t segments = 0;
  std::uint64_t bytes = 0;
  std::uint64_t produce_errors = 0;
  std::uint64_t retention_runs = 0;
  latency_histogram::snapshot produce;
  latency_histogram::snapshot write;
  latency_histogram::snapshot sync;
  std::uint64_t fenced = 0;
  std::uint64_t recoveries = 0;
  std::uint64_t under_replicated = 0;
  std::uint64_t records_read = 0;
  std::uint64_t bytes_read = 0;
  // Names of the stream and topic, from the metadata the HTTP thread reads when it renders (name_samples,
  // actors/sample_names.h): the names of now, so a renamed topic shows its new name; empty when the metadata no
  // longer has the ids (the partition is being deleted).
  std::string stream_name;
  std::string topic_name;
};

struct connection_sample {
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t recv_buffer_bytes = 0;
  std::uint64_t produce_bytes = 0;
  std::uint64_t produce_copied_bytes = 0;
  std::uint64_t recv_copied_bytes = 0;
};

struct group_sample {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::string name;
  std::uint64_t members = 0;
  std::uint64_t generation = 0;
  std::uint64_t rebalances = 0;
  std::vector<std::optional<std::uint64_t>> committed;
  std::string stream_name;  // as partition_sample's
  std::string topic_name;
};

struct message_type_sample {
  std::string type;  // the atom's text, "reply", "other" or "overflow"
  latency_histogram::snapshot latency;
};

struct actor_sample {
  std::uint64_t id = 0;
  std::string kind;
  std::string name;          // e.g. "0/1/3" for partition 3 of topic 1 of stream 0; may be empty
  std::string display_name;  // by names where there are some ("shop/orders/3"; name_samples), else as name
  std::size_t shard = 0;
  std::uint64_t received = 0;
  std::uint64_t processed = 0;
  std::uint64_t busy_ns = 0;
  std::vector<message_type_sample> types;
  std::optional<partition_sample> partition;    // kind "partition"
  std::optional<connection_sample> connection;  // kind "connection"
  std::optional<group_sample> group;            // kind "group"
  [[nodiscard]] std::uint64_t mailbox() const noexcept { return received > processed ? received - processed : 0; }
};

struct shard_sample {
  std::size_t index = 0;
  std::uint64_t jobs_run = 0;
  std::uint64_t run_queue = 0;
  std::uint64_t actors = 0;
  std::uint64_t busy_ns = 0;  // of its actors
  std::uint64_t completions = 0;
  std::uint64_t submissions = 0;
  std::uint64_t inline_syncs = 0;  // write + fdatasync pairs run on the shard's thread instead of the ring
  std::uint64_t in_flight = 0;
  std::uint64_t pool_cached_bytes = 0;
  std::uint64_t pool_outstanding = 0;
  std::uint64_t timers_fired = 0;
  std::uint64_t sleeps = 0;
  std::uint64_t wakes_sent = 0;
  std::uint64_t open_files = 0;           // storage descriptors the shard's file cache holds
  std::uint64_t open_file_evictions = 0;  // closed by it to make room
};

struct process_sample {
  std::uint64_t uptime_ms = 0;
  std::uint64_t resident_bytes = 0;
  std::uint64_t open_files = 0;
  std::uint32_t connections = 0;
};

// The node as /api/topics sums it up: from the metadata (streams, topics, partitions and groups that exist) and the
// listener (open connections).
struct node_totals {
  std::uint64_t streams = 0;
  std::uint64_t topics = 0;
  std::uint64_t partitions = 0;
  std::uint64_t groups = 0;
  std::uint32_t connections = 0;
};

// How many series /metrics renders one by one before it aggregates them: the keys monitoring.partition_series_max
// and monitoring.actor_series_max (config/server_config.h; docs/monitoring.md, "Bounded cardinality").
struct series_limits {
  std::uint64_t partition_series_max = 0;  // partitions shown one by one; beyond, per topic, stream or node
  std::uint64_t actor_series_max = 0;      // actors of one kind shown one by one; beyond, per kind and shard
};

// What one series of the rill_partition_* families covers.
enum class partition_level : std::uint8_t { partition, topic, stream, node };

// The finest level at which the partitions of `actors` make at most `partition_series_max` series (distinct
// partitions, topics, streams); node level (one series) when none does. Always returns.
partition_level partition_level_for(const std::vector<actor_sample>& actors, std::uint64_t partition_series_max);

// Prometheus text exposition of everything: rill_metrics_*, rill_actor_*, rill_partition_*, rill_connection_*,
// rill_group_*, rill_shard_*, rill_process_* (names, types and HELP lines in docs/monitoring.md). Label values are
// escaped as the format requires. Cardinality is bounded by `limits` (the invariants at the top of
// metrics_text.cpp): above partition_series_max partitions the rill_partition_* series are sums at
// partition_level_for(), with a rill_partitions gauge per series and rill_group_lag per group; a kind of actor with
// more than actor_series_max actors has its rill_actor_* series (and rill_connection_* for connections) summed per
// kind and shard. rill_metrics_*_series_aggregated state both. Pure: no I/O, no lock; the caller's thread.
std::string render_prometheus(const std::vector<actor_sample>& actors, const std::vector<shard_sample>& shards,
                              const process_sample& process, const series_limits& limits);
// JSON for /api/actors and /api/shards.
std::string render_actors_json(const std::vector<actor_sample>& actors);
std::string render_shards_json(const std::vector<shard_sample>& shards);
std::string render_partitions_json(const std::vector<actor_sample>& actors);

// /api/topics holds at most this many topics (the first, by stream and topic id); "topics_omitted" counts the rest.
// Their groups are bounded by topic_groups_json_max (at least groups_per_topic_max: every group is shown).
inline constexpr std::size_t topics_json_max = 1'000;
inline constexpr std::size_t topic_groups_json_max = 1'024;

// JSON for /api/topics, what the dashboard polls every second: {"totals": the node's counts and sums (records
// committed, stored, read; bytes; the produce latency histogram of every partition summed), "bucket_bounds_ns",
// "topics": per topic its ids, names, partitions, sums of its partitions' counters and its groups (members,
// generation, lag as rill_group_lag counts it), "topics_omitted"}. Sums of counters that exist: O(partitions +
// groups), no I/O, no lock; the caller's thread.
std::string render_topics_json(const std::vector<actor_sample>& actors, const node_totals& totals);

}  // namespace rill::actors
