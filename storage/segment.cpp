#include "storage/segment.h"

#include <fmt/core.h>

#include "storage/file_ops.h"

namespace rill::storage {

std::string segment_name(offset_t base) {
  RILL_ASSERT(base.value() >= 0, "segment base offset {}", base.value());
  return fmt::format("{:020}", base.value());
}

std::optional<std::pair<offset_t, std::string>> parse_segment_file_name(const std::string& name) {
  if (name.size() < 22 || name[20] != '.') {
    return std::nullopt;
  }
  std::int64_t v = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') {
      return std::nullopt;
    }
    const std::int64_t digit = name[i] - '0';
    if (v > (INT64_MAX - digit) / 10) {
      return std::nullopt;
    }
    v = v * 10 + digit;
  }
  return std::make_pair(offset_t(v), name.substr(21));
}

segment::segment(std::string dir_path, offset_t base, std::uint32_t index_interval_bytes)
    : dir(std::move(dir_path)), base_offset(base), next_offset(base), index(index_interval_bytes) {
  RILL_ASSERT(!dir.empty());
  RILL_ASSERT(base.value() >= 0, "segment base offset {}", base.value());
  RILL_ASSERT(index_interval_bytes > 0);
}

std::string segment::log_path() const {
  return join_path(dir, segment_name(base_offset) + ".log");
}
std::string segment::index_path() const {
  return join_path(dir, segment_name(base_offset) + ".index");
}
std::string segment::meta_path() const {
  return join_path(dir, segment_name(base_offset) + ".meta");
}

}  // namespace rill::storage
