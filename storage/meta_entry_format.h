#pragma once
// <base offset, 20 digits>.meta: per-batch replication metadata, beside the Kafka bytes (never inside them).
// 64-byte entries, one per batch appended with metadata, in offset order, integers big-endian:
//
//  offset size field
//       0    8 base_offset   i64, the batch's base offset
//       8   52 payload       opaque to storage (the consensus layer's per-prepare header: op, view, checksums)
//      60    4 crc32c        of the 60 bytes before it
//
// Entry i of the file is at byte i * entry_bytes. Written in the same flush as the batches and fdatasynced before
// them. Recovery keeps the valid prefix of entries whose base offsets are batches of the recovered log and cuts the
// rest. The codec is storage/meta_entry.h.
#include <cstddef>
#include <cstdint>

namespace rill::storage::meta_entry_format {

inline constexpr std::size_t base_offset_at = 0;
inline constexpr std::size_t payload_at = 8;
inline constexpr std::size_t payload_bytes = 52;
inline constexpr std::size_t crc_at = 60;
inline constexpr std::size_t entry_bytes = 64;

static_assert(base_offset_at + 8 == payload_at);
static_assert(payload_at + payload_bytes == crc_at);
static_assert(crc_at + 4 == entry_bytes);
static_assert(entry_bytes == 64, "the .meta file layout is on disk: its entry size never changes");

}  // namespace rill::storage::meta_entry_format
