#include "simulation/disk_storage.h"

#include "base/assert.h"
#include "base/task.h"
#include "storage/file_ops.h"
#include "storage/io/run.h"

namespace rill::simulation {
namespace {
constexpr const char* dir = "/replica";
constexpr std::uint64_t snapshot_bytes_max = 1024 * 1024;  // the ledger's checkpoints are a few KiB

simulation::sim_disk_faults disk_faults(const storage_options& o) {
  simulation::sim_disk_faults f;
  // Latency within a tick or two; failures are injected by the adapter (where the fault atlas allows).
  f.latency_ns_min = std::uint64_t{o.latency_min_ticks} * disk_storage::tick_ns / 4 + 10'000;
  f.latency_ns_max = f.latency_ns_min + std::uint64_t{o.latency_spread_ticks} * disk_storage::tick_ns / 2;
  f.crash_torn_ppm = o.torn_ppm / 2;
  f.crash_keep_ppm = (1'000'000 - f.crash_torn_ppm) / 2;
  return f;
}

// A completion, appended in place (moving a partly built one trips GCC 12's maybe-uninitialized under -O2 with the
// sanitizers).
storage_completion& add(std::vector<storage_completion>& done, storage_completion::kind what, std::uint64_t op,
                        consensus::checksum_t checksum = {}) {
  storage_completion& c = done.emplace_back();
  c.what = what;
  c.op = op;
  c.checksum = checksum;
  return c;
}

// Runs a task to completion on the disk (startup only: open and recovery).
template <class T>
T run(simulation::sim_disk& d, task<T> t) {
  auto out = storage::io::run_task(d, std::move(t));
  RILL_ASSERT(out.has_value(), "a startup task on the simulated disk did not finish");
  return std::move(*out);
}
}  // namespace

disk_storage::disk_storage(const storage_options& options, std::uint64_t seed, consensus::vsr_state initial,
                           consensus::journal_options journal, std::function<bool(std::uint64_t)> may_fault)
    : options_(options),
      rng_(seed),
      disk_(seed ^ 0xd15c, disk_faults(options)),
      initial_(std::move(initial)),
      journal_options_(journal),
      may_fault_(std::move(may_fault)) {}

disk_storage::~disk_storage() {
  crashing_ = true;
  if (disk_.in_flight() > 0) {
    disk_.halt();
    while (disk_.in_flight() > 0) {
      disk_.poll(true);
    }
  }
}

void disk_storage::settle() {
  while (disk_.poll(false) > 0) {
  }
}

void disk_storage::write(const consensus::message& prepare, std::uint64_t) {
  RILL_ASSERT(open_);
  const std::uint64_t op = prepare.h.op;
  const consensus::checksum_t checksum = prepare.h.checksum;
  if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(op)) {
    storage_completion& c = add(done_, storage_completion::kind::write, op, checksum);
    c.ok = false;
    return;
  }
  spawn(journal_->write(prepare), [this, op, checksum](expected<void> r) {
    if (crashing_) {
      return;
    }
    storage_completion& c = add(done_, storage_completion::kind::write, op, checksum);
    c.ok = r.has_value();
    if (c.ok) {
      const std::uint64_t slot = op % journal_options_.slot_count;
      std::erase_if(stored_, [&](const auto& kv) { return kv.second == slot; });
      stored_[op] = slot;
    }
  });
}

void disk_storage::read(std::uint64_t op, consensus::checksum_t checksum, std::uint64_t) {
  RILL_ASSERT(open_);
  if (rng_.chance_ppm(options_.read_fault_ppm) && may_fault_(op)) {
    storage_completion& c = add(done_, storage_completion::kind::read, op, checksum);
    c.ok = false;
    return;
  }
  spawn(journal_->read(op, checksum), [this, op, checksum](expected<consensus::message> r) {
    if (crashing_) {
      return;
    }
    storage_completion& c = add(done_, storage_completion::kind::read, op, checksum);
    c.ok = r.has_value();
    if (r) {
      c.prepare = std::move(*r);
    }
  });
}

