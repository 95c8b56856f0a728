#pragma once
// group_state: one consumer group of one topic as the broker serves it: members and their sessions, generations,
// the assignment of the topic's partitions, and the committed offsets. Plain C++: time comes in as an argument
// (monotonic), nothing here does I/O (the group actor persists what changes), ids come from a counter.
//
// Protocol (cooperative, sticky):
// - join() adds a member (a server-made id, or the client's own stable id to rejoin as itself) and leave() or a
//   session that ran out (expire()) removes one. Every membership change starts a new generation and computes a
//   target assignment: balanced (each member floor(n/m) or ceil(n/m) partitions), sticky (a member keeps what it
//   owns up to its share), the rest placed by the group's strategy (range: contiguous blocks; round robin).
// - A partition whose target is its current owner stays; an unowned one goes to its target at once; one owned by
//   another member is *revoking*: it stays with its owner until that owner release()s it (or leaves, or its session
//   ends, or a session timeout passes without a release: the owner loses it anyway, and its reads and commits of it
//   are refused from then on), and only then goes to its target. So a partition never has two owners.
// - heartbeat() renews the session and tells the member its generation, what it owns and what it must give back.
// - A hand-over (a release) also starts a new generation, so that no partition is read by two members under the same
//   generation: its new owner reads under one its old owner never had.
// - Reads and commits carry the member id and generation: an unknown member, a stale generation or a partition the
//   member does not own is refused with a distinct error (group_errc).
//
// Invariants (check_invariants(), asserted by tests after every step):
// - every partition has at most one owner, and it is a member;
// - when the group has members and nothing is revoking (stable()), every partition is owned and each member owns
//   its share;
// - committed offsets never go backwards (a lower commit is refused);
// - the generation only grows.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "base/expected.h"

namespace rill::proto {
class GroupStateWhole;
}

namespace rill::actors {

enum class assignment_strategy { range, round_robin };

enum class group_errc : int {
  unknown_member = 1,  // not (or no longer) a member: join again
  stale_generation,    // the group moved on: heartbeat for the current generation
  not_owner,           // the partition is not (or not yet) this member's
  bad_partition,       // outside the topic
  offset_regression,   // a commit below the committed offset
  group_full,          // members_max members already
  not_empty,           // an offset reset while the group has members
};
const std::error_category& group_category() noexcept;
inline std::error_code make_error_code(group_errc e) noexcept {
  return {static_cast<int>(e), group_category()};
}

class group_state {
 public:
  using time_point = std::chrono::nanoseconds;  // monotonic
  static constexpr std::size_t members_max = 10'000;

  group_state(std::uint32_t partitions, assignment_strategy strategy, std::chrono::milliseconds session_timeout);

  struct joined {
    std::string member_id;
    std::uint64_t generation = 0;
  };
  // Which client connection a member last spoke through (0: none): when that connection closes, disconnected()
  // removes the member at once instead of waiting for its session to end.
  using connection_id = std::uint64_t;

  // A new member, or (with its id) a member rejoining: a live member with that id is refreshed, not duplicated.
  expected<joined> join(const std::optional<std::string>& member_id, time_point now, connection_id conn = 0);
  expected<void> leave(const std::string& member);
  // Removes the members whose last connection was `conn`; returns their ids.
  std::vector<std::string> disconnected(connection_id conn);

  struct member_view {
    std::uint64_t generation = 0;
    std::vector<std::uint32_t> owned;     // may read and commit these
    std::vector<std::uint64_t> acquired;  // per owned partition: the generation it came to this member
    std::vector<std::uint32_t> revoking;  // part of owned: stop reading them and release() them
  };
  // Renews the session. `released`: partitions the member no longer reads; those being revoked from it go to their
  // targets, the others are ignored (the member reads them again once it sees them owned and not revoking).
  expected<member_view> heartbeat(const std::string& member, time_point now,
                                  std::span<const std::uint32_t> released = {}, connection_id conn = 0);
  // The member's assignment, without renewing anything.
  expected<member_view> assignment(const std::string& member) const;
  // The member stopped reading these partitions (each must be one it is revoking); they go to their targets.
  expected<void> release(const std::string& member, std::uint64_t generation,
                         std::span<const std::uint32_t> partitions);
  // Removes every member whose session ended at or before `now`, and takes from their owners the partitions whose
  // revocation began a session timeout ago or more without a release (a new generation); returns the removed ids.
  std::vector<std::string> expire(time_point now);

