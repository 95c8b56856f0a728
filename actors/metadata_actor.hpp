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
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "actors/actor_request.hpp"
#include "actors/cluster_report.h"
#include "actors/coordinator_requests.h"
#include "actors/coordinators.h"
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
#include "base/elapsed_clock.h"
#include "config/server_config.h"
#include "consensus/cluster_group.h"
#include "consensus/group_host.h"
#include "consensus/local_group.h"
#include "consensus/replica_plane.h"
#include "net/proto/rill.pb.h"

namespace rill::actors {

// A node of a cluster of several (docs/operations.md, Clusters): what the metadata actor needs to host its replica
// of the metadata group and the replica plane.
struct metadata_cluster {
  std::uint64_t cluster_id = 0;
  std::uint64_t node_id = 0;
  std::vector<std::uint64_t> members;  // every member's id, ascending
  std::vector<consensus::plane_peer> peers;
  std::uint64_t members_digest = 0;
  bool recovering = false;  // formatted by `rilld recover`
  // Such a node's partition replicas of topics created at or before this time start recovering (node_identity.h).
  std::optional<std::uint64_t> topics_lost_through_ms;
  int replica_fd = -1;  // listening on network.replica_address (the metadata actor's plane takes it)
};

struct metadata_services {
  const config::server_config* config = nullptr;
  routing* routes = nullptr;
  const partition_services* partitions = nullptr;
  const group_services* groups = nullptr;
  std::size_t shards = 1;
  // The metadata group's journal ring and checkpoint interval (commands between checkpoints: a quarter of the ring).
  std::uint64_t journal_slots = 1024;
  // A replicated partition's journal ring (prepare headers, 4 KiB slots): how far behind a replica may fall and
  // still catch up by repair.
  std::uint32_t partition_journal_slots = 4096;
  const metadata_cluster* cluster = nullptr;  // null: a node alone (a one-replica local group)
  replica_links* links = nullptr;             // a cluster member: the plane's connected peers, for the partitions
  std::string advertised_address;             // a cluster member's client address, as other nodes hand it out
  std::uint64_t cluster_id = 0;               // from the data directory's identity (a node alone's too)
  cluster_board* board = nullptr;             // where the cluster status goes for /api/cluster and /metrics
  std::function<void(bool ok, const std::string&)> on_ready;  // recovery finished (called once, on shard 0)
};

// Internal message: retry carrying out the committed metadata after a step failed.
using reconcile_atom = caf::atom_constant<caf::atom("reconcile")>;

// Internal messages of a cluster member: a replica-plane tick (every replica_tick), and "the replica applied
// something" (a reconciler pass follows, coalesced).
using replica_tick_atom = caf::atom_constant<caf::atom("rtick")>;
using applied_atom = caf::atom_constant<caf::atom("applied")>;
using announce_atom = caf::atom_constant<caf::atom("announce")>;
// Internal message of a cluster member: remove the data of what was deleted while it was down, once it has caught up.
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
// Internal message: requests waiting for a metadata op (await_op_atom) whose time is up are answered.
using op_wait_expired_atom = caf::atom_constant<caf::atom("opexpired")>;
inline constexpr std::chrono::milliseconds replica_tick{10};
// The metadata group's id on the replica plane.
inline constexpr consensus::group_t metadata_group{0};
// How long a change committed through another node may take to be applied here before it is answered unavailable.
inline constexpr std::uint32_t cluster_apply_wait_ticks = 500;
// A request naming a metadata op this node has not reached (read your writes) waits at most this long, and at most
// op_waiters_max such requests wait at once; then they are answered unavailable.
inline constexpr std::chrono::milliseconds op_wait_timeout{5000};
// A cluster member whose replica plane has reached fewer members than a majority (itself included) for this long
// refuses a change at once (unavailable, naming the members it cannot reach) instead of sending it into a group that
// cannot commit it. A member that is connected but paused is not seen this way: the submit's own timeout covers it.
inline constexpr std::chrono::milliseconds quorum_lost_grace{1000};
inline constexpr std::size_t op_waiters_max = 4096;
// The consumer-group coordinators of a cluster (coordinators.h): fixed, so that every member, whatever its build's
// configuration, hashes a group onto the same one. Each replica's journal: coordinator_journal_slots ops of at most
// 64 KiB (about 16 MiB of disk, reserved at creation).
inline constexpr std::uint32_t coordinator_groups = 4;
inline constexpr std::uint64_t coordinator_journal_slots = 256;
// A member's poll that its node's replica of the coordinator does not yet show (the join or heartbeat that gave it
// the partition committed through another node) waits this long for the replica to catch up.
inline constexpr std::uint32_t coordinated_poll_catch_up_ticks = 100;

using metadata_actor_impl =
    metadata_actor_hdl::extend<io_done_signature, caf::reacts_to<reconcile_atom>, caf::reacts_to<replica_tick_atom>,
                               caf::reacts_to<applied_atom>, caf::reacts_to<announce_atom>,
                               caf::reacts_to<op_wait_expired_atom>, caf::reacts_to<sweep_atom>>;

// After a failed reconcile step, the first retry waits this long; each further failure doubles it, up to the max.
inline constexpr std::chrono::milliseconds reconcile_retry_min{1000};
inline constexpr std::chrono::milliseconds reconcile_retry_max{30000};

// Whether an error is a stream, topic, group or partition not found.
[[nodiscard]] bool is_not_found(const error& e);

class metadata_actor final : public metered<metadata_actor_impl::base>, public homed {
 public:
  metadata_actor(caf::actor_config& cfg, const metadata_services* services);
  behavior_type make_behavior() override;

