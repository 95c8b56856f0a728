#pragma once
// model_storage: an in-memory model of one replica's durable storage (its journal of prepares and its superblock),
// with latency, faults and crash semantics, for driving the replica's effects in the simulator.
//
// What it models: a write or persist completes after a latency drawn from the seed, and is durable from then on; a
// crash loses whatever had not completed, and a write in flight at the crash may tear (the op's slot then holds
// nothing readable, not even what was there before); a write may fail (reported); a read may fail (reported); a
// stored prepare may rot (found unreadable later). Faults are only injected where the fault atlas allows them
// (see cluster.h), so that a quorum always keeps a good copy of everything committed.
//
// Invariants: a completion is reported once, in due order; after crash() nothing pending completes.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "base/random.h"
#include "consensus/replica.h"

namespace rill::simulation {

struct storage_options {
  std::uint32_t latency_min_ticks = 0;
  std::uint32_t latency_spread_ticks = 2;
  std::uint32_t write_fault_ppm = 0;  // a write reports failure
  std::uint32_t read_fault_ppm = 0;   // a read reports failure (the data stays)
  std::uint32_t torn_ppm = 500'000;   // a write in flight at a crash tears its slot
};

struct storage_completion {
  enum class kind { write, read, persist } what;
  std::uint64_t op = 0;
  consensus::checksum_t checksum;
  bool ok = true;
  std::optional<consensus::message> prepare;  // read
  consensus::vsr_state state;                 // persist
};

class model_storage {
 public:
  // `may_fault(op)` asks the fault atlas whether this replica may lose or fail op right now.
  model_storage(const storage_options& options, std::uint64_t seed, consensus::vsr_state initial,
                std::function<bool(std::uint64_t op)> may_fault);

  void write(const consensus::message& prepare, std::uint64_t now);
  void read(std::uint64_t op, consensus::checksum_t checksum, std::uint64_t now);
  void persist(const consensus::vsr_state& state, std::uint64_t now);
  std::vector<storage_completion> complete(std::uint64_t now);

  // Crash: pending operations vanish; writes in flight may tear their slots.
  void crash();
  // What a restarted replica finds.
  [[nodiscard]] consensus::recovered_state recover();
  // Silent corruption of a stored prepare (bit rot).
  void rot(std::uint64_t op);

  void set_options(const storage_options& o) { options_ = o; }
  [[nodiscard]] const std::map<std::uint64_t, consensus::message>& journal() const noexcept { return journal_; }
  [[nodiscard]] const consensus::vsr_state& superblock() const noexcept { return superblock_; }
  [[nodiscard]] std::size_t pending() const noexcept { return pending_.size(); }

 private:
  struct pending_op {
    std::uint64_t due;
    std::uint64_t sequence;
    storage_completion c;
    std::optional<consensus::message> data;  // write
  };
  std::uint64_t due(std::uint64_t now);

  storage_options options_;
  prng rng_;
  std::function<bool(std::uint64_t)> may_fault_;
  std::map<std::uint64_t, consensus::message> journal_;  // durable prepares by op
  std::map<std::uint64_t, bool> rotten_;                 // ops whose stored prepare no longer reads back
  consensus::vsr_state superblock_;
  std::vector<pending_op> pending_;
  std::uint64_t sequence_ = 0;
  bool formatted_ = true;  // not yet opened since it was formatted
};

}  // namespace rill::simulation
