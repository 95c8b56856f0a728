#pragma once
// cluster: one simulated run. 1 to 6 replicas of the real consensus code, each with its own state machine and
// storage, simulated clients, one simulated network, all on one thread and one tick counter, every random choice
// drawn from streams derived from the seed.
//
// A run has two phases. Safety: the workload runs while faults are injected (crashes and restarts, partitions, loss,
// duplication, storage faults within the fault atlas); the checker runs after every step. Liveness: faults stop,
// everything is healed and restarted; within a bound, a core of at least a replication quorum must converge (normal
// in one view, everything committed and applied, at one op) and the clients must finish.
//
// The replicated state: a partition. The primary's ledger stamps each batch's offsets when it prepares it, and every
// replica's ledger gives the same offsets at apply; with disk storage each replica's storage is production's
// consensus::partition_storage: a journal of headers and the partition's real log of batches (appended as the
// prepares are written, cut where the chain diverges, committed as the replica applies), and simulated consumers
// read it (committed records only) from whichever replica is up, commit their positions through the group, and the
// checker ties offsets, acks and reads together.
//
// The fault atlas: storage faults on op k are allowed only on the replicas k names (quorum_replication - 1 of
// them), so every committed op keeps a readable copy on a replication quorum minus those. A lost disk is outside
// the atlas: it takes every op of that replica, which is why a recovering replica votes for nothing until it has
// caught up (so a view is always formed by replicas that kept what they acknowledged).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "consensus/driver.h"
#include "consensus/group_host.h"
#include "consensus/journal.h"
#include "consensus/partition_storage.h"
#include "consensus/replica.h"
#include "simulation/checker.h"
#include "simulation/disk_storage.h"
#include "simulation/network.h"
#include "simulation/replica_storage.h"
#include "simulation/trace.h"
#include "simulation/workload.h"
#include "storage/partition_log.h"

