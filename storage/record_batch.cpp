// Validation of Kafka RecordBatch v2 and walking of its records.
//
// Invariants
// - Nothing is allocated for a batch before its length, magic and CRC have been checked (only validate_records_deep
//   and records_of allocate, for decompression, and only up to the limits' cap).
// - A view returned by validate() covers exactly batch_length + 12 bytes, all of which were present.
#include "storage/record_batch.h"

#include <fmt/core.h>

#include "storage/compression.h"
#include "storage/crc32c.h"
#include "storage/errc.h"
#include "storage/varint.h"

namespace rill::storage {
namespace bf = batch_format;

namespace {

rill::unexpected invalid(std::string detail) {
  return make_unexpected(errc::invalid_batch, std::move(detail));
}

// Walks `count` records of an uncompressed region: framing exact, offset deltas increasing and within
// [0, last_delta] (exactly 0..n-1 when dense). `where` prefixes error details.
expected<void> walk_records(std::span<const std::byte> region, std::int32_t count, std::int32_t last_delta,
                            bool dense) {
  if (static_cast<std::uint64_t>(count) * bf::record_bytes_min > region.size()) {
    return invalid(fmt::format("records_count {} cannot fit in {} bytes of records", count, region.size()));
  }
  record_reader reader(region);
  std::int64_t previous_delta = -1;
  for (std::int32_t i = 0; i < count; ++i) {
    const std::size_t at = reader.position();
    auto r = reader.next();
    if (!r) {
      return unexpected(std::move(r).error());
    }
    if (!r->has_value()) {
      return invalid(fmt::format("records_count says {} records, region ends after {}", count, i));
    }
    const record_view& rec = **r;
    if (rec.offset_delta <= previous_delta || rec.offset_delta > last_delta) {
      return invalid(fmt::format("record {} at records byte {}: offset_delta {} not increasing within [0, {}]", i, at,
                                 rec.offset_delta, last_delta));
    }
    if (dense && rec.offset_delta != i) {
      return invalid(fmt::format("record {} at records byte {}: offset_delta {} (a producer batch needs {})", i, at,
                                 rec.offset_delta, i));
    }
    previous_delta = rec.offset_delta;
  }
  if (reader.position() != region.size()) {
    return invalid(fmt::format("{} trailing bytes after {} records", region.size() - reader.position(), count));
  }
  return {};
}

}  // namespace

expected<std::size_t> batch_view::size_from_prefix(std::span<const std::byte> prefix, std::uint64_t batch_bytes_max) {
  if (prefix.size() < bf::length_prefix_bytes) {
    return invalid(
        fmt::format("{} bytes: shorter than the {}-byte length prefix", prefix.size(), bf::length_prefix_bytes));
  }
  const std::int32_t batch_length = load_be<std::int32_t>(prefix.data() + bf::batch_length_at);
  if (batch_length < static_cast<std::int32_t>(bf::header_bytes - bf::length_prefix_bytes)) {
    return invalid(fmt::format("batch_length {} is below the minimum {}", batch_length,
                               bf::header_bytes - bf::length_prefix_bytes));
  }
  const std::uint64_t total = static_cast<std::uint64_t>(batch_length) + bf::length_prefix_bytes;
  if (total > batch_bytes_max) {
    return make_unexpected(errc::batch_too_large,
                           fmt::format("batch of {} bytes exceeds the limit of {} bytes", total, batch_bytes_max));
  }
  return static_cast<std::size_t>(total);
}

expected<batch_view> batch_view::validate(std::span<const std::byte> bytes, const batch_limits& limits,
                                          std::uint32_t* crc_tail) {
  if (bytes.size() < bf::header_bytes) {
    return invalid(fmt::format("{} bytes: shorter than the {}-byte batch header", bytes.size(), bf::header_bytes));
  }
  RILL_TRY(total, size_from_prefix(bytes, limits.batch_bytes_max));
  if (total > bytes.size()) {
    return invalid(fmt::format("truncated: batch_length says {} bytes, {} present", total, bytes.size()));
  }
  batch_view view(bytes.first(total));
  if (view.magic() != bf::magic_v2) {
    return invalid(fmt::format("magic {} at byte {} (only magic 2 is supported)", view.magic(), bf::magic_at));
  }
  const std::uint32_t head = crc32c(bytes.data() + bf::crc_head_begin, bf::crc_head_end - bf::crc_head_begin);
  const std::uint32_t tail = crc32c(bytes.data() + bf::crc_head_end, total - bf::crc_head_end);
  const std::uint32_t computed = crc32c_combine(head, tail, total - bf::crc_head_end);
  if (computed != view.crc()) {
    return make_unexpected(errc::crc_mismatch,
                           fmt::format("batch at offset {}: stored crc {:#010x}, computed {:#010x}",
                                       static_cast<std::uint64_t>(view.base_offset().value()), view.crc(), computed));
  }
  if (crc_tail != nullptr) {
    *crc_tail = tail;
  }
  const std::uint16_t codec = view.codec_bits();
  if (codec != bf::codec_none && codec != bf::codec_zstd) {
    return make_unexpected(errc::unsupported_compression,
                           fmt::format("codec {} (rill stores none (0) and zstd (4))", codec));
  }
  if (limits.producer_fields) {
    RILL_TRY_VOID(check_producer_fields(view));
  }
  const std::int32_t count = view.records_count();
  const std::int32_t last_delta = view.last_offset_delta();
  if (count < 0 || static_cast<std::uint64_t>(count) > limits.records_max) {
    return invalid(fmt::format("records_count {} outside [0, {}]", count, limits.records_max));
  }
  if (last_delta < 0 || (count > 0 && last_delta < count - 1)) {
    return invalid(fmt::format("last_offset_delta {} with {} records", last_delta, count));
  }
  if (limits.dense_offsets && (count == 0 || last_delta != count - 1)) {
    return invalid(
        fmt::format("a producer batch needs records and last_offset_delta = records_count - 1 "
                    "(records_count {}, last_offset_delta {})",
                    count, last_delta));
  }
  if (!limits.check_records) {
    return view;
  }
  const auto region = view.records_region();
  if (codec == bf::codec_none) {
    RILL_TRY_VOID(walk_records(region, count, last_delta, limits.dense_offsets));
    return view;
  }
  // zstd: the produce path does not decompress; the frame's declared size is checked against the limit.
  auto declared = zstd_declared_size(region);
  if (!declared) {
    return invalid(fmt::format("zstd records region: {}", declared.error().detail()));
  }
  if (!declared->has_value()) {
    std::vector<std::byte> scratch;
    RILL_TRY_VOID(validate_records_deep(view, limits, scratch));
    return view;
  }
  if (**declared > limits.uncompressed_bytes_max) {
    return make_unexpected(errc::batch_too_large, fmt::format("zstd frame declares {} bytes, limit is {}", **declared,
                                                              limits.uncompressed_bytes_max));
  }
  if (static_cast<std::uint64_t>(count) * bf::record_bytes_min > **declared) {
    return invalid(fmt::format("records_count {} cannot fit in the declared {} decompressed bytes", count, **declared));
  }
  return view;
}

expected<void> check_producer_fields(const batch_view& view) {
  const std::uint16_t attributes = view.attributes();
  if ((attributes & bf::transactional) != 0) {
    return make_unexpected(errc::unsupported_attributes,
                           fmt::format("attributes {:#06x} at byte {}: the transactional bit (4) is set, and rill "
                                       "does not support transactions",
                                       attributes, bf::attributes_at));
  }
  if ((attributes & bf::control) != 0) {
    return make_unexpected(errc::unsupported_attributes,
                           fmt::format("attributes {:#06x} at byte {}: the control bit (5) is set, and control "
                                       "batches are written by brokers only",
                                       attributes, bf::attributes_at));
  }
  const std::int64_t id = view.producer_id();
  const std::int16_t epoch = view.producer_epoch();
  const std::int32_t sequence = view.base_sequence();
  if (id == -1) {
    if (epoch != -1) {
      return make_unexpected(
          errc::invalid_producer_fields,
          fmt::format("producer_id -1 (not idempotent) with producer_epoch {}: it must be -1", epoch));
    }
    if (sequence != -1) {
      return make_unexpected(
          errc::invalid_producer_fields,
          fmt::format("producer_id -1 (not idempotent) with base_sequence {}: it must be -1", sequence));
    }
    return {};
  }
  if (id < 0) {
    return make_unexpected(errc::invalid_producer_fields,
                           fmt::format("producer_id {}: it must be -1 (not idempotent) or >= 0", id));
  }
  if (epoch < 0) {
    return make_unexpected(
        errc::invalid_producer_fields,
        fmt::format("producer_id {} with producer_epoch {}: an idempotent producer's epoch is >= 0", id, epoch));
  }
  if (sequence < 0) {
    return make_unexpected(errc::invalid_producer_fields,
                           fmt::format("producer_id {} with base_sequence {}: an idempotent producer's sequence is "
                                       ">= 0",
                                       id, sequence));
  }
  return {};
}

batch_view batch_view::trusted(std::span<const std::byte> bytes) {
  RILL_ASSERT(bytes.size() >= bf::header_bytes);
  batch_view view(bytes);
  RILL_ASSERT(static_cast<std::size_t>(view.batch_length()) + bf::length_prefix_bytes == bytes.size(),
              "batch_length {} for {} bytes", view.batch_length(), bytes.size());
  return view;
}

expected<std::span<const std::byte>> records_of(const batch_view& view, std::uint64_t uncompressed_bytes_max,
                                                std::vector<std::byte>& scratch) {
  if (view.codec() == compression::none) {
    return view.records_region();
  }
  RILL_TRY_VOID(zstd_decompress(view.records_region(), uncompressed_bytes_max, scratch));
  return std::span<const std::byte>(scratch);
}

expected<void> validate_records_deep(const batch_view& view, const batch_limits& limits,
                                     std::vector<std::byte>& scratch) {
  RILL_TRY(region, records_of(view, limits.uncompressed_bytes_max, scratch));
  return walk_records(region, view.records_count(), view.last_offset_delta(), limits.dense_offsets);
}

expected<std::optional<record_view>> record_reader::next() {
  const std::byte* const end = region_.data() + region_.size();
  if (p_ == end) {
    return std::optional<record_view>{};
  }
  const std::size_t at = position();
  auto bad = [at](const char* what) { return invalid(fmt::format("record at records byte {}: {}", at, what)); };
  auto length = read_varint(p_, end);
  if (!length || *length < 0) {
    return bad("bad length varint");
  }
  if (static_cast<std::size_t>(end - p_) < static_cast<std::size_t>(*length)) {
    return bad("length runs past the end of the records");
  }
  const std::byte* rec_end = p_ + *length;
  if (p_ == rec_end) {
    return bad("empty record");
  }
  record_view rec;
  rec.attributes = static_cast<std::int8_t>(*p_++);
  auto ts = read_varlong(p_, rec_end);
  if (!ts) {
    return bad("bad timestamp_delta");
  }
  rec.timestamp_delta = *ts;
  auto od = read_varint(p_, rec_end);
  if (!od) {
    return bad("bad offset_delta");
  }
  rec.offset_delta = *od;
  auto read_bytes = [&](bool nullable) -> std::optional<std::optional<std::span<const std::byte>>> {
    auto n = read_varint(p_, rec_end);
    if (!n || *n < -1 || (*n == -1 && !nullable)) {
      return std::nullopt;
    }
    if (*n == -1) {
      return std::optional<std::span<const std::byte>>{};
    }
    if (static_cast<std::size_t>(rec_end - p_) < static_cast<std::size_t>(*n)) {
      return std::nullopt;
    }
    std::span<const std::byte> s(p_, static_cast<std::size_t>(*n));
    p_ += *n;
    return std::optional<std::span<const std::byte>>{s};
  };
  auto key = read_bytes(true);
  if (!key) {
    return bad("bad key");
  }
  rec.key = *key;
  auto value = read_bytes(true);
  if (!value) {
    return bad("bad value");
  }
  rec.value = *value;
  auto hc = read_varint(p_, rec_end);
  if (!hc || *hc < 0) {
    return bad("bad header count");
  }
  rec.header_count = *hc;
  const std::byte* headers_begin = p_;
  for (std::int32_t h = 0; h < *hc; ++h) {
    auto hk = read_bytes(false);
    if (!hk) {
      return bad("bad header key");
    }
    auto hv = read_bytes(true);
    if (!hv) {
      return bad("bad header value");
    }
  }
  rec.headers = std::span<const std::byte>(headers_begin, static_cast<std::size_t>(p_ - headers_begin));
  if (p_ != rec_end) {
    return bad("fields do not fill the record length");
  }
  return std::optional<record_view>{rec};
}

expected<std::optional<header_view>> header_reader::next() {
  if (remaining_ == 0) {
    return std::optional<header_view>{};
  }
  --remaining_;
  auto kn = read_varint(p_, end_);
  if (!kn || *kn < 0 || static_cast<std::size_t>(end_ - p_) < static_cast<std::size_t>(*kn)) {
    return invalid("bad header key");
  }
  header_view h;
  h.key = std::span<const std::byte>(p_, static_cast<std::size_t>(*kn));
  p_ += *kn;
  auto vn = read_varint(p_, end_);
  if (!vn || *vn < -1) {
    return invalid("bad header value");
  }
  if (*vn >= 0) {
    if (static_cast<std::size_t>(end_ - p_) < static_cast<std::size_t>(*vn)) {
      return invalid("header value runs past the record");
    }
    h.value = std::span<const std::byte>(p_, static_cast<std::size_t>(*vn));
    p_ += *vn;
  }
  return std::optional<header_view>{h};
}

void stamp_batch(std::span<std::byte> batch, offset_t base_offset, epoch_t epoch, timestamp_ms_t timestamp,
                 std::uint32_t crc_tail) noexcept {
  RILL_ASSERT(batch.size() >= bf::header_bytes);
  std::byte* b = batch.data();
  store_be<std::int64_t>(b + bf::base_offset_at, base_offset.value());
  store_be<std::int32_t>(b + bf::leader_epoch_at, epoch.value());
  const auto attributes =
      static_cast<std::uint16_t>(load_be<std::uint16_t>(b + bf::attributes_at) | bf::timestamp_log_append);
  store_be<std::uint16_t>(b + bf::attributes_at, attributes);
  store_be<std::int64_t>(b + bf::base_timestamp_at, timestamp.value());
  store_be<std::int64_t>(b + bf::max_timestamp_at, timestamp.value());
  const std::uint32_t head = crc32c(b + bf::crc_head_begin, bf::crc_head_end - bf::crc_head_begin);
  store_be<std::uint32_t>(b + bf::crc_at, crc32c_combine(head, crc_tail, batch.size() - bf::crc_head_end));
}

}  // namespace rill::storage
