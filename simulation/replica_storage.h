#pragma once
// replica_storage: what the simulator gives each replica to execute its storage effects (journal writes and reads,
// vsr_state persists), with latency, faults and crash semantics. Two implementations: model_storage (an in-memory
// model) and disk_storage (the real journal and superblock on the storage layer's simulated disk).
//
// Invariants: a completion is reported once; after crash() nothing pending completes; storage faults are injected
// only where the fault atlas allows (may_fault), so a quorum always keeps a good copy of everything committed.
#include <cstdint>
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
  enum class kind { write, read, persist, checkpoint } what;
  std::uint64_t op = 0;
  consensus::checksum_t checksum;
  bool ok = true;
  std::optional<consensus::message> prepare;  // read
  consensus::vsr_state state;                 // persist
  std::uint8_t slot = 0;                      // checkpoint (op: the checkpoint's op)
};

class replica_storage {
 public:
  virtual ~replica_storage() = default;
  virtual void write(const consensus::message& prepare, std::uint64_t now) = 0;
  virtual void read(std::uint64_t op, consensus::checksum_t checksum, std::uint64_t now) = 0;
  virtual void persist(const consensus::vsr_state& state, std::uint64_t now) = 0;
  // Writes a checkpoint into snapshot.bin's region `slot`, synced (completion: kind::checkpoint).
  virtual void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                std::uint64_t now) = 0;
  // Completions due by `now`, in order.
  virtual std::vector<storage_completion> complete(std::uint64_t now) = 0;
  // Power loss: pending operations vanish; writes in flight may tear.
  virtual void crash() = 0;
  // What a (re)starting replica finds, the checkpoint its superblock names included.
  [[nodiscard]] virtual consensus::recovered_state recover() = 0;
  // Silent corruption of one stored prepare the fault atlas allows, chosen with rng; its op, if any.
  virtual std::optional<std::uint64_t> rot_one(prng& rng) = 0;
  virtual void set_options(const storage_options& o) = 0;
};

}  // namespace rill::simulation
