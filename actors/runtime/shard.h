#pragma once
// shard: what one worker thread of the runtime owns: its io_uring engine, its deadline heap, its buffer pool and its
// file cache (the open descriptors of its partitions' storage files, under its share of limits.open_files_max).
// Every actor has a home shard and runs only on that shard's thread, so these need no locks.
//
// Contract: current_shard() is set on a shard's own thread (and nullptr elsewhere); code running in an actor uses it
// to submit I/O and schedule timers. Nothing here includes CAF.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "actors/runtime/deadline_heap.h"
#include "config/cpu_allocation.h"
#include "storage/buffer_pool.h"
#include "storage/file_cache.h"
#include "storage/io/uring_engine.h"

namespace rill::actors {

struct shard_stats {
  std::atomic<std::uint64_t> jobs_run{0};
  std::atomic<std::uint64_t> sleeps{0};
  std::atomic<bool> asleep{false};  // the worker is sleeping in the ring now (tests wait for it)
  std::atomic<std::uint64_t> wakes_sent{0};
  std::atomic<std::uint64_t> completions{0};
  std::atomic<std::uint64_t> timers_fired{0};
  std::atomic<std::uint64_t> run_queue_length{0};
  // Refreshed by the shard's thread at every dequeue (for the monitoring listener).
  std::atomic<std::uint64_t> submissions{0};          // io_uring submissions
  std::atomic<std::uint64_t> inline_syncs{0};         // writes + fdatasyncs run on the shard's thread (idle)
  std::atomic<std::uint64_t> in_flight{0};            // io_uring operations not yet completed
  std::atomic<std::uint64_t> pool_cached_bytes{0};    // buffer pool: freed buffers kept for reuse
  std::atomic<std::uint64_t> pool_outstanding{0};     // buffer pool: buffers handed out
  std::atomic<std::uint64_t> open_files{0};           // file cache: descriptors held
  std::atomic<std::uint64_t> open_file_evictions{0};  // file cache: descriptors closed to make room
};

class shard {
 public:
  // `open_files_max`: the most storage descriptors this shard's partitions hold open (file_cache.h).
  shard(std::size_t index, std::optional<config::cpu_info> cpu,
        std::uint64_t open_files_max = storage::file_cache::files_unlimited)
      : index_(index), cpu_(cpu), files_(open_files_max) {}
  // A shard whose I/O goes to `external` (the simulated disk), for tests that drive actors themselves (CAF's test
  // coordinator): it has no ring and no thread of its own.
  shard(std::size_t index, storage::io::engine& external,
        std::uint64_t open_files_max = storage::file_cache::files_unlimited)
      : index_(index), external_(&external), files_(open_files_max) {
    files_.set_reclaim_engine(&external);
  }

  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  [[nodiscard]] const std::optional<config::cpu_info>& cpu() const noexcept { return cpu_; }
  // Where actors of this shard submit I/O. Valid on the shard's thread once it has started.
  storage::io::engine& engine() noexcept {
    return external_ != nullptr ? *external_ : static_cast<storage::io::engine&>(*engine_);
  }
  // The ring itself (production shards only): the scheduler policy polls, sleeps and wakes through it.
  storage::io::uring_engine& ring() noexcept { return *engine_; }
  deadline_heap& timers() noexcept { return timers_; }
  storage::buffer_pool& pool() noexcept { return pool_; }
  // Shared by the partition logs of this shard (log_options::files); used on the shard's thread only.
  storage::file_cache& files() noexcept { return files_; }
  shard_stats& stats() noexcept { return stats_; }

  // Called once on the shard's thread before it runs anything. `inline_syncs`: the ring runs a lone write +
  // fdatasync on this thread when the shard would otherwise sleep (uring_engine::set_inline_idle_syncs).
  void start_on_this_thread(bool pin, bool inline_syncs = false);
  [[nodiscard]] bool started() const noexcept { return engine_ != nullptr || external_ != nullptr; }

 private:
  std::size_t index_;
  std::optional<config::cpu_info> cpu_;
  std::unique_ptr<storage::io::uring_engine> engine_;
  storage::io::engine* external_ = nullptr;
  deadline_heap timers_;
  storage::buffer_pool pool_;
  storage::file_cache files_;
  shard_stats stats_;
};

// The shard whose thread is calling, or nullptr.
shard* current_shard() noexcept;
void set_current_shard(shard* s) noexcept;

// Monotonic time for the hot timers.
std::chrono::nanoseconds monotonic_now() noexcept;

}  // namespace rill::actors
