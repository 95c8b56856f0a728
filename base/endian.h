#pragma once
// Big-endian loads and stores on unaligned bytes (Kafka's wire and disk formats are big-endian).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rill {

template <class U>
[[nodiscard]] constexpr U byteswap_impl(U v) noexcept {
  if constexpr (sizeof(U) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(U) == 4) {
    return __builtin_bswap32(v);
  } else {
    static_assert(sizeof(U) == 8);
    return __builtin_bswap64(v);
  }
}

template <class T>
[[nodiscard]] inline T load_be(const std::byte* p) noexcept {
  static_assert(std::is_integral_v<T>);
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
    v = static_cast<T>(byteswap_impl(static_cast<std::make_unsigned_t<T>>(v)));
  }
  return v;
}

template <class T>
inline void store_be(std::byte* p, T v) noexcept {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
    v = static_cast<T>(byteswap_impl(static_cast<std::make_unsigned_t<T>>(v)));
  }
  std::memcpy(p, &v, sizeof(T));
}

template <class T>
[[nodiscard]] inline T load_le(const std::byte* p) noexcept {
  static_assert(std::endian::native == std::endian::little, "rill targets little-endian hosts");
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
inline void store_le(std::byte* p, T v) noexcept {
  static_assert(std::endian::native == std::endian::little, "rill targets little-endian hosts");
  std::memcpy(p, &v, sizeof(T));
}

// Appends v, little-endian, to a growing buffer (encoders of variable-length formats).
template <class T>
inline void append_le(std::vector<std::byte>& out, T v) {
  std::byte b[sizeof(T)];
  store_le<T>(b, v);
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace rill
