#pragma once
// replica: one member of a VSR group, as a pure state machine. Inputs are method calls (a message, a tick, a journal
// write/read completion, a vsr_state persist completion); outputs are effects appended to a vector the caller
// executes: send a message, write or read a prepare in the journal, persist the vsr_state, report an applied op.
// No thread, clock, I/O or unseeded randomness inside: the simulator and the production actor drive the same code.
//
// The protocol is Viewstamped Replication Revisited with TigerBeetle's refinements (docs/consensus.md has it message
// by message): pipelined prepares, hash-chained (each prepare carries its parent's checksum), acknowledged only once
// durable; commit heartbeats; start_view_change as a vote that needs a quorum; do_view_change carrying the log
// suffix; the new log taken from the highest last-normal view; view and log view persisted before they are
// advertised (so a restart needs no recovery protocol); repair of missing headers and prepares from peers; a client
// table with sessions; checkpoints (the state machine and client table as bytes, written to snapshot.bin and then
// named by the superblock) so that the journal ring can wrap; state transfer of a peer's checkpoint, in chunks, to
// a replica that has fallen behind what the others' journals still hold.
//
// Invariants (asserted where they are established; check_invariants() asserts the cheap ones at the end of every
// input, check_log_invariants() the ones that walk the log, for tests):
// - view_ >= log_view_; status normal implies log_view_ == view_.
// - Every header in log_ above commit_min_ is on the canonical chain as far as this replica can tell: an entry
//   whose successor's parent disagrees is dropped, never applied.
// - commit_min_ <= commit_max_ <= op_ ... except transiently when commit_max_ is learnt ahead of op_ (a backup that
//   missed prepares): commit_min_ never passes an op whose prepare this replica has not verified.
// - A prepare_ok is sent only for a prepare durable in this replica's journal, in the sender's current view.
// - No message carrying a view is sent before that view is durable (messages wait in deferred_).
// - The primary commits ops in order, each once a replication quorum (itself included) has it durable.
// - The journal never overwrites an op above the durable checkpoint (writable()): whatever a restart must replay
//   from the checkpoint the superblock names is still in the ring.
// - A checkpoint is written only once the previous one is durable in the superblock, into the other region, so the
//   region the superblock names is never overwritten.
// - State transfer installs a peer's checkpoint only whole: every chunk names the same op header, checksum and size,
//   chunks are taken strictly in order, and the assembled bytes must match the checksum before anything is restored.
//   At most one transfer is received at a time, holding at most sync_bytes_max bytes.
// - A replica whose durable state says recovering (it lost its disk and was formatted anew as a member of a running
//   group) sends no prepare_ok, start_view_change or do_view_change and never leads a view: it may have acknowledged
//   ops it no longer holds, so its "never had it" must not count. It probes every peer with request_start_view
//   carrying a nonce of this incarnation (so every answer was made after the loss): a normal primary answers with
//   its start_view, the others with recovery_response naming their durable view. Once answers from more than
//   replica_count - quorum_view_change peers are in (so they include a member of every view-change quorum, and the
//   highest view answered is at least every view in which an op it acknowledged may have committed) and a primary
//   of that highest view (or a later one) has answered, its log head is the target: the replica stops recovering
//   (durably, before its first vote) once it holds durably, verified, every op up to that head (applied or not:
//   they may wait for its own acknowledgement to commit). (VR
//   Revisited's recovery protocol, with the rejoin of a normal member: it catches up before it takes part.)
// - Incarnations (vsr_state::incarnation): prepare_ok, start_view_change and do_view_change carry the sender's
//   (timestamp). A replica keeps, per peer, the highest incarnation it has seen; a message of a lower one is dropped,
//   and a higher one replaces the peer's votes, do_view_change and pipeline acknowledgements of the older. A
//   recovering replica's probe says its disk was lost: the peer drops what that replica told it before, and every
//   message stamped with an incarnation it knew; its answers name the highest incarnation it knew, and the replica,
//   before it stops recovering, takes one above every one named. So nothing a replica said before a disk loss counts
//   after it (a stale do_view_change could complete a view and cut a committed op in groups of five or more).
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/random.h"
#include "consensus/client_table.h"
#include "consensus/message.h"
#include "consensus/state_machine.h"
#include "consensus/vsr_state.h"

