#pragma once
// The numbers VSR is made of, as distinct types: a view, an op (a position in the replicated log), a replica's index
// in its group, and the 128-bit checksum that chains prepares together.
//
// Invariants:
// - view 0 is the first view; its primary is replica 0. The primary of view v is replica v mod replica_count.
// - op 0 is the root: a header every replica has, never prepared by anyone. The first prepared op is 1.
// - A checksum is XXH3-128 (libxxhash): fast, well distributed, not cryptographic. It detects corruption and
//   ordering mistakes, not an attacker; authenticity comes from the transport (TLS, a later issue).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/strong.h"
#include "config/limits.h"

namespace rill::consensus {

using view_t = strong<std::uint32_t, struct view_tag>;
using op_t = strong<std::uint64_t, struct op_tag>;
using replica_t = std::uint8_t;

// The most replicas in one group (a bitset of this width records votes and acknowledgements).
inline constexpr std::size_t replicas_max = 6;
static_assert(replicas_max >= 1);
static_assert(replicas_max <= 32, "votes and acknowledgements are a std::uint32_t bitset of replicas");
static_assert(replicas_max <= 255, "replica_t is one byte (the header's replica field)");
static_assert(replicas_max == limits::cluster_members_limit, "the metadata group spans every member of a cluster");

// The most prepares in flight at a primary (replica_options::pipeline_max). The view change's suffixes and the
// vsr_state's view headers hold at most pipeline_max + 1 headers.
inline constexpr std::uint32_t pipeline_max_limit = 64;
static_assert(pipeline_max_limit >= 1);
static_assert(pipeline_max_limit < 32 * 1024, "a suffix of pipeline_max + 1 headers stays a small message");

struct checksum_t {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  friend constexpr bool operator==(const checksum_t&, const checksum_t&) = default;
  [[nodiscard]] constexpr bool zero() const noexcept { return low == 0 && high == 0; }
};

// XXH3-128 of `bytes`, seeded by `domain` so that a header checksum never equals a body checksum of the same bytes.
[[nodiscard]] checksum_t checksum_of(std::span<const std::byte> bytes, std::uint64_t domain = 0) noexcept;
// Domains in use: 1 message headers, 2 message bodies, 3 superblock copies, 4 checkpoints (snapshot bytes), 5 node
// heartbeats (group_host.h).
inline constexpr std::uint64_t checkpoint_checksum_domain = 4;

// Short hex form for logs and traces (the first 8 bytes).
[[nodiscard]] std::string to_string(const checksum_t& c);

// Quorums (TigerBeetle's flexible quorums restricted to majorities): replication needs a majority; a view change needs
// enough replicas that every replication quorum intersects it. Two replicas need both for either.
[[nodiscard]] constexpr std::size_t quorum_replication(std::size_t replica_count) noexcept {
  return replica_count / 2 + 1;
}
[[nodiscard]] constexpr std::size_t quorum_view_change(std::size_t replica_count) noexcept {
  return replica_count == 2 ? 2 : replica_count - quorum_replication(replica_count) + 1;
}

// Every replication quorum intersects every view-change quorum (so a new view learns every committed op), and
// neither needs more replicas than the group has. Checked for every group size.
[[nodiscard]] constexpr bool quorums_intersect() noexcept {
  for (std::size_t n = 1; n <= replicas_max; ++n) {
    if (quorum_replication(n) + quorum_view_change(n) <= n) {
      return false;
    }
    if (quorum_replication(n) > n || quorum_view_change(n) > n) {
      return false;
    }
    if (quorum_replication(n) < 1 || quorum_view_change(n) < 1) {
      return false;
    }
  }
  return true;
}
static_assert(quorums_intersect());

[[nodiscard]] constexpr replica_t primary_of(view_t view, std::size_t replica_count) noexcept {
  return static_cast<replica_t>(view.value() % replica_count);
}

}  // namespace rill::consensus
