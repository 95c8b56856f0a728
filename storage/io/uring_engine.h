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
// - Inline idle syncs (set_inline_idle_syncs, off by default): a writev_datasync that is the only request waiting
//   to be submitted while no other disk request is in flight is not given to the ring by poll(false); if the owner
//   then has nothing else to run it calls poll_wait(), which runs the write and its fdatasync as plain blocking
//   calls on the owner's thread instead of sleeping; if it finds work instead it calls submit_deferred(), and the
//   request goes to the ring as usual. Several such requests at once always go to the ring, so their fdatasyncs
//   overlap on the device. Company backs inlining off: a writev_datasync submitted while another is in flight, or
//   for another file than the one before it, turns inlining off for the next inline_backoff_syncs writev_datasyncs.
//   Two partitions syncing on one shard thus keep overlapping their fdatasyncs (inlined, each would wait for the
//   other's), and a lone one gets inlining back soon after the other stops.
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
  // are there. Unlike poll(true) it sleeps even with nothing in flight. With inline idle syncs, it may instead run
  // the kept-back write + fdatasync itself and return without sleeping (not when `timeout` is under
  // inline_timeout_min: a timer due that soon must not wait out an fdatasync). Returns the completions run.
  std::size_t poll_wait(std::optional<std::chrono::nanoseconds> timeout);

  // Inline idle syncs (see the top of this file). The owner that turns them on must call submit_deferred() whenever
  // it finds other work after a poll(false), so that a deferred request never waits behind that work.
  void set_inline_idle_syncs(bool on) noexcept { inline_idle_syncs_ = on; }
  static constexpr std::uint64_t inline_backoff_syncs = 256;
  static constexpr std::chrono::nanoseconds inline_timeout_min = std::chrono::milliseconds(1);
  // Gives the ring whatever poll(false) left queued (the deferred write + fdatasync). Cheap when nothing is.
  void submit_deferred();

  [[nodiscard]] bool native_ftruncate() const noexcept { return native_ftruncate_; }
  // Counters for monitoring and benchmarks.
  [[nodiscard]] std::uint64_t submissions() const noexcept { return submissions_; }
  [[nodiscard]] std::uint64_t enters() const noexcept { return enters_; }
  [[nodiscard]] std::uint64_t blocking_writes() const noexcept { return blocking_writes_; }
  [[nodiscard]] std::uint64_t inline_syncs() const noexcept { return inline_syncs_; }
  [[nodiscard]] std::uint64_t inline_backoffs() const noexcept { return inline_backoffs_; }

 private:
  uring_engine() = default;
  bool prep(request& r);  // false: no SQE available
  bool needs_helper(const request& r) const noexcept;
  void start_helper();
  void arm_eventfd();
  void helper_main();
  std::size_t reap(std::vector<request*>& done);
  // The lone writev_datasync that poll(false) keeps back and poll_wait() runs inline (inline idle syncs).
  [[nodiscard]] bool inline_candidate() const noexcept;
  void run_inline(request& r);
  // Completes `done` (counted out of in_flight_, disk_in_flight_ and datasync_in_flight_ first).
  void finish(std::vector<request*>& done);

  ::io_uring ring_{};
  bool ring_ready_ = false;
  bool native_ftruncate_ = false;
  bool native_mkdir_ = false;
  bool native_rename_ = false;
  bool native_unlink_ = false;
  std::deque<request*> pending_;
  std::size_t in_flight_ = 0;
  std::size_t disk_in_flight_ = 0;  // the part of in_flight_ that is file I/O (not sockets)
  bool inline_idle_syncs_ = false;
  std::vector<request*> blocking_done_;  // blocking_ok writes run by prep(), completed by the next reap()
  std::uint64_t submissions_ = 0;
  std::uint64_t enters_ = 0;
  std::uint64_t blocking_writes_ = 0;
  std::uint64_t inline_syncs_ = 0;
  std::uint64_t inline_backoffs_ = 0;
  std::uint64_t datasyncs_seen_ = 0;    // writev_datasync requests submitted, ever
  std::uint64_t inline_off_until_ = 0;  // no inlining until datasyncs_seen_ reaches this (company seen)
  std::size_t datasync_in_flight_ = 0;  // writev_datasync requests submitted and not completed
  int last_datasync_fd_ = -1;           // the file of the last writev_datasync submitted

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
