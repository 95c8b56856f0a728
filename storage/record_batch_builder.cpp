#include "storage/record_batch_builder.h"

#include <cstring>

#include "base/endian.h"
#include "storage/compression.h"
#include "storage/crc32c.h"
#include "storage/varint.h"

namespace rill::storage {
namespace bf = batch_format;

std::span<const std::byte> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

namespace {
std::size_t nullable_size(const std::optional<std::span<const std::byte>>& b) noexcept {
  return b ? zigzag_size(static_cast<std::int64_t>(b->size())) + b->size() : zigzag_size(-1);
}
std::byte* put_nullable(std::byte* p, const std::optional<std::span<const std::byte>>& b) noexcept {
  if (!b) {
    return write_zigzag(p, -1);
  }
  p = write_zigzag(p, static_cast<std::int64_t>(b->size()));
  if (!b->empty()) {
    std::memcpy(p, b->data(), b->size());
  }
  return p + b->size();
}
}  // namespace

void batch_builder::add(std::optional<std::span<const std::byte>> key, std::optional<std::span<const std::byte>> value,
                        std::span<const header_kv> headers, std::int64_t timestamp_delta) {
  const std::int32_t offset_delta = count_;
  std::size_t body = 1 + zigzag_size(timestamp_delta) + zigzag_size(offset_delta) + nullable_size(key) +
                     nullable_size(value) + zigzag_size(static_cast<std::int64_t>(headers.size()));
  for (const auto& h : headers) {
    body += nullable_size(h.key) + nullable_size(h.value);
  }
  const std::size_t at = records_bytes_;
  records_bytes_ = at + zigzag_size(static_cast<std::int64_t>(body)) + body;
  if (records_.size() < records_bytes_) {
    records_.resize(std::max(records_bytes_, 2 * records_.size()));
  }
  std::byte* p = records_.data() + at;
  p = write_zigzag(p, static_cast<std::int64_t>(body));
  *p++ = std::byte{0};  // record attributes: unused in v2
  p = write_zigzag(p, timestamp_delta);
  p = write_zigzag(p, offset_delta);
  p = put_nullable(p, key);
  p = put_nullable(p, value);
  p = write_zigzag(p, static_cast<std::int64_t>(headers.size()));
  for (const auto& h : headers) {
    p = put_nullable(p, h.key);
    p = put_nullable(p, h.value);
  }
  RILL_ASSERT(p == records_.data() + records_bytes_);
  max_timestamp_delta_ = count_ == 0 ? timestamp_delta : std::max(max_timestamp_delta_, timestamp_delta);
  ++count_;
}

expected<std::vector<std::byte>> batch_builder::build() const {
  std::vector<std::byte> out;
  RILL_TRY_VOID(build_into(out));
  return out;
}

expected<void> batch_builder::build_into(std::vector<std::byte>& out) const {
  const std::span<const std::byte> records(records_.data(), records_bytes_);
  out.clear();
  if (codec_ == compression::zstd) {
    out.resize(bf::header_bytes);
    RILL_TRY_VOID(zstd_compress(records, zstd_level_, out));
  } else {
    out.reserve(bf::header_bytes + records.size());
    out.resize(bf::header_bytes);
    out.insert(out.end(), records.begin(), records.end());  // (insert copies; resize would zero-fill first)
  }
  std::byte* b = out.data();
  store_be<std::int64_t>(b + bf::base_offset_at, base_offset_.value());
  store_be<std::int32_t>(b + bf::batch_length_at, static_cast<std::int32_t>(out.size() - bf::length_prefix_bytes));
  store_be<std::int32_t>(b + bf::leader_epoch_at, leader_epoch_.value());
  store_be<std::int8_t>(b + bf::magic_at, bf::magic_v2);
  store_be<std::uint16_t>(b + bf::attributes_at, static_cast<std::uint16_t>(codec_));
  store_be<std::int32_t>(b + bf::last_offset_delta_at, count_ == 0 ? 0 : count_ - 1);
  store_be<std::int64_t>(b + bf::base_timestamp_at, base_timestamp_.value());
  store_be<std::int64_t>(b + bf::max_timestamp_at, base_timestamp_.value() + max_timestamp_delta_);
  store_be<std::int64_t>(b + bf::producer_id_at, producer_id_);
  store_be<std::int16_t>(b + bf::producer_epoch_at, producer_epoch_);
  store_be<std::int32_t>(b + bf::base_sequence_at, base_sequence_);
  store_be<std::int32_t>(b + bf::records_count_at, count_);
  store_be<std::uint32_t>(b + bf::crc_at, crc32c(b + bf::attributes_at, out.size() - bf::attributes_at));
  return {};
}

void batch_builder::reset() noexcept {
  records_bytes_ = 0;
  count_ = 0;
  max_timestamp_delta_ = 0;
}

}  // namespace rill::storage
