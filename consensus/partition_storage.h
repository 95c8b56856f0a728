#pragma once
// partition_storage: the storage of a partition group's replica. A partition's records are written once: the
// journal (journal.wal) holds each produce prepare's 128-byte header alone, and the prepare's body, the record
// batch the primary stamped (offsets, leader epoch = the prepare's view, log-append time), is appended byte for
// byte to the partition log (storage::partition_log, sync before ack) with its op and header checksum beside it in
// the segment's .meta entries. Prepares of other operations (sessions, consumer positions, answered retries) are
// kept whole in the journal. The superblock and snapshot.bin are journal_storage's, unchanged.
//
// A write of a batch prepare completes once both halves are durable: its header in the journal and its batch in
// the log, synced. So a replica acknowledges a prepare only when a restart finds both. The header is written once
// the batch is durable, so a crash leaves a batch without its header (an uncommitted batch the chain confirms or
// cuts later), never a header without its batch: that needs the log's bytes to be lost, and recovery counts it
// faulty. (Written in parallel, or as soon as the write arrived while the batch waited for its chain, crashes left
// unacknowledged ops faulty on every replica of a group in the simulator, and the group could never leave its view.)
//
// The log holds the batches of one hash chain, in op order, contiguous in offsets. A batch prepare is appended
// when the ops between the log's last batch and it are known to chain (its parent, the parent of the header below,
// and so on, down to a batch the log holds with that checksum, or to the committed base) and none of them carries
// a batch still missing; until then the write waits (a backup receives prepares out of order and repairs gaps).
// Writes that follow each other on the chain are appended together (one append, one fdatasync).
//
// The log is cut only where it diverges from the replica's chain, on positive evidence: a write whose chain, walked
// down through hashes, reaches an op where the log holds a batch with another checksum (or holds batches above the
// op the write attaches to), or an applied op whose checksum differs from the batch the log holds at that op. The
// cut goes from that op on; every batch below it, committed or not as far as this replica knows, stays byte for
// byte. A batch the log holds for an op the replica now writes again with the same checksum is not written again.
//
// Recovery (open): the journal is scanned as journal_storage does (its decision table); the log recovers its own
// files, and a batch without its .meta entry (an append the crash interrupted: never acknowledged) is cut with
// everything after it. Then, for each header in the journal:
//
//   journal header of a batch op       log                              verdict
//   valid, above the checkpoint        a batch with its op and checksum valid: header and body both durable
//   valid, above the checkpoint        no such batch                    faulty: its batch was lost (or never
//                                                                       landed): never "never had it"
//   faulty / faulty slot               anything                         as the journal says (faulty)
//
// A batch in the log without a valid header (the header's write was lost at the crash) is kept, uncommitted and
// invisible, until the chain confirms or replaces it. The committed base (the op and log end through which every
// batch is committed) is the checkpoint's op, or the last batch below the log's persisted committed offset (a
// lower bound), whichever is later.
//
// Consumers see only committed batches: applied() raises the log's committed offset over each applied op whose
// batch is in the log with the applied checksum, in op order (an applied op whose batch is still on its way waits
// for it). durable_through(), the driver's checkpoint gate, is the op of that committed base, so a checkpoint never
// covers a batch a restart would not find.
//
// Retention (enforce_retention): the topic's retention applies to the batches this replica never needs again: those
// of ops at or below its durable checkpoint (a restart looks for the batches of the ops above it only). The bound is
// the log offset recorded at each checkpoint this storage wrote or recovered. A peer repairing may still ask for such
// an op while this replica's journal ring holds its header: read() answers errc::removed, the replica drops the read
// without counting the op lost (replica::on_read_done), and the peer, its repair stalled, syncs a checkpoint and
// copies the log by state transfer. A state transfer from a peer whose log starts past this log's committed end (its
// retention removed those batches) starts this log over at the peer's start (partition_log::restart_at) and copies
// from there; the checkpoint covers what was skipped.
//
// State transfer: after installed() (the replica took a peer's checkpoint beyond this log), nothing is appended
// until the host runs transfer(): the peer's committed batches up to the checkpoint's op are compared with this
// log's from its committed end on; what matches is kept (the replica may count it durable), and from the first
// difference this log is cut and the peer's batches copied, byte for byte with their .meta entries. A batch this
// log holds at or below the checkpoint's op that the peer has none for is stale and cut too. read_for_transfer()
// is the serving side.
//
// Invariants (asserted where they are established)
// - The log's batches are, in offset order, batch prepares of one hash chain in increasing op order, contiguous.
// - The committed base's end never exceeds the log's end, and the log's committed offset is the base's end (or the
//   persisted lower bound, at open); nothing at or below it is cut.
// - At most one log operation (append, cut, transfer) is in flight; at most one unanswered write per op (a new
//   write of an op answers the older one with errc::superseded).
// - The committed base never passes an op whose batch is being appended: the base moves over an op only by what
//   the log holds there, and an append in flight is not yet known to the index.
// - Every write is answered exactly once (durable, an error, or superseded), unless a crash drops it.
//
// Contract: single-threaded, on the engine's thread (group_storage's contract). `engine`, `pool`, `clk` and
// `reporter` outlive the storage. close() answers writes still waiting with errc::closed, waits for every
// operation of its own, then closes the log and the journal's files.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/async.h"
#include "base/clock.h"
#include "consensus/group_storage.h"
#include "storage/buffer_pool.h"
#include "storage/partition_log.h"

