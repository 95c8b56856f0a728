// The latency histogram: exact below 128, within 1/128 above, percentiles against a sorted reference, merge, and the
// edges of the u64 range.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/histogram.h"
#include "base/random.h"

using rill::histogram;

BOOST_AUTO_TEST_CASE(histogram_buckets_are_exact_below_128_and_within_one_128th_above) {
  for (std::uint64_t v = 0; v < 128; ++v) {
    BOOST_TEST(histogram::bucket_top(histogram::bucket_of(v)) == v);
  }
  rill::prng rng(3);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng.next() >> rng.below(64);
    const std::size_t b = histogram::bucket_of(v);
    BOOST_REQUIRE(b < histogram::bucket_count);
    const std::uint64_t top = histogram::bucket_top(b);
    BOOST_REQUIRE(top >= v);
    BOOST_REQUIRE(static_cast<double>(top - v) <= static_cast<double>(v) / 128.0);
    if (b > 0) {
      BOOST_REQUIRE(histogram::bucket_top(b - 1) < v);  // v is in no lower bucket
    }
  }
  BOOST_TEST(histogram::bucket_of(UINT64_MAX) == histogram::bucket_count - 1);
  BOOST_TEST(histogram::bucket_top(histogram::bucket_count - 1) == UINT64_MAX);
}

BOOST_AUTO_TEST_CASE(histogram_percentiles_match_a_sorted_reference_within_the_bucket_error) {
  rill::prng rng(11);
  histogram h;
  std::vector<std::uint64_t> all;
  for (int i = 0; i < 200000; ++i) {
    // A latency-like mix: most around 50 us, a tail up to 50 ms.
    const std::uint64_t v = rng.below(100) < 98 ? 20'000 + rng.below(60'000) : 1'000'000 + rng.below(49'000'000);
    h.record(v);
    all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  BOOST_TEST(h.count() == all.size());
  BOOST_TEST(h.min() == all.front());
  BOOST_TEST(h.max() == all.back());
  for (double p : {0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(p / 100.0 * all.size())));
    const std::uint64_t exact = all[rank - 1];
    const std::uint64_t got = h.percentile(p);
    BOOST_TEST(got >= exact, "p" << p);
    BOOST_TEST(static_cast<double>(got - exact) <= static_cast<double>(exact) / 128.0, "p" << p);
  }
  BOOST_TEST(h.percentile(100) == all.back());
  BOOST_TEST(h.percentile(0) == all.front());
  double sum = 0;
  for (auto v : all) {
    sum += static_cast<double>(v);
  }
  BOOST_TEST(std::abs(h.mean() - sum / static_cast<double>(all.size())) < 1.0);
}

BOOST_AUTO_TEST_CASE(histograms_merge_and_reset) {
  histogram a;
  histogram b;
  histogram both;
  for (std::uint64_t v = 1; v <= 1000; ++v) {
    (v % 2 == 0 ? a : b).record(v * 1000);
    both.record(v * 1000);
  }
  a.merge(b);
  BOOST_TEST(a.count() == both.count());
  BOOST_TEST(a.min() == both.min());
  BOOST_TEST(a.max() == both.max());
  for (double p : {1.0, 50.0, 99.0}) {
    BOOST_TEST(a.percentile(p) == both.percentile(p));
  }
  a.record(7, 3);
  BOOST_TEST(a.count() == both.count() + 3);
  BOOST_TEST(a.min() == 7u);
  a.reset();
  BOOST_TEST(a.count() == 0u);
  BOOST_TEST(a.percentile(99) == 0u);
  BOOST_TEST(a.max() == 0u);
}
