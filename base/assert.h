#pragma once
// RILL_ASSERT: invariants that stay on in every build mode (Release included).
//
// A failed assertion is a programmer error: it prints the condition, the location and an optional fmt-style message
// to stderr and aborts. Operating errors (bad input, failed I/O, corruption on disk) are never asserted: they are
// returned as rill::error values (base/expected.h). Keep conditions simple; split compound ones so the report says
// which half failed.
#include <fmt/core.h>

namespace rill::detail {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* message) noexcept;

template <class... Args>
[[noreturn]] void assert_fail_fmt(const char* expr, const char* file, int line, fmt::format_string<Args...> f,
                                  Args&&... args) noexcept {
  auto message = fmt::format(f, std::forward<Args>(args)...);
  assert_fail(expr, file, line, message.c_str());
}
[[noreturn]] inline void assert_fail_fmt(const char* expr, const char* file, int line) noexcept {
  assert_fail(expr, file, line, "");
}
}  // namespace rill::detail

#define RILL_ASSERT(cond, ...)                                                               \
  do {                                                                                       \
    if (__builtin_expect(!(cond), 0)) {                                                      \
      ::rill::detail::assert_fail_fmt(#cond, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
    }                                                                                        \
  } while (0)

#define RILL_UNREACHABLE(...) \
  ::rill::detail::assert_fail_fmt("unreachable", __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
