#pragma once
// batch_builder: builds one Kafka RecordBatch v2 for clients, tools and tests: keys, values, tombstones (a key with
// a null value), headers, producer id/epoch/sequence, and whole-batch zstd compression.
//
// Records are encoded as they are added; build() writes the header, compresses the records region when asked and
// computes the CRC. The builder can be reused after reset(), which keeps its memory: a producer that reuses one
// builder (and one output buffer, build_into) allocates and zero-fills nothing per batch once warm.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "base/strong.h"
#include "storage/record_batch.h"

namespace rill::storage {

struct header_kv {
  std::span<const std::byte> key;
  std::optional<std::span<const std::byte>> value;
};

std::span<const std::byte> as_bytes(std::string_view s) noexcept;

class batch_builder {
 public:
  explicit batch_builder(compression codec = compression::none, int zstd_level = 3) noexcept
      : codec_(codec), zstd_level_(zstd_level) {}

  batch_builder& base_offset(offset_t o) noexcept {
    base_offset_ = o;
    return *this;
  }
  batch_builder& base_timestamp(timestamp_ms_t t) noexcept {
    base_timestamp_ = t;
    return *this;
  }
  batch_builder& producer(std::int64_t id, std::int16_t epoch, std::int32_t base_sequence) noexcept {
    producer_id_ = id;
    producer_epoch_ = epoch;
    base_sequence_ = base_sequence;
    return *this;
  }
  batch_builder& leader_epoch(epoch_t e) noexcept {
    leader_epoch_ = e;
    return *this;
  }

  // Adds a record with the next offset delta. A null value with a key is a tombstone.
  void add(std::optional<std::span<const std::byte>> key, std::optional<std::span<const std::byte>> value,
           std::span<const header_kv> headers = {}, std::int64_t timestamp_delta = 0);
  void add(std::string_view key, std::string_view value) { add(as_bytes(key), as_bytes(value)); }
  void add_value(std::string_view value) { add(std::nullopt, as_bytes(value)); }

  [[nodiscard]] std::int32_t records() const noexcept { return count_; }
  // Bytes of the batch if built uncompressed now.
  [[nodiscard]] std::size_t uncompressed_bytes() const noexcept { return batch_format::header_bytes + records_bytes_; }

  // The finished batch. Fails only if compression fails.
  expected<std::vector<std::byte>> build() const;
  // The same, into `out` (replaced; its capacity is reused).
  expected<void> build_into(std::vector<std::byte>& out) const;
  void reset() noexcept;

 private:
  compression codec_;
  int zstd_level_;
  offset_t base_offset_{0};
  timestamp_ms_t base_timestamp_{0};
  std::int64_t producer_id_ = -1;
  std::int16_t producer_epoch_ = -1;
  std::int32_t base_sequence_ = -1;
  epoch_t leader_epoch_{-1};
  std::int32_t count_ = 0;
  std::int64_t max_timestamp_delta_ = 0;
  // Encoded records are records_[0, records_bytes_); the bytes after are spare room (grown by doubling, so a record
  // costs no zero-fill of its own).
  std::vector<std::byte> records_;
  std::size_t records_bytes_ = 0;
};

}  // namespace rill::storage
