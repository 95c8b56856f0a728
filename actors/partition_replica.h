#pragma once
// partition_replica: this node's replica of a replicated partition (docs/replication.md), as a plain state class:
// the lifecycle of its consensus::partition_group (open, reopen after a failed open or a fence, close, destroy), its
// ticks and retention schedule, the produces and consumer-offset stores it submits while primary, and what a
// request is told when this replica does not take it. rilld's replica_partition_actor wraps one (its CAF shell: the
// mailbox, promises, long polls, metrics); the simulator's nodes run it as it is, on their simulated disks
// (simulation/node_cluster.h), so what rilld runs above the partition group is what the simulator runs.
//
// Lifecycle (each transition on a tick or a completion):
//
//     start() --> opening --ok--> open --fenced, nothing in flight--> closing --> (reopen_ticks) --> opening ...
//                    \--failed--> (reopen_ticks) --> opening                          (trusted_end: the log's synced
//                    end once closed)
//     close(destroy) at any point: answered once no open or reopen is in flight; the group closed, the partition's
//     directory removed when destroying.
//
// Files: the partition's log in `dir`, and the group's journal.wal, superblock and snapshot.bin in dir/vsr. A journal
// created earlier keeps its ring (its size names its slot count); a new one gets options.journal_slots. A directory
// whose superblock names another group (an earlier incarnation of the partition, deleted while this node was down)
// is removed before the open.
//
// Invariants (asserted): at most one open, reopen or close of the group is in flight; group() is non-null only
// between a successful open and the start of its close; after close() begins nothing new is submitted.
//
// Contract: single-threaded, on the engine's thread. The env's references outlive the replica. close() before
// destroying it (it waits for the operations in flight).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/elapsed_clock.h"
#include "base/expected.h"
#include "base/task.h"
#include "consensus/partition_group.h"
#include "net/proto/rill.pb.h"
#include "net/status.h"
#include "storage/partition_log.h"
#include "storage/validated_batches.h"

namespace rill::actors {

struct partition_replica_options {
  std::string dir;  // the partition's directory
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
  storage::log_options log;  // the log's options (its file cache included)
  consensus::group_t group{0};
  std::vector<consensus::node_t> members;  // replica order: members[0] is the preferred primary
  consensus::node_t self;
  std::uint32_t journal_slots = 4096;  // a new journal's ring (prepare headers)
  bool recovering = false;             // this node lost its disk: a replica created now starts recovering
  // The partition's replicated bounds as this node's configuration wants them (the group's primary commits them).
  consensus::partition_settings settings;
  std::function<bool(consensus::node_t)> reachable;  // unset: every member
  std::uint64_t retention_ticks = 0;                 // ticks between retention runs (0: none)
  std::uint64_t reopen_ticks = 50;                   // after a failed open or a fence
  // How long a tick is (rilld: replica_partition_actor::tick_period): a primary unheard by a quorum of its group for
  // the backups' primary timeout, in ticks of this length, serves nothing (partition_group_options::silence_ms).
  std::uint64_t tick_ms = 10;
  std::function<std::uint64_t()> seed;  // a fresh seed at each open (rilld: entropy)
  // Test only (rill-sim --node --bug stamps_follow_wall): batches are stamped with the wall clock as it reads, its
  // jumps included (issue 38, finding 8 as it was).
  bool bug_stamps_follow_wall = false;
  // Test only (rill-sim --node --bug primary_never_silenced): a primary its quorum no longer hears serves on
  // (issue 38, finding 5 as it was).
  bool bug_primary_never_silenced = false;
  // Test only: a replica whose log is behind its applied state (a state transfer due) serves reads from that log, as
  // a primary did before rill-sim --node found it (issue 38).
  bool bug_reads_while_copying = false;
  // Test only (the simulator, whose disk keeps files whole in memory: a checkpoint in region 1 of a 64 MiB layout is
  // 64 MiB of zeros to write). A smaller checkpoint region, for fresh directories only (the layout of snapshot.bin
  // depends on it): 0 is rilld's 64 MiB. The machine's snapshot budget shrinks with it, so settings must fit.
  std::uint64_t checkpoint_region_bytes = 0;
};

// What the replica runs on; every reference outlives it.
struct partition_replica_env {
  storage::io::engine& engine;
  storage::buffer_pool& pool;
  const clock& clk;
  storage::log_reporter& reporter;
  consensus::host_transport& net;
  // The process's start (elapsed_clock): its batches' stamps count from there (unset: from the replica's creation).
  std::optional<elapsed_clock::anchor> stamps_from;
};

struct partition_replica_callbacks {
  std::function<void(const std::string&)> notice;  // a line for the operator
  std::function<void(bool)> leading;               // this replica started (true) or stopped leading
  std::function<void()> committed;                 // more committed: parked polls may read
  std::function<void()> changed;                   // opened, reopened, fenced: gauges may be published again
};

// Why a request is not taken here.
struct replica_refusal {
  net::status status = net::status::unavailable;
  std::string message;
  std::optional<std::uint64_t> primary_node;  // not_primary: the node to ask instead, when another one
};

class partition_replica {
 public:
  static constexpr std::uint32_t journal_slot_bytes = 4096;  // prepare headers, whole offset and register ops
  static constexpr const char* vsr_dir = "vsr";

  partition_replica(partition_replica_options options, partition_replica_env env,
                    partition_replica_callbacks callbacks);
  ~partition_replica();
  partition_replica(const partition_replica&) = delete;
  partition_replica& operator=(const partition_replica&) = delete;

