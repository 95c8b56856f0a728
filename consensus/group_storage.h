#pragma once
// group_storage: where a replica's storage effects go (journal writes and reads, superblock persists, checkpoint
// writes), as the driver sees it: each call starts one operation and reports its outcome once, through the
// callback, as a value. journal_storage is the one rilld runs and the simulator runs on its simulated disk: the
// journal ring (journal.wal), the superblock and snapshot.bin of one directory, on io::engine. The simulator wraps
// it to inject the faults its fault atlas allows (simulation/disk_storage.h) and has an in-memory model of it
// (simulation/model_storage.h).
//
// Contract: a callback runs at most once, on the engine's thread, possibly before the call that started the
// operation returns (an operation refused before any I/O); an implementation may drop the callbacks of operations in
// flight at a crash (a crash destroys the driver too). Operations may complete in any order; the
// replica copes (each completion names its op and checksum). A write may complete with errc::superseded: given up,
// nothing durable, and not a failure of the disk (the driver tells the replica "not written" and fences nothing).
//
// journal_storage::open does recovery's reading: it opens (or creates) the three files, reads the checkpoint the
// superblock names back, and returns what the replica's constructor needs (recovered_state). It does not judge
// what it found (a one-replica group cuts or refuses differently from a replica with peers): the host does.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "consensus/journal.h"
#include "consensus/replica.h"
#include "consensus/snapshot_file.h"
#include "storage/io/engine.h"

namespace rill::consensus {

class group_storage {
 public:
  virtual ~group_storage() = default;
  // Makes this prepare durable in its journal slot (replacing whatever op was there).
  virtual void write(message prepare, std::function<void(expected<void>)> done) = 0;
  // Reads op back; an error when it is not there whole with this checksum.
  virtual void read(std::uint64_t op, checksum_t checksum, std::function<void(expected<message>)> done) = 0;
  // Makes this vsr_state durable.
  virtual void persist(const vsr_state& state, std::function<void(expected<void>)> done) = 0;
  // Writes a checkpoint's bytes (the state after op) into snapshot.bin's region `slot` (0 or 1), synced.
  virtual void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                std::function<void(expected<void>)> done) = 0;

  // What the replica did, for storage that keeps state of its own beside the journal (partition_storage: a
  // partition's batches). The driver calls them as it executes the effects; by default they do nothing.
  // An op applied on this replica (ops come in op order, each once per start; after installed(), from its op on).
  virtual void applied(const header& prepare) { (void)prepare; }
  // A peer's checkpoint replaced everything up to at.op (state transfer): what storage keeps must reach it too.
  virtual void installed(const header& at) { (void)at; }
  // After each input the replica took (its effects executed): storage whose writes may wait (partition_storage,
  // for the ops below a batch) gives up those the replica no longer holds (errc::superseded).
  virtual void replica_changed(const replica& r) { (void)r; }
  // The checkpoint gate (driver.h): the op through which the state kept outside the checkpoint bytes is durable.
  // UINT64_MAX: none is kept.
  [[nodiscard]] virtual std::uint64_t durable_through() const { return UINT64_MAX; }
  // Writes this storage completed earlier whose data it has cut since (a partition log cut where the chain diverged):
  // the replica must no longer count them durable. Taken once each; the driver reports them to the replica as not
  // written (replica::on_write_done with ok false) after each input.
  [[nodiscard]] virtual std::vector<std::pair<std::uint64_t, checksum_t>> take_cut() { return {}; }
};

// What a host checks of a checkpoint journal_storage::open read back, before it builds a replica on it (whose
// constructor asserts that it restores): that it restores into a scratch client table of `clients_max` and into
// `sm` (at its initial state; left restored). Error: corrupt_data naming dir/snapshot.bin and the op.
[[nodiscard]] expected<void> check_recovered_checkpoint(const recovered_state& r, std::size_t clients_max,
                                                        state_machine& sm, const std::string& dir);

struct journal_storage_options {
  journal_options journal;
  std::uint64_t snapshot_bytes_max = 256 * 1024 * 1024;
  std::uint64_t snapshot_reserved_bytes = 0;  // what snapshot.bin reserves of each region at open
  // The cache the three files' descriptors live under (journal.h, Descriptors): a partition group's replica uses its
  // shard's, so they count in the node's open-file limit and an idle replica holds none. nullptr: their own.
  storage::file_cache* files = nullptr;
};

class journal_storage final : public group_storage {
 public:
  // Opens (creating when missing) dir/superblock (with `initial` when new), dir/journal.wal and dir/snapshot.bin;
  // fills `recovered` (formatted: the superblock was created by this open). Errors: invalid_argument when the
  // superblock names another cluster, replica or replica count than `initial` (checked before the journal and
  // snapshot.bin are opened or created) or for options out of range; the files' own (corrupt_data when no superblock
  // copy is valid or the named checkpoint does not read back); I/O errors.
  static task<expected<std::unique_ptr<journal_storage>>> open(storage::io::engine& e, std::string dir,
                                                               journal_storage_options options,
                                                               const vsr_state& initial, recovered_state& recovered);
  ~journal_storage() override;

  void write(message prepare, std::function<void(expected<void>)> done) override;
  void read(std::uint64_t op, checksum_t checksum, std::function<void(expected<message>)> done) override;
  void persist(const vsr_state& state, std::function<void(expected<void>)> done) override;
  void write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                        std::function<void(expected<void>)> done) override;

  // Syncs header-ring writes no later write's sync covered (journal::sync_headers), so that the journal's descriptor
  // may be closed by the cache; started by an owner that sees no write coming (an idle replica).
  void sync_headers(std::function<void(expected<void>)> done);
  [[nodiscard]] bool headers_unsynced() const noexcept { return journal_->headers_unsynced(); }
  // Closes the files; nothing may be in flight (the driver's settle()).
  task<expected<void>> close();
  [[nodiscard]] const journal_storage_options& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

 private:
  journal_storage(std::string dir, journal_storage_options o) : dir_(std::move(dir)), options_(o) {}

  std::string dir_;
  journal_storage_options options_;
  std::unique_ptr<journal> journal_;
  std::unique_ptr<superblock> superblock_;
  std::unique_ptr<snapshot_file> snapshots_;
};

}  // namespace rill::consensus
