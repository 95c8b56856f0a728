#include "base/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/assert.h"

namespace rill {

std::size_t histogram::bucket_of(std::uint64_t value) noexcept {
  constexpr std::uint64_t linear = std::uint64_t{1} << sub_bits;
  if (value < linear) {
    return static_cast<std::size_t>(value);
  }
  const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(value));  // 2^e <= value < 2^(e+1), e >= sub_bits
  const std::uint64_t sub = (value >> (e - sub_bits)) - linear;             // [0, 128)
  return static_cast<std::size_t>(linear + (std::uint64_t{e} - sub_bits) * linear + sub);
}

std::uint64_t histogram::bucket_top(std::size_t bucket) noexcept {
  constexpr std::uint64_t linear = std::uint64_t{1} << sub_bits;
  if (bucket < linear) {
    return bucket;
  }
  const std::uint64_t shift = (bucket - linear) / linear;  // e - sub_bits
  const std::uint64_t sub = (bucket - linear) % linear;
  const std::uint64_t next = linear + sub + 1;  // the first value of the next bucket, before the shift
  if (shift + static_cast<std::uint64_t>(std::bit_width(next)) > 64) {
    return std::numeric_limits<std::uint64_t>::max();  // the last bucket ends at the top of the range
  }
  return (next << shift) - 1;
}

void histogram::record(std::uint64_t value, std::uint64_t times) noexcept {
  if (times == 0) {
    return;
  }
  counts_[bucket_of(value)] += times;
  count_ += times;
  sum_ += static_cast<long double>(value) * static_cast<long double>(times);
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void histogram::merge(const histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) {
    counts_[i] += other.counts_[i];
  }
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void histogram::reset() noexcept {
  *this = histogram{};
}

std::uint64_t histogram::percentile(double p) const noexcept {
  if (count_ == 0) {
    return 0;
  }
  RILL_ASSERT(p >= 0.0 && p <= 100.0, "percentile {} outside [0, 100]", p);
  if (p == 0.0) {
    return min_;
  }
  const auto wanted =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += counts_[i];
    if (seen >= wanted) {
      return std::clamp(bucket_top(i), min_, max_);
    }
  }
  return max_;
}

}  // namespace rill
