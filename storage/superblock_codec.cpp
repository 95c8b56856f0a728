// Encoding of the superblock record (superblock_format.h); the I/O that reads and writes it is in superblock.cpp.
#include <algorithm>

#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/superblock.h"
#include "storage/superblock_format.h"

namespace rill::storage {
namespace sf = superblock_format;

void encode_superblock(const superblock_state& s, std::byte* out) noexcept {
  std::fill(out, out + sf::bytes, std::byte{0});
  store_be<std::uint32_t>(out + sf::magic_at, sf::magic);
  store_be<std::uint16_t>(out + sf::version_at, sf::version);
  store_be<std::uint16_t>(out + sf::flags_at, 0);
  store_be<std::uint64_t>(out + sf::sequence_at, s.sequence);
  store_be<std::int64_t>(out + sf::committed_at, s.committed.value());
  store_be<std::int64_t>(out + sf::log_start_at, s.log_start.value());
  store_be<std::int64_t>(out + sf::recovery_frontier_at, s.recovery_frontier.value());
  store_be<std::int64_t>(out + sf::truncate_from_at, s.truncate_from.value());
  store_be<std::uint32_t>(out + sf::crc_at, crc32c(out, sf::crc_at));
}

std::optional<superblock_state> decode_superblock(const std::byte* in) noexcept {
  if (load_be<std::uint32_t>(in + sf::magic_at) != sf::magic ||
      load_be<std::uint16_t>(in + sf::version_at) != sf::version) {
    return std::nullopt;
  }
  if (load_be<std::uint32_t>(in + sf::crc_at) != crc32c(in, sf::crc_at)) {
    return std::nullopt;
  }
  superblock_state s;
  s.sequence = load_be<std::uint64_t>(in + sf::sequence_at);
  s.committed = offset_t(load_be<std::int64_t>(in + sf::committed_at));
  s.log_start = offset_t(load_be<std::int64_t>(in + sf::log_start_at));
  s.recovery_frontier = offset_t(load_be<std::int64_t>(in + sf::recovery_frontier_at));
  s.truncate_from = offset_t(load_be<std::int64_t>(in + sf::truncate_from_at));
  return s;
}

}  // namespace rill::storage