namespace rill::consensus {

struct replica_options {
  std::uint64_t cluster = 0;
  replica_t replica = 0;
  std::uint8_t replica_count = 1;
  std::uint32_t pipeline_max = 8;        // prepares in flight at the primary
  std::uint32_t request_queue_max = 64;  // requests waiting for room in the pipeline
  std::uint32_t clients_max = 64;        // sessions in the client table
  // Timeouts, in ticks (the driver decides what a tick is; production: 10 ms).
  std::uint32_t heartbeat_ticks = 5;         // the primary sends a commit heartbeat this often
  std::uint32_t primary_timeout_ticks = 40;  // a backup that hears nothing from its primary this long votes to leave
  std::uint32_t view_change_timeout_ticks = 80;  // a view change not done by then votes for the next view
  std::uint32_t resend_ticks = 10;  // unacknowledged prepares, votes, do_view_change and repair requests are resent
  // A primary whose pipeline has not committed for this long stops its heartbeats, so that the backups elect
  // another (it may be cut off from a quorum in one direction only).
  std::uint32_t abdicate_ticks = 120;
  // Jitter on the timeouts (so replicas do not time out in lockstep), and the recovery nonce of a replica that lost
  // its disk: a host must give every start of such a replica a seed of its own (drawn from entropy, or a durable
  // counter), or answers to an earlier recovery could be counted again. The simulator derives one per incarnation.
  std::uint64_t seed = 0;
  // Ops between checkpoints. 0: a quarter of the journal's slots (no checkpoints when the driver has no ring). With
  // a ring, interval + 2 * pipeline_max must not exceed its slots (else the ring fills before a checkpoint frees it).
  std::uint64_t checkpoint_interval = 0;
  // A replica behind the commit whose apply has not moved for this long asks a peer for its checkpoint.
  std::uint32_t sync_stall_ticks = 60;
  // State transfer moves a checkpoint in chunks of at most this many bytes (one sync message each, asked for one at
  // a time), so no message grows with the state; the receiver holds at most sync_bytes_max of a checkpoint (a larger
  // one is refused: the sender's limit on what it checkpoints must not exceed it).
  std::uint32_t sync_chunk_bytes = 1024 * 1024;
  std::uint64_t sync_bytes_max = 256 * 1024 * 1024;
  // The host sends the primary's commit heartbeats (group_host: one message per peer node for all the groups it
  // leads, built from beat()); the replica then sends none of its own. Backups take them as commit messages.
  bool heartbeats_by_host = false;
  // Apply an op only once it is durable here (its write done, or recovered), not from memory alone. For storage
  // that keeps state of its own from the writes (partition_storage: the batches in the partition log): what the
  // replica applies is then always there too, and an op whose write was given up is repaired (written again) before
  // it applies, like any op above the commit. Such a replica also writes only prepares whose place on the log it has
  // verified (an unverified one waits in memory until repair confirms it): its storage builds on what it writes.
  bool apply_durable_only = false;
};

// What a primary's commit heartbeat says (replica::beat()).
struct commit_beat {
  view_t view{0};
  std::uint64_t commit = 0;
  checksum_t checksum;  // of the committed op's header (zero when the primary does not hold it)
  friend bool operator==(const commit_beat&, const commit_beat&) = default;
};

// Limits that make every input bounded (pipeline_max_limit is in types.h).
inline constexpr std::size_t repair_requests_per_tick = 8;
static_assert(repair_requests_per_tick >= 1, "repair must make progress");
// Repair requests in flight at once (asked, not answered, not yet timed out): header ranges and prepares. A request
// is asked again only once it times out (replica::repair_timeout_ticks), so an answer never makes a replica ask again
// what is already on its way (each headers reply ran the whole pass before: a wiped member's recovery grew eightfold
// per round trip, issue 38 finding 12), and a member catching up has a window, not a flood, in flight.
inline constexpr std::size_t repair_headers_in_flight_max = 16;
inline constexpr std::size_t repair_prepares_in_flight_max = 64;
static_assert(repair_headers_in_flight_max >= 1 && repair_prepares_in_flight_max >= 1, "repair must make progress");
// The defaults are a valid configuration (the constructor asserts the same relations at run time).
static_assert(replica_options{}.pipeline_max >= 1);
static_assert(replica_options{}.pipeline_max <= pipeline_max_limit);
static_assert(replica_options{}.request_queue_max >= 1);
static_assert(replica_options{}.clients_max >= 1);
static_assert(replica_options{}.heartbeat_ticks >= 1);
static_assert(replica_options{}.resend_ticks >= 1);
static_assert(replica_options{}.sync_chunk_bytes >= 1);
static_assert(replica_options{}.sync_bytes_max >= 16, "room for a checkpoint's own header");
// A sync chunk resent this many times without an answer is given up: the transfer starts again, from any peer.
inline constexpr std::uint32_t sync_chunk_resends_max = 3;
static_assert(replica_options{}.heartbeat_ticks < replica_options{}.primary_timeout_ticks,
              "a backup must hear several heartbeats before it gives up on the primary");

// Test-only deliberate bugs, each off in production: the simulator's tests prove the checkers find them.
struct replica_bugs {
  bool commit_without_quorum = false;     // the primary commits on its own write
  bool advertise_before_persist = false;  // messages carrying a new view are sent before it is durable
  bool accept_out_of_order = false;       // a backup takes prepares of an older view as the current primary's
  bool forget_client_table = false;       // retried requests are prepared and executed again
  bool vote_while_recovering = false;     // a replica that lost its disk votes and acknowledges at once
  bool ack_before_durable = false;        // a backup sends prepare_ok when it submits the write, not when it is done
  // A replica recovering a lost disk stops recovering once it knows its target, before it holds it durably: it then
  // votes and acknowledges with a log missing ops it may have acknowledged before the loss.
  bool recovering_cleared_early = false;
  // With apply_durable_only (a partition group), a prepare whose place on the log this replica has not verified is
  // written all the same (issue 38, finding 6): the partition log appends a batch of another branch, and cuts what
  // the chain later contradicts.
  bool write_unverified = false;
  // Incarnations are neither stamped nor checked (issue 38, finding 3 as it was): a vote, do_view_change or
  // prepare_ok from before a replica lost its disk still counts after the loss.
  bool stale_after_disk_loss = false;
};

enum class status : std::uint8_t { normal, view_change };

// Effects.
struct send_effect {
  replica_t to;
  message m;
};
struct reply_effect {  // to the client named in m.h.client
  message m;
};
struct write_effect {  // write this prepare to the journal at m.h.op (replacing whatever is there)
  message m;
};
struct read_effect {  // read the prepare at op; it must have this checksum
  std::uint64_t op;
  checksum_t checksum;
};
struct persist_effect {  // make this vsr_state durable
  vsr_state state;
};
struct applied_effect {  // op was applied on this replica (for tracing and checkers)
  header prepare;
};
struct checkpoint_effect {  // write these bytes into snapshot.bin's region `slot`, synced; then on_checkpoint_done
  std::uint8_t slot = 0;
  header at;  // the checkpoint is the state after this op
  std::vector<std::byte> bytes;
};
struct installed_effect {  // a peer's checkpoint was installed: ops up to at.op count as applied, without applies
  header at;
};
using effect = std::variant<send_effect, reply_effect, write_effect, read_effect, persist_effect, applied_effect,
                            checkpoint_effect, installed_effect>;

// What a replica recovers from its storage at start.
struct recovered_state {
  vsr_state state;
  std::vector<header> journal;  // valid prepares found in the journal (any order, any views)
  std::vector<header> faulty;   // prepares the journal held but can no longer read (corruption, not a torn write)
  // Journal slots that held something unreadable, op unknown (journal_slots: the ring's size; 0 when none).
  std::vector<std::uint64_t> faulty_slots;
  std::uint64_t journal_slots = 0;
  // The bytes of the checkpoint state.checkpoint names (checksum verified by the driver); empty when none.
  std::vector<std::byte> snapshot;
  // True only the first time a replica starts on storage formatted for it: the primary of view 0 may then begin
  // in view 0. Any later start of a primary goes through a view change (it may have sent prepares it lost).
  bool formatted = false;
};

// Restores a checkpoint's bytes (as a replica writes them: the client table, then the state machine's snapshot)
// into `clients` and `sm`. False when they do not decode or the state machine refuses them; then `clients` is
// unchanged (and `sm` too, by state_machine::restore's contract). A driver calls it to refuse a checkpoint before
// it constructs a replica on one (the constructor asserts).
[[nodiscard]] bool restore_checkpoint(std::span<const std::byte> bytes, client_table& clients, state_machine& sm);

class replica {
 public:
  // A fresh replica (empty journal, view 0) or a restarted one. `sm` is at its initial state: the replica replays
  // the committed prefix it finds in its journal (reads) before applying anything new.
  replica(const replica_options& options, state_machine& sm, recovered_state recovered, replica_bugs bugs = {});

