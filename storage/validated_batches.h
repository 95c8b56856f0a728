#pragma once
// validated_batches: the batches of one produce request, each validated in full as a client's producer batch (the
// checks of batch_view::validate with producer_batch_limits: length and limit, magic, CRC-32C, codec, attributes and
// producer fields, dense offsets, records), with what the writer and the producer table need from each batch.
//
// Contract
// - Only validate() makes one, so holding a validated_batches means every byte of it passed those checks; nothing
//   after it parses a batch header again (partition_state reads the producer fields from batches(), partition_log
//   stamps from their crc_tail).
// - validate(span) validates the bytes where they are (a connection's receive buffer) and copies them once, only
//   when all of them are good: a refused request is never copied. validate(vector) takes the vector, no copy.
// - Errors (storage::errc; the first bad batch decides, its detail says "batch <i> (byte <b> of the request): ..."):
//   invalid_batch (empty, truncated, bad lengths, magic, records, "a producer batch needs records and
//   last_offset_delta = records_count - 1"), batch_too_large (over batch_bytes_max, or a zstd frame declaring more
//   than limits::batch_uncompressed_bytes_limit), crc_mismatch, unsupported_compression, unsupported_attributes,
//   invalid_producer_fields.
// - Invariants: batches() is not empty, in byte order, back to back from byte 0, and their sizes add up to bytes().
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/expected.h"
#include "storage/record_batch.h"

namespace rill::storage {

// The limits a client's batch is validated against: `batch_bytes_max` (the log's max_message_bytes), the default
// record and decompressed-size limits, dense offsets, producer fields and the record framing.
batch_limits producer_batch_limits(std::uint64_t batch_bytes_max);

// One batch of a validated request, as validated (its header is not re-read).
struct validated_batch {
  std::size_t position = 0;  // its first byte in bytes()
  std::uint32_t size = 0;
  std::uint32_t records = 0;      // records_count, >= 1; also the offsets it takes (dense: last_offset_delta + 1)
  std::uint32_t crc_tail = 0;     // CRC-32C of [producer_id_at, end): for stamp_batch
  std::int64_t producer_id = -1;  // -1: not idempotent (epoch and sequence are -1 too), else >= 0
  std::int16_t producer_epoch = -1;
  std::int32_t base_sequence = -1;
};

class validated_batches {
 public:
  // Validates the batches back to back in `bytes` (which must hold whole batches and nothing else) in place, then
  // copies them into the result. O(bytes); nothing is allocated before every batch passed.
  static expected<validated_batches> validate(std::span<const std::byte> bytes, std::uint64_t batch_bytes_max);
  // The same, keeping `bytes` as the result's bytes (no copy).
  static expected<validated_batches> validate(std::vector<std::byte> bytes, std::uint64_t batch_bytes_max);

  validated_batches(validated_batches&&) noexcept = default;
  validated_batches& operator=(validated_batches&&) noexcept = default;
  validated_batches(const validated_batches&) = delete;
  validated_batches& operator=(const validated_batches&) = delete;

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  [[nodiscard]] const std::vector<validated_batch>& batches() const noexcept { return batches_; }
  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }

  // The batches at `indexes` (ascending, each < batches().size()), copied into a new request: for a request of which
  // some batches are retries that are not written again.
  [[nodiscard]] validated_batches subset(std::span<const std::size_t> indexes) const;

  // Gives up the bytes and the batch list (for the writer, which owns them from then on).
  struct parts {
    std::vector<std::byte> bytes;
    std::vector<validated_batch> batches;
    std::uint64_t records = 0;
  };
  [[nodiscard]] parts release() && noexcept;

  // Asserts the invariants above: O(batches), no CRC.
  void check_invariants() const;

 private:
  validated_batches() = default;
  // Validates `bytes` into batches_ / records_ (bytes_ is not touched).
  expected<void> do_validate(std::span<const std::byte> bytes, std::uint64_t batch_bytes_max);

  std::vector<std::byte> bytes_;
  std::vector<validated_batch> batches_;
  std::uint64_t records_ = 0;
};

}  // namespace rill::storage
