#pragma once
// coordinated: real actors under CAF's test coordinator on one thread, over the simulated disk and a manual clock,
// with a seeded choice of which ready actor runs next (the harness of the actor-ordering tests).
//
// Contract: construct, spawn actors on shard 0 (it is current while the object lives), call drive() to run until
// nothing is ready and no I/O is in flight. Members are destroyed in reverse order: the actor system (declared
// first) goes last, after the disk and the shard its actors used.
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <algorithm>

#include "actors/runtime/shard.h"
#include "base/clock.h"
#include "base/random.h"
#include "storage/partition_log.h"
#include "simulation/sim_disk.h"

namespace rill::testing {

inline caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

struct coordinated {
  explicit coordinated(std::uint64_t seed)
      : sys(testing_config(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
        disk(seed, simulation::sim_disk_faults{}, &clk),
        test_shard(0, disk),
        rng(seed) {
    actors::set_current_shard(&test_shard);
  }
  ~coordinated() { actors::set_current_shard(nullptr); }
  coordinated(const coordinated&) = delete;
  coordinated& operator=(const coordinated&) = delete;

  // A seeded choice among the ready actors, one message at a time; I/O completions when nothing is ready.
  void drive() {
    for (int steps = 0; steps < 1'000'000; ++steps) {
      if (!sched.jobs.empty()) {
        const auto pick = rng.below(sched.jobs.size());
        std::rotate(sched.jobs.begin(), sched.jobs.begin() + static_cast<std::ptrdiff_t>(pick),
                    sched.jobs.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
        sched.run_once();
        continue;
      }
      if (disk.in_flight() > 0) {
        disk.poll(true);  // completions become messages to the actors that asked
        continue;
      }
      return;
    }
    BOOST_FAIL("the scenario did not settle");
  }

  // Runs `f(self)` in a fresh actor. (CAF 0.17 spawns an argument-less function through a null pointer to its empty
  // argument tuple, which UBSan reports: the function takes a dummy argument.)
  template <class F>
  void act(F f) {
    sys.spawn(
        [f](caf::event_based_actor* self, int) -> caf::behavior {
          f(self);
          return {};
        },
        0);
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  manual_clock clk;
  simulation::sim_disk disk;
  actors::shard test_shard;
  storage::collecting_reporter reporter;
  prng rng;
};

}  // namespace rill::testing
