#pragma once
// node_cluster: the simulator of whole nodes (issue 38). Each simulated node runs what rilld runs above its
// replicas, on one simulated disk of its own: the metadata group (consensus::cluster_group over actors::
// metadata_machine, hosted by the node's consensus::group_host with its coalesced heartbeats), the reconciler
// carrying out the committed metadata (actors::carry_out: plan_reconcile's steps, in order), and an
// actors::partition_replica for every replicated partition placed on the node (its partition_group, partition_machine
// and partition_storage, reopened after a fence, its retention on a schedule). Only I/O (simulation::sim_disk), time
// (ticks: 10 ms each, a manual clock per node), the network (simulation::sim_network) and randomness are simulated.
//
// The workload (node_workload.h) drives it from the seed: an operator making metadata changes (topics created and
// deleted, partitions deleted and added back, retention changed), idempotent producers that retry through other
// nodes, and named consumers. Faults: crashes (a power loss, or a process crash that keeps the page cache), network
// partitions, loss and duplication, lost disks, wall-clock jumps, and fdatasyncs failing with EIO (a partition
// replica fences and reopens in its process; a node whose metadata group fences restarts).
//
// A run: the safety phase (faults; the checkers after every step) then the liveness phase (faults stop, every node
// restarts, partitions heal): within the bound every node must have applied the same metadata and carried it out,
// every partition's replicas must agree on their committed logs, and the producers must be done. Then the final
// check reads every replica's log whole (node_checker.h).
//
// Invariants: every random choice comes from streams derived from the seed, containers iterate in a fixed order, and
// each node's coroutines resume only from its own disk's completions or the harness's calls: a seed replays exactly.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/metadata_state.h"
#include "base/random.h"
#include "simulation/network.h"
#include "simulation/trace.h"

namespace rill::actors {
class partition_replica;
class coordinators;
}  // namespace rill::actors

