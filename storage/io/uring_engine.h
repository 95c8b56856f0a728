#pragma once
// uring_engine: io::engine over io_uring (liburing).
//
// - submit() only queues; poll() turns queued requests into SQEs (one io_uring_enter per poll for the whole batch),
//   reaps CQEs and runs completions. poll(true) sleeps in io_uring_submit_and_wait when nothing is ready.
// - Operations io_uring cannot do on this kernel (directory listing, file size; ftruncate where the raw opcode 55
//   is missing, probed at start) run on one helper thread, started on first use. Its completions are handed back
//   through an eventfd that the ring polls, so they too complete inside poll() on the owner's thread.
// - Buffered writes (write, writev; not writev_datasync) run, when `write_thread` is set, on a second thread of
//   their own with plain pwritev. On ext4 io_uring cannot write the page cache inline (RWF_NOWAIT buffered writes
//   are refused), so each such SQE is punted to an io-wq worker and its completion woken back: two cross-core
//   wake-ups per write. The writer thread drains its whole queue per wake-up and posts all it finished with one
//   eventfd write, so a stream of writes costs wake-ups per burst, not per write (docs/benchmarks.md, issue 14).
// - Not thread-safe: one owner thread (a shard worker in rilld, the main thread in tools and tests).
#include <liburing.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/expected.h"
#include "storage/io/engine.h"

namespace rill::storage::io {

class uring_engine final : public engine {
 public:
  // Sets up a ring with `entries` submission slots. Fails (with the errno text) where io_uring is unavailable,
  // e.g. under a seccomp policy that forbids it; callers may fall back to sync_engine for tools.
  // `probe_opcodes` false treats every optional opcode (ftruncate, mkdirat, renameat, unlinkat) as missing, so the
  // helper-thread fallbacks can be tested on a kernel that has them.
  // `write_thread`: buffered writes on the writer thread (above) instead of as io_uring SQEs.
  static expected<std::unique_ptr<uring_engine>> create(unsigned entries = 256, bool probe_opcodes = true,
                                                        bool write_thread = true);
  ~uring_engine() override;

  void submit(request& r) override;
  std::size_t poll(bool wait) override;
  [[nodiscard]] std::size_t in_flight() const override { return in_flight_; }
  [[nodiscard]] const char* name() const override { return "io_uring"; }

  // For the shard runtime. wake() may be called from any thread: it makes a sleeping poll_wait() return.
  void wake() noexcept;
  // Blocks until at least one completion, a wake() or `timeout` (none: no limit), then runs the completions that
  // are there. Unlike poll(true) it sleeps even with nothing in flight. Returns the completions run.
  std::size_t poll_wait(std::optional<std::chrono::nanoseconds> timeout);

  [[nodiscard]] bool native_ftruncate() const noexcept { return native_ftruncate_; }
  // Counters for monitoring and benchmarks.
  [[nodiscard]] std::uint64_t submissions() const noexcept { return submissions_; }
  [[nodiscard]] std::uint64_t enters() const noexcept { return enters_; }
  [[nodiscard]] bool write_thread() const noexcept { return write_thread_; }
  // Writes the writer thread ran, and how many times it woke for them (writes per wake-up: the batching).
  [[nodiscard]] std::uint64_t thread_writes() const noexcept { return writer_.executed; }
  [[nodiscard]] std::uint64_t thread_write_wakeups() const noexcept {
    return writer_.wakeups.load(std::memory_order_relaxed);
  }

 private:
  uring_engine() = default;
  bool prep(request& r);  // false: no SQE available
  bool needs_helper(const request& r) const noexcept;
  void arm_eventfd();
  std::size_t reap(std::vector<request*>& done);

  ::io_uring ring_{};
  bool ring_ready_ = false;
  bool native_ftruncate_ = false;
  bool native_mkdir_ = false;
  bool native_rename_ = false;
  bool native_unlink_ = false;
  std::deque<request*> pending_;
  std::size_t in_flight_ = 0;
  std::uint64_t submissions_ = 0;
  std::uint64_t enters_ = 0;

  // A thread that runs requests with blocking system calls (execute_blocking) and hands them back through
  // eventfd_. Each wake-up takes the whole queue, runs it, then posts every result at once.
  struct offload {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<request*> queue;            // guarded by mutex
    std::vector<request*> done;             // guarded by mutex
    bool stop = false;                      // guarded by mutex
    std::size_t outstanding = 0;            // owner thread only: handed over, not yet reaped
    std::uint64_t executed = 0;             // owner thread only (counted when reaped)
    std::atomic<std::uint64_t> wakeups{0};  // written under mutex, read by counters
  };
  void hand_over(offload& o, request& r);
  void offload_main(offload& o);
  void collect(offload& o, std::vector<request*>& done);
  void stop(offload& o);
  [[nodiscard]] std::size_t offloaded() const noexcept { return helper_.outstanding + writer_.outstanding; }

  int eventfd_ = -1;
  bool eventfd_armed_ = false;
  std::uint64_t eventfd_value_ = 0;
  bool write_thread_ = false;
  offload helper_;  // operations io_uring cannot do here
  offload writer_;  // buffered writes (write_thread_)
};

}  // namespace rill::storage::io
