#pragma once
// runtime: the actor system of one rilld: one shard (worker thread + io_uring ring + timers) per allocated CPU,
// every actor on a fixed home shard. This header stays free of CAF; actor code includes actors/runtime/runtime.hpp.
#include <cstddef>
#include <memory>
#include <vector>

#include "config/cpu_allocation.h"

namespace caf {
class actor_system;
}

namespace rill::actors {

class shard;

struct runtime_options {
  std::vector<config::cpu_info> cpus;  // one shard per entry, in order
  bool pin = true;                     // bind each shard thread to its CPU and memory node
  std::size_t max_throughput = 64;     // messages per actor run before the shard checks I/O and other actors
  // storage.inline_syncs: a shard about to sleep with one write + fdatasync outstanding and no other file I/O runs
  // it on its own thread instead of through io_uring's kernel worker (uring_engine::set_inline_idle_syncs).
  bool inline_syncs = false;
  // limits.open_files_max: storage descriptors of every shard together; each shard keeps an equal share (at least
  // one). 0: no limit.
  std::uint64_t open_files_max = 0;
};

class runtime {
 public:
  explicit runtime(runtime_options options);
  ~runtime();  // stops the actor system (actors must have closed their files first) and the shards
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  caf::actor_system& system() noexcept;
  [[nodiscard]] std::size_t shard_count() const noexcept;
  shard& shard_at(std::size_t index) noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace rill::actors
