// validated_batches: one validation per produced batch, in place, before the one copy (see the header).
#include "storage/validated_batches.h"

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"

namespace rill::storage {

batch_limits producer_batch_limits(std::uint64_t batch_bytes_max) {
  batch_limits l;
  l.batch_bytes_max = batch_bytes_max;
  l.dense_offsets = true;
  l.producer_fields = true;
  l.check_records = true;
  return l;
}

expected<void> validated_batches::do_validate(std::span<const std::byte> bytes, std::uint64_t batch_bytes_max) {
  RILL_ASSERT(batches_.empty());
  if (bytes.empty()) {
    return make_unexpected(errc::invalid_batch, "empty produce request: no batch");
  }
  const batch_limits limits = producer_batch_limits(batch_bytes_max);
  std::vector<validated_batch> out;
  std::uint64_t records = 0;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::uint32_t crc_tail = 0;
    auto v = batch_view::validate(bytes.subspan(pos), limits, &crc_tail);
    if (!v) {
      auto e = std::move(v).error();
      return unexpected(
          rill::error(e.code(), fmt::format("batch {} (byte {} of the request): {}", out.size(), pos, e.detail())));
    }
    RILL_ASSERT(v->size() <= bytes.size() - pos);
    RILL_ASSERT(v->records_count() >= 1, "dense offsets: validate refused an empty batch");
    RILL_ASSERT(v->last_offset_delta() == v->records_count() - 1, "dense offsets");
    validated_batch b;
    b.position = pos;
    b.size = static_cast<std::uint32_t>(v->size());
    b.records = static_cast<std::uint32_t>(v->records_count());
    b.crc_tail = crc_tail;
    b.producer_id = v->producer_id();
    b.producer_epoch = v->producer_epoch();
    b.base_sequence = v->base_sequence();
    records += b.records;
    out.push_back(b);
    pos += v->size();
  }
  RILL_ASSERT(pos == bytes.size());
  batches_ = std::move(out);
  records_ = records;
  return {};
}

expected<validated_batches> validated_batches::validate(std::span<const std::byte> bytes,
                                                        std::uint64_t batch_bytes_max) {
  validated_batches v;
  RILL_TRY_VOID(v.do_validate(bytes, batch_bytes_max));
  v.bytes_.assign(bytes.begin(), bytes.end());  // the one copy, of bytes that all passed
  v.check_invariants();
  return v;
}

expected<validated_batches> validated_batches::validate(std::vector<std::byte> bytes, std::uint64_t batch_bytes_max) {
  validated_batches v;
  RILL_TRY_VOID(v.do_validate(bytes, batch_bytes_max));
  v.bytes_ = std::move(bytes);
  v.check_invariants();
  return v;
}

validated_batches validated_batches::subset(std::span<const std::size_t> indexes) const {
  RILL_ASSERT(!indexes.empty());
  validated_batches out;
  std::size_t total = 0;
  for (std::size_t k = 0; k < indexes.size(); ++k) {
    RILL_ASSERT(indexes[k] < batches_.size(), "index {} of {} batches", indexes[k], batches_.size());
    RILL_ASSERT(k == 0 || indexes[k - 1] < indexes[k], "indexes ascend");
    total += batches_[indexes[k]].size;
  }
  out.bytes_.reserve(total);
  for (std::size_t i : indexes) {
    validated_batch b = batches_[i];
    const auto from = bytes_.begin() + static_cast<std::ptrdiff_t>(b.position);
    b.position = out.bytes_.size();
    out.bytes_.insert(out.bytes_.end(), from, from + b.size);
    out.records_ += b.records;
    out.batches_.push_back(b);
  }
  out.check_invariants();
  return out;
}

validated_batches::parts validated_batches::release() && noexcept {
  parts p{std::move(bytes_), std::move(batches_), records_};
  bytes_.clear();
  batches_.clear();
  records_ = 0;
  return p;
}

void validated_batches::check_invariants() const {
  RILL_ASSERT(!batches_.empty(), "a validated request has a batch");
  std::size_t pos = 0;
  std::uint64_t records = 0;
  for (const auto& b : batches_) {
    RILL_ASSERT(b.position == pos, "batch at byte {}, expected at {}", b.position, pos);
    RILL_ASSERT(b.size >= batch_format::header_bytes);
    RILL_ASSERT(b.records >= 1);
    pos += b.size;
    records += b.records;
  }
  RILL_ASSERT(pos == bytes_.size(), "batches of {} bytes in {} bytes", pos, bytes_.size());
  RILL_ASSERT(records == records_);
}

}  // namespace rill::storage
