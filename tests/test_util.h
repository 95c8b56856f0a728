#pragma once
// Helpers shared by rill's Boost.Test suites.
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>

#include "base/strong.h"

namespace rill {
// Lets BOOST_TEST print strong numbers.
template <class T, class Tag>
std::ostream& boost_test_print_type(std::ostream& os, const strong<T, Tag>& v) {
  return os << v.value();
}
}  // namespace rill

// Requires an expected<T> to hold a value; on failure the report carries the error's message.
#define RILL_REQUIRE_OK(x)                                                                                            \
  do {                                                                                                                \
    const auto& rill_ok_ = (x);                                                                                       \
    BOOST_REQUIRE_MESSAGE(rill_ok_.has_value(), (rill_ok_.has_value() ? std::string() : rill_ok_.error().message())); \
  } while (0)

#define RILL_CHECK_OK(x)                                                                                            \
  do {                                                                                                              \
    const auto& rill_ok_ = (x);                                                                                     \
    BOOST_CHECK_MESSAGE(rill_ok_.has_value(), (rill_ok_.has_value() ? std::string() : rill_ok_.error().message())); \
  } while (0)
