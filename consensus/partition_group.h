#pragma once
// partition_group: this node's replica of one replicated partition (docs/replication.md): a VSR group of
// replication_factor members, run by the driver (driver.h) over partition_storage (the journal holds batch prepares'
// headers, the partition log their batches) with partition_machine as its state machine, and this node's sessions,
// through which it submits the produces and offset commits its clients send while its replica is primary.
//
// Members: replica r runs on node members[r]; members[0] is the preferred primary (the primary of view 0, placement
// rotates the order per partition so preferred primaries spread over the nodes). After a failover, the primary
// hands the group back to the preferred replica once that one has kept up for hand_over_ticks (a controlled view
// change to the next view it leads), so the load stays spread. The group's messages carry `group`
// as their cluster identity (a partition's group id is unique to its incarnation), so a message for another group,
// or an older incarnation of this one, is dropped by the replica. What the replica sends goes through the host's
// transport to the member's node with the group id; the owner hands what arrives for the group to on_message().
// The replica sends its own commit heartbeats (heartbeats_by_host off): the owner ticks it every tick.
//
// Sessions: a node submits only to its own replica, and only while that replica is primary in a normal view (the
// owner answers not-primary otherwise, naming primary_node()). Submits are pipelined over up to sessions_max
// sessions, each with one request in flight (the replica prepares requests in the order they arrive, so a
// producer's batches submitted in order are stamped in order); more wait, in order, up to submits_waiting_max. A
// session is registered (a committed op) when first needed. When the replica stops being primary in the view a
// submit was sent in, or a submit is not answered within submit_timeout_ticks, the submit fails with unavailable
// (the request may still commit: an idempotent producer's retry is answered with the original's offsets) and every
// session is forgotten (their request numbers may yet commit; new ones are registered when next primary).
//
// Errors are values: a storage failure fences the driver (driver.h); every submit then fails with errc::fenced
// naming the cause, and the owner reopens the group from its files (a restart of the replica).
//
// State transfer of the log: a replica that installed a peer's checkpoint beyond its log (it was more than the
// journal ring behind, or lost its disk) copies the committed batches up to the checkpoint's op from a peer
// (partition_storage::transfer) before it appends anything more. The group asks one peer at a time over its own
// transport (request_segments, answered by segments: at most storage.transfer_bytes_max of batches per answer),
// the primary of its view first, the next member after a refusal or transfer_timeout_ticks of silence (20 ticks
// later), until the copy is done; it serves the same requests from its own committed log, at most
// transfer_serves_max at once (more are refused, and asked again). A member formatted anew after losing its disk
// starts `recovering` (options): it votes for nothing until it has caught up (docs/consensus.md, Recovery of a lost
// disk).
//
// Not yet here (docs/replication.md, "Limits today"): heartbeats coalesced per node pair for partition groups.
//
// Contract: single-threaded, on the engine's thread. close() before destroying it: it answers every submit (closed)
// and waits for the storage operations in flight.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/async.h"
#include "base/clock.h"
#include "base/expected.h"
#include "base/random.h"
#include "base/task.h"
#include "consensus/driver.h"
#include "consensus/group_host.h"
#include "consensus/partition_machine.h"
#include "consensus/partition_storage.h"

namespace rill::consensus {

struct partition_group_options {
  group_t group{0};             // the group id: the identity in every message (never 0: the metadata group's)
  std::vector<node_t> members;  // replica order: members[0] is the preferred primary
  node_t self;
  partition_storage_options storage;
  partition_machine_options machine;
  // This node's wish for the partition's replicated bounds (limits.consumers_per_partition_max,
  // limits.producers_per_partition_max, storage.producer_expiry_ms): while primary and idle, the group commits them
  // (operation_partition_settings) when the machine's differ. Every replica then applies them at the same op.
  partition_settings settings;
  replica_options replica;  // timeouts and pipeline; cluster, replica, replica_count and seed are set from the above
  std::uint64_t seed = 0;   // drawn at each start (the sessions' numbers, the replica's jitter)
  std::size_t sessions_max = 8;
  std::size_t submits_waiting_max = 1'024;
  std::uint32_t submit_timeout_ticks = 500;
  // Formatted anew as a member that lost its disk: when this open creates the group's files, its replica starts
  // recovering. Ignored when the files exist (their superblock says).
  bool recovering = false;
  // The incarnation a superblock this open creates starts with (vsr_state::incarnation; cluster_group_options').
  std::uint64_t incarnation = 0;
  // A primary other than the preferred one (members[0]) hands the group back to it (a controlled view change,
  // replica::hand_over) once the preferred replica has acknowledged everything committed for this many ticks in a
  // row, and this replica has led for as long. 0: never.
  std::uint32_t hand_over_ticks = 300;
  // Whether a member's node can be reached now (rilld: connected on the replica plane; unset: always). An idle
  // primary probes (operation_probe, at most one each lag_ticks) while a backup it can reach has not acknowledged
  // its newest op, so that a backup back from an absence shows it has kept up: lagging() clears and a hand-over
  // may follow without waiting for the next write.
  std::function<bool(node_t)> reachable;
  std::uint32_t transfer_timeout_ticks = 200;
  std::size_t transfer_serves_max = 2;
  // A primary whose quorum has heard nothing from it for longer than this (by the monotonic clock; the backups vote
  // it out after replica.primary_timeout_ticks) is silenced(): its owner serves nothing from it (issue 38, finding
  // 5: a primary cut off with an empty pipeline never stepped down, and its clients read no new data for as long
  // as the cut lasted). 0: never (tests that drive no clock).
  std::uint64_t silence_ms = 0;
};

// What a submit got: the state machine's reply and the op that holds it.
struct partition_submitted {
  std::vector<std::byte> reply;
  std::uint64_t op = 0;
};

class partition_group {
 public:
  // Opens (creating when missing) the journal, superblock and snapshot in `dir` and the partition log in `log_dir`,
  // restores the machine and builds the replica. `net`, `engine`, `pool`, `clk` and `reporter` outlive the group.
  // `committed` is called after every op applied here (consumers may see more).
  static task<expected<std::unique_ptr<partition_group>>> open(storage::io::engine& e, storage::buffer_pool& pool,
                                                               const clock& clk, storage::log_reporter& reporter,
                                                               std::string dir, std::string log_dir,
                                                               partition_group_options options, host_transport& net,
                                                               partition_machine::wall_clock now_ms,
                                                               std::function<void()> committed);
  ~partition_group();
  partition_group(const partition_group&) = delete;
  partition_group& operator=(const partition_group&) = delete;

