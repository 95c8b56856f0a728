#pragma once
// A small seeded PRNG (xoshiro256**, seeded through splitmix64) with helpers whose results are the same on every
// platform and standard library: std::uniform_int_distribution is implementation-defined, so simulations replayed
// from a seed must not use it.
#include <cstdint>

#include "base/assert.h"

namespace rill {

class prng {
 public:
  explicit prng(std::uint64_t seed) {
    for (auto& s : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound). bound > 0. (Lemire's multiply-shift; the tiny bias is irrelevant for fault injection.)
  std::uint64_t below(std::uint64_t bound) {
    RILL_ASSERT(bound > 0);
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<u128>(next()) * bound) >> 64);
  }
  // Uniform in [lo, hi]. lo <= hi.
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
    RILL_ASSERT(lo <= hi);
    return lo + below(hi - lo + 1);
  }
  // True with probability numerator / 1'000'000 (probabilities as integers keep runs platform-independent).
  bool chance_ppm(std::uint32_t ppm) { return below(1'000'000) < ppm; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

}  // namespace rill