namespace rill::simulation {

class node_workload;
class node_checker;

// The consumer-group coordinators a simulated cluster runs (rilld: actors::coordinator_groups).
inline constexpr std::uint32_t coordinator_count = 2;

// Deliberate bugs of the code above the replica (test only): the simulator's tests prove the checkers find them.
struct node_bugs {
  // A partition deleted and added back (or its topic's ids reused in the same millisecond) gets the old partition's
  // VSR group id and the reconciler's identity: a node down across the delete and the add starts its old replica
  // (review finding 1 as it was).
  bool partition_id_reused = false;
  // Batches are stamped with the node's wall clock as it reads, its jumps included (finding 8 as it was).
  bool stamps_follow_wall = false;
  // A primary whose quorum no longer hears it serves on: stale reads for as long as a cut lasts (finding 5 as it was).
  bool primary_never_silenced = false;
  // A member's poll delivers once this node's replica of the coordinator says it owns the partition, with no
  // auto-commit nor read barrier to confirm it against the committed state (finding 5's zombie reads as they were).
  bool poll_unconfirmed = false;
  // A member's poll whose auto-commit applied is checked again against a later state and refused: the group has
  // committed past records nobody got.
  bool poll_recheck_after_commit = false;
  // A partition deleted and added back keeps its consumer groups' committed offsets and owner (the coordinators knew
  // partitions by count only): the group skips the new partition's records up to the old offset.
  bool group_offsets_survive = false;
  // A replica whose log is behind its applied state (it installed a peer's checkpoint; the copy of the log is due)
  // serves reads from that log, a primary too.
  bool reads_while_copying = false;
  // make_dirs syncs only the parents of the directories it creates (process-wide:
  // storage::set_bug_dirs_trust_existing): a directory whose parent's fsync failed is found again by the next open and
  // never made durable.
  bool dirs_trust_existing = false;
};

struct node_cluster_options {
  std::uint64_t seed = 0;
  std::uint8_t nodes = 3;                 // 1, or 3 to 5: the metadata group spans every node
  std::uint64_t safety_ticks = 6'000;     // 60 s of faults at most (or until the workload is done)
  std::uint64_t liveness_ticks = 20'000;  // the healed cluster must converge within this
  network_options network;
  std::uint32_t crash_ppm = 150;              // per node per tick
  std::uint32_t process_crash_ppm = 500'000;  // of the crashes, those that keep the page cache
  std::uint32_t restart_ticks_max = 300;
  std::uint32_t partition_ppm = 60;  // per tick: a network partition begins (one at a time)
  std::uint32_t partition_ticks_max = 1'500;
  std::uint32_t disk_lost_ppm = 0;   // per node per tick (3 nodes or more; at most a minority lost at once)
  std::uint32_t clock_jump_ppm = 0;  // per node per tick: its wall clock steps up to an hour forward or back
  // Per fdatasync/fsync of any node: it fails with EIO (what it covered is never durable, though still readable in
  // the page cache). A partition replica fences and reopens in its process; a node whose metadata group fences is
  // restarted (as its operator or supervisor would, rilld telling them to).
  std::uint32_t sync_error_ppm = 0;
  std::uint32_t producers = 3;
  std::uint32_t produces = 40;         // per producer
  std::uint32_t operator_changes = 8;  // metadata changes over the run
  std::uint32_t consumers = 2;         // named consumers
  std::uint32_t members = 2;           // consumer-group members (each topic has a group)
  std::uint32_t member_pause_ppm = 0;  // per member per tick: it pauses (no heartbeats) up to 3 session timeouts
  node_bugs bugs;
};

enum class node_outcome { passed, safety_failure, liveness_failure };

struct node_run_result {
  node_outcome result = node_outcome::passed;
  std::string detail;
  std::uint64_t hash = 0;
  std::uint64_t ticks = 0;
  std::uint64_t metadata_changes = 0;  // operator commands committed
  std::uint64_t produced = 0;          // produces acknowledged
  std::uint64_t produce_retries = 0;   // produces sent again (a timeout, a node lost)
  std::uint64_t records_read = 0;      // by consumers and the final check
  std::uint64_t group_records = 0;     // delivered to consumer-group members
  std::uint64_t zombie_refusals = 0;   // members' polls refused (not the owner, a stale generation)
  std::uint64_t pauses = 0;            // members paused
  std::uint64_t crashes = 0;
  std::uint64_t process_crashes = 0;
  std::uint64_t disks_lost = 0;
  std::uint64_t clock_jumps = 0;
  std::uint64_t sync_errors = 0;        // fdatasyncs failed with EIO (every node's disk)
  std::uint64_t fence_restarts = 0;     // processes restarted because their metadata group fenced
  std::uint64_t partition_reopens = 0;  // partition replicas reopened in their process after a fence
  std::uint64_t partitions_hosted = 0;  // replicas created over the run (every node)
  std::uint64_t reconcile_steps = 0;
  std::uint64_t settings_updates = 0;  // partitions whose retention changed in place
};

class node_cluster {
 public:
  node_cluster(const node_cluster_options& options, trace& t);
  ~node_cluster();
  node_cluster(const node_cluster&) = delete;
  node_cluster& operator=(const node_cluster&) = delete;
  node_run_result run();

  struct node;
  // For the workload and the checker.
  [[nodiscard]] std::uint64_t now() const noexcept { return now_; }
  [[nodiscard]] std::size_t node_count() const noexcept { return nodes_.size(); }
  [[nodiscard]] node& node_at(std::size_t i) { return *nodes_.at(i); }
  [[nodiscard]] const node_cluster_options& options() const noexcept { return options_; }
  [[nodiscard]] node_checker& checker() { return *checker_; }
  [[nodiscard]] bool liveness() const noexcept { return liveness_; }
  [[nodiscard]] bool debug() const noexcept { return debug_; }  // RILL_SIM_DEBUG: print what happens
  // Node i is up, its metadata group open.
  [[nodiscard]] bool serving(std::size_t i) const;
  // Node i's replica of the partition with namespace `ns` (null when it runs none now).
  [[nodiscard]] actors::partition_replica* replica_at(std::size_t i, std::uint64_t ns) const;
  // Node i's process (its starts so far; 0 while it is down): a request in flight to another one is lost.
  [[nodiscard]] std::uint64_t process_at(std::size_t i) const;
  // Node i's consumer-group coordinators (null while the node is down or they are not open).
  [[nodiscard]] actors::coordinators* coordinators_at(std::size_t i) const;
  // Node i's committed metadata (null while its metadata group is not open), and the metadata op it has applied.
  [[nodiscard]] std::shared_ptr<const actors::metadata_view> view_at(std::size_t i) const;
  [[nodiscard]] std::uint64_t applied_at(std::size_t i) const;
  // Submits a metadata command through node i (its own session); `done` gets whether it was applied.
  void submit_metadata(std::size_t i, std::vector<std::byte> command, std::function<void(bool applied)> done);

