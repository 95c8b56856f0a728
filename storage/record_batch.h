#pragma once
// batch_view: a zero-copy, validating view of one Kafka RecordBatch v2 (format: record_batch_format.h), and
// record_reader, which walks the records of an uncompressed (or decompressed) records region.
//
// Contract
// - batch_view never owns bytes: the span passed to validate() must outlive the view.
// - validate() checks, in this order and before anything is allocated for the batch: the length prefix is plausible
//   and within limits, the bytes are all there, magic, CRC-32C, codec, record count and offset deltas, and then the
//   record framing (uncompressed) or the zstd frame's declared content size (compressed). Each failure is an error
//   value naming what is wrong and at which byte of the batch.
// - With batch_limits::producer_fields (a client's batch), validate() also runs check_producer_fields() right after
//   the CRC and codec checks: no transactional or control attribute bit (errc::unsupported_attributes), and the
//   producer id, epoch and base sequence either all -1 or all >= 0 (errc::invalid_producer_fields). What needs the
//   partition's producer table (duplicates, gaps, epochs, unknown producers) is checked by actors/partition_state.
// - A zstd frame without a declared content size is decompressed with a cap to check its size and records
//   (validate_records_deep); batches rill builds always declare it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/endian.h"
#include "base/expected.h"
#include "base/strong.h"
#include "config/limits.h"
#include "storage/record_batch_format.h"

namespace rill::storage {

enum class compression : std::uint8_t { none = 0, zstd = 4 };

struct batch_limits {
  // Total bytes of one batch (batch_length + 12).
  std::uint64_t batch_bytes_max = 1 * limits::mib;
  std::uint32_t records_max = limits::batch_records_limit;
  // Decompressed records region of a compressed batch.
  std::uint64_t uncompressed_bytes_max = limits::batch_uncompressed_bytes_limit;
  // Producer batches: at least one record, offset deltas exactly 0..n-1, last_offset_delta == n - 1. Stored and
  // replicated batches may have gaps (compaction keeps original offsets).
  bool dense_offsets = false;
  // Producer batches: check_producer_fields() (attributes and producer fields). Stored and replicated batches are
  // not checked again (they passed it when they were produced).
  bool producer_fields = false;
  // Walk the record framing (uncompressed) / check the zstd content size (compressed). Off only for the
  // sealed-segment fast path, where the CRC alone decides.
  bool check_records = true;
};

class batch_view {
 public:
  // Validates the batch at the start of `bytes` (which may continue past it). On success the view covers exactly
  // the batch's bytes. If crc_tail is given it receives the CRC-32C of bytes [producer_id_at, end), which lets the
  // broker re-stamp the header and derive the new CRC without a second pass (see stamp_batch()).
  static expected<batch_view> validate(std::span<const std::byte> bytes, const batch_limits& limits,
                                       std::uint32_t* crc_tail = nullptr);

  // The total size of the batch starting at `prefix` (at least length_prefix_bytes long), from its length field
  // alone, or an error if the length is implausible or above batch_bytes_max. No CRC check: for sizing reads.
  static expected<std::size_t> size_from_prefix(std::span<const std::byte> prefix, std::uint64_t batch_bytes_max);

  // Wraps bytes already validated (e.g. by this process, earlier). Asserts the length field matches.
  static batch_view trusted(std::span<const std::byte> bytes);

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }

  [[nodiscard]] offset_t base_offset() const noexcept {
    return offset_t(get<std::int64_t>(batch_format::base_offset_at));
  }
  [[nodiscard]] offset_t last_offset() const noexcept { return base_offset() + last_offset_delta(); }
  // The offset after this batch.
  [[nodiscard]] offset_t next_offset() const noexcept { return last_offset() + 1; }
  [[nodiscard]] std::int32_t batch_length() const noexcept { return get<std::int32_t>(batch_format::batch_length_at); }
  [[nodiscard]] epoch_t leader_epoch() const noexcept {
    return epoch_t(get<std::int32_t>(batch_format::leader_epoch_at));
  }
  [[nodiscard]] std::int8_t magic() const noexcept { return get<std::int8_t>(batch_format::magic_at); }
  [[nodiscard]] std::uint32_t crc() const noexcept { return get<std::uint32_t>(batch_format::crc_at); }
  [[nodiscard]] std::uint16_t attributes() const noexcept { return get<std::uint16_t>(batch_format::attributes_at); }
  [[nodiscard]] std::uint16_t codec_bits() const noexcept { return attributes() & batch_format::codec_mask; }
  [[nodiscard]] compression codec() const noexcept { return static_cast<compression>(codec_bits()); }
  [[nodiscard]] bool log_append_time() const noexcept { return attributes() & batch_format::timestamp_log_append; }
  [[nodiscard]] bool is_control() const noexcept { return attributes() & batch_format::control; }
  [[nodiscard]] std::int32_t last_offset_delta() const noexcept {
    return get<std::int32_t>(batch_format::last_offset_delta_at);
  }
  [[nodiscard]] timestamp_ms_t base_timestamp() const noexcept {
    return timestamp_ms_t(get<std::int64_t>(batch_format::base_timestamp_at));
  }
  [[nodiscard]] timestamp_ms_t max_timestamp() const noexcept {
    return timestamp_ms_t(get<std::int64_t>(batch_format::max_timestamp_at));
  }
  [[nodiscard]] std::int64_t producer_id() const noexcept { return get<std::int64_t>(batch_format::producer_id_at); }
  [[nodiscard]] std::int16_t producer_epoch() const noexcept {
    return get<std::int16_t>(batch_format::producer_epoch_at);
  }
  [[nodiscard]] std::int32_t base_sequence() const noexcept {
    return get<std::int32_t>(batch_format::base_sequence_at);
  }
  [[nodiscard]] std::int32_t records_count() const noexcept {
    return get<std::int32_t>(batch_format::records_count_at);
  }
  // The records region: raw records (codec none) or the compressed frame.
  [[nodiscard]] std::span<const std::byte> records_region() const noexcept {
    return bytes_.subspan(batch_format::header_bytes);
  }

