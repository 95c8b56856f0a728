// peer_wire: hellos and frames of the replica plane (see the header).
#include "consensus/peer_wire.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>
#include <xxhash.h>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"

namespace rill::consensus {
namespace {
using storage::errc;
using storage::make_unexpected;

constexpr char magic[8] = {'R', 'I', 'L', 'L', 'P', 'E', 'E', 'R'};
// 2: state transfer in chunks (request_sync and sync carry a checkpoint's checksum, size and offset); a node of
// version 1 would take a chunk for a whole checkpoint, so the two refuse each other at the hello.
constexpr std::uint32_t version = 2;
static_assert(peer_hello_bytes == 64);
static_assert(peer_frame_head_bytes == 16);

bool zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

std::vector<std::byte> frame(peer_frame_kind kind, group_t group, std::span<const std::byte> payload) {
  RILL_ASSERT(payload.size() <= UINT32_MAX);
  std::vector<std::byte> out(peer_frame_head_bytes + payload.size());
  out[0] = static_cast<std::byte>(kind);
  store_le<std::uint32_t>(out.data() + 4, static_cast<std::uint32_t>(payload.size()));
  store_le<std::uint64_t>(out.data() + 8, group.value());
  std::memcpy(out.data() + peer_frame_head_bytes, payload.data(), payload.size());
  return out;
}
}  // namespace

std::uint64_t members_digest(std::vector<peer_member> members) {
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.node_id < b.node_id; });
  std::string text;
  for (const auto& m : members) {
    text += fmt::format("{}@{};", m.node_id, m.address);
  }
  return XXH3_64bits(text.data(), text.size());
}

std::vector<std::byte> encode(const peer_hello& h) {
  RILL_ASSERT(h.cluster_id != 0);
  RILL_ASSERT(h.node_id != 0);
  std::vector<std::byte> out(peer_hello_bytes);
  std::memcpy(out.data(), magic, sizeof magic);
  store_le<std::uint32_t>(out.data() + 8, version);
  store_le<std::uint64_t>(out.data() + 16, h.cluster_id);
  store_le<std::uint64_t>(out.data() + 24, h.node_id);
  store_le<std::uint64_t>(out.data() + 32, h.members_digest);
  store_le<std::uint64_t>(out.data() + 40, h.incarnation);
  store_le<std::uint64_t>(out.data() + 56, XXH3_64bits(out.data(), 56));
  return out;
}

expected<peer_hello> decode_peer_hello(std::span<const std::byte> bytes) {
  if (bytes.size() < peer_hello_bytes) {
    return make_unexpected(errc::corrupt_data, fmt::format("peer hello of {} bytes", bytes.size()));
  }
  if (std::memcmp(bytes.data(), magic, sizeof magic) != 0) {
    return make_unexpected(errc::corrupt_data,
                           "not a rill replica-plane peer (its first bytes are not a hello: is "
                           "network.replica_address another service?)");
  }
  if (load_le<std::uint64_t>(bytes.data() + 56) != XXH3_64bits(bytes.data(), 56)) {
    return make_unexpected(errc::corrupt_data, "peer hello: checksum mismatch");
  }
  if (const auto v = load_le<std::uint32_t>(bytes.data() + 8); v != version) {
    return make_unexpected(errc::corrupt_data,
                           fmt::format("peer hello: protocol version {}, this node speaks {}", v, version));
  }
  if (!zero(bytes.subspan(12, 4)) || !zero(bytes.subspan(48, 8))) {
    return make_unexpected(errc::corrupt_data, "peer hello: reserved bytes are not zero");
  }
  peer_hello h;
  h.cluster_id = load_le<std::uint64_t>(bytes.data() + 16);
  h.node_id = load_le<std::uint64_t>(bytes.data() + 24);
  h.members_digest = load_le<std::uint64_t>(bytes.data() + 32);
  h.incarnation = load_le<std::uint64_t>(bytes.data() + 40);
  if (h.cluster_id == 0 || h.node_id == 0) {
    return make_unexpected(errc::corrupt_data, "peer hello: a cluster id or node id of 0");
  }
  return h;
}

