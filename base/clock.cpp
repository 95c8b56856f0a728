#include "base/clock.h"

namespace rill {
timestamp_ms_t system_clock_source::wall_ms() const {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return timestamp_ms_t(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}
std::chrono::nanoseconds system_clock_source::monotonic() const {
  return std::chrono::steady_clock::now().time_since_epoch();
}
}  // namespace rill
