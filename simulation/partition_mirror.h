#pragma once
// partition_mirror: a simulated replica's partition log, the storage layer's real storage::partition_log on the
// replica's simulated disk (directory /partition), fed the way a cluster's partition is fed from VSR.
//
// Each produce prepare the replica holds on its chain is stamped (base offset = the log's end, leader epoch = the
// prepare's view, timestamp = the prepare's tick) and appended byte for byte with append_replicated, its op and
// checksum beside it (batch_meta), in op order, before it commits; the log syncs each append (sync before ack).
// commit_to() follows the replica's commit, so consumers (reads below committed) see only committed records. When
// the replica no longer holds a prepare the mirror appended (a view change replaced or cut it), the mirror cuts it
// and everything after it with truncate_after, and appends the new view's prepares instead. After a state transfer
// (the replica installed a peer's checkpoint beyond what the mirror holds) the mirror copies the peer's committed
// batches, byte for byte with their metadata, up to the checkpoint's op: a partition's state transfer.
//
// The replica's own checkpoints wait for the mirror (the driver holds a checkpoint write until committed_op()
// reaches its op): a checkpoint never covers an op whose batch is not durable in the partition log, so a restart
// never needs an op the journal no longer holds.
//
// Invariants (checked by the harness's checker, asserted here where they are established):
// - The log's batches, in offset order, are the produce prepares of one hash chain, in op order, contiguous.
// - committed() never exceeds the end of the batches of ops the replica has committed.
// - At most one log operation (append, truncate, commit step, transfer) is in flight.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "base/clock.h"
#include "consensus/replica.h"
#include "simulation/sim_disk.h"
#include "storage/file_cache.h"
#include "storage/partition_log.h"

namespace rill::simulation {

class partition_mirror {
 public:
  partition_mirror(std::uint64_t cluster, simulation::sim_disk& disk, storage::buffer_pool& pool, const clock& clk,
                   storage::log_reporter& reporter);
  ~partition_mirror();

  // Startup (nothing in flight on the disk): opens the log (its recovery runs), rebuilds the op index from the
  // batches' metadata, and takes the replica's checkpoint as the chain's committed base.
  void open(const consensus::checkpoint_ref& checkpoint);
  // A prepare the replica may hold (delivered, written or read back): kept until the chain reaches its op.
  void offer(const consensus::message& prepare);
  // One step against the replica's current log: cut what it no longer holds, commit what it committed, append the
  // next prepare. Starts at most one log operation.
  void step(const consensus::replica& r);
  // The replica installed a peer's checkpoint at `at`: the mirror must hold everything up to it. `peer` gives
  // another replica's mirror whose committed_op() reaches it (or null: none now; retried at the next step).
  void need_through(const consensus::header& at);
  void transfer(const std::function<partition_mirror*(std::uint64_t op)>& peer);
  // Before the disk powers off (it is halted and drained): closes the log (its operations fail) and forgets it.
  void abandon();
  // Test only: a deliberate bug (the simulator's tests prove the checkers find it): the log trusts the suffix it
  // appended, neither cutting what a view change replaced nor checking it before it commits.
  void set_bug_trust_own_suffix(bool on) { bug_trust_own_suffix_ = on; }

  [[nodiscard]] bool open_now() const noexcept { return log_ != nullptr; }
  [[nodiscard]] storage::partition_log* log() const noexcept { return log_.get(); }
  // The highest op whose batch (if it has one) is committed in the log.
  [[nodiscard]] std::uint64_t committed_op() const noexcept { return committed_op_; }
  [[nodiscard]] bool transfer_pending() const noexcept { return target_.has_value(); }
  [[nodiscard]] std::uint64_t truncations() const noexcept { return truncations_; }
  [[nodiscard]] std::uint64_t transfers() const noexcept { return transfers_; }
  // One line for failure reports: base, tip, what is offered, whether the next op is held.
  [[nodiscard]] std::string describe(const consensus::replica& r) const;

 private:
  struct link {  // an op on the mirror's chain above committed_op_
    consensus::checksum_t checksum;
    std::int64_t end = -1;  // one past its batch's last offset; -1: no batch
  };
  task<void> append(consensus::message prepare);
  task<void> cut(std::uint64_t from_op, std::int64_t last_kept);
  task<void> copy_from(partition_mirror* peer, consensus::header at);
  [[nodiscard]] std::int64_t end_below(std::uint64_t op) const;  // log end after the ops below op

  std::uint64_t cluster_;
  simulation::sim_disk& disk_;
  storage::buffer_pool& pool_;
  const clock& clk_;
  storage::log_reporter& reporter_;
  // The log's descriptors, under a limit far below what it holds (superblocks, segments, index, metadata), so every
  // run closes and reopens files between its appends, reads, rolls and truncations. One per open(): a crash closes
  // every descriptor on the disk.
  std::unique_ptr<storage::file_cache> files_;
  std::unique_ptr<storage::partition_log> log_;
  bool busy_ = false;
  std::uint64_t committed_op_ = 0;            // the chain's committed base
  consensus::checksum_t committed_checksum_;  // its header checksum
  std::int64_t committed_end_ = 0;            // log end after it
  std::map<std::uint64_t, link> chain_;       // ops above the base the mirror has taken (with or without batch)
  // Prepares offered above the committed base, by op and checksum (a view change may replace what the chain took,
  // so versions the chain passed over are kept too).
  using offer_key = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;  // op, checksum low, high
  std::map<offer_key, consensus::message> offered_;
  std::optional<consensus::header> target_;  // a state transfer to finish
  bool bug_trust_own_suffix_ = false;
  std::uint64_t truncations_ = 0;
  std::uint64_t transfers_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for coroutines finishing after destruction
  std::uint64_t generation_ = 0;  // bumped when the log is opened or abandoned: older operations' results are void
};

}  // namespace rill::simulation
