#pragma once
// Crash-point enumeration for one atomic file replacement (storage/atomic_file.h and the callers that replace a file
// through it): the replacement is run once to count its mutating disk operations, then once per operation with the
// power lost there (fail_stop_after(k), crash()), and once more with the power lost just after it returned. After
// each crash the file must hold its old content or its new one (never a mix, never neither), and the new one
// whenever the replacement was acknowledged (returned success) before the crash.
//
// Each enumeration runs under two crash models: the simulated disk's seeded mix (an unsynced write survives, is torn
// or is lost) under a few seeds, and "everything unsynced is lost", under which a missing fdatasync of the temp file
// (the renamed file comes back empty) or a missing fsync of the directory (an acknowledged rename is undone) always
// shows.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simulation/sim_disk.h"

namespace rill::storage::testing {

// What one attempt saw. `mutating_ops` counts the replacement's own operations (after its setup).
struct replacement_outcome {
  std::uint64_t mutating_ops = 0;
  bool acknowledged = false;  // the replacement returned success before the crash
  bool is_old = false;        // after the crash the file holds the old content
  bool is_new = false;        // after the crash the file holds the new content
};

struct crash_model {
  std::string name;
  std::vector<std::uint64_t> seeds;
  simulation::sim_disk_faults faults;
};

inline std::vector<crash_model> replacement_crash_models() {
  simulation::sim_disk_faults lose_all;
  lose_all.crash_keep_ppm = 0;
  lose_all.crash_torn_ppm = 0;
  return {crash_model{"seeded mix of kept, torn and lost writes", {1, 2, 3}, simulation::sim_disk_faults{}},
          crash_model{"every unsynced write lost", {1}, lose_all}};
}

// `attempt(seed, faults, stop_after)` builds a fresh disk (seed, faults), does its setup (the old content, durable),
// calls fail_stop_after(*stop_after) if set, runs the replacement, drives the disk until nothing is in flight,
// crashes it, and reports what it saw (recovering the caller's state too, where the caller has a recovery).
template <class Attempt>
void crash_at_every_step_of_a_replacement(Attempt&& attempt) {
  for (const auto& model : replacement_crash_models()) {
    for (const std::uint64_t seed : model.seeds) {
      BOOST_TEST_CONTEXT("crash model: " << model.name << ", seed " << seed) {
        // No stop: the crash comes right after the replacement was acknowledged.
        const replacement_outcome whole = attempt(seed, model.faults, std::optional<std::uint64_t>{});
        BOOST_REQUIRE_MESSAGE(whole.acknowledged, "the replacement failed without a crash");
        BOOST_TEST(whole.mutating_ops >= 4u);  // write, fdatasync, rename, directory fsync at least
        BOOST_TEST(whole.is_new, "an acknowledged replacement was lost at a crash just after it");
        BOOST_TEST(!whole.is_old);
        bool saw_old = false;
        for (std::uint64_t k = 1; k <= whole.mutating_ops; ++k) {
          BOOST_TEST_CONTEXT("power lost at mutating operation " << k << " of " << whole.mutating_ops) {
            const replacement_outcome o = attempt(seed, model.faults, std::optional<std::uint64_t>{k});
            BOOST_TEST((o.is_old != o.is_new), "the file holds neither its old content nor its new one");
            if (o.acknowledged) {
              BOOST_TEST(o.is_new, "an acknowledged replacement was lost");
            }
            saw_old = saw_old || o.is_old;
          }
        }
        BOOST_TEST(saw_old, "no crash point left the old content: the enumeration missed the replacement");
      }
    }
  }
}

}  // namespace rill::storage::testing