  // Inputs. Each appends the effects it causes to `out`.
  void on_message(const message& m, std::vector<effect>& out);
  void on_tick(std::vector<effect>& out);
  // A controlled view change: a primary in a normal view, not recovering, votes to move the group to `target` (a
  // later view; the host picks one whose primary it prefers, a partition group its preferred node), and its
  // backups join the vote at once (a vote from the primary of their own view). Ignored otherwise. Safe as any vote
  // is: the new view's log comes from a quorum's do_view_changes. Writes in flight fail over like at any view change.
  void hand_over(view_t target, std::vector<effect>& out);
  // A start_view_change's `request` field: the vote is a primary's hand-over (its backups join it at once).
  static constexpr std::uint64_t hand_over_mark = 1;
  // A start_view_change's `request` field: the sender is in this view's change (it counted a quorum of votes for
  // it and entered it), not merely voting for it: a replica in an older view joins it at once.
  static constexpr std::uint64_t in_view_mark = 2;
  void on_write_done(std::uint64_t op, checksum_t checksum, bool ok, std::vector<effect>& out);
  // `prepare` is null when the journal could not produce it (read error, checksum mismatch): the journal lost it,
  // and repair fetches it again. `removed`: storage no longer keeps it by design (a partition's retention removed the
  // batch of an op at or below the durable checkpoint, which this replica never needs again); the read is dropped
  // and nothing is marked lost (a peer that asked for it syncs a checkpoint instead, when its repair stalls).
  void on_read_done(std::uint64_t op, checksum_t checksum, const message* prepare, std::vector<effect>& out,
                    bool removed = false);
  void on_persist_done(const vsr_state& state, std::vector<effect>& out);
  void on_checkpoint_done(std::uint8_t slot, std::uint64_t op, bool ok, std::vector<effect>& out);

