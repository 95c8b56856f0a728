#pragma once
// swarm: turns a seed into a whole simulated run's options. Every knob not fixed by the caller is drawn from the
// seed (VOPR's swarm testing: each seed is a different cluster size, workload and fault mix), so a seed alone
// replays a run, and a sweep of seeds covers many configurations.
//
// Invariant: each knob is drawn in a fixed order whether or not it is given, so fixing one knob does not change
// what the others draw.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "simulation/cluster.h"

namespace rill::simulation {

struct knobs {
  std::map<std::string, std::uint64_t> given;  // knob name (as on rill-sim's command line) -> value
  std::vector<std::string> bugs;               // deliberate bugs to enable (test only)
  std::uint64_t ticks = 20'000;                // the safety phase's bound
  std::uint64_t liveness_ticks = 30'000;       // the liveness phase's bound
  bool model_storage = false;                  // the in-memory storage model instead of journal.wal on a sim_disk
  bool check_ack_durable = true;               // the checker's "prepare_ok only for a durable write"
};

// The knobs a swarm draws, with their ranges, for --help and docs/simulation.md.
struct knob_range {
  const char* name;
  std::uint64_t lo;
  std::uint64_t hi;
  const char* help;
  // A bit mask: drawn as the AND of two uniform draws, so each bit is set in a quarter of the seeds.
  bool mask = false;
};

// The fault classes of the swarm's masks (knobs faults-off and faults-up): bit i is class i.
enum class fault_class : std::uint8_t {
  loss,
  duplicate,
  crash,
  partition,
  write_fault,
  read_fault,
  rot,
  crash_after_ack,
};
constexpr std::uint32_t fault_class_count = 8;
// A class's rate, when its bit of faults-up is set, is multiplied by this (within the class's bound).
constexpr std::uint32_t fault_up_factor = 4;
const std::vector<knob_range>& swarm_knobs();
// A deliberate bug the simulator must find (test only): its name (rill-sim --bug) and what it breaks.
struct planted_bug {
  const char* name;
  const char* breaks;
  // Its harm is liveness (a group waits for good): a liveness failure catches it too, not only a safety failure.
  bool liveness = false;
  // The swarm does not find it within 1,000 seeds of master seed 7 (it needs a chain of faults the swarm draws
  // rarely): a unit test plants it instead, and bug_seeds.txt keeps the seed that found it, if any
  // (docs/simulation.md, "Planted bugs"). The bounded search in sim_test skips it.
  bool rare = false;
};
// Every deliberate bug, in the order rill-sim --list-bugs prints them: replica_bugs, the partition storage's, the
// ledger's, the coordinator's, and the storage layer's.
const std::vector<planted_bug>& planted_bugs();
// Their names alone.
const std::vector<std::string>& bug_names();

cluster_options options_for(std::uint64_t seed, const knobs& k);

}  // namespace rill::simulation
