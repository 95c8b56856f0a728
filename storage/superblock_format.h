#pragma once
// superblock.a / superblock.b: a partition's durable positions, written alternately so that a torn write can only
// damage the copy being replaced. 64 bytes, integers big-endian:
//
//  offset size field
//       0    4 magic "RSB1" (0x52534231)
//       4    2 version = 1
//       6    2 flags = 0
//       8    8 sequence            (the copy with the highest valid sequence wins; odd -> .a, even -> .b)
//      16    8 committed           (high-watermark: offsets below it are committed; a lower bound, written lazily)
//      24    8 log_start           (first offset retained; segments wholly below it are leftovers of a deletion)
//      32    8 recovery_frontier   (base offset of the first segment recovery must scan in full; every segment
//                                   below it was sealed with a synced index)
//      40    8 truncate_from       (-1, or an interrupted truncate_after: recovery cuts offsets >= this)
//      48   12 reserved (zero)
//      60    4 crc32c of bytes [0, 60)
#include <cstddef>
#include <cstdint>

namespace rill::storage::superblock_format {

inline constexpr std::uint32_t magic = 0x52534231;
inline constexpr std::uint16_t version = 1;
inline constexpr std::size_t magic_at = 0;
inline constexpr std::size_t version_at = 4;
inline constexpr std::size_t flags_at = 6;
inline constexpr std::size_t sequence_at = 8;
inline constexpr std::size_t committed_at = 16;
inline constexpr std::size_t log_start_at = 24;
inline constexpr std::size_t recovery_frontier_at = 32;
inline constexpr std::size_t truncate_from_at = 40;
inline constexpr std::size_t crc_at = 60;
inline constexpr std::size_t bytes = 64;
inline constexpr const char* name_a = "superblock.a";
inline constexpr const char* name_b = "superblock.b";

static_assert(crc_at + 4 == bytes);

}  // namespace rill::storage::superblock_format