  // Observers (for drivers, tests and checkers).
  [[nodiscard]] replica_t index() const noexcept { return options_.replica; }
  [[nodiscard]] view_t view() const noexcept { return view_; }
  [[nodiscard]] view_t log_view() const noexcept { return log_view_; }
  [[nodiscard]] enum status status() const noexcept { return status_; }
  [[nodiscard]] bool is_primary() const noexcept;
  [[nodiscard]] op_t op() const noexcept { return op_t(op_); }
  [[nodiscard]] op_t commit_min() const noexcept { return op_t(commit_min_); }
  [[nodiscard]] op_t commit_max() const noexcept { return op_t(commit_max_); }
  [[nodiscard]] const vsr_state& durable_state() const noexcept { return durable_; }
  // Recovering from a lost disk (durably: it votes and acknowledges nothing yet; see the header).
  [[nodiscard]] bool recovering() const noexcept { return durable_.recovering; }
  [[nodiscard]] const client_table& clients() const noexcept { return clients_; }
  // The newest checkpoint written (durable_state().checkpoint: the one the superblock names).
  [[nodiscard]] const checkpoint_ref& checkpoint() const noexcept { return checkpoint_; }
  // Primary, normal, with its own heartbeats: the newest tick t such that a quorum (itself included) has heard
  // from it at t or later in this view: a commit heartbeat sent at t and acknowledged (commit_ok). 0: none yet in
  // this view (the view's start earns nothing: backups that missed its start_view count their timeout from their
  // own view change). nullopt: not such a primary. (A primary that voted to leave its view still counts what it
  // hears: its vote is never withdrawn, and a primary that abdicated and then committed again would be silenced for
  // good: seen in rill-sim --node as producers that never finished.) A primary cut off from its
  // quorum sees it fall behind: its owner stops serving once it is older than the backups' primary timeout (issue
  // 38, finding 5). A group of one: always the current tick.
  [[nodiscard]] std::optional<std::uint64_t> quorum_heard_tick() const;
  [[nodiscard]] std::uint64_t ticks() const noexcept { return ticks_; }
  // One line of state for diagnostics: status, views, ops, pipeline head, the next op to apply.
  [[nodiscard]] std::string describe() const;
  // The header this replica holds at op, if any.
  [[nodiscard]] const header* header_at(std::uint64_t op) const;
  // Nothing to do until an input arrives: normal, not recovering, nothing in flight or waiting (persist, sends,
  // reads, checkpoint), everything it knows of committed and applied, no vote cast. A tick of an idle replica
  // changes nothing but its clock, so a host may stop ticking it (its clock then stands still: timeouts measure
  // only time it was ticked) and resume at its next input. A backup's primary going quiet is the host's to notice
  // (group_host watches its peers' node heartbeats).
  [[nodiscard]] bool idle() const;
  // A primary in a normal view that has applied every op its log held when the view began: its state machine shows
  // everything any earlier view committed (a new primary may still be committing its predecessors' ops, and until
  // then its state is behind what clients were told). False on a backup or during a view change. Reads of state that
  // must never go back (a named consumer's stored offset) wait for it.
  [[nodiscard]] bool caught_up_in_view() const noexcept { return is_primary() && applied_view_head(); }
  // Normal, and it has applied every op its log held when it became normal in this view (at a restart, at a
  // start_view, at the end of a view change): what it applied before a restart is among them (committed ops stay in
  // every later view's log, and a view's primary commits its whole log), so its state machine is no longer behind
  // what this replica showed before. What acts on the applied state and must not go back (a node's reconciler after
  // a restart: issue 38) waits for it once.
  [[nodiscard]] bool applied_view_head() const noexcept {
    return status_ == status::normal && commit_min_ >= view_head_;
  }
  // The commit heartbeat a primary in a normal view sends its backups now; none from a backup, a solo replica, a
  // replica recovering its disk, a primary abdicating (its pipeline has not committed for abdicate_ticks), or one
  // whose view is not durable yet (as send() defers every message carrying a view until it is).
  [[nodiscard]] std::optional<commit_beat> beat() const;