namespace rill::simulation {

// One replica's state at a tick (rill-sim --metrics): what a plot of replication needs.
struct replica_sample {
  std::uint64_t tick = 0;
  std::uint32_t replica = 0;
  bool up = false;
  bool normal = false;  // status normal (false: view change, or down)
  std::uint32_t view = 0;
  std::uint32_t log_view = 0;
  std::uint64_t op = 0;
  std::uint64_t commit = 0;
  std::uint64_t messages_sent = 0;  // cumulative, to other replicas
  std::uint64_t messages_received = 0;
  std::uint64_t crashes = 0;
  std::uint64_t checkpoints = 0;
};

struct cluster_options {
  std::uint64_t seed = 0;
  // Every this many ticks (0: never), on_sample gets each replica's state. Observes only: the run is the same.
  std::uint32_t sample_every_ticks = 0;
  std::function<void(const replica_sample&)> on_sample;
  std::uint8_t replicas = 3;
  std::uint32_t clients = 4;
  client_options client;
  std::uint64_t safety_ticks = 20'000;    // the faulty phase ends here (or when the clients are done)
  std::uint64_t liveness_ticks = 20'000;  // the healed cluster must converge within this
  network_options network;
  storage_options storage;
  // true: each replica's journal.wal and superblock on its own simulated disk (the production code); false: the
  // in-memory storage model (faster; no file formats).
  bool disk = true;
  bool partition = true;  // with disk storage: the partition group's storage (partition_storage: its log of batches)
  std::uint32_t consume_every_ticks = 20;          // each client's consumer reads about this often
  consensus::journal_options journal{1024, 1024};  // the ring; the replicas checkpoint every slot_count / 4 ops
  std::uint32_t crash_ppm = 200;                   // per replica per tick
  // Of those crashes, this many per million are a process crash (the machine stays up: the page cache survives,
  // unsynced writes stay readable, and a later power loss may still take them); the others are a power loss. A fenced
  // replica (a failed write or fdatasync) always restarts as a process (rilld exits and its supervisor starts it).
  std::uint32_t process_crash_ppm = 0;
  // Per tick: a majority of the nodes (sometimes all) lose power at once (a rack or a data centre), outside the bound
  // on nodes down: the case a quorum on disk exists for. Each restarts after 1..restart_ticks_max.
  std::uint32_t power_loss_ppm = 0;
  // Per prepare_ok sent: the sender crashes right after sending it (the effects after the send are lost with it),
  // within the same bound on replicas down at once as crash_ppm. Finds acknowledgements of what a crash loses.
  std::uint32_t crash_after_ack_ppm = 0;
  std::uint32_t restart_ticks_max = 400;  // a crashed replica restarts after 1..this
  std::uint32_t partition_ppm = 100;      // per tick: a new partition
  std::uint32_t partition_ticks_max = 2000;
  std::uint32_t rot_ppm = 0;  // per replica per tick: a stored prepare rots
  // Per replica per tick: the disk is lost (a crash, then a restart on an empty disk formatted to recover). Only
  // with rot and read faults off (a failed read counts as a lost copy; either with a lost disk may destroy every
  // copy of an op: data loss, not a bug), with 3 or more replicas, and at most replicas - quorum of them lost or
  // recovering at once (else no quorum can ever vote).
  std::uint32_t disk_lost_ppm = 0;
  // Per replica per tick: each partition log on partition_storage applies retention (its retention.bytes is 1:
  // every sealed segment no replica may need goes). Consumers below a replica's log start move to it; the final
  // check reads each log from its start.
  std::uint32_t retention_ppm = 0;
  // Groups each node hosts (1 to groups_max_sim): group 0 is the partition above; each further one is a side group
  // with side_clients clients of its own, through the node's one group_host: group 1 the metadata group (its clients
  // send only metadata commands, which the ledger applies through rilld's metadata_machine; journal_storage on
  // disk), groups 2.. partition groups like group 0 (partition_storage on disk, no consumers). Each side replica's
  // storage is a simulated disk of its own (or the journal model with disk = false); its node's crashes and disk
  // losses take them all. A side group has its own cluster identity in its headers and its own checker.
  std::uint32_t groups = 1;
  std::uint32_t side_clients = 2;
  consensus::replica_options replica;  // timeouts and limits (cluster, index and count are set per replica)
  consensus::replica_bugs bugs;
  bool check_ack_durable = true;  // the checker's "prepare_ok only for a durable write" (off: end-to-end checks only)
  bool bug_partition_trusts_own_suffix = false;  // test only: see partition_storage::set_bug_trust_own_suffix
  bool bug_idempotence_committed_only = false;   // test only: see ledger's constructor
  bool bug_coordinator_commit_unowned = false;   // test only: see ledger's constructor
  bool bug_append_unsynced = false;              // test only: partition_storage_options::bug_append_unsynced
  bool bug_trust_page_cache = false;             // test only: storage::set_bug_trust_page_cache (process-wide)
  bool bug_checkpoint_ungated = false;           // test only: partition_storage_options::bug_checkpoint_ungated
  bool bug_transfer_uncommitted = false;         // test only: partition_storage_options::bug_transfer_uncommitted
  bool bug_restart_drops_acked = false;          // test only: partition_storage_options::bug_restart_drops_acked
};

inline constexpr std::uint32_t groups_max_sim = 4;
inline constexpr std::uint32_t side_client_stride = 100;  // client endpoints: client_base + stride * group + index
static_assert(side_client_stride > 8, "more endpoints per group than clients a group may have");

enum class outcome { passed, safety_failure, liveness_failure };

struct run_result {
  outcome result = outcome::passed;
  std::string detail;
  std::uint64_t hash = 0;
  std::uint64_t ticks = 0;
  std::uint64_t committed = 0;
  std::uint64_t side_committed = 0;  // ops committed in the side groups, all together
  std::uint64_t group_commits = 0;   // consumer-group commits the metadata group's coordinator accepted
  std::uint64_t acks = 0;
  std::uint64_t retries_answered = 0;  // produce acks that idempotence answered (a retry under another session)
  std::uint64_t evictions = 0;         // sessions of the partition group's clients evicted while in use
  std::uint64_t crashes = 0;
  std::uint64_t process_crashes = 0;  // of the crashes, those that kept the page cache
  std::uint64_t power_losses = 0;     // correlated: a majority of the nodes at once
  std::uint64_t disks_lost = 0;
  std::uint64_t partitions = 0;
  std::uint64_t view_changes = 0;
  std::uint64_t checkpoints = 0;      // written (each replica's own)
  std::uint64_t state_transfers = 0;  // checkpoints installed from a peer
  std::uint64_t records_consumed = 0;
  std::uint64_t partition_truncations = 0;  // suffixes cut from partition logs (view changes)
  std::uint64_t partition_transfers = 0;    // partition logs filled from a peer after a state transfer
  std::uint64_t segments_retained = 0;      // partition log segments removed by retention
  std::uint64_t partition_restarts = 0;     // transfers that started a log over at a peer's log start
  std::uint64_t messages = 0;
  std::uint32_t final_view = 0;
  std::size_t lagging = 0;  // replicas outside the converged core at the end (stuck in a view change of their own)
};

class cluster {
 public:
  explicit cluster(const cluster_options& options, trace& t);
  ~cluster();
  run_result run();

