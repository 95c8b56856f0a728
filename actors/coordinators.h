#pragma once
// coordinators: this node's replicas of the cluster's consumer-group coordinators (issue 19, docs/consumer-groups.md,
// "The replicated coordinator"). A cluster of several nodes runs `count` coordinator groups; every member hosts a
// replica of each, beside the metadata group, in the metadata actor's group_host, over the same replica plane. Each
// replica's state machine is a group_machine; a consumer group belongs to coordinator_for(key, count).
//
// Submitting: any node submits a command to any coordinator through its own session (cluster_group), wherever that
// coordinator's primary is, so a client may send its group requests to any node; a coordinator's primary failing
// over is a wait for the submit, not an error the member sees (unless it outlasts the submit's timeout). A
// cluster_group takes one submit at a time; the others queue in arrival order, at most queue_max per coordinator
// (then overloaded). A submit returns once the command is committed and applied by this node's replica too, so a
// read here after it sees it.
//
// Duties of a coordinator's primary (tick()): once per view it leads, before anything else, a refresh (every
// member's session starts again: members had no way to reach it while the view changed); then an expire whenever
// the earliest session end or revocation deadline of its groups has passed by this node's wall clock; and, every
// reconcile_ticks, the commands `reconcile` asks for (groups the metadata created, resized or deleted). One duty
// at a time per coordinator.
//
// Group ids on the plane: coordinator i is group 2 * (i + 1): even, so never the metadata group (0) nor a replicated
// partition's (partition_group_id is odd).
//
// Invariants (asserted):
// - A lane's `busy` is set iff a submit of it is between its turn and its end; the queue holds only waiters
//   while busy.
// - After close() begins, nothing new is submitted and every queued waiter is answered.
// - A lane's barrier_waiting is a read barrier that has not had its turn yet (a read that joins it began before
//   the barrier was sent); it is cleared when its turn comes or when it is refused.
//
// Contract: single-threaded, on the engine's thread (the metadata actor's). close() before destroying it. A failed
// open() leaves nothing joined to the host.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/group_machine.h"
#include "base/async.h"
#include "base/expected.h"
#include "base/task.h"
#include "consensus/cluster_group.h"
#include "consensus/group_host.h"
#include "net/proto/coordinator.pb.h"
#include "storage/io/engine.h"

namespace rill::actors {

// The most coordinator groups a cluster runs (cluster.coordinators).
inline constexpr std::uint32_t coordinators_max = 64;

struct coordinators_options {
  std::uint64_t cluster = 0;
  std::vector<consensus::node_t> members;  // ascending
  consensus::node_t self;
  bool recovering = false;        // `rilld recover`: this node's replicas lost their data
  std::uint64_t incarnation = 0;  // cluster_group_options::incarnation of each coordinator's replica
  std::uint32_t count = 4;        // cluster.coordinators: the same on every member
  std::uint64_t journal_slots = 1024;
  std::uint64_t journal_message_bytes_max = 64 * 1024;  // a command or reply, header included (the journal's slot)
  // Each checkpoint region of snapshot.bin, and what is reserved of it at creation (cluster_group_options').
  std::uint64_t snapshot_bytes_max = 256 * 1024 * 1024;
  std::uint64_t snapshot_reserved_bytes = 4 * 1024 * 1024;
  std::size_t queue_max = 4096;
  std::uint32_t reconcile_ticks = 100;
  group_machine_options machine;
  group_machine::wall_clock wall_ms;  // the primary's time stamp (ms since the Unix epoch)
  // The primary's reconcile duty: the commands that make coordinator `index`'s groups match the metadata.
  std::function<std::vector<proto::CoordinatorCommand>(std::uint32_t index, const group_machine&)> reconcile;
  std::function<void(const std::string&)> notice;
  // Each replica's seed (its session numbers, its jitter): drawn from the system's randomness when unset (the
  // simulator sets it, so that a seed replays).
  std::function<std::uint64_t()> seed;
  // Coordinator `index`'s replica stopped at a storage failure (after notice): it serves nothing until the process
  // restarts (rilld asks its operator to; the simulator restarts the node).
  std::function<void(std::uint32_t index, const error&)> fenced;
};

struct coordinator_counters {
  std::uint64_t submitted = 0;  // commands committed through this node's sessions
  std::uint64_t refused = 0;    // submits that failed (overloaded, unavailable, closed)
  std::uint64_t refreshes = 0;  // refresh duties committed
  std::uint64_t expires = 0;    // expire duties committed
};

class coordinators {
 public:
  // Opens (creating when missing) <dir>/<i> for each coordinator, joining `host`. Must be given the same `count` on
  // every member (it is committed configuration of the cluster).
  static task<expected<std::unique_ptr<coordinators>>> open(storage::io::engine& e, std::string dir,
                                                            coordinators_options options, consensus::group_host& host,
                                                            consensus::host_transport& net);
  ~coordinators();
  coordinators(const coordinators&) = delete;
  coordinators& operator=(const coordinators&) = delete;

