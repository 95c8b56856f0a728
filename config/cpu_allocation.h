#pragma once
// cpu_allocation: which CPUs run shards, one shard per CPU.
//
//   "all"                                every CPU (default)
//   "N"                                  the first N CPUs
//   "a..b"                               CPUs with OS index a to b, inclusive
//   "numa:auto"                          every CPU, shards grouped by NUMA node
//   "numa:nodes=0,1;cores=4;no_ht=true"  up to `cores` CPUs from each listed node (every node if `nodes` is left out,
//                                        every CPU of it if `cores` is); no_ht=true takes one hyperthread per
//                                        physical core
//
// Resolution runs against a machine_topology, detected with hwloc in production and built by hand in tests, so the
// rules are testable on any machine.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace rill::config {

struct cpu_info {
  unsigned os_index = 0;  // the CPU number the kernel uses (sched_setaffinity)
  unsigned core = 0;      // physical core (logical index): hyperthreads of one core share it
  int numa_node = -1;     // NUMA node OS index, -1 when unknown
};

struct machine_topology {
  std::vector<cpu_info> cpus;  // ordered by OS index
  // Reads this machine's topology with hwloc. Falls back to one node of std::thread::hardware_concurrency() CPUs
  // when hwloc cannot load it (the detail says why in `note`).
  static machine_topology detect(std::string* note = nullptr);
};

struct cpu_spec {
  enum class kind : std::uint8_t { all, count, range, numa };
  kind k = kind::all;
  unsigned count = 0;      // kind::count
  unsigned first = 0;      // kind::range
  unsigned last = 0;       // kind::range
  std::vector<int> nodes;  // kind::numa; empty = every node
  std::optional<unsigned> cores_per_node;
  bool no_ht = false;
};

// Parses the text of cpu_allocation. The error says what is allowed.
expected<cpu_spec> parse_cpu_allocation(std::string_view text);

// The CPUs the spec selects on `topo`, in shard order (shard i runs on result[i]). Errors name what does not exist
// ("CPU 7: the machine has CPUs 0..3").
expected<std::vector<cpu_info>> resolve_cpu_allocation(const cpu_spec& spec, const machine_topology& topo);

}  // namespace rill::config