expected<void> check_peer_hello(const peer_hello& theirs, const peer_hello& ours, std::uint64_t expected_node,
                                std::span<const std::uint64_t> members) {
  if (theirs.cluster_id != ours.cluster_id) {
    return make_unexpected(errc::invalid_argument,
                           fmt::format("peer node {} belongs to cluster {}, this node's cluster.id is {}",
                                       theirs.node_id, theirs.cluster_id, ours.cluster_id));
  }
  if (std::find(members.begin(), members.end(), theirs.node_id) == members.end() || theirs.node_id == ours.node_id) {
    return make_unexpected(errc::invalid_argument,
                           fmt::format("peer says it is node {}, which is not another member of this node's "
                                       "cluster.members",
                                       theirs.node_id));
  }
  if (expected_node != 0 && theirs.node_id != expected_node) {
    return make_unexpected(
        errc::invalid_argument,
        fmt::format("the address of member {} in cluster.members answers as node {}", expected_node, theirs.node_id));
  }
  if (theirs.members_digest != ours.members_digest) {
    return make_unexpected(errc::invalid_argument,
                           fmt::format("peer node {} was started with another cluster.members list than this node "
                                       "(every member must list the same nodes and addresses)",
                                       theirs.node_id));
  }
  return {};
}

std::vector<std::byte> encode_frame(group_t group, const message& m) {
  return frame(peer_frame_kind::message, group, encode(m));
}

std::vector<std::byte> encode_frame(const node_heartbeat& beat) {
  return frame(peer_frame_kind::heartbeat, group_t(0), encode(beat));
}

peer_frame_reader::peer_frame_reader(std::uint32_t payload_bytes_max) : payload_bytes_max_(payload_bytes_max) {
  RILL_ASSERT(payload_bytes_max_ >= header::encoded_size);
}

expected<std::vector<peer_frame>> peer_frame_reader::feed(std::span<const std::byte> bytes) {
  if (failed_) {
    return make_unexpected(errc::corrupt_data, "the peer's stream failed earlier");
  }
  auto bad = [this](std::string why) -> expected<std::vector<peer_frame>> {
    failed_ = true;
    buffer_.clear();
    return make_unexpected(errc::corrupt_data, std::move(why));
  };
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  std::vector<peer_frame> out;
  std::size_t at = 0;
  while (buffer_.size() - at >= peer_frame_head_bytes) {
    const std::byte* head = buffer_.data() + at;
    const auto kind = static_cast<std::uint8_t>(head[0]);
    const auto length = load_le<std::uint32_t>(head + 4);
    const group_t group(load_le<std::uint64_t>(head + 8));
    if (kind != static_cast<std::uint8_t>(peer_frame_kind::message) &&
        kind != static_cast<std::uint8_t>(peer_frame_kind::heartbeat)) {
      return bad(fmt::format("a frame of kind {}", kind));
    }
    if (!zero(std::span<const std::byte>(head + 1, 3))) {
      return bad("a frame head's reserved bytes are not zero");
    }
    if (length > payload_bytes_max_) {
      return bad(fmt::format("a frame of {} bytes; at most {}", length, payload_bytes_max_));
    }
    if (buffer_.size() - at < peer_frame_head_bytes + length) {
      break;  // the rest of it is still coming
    }
    const auto payload = std::span<const std::byte>(head + peer_frame_head_bytes, length);
    peer_frame f;
    f.group = group;
    if (kind == static_cast<std::uint8_t>(peer_frame_kind::message)) {
      // The header's checksum before its size is believed (decode checks both, in that order).
      auto m = decode(payload);
      if (!m) {
        return bad(fmt::format("a message of group {}: {}", group.value(), m.error().detail()));
      }
      f.kind = peer_frame_kind::message;
      f.m = std::move(*m);
    } else {
      if (group.value() != 0) {
        return bad("a heartbeat frame names a group");
      }
      auto b = decode_node_heartbeat(payload);
      if (!b) {
        return bad(fmt::format("a node heartbeat: {}", b.error().detail()));
      }
      f.kind = peer_frame_kind::heartbeat;
      f.beat = std::move(*b);
    }
    out.push_back(std::move(f));
    at += peer_frame_head_bytes + length;
  }
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(at));
  RILL_ASSERT(buffer_.size() < peer_frame_head_bytes + payload_bytes_max_ + bytes.size());
  return out;
}

}  // namespace rill::consensus
