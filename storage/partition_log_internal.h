#pragma once
// Private to the partition_log implementation files: the writer's queued work and its completions.
#include <coroutine>
#include <functional>
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

}  // namespace rill::storage
