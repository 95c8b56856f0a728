// CRC-32C: portable slicing-by-8, SSE4.2 with three interleaved chains, and GF(2) combination.
//
// Invariants
// - Every entry point takes and returns a finalized CRC (pre/post inversion applied inside).
// - Hardware and portable paths agree bit for bit on every input (tests/storage/crc32c_test.cpp).
#include "storage/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace rill::storage {
namespace {

constexpr std::uint32_t poly = 0x82F63B78u;

struct tables {
  std::array<std::array<std::uint32_t, 256>, 8> slice{};
  // x^(2^k) mod P, for combining (bit-reflected representation: x^0 is 0x80000000).
  std::array<std::uint32_t, 64> x2n{};
};

// a * b mod P in the reflected representation.
constexpr std::uint32_t multmodp(std::uint32_t a, std::uint32_t b) noexcept {
  std::uint32_t m = 1u << 31;
  std::uint32_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) {
        break;
      }
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
  }
  return p;
}

constexpr tables make_tables() {
  tables t;
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    }
    t.slice[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i) {
    for (std::size_t s = 1; s < 8; ++s) {
      const std::uint32_t prev = t.slice[s - 1][i];
      t.slice[s][i] = (prev >> 8) ^ t.slice[0][prev & 0xff];
    }
  }
  std::uint32_t p = 1u << 30;  // x^1
  t.x2n[0] = p;
  for (std::size_t k = 1; k < t.x2n.size(); ++k) {
    p = multmodp(p, p);
    t.x2n[k] = p;
  }
  return t;
}

constexpr tables g_tables = make_tables();

// x^(n * 2^k) mod P.
std::uint32_t x2nmodp(std::uint64_t n, unsigned k) noexcept {
  std::uint32_t p = 1u << 31;  // x^0
  while (n) {
    if (n & 1) {
      p = multmodp(g_tables.x2n[k & 63], p);
    }
    n >>= 1;
    ++k;
  }
  return p;
}

// Raw (non-inverted) portable update.
std::uint32_t update_portable(std::uint32_t c, const unsigned char* p, std::size_t n) noexcept {
  const auto& t = g_tables.slice;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= c;
    c = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
        t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) {
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  }
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t update_hw_one(std::uint32_t c, const unsigned char* p,
                                                              std::size_t n) noexcept {
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
    p += 8;
    n -= 8;
  }
  c = static_cast<std::uint32_t>(c64);
  while (n--) {
    c = _mm_crc32_u8(c, *p++);
  }
  return c;
}

// Lanes of this many bytes are run three at a time; the shift constant for one lane is precomputed.
constexpr std::size_t lane_bytes = 4096;

__attribute__((target("sse4.2"))) std::uint32_t update_hw(std::uint32_t c, const unsigned char* p,
                                                          std::size_t n) noexcept {
  static const std::uint32_t lane_shift = x2nmodp(lane_bytes, 3);  // x^(8 * lane_bytes) mod P
  while (n >= 3 * lane_bytes) {
    std::uint64_t c0 = c;
    std::uint64_t c1 = 0;
    std::uint64_t c2 = 0;
    const unsigned char* p1 = p + lane_bytes;
    const unsigned char* p2 = p + 2 * lane_bytes;
    for (std::size_t i = 0; i < lane_bytes; i += 8) {
      std::uint64_t w0;
      std::uint64_t w1;
      std::uint64_t w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p1 + i, 8);
      std::memcpy(&w2, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    // Raw (non-inverted) CRCs combine linearly: crc(a||b) = crc(a) * x^(8|b|) + crc_from_zero(b).
    c = multmodp(lane_shift, static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1);
    c = multmodp(lane_shift, c) ^ static_cast<std::uint32_t>(c2);
    p += 3 * lane_bytes;
    n -= 3 * lane_bytes;
  }
  return update_hw_one(c, p, n);
}
#endif

bool detect_hardware() noexcept {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

bool hardware() noexcept {
  static const bool available = detect_hardware();
  return available;
}

}  // namespace

std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t size) noexcept {
  return ~update_portable(~crc, static_cast<const unsigned char*>(data), size);
}

std::uint32_t crc32c_extend_hardware(std::uint32_t crc, const void* data, std::size_t size) noexcept {
#if defined(__x86_64__)
  if (hardware()) {
    return ~update_hw(~crc, static_cast<const unsigned char*>(data), size);
  }
#endif
  return crc32c_extend_portable(crc, data, size);
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) noexcept {
#if defined(__x86_64__)
  if (hardware()) {
    return ~update_hw(~crc, static_cast<const unsigned char*>(data), size);
  }
#endif
  return ~update_portable(~crc, static_cast<const unsigned char*>(data), size);
}

bool crc32c_hardware_available() noexcept {
  return hardware();
}

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept {
  return multmodp(x2nmodp(len_b, 3), crc_a) ^ crc_b;
}

}  // namespace rill::storage
