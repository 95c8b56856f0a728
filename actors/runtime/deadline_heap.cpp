#include "actors/runtime/deadline_heap.h"

namespace rill::actors {

deadline_heap::timer_id deadline_heap::schedule(clock_time deadline, std::function<void()> callback) {
  const timer_id id = next_id_++;
  heap_.push(entry{deadline, id, std::move(callback)});
  live_.insert(id);
  return id;
}

bool deadline_heap::cancel(timer_id id) {
  return live_.erase(id) > 0;
}

void deadline_heap::drop_cancelled() const {
  while (!heap_.empty() && !live_.count(heap_.top().id)) {
    heap_.pop();
  }
}

std::optional<deadline_heap::clock_time> deadline_heap::next_deadline() const {
  drop_cancelled();
  if (heap_.empty()) {
    return std::nullopt;
  }
  return heap_.top().deadline;
}

std::size_t deadline_heap::fire_due(clock_time now) {
  std::size_t fired = 0;
  for (;;) {
    drop_cancelled();
    if (heap_.empty() || heap_.top().deadline > now) {
      return fired;
    }
    entry e = heap_.top();
    heap_.pop();
    live_.erase(e.id);
    e.callback();
    ++fired;
  }
}

}  // namespace rill::actors
