#pragma once
// rill::error and rill::expected<T>: how operating errors cross layer boundaries.
//
// Contract (style rule 4): storage/, consensus/ and net/ never throw across their boundary. A function that can fail
// for operating reasons (bad input, I/O failure, corruption, full disk) returns expected<T>; a programmer error is an
// RILL_ASSERT. An error carries a std::error_code from its layer's category (e.g. storage::errc) and a human detail
// naming what failed (the file, the byte position, the key and its allowed range).
//
// std::expected is C++23; this is the small subset rill needs.
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/assert.h"

namespace rill {

class error {
 public:
  error() = default;
  error(std::error_code code, std::string detail) : code_(code), detail_(std::move(detail)) {}

  [[nodiscard]] std::error_code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }
  // "<category message>: <detail>", for logs and CLI output.
  [[nodiscard]] std::string message() const;

  friend bool operator==(const error& e, std::error_code c) noexcept { return e.code_ == c; }

 private:
  std::error_code code_;
  std::string detail_;
};

// Wraps an error for returning from a function whose result is expected<T>.
struct unexpected {
  error value;
  explicit unexpected(error e) : value(std::move(e)) {}
  unexpected(std::error_code c, std::string detail) : value(c, std::move(detail)) {}
};

template <class T>
class [[nodiscard]] expected {
  static_assert(!std::is_reference_v<T>);
  static_assert(!std::is_same_v<std::remove_cv_t<T>, rill::error>);

 public:
  using value_type = T;
  template <class U = T>
  requires std::is_constructible_v<T, U&&> expected(U&& v)
      : storage_(std::in_place_index<0>, std::forward<U>(v)) {}                     // NOLINT: implicit by design
  expected(unexpected u) : storage_(std::in_place_index<1>, std::move(u.value)) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return storage_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    RILL_ASSERT(has_value(), "expected holds an error: {}", std::get<1>(storage_).message());
    return std::get<0>(storage_);
  }
  const T& value() const& {
    RILL_ASSERT(has_value(), "expected holds an error: {}", std::get<1>(storage_).message());
    return std::get<0>(storage_);
  }
  T&& value() && {
    RILL_ASSERT(has_value(), "expected holds an error: {}", std::get<1>(storage_).message());
    return std::get<0>(std::move(storage_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const rill::error& error() const& {
    RILL_ASSERT(!has_value());
    return std::get<1>(storage_);
  }
  rill::error&& error() && {
    RILL_ASSERT(!has_value());
    return std::get<1>(std::move(storage_));
  }

 private:
  std::variant<T, rill::error> storage_;
};

template <>
class [[nodiscard]] expected<void> {
 public:
  using value_type = void;
  expected() = default;
  expected(unexpected u) : error_(std::move(u.value)), failed_(true) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const { RILL_ASSERT(has_value(), "expected holds an error: {}", error_.message()); }

  const rill::error& error() const& {
    RILL_ASSERT(failed_);
    return error_;
  }
  rill::error&& error() && {
    RILL_ASSERT(failed_);
    return std::move(error_);
  }

 private:
  rill::error error_;
  bool failed_ = false;
};

// Propagates an error from an expected<U> into the enclosing function's expected<T>.
#define RILL_TRY(var, ...)                                       \
  auto var##_result_ = (__VA_ARGS__);                            \
  if (!var##_result_) {                                          \
    return ::rill::unexpected(std::move(var##_result_).error()); \
  }                                                              \
  auto var = std::move(var##_result_).value()

#define RILL_TRY_VOID(...)                                            \
  do {                                                                \
    auto rill_try_result_ = (__VA_ARGS__);                            \
    if (!rill_try_result_) {                                          \
      return ::rill::unexpected(std::move(rill_try_result_).error()); \
    }                                                                 \
  } while (0)

// The coroutine forms of the above, for task<expected<T>> bodies.
#define RILL_CO_TRY(var, ...)                                       \
  auto var##_result_ = (__VA_ARGS__);                               \
  if (!var##_result_) {                                             \
    co_return ::rill::unexpected(std::move(var##_result_).error()); \
  }                                                                 \
  auto var = std::move(var##_result_).value()

#define RILL_CO_TRY_VOID(...)                                            \
  do {                                                                   \
    auto rill_try_result_ = (__VA_ARGS__);                               \
    if (!rill_try_result_) {                                             \
      co_return ::rill::unexpected(std::move(rill_try_result_).error()); \
    }                                                                    \
  } while (0)

}  // namespace rill
