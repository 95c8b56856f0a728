#pragma once
// replica_partition_actor: this node's replica of a replicated partition (a topic with replication_factor > 1 in a
// cluster; docs/replication.md), on the shard its namespace hashes to. A thin behavior over consensus::partition_group
// (the VSR replica over the partition's journal and log, and the sessions its primary submits through), speaking
// the same interface as partition_actor (partition_actor_hdl), so connections, groups and the metadata actor need
// not know which kind serves a partition.
//
// - Produce: while its replica is primary, each batch of the request is submitted in turn (stamped by the primary,
//   acknowledged once a quorum of replicas has it durable: header in the journal, batch in the log, both synced);
//   the reply names each batch's base offset. A backup, or a primary in a view change, answers not_primary naming
//   the node of the primary as its replica knows it (and its client address, so clients follow it).
// - Poll: served by the primary from its log, which shows consumers committed batches only; parked polls wake on
//   every commit. A backup answers not_primary (its committed prefix may lag).
// - Consumer offsets (named consumers) are operations of the partition's group: a stored offset survives any node.
// - Retention: the topic's, every retention interval, over what this replica never needs again (batches at or
//   below its durable checkpoint); a replica behind a peer's retention starts its log over at the peer's log start
//   in state transfer.
// - VSR messages come from the metadata actor, which owns the replica plane (replica_frame), and go back to it to be
//   sent; the replica is ticked every replica_tick while the actor lives.
//
// Files: the partition's log in its directory, and the group's journal.wal, superblock and snapshot.bin in its vsr/
// subdirectory. A storage failure fences the replica: produces are refused (unavailable), the others go on without
// it, and the replica reopens the group from its files after a pause (a restart of the replica: it rejoins and
// catches up by repair). That lifecycle, the produces and offset stores, and the refusals are partition_replica's
// (plain code the simulator runs too); this actor is its shell: mailbox, promises, long polls, timers, metrics.
#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <optional>

#include "actors/interfaces.hpp"
#include "actors/long_poll.h"
#include "actors/messages.hpp"
#include "actors/partition_actor.hpp"
#include "actors/partition_replica.h"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "consensus/partition_group.h"

namespace rill::actors {

// Where a replicated partition's group runs and how it reaches its peers.
struct replica_placement {
  std::uint64_t group = 0;             // partition_group_id
  std::vector<std::uint64_t> members;  // node ids in replica order (the first: the preferred primary)
  std::uint64_t self = 0;
  metadata_actor_hdl plane;  // sends on the replica plane
  // The client address of a node, as the committed metadata knows it (empty: not announced yet).
  std::function<std::string(std::uint64_t node)> address_of;
  std::uint32_t journal_slots = 4096;  // the group's journal ring (prepare headers)
  bool recovering = false;             // this node lost its disk: a replica created now starts recovering
};

using replica_tick_msg_atom = caf::atom_constant<caf::atom("rtick")>;  // the replica's next tick is due

using replica_partition_impl =
    partition_actor_hdl::extend<io_done_signature, caf::reacts_to<poll_timeout_atom, std::int64_t>,
                                caf::reacts_to<replica_tick_msg_atom>>;

class replica_partition_actor final : public metered<replica_partition_impl::base>, public homed {
 public:
  // Replica messages go out every replica_tick at most this late.
  static constexpr std::chrono::milliseconds tick_period{10};

  replica_partition_actor(caf::actor_config& cfg, std::size_t home, partition_identity id, storage::log_options options,
                          replica_placement placement, const partition_services* services);
  ~replica_partition_actor() override;
  behavior_type make_behavior() override;

 private:
  using poll_waiter = partition_poll_waiter;
  using waiter_id = long_poll<poll_waiter>::waiter_id;
  class plane_transport;

  behavior_type serving();
  // Adds this partition to (or removes it from) the node's under-replicated count.
  void count_under_replicated(bool under);
  void schedule_tick();
  void on_tick();
  void on_committed();
  void publish_gauges();
  // This replica leads and a backup is out of reach (its node not connected on the replica plane) or lagging
  // (partition_group::lagging()).
  [[nodiscard]] bool under_replicated() const;
  // A refusal of the replica's (partition_replica::refusal and the rest) as the client is told it: not_primary
  // carries the primary's client address.
  [[nodiscard]] outcome outcome_of(const replica_refusal& r) const;
  caf::result<produce_reply> produce(produce_msg& msg);
  caf::result<offset_reply> store_offset(offset_msg& msg);
  void run_poll(waiter_id id);
  void run_polls(const std::vector<waiter_id>& ids);
  void schedule_poll_deadline(waiter_id id);
  // Answers parked polls, then closes the replica (and removes the partition's directory when destroying); then
  // quits.
  caf::result<outcome> finish(bool destroy);

  partition_identity id_;
  storage::log_options options_;
  replica_placement placement_;
  const partition_services* services_;
  std::shared_ptr<partition_metrics> published_ = std::make_shared<partition_metrics>();
  log_timing timing_{*published_};
  std::unique_ptr<actor_io> io_;
  std::unique_ptr<plane_transport> transport_;
  std::unique_ptr<partition_replica> replica_;  // the replica's lifecycle and requests (plain: partition_replica.h)
  long_poll<poll_waiter> polls_;
  std::size_t operations_ = 0;  // coroutines of this actor still running (polls)
  bool closing_ = false;
  std::uint64_t ticks_ = 0;
  bool counted_under_ = false;  // counted in replica_links::under_replicated
};

}  // namespace rill::actors
