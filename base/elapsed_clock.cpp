#include "base/elapsed_clock.h"

#include <algorithm>

#include "base/assert.h"

namespace rill {

elapsed_clock::elapsed_clock(const clock& c, anchor from, std::chrono::milliseconds jump_min)
    : clock_(c), jump_min_(jump_min), anchor_ms_(from.wall_ms), anchor_mono_(from.monotonic), last_ms_(from.wall_ms) {
  RILL_ASSERT(jump_min_.count() > 0);
  RILL_ASSERT(from.monotonic <= c.monotonic(), "an anchor from the future");
}

std::int64_t elapsed_clock::now_ms() {
  const auto mono = clock_.monotonic();
  const std::int64_t derived =
      anchor_ms_ + std::chrono::duration_cast<std::chrono::milliseconds>(mono - anchor_mono_).count();
  const std::int64_t wall = clock_.wall_ms().value();
  const std::int64_t off = wall > derived ? wall - derived : derived - wall;
  if (off <= jump_min_.count()) {
    anchor_ms_ = wall;  // in agreement: follow the wall clock (its small corrections too)
    anchor_mono_ = mono;
    jumped_ = false;
  } else {
    if (!jumped_) {
      ++jumps_;
    }
    jumped_ = true;  // a step: keep counting elapsed time from the last agreement
  }
  last_ms_ = std::max(last_ms_, off <= jump_min_.count() ? wall : derived);
  return last_ms_;
}

}  // namespace rill
