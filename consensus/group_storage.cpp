#include "consensus/group_storage.h"

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::consensus {

expected<void> check_recovered_checkpoint(const recovered_state& r, std::size_t clients_max, state_machine& sm,
                                          const std::string& dir) {
  if (r.state.checkpoint.op() == 0) {
    return {};
  }
  client_table probe(clients_max);
  if (!restore_checkpoint(r.snapshot, probe, sm)) {
    return storage::make_unexpected(storage::errc::corrupt_data,
                                    fmt::format("{}/snapshot.bin: the checkpoint at op {} reads back but does not "
                                                "restore (written by an incompatible build?)",
                                                dir, r.state.checkpoint.op()));
  }
  return {};
}

task<expected<std::unique_ptr<journal_storage>>> journal_storage::open(storage::io::engine& e, std::string dir,
                                                                       journal_storage_options o,
                                                                       const vsr_state& initial,
                                                                       recovered_state& recovered) {
  RILL_CO_TRY_VOID(co_await storage::make_dirs(e, dir));
  // The files found below are trusted: their directory entries must be on disk (storage::settle_dir).
  RILL_CO_TRY_VOID(co_await storage::settle_dir(e, dir));
  std::unique_ptr<journal_storage> s(new journal_storage(dir, o));
  RILL_CO_TRY(sb, co_await superblock::open(e, dir, true, initial, o.files));
  // Another group's directory is refused before anything else is opened or created in it.
  if (const vsr_state& found = sb->state(); found.cluster != initial.cluster || found.replica != initial.replica ||
                                            found.replica_count != initial.replica_count) {
    co_return storage::make_unexpected(
        storage::errc::invalid_argument,
        fmt::format("{}/superblock belongs to replica {} of {} in cluster {}, not to replica {} of {} in cluster {}",
                    dir, found.replica, found.replica_count, found.cluster, initial.replica, initial.replica_count,
                    initial.cluster));
  }
  // Only the open that wrote the superblock is the replica's first start. (A superblock still at `initial` after a
  // restart is not: a primary of view 0 that never persisted a newer state may have sent prepares it lost, and its
  // restart must go through a view change like any other.)
  const bool formatted = sb->created();
  journal_recovery rec;
  RILL_CO_TRY(j, co_await journal::open(e, dir, o.journal, true, rec, o.files));
  RILL_CO_TRY(snaps,
              co_await snapshot_file::open(e, dir, o.snapshot_bytes_max, true, o.snapshot_reserved_bytes, o.files));
  recovered = recovered_state{};
  recovered.state = sb->state();
  if (const checkpoint_ref& cp = recovered.state.checkpoint; cp.op() > 0) {
    RILL_CO_TRY(bytes, co_await snaps->read(cp.slot, cp.size, cp.checksum));
    recovered.snapshot = std::move(bytes);
  }
  recovered.journal = std::move(rec.valid);
  recovered.faulty = std::move(rec.faulty);
  recovered.faulty_slots = std::move(rec.faulty_slots);
  recovered.journal_slots = o.journal.slot_count;
  recovered.formatted = formatted;
  s->journal_ = std::move(j);
  s->superblock_ = std::move(sb);
  s->snapshots_ = std::move(snaps);
  co_return s;
}

journal_storage::~journal_storage() = default;

void journal_storage::write(message prepare, std::function<void(expected<void>)> done) {
  RILL_ASSERT(prepare.h.cmd == command::prepare);
  // The message lives until the write completes (the journal's task holds a reference).
  auto m = std::make_shared<message>(std::move(prepare));
  spawn(journal_->write(*m), [m, done = std::move(done)](expected<void> r) { done(std::move(r)); });
}

void journal_storage::read(std::uint64_t op, checksum_t checksum, std::function<void(expected<message>)> done) {
  spawn(journal_->read(op, checksum), std::move(done));
}

void journal_storage::persist(const vsr_state& state, std::function<void(expected<void>)> done) {
  spawn(superblock_->write(state), std::move(done));
}

void journal_storage::write_checkpoint(std::uint8_t slot, std::uint64_t /*op*/, std::vector<std::byte> bytes,
                                       std::function<void(expected<void>)> done) {
  RILL_ASSERT(slot <= 1, "snapshot.bin has regions 0 and 1, not {}", slot);
  auto held = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  spawn(snapshots_->write(slot, *held), [held, done = std::move(done)](expected<void> r) { done(std::move(r)); });
}

void journal_storage::sync_headers(std::function<void(expected<void>)> done) {
  spawn(journal_->sync_headers(), std::move(done));
}

task<expected<void>> journal_storage::close() {
  // Every file is closed (its descriptor released) whatever the others' closes say; the first error is returned.
  auto j = co_await journal_->close();
  auto sb = co_await superblock_->close();
  auto sn = co_await snapshots_->close();
  co_return !j ? j : !sb ? sb : sn;
}

}  // namespace rill::consensus
