#include "simulation/disk_storage.h"

#include "base/assert.h"
#include "base/task.h"
#include "storage/io/run.h"

namespace rill::simulation {
namespace {
constexpr const char* dir = "/replica";
constexpr const char* log_dir = "/partition";
constexpr std::uint64_t snapshot_bytes_max = 1024 * 1024;  // the ledger's checkpoints are a few KiB
constexpr std::uint64_t log_open_files_max = 3;  // descriptors of the partition log and group files (file_cache.h)

storage::log_options partition_log_options() {
  storage::log_options o;
  // Runs write far less than a segment (1 MiB at least): segments roll by age instead, every 300 simulated ms, so
  // that a run has several and truncations cross them.
  o.config.segment_bytes = 1024 * 1024;
  o.config.segment_ms = 300;
  o.config.preallocate_bytes = 0;
  return o;
}

simulation::sim_disk_faults disk_faults(const storage_options& o) {
  simulation::sim_disk_faults f;
  // Latency within a tick or two; failures are injected by the adapter (where the fault atlas allows).
  f.latency_ns_min = std::uint64_t{o.latency_min_ticks} * disk_storage::tick_ns / 4 + 10'000;
  f.latency_ns_max = f.latency_ns_min + std::uint64_t{o.latency_spread_ticks} * disk_storage::tick_ns / 2;
  f.crash_torn_ppm = o.torn_ppm / 2;
  f.crash_keep_ppm = (1'000'000 - f.crash_torn_ppm) / 2;
  return f;
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
                           consensus::journal_options journal, std::function<bool(std::uint64_t)> may_fault,
                           std::optional<partition_config> partition)
    : options_(options),
      rng_(seed),
      disk_(seed ^ 0xd15c, disk_faults(options)),
      initial_(std::move(initial)),
      journal_options_(journal),
      may_fault_(std::move(may_fault)),
      partition_config_(partition) {
  RILL_ASSERT(!partition_config_ || (partition_config_->pool != nullptr && partition_config_->clk != nullptr &&
                                     partition_config_->reporter != nullptr));
}

disk_storage::~disk_storage() {
  *alive_ = false;
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

void disk_storage::write(consensus::message prepare, std::function<void(expected<void>)> done) {
  RILL_ASSERT(open_);
  const std::uint64_t op = prepare.h.op;
  if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(op)) {
    failed_.push_back([op, done = std::move(done)] { done(rill::unexpected(injected_fault("journal write", op))); });
    return;
  }
  files_->write(std::move(prepare), [this, alive = alive_, op, done = std::move(done)](expected<void> r) {
    if (!*alive || crashing_) {
      return;
    }
    if (r) {
      const std::uint64_t slot = op % journal_options_.slot_count;
      std::erase_if(stored_, [&](const auto& kv) { return kv.second == slot; });
      stored_[op] = slot;
    }
    done(std::move(r));
  });
}

void disk_storage::read(std::uint64_t op, consensus::checksum_t checksum,
                        std::function<void(expected<consensus::message>)> done) {
  RILL_ASSERT(open_);
  if (rng_.chance_ppm(options_.read_fault_ppm) && may_fault_(op)) {
    failed_.push_back([op, done = std::move(done)] { done(rill::unexpected(injected_fault("journal read", op))); });
    return;
  }
  files_->read(op, checksum, [this, alive = alive_, done = std::move(done)](expected<consensus::message> r) {
    if (*alive && !crashing_) {
      done(std::move(r));
    }
  });
}

void disk_storage::persist(const consensus::vsr_state& state, std::function<void(expected<void>)> done) {
  RILL_ASSERT(open_);
  files_->persist(state, [this, alive = alive_, done = std::move(done)](expected<void> r) {
    if (!*alive || crashing_) {
      return;
    }
    RILL_ASSERT(r.has_value(), "superblock write failed: {}", r.error().message());
    done(std::move(r));
  });
}

void disk_storage::write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                    std::function<void(expected<void>)> done) {
  RILL_ASSERT(open_);
  if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(op)) {
    failed_.push_back([op, done = std::move(done)] { done(rill::unexpected(injected_fault("checkpoint write", op))); });
    return;
  }
  files_->write_checkpoint(slot, op, std::move(bytes),
                           [this, alive = alive_, done = std::move(done)](expected<void> r) {
                             if (*alive && !crashing_) {
                               done(std::move(r));
                             }
                           });
}

void disk_storage::applied(const consensus::header& prepare) {
  RILL_ASSERT(open_);
  files_->applied(prepare);
}

void disk_storage::installed(const consensus::header& at) {
  RILL_ASSERT(open_);
  files_->installed(at);
}

void disk_storage::replica_changed(const consensus::replica& r) {
  RILL_ASSERT(open_);
  files_->replica_changed(r);
}

std::uint64_t disk_storage::durable_through() const {
  RILL_ASSERT(open_);
  return files_->durable_through();
}

void disk_storage::complete(std::uint64_t now) {
  for (auto& f : std::exchange(failed_, {})) {
    f();
  }
  while (disk_ticks_ < now) {
    disk_.advance_time(tick_ns);
    ++disk_ticks_;
    settle();
  }
}

void disk_storage::crash() {
  crashing_ = true;
  disk_.halt();
  while (disk_.in_flight() > 0) {
    disk_.poll(true);  // everything in flight fails now, as at a power loss
  }
  if (partition_ != nullptr) {
    // The partition log closes its files before the disk powers off (its operations fail: the disk is halted).
    (void)run(disk_, partition_->abandon());
    RILL_ASSERT(log_files_->open_count() == 0, "the abandoned log left {} descriptors", log_files_->open_count());
  }
  crashing_ = false;
  failed_.clear();
  disk_.crash();
  partition_ = nullptr;
  files_.reset();
  log_files_.reset();
  open_ = false;
}

void disk_storage::wipe() {
  RILL_ASSERT(!open_, "wipe() after crash()");
  disk_.wipe();
  initial_.recovering = true;  // formatted anew as a member of a running group
  stored_.clear();
}

consensus::recovered_state disk_storage::recover() {
  RILL_ASSERT(!open_);
  const bool fresh = !disk_.exists(std::string(dir) + "/superblock");
  consensus::journal_storage_options o;
  o.journal = journal_options_;
  o.snapshot_bytes_max = snapshot_bytes_max;
  consensus::recovered_state r;
  // Bit rot is not injected into snapshot.bin or the superblock (the atlas covers journal prepares): an error here
  // is a bug.
  if (partition_config_) {
    consensus::partition_storage_options po;
    po.files = o;
    po.batch_operation = partition_config_->batch_operation;
    po.log = partition_log_options();
    po.log.config.retention_bytes = partition_config_->retention_bytes;
    log_files_ = std::make_unique<storage::file_cache>(log_open_files_max);
    po.log.files = log_files_.get();
    po.files.files = log_files_.get();  // the journal, superblock and snapshot.bin too, as in rilld's shards
    auto files =
        run(disk_, consensus::partition_storage::open(disk_, *partition_config_->pool, *partition_config_->clk,
                                                      *partition_config_->reporter, dir, log_dir, po, initial_, r));
    RILL_ASSERT(files.has_value(), "{}", files.error().message());
    partition_ = files->get();
    partition_->set_bug_trust_own_suffix(partition_config_->bug_trust_own_suffix);
    files_ = std::move(*files);
  } else {
    auto files = run(disk_, consensus::journal_storage::open(disk_, dir, o, initial_, r));
    RILL_ASSERT(files.has_value(), "{}", files.error().message());
    files_ = std::move(*files);
  }
  open_ = true;
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
