#pragma once
// replica_storage: the storage the simulator gives each replica's driver (consensus::driver executes the replica's
// storage effects through it, as in production), with latency, faults and crash semantics. Two implementations:
// model_storage (an in-memory model) and disk_storage (production's journal_storage on the storage layer's
// simulated disk).
//
// Invariants: a completion is reported once; after crash() nothing pending completes; storage faults are injected
// only where the fault atlas allows (may_fault), so a quorum always keeps a good copy of everything committed.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "base/expected.h"
#include "base/random.h"
#include "consensus/group_storage.h"
#include "consensus/replica.h"
#include "storage/errc.h"

namespace rill::simulation {

struct storage_options {
  std::uint32_t latency_min_ticks = 0;
  std::uint32_t latency_spread_ticks = 2;
  std::uint32_t write_fault_ppm = 0;  // a write reports failure
  std::uint32_t read_fault_ppm = 0;   // a read reports failure (the data stays)
  std::uint32_t torn_ppm = 500'000;   // a write in flight at a crash tears its slot
  // Per fdatasync/fsync on the simulated disk: it fails with EIO, and what it covered never becomes durable (sim_disk's
  // failed_sync_loses_writes: the pages stay readable in the cache). Outside the fault atlas: it loses only what was
  // never synced (never acknowledged). The storage fails, the driver fences, and the node restarts its process.
  std::uint32_t sync_fault_ppm = 0;
};

// A replica's storage as the driver sees it (consensus::group_storage: each operation reports once, through its
// callback), plus what the harness does to it: time, crashes, recovery, rot.
class replica_storage : public consensus::group_storage {
 public:
  // Runs the callbacks of the operations due by `now`, in order (they may start more operations, due later).
  // Operations started between two calls are timed from the last `now`.
  virtual void complete(std::uint64_t now) = 0;
  // Power loss: pending operations vanish (their callbacks never run); writes in flight may tear.
  // power_loss false: the process died and the machine did not (the page cache survives: every write that landed
  // stays readable, synced or not, and a later power loss may still drop what is unsynced).
  virtual void crash(bool power_loss = true) = 0;
  // Of the headers the last recover() reported, those whose prepares (and, for a partition group, whose batches)
  // the disk holds durably: what a power loss now would leave. (The model storage has no cache: all of them.)
  [[nodiscard]] virtual std::vector<consensus::header> durable_of(const std::vector<consensus::header>& recovered) {
    return recovered;
  }
  // The disk is lost (after crash()): the next recover() finds storage formatted anew, its vsr_state recovering (as
  // an operator's `rilld recover` formats it).
  // `format_tick`: when it was formatted anew (its incarnation's floor, as rilld's wall clock at `rilld recover`).
  virtual void wipe(std::uint64_t format_tick) = 0;
  // What a (re)starting replica finds, the checkpoint its superblock names included.
  [[nodiscard]] virtual consensus::recovered_state recover() = 0;
  // Silent corruption of one stored prepare the fault atlas allows, chosen with rng; its op, if any.
  virtual std::optional<std::uint64_t> rot_one(prng& rng) = 0;
  virtual void set_options(const storage_options& o) = 0;
};

// The error an injected storage fault reports (an I/O error, as a failed fdatasync reports it).
[[nodiscard]] inline error injected_fault(std::string_view what, std::uint64_t op) {
  return error(make_error_code(storage::errc::io_error), fmt::format("injected fault: {} of op {}", what, op));
}

}  // namespace rill::simulation
