#pragma once
// Kafka's zigzag varints (protobuf style): "varint" is a zigzag-encoded int32 in at most 5 bytes, "varlong" a
// zigzag-encoded int64 in at most 10. Decoding is bounds-checked and rejects over-long encodings.
#include <cstddef>
#include <cstdint>
#include <optional>

namespace rill::storage {

// Reads one varint from [*p, end). On success advances *p and returns the value; on truncated or over-long input
// returns nullopt and leaves *p unspecified.
[[nodiscard]] inline std::optional<std::int64_t> read_zigzag(const std::byte*& p, const std::byte* end,
                                                             unsigned max_bytes) noexcept {
  std::uint64_t raw = 0;
  unsigned shift = 0;
  for (unsigned i = 0; i < max_bytes; ++i) {
    if (p == end) {
      return std::nullopt;
    }
    const auto b = static_cast<std::uint8_t>(*p++);
    raw |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      return static_cast<std::int64_t>((raw >> 1) ^ (~(raw & 1) + 1));
    }
    shift += 7;
  }
  return std::nullopt;
}

[[nodiscard]] inline std::optional<std::int32_t> read_varint(const std::byte*& p, const std::byte* end) noexcept {
  auto v = read_zigzag(p, end, 5);
  if (!v || *v < INT32_MIN || *v > INT32_MAX) {
    return std::nullopt;
  }
  return static_cast<std::int32_t>(*v);
}

[[nodiscard]] inline std::optional<std::int64_t> read_varlong(const std::byte*& p, const std::byte* end) noexcept {
  return read_zigzag(p, end, 10);
}

// Bytes write_zigzag(v) will produce.
[[nodiscard]] inline std::size_t zigzag_size(std::int64_t v) noexcept {
  std::uint64_t raw = (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
  std::size_t n = 1;
  while (raw >= 0x80) {
    raw >>= 7;
    ++n;
  }
  return n;
}

// Writes v at p (which has room for zigzag_size(v) bytes); returns the byte after it.
inline std::byte* write_zigzag(std::byte* p, std::int64_t v) noexcept {
  std::uint64_t raw = (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
  while (raw >= 0x80) {
    *p++ = static_cast<std::byte>((raw & 0x7f) | 0x80);
    raw >>= 7;
  }
  *p++ = static_cast<std::byte>(raw);
  return p;
}

}  // namespace rill::storage
