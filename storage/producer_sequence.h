#pragma once
// Idempotent-producer sequence numbers, as Kafka counts them: a batch's base_sequence is an int32 in
// [0, INT32_MAX]; each record takes one sequence number; after INT32_MAX comes 0 (Kafka's
// DefaultRecordBatch.incrementSequence). A batch may span the wrap: base INT32_MAX - 1 with 4 records covers
// INT32_MAX - 1, INT32_MAX, 0 and 1. Shared by the broker (partition_state's producer table) and the client library,
// so both wrap the same way.
//
// Invariants
// - Every function takes and returns sequences in [0, sequence_max]; arguments outside it are programmer errors.
// - sequence_distance(a, sequence_plus(a, n)) == n for every n in [0, sequence_max].
#include <cstdint>

#include "base/assert.h"

namespace rill::storage {

inline constexpr std::int32_t sequence_max = INT32_MAX;
// The number of distinct sequences: arithmetic is modulo this.
inline constexpr std::int64_t sequence_space = std::int64_t{sequence_max} + 1;

// `s` advanced by `n` (n >= 0), wrapping past sequence_max to 0.
[[nodiscard]] inline std::int32_t sequence_plus(std::int32_t s, std::int64_t n) noexcept {
  RILL_ASSERT(s >= 0, "sequence {}", s);
  RILL_ASSERT(n >= 0, "sequence step {}", n);
  return static_cast<std::int32_t>((std::int64_t{s} + n) % sequence_space);
}

[[nodiscard]] inline std::int32_t next_sequence(std::int32_t s) noexcept {
  return sequence_plus(s, 1);
}

// The sequence of the last record of a batch of `records` (>= 1) records starting at `base`.
[[nodiscard]] inline std::int32_t last_sequence_of(std::int32_t base, std::int64_t records) noexcept {
  RILL_ASSERT(records >= 1, "a batch of {} records", records);
  return sequence_plus(base, records - 1);
}

// How far `to` is ahead of `from`, going forward (with the wrap): in [0, sequence_max].
[[nodiscard]] inline std::int64_t sequence_distance(std::int32_t from, std::int32_t to) noexcept {
  RILL_ASSERT(from >= 0, "sequence {}", from);
  RILL_ASSERT(to >= 0, "sequence {}", to);
  const std::int64_t d = std::int64_t{to} - from;
  return d < 0 ? d + sequence_space : d;
}

static_assert(sequence_space == std::int64_t{1} << 31);

}  // namespace rill::storage
