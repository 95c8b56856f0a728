#pragma once
// Kafka RecordBatch v2 (magic 2), byte for byte: the one format rill uses on disk, on the wire and in replication.
// Shared by the validating view (record_batch.h), the builder and the broker's stamping pass. All integers are
// big-endian.
//
//  offset size field                    covered by CRC
//       0    8 base_offset              no   (assigned by the broker at append)
//       8    4 batch_length             no   (bytes after this field: total size - 12)
//      12    4 partition_leader_epoch   no   (stamped by the leader)
//      16    1 magic = 2                no
//      17    4 crc (CRC-32C)            no   (covers attributes .. end of batch)
//      21    2 attributes               yes  bits 0-2 codec (0 none, 4 zstd), bit 3 timestamp type (1 = log append
//                                            time), bit 4 transactional, bit 5 control
//      23    4 last_offset_delta        yes
//      27    8 base_timestamp           yes
//      35    8 max_timestamp            yes
//      43    8 producer_id              yes  (-1: not idempotent)
//      51    2 producer_epoch           yes
//      53    4 base_sequence            yes
//      57    4 records_count            yes
//      61      records...               yes  (compressed together when the codec is not none)
//
// A record (inside the records region, or inside the decompressed zstd frame):
//   length varint (bytes after this field), attributes i8, timestamp_delta varlong, offset_delta varint,
//   key_length varint (-1 = null), key, value_length varint (-1 = null), value,
//   header_count varint, then per header: key_length varint (>= 0), key, value_length varint (-1 = null), value.
#include <cstddef>
#include <cstdint>

namespace rill::storage::batch_format {

inline constexpr std::size_t base_offset_at = 0;
inline constexpr std::size_t batch_length_at = 8;
inline constexpr std::size_t leader_epoch_at = 12;
inline constexpr std::size_t magic_at = 16;
inline constexpr std::size_t crc_at = 17;
inline constexpr std::size_t attributes_at = 21;
inline constexpr std::size_t last_offset_delta_at = 23;
inline constexpr std::size_t base_timestamp_at = 27;
inline constexpr std::size_t max_timestamp_at = 35;
inline constexpr std::size_t producer_id_at = 43;
inline constexpr std::size_t producer_epoch_at = 51;
inline constexpr std::size_t base_sequence_at = 53;
inline constexpr std::size_t records_count_at = 57;
inline constexpr std::size_t header_bytes = 61;

// batch_length counts the bytes after itself.
inline constexpr std::size_t length_prefix_bytes = batch_length_at + 4;  // 12
// The part of the CRC-covered region that the broker rewrites when it stamps a batch (attributes, last offset
// delta, both timestamps); the rest (producer_id .. end) is unchanged, so its CRC is computed once during
// validation and combined with the new head's CRC (crc32c_combine).
inline constexpr std::size_t crc_head_begin = attributes_at;
inline constexpr std::size_t crc_head_end = producer_id_at;

inline constexpr std::int8_t magic_v2 = 2;

inline constexpr std::uint16_t codec_mask = 0x07;
inline constexpr std::uint16_t codec_none = 0;
inline constexpr std::uint16_t codec_gzip = 1;
inline constexpr std::uint16_t codec_snappy = 2;
inline constexpr std::uint16_t codec_lz4 = 3;
inline constexpr std::uint16_t codec_zstd = 4;
inline constexpr std::uint16_t timestamp_log_append = 1u << 3;
inline constexpr std::uint16_t transactional = 1u << 4;
inline constexpr std::uint16_t control = 1u << 5;

// The smallest possible record: every varint one byte, no key, value or headers.
inline constexpr std::size_t record_bytes_min = 7;

static_assert(header_bytes == 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4);
static_assert(crc_head_end - crc_head_begin == 22);

}  // namespace rill::storage::batch_format
