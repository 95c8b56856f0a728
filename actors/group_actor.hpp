#pragma once
// group_actor: one consumer group of one topic, on the shard its key hashes to (group_namespace). A thin behavior
// over group_state, whose decisions group_handlers makes: join, leave, heartbeat (with releases), assignment,
// commit, committed offsets, describe, and the polls of its members, which pass through it so that ownership is
// checked twice: before the partition is asked, and again at the instant the data comes back (a long poll parked
// across a rebalance is refused, not delivered, when its member no longer owns the partition). Sessions end on the
// shard's deadline heap; a member whose connection closes is removed at once.
//
// Durability: every change (membership, generation, assignment, commit) is written to
// <data>/groups/<stream>/<topic>/<group>/state (atomic replacement, CRC-32C) before any reply that depends on it is
// sent (durable_versions); changes that arrive while a write is in flight ride the next one. A failed write fences
// the group: it refuses everything (storage_error) until a restart.
//
// Its public contract is group_actor_hdl (interfaces.hpp); group_actor_impl adds the messages only the actor itself
// (its I/O and session timer) sends.
#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "actors/durable_versions.h"
#include "actors/group_handlers.h"
#include "actors/group_state.h"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/routing.hpp"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/deadline_heap.h"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "base/clock.h"

namespace rill::actors {

// What every group actor shares; owned by the broker, outliving its actors.
struct group_services {
  const clock* clk = nullptr;
  storage::log_reporter* reporter = nullptr;
  const routing* routes = nullptr;  // partition actors, for lag in describe (may be null: no lag)
  std::uint64_t node_id = 0;        // this node, in a cluster of several (0: a node alone): describe names it
  // Tests: called after every message the actor handled, and at the instant a member's poll is answered with data
  // (member, partition): the state as it is then.
  std::function<void(const group_state&)> on_step;
  std::function<void(const group_state&, const std::string& member, std::uint32_t partition)> on_delivered;
};

// Internal message: the group's session timer (a member's session may have ended).
using expire_atom = caf::atom_constant<caf::atom("expire")>;

using group_actor_impl = group_actor_hdl::extend<io_done_signature, caf::reacts_to<expire_atom>>;

class group_actor final : public metered<group_actor_impl::base>, public homed {
 public:
  group_actor(caf::actor_config& cfg, std::size_t home, group_identity id, const group_services* services);
  behavior_type make_behavior() override;

 private:
  using done_fn = durable_versions::done_fn;

  behavior_type serving();
  task<expected<group_state>> load();
  caf::result<group_reply> handle(group_msg& msg);
  caf::result<poll_reply> handle_poll(group_poll_msg& msg);
  // The partition answered poll `poll_id`: delivered, refused (ownership moved) or, auto-committed, once durable.
  void polled(std::uint64_t poll_id, const group_poll& poll, poll_reply& r);
  // Why the group answers nothing now (fenced, not open, closing: `closing` says so), if it does not.
  std::optional<outcome> refusal(const char* closing) const;
  // The description, with the partitions' offsets (asked of their actors first).
  task<proto::GroupInfo> describe();
  // The state changed: write it, and look again at when the next session ends.
  void changed();
  // Runs `done` once everything changed so far is on disk (at once when it is), or with the error that fenced the
  // group.
  void when_durable(done_fn done);
  void persist();
  void publish_metrics();
  void schedule_expiry();
  void step();
  // Answers `header` once durable (or the error that fenced the group).
  void reply_when_durable(caf::response_promise rp, std::string header);
  // Close or destroy: answered once everything is durable (and, destroying, removed) and the actor quits.
  caf::result<outcome> finish(bool destroy);
  void maybe_quit();

  group_identity id_;
  const group_services* services_;
  std::shared_ptr<group_metrics> published_ = std::make_shared<group_metrics>();
  std::unique_ptr<actor_io> io_;
  std::optional<group_state> state_;
  durable_versions versions_;                          // fenced by a failed open or write
  std::optional<std::chrono::nanoseconds> expiry_at_;  // the session end a timer is set for
  std::size_t operations_ = 0;
  std::map<std::uint64_t, caf::response_promise> polls_;  // members' polls waiting for their partition
  std::uint64_t next_poll_ = 1;
  bool closing_ = false;
  caf::response_promise finished_;        // close or destroy: answered when the actor quits
  std::optional<outcome> finish_result_;  // set when only the actor's coroutines are left to finish
};

}  // namespace rill::actors
