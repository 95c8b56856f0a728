#include "simulation/partition_mirror.h"

#include <optional>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "simulation/workload.h"
#include "storage/file_ops.h"
#include "storage/io/run.h"
#include "storage/record_batch.h"

namespace rill::simulation {
namespace {
constexpr const char* dir = "/partition";
constexpr std::uint64_t offered_ahead_max = 4096;  // prepares kept beyond the chain's tip
constexpr std::uint64_t open_files_max = 3;        // descriptors of the mirror's log (file_cache.h)

// Runs a task to completion on the disk (startup and shutdown only).
template <class T>
T run(simulation::sim_disk& d, task<T> t) {
  auto out = storage::io::run_task(d, std::move(t));
  RILL_ASSERT(out.has_value(), "a partition task on the simulated disk did not finish");
  return std::move(*out);
}

storage::batch_meta meta_of(const consensus::header& h) {
  storage::batch_meta m;
  store_le<std::uint64_t>(m.payload.data(), h.op);
  store_le<std::uint64_t>(m.payload.data() + 8, h.checksum.low);
  store_le<std::uint64_t>(m.payload.data() + 16, h.checksum.high);
  return m;
}

std::pair<std::uint64_t, consensus::checksum_t> op_of(const storage::batch_meta& m) {
  return {load_le<std::uint64_t>(m.payload.data()),
          consensus::checksum_t{load_le<std::uint64_t>(m.payload.data() + 8),
                                load_le<std::uint64_t>(m.payload.data() + 16)}};
}

storage::log_options log_options() {
  storage::log_options o;
  o.auto_commit = false;
  o.config.durability = config::durability_mode::sync_before_ack;
  // Runs write far less than a segment (1 MiB at least): segments roll by age instead, every 300 simulated ms, so
  // that a run has several and truncations cross them.
  o.config.segment_bytes = 1024 * 1024;
  o.config.segment_ms = 300;
  o.config.preallocate_bytes = 0;
  return o;
}
}  // namespace

partition_mirror::partition_mirror(std::uint64_t cluster, simulation::sim_disk& disk, storage::buffer_pool& pool,
                                   const clock& clk, storage::log_reporter& reporter)
    : cluster_(cluster), disk_(disk), pool_(pool), clk_(clk), reporter_(reporter) {}

partition_mirror::~partition_mirror() {
  *alive_ = false;
}

void partition_mirror::open(const consensus::checkpoint_ref& checkpoint) {
  RILL_ASSERT(!log_);
  auto made = run(disk_, storage::make_dirs(disk_, dir));
  RILL_ASSERT(made.has_value(), "{}", made.error().message());
  files_ = std::make_unique<storage::file_cache>(open_files_max);
  auto options = log_options();
  options.files = files_.get();
  auto opened = run(disk_, storage::partition_log::open(disk_, pool_, clk_, reporter_, dir, options));
  RILL_ASSERT(opened.has_value(), "partition log: {}", opened.error().message());
  log_ = std::move(*opened);
  ++generation_;
  busy_ = false;
  chain_.clear();
  offered_.clear();
  // The base: the replica's checkpoint (every batch up to it is here: checkpoints wait for the mirror), or the
  // last batch the log had committed, whichever is later.
  committed_op_ = checkpoint.op();
  committed_checksum_ = checkpoint.op() == 0 ? consensus::root_header(cluster_).checksum : checkpoint.at.checksum;
  committed_end_ = 0;
  // Walk every batch (uncommitted included) to rebuild the op index.
  std::int64_t at = log_->log_start().value();
  while (at < log_->log_end().value()) {
    storage::read_request rq;
    rq.offset = offset_t(at);
    rq.uncommitted = true;
    rq.max_bytes = 256 * 1024;
    auto r = run(disk_, log_->read(rq));
    RILL_ASSERT(r.has_value() && r->batches > 0, "partition log reread at {}: {}", at,
                r ? "nothing" : r.error().message());
    for (const auto& v : r->batch_views()) {
      auto meta = log_->meta_for(v.base_offset());
      if (!meta) {
        // Every batch of a replicated partition carries its op. One without it is an append the crash interrupted
        // (its bytes landed unsynced, its metadata did not): never acknowledged, never committed. Cut it and all
        // after it.
        RILL_ASSERT(v.base_offset() >= log_->committed(), "committed partition batch at {} without its op",
                    v.base_offset().value());
        auto cut = run(disk_, log_->truncate_after(v.base_offset() - 1));
        RILL_ASSERT(cut.has_value(), "partition log: {}", cut.error().message());
        break;
      }
      const auto [op, checksum] = op_of(*meta);
      const std::int64_t end = v.last_offset().value() + 1;
      if (op <= checkpoint.op() || end <= log_->committed().value()) {
        if (op >= committed_op_) {
          committed_op_ = op;
          committed_checksum_ = checksum;
        }
        committed_end_ = std::max(committed_end_, end);
      } else {
        chain_[op] = link{checksum, end};  // uncommitted before the crash: checked against the replica's log
      }
    }
    at = std::min(r->next_offset.value(), log_->log_end().value());
  }
  if (committed_end_ > log_->committed().value()) {
    log_->commit_to(offset_t(committed_end_));
  }
}

void partition_mirror::offer(const consensus::message& prepare) {
  if (!log_ || prepare.h.cmd != consensus::command::prepare) {
    return;
  }
  if (prepare.h.op <= committed_op_ || prepare.h.op > committed_op_ + offered_ahead_max) {
    return;
  }
  offered_.try_emplace(offer_key{prepare.h.op, prepare.h.checksum.low, prepare.h.checksum.high}, prepare);
}

std::int64_t partition_mirror::end_below(std::uint64_t op) const {
  std::int64_t end = committed_end_;
  for (auto it = chain_.begin(); it != chain_.end() && it->first < op; ++it) {
    end = it->second.end >= 0 ? it->second.end : end;
  }
  return end;
}

void partition_mirror::need_through(const consensus::header& at) {
  if (at.op > committed_op_ && (!target_ || target_->op < at.op)) {
    target_ = at;
  }
}

void partition_mirror::step(const consensus::replica& r) {
  if (log_) {
    if (auto due = log_->next_deadline(); due && *due <= clk_.monotonic()) {
      log_->tick();  // rolls by age
    }
  }
  if (!log_ || busy_ || log_->fenced() || target_) {
    return;
  }
  // 1. Cut what the replica no longer holds: the first op of the chain whose header differs, or that is beyond
  //    the replica's log. (Batches below the log's committed offset are committed: never cut.)
  for (const auto& [op, l] : chain_) {
    if (bug_trust_own_suffix_) {
      break;
    }
    const consensus::header* h = r.header_at(op);
    const bool gone = h == nullptr ? op > r.op().value() : h->checksum != l.checksum;
    if (gone) {
      const std::int64_t keep = end_below(op);
      RILL_ASSERT(keep >= log_->committed().value(), "the replica no longer holds committed op {}", op);
      if (keep < log_->log_end().value()) {
        busy_ = true;
        spawn(cut(op, keep - 1), [] {});
      } else {
        chain_.erase(chain_.find(op), chain_.end());
      }
      return;
    }
  }
  // 2. Commit: the chain's ops the replica has committed (each checked above, or beyond the replica's headers but
  //    followed by one that is: committed ops chain to committed ops).
  while (!chain_.empty() && chain_.begin()->first <= r.commit_min().value()) {
    const auto it = chain_.begin();
    const consensus::header* h = r.header_at(it->first);
    if (h != nullptr && h->checksum != it->second.checksum && !bug_trust_own_suffix_) {
      break;
    }
    committed_op_ = it->first;
    committed_checksum_ = it->second.checksum;
    committed_end_ = it->second.end >= 0 ? it->second.end : committed_end_;
    chain_.erase(it);
  }
  if (committed_end_ > log_->committed().value()) {
    log_->commit_to(offset_t(committed_end_));
  }
  // 3. Append the next prepare of the replica's chain (ops without a batch join the chain at once).
  for (;;) {
    const std::uint64_t tip = chain_.empty() ? committed_op_ : chain_.rbegin()->first;
    const consensus::checksum_t tip_checksum = chain_.empty() ? committed_checksum_ : chain_.rbegin()->second.checksum;
    offered_.erase(offered_.begin(), offered_.lower_bound(offer_key{committed_op_ + 1, 0, 0}));
    const std::uint64_t next = tip + 1;
    const consensus::header* h = r.header_at(next);
    if (h == nullptr) {
      return;
    }
    auto it = offered_.find(offer_key{next, h->checksum.low, h->checksum.high});
    if (it == offered_.end() || it->second.h.parent != tip_checksum) {
      return;
    }
    if (it->second.h.operation != operation_produce) {
      chain_[next] = link{it->second.h.checksum, -1};
      continue;
    }
    busy_ = true;
    spawn(append(it->second), [] {});  // (kept in offered_ until committed: a cut or transfer may need it again)
    return;
  }
}

task<void> partition_mirror::append(consensus::message prepare) {
  auto alive = alive_;
  const std::uint64_t generation = generation_;  // the log this operation runs on (abandon and open start another)
  storage::partition_log* log = log_.get();
  std::vector<std::byte> bytes = prepare.body;
  std::uint32_t crc_tail = 0;
  storage::batch_limits limits;
  limits.batch_bytes_max = 64 * 1024;
  auto v = storage::batch_view::validate(bytes, limits, &crc_tail);
  if (!v || v->size() != bytes.size()) {
    // Not a batch: the ledger gives it no offsets either; it joins the chain without one.
    chain_[prepare.h.op] = link{prepare.h.checksum, -1};
    busy_ = false;
    co_return;
  }
  storage::stamp_batch(bytes, log->log_end(), epoch_t(static_cast<std::int32_t>(prepare.h.view)),
                       timestamp_ms_t(1'700'000'000'000 + static_cast<std::int64_t>(prepare.h.timestamp)), crc_tail);
  std::vector<storage::batch_meta> metas(1);
  metas[0] = meta_of(prepare.h);  // (built apart: GCC 12 mis-compiles an array-holding temporary in a co_await)
  auto r = co_await log->append_replicated(std::move(bytes), std::move(metas));
  if (!*alive || generation_ != generation) {
    co_return;
  }
  busy_ = false;
  if (r) {
    chain_[prepare.h.op] = link{prepare.h.checksum, r->last_offset.value() + 1};
  }
}

task<void> partition_mirror::cut(std::uint64_t from_op, std::int64_t last_kept) {
  auto alive = alive_;
  const std::uint64_t generation = generation_;  // the log this operation runs on (abandon and open start another)
  storage::partition_log* log = log_.get();
  auto r = co_await log->truncate_after(offset_t(last_kept));
  if (!*alive || generation_ != generation) {
    co_return;
  }
  busy_ = false;
  if (r) {
    chain_.erase(chain_.lower_bound(from_op), chain_.end());
    ++truncations_;
  }
}

void partition_mirror::transfer(const std::function<partition_mirror*(std::uint64_t op)>& peer) {
  if (!log_ || busy_ || !target_ || log_->fenced()) {
    return;
  }
  if (target_->op <= committed_op_) {
    target_.reset();
    return;
  }
  partition_mirror* from = peer(target_->op);
  if (from == nullptr) {
    return;
  }
  busy_ = true;
  spawn(copy_from(from, *target_), [] {});
}

task<void> partition_mirror::copy_from(partition_mirror* peer, consensus::header at) {
  auto alive = alive_;
  const std::uint64_t generation = generation_;  // the log this operation runs on (abandon and open start another)
  storage::partition_log* log = log_.get();
  auto finish = [&](bool done) {
    busy_ = false;
    if (done) {
      committed_op_ = at.op;
      committed_checksum_ = at.checksum;
      committed_end_ = log->log_end().value();
      chain_.clear();
      offered_.erase(offered_.begin(), offered_.lower_bound(offer_key{at.op + 1, 0, 0}));
      log->commit_to(offset_t(committed_end_));
      if (target_ && target_->op <= at.op) {
        target_.reset();  // (a later checkpoint installed during the copy stays the target: the next step copies it)
      }
      ++transfers_;
    }
  };
  // Our uncommitted suffix goes first: the peer's committed batches replace it.
  if (log->log_end().value() > committed_end_) {
    auto cut_done = co_await log->truncate_after(offset_t(committed_end_ - 1));
    if (!*alive || generation_ != generation) {
      co_return;
    }
    if (!cut_done) {
      co_return finish(false);
    }
    chain_.clear();
  }
  for (;;) {
    if (peer->log() == nullptr || peer->committed_op() < at.op) {
      co_return finish(false);  // the peer went down: another one, at a later step
    }
    storage::partition_log* source = peer->log();
    const std::uint64_t source_generation = peer->generation_;
    storage::read_request rq;
    rq.offset = log->log_end();
    rq.max_bytes = 64 * 1024;
    std::optional<expected<storage::read_result>> got;
    got.emplace(co_await source->read(rq));
    if (!*alive || generation_ != generation) {
      co_return;
    }
    if (!*got || peer->generation_ != source_generation) {
      co_return finish(false);
    }
    std::vector<std::byte> bytes;
    std::vector<storage::batch_meta> metas;
    bool reached = (*got)->batches == 0;
    for (const auto& v : (*got)->batch_views()) {
      auto meta = source->meta_for(v.base_offset());
      RILL_ASSERT(meta.has_value(), "peer batch at {} without its op", v.base_offset().value());
      if (op_of(*meta).first > at.op || v.base_offset() < log->log_end()) {
        reached = true;
        break;
      }
      bytes.insert(bytes.end(), v.bytes().begin(), v.bytes().end());
      metas.push_back(*meta);
    }
    got.reset();  // release the peer's buffers before waiting on our own disk
    if (!bytes.empty()) {
      auto appended = co_await log->append_replicated(std::move(bytes), std::move(metas));
      if (!*alive || generation_ != generation) {
        co_return;
      }
      if (!appended) {
        co_return finish(false);
      }
    }
    if (reached) {
      co_return finish(true);
    }
  }
}

std::string partition_mirror::describe(const consensus::replica& r) const {
  const std::uint64_t tip = chain_.empty() ? committed_op_ : chain_.rbegin()->first;
  const consensus::header* h = r.header_at(tip + 1);
  std::size_t next_versions = 0;
  bool next_offered = false;
  for (auto it = offered_.lower_bound(offer_key{tip + 1, 0, 0});
       it != offered_.end() && std::get<0>(it->first) == tip + 1; ++it) {
    ++next_versions;
    next_offered = next_offered || (h != nullptr && it->second.h.checksum == h->checksum);
  }
  return fmt::format(
      "base op {} end {}, tip op {}, chain {}, offered {} ({} at the next op{}), replica header {}, "
      "log end {} committed {}{}{}",
      committed_op_, committed_end_, tip, chain_.size(), offered_.size(), next_versions,
      next_offered ? ", the replica's" : "", h == nullptr ? "missing" : "held", log_ ? log_->log_end().value() : -1,
      log_ ? log_->committed().value() : -1, busy_ ? ", busy" : "", target_ ? ", transfer pending" : "");
}

void partition_mirror::abandon() {
  if (!log_) {
    return;
  }
  auto closed = run(disk_, log_->close());
  (void)closed;  // the disk is halted: it fails, and the log is done with
  log_.reset();
  RILL_ASSERT(files_->open_count() == 0, "the closed log left {} descriptors", files_->open_count());
  files_.reset();
  ++generation_;
  busy_ = false;
  chain_.clear();
  offered_.clear();
  target_.reset();
}

}  // namespace rill::simulation