  // Asserts the invariants above that cost O(1) or O(pipeline): every input calls it before it returns.
  void check_invariants() const;
  // Asserts the ones that walk the whole in-memory log (O(journal)): for tests, after any input.
  void check_log_invariants() const;

 private:
  struct entry {
    header h;
    bool durable = false;  // the body is in the journal, synced
    bool writing = false;  // a write of this header's body is in flight
    bool faulty = false;   // it was durable here and got lost (corruption): never reported as "never had it"
    bool verified = true;  // on the log as far as this replica knows; unverified entries are never applied
  };
  // A peer's checkpoint being received in chunks (state transfer): what it is, who sends it, the prefix so far.
  struct sync_transfer {
    header at;               // the checkpoint is the state after this op (a committed prepare's header)
    checksum_t checksum;     // of the whole checkpoint (checkpoint_checksum_domain)
    std::uint64_t size = 0;  // its bytes
    replica_t from = 0;
    std::vector<std::byte> bytes;  // the prefix received (bytes.size() is the next offset asked for)
    std::uint64_t asked = 0;       // tick of the last request for the next chunk
    std::uint32_t resends = 0;     // requests for the same chunk since the last one arrived
  };
  struct pipeline_entry {
    header h;
    std::uint32_t ok = 0;  // bitset of replicas whose prepare_ok arrived (self: once durable)
  };
  struct pending_read {
    checksum_t checksum;
    std::set<replica_t> requesters;  // replicas that asked for this prepare
    bool for_commit = false;         // the apply loop waits for it
    bool for_pipeline = false;       // the primary resends it
  };

