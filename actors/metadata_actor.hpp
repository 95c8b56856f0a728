#pragma once
// metadata_actor: the only writer of metadata (shard 0). Each change is checked against metadata_state, then
// committed through a one-replica VSR group (consensus::local_group over <data>/metadata/journal.wal, superblock and
// snapshot.bin): durable in the journal, applied by metadata_machine, and only then published as a new routing
// table. What the committed view names is then carried out by the reconciler (reconciler.h): partitions and groups
// spawned on their shards, closed to reopen, destroyed with their data, the data of deleted streams and topics removed;
// a step that fails is retried (reconcile_retry_min, doubling to reconcile_retry_max), and no further change is made
// while one is left. A restart restores the last checkpoint, replays the journal after it and reconciles from nothing
// running. Mutations run one at a time, in arrival order. Its public contract
// is metadata_actor_hdl (interfaces.hpp); metadata_actor_impl adds its I/O completions.
#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>

#include "actors/actor_request.hpp"
#include "actors/group_actor.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/metadata_handlers.h"
#include "actors/metadata_machine.h"
#include "actors/metadata_state.h"
#include "actors/partition_actor.hpp"
#include "actors/reconciler.h"
#include "actors/routing.hpp"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "config/server_config.h"
#include "consensus/local_group.h"

namespace rill::actors {

struct metadata_services {
  const config::server_config* config = nullptr;
  routing* routes = nullptr;
  const partition_services* partitions = nullptr;
  const group_services* groups = nullptr;
  std::size_t shards = 1;
  // The metadata group's journal ring and checkpoint interval (commands between checkpoints: a quarter of the ring).
  std::uint64_t journal_slots = 1024;
  std::function<void(bool ok, const std::string&)> on_ready;  // recovery finished (called once, on shard 0)
};

// Internal message: retry carrying out the committed metadata after a step failed.
using reconcile_atom = caf::atom_constant<caf::atom("reconcile")>;

using metadata_actor_impl = metadata_actor_hdl::extend<io_done_signature, caf::reacts_to<reconcile_atom>>;

// After a failed reconcile step, the first retry waits this long; each further failure doubles it, up to the max.
inline constexpr std::chrono::milliseconds reconcile_retry_min{1000};
inline constexpr std::chrono::milliseconds reconcile_retry_max{30000};

class metadata_actor final : public metered<metadata_actor_impl::base>, public homed {
 public:
  metadata_actor(caf::actor_config& cfg, const metadata_services* services);
  behavior_type make_behavior() override;

 private:
  behavior_type serving();
  task<expected<void>> recover();
  // Appends to `orphans` the directories below `dir` (an entry of `tree` kept at depth parents.size()) that the
  // view does not know.
  task<void> find_orphans(data_tree tree, std::string dir, std::vector<std::uint64_t> parents,
                          std::vector<std::string>* orphans);
  task<expected<metadata_reply>> mutate(std::uint16_t api, std::string header);
  task<expected<metadata_reply>> read(std::uint16_t api, std::string header);
  // Asks the partitions and groups what the plan needs, and builds the reply.
  task<expected<metadata_reply>> answer(reply_plan plan);
  task<expected<void>> commit(proto::MetadataCommand cmd);
  // One reconciler pass (reconciler.h): runs the steps from what this node runs to what the view names, recording
  // each that succeeds, publishes the routing table, and on a failure reports it and schedules a retry. Runs as a
  // mutation does (one at a time with them).
  task<expected<void>> reconcile();
  task<expected<void>> run_step(const reconcile_step& step);  // a step that waits for I/O (destroy, remove, close)
  bool run_now(const reconcile_step& step);                   // a spawn or a resize, at once; false: not one
  void schedule_reconcile();
  void publish();
  void pump();

  const metadata_services* services_;
  std::unique_ptr<actor_io> io_;
  metadata_machine machine_;
  std::unique_ptr<consensus::local_group> group_;
  const metadata_state& state_ = machine_.state();
  std::map<std::uint64_t, partition_actor_hdl> partitions_;
  std::map<std::uint64_t, group_actor_hdl> groups_;  // by group_namespace()
  node_inventory running_;                           // what partitions_ and groups_ run, and the data they held
  std::string reconcile_error_;                      // of the last pass; empty once it carried everything out
  std::chrono::milliseconds reconcile_retry_ = reconcile_retry_min;
  bool reconcile_scheduled_ = false;
  std::deque<std::function<void()>> mutations_;  // queued while one runs
  bool mutating_ = false;
  bool ready_ = false;
};

}  // namespace rill::actors
