#pragma once
// The leader-epoch history of a partition (leader epoch -> first offset written in it), kept in memory by
// epoch_history and persisted atomically in the file "leader-epochs". Used for fencing: a replica that rejoins
// asks "where did epoch E end?" and truncates its log after that point (Kafka's OffsetsForLeaderEpoch).
//
// File format (big-endian): magic "REP1" u32, version u16 = 1, reserved u16, count u32, then count entries of
// (epoch i32, reserved u32 = 0, start_offset i64), then crc32c u32 of everything before it.
//
// Invariants: epochs strictly increase; start offsets do not decrease; at most entries_max entries (the oldest
// are dropped first; they cover data retention already deleted).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/expected.h"
#include "base/strong.h"

namespace rill::storage {

struct epoch_entry {
  epoch_t epoch;
  offset_t start_offset;
  friend bool operator==(const epoch_entry&, const epoch_entry&) = default;
};

class epoch_history {
 public:
  static constexpr std::size_t entries_max = 4096;
  static constexpr const char* file_name = "leader-epochs";

  // Records that `epoch` starts at `start`. Returns false (and changes nothing) when `epoch` is not newer than the
  // latest epoch or `start` is below the latest start; an equal epoch is a no-op returning true.
  bool assign(epoch_t epoch, offset_t start);
  // Forgets epochs that start after `last_kept` (after a truncate_after(last_kept)).
  void truncate_after(offset_t last_kept);
  // Keeps the entry covering `log_start` and everything after (retention moved the log start).
  void truncate_before(offset_t log_start);

  // The epoch in effect at `offset`, nullopt when offset is before the first entry.
  [[nodiscard]] std::optional<epoch_t> epoch_for(offset_t offset) const;
  // Where `epoch` ended: the start offset of the first later epoch, or `log_end` if epoch is the latest. For an
  // epoch older than every entry: nullopt. For an epoch between entries: the start of the next one.
  [[nodiscard]] std::optional<offset_t> end_offset_for(epoch_t epoch, offset_t log_end) const;
  [[nodiscard]] std::optional<epoch_entry> latest() const;
  [[nodiscard]] const std::vector<epoch_entry>& entries() const noexcept { return entries_; }

  [[nodiscard]] std::vector<std::byte> encode() const;
  static expected<epoch_history> decode(std::span<const std::byte> bytes);

 private:
  std::vector<epoch_entry> entries_;
};

}  // namespace rill::storage
