#pragma once
// strong<T, Tag>: a number with a meaning the compiler checks. Offsets, file positions, timestamps and epochs are
// distinct types, so passing a byte position where an offset is expected does not compile.
//
// Arithmetic is deliberately narrow: a strong value plus or minus a raw delta gives the same strong type; the
// difference of two strong values is a raw T. Nothing converts implicitly to or from T.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace rill {

template <class T, class Tag>
class strong {
 public:
  using value_type = T;
  constexpr strong() noexcept = default;
  constexpr explicit strong(T v) noexcept : value_(v) {}

  [[nodiscard]] constexpr T value() const noexcept { return value_; }

  constexpr auto operator<=>(const strong&) const noexcept = default;

  constexpr strong operator+(T delta) const noexcept { return strong(static_cast<T>(value_ + delta)); }
  constexpr strong operator-(T delta) const noexcept { return strong(static_cast<T>(value_ - delta)); }
  constexpr T operator-(strong other) const noexcept { return static_cast<T>(value_ - other.value_); }
  constexpr strong& operator+=(T delta) noexcept {
    value_ = static_cast<T>(value_ + delta);
    return *this;
  }
  constexpr strong& operator++() noexcept {
    ++value_;
    return *this;
  }

 private:
  T value_{};
};

// The log offset of a record: dense per partition at append (compaction later leaves gaps).
using offset_t = strong<std::int64_t, struct offset_tag>;
// A byte position inside one file.
using file_pos_t = strong<std::uint64_t, struct file_pos_tag>;
// Milliseconds since the Unix epoch, as stored in record batches.
using timestamp_ms_t = strong<std::int64_t, struct timestamp_ms_tag>;
// A partition leader epoch (Kafka's partition_leader_epoch; a VSR view in a cluster).
using epoch_t = strong<std::int32_t, struct epoch_tag>;

}  // namespace rill

template <class T, class Tag>
struct std::hash<rill::strong<T, Tag>> {
  std::size_t operator()(rill::strong<T, Tag> v) const noexcept { return std::hash<T>{}(v.value()); }
};
