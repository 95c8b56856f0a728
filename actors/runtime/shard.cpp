#include "actors/runtime/shard.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "base/assert.h"

namespace rill::actors {
namespace {
thread_local shard* t_current = nullptr;

// Binds the calling thread to `cpu` and its memory to the CPU's NUMA node. Best effort: a failure is not fatal
// (containers may forbid it); the shard still runs, unpinned.
void pin_thread(const config::cpu_info& cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu.os_index, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (cpu.numa_node < 0) {
    return;
  }
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) {
    return;
  }
  if (hwloc_topology_load(topo) == 0) {
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(cpu.numa_node));
    if (node != nullptr) {
      (void)hwloc_set_membind(topo, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
    }
  }
  hwloc_topology_destroy(topo);
}
}  // namespace

shard* current_shard() noexcept {
  return t_current;
}
void set_current_shard(shard* s) noexcept {
  t_current = s;
}

std::chrono::nanoseconds monotonic_now() noexcept {
  return std::chrono::steady_clock::now().time_since_epoch();
}

void shard::start_on_this_thread(bool pin, bool inline_syncs) {
  RILL_ASSERT(engine_ == nullptr, "shard {} started twice", index_);
  if (pin && cpu_) {
    pin_thread(*cpu_);
  }
  auto e = storage::io::uring_engine::create(256);
  RILL_ASSERT(e.has_value(), "shard {}: io_uring: {}", index_, e ? std::string() : e.error().message());
  engine_ = std::move(*e);
  engine_->set_inline_idle_syncs(inline_syncs);
  files_.set_reclaim_engine(engine_.get());  // closes what a burst of opens left over the limit
  set_current_shard(this);
}

}  // namespace rill::actors
