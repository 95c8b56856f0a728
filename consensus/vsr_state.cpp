#include "consensus/vsr_state.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"

namespace rill::consensus {
namespace {
constexpr std::uint32_t magic = 0x32565352;  // "RSV2"
// magic, cluster, replica, replica_count, flags (u16: bit 0 recovering; the rest zero), view, log_view, commit, view
// header count, then the checkpoint: its header (128 bytes, all zero for none), slot, a zero byte, the incarnation (6
// bytes), size, checksum (low, high). Superblocks written before the flags existed hold 0 there: not recovering;
// before incarnations, 0 there too: incarnation 0 (unchecked).
constexpr std::uint16_t flag_recovering = 1;
constexpr std::size_t checkpoint_at = 4 + 8 + 1 + 1 + 2 + 4 + 4 + 8 + 4;
constexpr std::size_t fixed_size = checkpoint_at + 128 + 8 + 8 + 16;
static_assert(fixed_size == vsr_state_fixed_size);
static_assert(header::encoded_size == 128, "the layout above reserves 128 bytes for the checkpoint header");

}  // namespace

bool headers_chained(std::span<const header> headers) noexcept {
  for (std::size_t i = 1; i < headers.size(); ++i) {
    if (headers[i].op != headers[i - 1].op + 1 || headers[i].parent != headers[i - 1].checksum) {
      return false;
    }
  }
  return true;
}

std::vector<std::byte> encode(const vsr_state& s) {
  // (Any state encodes, so that tests can make the bytes decode_vsr_state refuses; superblock::write asserts that
  // what it persists is valid.)
  RILL_ASSERT(s.view_headers.size() <= view_headers_max);
  std::vector<std::byte> out(fixed_size);
  std::byte* p = out.data();
  store_le<std::uint32_t>(p, magic);
  store_le<std::uint64_t>(p + 4, s.cluster);
  p[12] = static_cast<std::byte>(s.replica);
  p[13] = static_cast<std::byte>(s.replica_count);
  store_le<std::uint16_t>(p + 14, s.recovering ? flag_recovering : 0);
  store_le<std::uint32_t>(p + 16, s.view.value());
  store_le<std::uint32_t>(p + 20, s.log_view.value());
  store_le<std::uint64_t>(p + 24, s.commit.value());
  store_le<std::uint32_t>(p + 32, static_cast<std::uint32_t>(s.view_headers.size()));
  if (!s.checkpoint.at.checksum.zero()) {
    encode_header(s.checkpoint.at, p + checkpoint_at);
  }
  p[checkpoint_at + 128] = static_cast<std::byte>(s.checkpoint.slot);
  RILL_ASSERT(s.incarnation <= incarnation_max, "incarnation {} does not fit its six bytes", s.incarnation);
  for (std::size_t i = 0; i < 6; ++i) {
    p[checkpoint_at + 130 + i] = static_cast<std::byte>((s.incarnation >> (8 * i)) & 0xff);
  }
  store_le<std::uint64_t>(p + checkpoint_at + 136, s.checkpoint.size);
  store_le<std::uint64_t>(p + checkpoint_at + 144, s.checkpoint.checksum.low);
  store_le<std::uint64_t>(p + checkpoint_at + 152, s.checkpoint.checksum.high);
  auto headers = encode_headers(s.view_headers);
  out.insert(out.end(), headers.begin(), headers.end());
  RILL_ASSERT(out.size() == fixed_size + s.view_headers.size() * header::encoded_size);
  return out;
}

expected<vsr_state> decode_vsr_state(std::span<const std::byte> bytes) {
  auto bad = [](std::string detail) {
    return storage::make_unexpected(storage::errc::corrupt_data, std::move(detail));
  };
  if (bytes.size() < fixed_size) {
    return bad(fmt::format("vsr state of {} bytes is shorter than {}", bytes.size(), fixed_size));
  }
  const std::byte* p = bytes.data();
  if (load_le<std::uint32_t>(p) != magic) {
    return bad("vsr state has a bad magic number");
  }
  vsr_state s;
  s.cluster = load_le<std::uint64_t>(p + 4);
  s.replica = static_cast<replica_t>(p[12]);
  s.replica_count = static_cast<std::uint8_t>(p[13]);
  const std::uint16_t flags = load_le<std::uint16_t>(p + 14);
  if ((flags & ~flag_recovering) != 0) {
    return bad(fmt::format("vsr state has unknown flags {:#x}", flags));
  }
  s.recovering = (flags & flag_recovering) != 0;
  s.view = view_t(load_le<std::uint32_t>(p + 16));
  s.log_view = view_t(load_le<std::uint32_t>(p + 20));
  s.commit = op_t(load_le<std::uint64_t>(p + 24));
  const std::uint32_t count = load_le<std::uint32_t>(p + 32);
  if (count > view_headers_max || bytes.size() != fixed_size + count * header::encoded_size) {
    return bad(fmt::format("vsr state declares {} view headers in {} bytes", count, bytes.size()));
  }
  if (s.replica_count == 0 || s.replica_count > replicas_max || s.replica >= s.replica_count) {
    return bad(fmt::format("vsr state names replica {} of {}", s.replica, s.replica_count));
  }
  if (s.log_view > s.view) {
    return bad(fmt::format("vsr state log view {} is above its view {}", s.log_view.value(), s.view.value()));
  }
  const auto at = bytes.subspan(checkpoint_at, header::encoded_size);
  if (std::any_of(at.begin(), at.end(), [](std::byte b) { return b != std::byte{0}; })) {
    auto h = decode_header(at);
    if (!h || h->cmd != command::prepare) {
      return bad("vsr state checkpoint header is not a valid prepare header");
    }
    s.checkpoint.at = *h;
  }
  s.checkpoint.slot = static_cast<std::uint8_t>(p[checkpoint_at + 128]);
  for (std::size_t i = 0; i < 6; ++i) {
    s.incarnation |= static_cast<std::uint64_t>(p[checkpoint_at + 130 + i]) << (8 * i);
  }
  s.checkpoint.size = load_le<std::uint64_t>(p + checkpoint_at + 136);
  s.checkpoint.checksum.low = load_le<std::uint64_t>(p + checkpoint_at + 144);
  s.checkpoint.checksum.high = load_le<std::uint64_t>(p + checkpoint_at + 152);
  if (s.checkpoint.slot > 1) {
    return bad(fmt::format("vsr state checkpoint slot {}: allowed is 0 or 1", s.checkpoint.slot));
  }
  if (s.checkpoint.op() > s.commit.value()) {
    return bad(fmt::format("vsr state checkpoint op {} is above its commit {}", s.checkpoint.op(), s.commit.value()));
  }
  RILL_TRY(headers, decode_headers(bytes.subspan(fixed_size)));
  for (std::size_t i = 1; i < headers.size(); ++i) {
    if (headers[i].op != headers[i - 1].op + 1 || headers[i].parent != headers[i - 1].checksum) {
      return bad(fmt::format("vsr state view headers are not chained at op {}", headers[i].op));
    }
  }
  RILL_ASSERT(headers_chained(headers));
  s.view_headers = std::move(headers);
  return s;
}

}  // namespace rill::consensus