  // Opens the group in the background (then every reopen_ticks until it opens).
  void start();
  // Every tick: the group's, then the reopen and retention schedules, leadership and state-transfer notices.
  void tick();
  void on_message(const consensus::message& m);

  // Why a produce, an offset store or a read would be refused here now (nullopt: taken).
  [[nodiscard]] std::optional<replica_refusal> refusal() const;
  // A poll's: refusal(), except that a from_replica poll that stores no offset is served by a backup too, and a poll
  // from a named consumer's stored offset (NEXT) also waits for stale_offset_refusal().
  [[nodiscard]] std::optional<replica_refusal> poll_refusal(const proto::PollRequest& r) const;
  // A primary that has not yet applied what earlier views committed (replica::caught_up_in_view) does not serve a
  // consumer's stored offset: unavailable, retry (issue 38, finding 9).
  [[nodiscard]] std::optional<replica_refusal> stale_offset_refusal() const;
  // A replica whose log is behind its applied state serves no read: it installed a peer's checkpoint beyond its log
  // (a state transfer due, running, or waiting to be tried again: storage().transfer_target()), or it recovers a lost
  // disk. Its replica has applied through the checkpoint (and may commit above it, as primary too) while its log's
  // committed offset stays where it was until the copy is done: what it would serve is behind what was acknowledged.
  [[nodiscard]] std::optional<replica_refusal> catching_up_refusal() const;

  // Each batch in turn, one op each (stamped by the primary, acknowledged once a quorum has it durable). A failure
  // stops the request there: the batches before it are committed, those after it not sent. Errors carry the
  // net::status the client is told (the producer rules' verdicts, the group's errors).
  struct produced {
    std::vector<std::int64_t> base_offsets;
    std::int64_t timestamp_ms = -1;
  };
  task<expected<produced>> produce(std::shared_ptr<storage::validated_batches> batches);
  // An explicit store of a named consumer's offset (it may move back: consumer_offset_reset); the offset it
  // replaced, if any. Errors: offset_out_of_range, limit_exceeded, invalid_name, the group's.
  task<expected<std::optional<std::int64_t>>> store_offset(std::string consumer, std::int64_t offset);
  // A poll's auto-commit: stored only when not below the stored offset (consumer_offset). Errors: the group's.
  task<expected<void>> commit_offset(std::string consumer, std::int64_t offset);

  // A read of the committed log (a consumer's). Refused (unavailable) while closed or closing; close() waits for
  // the reads in flight (a log is never closed under a reader).
  task<expected<storage::read_result>> read(storage::read_request rq);

  // Closes the group once no open or reopen is in flight and no read is; `destroy` removes the partition's directory
  // too. Parked work is the owner's to answer first. The replica takes nothing after.
  task<expected<void>> close(bool destroy);

  // Retention and segment settings changed in place (config::changes_in_place, asserted): the open log takes them,
  // and a reopen opens with them.
  void update_config(const config::log_config& c);

  // The group while open (null otherwise).
  [[nodiscard]] consensus::partition_group* group() noexcept { return group_.get(); }
  [[nodiscard]] const consensus::partition_group* group() const noexcept { return group_.get(); }
  [[nodiscard]] const std::optional<rill::error>& open_error() const noexcept { return open_error_; }
  [[nodiscard]] const partition_replica_options& options() const noexcept { return options_; }
  [[nodiscard]] bool closing() const noexcept { return closing_; }
  [[nodiscard]] bool leading() const noexcept { return was_primary_; }
  [[nodiscard]] std::uint64_t retention_runs() const noexcept { return retention_runs_; }
  [[nodiscard]] std::uint64_t reopens() const noexcept { return reopens_; }
  // What it is doing, for a line of a report: open, opening, reopening, closing, and what is in flight.
  [[nodiscard]] std::string describe() const;
  // Storage operations of this replica in flight (opens, reopens, retention, submits).
  [[nodiscard]] std::size_t operations() const noexcept { return operations_; }

 private:
  task<void> open_group();
  // Removes the partition's directory when it belongs to another group (an earlier incarnation of the partition).
  task<expected<void>> clear_leftover();
  task<std::uint32_t> journal_slots_of();
  void opened(expected<std::unique_ptr<consensus::partition_group>> r);
  void set_leading(bool leading);
  void run_retention();
  void notice(const std::string& line) const;

  partition_replica_options options_;
  partition_replica_env env_;
  partition_replica_callbacks callbacks_;
  std::unique_ptr<consensus::partition_group> group_;
  std::optional<rill::error> open_error_;
  std::size_t operations_ = 0;
  bool opening_ = false;    // partition_group::open in flight
  bool reopening_ = false;  // a fenced group closing before it opens again
  bool closing_ = false;
  bool was_primary_ = false;
  bool retaining_ = false;
  std::uint64_t ticks_ = 0;
  std::uint64_t reopen_due_ = 0;     // the tick of the next open (0: none due)
  std::uint64_t retention_due_ = 0;  // the tick of the next retention run (0: not scheduled yet)
  std::uint64_t retention_runs_ = 0;
  std::uint64_t reopens_ = 0;
  std::uint64_t transfers_seen_ = 0;
  std::uint64_t restarts_seen_ = 0;
  elapsed_clock stamps_;  // the batches' time stamps while primary: wall time, not its jumps (issue 38, finding 8)
  async_event idle_;      // set whenever no open or reopen is in flight
  std::size_t reads_ = 0;
  async_event reads_idle_;  // set whenever no read is in flight
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rill::actors