 private:
  explicit batch_view(std::span<const std::byte> b) noexcept : bytes_(b) {}
  template <class T>
  [[nodiscard]] T get(std::size_t at) const noexcept {
    return load_be<T>(bytes_.data() + at);
  }
  std::span<const std::byte> bytes_;
};

// The header checks of a batch a client produces, on its header fields alone (O(1), nothing allocated). The produce
// path runs them inside validate(), after the CRC (storage/validated_batches.h), so that no field of a corrupted
// header is believed. Kafka's rules for a non-transactional producer:
// - attributes: neither transactional (bit 4) nor control (bit 5): rill has no transactions, and control batches
//   are written only by a broker. Error: errc::unsupported_attributes.
// - producer_id -1 (not idempotent): producer_epoch and base_sequence must be -1 too; producer_id >= 0
//   (idempotent): producer_epoch and base_sequence must be >= 0; any other producer_id is refused.
//   Error: errc::invalid_producer_fields.
// Each error's detail names the field and its value.
expected<void> check_producer_fields(const batch_view& view);

// One record, pointing into the records region it was read from.
struct record_view {
  std::int8_t attributes = 0;
  std::int64_t timestamp_delta = 0;
  std::int32_t offset_delta = 0;
  std::optional<std::span<const std::byte>> key;
  std::optional<std::span<const std::byte>> value;  // nullopt with a key: a tombstone
  std::int32_t header_count = 0;
  std::span<const std::byte> headers;  // the encoded headers, walk with header_reader
};

struct header_view {
  std::span<const std::byte> key;
  std::optional<std::span<const std::byte>> value;
};

// Walks the records of a records region (uncompressed bytes). next() returns nullopt at the end of the region; an
// error for a record that does not parse (the detail gives its byte position in the region).
class record_reader {
 public:
  explicit record_reader(std::span<const std::byte> region) noexcept : region_(region), p_(region.data()) {}
  expected<std::optional<record_view>> next();
  [[nodiscard]] std::size_t position() const noexcept { return static_cast<std::size_t>(p_ - region_.data()); }

 private:
  std::span<const std::byte> region_;
  const std::byte* p_;
};

class header_reader {
 public:
  header_reader(std::span<const std::byte> headers, std::int32_t count) noexcept
      : p_(headers.data()), end_(headers.data() + headers.size()), remaining_(count) {}
  expected<std::optional<header_view>> next();

 private:
  const std::byte* p_;
  const std::byte* end_;
  std::int32_t remaining_;
};

// Checks the records of `view` in depth: decompresses a compressed batch (with the limits' cap) into `scratch`, walks
// every record, and checks the count and offset deltas against the header. Used by tools, compaction and for zstd
// frames that do not declare their size.
expected<void> validate_records_deep(const batch_view& view, const batch_limits& limits,
                                     std::vector<std::byte>& scratch);

// The uncompressed records region of `view`: the region itself, or its zstd frame decompressed into `scratch`.
expected<std::span<const std::byte>> records_of(const batch_view& view, std::uint64_t uncompressed_bytes_max,
                                                std::vector<std::byte>& scratch);

// The broker's stamping pass over a batch validated with crc_tail: sets base offset, leader epoch, log-append time
// (attribute bit 3, base and max timestamp) and writes the CRC derived from crc_tail. O(1) in the batch size.
void stamp_batch(std::span<std::byte> batch, offset_t base_offset, epoch_t epoch, timestamp_ms_t timestamp,
                 std::uint32_t crc_tail) noexcept;

}  // namespace rill::storage
