#pragma once
// The hard limits of rill (style rule 9: a limit on everything). Configurable values are validated against these
// ranges; the static_asserts tie budgets that depend on each other.
#include <cstdint>
#include <string_view>

namespace rill::limits {

inline constexpr std::uint64_t kib = 1024;
inline constexpr std::uint64_t mib = 1024 * kib;
inline constexpr std::uint64_t gib = 1024 * mib;

// One record batch, as stored and as sent (batch_length + 12). Kafka's message.max.bytes default is ~1 MiB.
inline constexpr std::uint64_t batch_bytes_min = 61;  // an empty batch header; see storage/record_batch_format.h
inline constexpr std::uint64_t batch_bytes_limit = 128 * mib;
// Records in one batch (a record takes at least 7 bytes, so this is also bounded by batch bytes).
inline constexpr std::uint32_t batch_records_limit = 1u << 22;
// Decompressed size of one zstd batch (limits are checked against the frame's declared content size).
inline constexpr std::uint64_t batch_uncompressed_bytes_limit = 256 * mib;

// Segment size. Index positions are u32, and a batch is never split, so a segment file never exceeds
// max(segment_bytes, one batch): both together must stay below 4 GiB.
inline constexpr std::uint64_t segment_bytes_min = 1 * mib;
inline constexpr std::uint64_t segment_bytes_limit = 3 * gib + 512 * mib;
static_assert(segment_bytes_limit + batch_bytes_limit < (std::uint64_t{1} << 32),
              "index positions are u32: a segment plus one batch must fit");

// Sparse index: one entry for the first batch of a segment, then one every index_interval_bytes of log.
inline constexpr std::uint32_t index_interval_bytes = 4 * 1024;

// Group commit: bytes gathered into one flush (one vectored write + one fdatasync).
inline constexpr std::uint64_t flush_bytes_limit = 64 * mib;
// iovecs in one vectored write (Linux IOV_MAX is 1024).
inline constexpr std::uint32_t flush_iovecs_max = 1024;

// Reads: bytes in one positional read window, and the most a single read request may return.
inline constexpr std::uint64_t read_window_bytes_min = 4 * kib;
inline constexpr std::uint64_t read_window_bytes_limit = 16 * mib;
inline constexpr std::uint64_t read_bytes_limit = 256 * mib;
static_assert(read_window_bytes_min >= index_interval_bytes,
              "a read window covers the forward scan from an index entry");

// Retention deletes shrink a file in steps of this many bytes before unlinking it (one big unlink stalls other
// files' fdatasync for ~100 ms on the development machines).
inline constexpr std::uint64_t delete_step_bytes_min = 1 * mib;
inline constexpr std::uint64_t delete_step_bytes_limit = 1 * gib;

static_assert(read_window_bytes_min <= read_window_bytes_limit);
static_assert(read_window_bytes_limit <= read_bytes_limit, "a read window is within one read's budget");
static_assert(delete_step_bytes_min <= delete_step_bytes_limit);
static_assert(segment_bytes_min <= segment_bytes_limit);
static_assert(batch_bytes_min <= batch_bytes_limit);
static_assert(batch_records_limit * std::uint64_t{7} <= batch_uncompressed_bytes_limit,
              "the most records a batch may hold (7 bytes each at least) fit its decompressed size");

// Segments in one partition (bounds the in-memory segment table).
inline constexpr std::uint32_t segments_per_partition_max = 1u << 20;

// A cluster: its members are the replicas of the metadata group, which spans every node (a VSR group has at most
// consensus::replicas_max replicas; consensus/types.h asserts the two agree). Node ids are small positive integers.
inline constexpr std::uint64_t cluster_members_limit = 6;
inline constexpr std::uint64_t node_id_limit = 1'000'000;
inline constexpr std::uint64_t cluster_id_limit = (std::uint64_t{1} << 63) - 1;

// Groups of two are refused (issue 38, finding 7): a view change needs both replicas, and a replica that lost its
// disk votes for nothing until it has caught up (docs/consensus.md, Recovery of a lost disk), so a group of two
// whose member lost its disk can never elect a primary again. Not a partition's replication factor (1 or 3 and more
// instead) nor a cluster's member count (the metadata and coordinator groups span every member: 1, or 3 and more).
// The reasons the refusals give:
inline constexpr std::string_view replication_factor_two_refused =
    "replication_factor = 2 is refused: a group of two needs both replicas to choose a primary, and one that lost its "
    "disk votes for nothing until it has caught up, so after one lost disk the partition never has a primary again; "
    "use 1 (no copy) or 3 (one node may fail; any 2 form a majority)";
inline constexpr std::string_view two_members_refused =
    "a cluster of two members is refused: the metadata group spans every member and needs both to choose a primary, "
    "so after one node loses its disk the cluster never recovers; use 1 node, or 3 or more";

}  // namespace rill::limits
