#include "storage/segment_index.h"

#include <algorithm>
#include <cstdint>

#include <fmt/core.h>

#include "base/endian.h"
#include "config/limits.h"
#include "storage/crc32c.h"
#include "storage/errc.h"
#include "storage/record_batch_format.h"
#include "storage/segment_index_format.h"

namespace rill::storage {
namespace sif = segment_index_format;

// Relations between the index format and the limits it serves.
static_assert(sif::entry_bytes == 4 + 4 + 8, "relative_offset u32, position u32, max_timestamp i64");
static_assert(limits::index_interval_bytes > 0);
static_assert(limits::index_interval_bytes < limits::segment_bytes_min, "a full segment has more than one entry");
static_assert(limits::segment_bytes_limit + limits::batch_bytes_limit <= UINT32_MAX,
              "positions are u32: a segment plus one batch must fit");
static_assert(limits::batch_bytes_min == batch_format::header_bytes, "the smallest batch is its header");

void segment_index::on_batch(std::uint32_t relative_offset, std::uint32_t position, std::uint32_t size,
                             timestamp_ms_t max_ts) {
  RILL_ASSERT(size > 0);
  if (entries_.empty()) {
    RILL_ASSERT(position == 0, "the first entry is the segment's first batch, at position 0 (not {})", position);
  }
  max_timestamp_ = std::max(max_timestamp_, max_ts);
  if (entries_.empty() || bytes_since_entry_ >= interval_bytes_) {
    if (!entries_.empty()) {
      RILL_ASSERT(entries_.back().relative_offset < relative_offset);
      RILL_ASSERT(entries_.back().position < position);
    }
    entries_.push_back(index_entry{relative_offset, position, max_timestamp_});
    bytes_since_entry_ = 0;
  }
  bytes_since_entry_ += size;
}

void segment_index::clear() noexcept {
  entries_.clear();
  bytes_since_entry_ = 0;
  max_timestamp_ = timestamp_ms_t(-1);
}

void segment_index::truncate(std::uint32_t position, std::uint32_t end_position) {
  RILL_ASSERT(end_position >= position);
  while (!entries_.empty() && entries_.back().position >= position) {
    entries_.pop_back();
  }
  if (entries_.empty()) {
    bytes_since_entry_ = 0;
    max_timestamp_ = timestamp_ms_t(-1);
    return;
  }
  RILL_ASSERT(entries_.back().position < position);
  // Bytes since the last kept entry: from its batch to the new end. The max timestamp is at least the entry's.
  bytes_since_entry_ = end_position - entries_.back().position;
  max_timestamp_ = entries_.back().max_timestamp;
}

std::optional<index_entry> segment_index::floor(std::uint32_t rel) const {
  if (entries_.empty()) {
    return std::nullopt;
  }
  auto it = std::upper_bound(entries_.begin(), entries_.end(), rel,
                             [](std::uint32_t r, const index_entry& e) { return r < e.relative_offset; });
  if (it == entries_.begin()) {
    return entries_.front();
  }
  return *(it - 1);
}

std::optional<index_entry> segment_index::scan_start_for_timestamp(timestamp_ms_t ts) const {
  if (entries_.empty()) {
    return std::nullopt;
  }
  auto it = std::lower_bound(entries_.begin(), entries_.end(), ts,
                             [](const index_entry& e, timestamp_ms_t t) { return e.max_timestamp < t; });
  if (it == entries_.end()) {
    return entries_.back();
  }
  if (it == entries_.begin()) {
    return entries_.front();
  }
  return *(it - 1);
}

std::vector<std::byte> segment_index::encode(std::size_t from) const {
  RILL_ASSERT(from <= entries_.size());
  std::vector<std::byte> out((entries_.size() - from) * sif::entry_bytes);
  std::byte* p = out.data();
  for (std::size_t i = from; i < entries_.size(); ++i, p += sif::entry_bytes) {
    store_be<std::uint32_t>(p, entries_[i].relative_offset);
    store_be<std::uint32_t>(p + 4, entries_[i].position);
    store_be<std::int64_t>(p + 8, entries_[i].max_timestamp.value());
  }
  return out;
}

std::vector<std::byte> segment_index::encode_sealed() const {
  auto out = encode(0);
  const std::uint32_t crc = crc32c(out.data(), out.size());
  out.resize(out.size() + sif::entry_bytes);
  std::byte* p = out.data() + out.size() - sif::entry_bytes;
  store_be<std::uint32_t>(p, sif::seal_marker);
  store_be<std::uint32_t>(p + 4, crc);
  store_be<std::int64_t>(p + 8, static_cast<std::int64_t>(entries_.size()));
  return out;
}

expected<segment_index> segment_index::decode_sealed(std::span<const std::byte> bytes, std::uint64_t log_bytes,
                                                     std::uint32_t interval_bytes) {
  auto corrupt = [](std::string what) { return make_unexpected(errc::corrupt_data, std::move(what)); };
  if (bytes.size() < sif::entry_bytes || bytes.size() % sif::entry_bytes != 0) {
    return corrupt(fmt::format("{} bytes is not a whole number of entries plus a seal entry", bytes.size()));
  }
  const std::size_t n = bytes.size() / sif::entry_bytes - 1;
  const std::byte* seal = bytes.data() + n * sif::entry_bytes;
  if (load_be<std::uint32_t>(seal) != sif::seal_marker) {
    return corrupt("no seal entry (the index was not completed)");
  }
  if (load_be<std::uint32_t>(seal + 4) != crc32c(bytes.data(), n * sif::entry_bytes) ||
      load_be<std::int64_t>(seal + 8) != static_cast<std::int64_t>(n)) {
    return corrupt("seal entry does not match the entries (crc or count)");
  }
  segment_index idx(interval_bytes);
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* p = bytes.data() + i * sif::entry_bytes;
    index_entry e{load_be<std::uint32_t>(p), load_be<std::uint32_t>(p + 4),
                  timestamp_ms_t(load_be<std::int64_t>(p + 8))};
    const bool first_ok = i > 0 || e.position == 0;
    const bool order_ok =
        i == 0 || (e.relative_offset > idx.entries_.back().relative_offset &&
                   e.position > idx.entries_.back().position && e.max_timestamp >= idx.entries_.back().max_timestamp);
    if (!first_ok || !order_ok || e.position >= log_bytes) {
      return corrupt(fmt::format("entry {} (relative offset {}, position {}) out of order or outside the log", i,
                                 e.relative_offset, e.position));
    }
    idx.entries_.push_back(e);
  }
  if (!idx.entries_.empty()) {
    idx.max_timestamp_ = idx.entries_.back().max_timestamp;
  }
  return idx;
}

}  // namespace rill::storage
