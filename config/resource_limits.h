#pragma once
// What clients may make one rilld hold (style rule 9: a limit on everything). Each is a key of the [limits] section
// (config/server_config.cpp, docs/operations.md "Limits"); the metadata handlers check streams, topics, partitions
// and groups before a change is committed to the metadata journal, and a partition checks its named consumers
// before it creates an offset file for a new one. A refusal is net::status::limit_exceeded and names the key and
// its value.
//
// The hard ranges below are what the namespace packing and the state machine allow (metadata_state.h); the
// configured values are checked against them when the config is loaded. The limits are not part of the metadata
// state: lowering one never invalidates what exists already, it only refuses what would grow past it.
#include <cstdint>

namespace rill::config {

struct resource_limits {
  std::uint64_t streams_max = 1'000;
  std::uint64_t topics_per_stream_max = 1'000;
  std::uint64_t partitions_per_topic_max = 1'000;
  // Partitions of every topic together. An idle one holds no descriptor: their files count against open_files_max.
  std::uint64_t partitions_max = 1'000;
  // Storage files (segment .log/.index/.meta, superblock copies) held open by every partition together, split
  // evenly between the shards; the least recently used idle ones are closed beyond it and reopened when next used
  // (storage/file_cache.h). Files with I/O in flight or writes not yet synced are never closed, so the count can go
  // past the limit by those (rill_storage_open_files shows it).
  std::uint64_t open_files_max = 4'000;
  std::uint64_t groups_per_topic_max = 100;
  std::uint64_t groups_max = 10'000;  // consumer groups of every topic together
  std::uint64_t consumers_per_partition_max = 1'000;
  // Idempotent producers one partition remembers (the least recently active are forgotten beyond it): what bounds a
  // replicated partition's checkpoint, with storage.producer_expiry_ms (issue 38, finding 4).
  std::uint64_t producers_per_partition_max = 100'000;
};

// The ranges each key may take.
inline constexpr std::uint64_t streams_limit = 1u << 20;            // stream ids are 20 bits
inline constexpr std::uint64_t topics_per_stream_limit = 1u << 12;  // topic ids are 12 bits
inline constexpr std::uint64_t partitions_per_topic_limit = 100'000;
inline constexpr std::uint64_t partitions_limit = 1'000'000;
inline constexpr std::uint64_t groups_per_topic_limit = 1'024;
inline constexpr std::uint64_t groups_limit = 1'000'000;
inline constexpr std::uint64_t consumers_per_partition_limit = 1'000'000;
inline constexpr std::uint64_t producers_per_partition_limit = 1'000'000;
inline constexpr std::uint64_t producer_expiry_ms_min = 1'000;
inline constexpr std::uint64_t producer_expiry_ms_limit = std::uint64_t{365} * 86'400'000;  // a year
// A replicated partition's checkpoint holds its producers (146 bytes each at most) and named consumers (267 bytes
// each at most) within 63 MiB (consensus::partition_snapshot_bytes_budget): a cluster member's configuration whose
// producers_per_partition_max and consumers_per_partition_max together pass it is refused at load.
inline constexpr std::uint64_t partition_checkpoint_head_bytes = 65;
inline constexpr std::uint64_t partition_checkpoint_producer_bytes = 146;
inline constexpr std::uint64_t partition_checkpoint_consumer_bytes = 267;
inline constexpr std::uint64_t partition_checkpoint_budget_bytes = std::uint64_t{63} << 20;
inline constexpr std::uint64_t open_files_min = 16;  // one shard's share must let a roll open its files
inline constexpr std::uint64_t open_files_limit = 10'000'000;

static_assert(resource_limits{}.streams_max <= streams_limit);
static_assert(resource_limits{}.topics_per_stream_max <= topics_per_stream_limit);
static_assert(resource_limits{}.partitions_per_topic_max <= partitions_per_topic_limit);
static_assert(resource_limits{}.partitions_per_topic_max <= resource_limits{}.partitions_max,
              "a topic of the most partitions a topic may have fits the node's default");
static_assert(resource_limits{}.groups_per_topic_max <= groups_per_topic_limit);
static_assert(resource_limits{}.producers_per_partition_max <= producers_per_partition_limit);
static_assert(resource_limits{}.open_files_max >= open_files_min);
static_assert(resource_limits{}.open_files_max <= open_files_limit);

}  // namespace rill::config
