#include "base/assert.h"

#include <cstdio>
#include <cstdlib>

namespace rill::detail {
void assert_fail(const char* expr, const char* file, int line, const char* message) noexcept {
  std::fprintf(stderr, "rill: assertion failed: %s at %s:%d%s%s\n", expr, file, line, message[0] ? ": " : "", message);
  std::fflush(stderr);
  std::abort();
}
}  // namespace rill::detail
