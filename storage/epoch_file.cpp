#include "storage/epoch_file.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/errc.h"

namespace rill::storage {
namespace {
constexpr std::uint32_t magic = 0x52455031;  // "REP1"
constexpr std::uint16_t version = 1;
constexpr std::size_t head_bytes = 12;
constexpr std::size_t entry_bytes = 16;
}  // namespace

bool epoch_history::assign(epoch_t epoch, offset_t start) {
  if (!entries_.empty()) {
    const auto& last = entries_.back();
    if (epoch == last.epoch) {
      return true;
    }
    if (epoch < last.epoch || start < last.start_offset) {
      return false;
    }
    if (start == last.start_offset) {
      // The previous epoch wrote nothing: the new one replaces it.
      entries_.back() = epoch_entry{epoch, start};
      return true;
    }
  }
  entries_.push_back(epoch_entry{epoch, start});
  if (entries_.size() > entries_max) {
    entries_.erase(entries_.begin());
  }
  return true;
}

void epoch_history::truncate_after(offset_t last_kept) {
  while (!entries_.empty() && entries_.back().start_offset > last_kept) {
    entries_.pop_back();
  }
}

void epoch_history::truncate_before(offset_t log_start) {
  // Find the last entry starting at or before log_start; drop everything before it.
  std::size_t keep_from = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].start_offset <= log_start) {
      keep_from = i;
    }
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(keep_from));
}

std::optional<epoch_t> epoch_history::epoch_for(offset_t offset) const {
  std::optional<epoch_t> found;
  for (const auto& e : entries_) {
    if (e.start_offset > offset) {
      break;
    }
    found = e.epoch;
  }
  return found;
}

std::optional<offset_t> epoch_history::end_offset_for(epoch_t epoch, offset_t log_end) const {
  if (entries_.empty() || epoch < entries_.front().epoch) {
    return std::nullopt;
  }
  for (const auto& e : entries_) {
    if (e.epoch > epoch) {
      return e.start_offset;
    }
  }
  return log_end;
}

std::optional<epoch_entry> epoch_history::latest() const {
  if (entries_.empty()) {
    return std::nullopt;
  }
  return entries_.back();
}

std::vector<std::byte> epoch_history::encode() const {
  std::vector<std::byte> out(head_bytes + entries_.size() * entry_bytes + 4);
  std::byte* p = out.data();
  store_be<std::uint32_t>(p, magic);
  store_be<std::uint16_t>(p + 4, version);
  store_be<std::uint16_t>(p + 6, 0);
  store_be<std::uint32_t>(p + 8, static_cast<std::uint32_t>(entries_.size()));
  p += head_bytes;
  for (const auto& e : entries_) {
    store_be<std::int32_t>(p, e.epoch.value());
    store_be<std::uint32_t>(p + 4, 0);
    store_be<std::int64_t>(p + 8, e.start_offset.value());
    p += entry_bytes;
  }
  store_be<std::uint32_t>(p, crc32c(out.data(), out.size() - 4));
  return out;
}

expected<epoch_history> epoch_history::decode(std::span<const std::byte> bytes) {
  auto corrupt = [](std::string what) { return make_unexpected(errc::corrupt_data, "leader-epochs: " + what); };
  if (bytes.size() < head_bytes + 4) {
    return corrupt(fmt::format("{} bytes, shorter than an empty file", bytes.size()));
  }
  if (load_be<std::uint32_t>(bytes.data()) != magic || load_be<std::uint16_t>(bytes.data() + 4) != version) {
    return corrupt("bad magic or version");
  }
  const std::uint32_t count = load_be<std::uint32_t>(bytes.data() + 8);
  if (count > entries_max || bytes.size() != head_bytes + count * entry_bytes + 4) {
    return corrupt(fmt::format("count {} does not match {} bytes", count, bytes.size()));
  }
  if (load_be<std::uint32_t>(bytes.data() + bytes.size() - 4) != crc32c(bytes.data(), bytes.size() - 4)) {
    return corrupt("crc mismatch");
  }
  epoch_history h;
  const std::byte* p = bytes.data() + head_bytes;
  for (std::uint32_t i = 0; i < count; ++i, p += entry_bytes) {
    const epoch_t epoch(load_be<std::int32_t>(p));
    const offset_t start(load_be<std::int64_t>(p + 8));
    if (!h.entries_.empty() && (epoch <= h.entries_.back().epoch || start < h.entries_.back().start_offset)) {
      return corrupt(fmt::format("entry {} (epoch {}, start {}) out of order", i, epoch.value(), start.value()));
    }
    h.entries_.push_back(epoch_entry{epoch, start});
  }
  return h;
}

}  // namespace rill::storage
