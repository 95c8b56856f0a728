#pragma once
// segment_index: the in-memory sparse index of one segment (format: segment_index_format.h).
//
// Invariants: entries are strictly increasing in relative offset and position; max_timestamp does not decrease;
// the first entry, if any, is the segment's first batch at position 0.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/expected.h"
#include "base/strong.h"

namespace rill::storage {

struct index_entry {
  std::uint32_t relative_offset = 0;
  std::uint32_t position = 0;
  timestamp_ms_t max_timestamp{-1};
  friend bool operator==(const index_entry&, const index_entry&) = default;
};

class segment_index {
 public:
  explicit segment_index(std::uint32_t interval_bytes) noexcept : interval_bytes_(interval_bytes) {}

  // Called for every batch appended to the segment, in order.
  void on_batch(std::uint32_t relative_offset, std::uint32_t position, std::uint32_t size, timestamp_ms_t max_ts);
  void clear() noexcept;
  // Drops entries for batches at or after `position` (after a truncation) and recomputes the running state from
  // the kept batches' end `end_position`.
  void truncate(std::uint32_t position, std::uint32_t end_position);

  // The entry with the greatest relative offset <= rel; nullopt if the index is empty.
  [[nodiscard]] std::optional<index_entry> floor(std::uint32_t rel) const;
  // Where to start scanning for the first batch with max_timestamp >= ts: the entry before the first entry whose
  // max_timestamp >= ts (or the last entry if none is). nullopt if the index is empty.
  [[nodiscard]] std::optional<index_entry> scan_start_for_timestamp(timestamp_ms_t ts) const;

  [[nodiscard]] const std::vector<index_entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  // The file bytes of entries [from, size()).
  [[nodiscard]] std::vector<std::byte> encode(std::size_t from) const;
  // The whole index plus its seal entry.
  [[nodiscard]] std::vector<std::byte> encode_sealed() const;
  // Parses a sealed index file (seal entry required and matching) and checks the invariants against `log_bytes`
  // (positions must lie inside the log). Errors name the entry that failed.
  static expected<segment_index> decode_sealed(std::span<const std::byte> bytes, std::uint64_t log_bytes,
                                               std::uint32_t interval_bytes);

 private:
  std::uint32_t interval_bytes_;
  std::vector<index_entry> entries_;
  std::uint64_t bytes_since_entry_ = 0;
  timestamp_ms_t max_timestamp_{-1};
};

}  // namespace rill::storage
