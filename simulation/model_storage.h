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
#include "simulation/replica_storage.h"

namespace rill::simulation {

class model_storage final : public replica_storage {
 public:
  // `may_fault(op)` asks the fault atlas whether this replica may lose or fail op right now.
  // `slot_count`: the journal is a ring of this many slots, as on disk (writing op k replaces op k - slot_count).
  model_storage(const storage_options& options, std::uint64_t seed, consensus::vsr_state initial,
                std::uint64_t slot_count, std::function<bool(std::uint64_t op)> may_fault);

  void write(consensus::message prepare, std::function<void(expected<void>)> done) override;
  void read(std::uint64_t op, consensus::checksum_t checksum,
            std::function<void(expected<consensus::message>)> done) override;
  void persist(const consensus::vsr_state& state, std::function<void(expected<void>)> done) override;
  void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                        std::function<void(expected<void>)> done) override;
  void complete(std::uint64_t now) override;
  void crash(bool power_loss = true) override;
  void wipe(std::uint64_t format_tick) override;
  [[nodiscard]] consensus::recovered_state recover() override;
  std::optional<std::uint64_t> rot_one(prng& rng) override;
  void set_options(const storage_options& o) override { options_ = o; }

 private:
  enum class kind : std::uint8_t { write, read, persist, checkpoint };
  struct pending_op {
    std::uint64_t due;
    std::uint64_t sequence;
    kind what;
    std::uint64_t op = 0;                    // write, read
    consensus::checksum_t checksum;          // read
    std::optional<consensus::message> data;  // write
    consensus::vsr_state state;              // persist
    std::uint8_t slot = 0;                   // checkpoint
    std::vector<std::byte> bytes;            // checkpoint
    std::function<void(expected<void>)> done;
    std::function<void(expected<consensus::message>)> read_done;
  };
  std::uint64_t due();
  pending_op& enqueue(kind what);  // a new pending operation, due after the latency drawn now
  void run(pending_op& p);

  storage_options options_;
  prng rng_;
  std::uint64_t slot_count_;
  std::function<bool(std::uint64_t)> may_fault_;
  std::vector<std::byte> snapshots_[2];                  // snapshot.bin's regions
  std::map<std::uint64_t, consensus::message> journal_;  // durable prepares by op
  std::map<std::uint64_t, bool> rotten_;                 // ops whose stored prepare no longer reads back
  consensus::vsr_state superblock_;
  std::vector<pending_op> pending_;
  std::uint64_t sequence_ = 0;
  std::uint64_t now_ = 0;  // the last complete()
  bool formatted_ = true;  // not yet opened since it was formatted
};

}  // namespace rill::simulation