 private:
  struct node;
  struct side_replica;
  struct side_group;
  class node_transport;
  void step();
  void send(node& n, consensus::replica_t to, consensus::message m, consensus::group_t g);
  [[nodiscard]] checker& checker_of(consensus::group_t g);
  [[nodiscard]] consensus::driver* driver_of(node& n, consensus::group_t g);
  void restart_side(node& n, std::size_t k);
  [[nodiscard]] consensus::driver_hooks side_hooks(node& n, std::size_t k);
  [[nodiscard]] bool all_ok() const;
  [[nodiscard]] bool clients_done() const;
  [[nodiscard]] bool sides_converged() const;
  [[nodiscard]] std::vector<const consensus::replica*> side_core(std::size_t k) const;
  void send_beat(node& n, consensus::replica_t to, const consensus::node_heartbeat& beat);
  // Group 0: the simulated partition (side groups are 1..groups - 1).
  static constexpr consensus::group_t group{0};
  [[nodiscard]] std::vector<consensus::node_t> members() const;  // every group's: node i runs replica i
  [[nodiscard]] consensus::driver_hooks hooks(node& n);
  void crash_if_due(node& n);
  void inject_faults();
  // power_loss false: a process crash (the page cache survives).
  void crash(node& n, bool power_loss = true);
  void lose_power_of_majority();
  [[nodiscard]] bool may_lose_disk() const;
  void lose_disk(node& n);
  [[nodiscard]] bool may_crash() const;  // fewer than the bound are down now
  void restart(node& n);
  void enter_liveness();
  [[nodiscard]] bool converged() const;
  [[nodiscard]] std::vector<const consensus::replica*> core() const;
  // The converged core of the group `pick` names on each node, counting only nodes where `caught_up` holds.
  [[nodiscard]] std::vector<const consensus::replica*> core_of(
      const std::function<const consensus::replica&(const node&)>& pick,
      const std::function<bool(const node&)>& caught_up) const;
  [[nodiscard]] bool may_fault(consensus::replica_t r, std::uint64_t op) const;
  // The partition groups' storage settings (each replica adds its violation report).
  [[nodiscard]] partition_config partition_config_for();
  void observe(node& n);
  void step_partition(node& n);  // every partition group of the node
  void step_partition(node& n, std::size_t g);
  // The partition storage of the node's replica of group g while it is up (null with the storage model, or for a
  // group that is not a partition group on disk).
  [[nodiscard]] consensus::partition_storage* partition_of(node& n, std::size_t g) const;
  void consume(std::size_t client);
  void check_partitions_at_end(const std::vector<const consensus::replica*>& core, std::size_t g);

  cluster_options options_;
  trace& trace_;
  prng rng_;
  prng fault_rng_;  // the crash kinds and correlated power losses: a stream of their own (the others' draws stay)
  sim_network network_;
  checker checker_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::vector<std::unique_ptr<sim_client>> clients_;
  std::vector<side_group> sides_;  // groups 1.. (options_.groups - 1 of them)
  std::uint64_t now_ = 0;
  bool liveness_ = false;
  bool debug_ = false;  // RILL_SIM_DEBUG set: every delivery and state change on stdout
  std::uint64_t partition_until_ = 0;
  run_result result_;
  // The partition logs' shared pieces (they outlive every node's log).
  storage::buffer_pool pool_;
  manual_clock clock_;
  storage::collecting_reporter reporter_;
  std::vector<std::uint64_t> consumer_position_;  // per client: the next offset its consumer reads
  std::vector<bool> consumer_reading_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rill::simulation