  // Commits one operation through this node's sessions. Errors: not_primary (storage::errc::unavailable with the
  // detail; the owner checks primary() first), unavailable (the view changed, or timed out), overloaded (too many
  // waiting), fenced, closed, invalid_argument (a body other than a batch over body_bytes_max()).
  task<expected<partition_submitted>> submit(std::uint8_t operation, std::vector<std::byte> body);

  // Inputs.
  void on_message(const message& m);
  void tick();

  // This replica is primary in a normal view, and not recovering: submits are taken.
  [[nodiscard]] bool primary() const;
  // Primary, but a quorum of its replicas has not heard from it within options.silence_ms (cut off, or paused: a
  // new primary may be taking writes), or not at all yet in this view (for the round trip of its first heartbeat).
  // How long it has been unheard, when so.
  [[nodiscard]] std::optional<std::chrono::milliseconds> silenced() const;
  // The node of the primary of the view this replica is in (a hint while a view change runs).
  [[nodiscard]] node_t primary_node() const;
  [[nodiscard]] const class replica& replica() const noexcept { return driver_->replica(); }
  [[nodiscard]] bool fenced() const noexcept { return fenced_.has_value(); }
  [[nodiscard]] const std::optional<error>& fence_error() const noexcept { return fenced_; }
  [[nodiscard]] storage::partition_log& log() noexcept { return storage_->log(); }
  [[nodiscard]] const partition_storage& storage() const noexcept { return *storage_; }
  [[nodiscard]] const partition_machine& machine() const noexcept { return machine_; }
  [[nodiscard]] const partition_group_options& options() const noexcept { return options_; }
  [[nodiscard]] std::uint64_t body_bytes_max() const noexcept {
    return options_.storage.files.journal.message_size_max - header::encoded_size;
  }
  [[nodiscard]] std::size_t submits_in_flight() const noexcept { return in_flight_; }
  [[nodiscard]] std::size_t tasks() const noexcept { return tasks_; }  // background work close() waits for
  // A state transfer of the log is running (this replica serves no reads meanwhile: its log is behind its state).
  [[nodiscard]] bool transferring() const noexcept { return transferring_; }
  // Controlled view changes this replica started to give the group back to its preferred replica.
  [[nodiscard]] std::uint64_t hand_overs() const noexcept { return hand_overs_; }
  // Probes this replica submitted while primary (options.reachable).
  [[nodiscard]] std::uint64_t probes() const noexcept { return probes_; }
  // While primary: the backups (replica indexes) that have left a prepare unacknowledged for lag_ticks or more (as
  // the primary sees their prepare_ok and do_view_change messages), until they acknowledge one again (a backup that
  // caught up by repair is cleared by the next prepare or probe: committed ops are not acknowledged twice). Empty
  // on a backup. An idle partition shows no lag: a backup that died while nothing was produced is noticed by the
  // owner (its node is not connected on the replica plane); one back from an absence acknowledges the next probe.
  [[nodiscard]] std::vector<replica_t> lagging() const;
  static constexpr std::uint64_t lag_ticks = 100;

  // The topic's retention on this replica's log (partition_storage::enforce_retention: only batches no replica may
  // need from it again). Errors: closed, fenced, the log's.
  task<expected<storage::retention_result>> enforce_retention();

  // Answers every submit (closed), waits for the storage operations in flight, closes the files and the log.
  task<expected<void>> close();

