#pragma once
// Helpers shared by rill's Boost.Test suites.
#include <boost/test/unit_test.hpp>

#include <string>

// Requires an expected<T> to hold a value; on failure the report carries the error's message.
#define RILL_REQUIRE_OK(x)                                                                    \
  do {                                                                                        \
    const auto& rill_ok_ = (x);                                                               \
    BOOST_REQUIRE_MESSAGE(rill_ok_.has_value(),                                               \
                          (rill_ok_.has_value() ? std::string() : rill_ok_.error().message())); \
  } while (0)

#define RILL_CHECK_OK(x)                                                                    \
  do {                                                                                      \
    const auto& rill_ok_ = (x);                                                             \
    BOOST_CHECK_MESSAGE(rill_ok_.has_value(),                                               \
                        (rill_ok_.has_value() ? std::string() : rill_ok_.error().message())); \
  } while (0)
