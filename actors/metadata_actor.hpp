#pragma once
// metadata_actor: the only writer of metadata (shard 0). Each change is checked against metadata_state, then
// committed through a one-replica VSR group (consensus::local_group over <data>/metadata/journal.wal, superblock and
// snapshot.bin): durable in the journal, applied by metadata_machine, and only then published as a new routing
// table; partitions are spawned on their shards and destroyed with their data. A restart restores the last
// checkpoint and replays the journal after it. Mutations run one at a time, in arrival order. Its public contract
// is metadata_actor_hdl (interfaces.hpp); metadata_actor_impl adds its I/O completions.
#include <caf/all.hpp>

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

using metadata_actor_impl = metadata_actor_hdl::extend<io_done_signature>;

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
  // Runs a committed change's effects (metadata_handlers.h), then answers its reply plan.
  task<expected<metadata_reply>> run_effects(metadata_effects effects);
  // Asks the partitions and groups what the plan needs, and builds the reply.
  task<expected<metadata_reply>> answer(reply_plan plan);
  task<expected<void>> commit(proto::MetadataCommand cmd);
  task<expected<void>> destroy_partitions(std::vector<std::uint64_t> namespaces);
  void spawn_partitions(const partition_range& range);
  void spawn_group(const group_ref& group);
  // Destroys the group actors (and their state) of these group namespaces.
  task<expected<void>> destroy_groups(std::vector<std::uint64_t> namespaces);
  void publish();
  void pump();

  const metadata_services* services_;
  std::unique_ptr<actor_io> io_;
  metadata_machine machine_;
  std::unique_ptr<consensus::local_group> group_;
  const metadata_state& state_ = machine_.state();
  std::map<std::uint64_t, partition_actor_hdl> partitions_;
  std::map<std::uint64_t, group_actor_hdl> groups_;  // by group_namespace()
  std::deque<std::function<void()>> mutations_;      // queued while one runs
  bool mutating_ = false;
  bool ready_ = false;
};

}  // namespace rill::actors