 private:
  behavior_type serving();
  task<expected<void>> recover();
  // Appends to `orphans` the directories below `dir` (an entry of `tree` kept at depth parents.size()) that the
  // view does not know.
  // Removes the data of streams, topics, partitions and groups the view no longer names (deleted before a crash
  // could remove it). A node alone runs it at start; a cluster member only once a barrier has shown it the whole
  // committed metadata (sweep()): a member that restarts starts from its replica's durable commit, which may be
  // behind, and would take what was created since for orphans.
  task<expected<void>> remove_orphans();
  void sweep();
  task<expected<void>> sweep_once();
  // Once a recovered node has seen the whole committed metadata: the topics that may have lost data here are those
  // it knows now; the boundary is written into the node's identity (node_identity.h).
  task<expected<void>> settle_recovery();
  // Whether this node's replica of a partition of a topic created at `topic_created_ms` starts recovering.
  [[nodiscard]] bool replica_starts_recovering(std::uint64_t topic_created_ms) const;
  task<void> find_orphans(data_tree tree, std::string dir, std::vector<std::uint64_t> parents,
                          std::vector<std::string>* orphans);
  task<expected<metadata_reply>> mutate(std::uint16_t api, std::string header);
  task<expected<metadata_reply>> read(std::uint16_t api, std::string header);
  // Asks the partitions and groups what the plan needs, and builds the reply.
  task<expected<metadata_reply>> answer(reply_plan plan);
  // A GroupGetReply for a group another node coordinates (in a cluster: the topic's node), from the metadata alone,
  // naming that node; nullopt when no group has that namespace, or this node is alone.
  [[nodiscard]] std::optional<std::string> remote_group_reply(std::uint64_t ns) const;
  task<expected<void>> commit(proto::MetadataCommand cmd);
  // One reconciler pass (reconciler.h): runs the steps from what this node runs to what the view names, recording
  // each that succeeds, publishes the routing table, and on a failure reports it and schedules a retry. Runs as a
  // mutation does (one at a time with them).
  task<expected<void>> reconcile();
  class step_executor;  // run_now and run_step as a reconcile_executor (carry_out)
  task<expected<void>> run_step(const reconcile_step& step);  // a step that waits for I/O (destroy, remove, close)
  bool run_now(const reconcile_step& step);                   // a spawn or a resize, at once; false: not one
  void schedule_reconcile();
  [[nodiscard]] node_placement placement() const;
  // A partition's actor stops (destroyed, or closed to reopen): its replica group's messages and its leadership are
  // forgotten. Call before the step is recorded (the running entry names the group).
  void forget_replica(std::uint64_t ns);
  // What a topic may ask for as its replication factor here (the cluster's members; the configured default).
  [[nodiscard]] replication_limits replication() const;
  // A cluster member makes sure the metadata names its client address (network.advertised_address): retried until
  // a SetNode for it is committed.
  void announce();
  [[nodiscard]] proto::ClusterStatusReply cluster_status_reply() const;
  // Commits a Barrier through this node's session and waits until it is applied here (run as a mutation).
  task<expected<void>> barrier();
  // Queues `then` for the next barrier (one barrier serves every sync queued before it starts); synced() awaits it.
  void request_sync(std::function<void(expected<void>)> then);
  task<expected<void>> synced();
  task<expected<void>> announce_once();
  // A cluster member: opens the plane and the replica (recover()), ticks them, takes what the plane delivers.
  task<expected<void>> open_cluster(const std::string& dir);
  void on_frame(std::uint64_t from, consensus::peer_frame frame);
  void schedule_tick();
  void on_replica_tick();
  void publish();
  // A replicated topic's group (coordinators.h): a request, a member's poll, the description.
  task<expected<std::string>> coordinate(coordinator_msg msg);
  task<poll_reply> coordinated_poll(coordinated_poll_msg msg);
  // The group as the metadata names it (after catching up with the committed metadata when it is not found here).
  task<expected<coordinated_group>> find_coordinated(std::uint32_t stream_id, std::uint32_t topic_id,
                                                     std::uint32_t group_id);
  // The group as this node's replica of its coordinator has it, every partition's line included (with the offsets of
  // `offsets[p]` where given); a group the coordinator has not created yet is described as it will be: stable,
  // without members or committed offsets.
  [[nodiscard]] proto::GroupInfo describe_coordinated(
      const coordinated_group& g, std::uint32_t index,
      const std::vector<std::optional<proto::PartitionInfo>>& offsets = {}) const;
  task<expected<std::string>> describe_coordinated_with_offsets(coordinated_group g, std::uint32_t index,
                                                                bool offsets_only);
  // A GroupGetReply for a group of a replicated topic, from this node's replica of its coordinator (nullopt: no
  // such group, or not a replicated topic's).
  [[nodiscard]] std::optional<std::string> coordinated_group_reply(std::uint64_t ns) const;
  // A cluster member: an error when a majority has been out of reach for quorum_lost_grace (see above).
  [[nodiscard]] expected<void> check_quorum_reachable() const;
  // The op the metadata replica has applied (the state machine's view is the state after it).
  [[nodiscard]] std::uint64_t applied_op() const;
  // Answers the requests waiting for an op: those published_op_ reached (ok), and, with `expire`, those out of time.
  void release_op_waiters(bool expire);
  void pump();
  // Queues `job` as a mutation (one at a time, in order, with the changes); `then` gets its result once it is done.
  void enqueue(std::function<task<expected<void>>()> job, std::function<void(expected<void>)> then = {});

