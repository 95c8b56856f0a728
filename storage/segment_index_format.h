#pragma once
// <base offset, 20 digits>.index: the sparse index of one segment. 16-byte entries, integers big-endian:
//
//   relative_offset u32   offset of the indexed batch minus the segment's base offset
//   position        u32   byte position of the batch in the .log file
//   max_timestamp   i64   the largest max_timestamp of any batch up to and including the indexed one
//
// One entry for the first batch, then one for the first batch that starts at least index_interval_bytes (4 KiB)
// after the previous entry's batch. A read finds the floor entry for its offset and scans forward at most one
// interval plus one batch.
//
// A sealed segment's index ends with one seal entry: relative_offset = 0xFFFFFFFF, position = CRC-32C of all the
// entries before it, max_timestamp = their count. Recovery trusts a sealed index only with a matching seal entry;
// the active segment's index is kept in memory and its file is empty until the seal writes it whole (recovery
// rebuilds the active index from a full scan anyway, so writing it per flush would cost a write and buy nothing).
#include <cstddef>
#include <cstdint>

namespace rill::storage::segment_index_format {

inline constexpr std::size_t entry_bytes = 16;
inline constexpr std::uint32_t seal_marker = 0xFFFFFFFFu;

}  // namespace rill::storage::segment_index_format
