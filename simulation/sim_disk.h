#pragma once
// sim_disk: an in-memory file system behind io::engine, seeded and deterministic, with injectable faults and the
// crash semantics of a real file system. Storage tests use it for crash and fault tests; the simulator (issue 4)
// gives one to every simulated node.
//
// Semantics
// - Every operation completes after a seeded random latency in [latency_ns_min, latency_ns_max] of simulated time,
//   and takes effect when it completes; completions run in (time, submission) order, so concurrent operations may
//   complete out of submission order. poll(true) jumps simulated time to the next completion (and moves the
//   attached manual_clock with it).
// - Durability: a file's content becomes durable at a successful fdatasync/fsync of that file. A directory's
//   entries (creates, renames, unlinks, mkdirs) become durable at an fsync of that directory; until then a crash
//   may undo them, as a real file system may. A truncate is file content: durable at the next sync of the file.
// - crash() models power loss: every file reverts to its durable content, and each write since the last sync
//   either survives, is lost, or is torn (a random subset of its 512-byte sectors lands), seeded; every directory
//   reverts to its durable entries; every fd is closed. crash() requires nothing in flight: stop the disk first
//   (halt() or fail_stop_after()), drive the owner until its operations have failed, then crash.
// - Faults (seeded, per operation): EIO on reads, writes (a prefix of a failed write may land) and syncs (nothing
//   becomes durable, and what the failed sync covered never will: failed_sync_loses_writes); explicit bit flips.
// - The page cache: reads see every change applied (synced or not). restart_process() keeps it, crash() does not.
//   drop_cache drops its clean pages: the changes a failed sync lost are replaced by the durable bytes.
// - Space: files are sparse, in blocks of block_bytes. A write allocates the blocks it touches, a reserve
//   (fallocate) the blocks of its range (also past the end of the file), a truncate frees every block past the new
//   end, an unlinked file frees its blocks once its last descriptor closes; growing a file by truncate allocates
//   nothing. used_bytes() counts allocated blocks. A write or reserve that needs more than capacity_bytes fails with
//   ENOSPC and changes nothing (tmpfs; ext4 without delayed allocation). With delayed_allocation (ext4's default),
//   a write never fails for space: its new blocks are allocated at the file's next fdatasync/fsync, which fails
//   with ENOSPC (nothing becomes durable) while they do not fit.
// - sync_covers_only_submitted: a file sync covers only what was applied when it was submitted (see the field).
// - fail_stop_after(n): the n-th mutating operation from now, and every operation after it, fails with EIO and has
//   no effect: the point where the machine lost power. Crash tests enumerate n over a whole workload.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/random.h"
#include "storage/io/engine.h"

namespace rill::simulation {

namespace io = storage::io;

struct sim_disk_faults {
  std::uint64_t latency_ns_min = 20'000;
  std::uint64_t latency_ns_max = 300'000;
  std::uint32_t read_error_ppm = 0;
  std::uint32_t write_error_ppm = 0;
  std::uint32_t sync_error_ppm = 0;
  // At a crash, each unsynced write survives whole with crash_keep_ppm, is torn with crash_torn_ppm, else is lost.
  std::uint32_t crash_keep_ppm = 400'000;
  std::uint32_t crash_torn_ppm = 300'000;
  std::uint64_t capacity_bytes = UINT64_MAX;
  bool delayed_allocation = false;
  // An fdatasync/fsync of a file makes durable only the changes applied before it was submitted (a real one may
  // miss writes that complete while it runs); false: every change applied before it completes. For code that syncs
  // beside its own writes (the background sync of relaxed durability).
  bool sync_covers_only_submitted = false;
  // A failed fdatasync/fsync (EIO) leaves the changes it covered in the cache, readable, but never durable: a later
  // successful sync does not write them (Linux since 4.13 marks the pages clean after failed writeback), a crash
  // loses them, and drop_cache (POSIX_FADV_DONTNEED) replaces them with what the disk holds. false: they stay dirty
  // and a later sync may still make them durable (an optimistic file system).
  bool failed_sync_loses_writes = true;
};

class sim_disk final : public io::engine {
 public:
  explicit sim_disk(std::uint64_t seed, sim_disk_faults faults = {}, manual_clock* clock = nullptr);
  ~sim_disk() override;