  const metadata_services* services_;
  std::unique_ptr<actor_io> io_;
  metadata_machine machine_;
  std::unique_ptr<consensus::local_group> group_;  // a node alone
  // A cluster member: the host of its groups, the plane, and its replica of the metadata group.
  std::unique_ptr<consensus::group_host> host_;
  std::unique_ptr<consensus::replica_plane> plane_;
  std::unique_ptr<consensus::cluster_group> cluster_;
  std::unique_ptr<coordinators> coordinators_;
  // Client connections (of this node) through which members of replicated topics' groups joined or beat, and the
  // coordinators they reached: a disconnect is sent to each.
  std::map<std::uint64_t, std::set<std::uint32_t>> coordinated_connections_;
  bool apply_noticed_ = false;  // an applied_atom is on its way
  std::uint64_t last_view_ = 0;
  std::uint64_t view_changes_ = 0;  // views the replica entered since the start
  std::uint64_t ticks_ = 0;
  std::vector<std::function<void(expected<void>)>> sync_waiting_;  // syncs for the next barrier
  bool sync_queued_ = false;
  static constexpr std::uint64_t board_ticks = 10;  // the cluster status is published this often (and at publish())
  bool closing_ = false;
  // A node formatted by `rilld recover`: see metadata_cluster; set at the first sweep when it was unset.
  std::optional<std::uint64_t> topics_lost_through_ms_;
  const metadata_state& state_ = machine_.state();
  std::map<std::uint64_t, partition_actor_hdl> partitions_;
  std::map<std::uint64_t, group_actor_hdl> groups_;  // by group_namespace()
  // The replicated partitions' group ids (partition_group_id) and the partition each is (partitions_' key): where
  // the plane's messages for a group go.
  std::map<std::uint64_t, std::uint64_t> replica_groups_;
  std::set<std::uint64_t> led_;  // replicated partitions (partition_namespace) whose primary is this node
  node_inventory running_;       // what partitions_ and groups_ run, and the data they held
  std::string reconcile_error_;  // of the last pass; empty once it carried everything out
  std::chrono::milliseconds reconcile_retry_ = reconcile_retry_min;
  bool reconcile_scheduled_ = false;
  bool caught_up_once_ = false;  // the metadata replica applied its view's head since the start (reconcile())
  // The time stamps this node puts into metadata commands and coordinator ops: the wall clock, but advanced by
  // elapsed time across its jumps (a jump forward would expire every member's session at once: issue 38, 8).
  std::unique_ptr<elapsed_clock> stamps_;
  std::deque<std::function<void()>> mutations_;  // queued while one runs
  bool mutating_ = false;
  bool ready_ = false;
  // Read your writes: the op whose view the routing table holds (this node has applied everything up to it), and
  // the requests waiting for a higher one.
  std::uint64_t published_op_ = 0;
  // Since when fewer than a majority of the members are reachable over the replica plane (none: a majority is).
  std::optional<std::chrono::nanoseconds> quorum_lost_since_;
  struct op_waiter {
    std::uint64_t op = 0;
    std::chrono::nanoseconds deadline{0};  // monotonic
    caf::typed_response_promise<outcome> promise;
  };
  std::vector<op_waiter> op_waiting_;
};

}  // namespace rill::actors
