#pragma once
// elapsed_clock: wall-clock milliseconds for the time stamps a primary puts into ops (record timestamps, consumer
// group sessions, metadata times), advanced by the monotonic clock so that a jump of the machine's wall clock moves
// nothing (issue 38, finding 8). It follows the wall clock while the two agree within `jump_min` (NTP slewing, small
// steps), and ignores a step larger than that: a jump forward does not age every session at once, a jump back does
// not make stamped time stand still until the wall clock catches up.
//
// Invariants: now_ms() never goes back; between two calls it advances by at most the monotonic time elapsed plus
// jump_min (a followed correction), and at least by nothing.
//
// Where it starts counting: the wall clock and the monotonic clock read together when the process started (so a
// replica created after a jump does not take the jumped time for the truth). Read-only once made: every thread may
// start its own elapsed_clock from the process's one.
//
// Contract: single-threaded (one per owner); the clock outlives it.
#include <chrono>
#include <cstdint>

#include "base/clock.h"

namespace rill {

class elapsed_clock {
 public:
  static constexpr std::chrono::milliseconds jump_min_default{2'000};

  struct anchor {
    std::int64_t wall_ms = 0;
    std::chrono::nanoseconds monotonic{0};
  };
  // The clock's readings now (a process takes its anchor once, at its start).
  [[nodiscard]] static anchor anchor_of(const clock& c) { return {c.wall_ms().value(), c.monotonic()}; }

  // Counting from `from` (the process's anchor).
  elapsed_clock(const clock& c, anchor from, std::chrono::milliseconds jump_min = jump_min_default);
  // Counting from now.
  explicit elapsed_clock(const clock& c, std::chrono::milliseconds jump_min = jump_min_default)
      : elapsed_clock(c, anchor_of(c), jump_min) {}

  // The time stamp now: ms since the Unix epoch.
  [[nodiscard]] std::int64_t now_ms();
  // Wall-clock steps ignored so far: each run of readings that disagreed by more than jump_min counts once.
  [[nodiscard]] std::uint64_t jumps() const noexcept { return jumps_; }

 private:
  const clock& clock_;
  std::chrono::milliseconds jump_min_;
  std::int64_t anchor_ms_ = 0;  // the time stamp at anchor_mono_
  std::chrono::nanoseconds anchor_mono_{0};
  std::int64_t last_ms_ = 0;  // the last stamp handed out
  std::uint64_t jumps_ = 0;
  bool jumped_ = false;  // the last reading disagreed (a step is counted once)
};

}  // namespace rill
