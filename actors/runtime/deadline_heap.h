#pragma once
// deadline_heap: the hot timers of one shard (group-commit intervals, long-poll deadlines, later sessions and
// heartbeats). The shard loop sleeps in io_uring until the earliest deadline and fires what is due; CAF's single
// clock thread is left for rare timers (each of its wake-ups is a cross-thread hop).
//
// Single-threaded: only the shard's own thread touches it. Callbacks run inside fire_due(), in deadline order (ties
// in scheduling order), and may schedule or cancel timers.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <unordered_set>
#include <vector>

namespace rill::actors {

class deadline_heap {
 public:
  using clock_time = std::chrono::nanoseconds;  // monotonic
  using timer_id = std::uint64_t;

  timer_id schedule(clock_time deadline, std::function<void()> callback);
  // False when the timer already fired or was cancelled.
  bool cancel(timer_id id);
  [[nodiscard]] std::optional<clock_time> next_deadline() const;
  // Runs every callback whose deadline is <= now. Returns how many ran.
  std::size_t fire_due(clock_time now);
  [[nodiscard]] std::size_t size() const noexcept { return live_.size(); }

 private:
  struct entry {
    clock_time deadline;
    timer_id id;
    std::function<void()> callback;
    bool operator>(const entry& o) const noexcept { return deadline != o.deadline ? deadline > o.deadline : id > o.id; }
  };
  void drop_cancelled() const;

  mutable std::priority_queue<entry, std::vector<entry>, std::greater<>> heap_;
  std::unordered_set<timer_id> live_;
  timer_id next_id_ = 1;
};

}  // namespace rill::actors
