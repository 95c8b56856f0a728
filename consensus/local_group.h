#pragma once
// local_group: a one-replica VSR group on local disk, for state that one process owns (rilld's metadata). The same
// replica code as a cluster, with replica_count 1, run by the same driver (driver.h) over the same journal_storage
// (journal.wal, superblock and snapshot.bin in one directory, on io::engine: io_uring in rilld, the simulated disk in
// tests). What is its own: the recovery judgement of a lone copy (below), one session, one submit at a time.
//
// open() restores the state machine from the checkpoint the superblock names and replays the journal after it
// (every op up to the durable commit; an op above a gap was never committed and is cut), then opens this process's
// session in the client table. submit() commits one operation: prepared, written to the journal and synced, applied
// through the state machine, and only then answered with the state machine's reply. Checkpoints are written every
// checkpoint_interval ops (a quarter of the ring by default), so the ring wraps without losing anything a restart
// needs.
//
// Errors are values, and a storage failure fences the group: a failed write, sync, read or checkpoint fails the
// submit in flight and every later one (the state on disk is what it was; a restart recovers it). A journal that
// lost a committed op (one below the superblock's commit, one whose header is there without its prepare, or one
// below another op: alone, op k + 1 is prepared only once op k is durable) is corrupt_data at open, naming the op:
// never silently cut. Only the highest op, when neither its prepare nor its header reads back, is cut as a write
// torn by a crash. A checkpoint that reads back but does not restore is corrupt_data too.
//
// Contract: one submit at a time (a second while one is in flight is refused: overloaded). Not thread-safe: the
// engine's completions and the caller run on one thread. Destroy it after close(), or once the engine has nothing
// of it in flight (after a crash's drain): a submit's answer may come before its checkpoint or superblock write.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/async.h"
#include "base/expected.h"
#include "base/task.h"
#include "consensus/driver.h"
#include "consensus/group_storage.h"
#include "storage/io/engine.h"

namespace rill::consensus {

struct local_group_options {
  std::uint64_t cluster = 1;
  journal_options journal{256, 64 * 1024};  // 256 ops of at most 64 KiB: a 16 MiB journal.wal
  std::uint64_t snapshot_bytes_max = 256 * 1024 * 1024;
  // What snapshot.bin reserves of each region at open (capped at snapshot_bytes_max), growing ahead of the
  // checkpoints; the journal is reserved whole. So a full data disk leaves the group working.
  std::uint64_t snapshot_reserved_bytes = 4 * 1024 * 1024;
  std::uint64_t checkpoint_interval = 0;  // 0: slot_count / 4
};
// The defaults open (open() checks the same at run time): a pipeline of one, so the ring holds the default
// checkpoint interval and the pipeline twice; a checkpoint region within snapshot_file's limits.
static_assert(local_group_options{}.journal.slot_count >= 8);
static_assert(local_group_options{}.journal.slot_count / 4 + 2 <= local_group_options{}.journal.slot_count);
static_assert(local_group_options{}.snapshot_bytes_max >= snapshot_bytes_min);
static_assert(local_group_options{}.snapshot_bytes_max <= snapshot_bytes_max_limit);
static_assert(local_group_options{}.snapshot_reserved_bytes <= local_group_options{}.snapshot_bytes_max);
static_assert(local_group_options{}.journal.message_size_max > header::encoded_size, "room for a body");

class local_group {
 public:
  // The largest body submit() takes (the journal's slot, less the header).
  [[nodiscard]] std::uint64_t body_bytes_max() const noexcept {
    return options_.journal.message_size_max - header::encoded_size;
  }

  // Opens (creating when missing) dir/journal.wal, dir/superblock and dir/snapshot.bin, restores `sm` and replays.
  // `sm` must be at its initial state and outlive the group.
  static task<expected<std::unique_ptr<local_group>>> open(storage::io::engine& e, std::string dir, state_machine& sm,
                                                           local_group_options options);
  ~local_group();

  // Commits one operation (operation >= operation_user_min); returns the state machine's reply once it is durable
  // and applied. Errors: invalid_argument (operation, or a body over body_bytes_max), overloaded (a submit is
  // in flight), the fencing error.
  task<expected<std::vector<std::byte>>> submit(std::uint8_t operation, std::vector<std::byte> body);
  // Waits for I/O in flight, then closes the files.
  task<expected<void>> close();

  [[nodiscard]] op_t committed() const noexcept { return replica().commit_min(); }
  [[nodiscard]] op_t checkpoint() const noexcept { return op_t(replica().durable_state().checkpoint.op()); }
  // Ops replayed from the journal by open() (after the checkpoint).
  [[nodiscard]] std::uint64_t replayed() const noexcept { return replayed_; }

 private:
  local_group(storage::io::engine& e, local_group_options o) : engine_(&e), options_(o) {}
  [[nodiscard]] const class replica& replica() const noexcept { return driver_->replica(); }
  // The driver's hooks.
  void on_reply(message m);
  void on_fenced(const error& e);
  task<expected<std::vector<std::byte>>> request(std::uint8_t operation, std::uint64_t number,
                                                 std::vector<std::byte> body);

  storage::io::engine* engine_;
  local_group_options options_;
  std::unique_ptr<journal_storage> storage_;
  std::unique_ptr<driver> driver_;  // after storage_: destroyed first
  std::uint64_t client_ = 1;        // this process's session
  std::uint64_t request_ = 0;       // the last request number used
  struct waiter {
    std::uint64_t request = 0;
    std::optional<std::vector<std::byte>> reply;
    async_event done;
  };
  waiter* waiting_ = nullptr;
  std::optional<error> fenced_;
  std::optional<error> fence_cause_;  // the storage error behind it (open() returns it as is)
  std::uint64_t replayed_ = 0;
};

}  // namespace rill::consensus
