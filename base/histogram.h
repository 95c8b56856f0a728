#pragma once
// histogram: a fixed-size, log-linear histogram of unsigned values (latencies in nanoseconds, sizes in bytes) for
// benchmarks and metrics. Every value is counted (not a sample); memory does not grow with the count.
//
// Buckets: values below 128 each have their own bucket (exact); above, each power of two [2^e, 2^(e+1)) is split
// into 128 equal buckets, so a reported value is within 1/128 (under 0.8%) above the true one. 7,424 buckets cover
// the whole u64 range (58 KiB). min, max and count are exact; the mean is a long double.
//
// Contract: percentile(p) for p in [0, 100] returns the smallest bucket bound below or at which at least p% of the
// recorded values fall, clamped to [min, max] (so percentile(100) == max, percentile(0) == min); 0 when empty. Not
// thread-safe: one per thread, then merge().
#include <array>
#include <cstdint>
#include <limits>

namespace rill {

class histogram {
 public:
  static constexpr unsigned sub_bits = 7;  // 128 buckets per power of two
  static constexpr std::size_t bucket_count = (64 - sub_bits + 1) << sub_bits;

  void record(std::uint64_t value, std::uint64_t times = 1) noexcept;
  void merge(const histogram& other) noexcept;
  void reset() noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  [[nodiscard]] double mean() const noexcept {
    return count_ == 0 ? 0.0 : static_cast<double>(sum_ / static_cast<long double>(count_));
  }
  [[nodiscard]] std::uint64_t percentile(double p) const noexcept;

  // The bucket a value falls in, and the largest value of a bucket (exposed for tests).
  [[nodiscard]] static std::size_t bucket_of(std::uint64_t value) noexcept;
  [[nodiscard]] static std::uint64_t bucket_top(std::size_t bucket) noexcept;

 private:
  std::array<std::uint64_t, bucket_count> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_ = 0;
  long double sum_ = 0;  // for the mean only (exact enough: 64 bits of mantissa)
};

}  // namespace rill
