#pragma once
// vsr_state: what a replica keeps durable outside its journal (in the superblock), so that a restart needs no
// recovery protocol.
//
// Invariants (checked by the replica, relied on at restart):
// - view >= log_view; neither ever decreases, across restarts too.
// - A view (and log view) is persisted before any message carrying it is sent.
// - commit is a lower bound of the committed prefix: persisted lazily, never ahead of what is committed.
// - view_headers is the suffix of the log this replica installed when its log view began, or the latest suffix it
//   persisted since (at most pipeline_max + 1 headers, ascending and hash-chained). At restart, journal entries in
//   that range must match them, and entries above it from an older view are stale (truncated by that view change).
// - recovering, once false, stays false (a replica is formatted recovering; only catching up clears it).
// - checkpoint names the latest snapshot of the state machine (and client table) made durable in snapshot.bin, as
//   of op checkpoint.at.op (0: none; a restart replays from op 1). commit >= checkpoint.at.op. The checkpoint op
//   never decreases. The journal never overwrites an op above it (so a restart finds every op it must replay).
#include <cstdint>
#include <vector>

#include "base/expected.h"
#include "consensus/message.h"

namespace rill::consensus {

// Where a checkpoint lives: snapshot.bin's region `slot` holds `size` bytes with this checksum, the state after
// applying the op whose header is `at` (a zero header: no checkpoint yet).
struct checkpoint_ref {
  header at;
  std::uint8_t slot = 0;
  std::uint64_t size = 0;
  checksum_t checksum;

  [[nodiscard]] std::uint64_t op() const noexcept { return at.op; }
  friend bool operator==(const checkpoint_ref&, const checkpoint_ref&) = default;
};

struct vsr_state {
  std::uint64_t cluster = 0;
  replica_t replica = 0;
  std::uint8_t replica_count = 0;
  view_t view{0};
  view_t log_view{0};
  op_t commit{0};
  std::vector<header> view_headers;
  checkpoint_ref checkpoint;
  // This replica lost its data (it was formatted anew as a member of a running group): it votes for nothing and
  // acknowledges nothing until it has caught up with a primary's log that began after the loss (replica.h).
  bool recovering = false;
  // This replica's incarnation: it rises each time the replica's disk is lost and formatted anew (issue 38, finding
  // 3), so that what an earlier incarnation said (votes, do_view_changes, prepare_oks) never counts once its disk is
  // gone. Set when the superblock is created (the host's choice: rilld the wall clock in ms, the simulator its tick),
  // and raised by a recovering replica, before its first vote, above every incarnation its peers name for it. 0: a
  // superblock of a build before incarnations (its messages are taken unchecked). At most incarnation_max.
  std::uint64_t incarnation = 0;

  friend bool operator==(const vsr_state&, const vsr_state&) = default;
};

// The encoded form: vsr_state_fixed_size bytes, then the view headers (at most view_headers_max, a format limit;
// a replica persists at most pipeline_max + 1).
inline constexpr std::size_t vsr_state_fixed_size = 196;
inline constexpr std::uint64_t incarnation_max = (std::uint64_t{1} << 48) - 1;  // six bytes of the fixed layout
inline constexpr std::size_t view_headers_max = 256;
static_assert(view_headers_max >= pipeline_max_limit + 1, "the view headers are a suffix of pipeline_max + 1");

// True when the headers are consecutive ops, each naming the one before as its parent (as view_headers are).
[[nodiscard]] bool headers_chained(std::span<const header> headers) noexcept;

// A fixed binary form (for the superblock): little-endian fields, then the headers. decode checks every header's
// checksum and the invariants above that it can see.
[[nodiscard]] std::vector<std::byte> encode(const vsr_state& s);
[[nodiscard]] expected<vsr_state> decode_vsr_state(std::span<const std::byte> bytes);

}  // namespace rill::consensus