  // Sending.
  void send(replica_t to, message m, std::vector<effect>& out);
  void broadcast(const message& m, std::vector<effect>& out);
  void flush_deferred(std::vector<effect>& out);
  [[nodiscard]] message make(command c) const;

  // Normal operation.
  void on_request(const message& m, std::vector<effect>& out);
  void prepare_next(std::vector<effect>& out);
  void on_prepare(const message& m, std::vector<effect>& out);
  void on_prepare_ok(const message& m, std::vector<effect>& out);
  void on_commit(const message& m, std::vector<effect>& out);
  void store_prepare(const message& m, bool verified, std::vector<effect>& out);
  void commit_pipeline(std::vector<effect>& out);
  void advance_commit_max(std::uint64_t commit, std::vector<effect>& out);
  void commit_journal(std::vector<effect>& out);
  void apply(const message& prepare, std::vector<effect>& out);
  void send_prepare_ok(const header& h, std::vector<effect>& out);

  // View change.
  void vote_view_change(view_t v, std::vector<effect>& out);
  // Sends this replica's vote (for vote_view_) to every peer, marked when it is a hand_over()'s.
  void broadcast_vote(std::vector<effect>& out);
  void on_start_view_change(const message& m, std::vector<effect>& out);
  void count_view_change_votes(view_t v, std::vector<effect>& out);
  void start_view_change(view_t v, std::vector<effect>& out);
  void send_do_view_change(std::vector<effect>& out);
  void resend_view_change_vote(std::vector<effect>& out);
  void on_do_view_change(const message& m, std::vector<effect>& out);
  void on_start_view(const message& m, std::vector<effect>& out);
  void on_request_start_view(const message& m, std::vector<effect>& out);
  // A message from view v, which this replica never entered (it missed v's start_view): ask v's primary for it.
  void ask_for_start_view(view_t v, std::vector<effect>& out);
  void install_log(const std::map<std::uint64_t, header>& headers, std::uint64_t op, std::vector<effect>& out);
  void become_normal(std::vector<effect>& out);
  [[nodiscard]] std::vector<header> suffix_headers(bool verified_only) const;
  [[nodiscard]] message make_start_view() const;
  // A commit heartbeat or prepare from an earlier view's primary: this view's primary sends it its start_view.
  void answer_stale_primary(const message& m, std::vector<effect>& out);

  // Repair.
  void on_request_headers(const message& m, std::vector<effect>& out);
  void on_headers(const message& m, std::vector<effect>& out);
  void on_request_prepare(const message& m, std::vector<effect>& out);
  void repair(std::vector<effect>& out);
  bool accept_header(const header& h, bool trusted);
  void verify_down_from(std::uint64_t op);
  void read_prepare(std::uint64_t op, std::vector<effect>& out);

  // Checkpoints and state transfer.
  void maybe_checkpoint(std::vector<effect>& out);
  [[nodiscard]] std::vector<std::byte> encode_checkpoint() const;
  [[nodiscard]] bool restore_checkpoint(std::span<const std::byte> bytes);
  [[nodiscard]] bool writable(std::uint64_t op) const noexcept;
  void on_request_sync(const message& m, std::vector<effect>& out);
  void on_sync(const message& m, std::vector<effect>& out);
  void ask_sync_chunk(std::vector<effect>& out);
  void install_sync(const sync_transfer& t, const message& last, std::vector<effect>& out);

