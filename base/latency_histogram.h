#pragma once
// latency_histogram: a histogram of durations with fixed, Prometheus-style buckets (1 us to 10 s, 1-2-5 steps, and
// +Inf), written by one thread and read by any number of others without locks: every count is an atomic updated
// with relaxed load + store by its single writer (no read-modify-write instruction on the hot path), and readers
// load them relaxed. A reader may see a bucket count and a sum from slightly different moments; each value is a
// valid past value, and counts only grow.
//
// Contract: record() from one thread at a time (the owning actor's); everything else from anywhere.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace rill {

class latency_histogram {
 public:
  // Upper bounds in nanoseconds of the finite buckets (Prometheus `le`), ascending.
  static constexpr std::array<std::uint64_t, 22> bounds_ns = {
      1'000,       2'000,       5'000,         10'000,        20'000,        50'000,        100'000,    200'000,
      500'000,     1'000'000,   2'000'000,     5'000'000,     10'000'000,    20'000'000,    50'000'000, 100'000'000,
      200'000'000, 500'000'000, 1'000'000'000, 2'000'000'000, 5'000'000'000, 10'000'000'000};
  static constexpr std::size_t bucket_count = bounds_ns.size() + 1;  // the last: above every bound (+Inf)

  void record(std::chrono::nanoseconds d) noexcept {
    const auto ns = static_cast<std::uint64_t>(d.count() < 0 ? 0 : d.count());
    std::size_t b = 0;
    while (b < bounds_ns.size() && ns > bounds_ns[b]) {
      ++b;
    }
    bump(counts_[b], 1);
    bump(count_, 1);
    bump(sum_ns_, ns);
  }

  struct snapshot {
    std::array<std::uint64_t, bucket_count> counts{};  // per bucket, not cumulative
    std::uint64_t count = 0;
    std::uint64_t sum_ns = 0;
  };
  [[nodiscard]] snapshot read() const noexcept {
    snapshot s;
    for (std::size_t b = 0; b < bucket_count; ++b) {
      s.counts[b] = counts_[b].load(std::memory_order_relaxed);
    }
    s.count = count_.load(std::memory_order_relaxed);
    s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t by) noexcept {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);  // single writer
  }

  std::array<std::atomic<std::uint64_t>, bucket_count> counts_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

}  // namespace rill
