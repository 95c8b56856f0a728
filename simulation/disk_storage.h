#pragma once
// disk_storage: a replica's storage in the simulator as it is in production: consensus::journal_storage (journal.wal,
// the superblock and snapshot.bin, exactly as rilld runs them) on the storage layer's simulated disk
// (simulation::sim_disk), one disk per replica; or, for a partition group, consensus::partition_storage: the same
// files with a journal of batch headers, and the partition's storage::partition_log (directory /partition on the
// same disk) holding the batches.
//
// What is real: the file formats, the write order (prepare, redundant header, fdatasync), recovery's decision table,
// the superblock's copies, and the disk's crash semantics (unsynced writes survive, vanish or tear by sector). What
// the adapter adds: one tick is one simulated millisecond of disk time; failed writes and reads, and bit rot, are
// injected only where the fault atlas allows (a write failure is reported without touching the disk, a read
// failure likewise, rot flips a bit of a stored prepare).
//
// Invariants: completions are delivered in the order the disk produced them; crash() halts the disk, lets every
// operation in flight fail, drops their completions, and only then powers the disk off.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "consensus/group_storage.h"
#include "consensus/partition_storage.h"
#include "simulation/replica_storage.h"
#include "simulation/sim_disk.h"
#include "storage/buffer_pool.h"
#include "storage/file_cache.h"
#include "storage/partition_log.h"

namespace rill::simulation {

// What a partition group's storage needs beside the journal's options (all outlive the disk_storage).
struct partition_config {
  storage::buffer_pool* pool = nullptr;
  const clock* clk = nullptr;
  storage::log_reporter* reporter = nullptr;
  std::uint8_t batch_operation = 0;
  bool bug_trust_own_suffix = false;      // partition_storage::set_bug_trust_own_suffix
  std::uint64_t retention_bytes = 0;      // the partition log's retention.bytes (0: none)
  bool bug_append_unsynced = false;       // partition_storage_options::bug_append_unsynced
  bool bug_checkpoint_ungated = false;    // partition_storage_options::bug_checkpoint_ungated
  bool bug_transfer_uncommitted = false;  // partition_storage_options::bug_transfer_uncommitted
  bool bug_restart_drops_acked = false;   // partition_storage_options::bug_restart_drops_acked
  bool bug_cuts_unreported = false;       // partition_storage_options::bug_cuts_unreported
  // A write reported durable whose batch the disk does not hold durably (the check of placement below).
  std::function<void(const std::string&)> violation;
};

class disk_storage final : public replica_storage {
 public:
  static constexpr std::uint64_t tick_ns = 1'000'000;

  // `partition`: the replica is a partition group's (partition_storage); without it, journal_storage.
  disk_storage(const storage_options& options, std::uint64_t seed, consensus::vsr_state initial,
               consensus::journal_options journal, std::function<bool(std::uint64_t op)> may_fault,
               std::optional<partition_config> partition = std::nullopt);
  ~disk_storage() override;

  void write(consensus::message prepare, std::function<void(expected<void>)> done) override;
  void read(std::uint64_t op, consensus::checksum_t checksum,
            std::function<void(expected<consensus::message>)> done) override;
  void persist(const consensus::vsr_state& state, std::function<void(expected<void>)> done) override;
  void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                        std::function<void(expected<void>)> done) override;
  void applied(const consensus::header& prepare) override;
  void installed(const consensus::header& at) override;
  void replica_changed(const consensus::replica& r) override;
  [[nodiscard]] std::vector<std::pair<std::uint64_t, consensus::checksum_t>> take_cut() override;
  [[nodiscard]] std::uint64_t durable_through() const override;
  void complete(std::uint64_t now) override;
  void crash(bool power_loss = true) override;
  void wipe(std::uint64_t format_tick) override;
  [[nodiscard]] consensus::recovered_state recover() override;
  [[nodiscard]] std::vector<consensus::header> durable_of(const std::vector<consensus::header>& recovered) override;
  std::optional<std::uint64_t> rot_one(prng& rng) override;
  void set_options(const storage_options& o) override;

  [[nodiscard]] simulation::sim_disk& disk() noexcept { return disk_; }
  // The partition group's storage while it is open (between recover() and crash()); null otherwise, or for a
  // replica of another group.
  [[nodiscard]] consensus::partition_storage* partition() noexcept { return partition_; }

 private:
  void settle();  // polls the disk until nothing is due at its current time
  // Where the partition log placed each batch and its .meta entry (by base offset), as the disk saw the writes land:
  // the checker's own view, independent of what the log believes it synced.
  struct placed {
    std::string path;
    std::uint64_t position = 0;
    std::vector<std::byte> bytes;  // what was written there
  };
  void observe(const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes);
  // The batch at `base` and its .meta entry would survive a power loss now.
  [[nodiscard]] bool batch_durable(std::int64_t base) const;
  // The open log holds op's batch at `base` (a write of an op a checkpoint covers completes without it).
  [[nodiscard]] bool holds_batch(std::int64_t base, std::uint64_t op) const;
  std::map<std::int64_t, placed> batches_placed_;
  std::map<std::int64_t, placed> metas_placed_;

  storage_options options_;
  prng rng_;
  simulation::sim_disk disk_;
  consensus::vsr_state initial_;
  consensus::journal_options journal_options_;
  std::function<bool(std::uint64_t)> may_fault_;
  std::optional<partition_config> partition_config_;
  // Production's storage, open between recover() and crash(): journal_storage, or partition_storage (partition_).
  std::unique_ptr<consensus::group_storage> files_;
  consensus::partition_storage* partition_ = nullptr;
  // The partition log's descriptors, under a limit far below what it holds (superblocks, segments, index, metadata),
  // so every run closes and reopens files between its appends, reads, rolls and truncations. One per open: a crash
  // closes every descriptor on the disk.
  std::unique_ptr<storage::file_cache> log_files_;
  // Injected failures, reported at the next complete() (an operation's callback never runs inside its call here).
  std::vector<std::function<void()>> failed_;
  std::map<std::uint64_t, std::uint64_t> stored_;  // op -> slot, for choosing what rots (adapter knowledge only)
  std::uint64_t disk_ticks_ = 0;
  bool formatted_ = false;
  bool open_ = false;
  bool crashing_ = false;  // completions of operations failing at a crash are dropped
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rill::simulation
