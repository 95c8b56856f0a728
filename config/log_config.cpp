#include "config/log_config.h"

#include <fmt/core.h>

#include "config/errc.h"

namespace rill::config {

const char* to_string(durability_mode m) noexcept {
  switch (m) {
    case durability_mode::sync_before_ack:
      return "sync_before_ack";
    case durability_mode::every_records:
      return "every_records";
    case durability_mode::every_ms:
      return "every_ms";
  }
  return "unknown";
}

namespace {
expected<void> check_range(const char* key, std::uint64_t value, std::uint64_t lo, std::uint64_t hi) {
  if (value < lo || value > hi) {
    return unexpected(make_error_code(errc::out_of_range),
                      fmt::format("{} = {}: allowed range is [{}, {}]", key, value, lo, hi));
  }
  return {};
}
}  // namespace

expected<void> validate(const log_config& c) {
  constexpr std::uint64_t year_ms = 365ull * 24 * 3600 * 1000;
  RILL_TRY_VOID(check_range("segment_bytes", c.segment_bytes, limits::segment_bytes_min, limits::segment_bytes_limit));
  RILL_TRY_VOID(check_range("segment_ms", c.segment_ms, 0, year_ms));
  RILL_TRY_VOID(check_range("retention_ms", c.retention_ms, 0, 100 * year_ms));
  RILL_TRY_VOID(check_range("retention_bytes", c.retention_bytes, 0, std::uint64_t{1} << 60));
  RILL_TRY_VOID(
      check_range("max_message_bytes", c.max_message_bytes, limits::batch_bytes_min, limits::batch_bytes_limit));
  RILL_TRY_VOID(check_range("sync_every_records", c.sync_every_records, 1, 1'000'000'000));
  RILL_TRY_VOID(check_range("sync_every_ms", c.sync_every_ms, 1, 3'600'000));
  RILL_TRY_VOID(check_range("flush_bytes_max", c.flush_bytes_max, 4 * limits::kib, limits::flush_bytes_limit));
  RILL_TRY_VOID(check_range("pending_bytes_max", c.pending_bytes_max, c.flush_bytes_max, 1 * limits::gib));
  RILL_TRY_VOID(check_range("preallocate_bytes", c.preallocate_bytes, 0, 256 * limits::mib));
  RILL_TRY_VOID(check_range("read_window_bytes", c.read_window_bytes, limits::read_window_bytes_min,
                            limits::read_window_bytes_limit));
  RILL_TRY_VOID(check_range("delete_step_bytes", c.delete_step_bytes, limits::delete_step_bytes_min,
                            limits::delete_step_bytes_limit));
  RILL_TRY_VOID(check_range("superblock_interval_records", c.superblock_interval_records, 1, 1'000'000'000));
  // max_message_bytes > segment_bytes is allowed: such a batch gets a segment of its own.
  return {};
}

bool changes_in_place(const log_config& from, const log_config& to) {
  log_config same = to;
  same.retention_ms = from.retention_ms;
  same.retention_bytes = from.retention_bytes;
  same.segment_ms = from.segment_ms;
  same.segment_bytes = from.segment_bytes;
  return same == from;
}

}  // namespace rill::config