namespace rill::consensus {

struct partition_storage_options {
  journal_storage_options files;  // journal.detached_operation is set to batch_operation by open()
  // Prepares of this operation carry one record batch, stamped by the primary (their bodies go to the log).
  std::uint8_t batch_operation = operation_user_min;
  // The partition log's options; open() sets auto_commit = false and durability = sync_before_ack.
  storage::log_options log;
  std::uint64_t append_bytes_max = 1024 * 1024;   // batches gathered into one append
  std::uint64_t transfer_bytes_max = 256 * 1024;  // bytes asked of the peer per transfer chunk
  // Test only: a deliberate bug (the simulator's tests prove the checkers find it): the log's appends complete once
  // written, their fdatasync left to the background (durability every_ms), so a replica may acknowledge a batch a
  // power loss takes (review finding 11 of issue 38: a mutation the simulator used to miss).
  bool bug_append_unsynced = false;
  // Test only, deliberate bugs (issue 38's planted bugs; the simulator's tests prove the checkers find them):
  // - bug_checkpoint_ungated: durable_through() gates nothing, so a checkpoint may cover ops whose batches are not
  //   yet durable in the log (a restart from it finds offsets missing);
  // - bug_transfer_uncommitted: a state transfer commits the log through its end, not through the checkpoint's
  //   batches: its own uncommitted batches above the checkpoint (maybe of a branch a view change replaces) become
  //   visible as committed;
  // - bug_restart_drops_acked: a state transfer asks the peer even when this log holds the checkpoint's chain, so a
  //   peer whose retention removed those batches has this log start over, and the batches above the checkpoint this
  //   replica acknowledged go with it.
  bool bug_checkpoint_ungated = false;
  bool bug_transfer_uncommitted = false;
  bool bug_restart_drops_acked = false;
  // - bug_cuts_unreported: a cut of batches whose writes completed is not reported (take_cut): the replica goes on
  //   counting them durable (with replica_bugs::write_unverified: issue 38, finding 6 as it was).
  bool bug_cuts_unreported = false;
};

// The .meta payload of a partition group's batch: its op and header checksum.
[[nodiscard]] storage::batch_meta batch_meta_of(const header& h);
struct batch_op {
  std::uint64_t op = 0;
  checksum_t checksum;
};
[[nodiscard]] batch_op batch_op_of(const storage::batch_meta& m);

// A run of committed batches served to a replica in state transfer.
struct transfer_chunk {
  std::vector<std::byte> batches;          // whole batches, back to back
  std::vector<storage::batch_meta> metas;  // one per batch
  bool reached = false;                    // nothing further of ops <= the op asked for
  // The peer's log starts past the offset asked for, here (retention removed what is below): nothing else is sent,
  // and the asker starts its log over at this offset (partition_log::restart_at) and asks again from it.
  std::optional<std::int64_t> starts_at;
};

class partition_storage final : public group_storage {
 public:
  // Opens (creating when missing) dir's journal.wal, superblock and snapshot.bin (journal_storage::open: the same
  // errors) and the partition log in log_dir (partition_log::open's errors), then recovers as the header says and
  // fills `recovered`. Errors from the files; corrupt_data when the log's .meta entries do not go up in op.
  static task<expected<std::unique_ptr<partition_storage>>> open(storage::io::engine& e, storage::buffer_pool& pool,
                                                                 const clock& clk, storage::log_reporter& reporter,
                                                                 std::string dir, std::string log_dir,
                                                                 partition_storage_options options,
                                                                 const vsr_state& initial, recovered_state& recovered);
  ~partition_storage() override;
  partition_storage(const partition_storage&) = delete;
  partition_storage& operator=(const partition_storage&) = delete;

