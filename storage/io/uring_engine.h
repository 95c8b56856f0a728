#pragma once
// uring_engine: io::engine over io_uring (liburing).
//
// - submit() only queues; poll() turns queued requests into SQEs (one io_uring_enter per poll for the whole batch),
//   reaps CQEs and runs completions. poll(true) sleeps in io_uring_submit_and_wait when nothing is ready.
// - Operations io_uring cannot do on this kernel (directory listing, file size; ftruncate where the raw opcode 55
//   is missing, probed at start) run on one helper thread, started on first use. Its completions are handed back
//   through an eventfd that the ring polls, so they too complete inside poll() on the owner's thread.
// - Writes marked request::blocking_ok run as pwrite(v) on the owner's thread where poll() would have made their SQE
//   (in submission order with the other queued requests, which io_uring runs in any order anyway), and complete in
//   the same poll().
// - Not thread-safe: one owner thread (a shard worker in rilld, the main thread in tools and tests).
#include <liburing.h>

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
  static expected<std::unique_ptr<uring_engine>> create(unsigned entries = 256, bool probe_opcodes = true);
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
  [[nodiscard]] std::uint64_t blocking_writes() const noexcept { return blocking_writes_; }

 private:
  uring_engine() = default;
  bool prep(request& r);  // false: no SQE available
  bool needs_helper(const request& r) const noexcept;
  void start_helper();
  void arm_eventfd();
  void helper_main();
  std::size_t reap(std::vector<request*>& done);

  ::io_uring ring_{};
  bool ring_ready_ = false;
  bool native_ftruncate_ = false;
  bool native_mkdir_ = false;
  bool native_rename_ = false;
  bool native_unlink_ = false;
  std::deque<request*> pending_;
  std::size_t in_flight_ = 0;
  std::vector<request*> blocking_done_;  // blocking_ok writes run by prep(), completed by the next reap()
  std::uint64_t submissions_ = 0;
  std::uint64_t enters_ = 0;
  std::uint64_t blocking_writes_ = 0;

  // Helper thread for blocking operations.
  int eventfd_ = -1;
  bool eventfd_armed_ = false;
  std::size_t helper_outstanding_ = 0;  // submitted to the helper, not yet reaped
  std::uint64_t eventfd_value_ = 0;
  std::thread helper_;
  std::mutex helper_mutex_;
  std::condition_variable helper_cv_;
  std::deque<request*> helper_queue_;  // guarded by helper_mutex_
  std::vector<request*> helper_done_;  // guarded by helper_mutex_
  bool helper_stop_ = false;           // guarded by helper_mutex_
};

}  // namespace rill::storage::io
