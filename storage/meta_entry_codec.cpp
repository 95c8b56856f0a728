// Encoding of the .meta file entries (meta_entry_format.h); the I/O that reads and writes them is in
// partition_log.cpp (appends, truncation) and log_recovery.cpp (load_metas).
#include <cstring>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/meta_entry.h"

namespace rill::storage {
namespace mef = meta_entry_format;

void encode_meta_entry(const meta_entry& e, std::span<std::byte, mef::entry_bytes> out) noexcept {
  RILL_ASSERT(e.base_offset.value() >= 0, "meta entry for offset {}", e.base_offset.value());
  store_be<std::int64_t>(out.data() + mef::base_offset_at, e.base_offset.value());
  std::memcpy(out.data() + mef::payload_at, e.meta.payload.data(), mef::payload_bytes);
  store_be<std::uint32_t>(out.data() + mef::crc_at, crc32c(out.data(), mef::crc_at));
}

std::vector<std::byte> encode_meta_entries(std::span<const meta_entry> entries) {
  std::vector<std::byte> out(entries.size() * mef::entry_bytes);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    encode_meta_entry(entries[i],
                      std::span<std::byte, mef::entry_bytes>(out.data() + i * mef::entry_bytes, mef::entry_bytes));
  }
  return out;
}

std::optional<meta_entry> decode_meta_entry(std::span<const std::byte, mef::entry_bytes> in) noexcept {
  if (load_be<std::uint32_t>(in.data() + mef::crc_at) != crc32c(in.data(), mef::crc_at)) {
    return std::nullopt;
  }
  meta_entry e{offset_t(load_be<std::int64_t>(in.data() + mef::base_offset_at)), {}};
  std::memcpy(e.meta.payload.data(), in.data() + mef::payload_at, mef::payload_bytes);
  return e;
}

}  // namespace rill::storage