void disk_storage::persist(const consensus::vsr_state& state, std::uint64_t) {
  RILL_ASSERT(open_);
  spawn(superblock_->write(state), [this, state](expected<void> r) {
    if (crashing_) {
      return;
    }
    RILL_ASSERT(r.has_value(), "superblock write failed: {}", r.error().message());
    storage_completion& c = add(done_, storage_completion::kind::persist, 0);
    c.state = state;
  });
}

void disk_storage::write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes, std::uint64_t) {
  RILL_ASSERT(open_);
  if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(op)) {
    storage_completion& c = add(done_, storage_completion::kind::checkpoint, op);
    c.slot = slot;
    c.ok = false;
    return;
  }
  auto shared = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  spawn(snapshots_->write(slot, *shared), [this, op, slot, shared](expected<void> r) {
    if (crashing_) {
      return;
    }
    storage_completion& c = add(done_, storage_completion::kind::checkpoint, op);
    c.slot = slot;
    c.ok = r.has_value();
  });
}

std::vector<storage_completion> disk_storage::complete(std::uint64_t now) {
  while (disk_ticks_ < now) {
    disk_.advance_time(tick_ns);
    ++disk_ticks_;
    settle();
  }
  return std::exchange(done_, {});
}

void disk_storage::crash() {
  crashing_ = true;
  disk_.halt();
  while (disk_.in_flight() > 0) {
    disk_.poll(true);  // everything in flight fails now, as at a power loss
  }
  if (before_power_off_) {
    before_power_off_();
  }
  crashing_ = false;
  done_.clear();
  disk_.crash();
  journal_.reset();
  superblock_.reset();
  snapshots_.reset();
  open_ = false;
}

consensus::recovered_state disk_storage::recover() {
  RILL_ASSERT(!open_);
  const bool fresh = !disk_.exists(std::string(dir) + "/superblock");
  auto made = run(disk_, storage::make_dirs(disk_, dir));
  RILL_ASSERT(made.has_value(), "{}", made.error().message());
  auto sb = run(disk_, consensus::superblock::open(disk_, dir, true, initial_));
  RILL_ASSERT(sb.has_value(), "superblock: {}", sb.error().message());
  consensus::journal_recovery rec;
  auto j = run(disk_, consensus::journal::open(disk_, dir, journal_options_, true, rec));
  RILL_ASSERT(j.has_value(), "journal: {}", j.error().message());
  auto snaps = run(disk_, consensus::snapshot_file::open(disk_, dir, snapshot_bytes_max, true));
  RILL_ASSERT(snaps.has_value(), "snapshot.bin: {}", snaps.error().message());
  superblock_ = std::move(*sb);
  journal_ = std::move(*j);
  snapshots_ = std::move(*snaps);
  open_ = true;
  consensus::recovered_state r;
  r.state = superblock_->state();
  if (const auto& cp = r.state.checkpoint; cp.op() > 0) {
    // Bit rot is not injected into snapshot.bin (the atlas covers journal prepares): a mismatch here is a bug.
    auto bytes = run(disk_, snapshots_->read(cp.slot, cp.size, cp.checksum));
    RILL_ASSERT(bytes.has_value(), "{}", bytes.error().message());
    r.snapshot = std::move(*bytes);
  }
  r.journal = std::move(rec.valid);
  r.faulty = std::move(rec.faulty);
  r.faulty_slots = std::move(rec.faulty_slots);
  r.journal_slots = journal_options_.slot_count;
  r.formatted = fresh && !formatted_;
  formatted_ = true;
  stored_.clear();
  for (const auto& h : r.journal) {
    stored_[h.op] = h.op % journal_options_.slot_count;
  }
  return r;
}

std::optional<std::uint64_t> disk_storage::rot_one(prng& rng) {
  if (stored_.empty() || !open_) {
    return std::nullopt;
  }
  auto it = stored_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(rng.below(stored_.size())));
  const std::uint64_t op = it->first;
  if (!may_fault_(op)) {
    return std::nullopt;
  }
  const std::uint64_t prepares = (journal_options_.slot_count * consensus::header::encoded_size + 4095) / 4096 * 4096;
  // A bit of the stored prepare's header (always written), durable from now on.
  disk_.flip_bits(std::string(dir) + "/journal.wal", prepares + it->second * journal_options_.message_size_max + 40,
                  0x10);
  stored_.erase(it);
  return op;
}

}  // namespace rill::simulation