  // io::engine
  void submit(io::request& r) override;
  std::size_t poll(bool wait) override;
  [[nodiscard]] std::size_t in_flight() const override { return queue_.size(); }
  [[nodiscard]] const char* name() const override { return "sim"; }

  // Fault control.
  sim_disk_faults& faults() noexcept { return faults_; }
  void fail_stop_after(std::uint64_t mutating_ops);
  void halt() { fail_stop_after(1); }
  [[nodiscard]] bool stopped() const noexcept { return stopped_; }
  // Mutating operations applied so far (writes, syncs, truncates, creates, renames, unlinks, mkdirs).
  [[nodiscard]] std::uint64_t mutating_ops() const noexcept { return mutating_ops_; }
  // Operations of one kind applied so far (successful or not).
  [[nodiscard]] std::uint64_t ops_of(io::opcode op) const noexcept { return op_counts_[static_cast<std::size_t>(op)]; }
  // fdatasync/fsync calls failed with EIO by sync_error_ppm so far.
  [[nodiscard]] std::uint64_t sync_errors() const noexcept { return sync_errors_; }
  void crash();
  // Moves simulated time forward by `ns` (and the attached clock); operations due by then complete at the next
  // poll(false). For drivers with their own notion of time (the VSR simulator's ticks).
  void advance_time(std::uint64_t ns);
  // The process died but the machine did not: every fd is closed and the disk works again, while unsynced changes
  // stay in the "page cache" (a later crash() may still drop them). Requires nothing in flight, like crash().
  void restart_process();
  // The disk was lost and replaced: an empty file system (every file and directory gone). Requires nothing in
  // flight, like crash().
  void wipe();
  // Flips bits of a file's current content (meant for synced files: the flip is durable).
  void flip_bits(const std::string& path, std::uint64_t byte_offset, std::uint8_t mask);

  // Inspection and setup for tests (immediate, durable, outside the engine's queue).
  void set_file_content(const std::string& path, std::vector<std::byte> content);
  void remove_file(const std::string& path);
  [[nodiscard]] std::optional<std::vector<std::byte>> file_content(const std::string& path) const;
  [[nodiscard]] bool exists(const std::string& path) const;
  [[nodiscard]] std::vector<std::string> list(const std::string& dir) const;
  // Unsynced write/truncate operations pending on the file at path (0 when fully durable).
  [[nodiscard]] std::size_t unsynced_ops(const std::string& path) const;
  // Whether bytes [offset, offset + length) of the file at path would read the same after a power loss now that
  // landed none of its unsynced writes: the file is reachable through durable directory entries, its durable size
  // covers the range, and no unsynced (or lost) change left those bytes different from their durable content.
  [[nodiscard]] bool durable_matches(const std::string& path, std::uint64_t offset, std::uint64_t length) const;
  // What reads of [offset, offset + length) of the file at path return now (from the cache); nullopt when the
  // file is missing or shorter.
  [[nodiscard]] std::optional<std::vector<std::byte>> read_range(const std::string& path, std::uint64_t offset,
                                                                 std::uint64_t length) const;
  // Called with every write that lands (the path it was opened by, where, what): a checker's view of placement.
  using write_observer =
      std::function<void(const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes)>;
  void observe_writes(write_observer o) { write_observer_ = std::move(o); }
  static constexpr std::uint64_t block_bytes = 4096;
  // Bytes of allocated blocks (every file), and of written blocks waiting for allocation at a sync.
  [[nodiscard]] std::uint64_t used_bytes() const noexcept { return used_bytes_; }
  [[nodiscard]] std::uint64_t delayed_bytes() const noexcept { return delayed_bytes_; }
  [[nodiscard]] std::uint64_t free_bytes() const noexcept {
    return faults_.capacity_bytes > used_bytes_ ? faults_.capacity_bytes - used_bytes_ : 0;
  }
  // Descriptors open now, and the most open at once since the disk was made (descriptor limits: file_cache.h).
  [[nodiscard]] std::size_t open_fds() const noexcept { return fds_.size(); }
  [[nodiscard]] std::size_t open_fds_max() const noexcept { return open_fds_max_; }
  [[nodiscard]] std::uint64_t now_ns() const noexcept { return now_ns_; }

