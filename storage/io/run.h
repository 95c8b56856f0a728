#pragma once
// run_task: drives an io::engine until one task finishes, for code that may block its thread: startup, shutdown,
// tools, the simulator's harness and tests. Never on a shard's serving path (a shard drives its engine from its
// scheduler loop).
//
// Contract: returns the task's result, or nullopt when the engine ran out of work in flight first (the task waits
// on something this engine will never complete).
#include <optional>
#include <utility>

#include "base/task.h"
#include "storage/io/engine.h"

namespace rill::storage::io {

template <class T>
std::optional<T> run_task(engine& e, task<T> t) {
  std::optional<T> out;
  spawn(std::move(t), [&](T v) { out.emplace(std::move(v)); });
  run_until(e, [&] { return out.has_value(); });
  return out;
}

}  // namespace rill::storage::io
