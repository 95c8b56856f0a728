#pragma once
// coordinated_flows: what a node does, over its coordinators (coordinators.h), with a request to a replicated topic's
// consumer group, as coroutines in plain code: rilld's metadata actor runs them, and so do the simulator's nodes
// (simulation/node_cluster.h), so the simulator checks the code that serves members. The decisions are
// coordinator_requests' (plan_coordinator_request, plan_coordinated_poll, check_delivery); these add the waits: the
// group made in its coordinator first, read barriers, the catch-up of a replica that lags, the auto-commit.
//
// Invariants
// - A read (is_coordinator_read) is answered only after a read barrier: it sees every change committed before it
//   began, whichever node it reaches.
// - A member's poll delivers data only once its ownership of the partition is confirmed against the committed state
//   (its auto-commit applied, checked against member and generation, or a read barrier, then check_delivery): a
//   member whose partition moved (a zombie) reads nothing, even through a node whose replica of the coordinator lags
//   (issue 38, finding 5: one reader per partition at any instant).
//
// Contract: single-threaded, on the coordinators' thread; `c` outlives every call.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "actors/coordinator_requests.h"
#include "actors/coordinators.h"
#include "actors/group_handlers.h"
#include "base/expected.h"
#include "base/task.h"

namespace rill::actors {

// Creates or resizes g in its coordinator when this node's replica shows it missing, of another incarnation of its
// name (removed first), or of another partition count. Errors: submit()'s, the coordinator's refusal.
task<expected<void>> ensure_coordinated(coordinators& c, const coordinated_group& g);

// What a group request came to: the reply header, or a description to make (describe, offsets_only).
struct coordinated_answer {
  std::string header;
  bool describe = false;
  bool offsets_only = false;
};
// A group API request (plan_coordinator_request's) through connection `conn` (connection_key): a read after a
// barrier, a change committed in the group's coordinator. `on_session` runs before a join or heartbeat is submitted
// (it may commit even if the submit fails: the caller tells the coordinator when that connection closes). Errors:
// plan_coordinator_request's, submit()'s, the coordinator's refusal.
task<expected<coordinated_answer>> coordinate(coordinators& c, const coordinated_group& g, std::uint16_t api,
                                              std::string header, std::uint64_t conn,
                                              std::function<void()> on_session = {});

// A member's poll of partition `request.partition_id()` of g's topic, planned against this node's replica; one that
// replica refuses is planned again once it has caught up (within catch_up_ticks): the join or heartbeat that gave
// the member the partition may have committed through another node. Errors: group_errc's, group_not_found.
task<expected<group_poll>> plan_member_poll(coordinators& c, const coordinated_group& g, proto::PollRequest request,
                                            std::uint32_t catch_up_ticks);

// The member's poll read data up to `next_offset` (nullopt: it read none). Confirms the member still owns the
// partition against the committed state before anything goes out (see the invariants): ok, or why not (not_owner,
// the group gone, submit()'s errors). With auto-commit, a commit that applies is the confirmation, and the data goes
// out whatever changed after it (it was committed: refusing it would make the group skip it). `bug` (test only):
// a deliberate bug the node simulator must find (poll_bug).
enum class poll_bug {
  none,
  // This node's replica checked as it is, then the auto-commit when it moves the offset (the zombie reads of issue
  // 38, finding 5, as they were: a poll that commits nothing new is never confirmed).
  unconfirmed,
  // After an applied auto-commit, ownership checked again against the state then: data whose offset is committed is
  // refused, and the group skips it (as rill-sim --node found it).
  recheck_after_commit,
};
task<expected<void>> confirm_member_poll(coordinators& c, const coordinated_group& g, const group_poll& planned,
                                         std::optional<std::int64_t> next_offset, poll_bug bug = poll_bug::none);

}  // namespace rill::actors