  struct node;
  struct node_change;  // one unsynced change of a file (sim_disk.cpp)

 private:
  struct pending {
    std::uint64_t due_ns;
    std::uint64_t seq;
    io::request* r;
    bool operator>(const pending& o) const noexcept { return due_ns != o.due_ns ? due_ns > o.due_ns : seq > o.seq; }
  };

  void apply(io::request& r);
  std::int64_t do_open(io::request& r);
  std::int64_t do_write(node& n, std::uint64_t offset, const std::vector<std::byte>& data);
  std::int64_t do_truncate(node& n, std::uint64_t size);
  std::int64_t do_reserve(node& n, std::uint64_t offset, std::uint64_t length);
  // Allocates the holes among blocks [first, end) of n (delayed: marks them for allocation at the next sync);
  // false, changing nothing, when they do not fit.
  bool allocate(node& n, std::uint64_t first, std::uint64_t end, bool delayed);
  // sync_snapshot_ set: only the changes made before that count of the file's changes become durable.
  std::int64_t do_sync(int fd);
  std::int64_t do_drop_cache(int fd);
  // The file's durable content (its unsynced changes undone from the cache's).
  [[nodiscard]] static std::vector<std::byte> durable_image(const node& n);
  // A successful sync of the first `covered` unsynced changes of a file holding lost ones (failed_sync_loses_writes):
  // the covered changes that are not lost become durable, the lost ones stay undone at a crash.
  void sync_around_lost(node& n, std::size_t covered);
  std::int64_t do_rename(const std::string& from, const std::string& to);
  std::int64_t do_unlink(const std::string& path, bool dir);
  std::int64_t do_mkdir(const std::string& path);
  std::int64_t do_list(io::request& r);
  node* file_for_fd(int fd) const;
  // Resolves the parent directory of path and returns it with the last component, or nullptr.
  std::pair<node*, std::string> resolve_parent(const std::string& path) const;
  node* resolve(const std::string& path) const;
  void crash_dir(node& dir);
  void crash_file(node& file);

  prng rng_;
  sim_disk_faults faults_;
  manual_clock* clock_;
  std::uint64_t now_ns_ = 0;
  std::uint64_t seq_ = 0;
  std::priority_queue<pending, std::vector<pending>, std::greater<>> queue_;
  std::shared_ptr<node> root_;
  std::map<int, std::shared_ptr<node>> fds_;
  std::map<int, std::string> fd_paths_;  // the path each descriptor was opened by (write_observer)
  write_observer write_observer_;
  int next_fd_ = 3;
  std::size_t open_fds_max_ = 0;
  std::uint64_t mutating_ops_ = 0;
  std::optional<std::uint64_t> stop_at_;
  bool stopped_ = false;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t delayed_bytes_ = 0;
  bool polling_ = false;
  std::array<std::uint64_t, static_cast<std::size_t>(io::opcode::cancel) + 1> op_counts_{};
  std::uint64_t sync_errors_ = 0;
  // sync_covers_only_submitted: each file sync in flight -> its file's change count when it was submitted.
  std::map<const io::request*, std::uint64_t> sync_snapshots_;
  std::optional<std::uint64_t> sync_snapshot_;  // the one of the sync being applied

  friend struct node;
};

}  // namespace rill::simulation
