#include "consensus/message.h"

#include <xxhash.h>

#include <cstring>
#include <limits>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"

namespace rill::consensus {
namespace {
constexpr std::uint64_t domain_header = 1;
constexpr std::uint64_t domain_body = 2;
constexpr std::size_t checksummed_from = 16;  // the header checksum covers everything after itself

// Checksum domains (types.h): 1 headers, 2 bodies, 3 superblock copies, 4 checkpoints. Distinct, so that no two kinds
// of bytes can be mistaken for each other.
static_assert(domain_header != domain_body);
static_assert(domain_header != checkpoint_checksum_domain);
static_assert(domain_body != checkpoint_checksum_domain);
static_assert(header::encoded_size == 128, "the layout in message.h");
static_assert(checksummed_from == sizeof(checksum_t), "the header checksum covers the bytes after itself");
static_assert(command_max == static_cast<std::uint8_t>(command::commit_ok), "command_max is the last command");
static_assert(operation_root < operation_register);
static_assert(operation_register < operation_user_min);

void put_checksum(std::byte* p, const checksum_t& c) noexcept {
  store_le<std::uint64_t>(p, c.low);
  store_le<std::uint64_t>(p + 8, c.high);
}
checksum_t get_checksum(const std::byte* p) noexcept {
  return {load_le<std::uint64_t>(p), load_le<std::uint64_t>(p + 8)};
}

rill::unexpected bad(std::string detail) {
  return storage::make_unexpected(storage::errc::corrupt_data, std::move(detail));
}
}  // namespace

std::uint64_t session_of(const header& h) noexcept {
  return h.context.low;
}

void set_session(header& h, std::uint64_t session) noexcept {
  h.context = checksum_t{session, 0};
}

checksum_t checksum_of(std::span<const std::byte> bytes, std::uint64_t domain) noexcept {
  const XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), domain);
  return {h.low64, h.high64};
}

std::string to_string(const checksum_t& c) {
  return fmt::format("{:016x}", c.high);
}

std::string_view to_string(command c) noexcept {
  switch (c) {
    case command::reserved:
      return "reserved";
    case command::request:
      return "request";
    case command::prepare:
      return "prepare";
    case command::prepare_ok:
      return "prepare_ok";
    case command::reply:
      return "reply";
    case command::commit:
      return "commit";
    case command::start_view_change:
      return "start_view_change";
    case command::do_view_change:
      return "do_view_change";
    case command::start_view:
      return "start_view";
    case command::request_start_view:
      return "request_start_view";
    case command::request_headers:
      return "request_headers";
    case command::headers:
      return "headers";
    case command::request_prepare:
      return "request_prepare";
    case command::eviction:
      return "eviction";
    case command::request_sync:
      return "request_sync";
    case command::sync:
      return "sync";
    case command::recovery_response:
      return "recovery_response";
    case command::request_segments:
      return "request_segments";
    case command::segments:
      return "segments";
    case command::commit_ok:
      return "commit_ok";
  }
  return "unknown";
}

void encode_header(const header& h, std::byte* out) noexcept {
  RILL_ASSERT(out != nullptr);
  put_checksum(out + 0, h.checksum);
  put_checksum(out + 16, h.checksum_body);
  put_checksum(out + 32, h.parent);
  put_checksum(out + 48, h.context);
  store_le<std::uint64_t>(out + 64, h.cluster);
  store_le<std::uint64_t>(out + 72, h.client);
  store_le<std::uint64_t>(out + 80, h.request);
  store_le<std::uint64_t>(out + 88, h.op);
  store_le<std::uint64_t>(out + 96, h.commit);
  store_le<std::uint64_t>(out + 104, h.timestamp);
  store_le<std::uint32_t>(out + 112, h.view);
  store_le<std::uint32_t>(out + 116, h.log_view);
  store_le<std::uint32_t>(out + 120, h.size);
  out[124] = static_cast<std::byte>(h.cmd);
  out[125] = static_cast<std::byte>(h.replica);
  out[126] = static_cast<std::byte>(h.operation);
  out[127] = std::byte{0};
}

header decode_header_unchecked(const std::byte* in) noexcept {
  RILL_ASSERT(in != nullptr);
  header h;
  h.checksum = get_checksum(in + 0);
  h.checksum_body = get_checksum(in + 16);
  h.parent = get_checksum(in + 32);
  h.context = get_checksum(in + 48);
  h.cluster = load_le<std::uint64_t>(in + 64);
  h.client = load_le<std::uint64_t>(in + 72);
  h.request = load_le<std::uint64_t>(in + 80);
  h.op = load_le<std::uint64_t>(in + 88);
  h.commit = load_le<std::uint64_t>(in + 96);
  h.timestamp = load_le<std::uint64_t>(in + 104);
  h.view = load_le<std::uint32_t>(in + 112);
  h.log_view = load_le<std::uint32_t>(in + 116);
  h.size = load_le<std::uint32_t>(in + 120);
  h.cmd = static_cast<command>(in[124]);
  h.replica = static_cast<replica_t>(in[125]);
  h.operation = static_cast<std::uint8_t>(in[126]);
  return h;
}

