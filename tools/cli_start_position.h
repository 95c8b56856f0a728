#pragma once
// Where `rill consume` starts reading a partition: --from and --since.
//
//   --from first          the oldest message kept
//   --from last           the last message there is (and what follows)
//   --from end            only messages produced after the command starts (each partition's high watermark then)
//   --from next           a named consumer's stored offset (first when it has none)
//   --from offset:N       offset N
//   --from timestamp:T    the first message at or after T: milliseconds since the epoch, or ISO-8601 with a zone
//                         (2026-12-02T08:00:00Z, 2026-12-02T09:00:00.250+01:00)
//   --since D             the first message at or after now - D; D is a number and a unit (ms, s, m, h, d), or
//                         several (1h30m)
#include <chrono>
#include <cstdint>
#include <string_view>

#include "base/expected.h"
#include "net/proto/rill.pb.h"

namespace rill::cli {

struct start_position {
  enum class kind : std::uint8_t { first, last, end, next, offset, timestamp };
  kind at = kind::first;
  std::uint64_t value = 0;  // offset: the offset; timestamp: ms since the epoch
};

// Errors (std::errc::invalid_argument) name the flag, the value and what is allowed.
expected<start_position> parse_from(std::string_view from);
expected<start_position> parse_since(std::string_view since, std::chrono::system_clock::time_point now);

// ISO-8601 date and time with a zone (Z or +HH:MM / -HH:MM), seconds optional fraction: ms since the epoch.
expected<std::int64_t> parse_iso_time_ms(std::string_view text);
// "90s", "1h", "2d", "500ms", "1h30m".
expected<std::chrono::milliseconds> parse_duration(std::string_view text);

// The poll strategy of a start position; `end` must have been resolved to an offset first (it needs the partition's
// high watermark at start).
proto::PollStrategy poll_strategy_for(const start_position& p);

}  // namespace rill::cli