  void write(message prepare, std::function<void(expected<void>)> done) override;
  // A batch prepare's body comes from the log (corrupt_data when the log does not hold it with that checksum; removed
  // when retention removed it, at or below the durable checkpoint).
  void read(std::uint64_t op, checksum_t checksum, std::function<void(expected<message>)> done) override;
  void persist(const vsr_state& state, std::function<void(expected<void>)> done) override;
  void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                        std::function<void(expected<void>)> done) override;
  void applied(const header& prepare) override;
  void installed(const header& at) override;
  // Answers (errc::superseded) every waiting write the replica no longer holds with its checksum.
  void replica_changed(const replica& r) override;
  [[nodiscard]] std::vector<std::pair<std::uint64_t, checksum_t>> take_cut() override {
    return std::exchange(cut_durable_, {});
  }
  [[nodiscard]] std::uint64_t durable_through() const override {
    return options_.bug_checkpoint_ungated ? UINT64_MAX : base_op_;
  }
  // Runs what is due: a cut an applied op found, the writes whose chain is now known (the driver's replica_changed()
  // does it after every input; a host without a replica, a test, calls it).
  void poke() { pump(); }

  // State transfer. The checkpoint installed beyond this log, until transfer() has copied the batches up to it.
  [[nodiscard]] std::optional<header> transfer_target() const { return target_; }
  // A peer's committed batches from an offset, of ops <= through_op (its read_for_transfer(), here or over a wire).
  using transfer_source = std::function<task<expected<transfer_chunk>>(offset_t from, std::uint64_t through_op)>;
  // Copies up to transfer_target() from `source`; false when nothing was due or another log operation runs (try
  // again later). An error from the source leaves the target for another try; one from the log fails the writes
  // waiting and fences (the log is fenced).
  task<expected<bool>> transfer(transfer_source source);
  // The serving side: committed batches from `from` (a batch boundary at or below this replica's committed end),
  // at most bytes_max (at least one batch), of ops <= through_op. Errors: offset_out_of_range when through_op is
  // beyond what is committed here or `from` beyond the committed end; the log's read errors.
  task<expected<transfer_chunk>> read_for_transfer(offset_t from, std::uint64_t through_op, std::uint64_t bytes_max);

  // Runs the topic's retention (the log's options) over the batches of ops at or below the durable checkpoint (see
  // the header). Does nothing while a state transfer is due. The log's errors.
  task<expected<storage::retention_result>> enforce_retention();
  // The offset below which retention may remove batches now (the log start when nothing may go).
  [[nodiscard]] std::int64_t retention_ceiling() const;

  // The journal's header-ring writes that no sync covered yet (journal_storage::sync_headers): the owner syncs them
  // when no write follows, so that an idle replica's descriptors may be closed by the file cache.
  [[nodiscard]] bool headers_unsynced() const noexcept { return files_->headers_unsynced(); }
  void sync_headers(std::function<void(expected<void>)> done);

  // Answers the waiting writes (errc::closed) and takes no more: the first half of close(), which the owner calls
  // before it waits for its own completions (a write waiting for a gap below it completes only here).
  void stop_writes();
  // Answers the waiting writes (errc::closed), waits for this storage's own operations, closes the log and files.
  task<expected<void>> close();
  // After the disk failed under it or was halted (a simulated power loss, every operation on it drained): drops the
  // waiting writes unanswered, closes the log and files without waiting for its own operations (they find the
  // storage gone when they resume), and must be destroyed next.
  task<expected<void>> abandon();

  [[nodiscard]] storage::partition_log& log() noexcept { return *log_; }
  [[nodiscard]] const storage::partition_log& log() const noexcept { return *log_; }
  // The committed base: the op through which every batch is committed in the log (durable_through()), and its end.
  [[nodiscard]] std::uint64_t committed_op() const noexcept { return base_op_; }
  [[nodiscard]] std::int64_t committed_end() const noexcept { return base_end_; }
  [[nodiscard]] std::uint64_t truncations() const noexcept { return truncations_; }
  [[nodiscard]] std::uint64_t transfers() const noexcept { return transfers_; }
  // Transfers that started this log over at a peer's log start (partition_log::restart_at).
  [[nodiscard]] std::uint64_t restarts() const noexcept { return restarts_; }
  [[nodiscard]] std::size_t writes_waiting() const noexcept { return writes_.size(); }
  // One line for failure reports.
  [[nodiscard]] std::string describe() const;
  // Test only: a deliberate bug (the simulator's tests prove the checkers find it): the log trusts its own suffix,
  // neither cutting what a view change replaced nor checking a batch's checksum before it commits it.
  void set_bug_trust_own_suffix(bool on) noexcept { bug_trust_own_suffix_ = on; }