 private:
  class replica_transport;
  struct session {
    std::uint64_t client = 0;
    std::uint64_t request = 0;  // the last request number it used
    bool registered = false;
    bool busy = false;
  };
  struct waiter {
    std::uint64_t client = 0;
    std::uint64_t request = 0;
    std::uint8_t operation = 0;
    std::uint64_t started_at = 0;
    std::optional<message> answer;
    std::optional<error> failed;
    async_event done;
  };

  struct segments_ask {  // a request_segments sent, unanswered
    std::uint64_t nonce = 0;
    replica_t peer = 0;
    std::uint64_t started_at = 0;
    std::optional<expected<transfer_chunk>> got;
    async_event done;
  };

  partition_group(partition_group_options o, host_transport& net, partition_machine::wall_clock now_ms,
                  const clock& clk);
  // State transfer of the log (see the header): started at a tick when the storage has a target.
  void start_transfer();
  task<expected<transfer_chunk>> ask_segments(offset_t from, std::uint64_t through_op);
  void serve_segments(const message& m);
  void on_segments(const message& m);
  void next_transfer_peer();
  // Transfers, serves and probes in flight: close() waits for them.
  void task_started();
  void task_ended();
  // Syncs the journal's header ring once no write has waited for idle_sync_ticks (a failure fences).
  void maybe_sync_idle();
  void on_reply(message m);
  task<expected<message>> request(session& s, std::uint8_t operation, std::vector<std::byte> body);
  // A session free to send now (registering one first when fewer than sessions_max exist); waits its turn.
  task<expected<session*>> acquire();
  void release(session* s);
  // At every tick and before each request: fails what was sent in a view this replica no longer leads, and keeps
  // the view it leads and the lag bookkeeping (lagging()) current; a new leadership starts that afresh.
  void follow_view();
  // Fails every waiter (and forgets the sessions): the view changed, a fence, or close().
  void fail_all(const error& e);
  // While primary and not the preferred replica: hands the group to it once it has kept up (options).
  void maybe_hand_over();
  // While primary and idle: a probe when a reachable backup has not acknowledged the newest op (options).
  void maybe_probe();
  // While primary with everything applied: commits options_.settings when the machine's differ, or were never
  // settled (a group from before producers expired, or a new one: its first leader settles it).
  void maybe_settle_settings();

  partition_group_options options_;
  host_transport& net_;
  const clock& clk_;
  // The monotonic time of each recent replica tick (silenced()): (replica tick, time), oldest first.
  std::deque<std::pair<std::uint64_t, std::chrono::nanoseconds>> tick_times_;
  partition_machine machine_;
  prng rng_;
  std::unique_ptr<replica_transport> transport_;
  std::unique_ptr<partition_storage> storage_;
  std::unique_ptr<driver> driver_;  // after storage_: destroyed first
  std::function<void()> committed_;
  std::deque<std::unique_ptr<session>> sessions_;
  std::vector<waiter*> waiters_;    // requests sent to the replica, unanswered
  std::deque<async_event*> queue_;  // submits waiting for a session, in arrival order
  std::size_t in_flight_ = 0;       // submits begun and not ended
  std::uint64_t ticks_ = 0;
  std::optional<view_t> primary_view_;  // the view in which this replica was last seen primary
  // Acknowledgements seen while primary (lagging()): the highest op each replica acknowledged or held at the view
  // change, and when the primary's op first reached each value (op -> tick; pruned below every acknowledgement).
  std::vector<std::uint64_t> acked_;
  std::map<std::uint64_t, std::uint64_t> op_since_;
  std::uint64_t led_since_ = 0;
  std::optional<std::uint64_t> preferred_current_since_;  // since when the preferred replica has kept up
  bool preferred_ok_ = false;                             // a prepare_ok from the preferred replica in this leadership
  std::uint64_t hand_over_wait_ = 0;  // hand_over_ticks, doubled per hand-over until replica 0 is seen leading
  std::uint64_t hand_overs_ = 0;
  std::uint64_t probed_at_ = 0;  // the tick of the last probe
  bool probing_ = false;
  std::uint64_t probes_ = 0;
  bool settling_ = false;         // a settings op submitted, unanswered
  std::uint64_t settled_at_ = 0;  // the tick of the last one
  std::optional<error> fenced_;
  bool closed_ = false;
  // State transfer.
  bool transferring_ = false;
  replica_t transfer_peer_ = 0;          // asked next
  std::uint64_t transfer_due_ = 0;       // no transfer starts before this tick (after a failed one)
  std::uint64_t transfer_failures_ = 0;  // in a row: the primary is asked first only when 0
  static constexpr std::uint64_t transfer_retry_ticks = 20;
  // The journal's header-ring writes wait for the next write's sync; a replica with no write for this long syncs
  // them itself, so that the cache may close its descriptors (journal.h, Descriptors).
  static constexpr std::uint64_t idle_sync_ticks = 100;
  std::uint64_t last_write_tick_ = 0;  // the last tick a write was waiting in the storage
  bool idle_syncing_ = false;
  segments_ask* asking_ = nullptr;
  std::size_t serving_ = 0;
  std::size_t tasks_ = 0;  // task_started() and not yet task_ended()
  async_event tasks_idle_;
};

}  // namespace rill::consensus