  // Recovery of a lost disk.
  [[nodiscard]] bool silenced() const noexcept { return durable_.recovering && !bugs_.vote_while_recovering; }
  void progress_recovery(std::vector<effect>& out);
  void on_recovery_response(const message& m);
  // Incarnations (see the header): whether a stamped message from a peer is from an incarnation that no longer counts
  // (then it is dropped); a newer one first replaces what the older said. forget_peer drops a peer's votes,
  // do_view_change and pipeline acknowledgements.
  [[nodiscard]] bool ignore_stale_incarnation(const message& m);
  // What this replica stamps on its prepare_ok, start_view_change and do_view_change: its durable incarnation.
  [[nodiscard]] std::uint64_t stamp() const noexcept { return bugs_.stale_after_disk_loss ? 0 : durable_.incarnation; }
  void forget_peer(replica_t r);
  // A start_view or recovery_response echoing this incarnation's nonce: the sender's view after the loss.
  void count_recovery_response(replica_t from, view_t v);
  [[nodiscard]] bool durable_through(std::uint64_t op) const;

  // Persistence.
  void persist(std::vector<effect>& out);
  [[nodiscard]] vsr_state wanted_state() const;

  // Calls check_invariants() when an input returns, whichever return it takes.
  struct invariants_on_return {
    const replica& self;
    ~invariants_on_return() { self.check_invariants(); }
  };

  // Helpers.
  // The bit of replica r in a bitset of replicas (votes, acknowledgements).
  [[nodiscard]] static constexpr std::uint32_t bit(replica_t r) noexcept { return 1u << r; }
  void heard_from_primary();
  void on_commit_ok(const message& m);
  [[nodiscard]] replica_t primary_of_view(view_t v) const noexcept;
  [[nodiscard]] std::uint32_t jitter(std::uint32_t ticks);
  [[nodiscard]] const message* cached(std::uint64_t op, const checksum_t& checksum) const;
  [[nodiscard]] std::size_t count(std::uint32_t bits) const noexcept;
  void recover(recovered_state recovered);

  replica_options options_;
  replica_bugs bugs_;
  state_machine& sm_;
  client_table clients_;
  prng rng_;

  enum status status_ = status::normal;
  view_t view_{0};
  view_t log_view_{0};
  std::uint64_t op_ = 0;
  std::uint64_t commit_min_ = 0;        // applied
  std::uint64_t commit_max_ = 0;        // known committed
  std::uint64_t view_head_ = 0;         // its log head when it became normal in this view (applied_view_head())
  std::uint64_t commit_persisted_ = 0;  // the commit lower bound last handed to persist
  std::pair<std::uint64_t, checksum_t> commit_checksum_{0, {}};  // the primary's header checksum at its commit
  std::vector<header> view_headers_;      // the suffix installed when log_view_ began (persisted with it)
  std::set<std::uint64_t> faulty_slots_;  // journal slots lost to corruption, op unknown: never nacked
  std::uint64_t journal_slots_ = 0;
  std::uint64_t checkpoint_interval_ = 0;    // 0: no checkpoints
  std::map<std::uint64_t, entry> log_;       // headers by op (the in-memory journal index); op 0 is the root
  std::map<std::uint64_t, message> bodies_;  // prepares held in memory (uncommitted, or read back for apply)
  std::map<std::uint64_t, pending_read> reads_;
  // Repair requests in flight (repair()): the first op of each header range asked -> (its last op, the tick asked),
  // and each prepare asked -> the tick asked. Pruned as they are answered, committed or resend_ticks old.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> headers_asked_;
  std::map<std::uint64_t, std::uint64_t> prepares_asked_;
  // A repair request unanswered this long is asked again (of any peer): longer than resend_ticks, as an answer waits
  // behind the others of the window and the peer's reads of its journal, and an early resend moves it twice.
  [[nodiscard]] std::uint64_t repair_timeout_ticks() const noexcept {
    return std::uint64_t{options_.resend_ticks} * repair_timeout_resends;
  }
  static constexpr std::uint64_t repair_timeout_resends = 4;

  // Durability.
  vsr_state durable_;                    // what storage has confirmed
  std::optional<vsr_state> persisting_;  // in flight
  bool persist_again_ = false;           // wanted_state() changed while persisting_
  std::vector<send_effect> deferred_;    // messages waiting for their view to be durable