checksum_t header_checksum(const header& h) noexcept {
  std::array<std::byte, header::encoded_size> bytes;
  encode_header(h, bytes.data());
  return checksum_of(std::span(bytes).subspan(checksummed_from), domain_header);
}

void seal(message& m) {
  RILL_ASSERT(m.body.size() <= std::numeric_limits<std::uint32_t>::max() - header::encoded_size,
              "a body of {} bytes does not fit the header's size field", m.body.size());
  m.h.size = static_cast<std::uint32_t>(header::encoded_size + m.body.size());
  m.h.checksum_body = checksum_of(m.body, domain_body);
  m.h.checksum = header_checksum(m.h);
}

std::vector<std::byte> encode(const message& m) {
  RILL_ASSERT(m.h.size == header::encoded_size + m.body.size(), "{} of {} bytes says {}: not sealed",
              to_string(m.h.cmd), header::encoded_size + m.body.size(), m.h.size);
  std::vector<std::byte> out(header::encoded_size + m.body.size());
  encode_header(m.h, out.data());
  if (!m.body.empty()) {
    std::memcpy(out.data() + header::encoded_size, m.body.data(), m.body.size());
  }
  return out;
}

expected<header> decode_header(std::span<const std::byte> bytes) {
  if (bytes.size() < header::encoded_size) {
    return bad(
        fmt::format("message of {} bytes is shorter than its {}-byte header", bytes.size(), header::encoded_size));
  }
  header h = decode_header_unchecked(bytes.data());
  if (checksum_of(bytes.subspan(checksummed_from, header::encoded_size - checksummed_from), domain_header) !=
      h.checksum) {
    return bad("message header checksum mismatch");
  }
  if (static_cast<std::uint8_t>(h.cmd) == 0 || static_cast<std::uint8_t>(h.cmd) > command_max) {
    return bad(fmt::format("unknown command {}", static_cast<unsigned>(h.cmd)));
  }
  if (bytes[127] != std::byte{0}) {
    return bad("reserved header byte is not zero");
  }
  return h;
}

bool body_matches(const header& h, std::span<const std::byte> body) noexcept {
  return h.size == header::encoded_size + body.size() && checksum_of(body, domain_body) == h.checksum_body;
}

expected<message> decode(std::span<const std::byte> bytes) {
  RILL_TRY(h, decode_header(bytes));
  if (h.size != bytes.size()) {
    return bad(fmt::format("{} header says {} bytes, got {}", to_string(h.cmd), h.size, bytes.size()));
  }
  const auto body = bytes.subspan(header::encoded_size);
  if (checksum_of(body, domain_body) != h.checksum_body) {
    return bad(fmt::format("{} body checksum mismatch", to_string(h.cmd)));
  }
  message m;
  m.h = h;
  m.body.assign(body.begin(), body.end());
  RILL_ASSERT(m.h.size == header::encoded_size + m.body.size());
  return m;
}

std::vector<std::byte> encode_headers(std::span<const header> headers) {
  std::vector<std::byte> out(headers.size() * header::encoded_size);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    encode_header(headers[i], out.data() + i * header::encoded_size);
  }
  RILL_ASSERT(out.size() == headers.size() * header::encoded_size);
  return out;
}

expected<std::vector<header>> decode_headers(std::span<const std::byte> body) {
  if (body.size() % header::encoded_size != 0) {
    return bad(fmt::format("header list of {} bytes is not a multiple of {}", body.size(), header::encoded_size));
  }
  std::vector<header> out;
  out.reserve(body.size() / header::encoded_size);
  for (std::size_t at = 0; at < body.size(); at += header::encoded_size) {
    RILL_TRY(h, decode_header(body.subspan(at, header::encoded_size)));
    if (h.cmd != command::prepare) {
      return bad(
          fmt::format("header list entry {} is a {}, not a prepare", at / header::encoded_size, to_string(h.cmd)));
    }
    out.push_back(h);
  }
  RILL_ASSERT(out.size() * header::encoded_size == body.size());
  return out;
}

header root_header(std::uint64_t cluster) {
  message m;
  m.h.cmd = command::prepare;
  m.h.cluster = cluster;
  m.h.operation = operation_root;
  seal(m);
  RILL_ASSERT(m.h.op == 0);
  RILL_ASSERT(m.h.size == header::encoded_size, "the root has no body");
  return m.h;
}

}  // namespace rill::consensus
