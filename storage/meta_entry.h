#pragma once
// The replication metadata stored per batch (batch_meta) and the codec of its .meta file entries
// (meta_entry_format.h): the one place that knows the entry's byte layout.
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "base/strong.h"
#include "storage/meta_entry_format.h"

namespace rill::storage {

struct batch_meta {
  std::array<std::byte, meta_entry_format::payload_bytes> payload{};
  friend bool operator==(const batch_meta&, const batch_meta&) = default;
};

struct meta_entry {
  offset_t base_offset;
  batch_meta meta;
};

// Writes `e` as one file entry, its CRC included. base_offset must be >= 0.
void encode_meta_entry(const meta_entry& e, std::span<std::byte, meta_entry_format::entry_bytes> out) noexcept;
// The file bytes of `entries`, back to back.
[[nodiscard]] std::vector<std::byte> encode_meta_entries(std::span<const meta_entry> entries);
// The entry in `in`; nullopt when its CRC does not match (a torn or damaged entry). The caller checks the offset
// against the segment.
[[nodiscard]] std::optional<meta_entry> decode_meta_entry(
    std::span<const std::byte, meta_entry_format::entry_bytes> in) noexcept;

}  // namespace rill::storage
