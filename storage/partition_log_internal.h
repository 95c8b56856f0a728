#pragma once
// Private to the partition_log implementation files: the writer's queued work and its completions.
#include <chrono>
#include <coroutine>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "storage/partition_log.h"

namespace rill::storage {

// One waiting coroutine and the value it will receive. complete() resumes it (unless it has not suspended yet,
// in which case await_ready() lets it continue at once).
template <class T>
struct completion {
  std::coroutine_handle<> handle;
  std::optional<T> result;
  bool await_ready() const noexcept { return result.has_value(); }
  void await_suspend(std::coroutine_handle<> h) noexcept { handle = h; }
  T await_resume() { return std::move(*result); }
  void complete(T value) {
    RILL_ASSERT(!result.has_value());
    result.emplace(std::move(value));
    if (handle) {
      std::exchange(handle, {}).resume();
    }
  }
};

struct partition_log::work {
  enum class kind : std::uint8_t { append, replicated, sync, control };
  kind k = kind::append;
  // append / replicated
  std::vector<std::byte> bytes;
  std::vector<batch_info> infos;
  std::vector<batch_meta> metas;
  std::uint32_t records = 0;
  completion<expected<append_result>>* append_done = nullptr;
  // sync / control
  std::function<task<expected<void>>()> control;
  completion<expected<void>>* void_done = nullptr;

  [[nodiscard]] bool is_append() const noexcept { return k == kind::append || k == kind::replicated; }
};

// One group of appends on its way through write_group's steps.
struct partition_log::append_group {
  std::vector<std::unique_ptr<work>> items;  // consecutive appends of one kind, oldest first
  std::shared_ptr<segment> active;           // the segment the group is written to
  std::uint64_t position = 0;                // byte where the group starts: the active segment's size before it
  std::uint64_t bytes = 0;                   // of all its batches
  bool replicated = false;
  bool has_metas = false;               // some append carries replication metadata
  std::size_t metas_before = 0;         // the active segment's metadata entries before the group
  std::chrono::nanoseconds started{0};  // monotonic, for the observer
  timestamp_ms_t now{-1};               // the log-append time given to leader batches
  offset_t next{0};                     // log end after the group
  std::vector<append_result> results;   // one per append
  bool synced = false;                  // the group's bytes are covered by an fdatasync
  bool sync_failed = false;             // a step failed in its fdatasync: undo_group fences the log
};

// Where truncate_after cuts, found before anything changes.
struct partition_log::truncate_plan {
  offset_t last_kept{0};
  offset_t new_end{0};           // last_kept + 1: the log end after the cut
  std::size_t keep = 0;          // index in segments_ of the segment that ends at new_end
  std::shared_ptr<segment> seg;  // segments_[keep]
  std::uint64_t cut = 0;         // byte position in seg of the batch at new_end (seg's size if none)
  timestamp_ms_t max_ts{-1};     // the newest timestamp of the batches seg keeps
};

}  // namespace rill::storage