 private:
  struct pending;  // a write not yet answered
  struct logged {  // a batch the log holds
    checksum_t checksum;
    std::int64_t base = 0;
    std::int64_t end = 0;  // one past its last offset
  };
  struct placement;

  partition_storage(std::unique_ptr<journal_storage> files, std::unique_ptr<storage::partition_log> log,
                    partition_storage_options o);
  task<expected<void>> recover(recovered_state& recovered);
  [[nodiscard]] bool is_batch(const header& h) const noexcept { return h.operation == options_.batch_operation; }
  [[nodiscard]] placement place(const header& h) const;
  void pump();
  void step();
  void settle_applied();
  void answer(std::uint64_t op, expected<void> r);
  void fail_all(const error& e);
  // The log fenced (by this storage's operation or another: a roll by age, retention): every write fails.
  void on_log_fenced();
  void maybe_answer(std::uint64_t op);
  void start(task<void> t);
  void start_journal(std::uint64_t op, message m);
  void start_header(std::uint64_t op);  // a batch prepare's journal half, unless started
  task<void> read_body(message m, logged at, std::function<void(expected<message>)> done);
  task<void> do_append(std::vector<std::uint64_t> ops, std::vector<std::byte> bytes,
                       std::vector<storage::batch_meta> metas);
  task<void> do_cut(std::uint64_t from_op);
  task<expected<void>> cut_from(std::uint64_t from_op);
  // Cuts the log from this offset (a batch boundary at or above the committed end) and forgets what it cut.
  task<expected<void>> cut_at(std::int64_t offset);
  void prune();
  // The end offset of the log's batches through `at` (above the committed base), when they are `at`'s hash chain.
  [[nodiscard]] std::optional<std::int64_t> chain_end(const header& at) const;
  // The end offset of the log's batches through `op` (op <= base_op_), when the index still knows it.
  [[nodiscard]] std::optional<std::int64_t> end_through(std::uint64_t op) const;
  void note_checkpoint_end(std::uint64_t op);

  std::unique_ptr<journal_storage> files_;
  std::unique_ptr<storage::partition_log> log_;
  partition_storage_options options_;
  std::uint64_t slot_count_;

  std::map<std::uint64_t, std::unique_ptr<pending>> writes_;  // by op
  std::map<std::uint64_t, header> known_;  // above the committed base: the newest header written (or recovered)
  std::map<std::uint64_t, logged> index_;  // the log's batches by op (those of the journal's window)
  std::uint64_t base_op_ = 0;              // the committed base
  checksum_t base_checksum_;
  std::int64_t base_end_ = 0;
  std::deque<header> applied_waiting_;                             // applied ops above the base, in op order
  std::optional<std::uint64_t> cut_due_;                           // an applied op found a stale batch there
  std::vector<std::pair<std::uint64_t, checksum_t>> cut_durable_;  // batches cut after their write completed
  std::optional<header> target_;                                   // a state transfer to finish
  std::uint64_t checkpoint_op_ = 0;                                // the durable checkpoint's op (the superblock's)
  // (op, end offset of the log's batches through it) at the checkpoints written or recovered, oldest first: where
  // retention may cut once the checkpoint at that op is durable.
  std::deque<std::pair<std::uint64_t, std::int64_t>> checkpoint_ends_;
  bool busy_ = false;  // a log operation is in flight
  // The ops of the append in flight: the committed base waits below them (an applied op without a batch at such
  // an op finds the stale batch in the log once it landed, and cuts it).
  std::vector<std::uint64_t> appending_;
  bool closing_ = false;
  bool failed_ = false;  // a log operation failed (every write was answered with its error)
  bool pumping_ = false;
  bool pump_again_ = false;
  std::vector<std::function<void()>> answers_;  // run by pump(), outside its walk of the writes
  std::uint64_t next_id_ = 1;
  std::size_t own_in_flight_ = 0;  // this storage's coroutines and journal operations
  async_event own_idle_;
  bool bug_trust_own_suffix_ = false;
  std::uint64_t truncations_ = 0;
  std::uint64_t transfers_ = 0;
  std::uint64_t restarts_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rill::consensus