  // Checkpoints.
  checkpoint_ref checkpoint_;                            // the newest written (the superblock names it once durable)
  std::vector<std::byte> checkpoint_bytes_;              // its bytes (served to peers in state transfer)
  std::optional<checkpoint_effect> checkpoint_writing_;  // in flight (its bytes only if it will serve transfers)
  std::uint64_t checkpoint_writing_size_ = 0;
  checksum_t checkpoint_writing_checksum_;
  bool checkpoint_soon_ = false;      // a state transfer installed state not yet checkpointed here
  std::uint64_t apply_progress_ = 0;  // last tick commit_min_ moved, or was not behind
  std::uint64_t sync_due_ = 0;        // the next request_sync may go out then
  std::optional<sync_transfer> sync_;

  // Primary.
  std::deque<pipeline_entry> pipeline_;
  std::deque<message> request_queue_;

  // View change.
  std::map<std::uint32_t, std::uint32_t> svc_votes_;  // view -> bitset of voters
  std::map<replica_t, message> dvcs_;                 // do_view_change messages for view_ (primary of view_)
  bool voted_ = false;                                // this replica voted to leave view_
  view_t vote_view_{0};                               // the view it votes for
  std::optional<view_t> hand_over_view_;              // the view a hand_over() voted for (its votes carry the mark)
  // Per peer: the tick from which it may get our echo of a vote again (at most one per resend_ticks: an echo
  // answers a vote, and two replicas in the same view change would otherwise echo each other's echoes forever).
  std::array<std::uint64_t, replicas_max> echo_due_{};

  // Recovery of a lost disk: the start_view asked for with recovery_nonce_ names the primary's log head then
  // (recovery_target_, in recovery_view_); once everything up to it is durable here, recovering_ (what
  // is wanted durable) clears.
  bool recovering_ = false;
  std::uint64_t recovery_nonce_ = 0;
  std::map<replica_t, view_t> recovery_views_;                     // the peers' answers to this incarnation's probe
  std::optional<std::pair<view_t, std::uint64_t>> recovery_head_;  // a normal primary's (view, log head), answered
  std::optional<std::uint64_t> recovery_target_;
  view_t recovery_view_{0};
  // Incarnations: this replica's (what wanted_state() persists), and per peer the highest seen and, once a peer's probe
  // said it lost its disk, the highest of its earlier incarnations (messages up to it are dropped).
  std::uint64_t incarnation_ = 0;
  std::uint64_t incarnation_named_ = 0;  // recovering: the highest incarnation of ours a peer's answer named
  std::array<std::uint64_t, replicas_max> peer_incarnation_{};
  std::array<std::optional<std::uint64_t>, replicas_max> peer_lost_through_{};

  // Time (ticks).
  std::uint64_t ticks_ = 0;
  std::uint64_t primary_seen_ = 0;  // backup: last message from the primary
  std::uint64_t view_change_began_ = 0;
  std::uint64_t heartbeat_due_ = 0;
  std::uint64_t resend_due_ = 0;
  std::uint32_t primary_timeout_ = 0;  // with jitter
  std::uint32_t view_change_timeout_ = 0;
  std::uint64_t heartbeat_sequence_ = 0;
  std::uint64_t commit_progress_ = 0;        // primary: last tick its commit advanced or its pipeline was empty
  std::uint64_t commit_heartbeat_seen_ = 0;  // the newest heartbeat sequence taken in commit_heartbeat_view_
  view_t commit_heartbeat_view_{0};
  // Primary (quorum_heard_tick): the view it tracks, its last heartbeats (sequence, tick sent; at most
  // heartbeats_kept) and, per replica, the send tick of the newest one it acknowledged (0: none in this view).
  static constexpr std::size_t heartbeats_kept = 64;
  std::optional<view_t> heard_view_;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> heartbeats_sent_;
  std::vector<std::uint64_t> heartbeat_heard_tick_;
};

}  // namespace rill::consensus