  // May `member` in `generation` read `partition` now?
  expected<void> check_read(const std::string& member, std::uint64_t generation, std::uint32_t partition) const;
  // At the delivery of a read that passed check_read in `generation`: does `member` still own `partition`, without
  // having lost it and got it back since (then the read's start may be behind what another owner committed)?
  [[nodiscard]] bool still_owns(const std::string& member, std::uint64_t generation, std::uint32_t partition) const;
  // The latest time known, for what starts without a time of its own (revocations begun by leave, disconnected,
  // resize). The actor calls it before each change.
  void advance(time_point now) noexcept { now_ = std::max(now_, now); }
  expected<void> commit(const std::string& member, std::uint64_t generation, std::uint32_t partition,
                        std::uint64_t offset);
  [[nodiscard]] std::optional<std::uint64_t> committed(std::uint32_t partition) const;
  // Every partition's committed offset, by partition.
  [[nodiscard]] std::vector<std::optional<std::uint64_t>> committed_offsets() const;
  // Test only (group_machine_options::bug_commit_unowned): stores an offset without any check.
  void bug_store_committed(std::uint32_t partition, std::uint64_t offset) { committed_[partition] = offset; }
  // An administrator's reset of a committed offset (backwards too): only while the group has no members.
  expected<void> reset(std::uint32_t partition, std::uint64_t offset);
  // The topic's partition count changed: a new generation; partitions gone lose their owners and offsets.
  // `created` (empty, or one per partition): the metadata op that made each partition (0: unknown). A partition whose
  // known incarnation changes is another partition (deleted and added back): it loses its owner and its committed
  // offset, as a partition removed and added would. `keep_replaced` (test only, a deliberate bug): it keeps them.
  void resize(std::uint32_t partitions, std::span<const std::uint64_t> created = {}, bool keep_replaced = false);
  // Per partition, the metadata op that created it (0: unknown).
  [[nodiscard]] const std::vector<std::uint64_t>& partitions_created() const noexcept { return created_; }
  // A new group's: one per partition.
  void set_partitions_created(std::span<const std::uint64_t> created);

  // Persistence: everything but the sessions, which restart at `now` on restore (members that are gone then end
  // their sessions and are removed; the others keep their partitions without a rebalance).
  [[nodiscard]] std::string serialize() const;
  static expected<group_state> restore(std::string_view bytes, assignment_strategy strategy,
                                       std::chrono::milliseconds session_timeout, std::uint32_t partitions,
                                       time_point now);

  // A new coordinator took over (a replicated group's new primary): every member's session starts again at `now`,
  // as after a restart, so that members have a whole session timeout to find it.
  void refresh(time_point now);

  // The whole state, sessions and revocation deadlines included (a replicated coordinator's checkpoint: restored,
  // the state is exactly this one, and behaves the same). load_whole() checks what it can (invalid_argument).
  void save_whole(proto::GroupStateWhole& out) const;
  static expected<group_state> load_whole(const proto::GroupStateWhole& in);
  [[nodiscard]] assignment_strategy strategy() const noexcept { return strategy_; }
  [[nodiscard]] std::chrono::nanoseconds session_timeout() const noexcept { return session_timeout_; }

  struct member_info {
    std::string id;
    time_point expires_at{0};
  };
  [[nodiscard]] std::vector<member_info> member_list() const;

  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  // Which incarnation of its name this group is (a replicated coordinator's: the metadata's group id; 0 elsewhere).
  [[nodiscard]] std::uint32_t incarnation() const noexcept { return incarnation_; }
  void set_incarnation(std::uint32_t id) noexcept { incarnation_ = id; }
  [[nodiscard]] std::uint32_t partitions() const noexcept { return static_cast<std::uint32_t>(owner_.size()); }
  [[nodiscard]] std::size_t members() const noexcept { return members_.size(); }
  [[nodiscard]] bool has_member(const std::string& id) const { return members_.contains(id); }
  [[nodiscard]] std::optional<std::string> owner(std::uint32_t partition) const;
  [[nodiscard]] std::optional<std::string> target(std::uint32_t partition) const;
  // Nothing is waiting for a revocation.
  [[nodiscard]] bool stable() const noexcept;
  // The earliest session end or revocation deadline, if any.
  [[nodiscard]] std::optional<time_point> next_deadline() const;
  void check_invariants() const;

 private:
  struct member {
    time_point expires_at{0};
    connection_id conn = 0;
  };
  void remove_member(const std::string& id);
  // Starts the revocation clock of partitions that began revoking, stops it for those that stopped.
  void note_revocations();
  // Revoking partitions go to their targets, under a new generation.
  void hand_over(const std::vector<std::uint32_t>& partitions);
  member_view view_of(const std::string& id) const;
  // A membership change: new generation, new target, cooperative hand-over of what can move now.
  void rebalance();
  std::vector<std::optional<std::string>> compute_target() const;
  expected<void> check_member(const std::string& member, std::uint64_t generation) const;

  assignment_strategy strategy_;
  std::chrono::nanoseconds session_timeout_;
  std::uint64_t generation_ = 0;
  std::uint64_t next_member_ = 1;
  std::uint32_t incarnation_ = 0;
  std::map<std::string, member> members_;             // ordered by id: assignments are deterministic
  std::vector<std::optional<std::string>> owner_;     // per partition: who may read it now
  std::vector<std::optional<std::string>> target_;    // per partition: who should own it
  std::map<std::uint32_t, std::uint64_t> committed_;  // per partition
  // Per partition being revoked: when its owner loses it even without a release (a session timeout after the
  // revocation began).
  std::vector<std::optional<time_point>> revoke_deadline_;
  std::vector<std::uint64_t> acquired_;  // per partition: the generation its owner got it
  std::vector<std::uint64_t> created_;   // per partition: the metadata op that made it (0: unknown)
  time_point now_{0};                    // the latest time any call brought (revocations started without one use it)
};

}  // namespace rill::actors

template <>
struct std::is_error_code_enum<rill::actors::group_errc> : std::true_type {};