  [[nodiscard]] static consensus::group_t group_of(std::uint32_t index) { return consensus::group_t(2 * (index + 1)); }
  // The coordinator a plane group id names, if it is one of this cluster's.
  [[nodiscard]] std::optional<std::uint32_t> index_of(consensus::group_t g) const;
  [[nodiscard]] std::uint32_t count() const noexcept { return static_cast<std::uint32_t>(lanes_.size()); }
  [[nodiscard]] std::uint32_t index_for(const group_key& key) const { return coordinator_for(key, count()); }
  [[nodiscard]] const group_machine& machine(std::uint32_t index) const;
  [[nodiscard]] consensus::node_t primary_node(std::uint32_t index) const;
  [[nodiscard]] const consensus::replica& replica(std::uint32_t index) const;

  // Commits `command` in coordinator `index` through this node's session; its reply once this node has applied it.
  // Errors: overloaded (queue full), unavailable (no primary answered in time; the command may still commit),
  // the replica's storage error (fenced), closed.
  task<expected<proto::CoordinatorReply>> submit(std::uint32_t index, proto::CoordinatorCommand command);
  // A read barrier: commits a sync command (changing nothing) in `index` through this node's session. Once it
  // returns, this node's replica holds every change committed before the call (a read of it is linearizable).
  // Reads that arrive while a barrier waits for its turn share the next one. submit()'s errors.
  task<expected<void>> read_barrier(std::uint32_t index);
  // Waits until this node's replica of `index` has applied what it knows to be committed (false: not within the
  // ticks): a read after it sees every change committed before its replica last heard from the primary.
  task<bool> caught_up(std::uint32_t index, std::uint32_t timeout_ticks);

  // A message of coordinator group g from node `from` on the plane.
  void on_message(consensus::node_t from, consensus::group_t g, const consensus::message& m);
  // Every replica tick, after the host's: sessions' retries and the primaries' duties.
  void tick();
  task<expected<void>> close();

  [[nodiscard]] const coordinator_counters& counters() const noexcept { return counters_; }

 private:
  struct barrier;  // a read barrier, shared by the reads that arrive before it is sent
  struct lane {
    std::unique_ptr<group_machine> machine;
    std::unique_ptr<consensus::cluster_group> group;
    std::deque<async_event*> queue;
    bool busy = false;
    bool duty = false;                            // a duty is running
    std::optional<std::uint64_t> refreshed_view;  // the view whose refresh this node committed as its primary
    std::uint64_t reconciled_at = 0;              // tick of the last reconcile duty
    std::shared_ptr<barrier> barrier_waiting;     // a read barrier queued, not yet sent
  };
  coordinators(coordinators_options options, consensus::group_host& host, consensus::host_transport& net)
      : options_(std::move(options)), host_(host), net_(net) {}
  // The primary's duty now due for coordinator `index`, if any (see the header comment): at most one kind at a time.
  std::vector<proto::CoordinatorCommand> due(std::uint32_t index);
  // Submits them in order while this node stays primary in `view`.
  task<void> duty(std::uint32_t index, std::uint64_t view, std::vector<proto::CoordinatorCommand> todo);
  void hand_on(lane& l);
  // submit(), running on_turn once the command's turn comes (before it is sent).
  task<expected<proto::CoordinatorReply>> submit_at_turn(std::uint32_t index, proto::CoordinatorCommand command,
                                                         std::function<void()> on_turn);

  coordinators_options options_;
  consensus::group_host& host_;
  consensus::host_transport& net_;
  std::vector<lane> lanes_;
  std::uint64_t ticks_ = 0;
  bool closed_ = false;
  coordinator_counters counters_;
};

}  // namespace rill::actors
