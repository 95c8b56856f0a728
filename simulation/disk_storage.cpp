#include "simulation/disk_storage.h"

#include <fmt/core.h>

#include <cstdlib>

#include "base/assert.h"
#include "base/endian.h"
#include "base/task.h"
#include "storage/io/run.h"
#include "storage/meta_entry.h"

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
  f.sync_error_ppm = o.sync_fault_ppm;
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
  if (partition_config_) {
    disk_.observe_writes([this](const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes) {
      observe(path, offset, bytes);
    });
  }
}

void disk_storage::observe(const std::string& path, std::uint64_t offset, std::span<const std::byte> bytes) {
  const auto ends_with = [&](std::string_view tail) {
    return path.size() >= tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (path.rfind(log_dir, 0) != 0) {
    return;
  }
  if (ends_with(".log")) {
    // The log appends whole batches back to back (replicated appends and transfers alike).
    std::uint64_t q = 0;
    while (q + 12 <= bytes.size()) {
      const auto base = load_be<std::int64_t>(bytes.data() + q);
      const std::uint64_t size = 12 + load_be<std::uint32_t>(bytes.data() + q + 8);
      if (size > bytes.size() - q) {
        break;
      }
      batches_placed_[base] = placed{
          path,
          offset + q,
          {bytes.begin() + static_cast<std::ptrdiff_t>(q), bytes.begin() + static_cast<std::ptrdiff_t>(q + size)}};
      q += size;
    }
  } else if (ends_with(".meta")) {
    constexpr std::size_t entry = storage::meta_entry_format::entry_bytes;
    for (std::uint64_t q = 0; q + entry <= bytes.size(); q += entry) {
      const auto e = storage::decode_meta_entry(std::span<const std::byte, entry>(bytes.data() + q, entry));
      if (e) {
        metas_placed_[e->base_offset.value()] = placed{
            path,
            offset + q,
            {bytes.begin() + static_cast<std::ptrdiff_t>(q), bytes.begin() + static_cast<std::ptrdiff_t>(q + entry)}};
      }
    }
  }
}

bool disk_storage::holds_batch(std::int64_t base, std::uint64_t op) const {
  const auto meta = partition_->log().meta_for(offset_t(base));
  return meta && consensus::batch_op_of(*meta).op == op;
}

bool disk_storage::batch_durable(std::int64_t base) const {
  auto b = batches_placed_.find(base);
  auto m = metas_placed_.find(base);
  const auto holds = [this](const placed& p) {
    const auto now = disk_.read_range(p.path, p.position, p.bytes.size());
    return now && *now == p.bytes && disk_.durable_matches(p.path, p.position, p.bytes.size());
  };
  return b != batches_placed_.end() && m != metas_placed_.end() && holds(b->second) && holds(m->second);
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

void disk_storage::set_options(const storage_options& o) {
  options_ = o;
  disk_.faults().sync_error_ppm = o.sync_fault_ppm;
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
  // A batch prepare's write completes once its batch is durable in the log too (partition_storage.h): checked here
  // against what the disk holds, not what the log believes.
  std::optional<std::int64_t> batch_base;
  if (partition_config_ && prepare.h.operation == partition_config_->batch_operation && prepare.body.size() >= 12) {
    batch_base = load_be<std::int64_t>(prepare.body.data());
  }
  files_->write(std::move(prepare), [this, alive = alive_, op, batch_base, done = std::move(done)](expected<void> r) {
    if (!*alive || crashing_) {
      return;
    }
    // (A batch below the log's start is not held: a state transfer started the log over past it, or retention
    // removed it; the checkpoint covers its op.)
    if (r && batch_base && partition_config_->violation && partition_ != nullptr &&
        *batch_base >= partition_->log().log_start().value() && holds_batch(*batch_base, op) &&
        !batch_durable(*batch_base)) {
      if (std::getenv("RILL_SIM_DEBUG") != nullptr) {
        for (auto* m : {&batches_placed_, &metas_placed_}) {
          auto it = m->find(*batch_base);
          if (it == m->end()) {
            fmt::print("  placed: none\n");
            continue;
          }
          const auto now = disk_.read_range(it->second.path, it->second.position, it->second.bytes.size());
          fmt::print("  placed: {} @{} +{} same={} durable={} unsynced_ops={}\n", it->second.path, it->second.position,
                     it->second.bytes.size(), now && *now == it->second.bytes,
                     disk_.durable_matches(it->second.path, it->second.position, it->second.bytes.size()),
                     disk_.unsynced_ops(it->second.path));
        }
        fmt::print("  log: {} segments {}\n", partition_->describe(), partition_->log().segment_bases().size());
      }
      partition_config_->violation(fmt::format(
          "op {}: its write completed (the replica may acknowledge it) while its batch at offset {} and its .meta "
          "entry are not durable on the disk",
          op, *batch_base));
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
    // (Fails only with an injected fdatasync failure (sync_fault_ppm): the driver fences, as rilld's does.)
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

std::vector<std::pair<std::uint64_t, consensus::checksum_t>> disk_storage::take_cut() {
  RILL_ASSERT(open_);
  return files_->take_cut();
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

void disk_storage::crash(bool power_loss) {
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
  if (power_loss) {
    disk_.crash();
  } else {
    disk_.restart_process();  // (what landed stays in the cache, synced or not)
  }
  partition_ = nullptr;
  files_.reset();
  log_files_.reset();
  open_ = false;
}

void disk_storage::wipe(std::uint64_t format_tick) {
  RILL_ASSERT(!open_, "wipe() after crash()");
  disk_.wipe();
  initial_.recovering = true;  // formatted anew as a member of a running group
  initial_.incarnation = std::min(format_tick, consensus::incarnation_max);  // (rilld: the wall clock in ms)
  stored_.clear();
  batches_placed_.clear();
  metas_placed_.clear();
}

consensus::recovered_state disk_storage::recover() {
  RILL_ASSERT(!open_);
  const bool fresh = !disk_.exists(std::string(dir) + "/superblock");
  consensus::journal_storage_options o;
  o.journal = journal_options_;
  o.snapshot_bytes_max = snapshot_bytes_max;
  consensus::recovered_state r;
  // Bit rot is not injected into snapshot.bin or the superblock (the atlas covers journal prepares): an error here
  // is a bug, except an injected fdatasync failure (sync_fault_ppm: recovery syncs what it trusts, and a failure
  // fails the start); then the process starts again, as a supervisor restarts rilld, until an open succeeds.
  for (std::uint32_t attempt = 1;; ++attempt) {
    r = consensus::recovered_state{};
    expected<void> opened;
    if (partition_config_) {
      consensus::partition_storage_options po;
      po.files = o;
      po.batch_operation = partition_config_->batch_operation;
      po.log = partition_log_options();
      po.log.config.retention_bytes = partition_config_->retention_bytes;
      po.bug_append_unsynced = partition_config_->bug_append_unsynced;
      po.bug_checkpoint_ungated = partition_config_->bug_checkpoint_ungated;
      po.bug_transfer_uncommitted = partition_config_->bug_transfer_uncommitted;
      po.bug_restart_drops_acked = partition_config_->bug_restart_drops_acked;
      po.bug_cuts_unreported = partition_config_->bug_cuts_unreported;
      log_files_ = std::make_unique<storage::file_cache>(log_open_files_max);
      po.log.files = log_files_.get();
      po.files.files = log_files_.get();  // the journal, superblock and snapshot.bin too, as in rilld's shards
      auto files =
          run(disk_, consensus::partition_storage::open(disk_, *partition_config_->pool, *partition_config_->clk,
                                                        *partition_config_->reporter, dir, log_dir, po, initial_, r));
      if (files) {
        partition_ = files->get();
        partition_->set_bug_trust_own_suffix(partition_config_->bug_trust_own_suffix);
        files_ = std::move(*files);
      } else {
        opened = rill::unexpected(std::move(files).error());
      }
    } else {
      auto files = run(disk_, consensus::journal_storage::open(disk_, dir, o, initial_, r));
      if (files) {
        files_ = std::move(*files);
      } else {
        opened = rill::unexpected(std::move(files).error());
      }
    }
    if (opened) {
      break;
    }
    RILL_ASSERT(options_.sync_fault_ppm > 0 && attempt < 1000, "{}", opened.error().message());
    RILL_ASSERT(disk_.in_flight() == 0);
    disk_.restart_process();
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

std::vector<consensus::header> disk_storage::durable_of(const std::vector<consensus::header>& recovered) {
  RILL_ASSERT(open_);
  const std::uint64_t slots = journal_options_.slot_count;
  const std::uint64_t prepares = (slots * consensus::header::encoded_size + 4095) / 4096 * 4096;
  std::map<std::uint64_t, std::int64_t> base_of_op;  // the log's batches by op (.meta entries)
  if (partition_ != nullptr) {
    for (const auto& e : partition_->log().metas()) {
      base_of_op[consensus::batch_op_of(e.meta).op] = e.base_offset.value();
    }
  }
  std::vector<consensus::header> out;
  for (const auto& h : recovered) {
    const bool batch = partition_config_ && h.operation == partition_config_->batch_operation;
    const std::uint64_t stored = batch ? consensus::header::encoded_size : h.size;  // a batch's header goes alone
    if (!disk_.durable_matches(std::string(dir) + "/journal.wal",
                               prepares + (h.op % slots) * journal_options_.message_size_max, stored)) {
      continue;
    }
    if (batch) {
      auto it = base_of_op.find(h.op);
      if (it == base_of_op.end() || !batch_durable(it->second)) {
        continue;
      }
    }
    out.push_back(h);
  }
  return out;
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
