#pragma once
// group_machine: the consumer groups one coordinator serves, as the state machine of a VSR group (issue 19,
// docs/consumer-groups.md, "The replicated coordinator"). A cluster runs a fixed set of coordinator groups; a consumer
// group belongs to the one coordinator_for() names, by a hash of its key (as Kafka hashes a group onto a partition of
// its offsets topic). Each group is a group_state; every change to one (join, heartbeat, release, leave, commit,
// reset, resize, create, delete) and every expiry is one committed op, so the check that a member owns a partition
// in its generation and the commit of its offset are one step: a member that lost its partition (a zombie) can never
// commit over the new owner, whichever node it reaches.
//
// Time: group_state runs on a monotonic time. Here it is the primary's wall clock, stamped into each command by
// prepare() and never below the time of an op before it (committed or pending), so every replica applies the same
// time and a new primary whose clock is behind does not move time back. Sessions end only by an expire command the
// primary submits (with its time); a new primary first submits refresh, which starts every member's session again,
// so that members have a whole session timeout to find it.
//
// Commands are proto::CoordinatorCommand (net/proto/coordinator.proto), replies proto::CoordinatorReply, checkpoints
// proto::CoordinatorSnapshot (no maps: equal states give equal bytes).
//
// Invariants (asserted, or checked by tests/actors/group_machine_test.cpp after every op):
// - apply() never fails: a command that does not parse or check is answered with its status, changing nothing, the
//   same way on every replica; a commit naming several partitions applies all or none.
// - time_ms() never goes back; each group's own invariants hold (group_state::check_invariants).
// - at most groups_max groups and members_max members over all groups; group names 1..group_name_bytes_max bytes
//   (any bytes), member ids 1..member_id_bytes_max bytes.
//
// Contract: single-threaded, as the replica that drives it. The clock outlives the machine.
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "actors/group_state.h"
#include "base/expected.h"
#include "consensus/state_machine.h"

namespace rill::proto {
class CoordinatorCommand;
class CoordinatorReply;
}  // namespace rill::proto

namespace rill::actors {

inline constexpr std::uint8_t operation_coordinator_command = consensus::operation_user_min;

struct group_key {
  std::uint32_t stream = 0;
  std::uint32_t topic = 0;
  std::string name;  // any bytes
  friend auto operator<=>(const group_key&, const group_key&) = default;
};

// The coordinator group (0..coordinators-1) of a consumer group: MurmurHash2 of its key (stream and topic ids big
// endian, then the name), as Kafka's partitioner hashes keys.
[[nodiscard]] std::uint32_t coordinator_for(const group_key& key, std::uint32_t coordinators);

struct group_machine_options {
  std::uint8_t operation = operation_coordinator_command;  // the operation its commands travel as
  std::size_t groups_max = 4'096;                          // groups one coordinator serves
  std::size_t members_max = 65'536;                        // members over all its groups (bounds a checkpoint's size)
  std::size_t group_name_bytes_max = 255;                  // a Kafka group id fits
  std::size_t member_id_bytes_max = 255;
  std::uint32_t partitions_max = 100'000;  // a group's topic partition count
  std::uint64_t session_timeout_ms_min = 100;
  std::uint64_t session_timeout_ms_max = 3'600'000;
  // Test only, a deliberate bug the simulator must find: a commit of a partition its member does not own is stored
  // anyway (a zombie commits over the new owner).
  bool bug_commit_unowned = false;
  // Test only: a partition deleted and added back (another incarnation under its id) keeps the group's owner and
  // committed offset of the old one (the group skips the new one's records up to the old offset).
  bool bug_offsets_survive_partition = false;
};

class group_machine final : public consensus::state_machine {
 public:
  // Milliseconds since the Unix epoch (rilld: the system clock; tests and the simulator: their own).
  using wall_clock = std::function<std::int64_t()>;

  group_machine(group_machine_options options, wall_clock now_ms);

  std::vector<std::byte> apply(const consensus::header& prepare, std::span<const std::byte> body) override;
  proposal prepare(const consensus::header& request, const prepare_context& at, std::vector<std::byte> body,
                   std::span<const consensus::message* const> pending) override;
  [[nodiscard]] std::vector<std::byte> snapshot() const override;
  [[nodiscard]] bool restore(std::span<const std::byte> bytes) override;

  // For submitters: a command's bytes, and a reply's (corrupt_data when it does not parse).
  [[nodiscard]] static std::vector<std::byte> encode(const proto::CoordinatorCommand& command);
  [[nodiscard]] static expected<proto::CoordinatorReply> decode_reply(std::span<const std::byte> bytes);

  [[nodiscard]] const group_state* find(const group_key& key) const;
  [[nodiscard]] const std::map<group_key, group_state>& groups() const noexcept { return groups_; }
  [[nodiscard]] std::size_t members() const noexcept;
  // The time of the newest op applied (ms).
  [[nodiscard]] std::int64_t time_ms() const noexcept { return time_ms_; }
  // The earliest session end or revocation deadline over all groups (ms, rounded up), if any: when the primary
  // should submit expire.
  [[nodiscard]] std::optional<std::int64_t> next_deadline_ms() const;
  void check_invariants() const;

 private:
  void run(const proto::CoordinatorCommand& c, proto::CoordinatorReply& reply);

  group_machine_options options_;
  wall_clock now_ms_;
  std::map<group_key, group_state> groups_;
  std::int64_t time_ms_ = 0;
};

}  // namespace rill::actors