 private:
  class node_net;
  class executor;
  void step();
  void start(node& n);
  void open_coordinators(node& n);
  void crash(node& n, bool power_loss);
  void lose_disk(node& n);
  void inject_faults();
  void enter_liveness();
  void deliver();
  void tick_node(node& n);
  void reconcile(node& n);
  [[nodiscard]] bool converged(std::string* why) const;
  [[nodiscard]] std::vector<std::uint64_t> member_ids() const;  // every node's id, ascending
  void final_check();
  void fail(std::string what);
  // A prepare_ok a replica of node `n` sends for group `g`: its prepare must be durable on n's disk by then (in the
  // journal slot, reachable through durable directory entries), else a power loss can take an op a quorum counted.
  void check_ack_durable(const node& n, std::uint64_t group, const consensus::message& ok);
  // Adds the reopens of replicas leaving the node (closed, or their process dead) to the result.
  void count_reopens(const actors::partition_replica& r);

  node_cluster_options options_;
  trace& trace_;
  prng rng_;
  sim_network network_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::unique_ptr<node_checker> checker_;
  std::unique_ptr<node_workload> workload_;
  std::uint64_t now_ = 0;
  bool liveness_ = false;
  bool debug_ = false;
  std::uint64_t partition_until_ = 0;
  node_run_result result_;
};

// A whole-node run's options drawn from the seed (nodes, faults, workload), with these deliberate bugs planted.
node_cluster_options node_options_for(std::uint64_t seed, const std::vector<std::string>& bugs = {});
// A deliberate bug of the code above the replica (rill-sim --node --bug NAME): its name, what it breaks, and its
// switch in node_bugs.
struct node_bug {
  const char* name;
  const char* breaks;
  bool node_bugs::*flag;
};
inline const std::vector<node_bug>& node_bug_list() {
  static const std::vector<node_bug> bugs = {
      {"partition_id_reused",
       "a partition deleted and added back gets the old one's group id: a node down across it brings its old replica "
       "back",
       &node_bugs::partition_id_reused},
      {"stamps_follow_wall",
       "a primary stamps batches with its wall clock as it reads: a clock jump forward stamps records an hour ahead, "
       "and a jump back stops stamped time",
       &node_bugs::stamps_follow_wall},
      {"primary_never_silenced",
       "a primary cut off from its group serves on: its consumers read stale data while a new primary takes writes",
       &node_bugs::primary_never_silenced},
      {"group_offsets_survive",
       "a partition deleted and added back keeps its groups' committed offsets: the groups skip its new records up "
       "to the old offset",
       &node_bugs::group_offsets_survive},
      {"reads_while_copying",
       "a replica that installed its peers' checkpoint serves reads from its log before it has copied it: a primary "
       "shows a high watermark below what was acknowledged",
       &node_bugs::reads_while_copying},
      {"poll_recheck_after_commit",
       "a group member's poll whose auto-commit applied is refused when a later state shows the partition moved: the "
       "group skips records nobody got",
       &node_bugs::poll_recheck_after_commit},
      {"poll_unconfirmed",
       "a group member's poll is checked against its node's replica of the coordinator only: a zombie whose "
       "partition moved reads on through a node whose replica lags",
       &node_bugs::poll_unconfirmed},
      {"dirs_trust_existing",
       "a directory whose parent's fsync failed once is taken as durable by the next open: files synced below it "
       "vanish at a power loss, and a replica comes back without the prepares it acknowledged",
       &node_bugs::dirs_trust_existing},
  };
  return bugs;
}

}  // namespace rill::simulation
