#include "net/murmur2.h"

namespace rill::net {

std::int32_t murmur2(std::span<const std::byte> key) noexcept {
  constexpr std::uint32_t seed = 0x9747b28cu;
  constexpr std::uint32_t m = 0x5bd1e995u;
  constexpr int r = 24;
  const auto* data = reinterpret_cast<const std::uint8_t*>(key.data());
  const std::uint32_t length = static_cast<std::uint32_t>(key.size());
  std::uint32_t h = seed ^ length;
  const std::uint32_t blocks = length / 4;
  for (std::uint32_t i = 0; i < blocks; ++i) {
    const std::uint32_t i4 = i * 4;
    std::uint32_t k = std::uint32_t{data[i4]} | (std::uint32_t{data[i4 + 1]} << 8) |
                      (std::uint32_t{data[i4 + 2]} << 16) | (std::uint32_t{data[i4 + 3]} << 24);
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
  }
  const std::uint32_t tail = length & ~3u;
  switch (length % 4) {
    case 3:
      h ^= std::uint32_t{data[tail + 2]} << 16;
      [[fallthrough]];
    case 2:
      h ^= std::uint32_t{data[tail + 1]} << 8;
      [[fallthrough]];
    case 1:
      h ^= std::uint32_t{data[tail]};
      h *= m;
      break;
    default:
      break;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return static_cast<std::int32_t>(h);
}

std::uint32_t partition_for_key(std::span<const std::byte> key, std::uint32_t partitions) noexcept {
  return (static_cast<std::uint32_t>(murmur2(key)) & 0x7fffffffu) % partitions;
}

}  // namespace rill::net
