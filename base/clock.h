#pragma once
// Time as an injected dependency (style rule 5): storage and consensus code never read the system clock; they ask
// a clock&. Production passes system_clock_source; tests and the simulator pass manual_clock and move it by hand.
#include <chrono>
#include <cstdint>

#include "base/strong.h"

namespace rill {

class clock {
 public:
  virtual ~clock() = default;
  // Wall-clock time in ms since the Unix epoch: record timestamps and retention ages. May jump; callers that need
  // monotonic record timestamps enforce it themselves (the partition log does).
  [[nodiscard]] virtual timestamp_ms_t wall_ms() const = 0;
  // Monotonic time: intervals, deadlines and segment ages. Never goes back.
  [[nodiscard]] virtual std::chrono::nanoseconds monotonic() const = 0;
};

class system_clock_source final : public clock {
 public:
  [[nodiscard]] timestamp_ms_t wall_ms() const override;
  [[nodiscard]] std::chrono::nanoseconds monotonic() const override;
};

// A clock that moves only when told to. Both readings start at the given origin and advance together.
class manual_clock final : public clock {
 public:
  explicit manual_clock(timestamp_ms_t wall_origin = timestamp_ms_t(1'700'000'000'000)) : wall_origin_(wall_origin) {}
  [[nodiscard]] timestamp_ms_t wall_ms() const override {
    return wall_origin_ + std::chrono::duration_cast<std::chrono::milliseconds>(now_).count() + wall_skew_ms_;
  }
  [[nodiscard]] std::chrono::nanoseconds monotonic() const override { return now_; }
  void advance(std::chrono::nanoseconds d) { now_ += d; }
  // Moves only the wall clock (as NTP may), to test that record timestamps stay monotonic.
  void skew_wall_ms(std::int64_t delta_ms) { wall_skew_ms_ += delta_ms; }

 private:
  timestamp_ms_t wall_origin_;
  std::chrono::nanoseconds now_{0};
  std::int64_t wall_skew_ms_ = 0;
};

}  // namespace rill
