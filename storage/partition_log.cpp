// partition_log: appends, group commit, rolls, truncation and the retention decision. Recovery is in
// log_recovery.cpp, reads in log_read.cpp, file deletion in log_retention.cpp.
//
// Invariants
// - log_start_ <= committed_ <= log_end_; synced_end_ <= log_end_; under auto commit committed_ == synced_end_
//   (up to retention moving log_start_ past it, which cannot happen: retention only removes committed segments).
// - Only the active segment (segments_.back()) is written; every other live segment is sealed.
// - Only the writer (writer_loop and the work it runs) changes segments_, log_end_ or the superblock after open();
//   it runs one item at a time. synced_end_ (and the active segment's synced_size, and committed_ under auto
//   commit) are also raised by the background sync (relaxed durability), concurrently with the writer, and only
//   raised: each raise is to the end and size the active segment had when an fdatasync of its meta then log file
//   was issued (bytes whose writes had completed, so covered), and only if no truncation ran meanwhile and the log
//   is not fenced. Rolls and truncations hold the background sync off (and wait for its sync in flight), so it
//   never sees the segment table change under it nor holds a pin on a file they close. Hence a consumer still sees
//   only synced data: nothing it saw can vanish, and no offset it saw is reused, after a power loss.
// - Offsets and log-append timestamps are assigned at write time, in queue order, so an append that fails (and
//   everything queued behind it) never leaves an offset that a later append could reuse after being seen.
// - An append completes only once: with its result, or with the error that stopped it.
// - Segments are ordered by base offset and never overlap (a gap only where recovery found offsets missing); every
//   segment before the active one is sealed and synced whole, so synced_end_ >= the active segment's base.
// - The superblock is a lower bound: its committed and log start never exceed committed_ and log_start_, and its
//   recovery frontier never passes the active segment; it holds a truncation intent only inside truncate_after.
// check_invariants() asserts each of these.
#include "storage/partition_log.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/endian.h"
#include "config/limits.h"
#include "storage/atomic_file.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/partition_log_internal.h"

namespace rill::storage {

static_assert(limits::flush_iovecs_max <= 1024, "one group is one vectored write: at most Linux's IOV_MAX iovecs");
static_assert(limits::flush_bytes_limit <= limits::segment_bytes_limit, "a flush fits in a segment");
static_assert(limits::batch_bytes_limit < limits::segment_bytes_limit, "a batch fits in a segment");

partition_log::partition_log(io::engine& engine, buffer_pool& pool, const clock& clk, log_reporter& reporter,
                             std::string dir, log_options options)
    : engine_(engine),
      own_files_(options.files == nullptr ? std::make_unique<file_cache>(file_cache::files_unlimited) : nullptr),
      files_(options.files != nullptr ? *options.files : *own_files_),
      pool_(pool),
      clock_(clk),
      reporter_(reporter),
      dir_(std::move(dir)),
      options_(options) {
  stored_limits_.batch_bytes_max =
      std::max<std::uint64_t>(options_.config.max_message_bytes, limits::batch_bytes_limit);
  stored_limits_.check_records = false;
  writer_idle_.set();
  deleter_idle_.set();
  background_sync_idle_.set();
}

partition_log::~partition_log() {
  RILL_ASSERT(closed_ || segments_.empty(), "partition_log {} destroyed without close()", dir_);
}

expected<void> partition_log::check_writable() const {
  if (closing_ || closed_) {
    return make_unexpected(errc::closed, "partition " + dir_ + " is closed");
  }
  if (fenced_) {
    return unexpected(*fenced_);
  }
  return {};
}

void partition_log::fence(const rill::error& e) {
  if (!fenced_) {
    fenced_ = rill::error(make_error_code(errc::fenced), "partition " + dir_ + ": " + e.message());
    reporter_.notice("fenced " + dir_ + ": " + e.message());
    if (on_fenced_) {
      on_fenced_();
    }
  }
}

void partition_log::advance_commit() {
  if (options_.auto_commit && synced_end_ > committed_) {
    committed_ = synced_end_;
    if (on_committed_) {
      on_committed_();
    }
  }
}

void partition_log::commit_to(offset_t offset) {
  RILL_ASSERT(!options_.auto_commit, "commit_to() is for external commit mode");
  RILL_ASSERT(offset <= log_end_, "commit_to({}) beyond log_end {}", offset.value(), log_end_.value());
  if (offset > committed_) {
    committed_ = offset;
    if (on_committed_) {
      on_committed_();
    }
  }
}

void partition_log::enqueue(std::unique_ptr<work> w) {
  pending_bytes_ += w->bytes.size();
  queue_.push_back(std::move(w));
  if (!writer_running_) {
    writer_running_ = true;
    writer_idle_.reset();
    spawn(writer_loop(), [] {});
  }
}

task<expected<append_result>> partition_log::append(std::vector<std::byte> batches) {
  RILL_CO_TRY_VOID(check_writable());
  RILL_CO_TRY(validated, validated_batches::validate(std::move(batches), options_.config.max_message_bytes));
  co_return co_await append(std::move(validated));
}

task<expected<append_result>> partition_log::append(validated_batches batches) {
  RILL_CO_TRY_VOID(check_writable());
  batches.check_invariants();  // O(batches): sizes add up (no CRC: validate() checked them)
  // This log's own size limit: the batches may have been validated against another (the topic's, as the router saw
  // it, while the log's configuration changed), so a batch over this log's limit is refused here, as validate()
  // would.
  for (std::size_t i = 0; i < batches.batches().size(); ++i) {
    const auto& b = batches.batches()[i];
    if (b.size > options_.config.max_message_bytes) {
      co_return make_unexpected(errc::batch_too_large,
                                fmt::format("batch {} (byte {} of the request): batch of {} bytes exceeds the limit of "
                                            "{} bytes",
                                            i, b.position, b.size, options_.config.max_message_bytes));
    }
  }
  if (pending_bytes_ + batches.bytes().size() > options_.config.pending_bytes_max) {
    co_return make_unexpected(errc::overloaded, fmt::format("{} bytes pending in {} (limit {})", pending_bytes_, dir_,
                                                            options_.config.pending_bytes_max));
  }
  auto parts = std::move(batches).release();
  auto w = std::make_unique<work>();
  w->k = work::kind::append;
  w->infos.reserve(parts.batches.size());
  for (const auto& b : parts.batches) {
    batch_info info;
    info.size = b.size;
    info.offset_count = b.records;  // producer batches are dense: last_offset_delta + 1 == records_count
    info.records = b.records;
    info.crc_tail = b.crc_tail;
    w->infos.push_back(info);
  }
  w->records = parts.records;
  w->bytes = std::move(parts.bytes);
  completion<expected<append_result>> done;
  w->append_done = &done;
  enqueue(std::move(w));
  co_return co_await done;
}

task<expected<append_result>> partition_log::append_replicated(std::vector<std::byte> batches,
                                                               std::vector<batch_meta> metas) {
  RILL_CO_TRY_VOID(check_writable());
  if (batches.empty()) {
    co_return make_unexpected(errc::invalid_batch, "no batch to append");
  }
  auto w = std::make_unique<work>();
  w->k = work::kind::replicated;
  std::size_t pos = 0;
  offset_t expected_base{-1};
  while (pos < batches.size()) {
    auto v = batch_view::validate(std::span<const std::byte>(batches).subspan(pos), stored_limits_);
    if (!v) {
      auto e = std::move(v).error();
      co_return unexpected(
          rill::error(e.code(), fmt::format("replicated batch {} (byte {}): {}", w->infos.size(), pos, e.detail())));
    }
    if (expected_base.value() >= 0 && v->base_offset() != expected_base) {
      co_return make_unexpected(errc::invalid_argument,
                                fmt::format("replicated batches not contiguous: batch at {} after one ending at {}",
                                            v->base_offset().value(), expected_base.value()));
    }
    batch_info info;
    info.size = static_cast<std::uint32_t>(v->size());
    info.offset_count = static_cast<std::uint32_t>(v->last_offset_delta()) + 1;
    info.records = static_cast<std::uint32_t>(v->records_count());
    info.base = v->base_offset();
    info.max_timestamp = v->max_timestamp();
    info.epoch = v->leader_epoch();
    expected_base = v->next_offset();
    w->infos.push_back(info);
    w->records += info.records;
    pos += v->size();
  }
  if (!metas.empty() && metas.size() != w->infos.size()) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("{} metadata entries for {} batches", metas.size(), w->infos.size()));
  }
  w->bytes = std::move(batches);
  w->metas = std::move(metas);
  completion<expected<append_result>> done;
  w->append_done = &done;
  enqueue(std::move(w));
  co_return co_await done;
}

task<expected<void>> partition_log::run_exclusive(std::function<task<expected<void>>()> body) {
  RILL_CO_TRY_VOID(check_writable());
  auto w = std::make_unique<work>();
  w->k = body ? work::kind::control : work::kind::sync;
  w->control = std::move(body);
  completion<expected<void>> done;
  w->void_done = &done;
  enqueue(std::move(w));
  co_return co_await done;
}

task<expected<void>> partition_log::flush() {
  return run_exclusive({});
}

task<expected<void>> partition_log::set_leader_epoch(epoch_t epoch) {
  return run_exclusive([this, epoch]() -> task<expected<void>> {
    auto latest = epochs_.latest();
    if (latest && epoch < latest->epoch) {
      co_return make_unexpected(errc::invalid_argument, fmt::format("leader epoch {} is older than the current {}",
                                                                    epoch.value(), latest->epoch.value()));
    }
    epoch_history next = epochs_;
    next.assign(epoch, log_end_);
    RILL_CO_TRY_VOID(co_await write_file_atomic(engine_, dir_, epoch_history::file_name, next.encode()));
    epochs_ = std::move(next);
    epoch_ = epoch;
    check_step();
    co_return expected<void>{};
  });
}

task<expected<void>> partition_log::truncate_after(offset_t last_kept) {
  return run_exclusive([this, last_kept]() -> task<expected<void>> {
    co_await hold_background_sync();
    auto r = co_await do_truncate_after(last_kept);
    release_background_sync();
    co_return r;
  });
}

void partition_log::update_config(const config::log_config& next) {
  RILL_ASSERT(config::changes_in_place(options_.config, next), "{}: a log setting that needs a reopen changed in place",
              dir_);
  options_.config = next;
}

task<expected<retention_result>> partition_log::enforce_retention(std::optional<offset_t> ceiling) {
  retention_result result;
  // (A named std::function: GCC 12 destroys one made among a co_await's arguments twice; docs/architecture.md.)
  std::function<task<expected<void>>()> body = [this, &result, ceiling]() -> task<expected<void>> {
    RILL_CO_TRY(r, co_await do_retention(ceiling));
    result = r;
    co_return expected<void>{};
  };
  RILL_CO_TRY_VOID(co_await run_exclusive(std::move(body)));
  co_return result;
}

void partition_log::fail_pending(const rill::error& e) {
  // Take the queue first: completing an append may resume code that queues more work.
  auto items = std::move(queue_);
  queue_.clear();
  for (auto& w : items) {
    pending_bytes_ -= w->bytes.size();
    if (w->append_done != nullptr) {
      w->append_done->complete(unexpected(e));
    } else if (w->void_done != nullptr) {
      w->void_done->complete(unexpected(e));
    }
  }
}

bool partition_log::needs_roll(const segment& active, std::uint64_t bytes) const {
  if (active.size == 0) {
    return false;  // a batch larger than segment_bytes gets a segment of its own
  }
  if (active.size + bytes > options_.config.segment_bytes) {
    return true;
  }
  // Relative offsets in the index are u32.
  if (log_end_ - active.base_offset > static_cast<std::int64_t>(UINT32_MAX / 2)) {
    return true;
  }
  if (options_.config.segment_ms > 0 && active.first_append_mono.count() >= 0) {
    const auto age = clock_.monotonic() - active.first_append_mono;
    if (age >= std::chrono::milliseconds(options_.config.segment_ms)) {
      return true;
    }
  }
  return false;
}

task<void> partition_log::writer_loop() {
  while (!queue_.empty()) {
    if (fenced_) {
      fail_pending(*fenced_);
      break;
    }
    if (queue_.front()->is_append()) {
      const segment& active = *segments_.back();
      if (needs_roll(active, queue_.front()->bytes.size())) {
        auto rolled = co_await roll();
        if (!rolled) {
          fail_pending(rolled.error());
        }
        continue;
      }
      // The group: consecutive appends of the same kind that fit in the active segment, within the flush limits.
      std::vector<std::unique_ptr<work>> group;
      std::uint64_t bytes = 0;
      const auto kind = queue_.front()->k;
      while (!queue_.empty() && queue_.front()->k == kind && group.size() < limits::flush_iovecs_max) {
        const std::uint64_t next = queue_.front()->bytes.size();
        if (!group.empty() && (bytes + next > options_.config.flush_bytes_max ||
                               active.size + bytes + next > options_.config.segment_bytes)) {
          break;
        }
        bytes += next;
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      co_await write_group(std::move(group));
      continue;
    }
    auto w = std::move(queue_.front());
    queue_.pop_front();
    expected<void> r;
    if (w->k == work::kind::sync) {
      r = co_await sync_log();
    } else {
      r = co_await w->control();
    }
    if (w->void_done != nullptr) {
      w->void_done->complete(std::move(r));
    }
  }
  writer_running_ = false;
  writer_idle_.set();
}

void partition_log::fail_group(append_group& g, const rill::error& e) {
  for (auto& w : g.items) {
    w->append_done->complete(unexpected(e));
  }
}

task<void> partition_log::write_group(std::vector<std::unique_ptr<work>> items) {
  RILL_ASSERT(!items.empty());
  RILL_ASSERT(items.size() <= limits::flush_iovecs_max);
  append_group g;
  g.started = clock_.monotonic();
  g.active = segments_.back();
  g.position = g.active->size;
  g.replicated = items.front()->k == work::kind::replicated;
  g.items = std::move(items);
  for (const auto& w : g.items) {
    RILL_ASSERT(w->is_append());
    RILL_ASSERT(w->append_done != nullptr);
    g.bytes += w->bytes.size();
  }
  RILL_ASSERT(g.bytes <= pending_bytes_, "group of {} bytes, {} pending", g.bytes, pending_bytes_);

  if (auto assigned = assign_group(g); !assigned) {
    pending_bytes_ -= g.bytes;
    fail_group(g, assigned.error());
    co_return;
  }
  if (g.replicated) {
    auto saved = co_await persist_group_epochs(g);
    if (!saved) {
      pending_bytes_ -= g.bytes;
      fail_group(g, saved.error());
      co_return;
    }
  }
  g.has_metas = std::any_of(g.items.begin(), g.items.end(), [](const auto& w) { return !w->metas.empty(); });
  g.metas_before = g.active->metas.size();
  pending_bytes_ -= g.bytes;
  group_in_flight_ = true;  // until apply_group or the end of undo_group (sync_file)

  // Every step below must succeed before the group counts: until then log_end_, the segment and the index describe
  // the file as it was, and a failure cuts the file back to that (and syncs the cut) before the error is returned.
  if (auto written = co_await write_group_batches(g); !written) {
    co_await undo_group(g, written.error());
    co_return;
  }
  ++stats_.flushes;
  if (g.has_metas) {
    if (auto saved = co_await write_group_metas(g); !saved) {
      co_await undo_group(g, saved.error());
      co_return;
    }
  }
  if (options_.config.durability == config::durability_mode::sync_before_ack && !g.synced) {
    if (auto synced = co_await sync_group(g); !synced) {
      co_await undo_group(g, synced.error());
      co_return;
    }
  }
  apply_group(g);
  check_step();
  co_await finish_group(g);
}

expected<void> partition_log::assign_group(append_group& g) {
  // Assign offsets and timestamps (leader), or check contiguity (replica), at write time.
  g.next = log_end_;
  g.now = std::max(clock_.wall_ms(), last_timestamp_);
  g.results.reserve(g.items.size());
  for (auto& w : g.items) {
    append_result r;
    r.base_offset = g.next;
    r.timestamp = g.now;
    std::size_t pos = 0;
    for (auto& info : w->infos) {
      if (g.replicated) {
        if (info.base != g.next) {
          return make_unexpected(
              errc::invalid_argument,
              fmt::format("replicated batch at offset {} does not start at log end {}",
                          static_cast<std::uint64_t>(info.base.value()), static_cast<std::uint64_t>(g.next.value())));
        }
      } else {
        info.base = g.next;
        info.max_timestamp = g.now;
        info.epoch = epoch_;
        stamp_batch(std::span<std::byte>(w->bytes).subspan(pos, info.size), g.next, epoch_, g.now, info.crc_tail);
      }
      pos += info.size;
      g.next = g.next + info.offset_count;
      ++r.batches;
      r.records += info.records;
    }
    RILL_ASSERT(pos == w->bytes.size(), "batch sizes {} of a {}-byte append", pos, w->bytes.size());
    r.last_offset = g.next - 1;
    g.results.push_back(r);
  }
  RILL_ASSERT(g.next > log_end_);
  return {};
}

task<expected<void>> partition_log::persist_group_epochs(append_group& g) {
  // New epochs carried by replicated batches are recorded before the batches are written.
  RILL_ASSERT(g.replicated);
  epoch_history updated = epochs_;
  bool changed = false;
  for (const auto& w : g.items) {
    for (const auto& info : w->infos) {
      auto latest = updated.latest();
      if (!latest || info.epoch > latest->epoch) {
        updated.assign(info.epoch, info.base);
        changed = true;
      }
    }
  }
  if (changed) {
    RILL_CO_TRY_VOID(co_await write_file_atomic(engine_, dir_, epoch_history::file_name, updated.encode()));
    epochs_ = std::move(updated);
    epoch_ = epochs_.latest()->epoch;
  }
  co_return expected<void>{};
}

task<expected<void>> partition_log::write_group_batches(append_group& g) {
  segment& active = *g.active;
  std::vector<::iovec> iov;
  iov.reserve(g.items.size());
  for (const auto& w : g.items) {
    iov.push_back(::iovec{const_cast<std::byte*>(w->bytes.data()), w->bytes.size()});
  }
  // Under sync-before-ack without metadata, the write and its fdatasync go down together (one kernel round trip
  // instead of two). Metadata must be written between them, so that case keeps separate steps.
  const bool fused = options_.config.durability == config::durability_mode::sync_before_ack && !g.has_metas;
  RILL_CO_TRY(log, co_await active.log_file.pin(engine_));
  active.log_file.mark_unsynced();  // until an fdatasync covers the group, the cache must not close the file
  if (!fused) {
    co_return co_await writev_all(engine_, log.fd(), g.position, iov, active.log_path(), options_.blocking_writes);
  }
  io::awaitable op(engine_);
  op.op = io::opcode::writev_datasync;
  op.fd = log.fd();
  op.offset = g.position;
  op.iov = iov.data();
  op.iov_count = static_cast<unsigned>(iov.size());
  co_await op;
  if (op.result < 0) {
    co_return unexpected(
        io_error(static_cast<int>(op.result), fmt::format("writev {} at byte {}", active.log_path(), g.position)));
  }
  if (static_cast<std::uint64_t>(op.result) < g.bytes) {
    // A short write (rare): finish it the ordinary way; the sync follows in sync_group.
    const auto rest = iovecs_after(iov, static_cast<std::uint64_t>(op.result));
    co_return co_await writev_all(engine_, log.fd(), g.position + static_cast<std::uint64_t>(op.result), rest,
                                  active.log_path());
  }
  if (op.sync_result == 0 && injected_sync_failures_ > 0) {
    --injected_sync_failures_;
    op.sync_result = -EIO;  // failure injection (inject_sync_failures)
  }
  if (op.sync_result < 0) {
    g.sync_failed = true;
    co_return unexpected(io_error(static_cast<int>(op.sync_result), "fdatasync " + active.log_path()));
  }
  g.synced = true;
  active.log_file.mark_synced();
  co_return expected<void>{};
}

task<expected<void>> partition_log::write_group_metas(append_group& g) {
  // Replication metadata: written beside the batches and synced with them.
  RILL_ASSERT(g.has_metas);
  segment& active = *g.active;
  for (const auto& w : g.items) {
    for (std::size_t i = 0; i < w->metas.size(); ++i) {
      active.metas.push_back(meta_entry{w->infos[i].base, w->metas[i]});
    }
  }
  if (!active.meta_file.attached()) {
    RILL_CO_TRY_VOID(
        co_await active.meta_file.create(engine_, files_, active.meta_path(), io::open_create, io::open_create));
    RILL_CO_TRY_VOID(co_await sync_dir(engine_, dir_));
  }
  RILL_ASSERT(active.metas_written <= active.metas.size());
  const auto out = encode_meta_entries(std::span<const meta_entry>(active.metas).subspan(active.metas_written));
  RILL_CO_TRY(meta, co_await active.meta_file.pin(engine_));
  active.meta_file.mark_unsynced();
  RILL_CO_TRY_VOID(co_await write_all(engine_, meta.fd(), active.metas_written * meta_entry_format::entry_bytes, out,
                                      active.meta_path()));
  active.metas_written = active.metas.size();
  co_return expected<void>{};
}

task<expected<void>> partition_log::sync_group(append_group& g) {
  // The metadata first, so that a batch is never synced before its entry: after a crash between the two syncs, an
  // entry whose batch did not land is dropped by recovery (it names an offset past the segment's end). A batch
  // written back early, before either sync, may still be found without its entry; it was never acknowledged, and
  // the replicated partition's owner cuts such a tail (consensus/partition_storage.cpp).
  RILL_ASSERT(!g.synced);
  segment& active = *g.active;
  expected<void> synced = co_await sync_file(active.meta_file);
  if (synced) {
    synced = co_await sync_file(active.log_file);
  }
  if (!synced) {
    g.sync_failed = true;
    co_return synced;
  }
  g.synced = true;
  co_return expected<void>{};
}

task<void> partition_log::undo_group(append_group& g, const rill::error& e) {
  segment& active = *g.active;
  if (g.sync_failed) {
    fence(e);  // after a failed fsync nothing unsynced can be trusted; cut what we can below, then refuse writes
  }
  // Each cut is marked unsynced until its fdatasync succeeds: a file whose cut did not reach the disk stays open
  // (and the log fenced) until close().
  auto cut = co_await truncate_cached(active.log_file, g.position);
  if (cut) {
    cut = co_await sync_file(active.log_file);
  }
  if (cut && active.meta_file.attached() && g.has_metas) {
    cut = co_await truncate_cached(active.meta_file, g.metas_before * meta_entry_format::entry_bytes);
    if (cut) {
      cut = co_await sync_file(active.meta_file);
    }
  }
  if (!cut) {
    fence(cut.error());  // the failed bytes may still be in the file: nothing more may be appended after them
  } else {
    active.file_size = g.position;
  }
  active.metas.resize(g.metas_before);
  active.metas_written = std::min(active.metas_written, g.metas_before);
  group_in_flight_ = false;
  fail_group(g, e);
  fail_pending(e);
}

void partition_log::apply_group(append_group& g) {
  // Every step succeeded: the group counts.
  segment& active = *g.active;
  RILL_ASSERT(&active == segments_.back().get(), "the active segment changed under a group");
  RILL_ASSERT(active.size == g.position);
  std::uint64_t at = g.position;
  for (const auto& w : g.items) {
    for (const auto& info : w->infos) {
      active.index.on_batch(static_cast<std::uint32_t>(info.base - active.base_offset), static_cast<std::uint32_t>(at),
                            info.size, info.max_timestamp);
      active.max_timestamp = std::max(active.max_timestamp, info.max_timestamp);
      ++active.batches;
      at += info.size;
    }
  }
  RILL_ASSERT(at == g.position + g.bytes);
  if (active.first_append_mono.count() < 0) {
    active.first_append_mono = clock_.monotonic();
  }
  active.size = g.position + g.bytes;
  active.file_size = std::max(active.file_size, active.size);
  active.next_offset = g.next;
  log_end_ = g.next;
  group_in_flight_ = false;
  last_timestamp_ = g.now;
  stats_.appends += g.items.size();
  if (g.synced) {
    ++stats_.syncs;
    mark_synced(log_end_);
  }
  if (options_.observer != nullptr) {
    options_.observer->group_written(clock_.monotonic() - g.started, static_cast<std::uint32_t>(g.items.size()),
                                     g.synced);
  }
}

task<void> partition_log::finish_group(append_group& g) {
  const auto mode = options_.config.durability;
  // Relaxed policies: the sync deadline is set before the appends complete, so whoever they wake (the partition
  // actor scheduling its ticks) already sees it.
  if (mode != config::durability_mode::sync_before_ack) {
    if (mode == config::durability_mode::every_ms && !sync_due_) {
      sync_due_ = clock_.monotonic() + std::chrono::milliseconds(options_.config.sync_every_ms);
    }
  }
  RILL_ASSERT(g.results.size() == g.items.size());
  for (std::size_t i = 0; i < g.items.size(); ++i) {
    g.items[i]->append_done->complete(g.results[i]);
  }
  // Acknowledged; now make them visible: the background sync covers them within about one fdatasync.
  kick_background_sync();
  // The bound on what a power loss can take, even if the background sync is slow. Unsynced data counted in
  // offsets (= records for leader appends), as log_end_ - synced_end_, which stays right while the background
  // sync raises synced_end_.
  if (mode == config::durability_mode::every_records &&
      log_end_ - synced_end_ >= static_cast<std::int64_t>(options_.config.sync_every_records)) {
    (void)co_await sync_log();  // a failure fences the partition; the appends were already acknowledged
  }
  if (committed_ - superblock_.current().committed >=
      static_cast<std::int64_t>(options_.config.superblock_interval_records)) {
    (void)co_await persist_superblock();
  }
  if (mode == config::durability_mode::sync_before_ack && options_.config.preallocate_bytes > 0) {
    (void)co_await maybe_preallocate(*g.active);
  }
  check_step();
}

task<expected<void>> partition_log::sync_log() {
  if (fenced_) {
    co_return unexpected(*fenced_);
  }
  const auto started = clock_.monotonic();
  std::shared_ptr<segment> active = segments_.back();
  const offset_t target = log_end_;
  if (synced_end_ >= target) {
    co_return expected<void>{};
  }
  expected<void> synced = co_await sync_file(active->meta_file);  // metadata before batches, as in write_group
  if (synced) {
    synced = co_await sync_file(active->log_file);
  }
  if (!synced) {
    fence(synced.error());
    // Nothing after the last good sync can be trusted (the kernel may have dropped those pages): cut it, so that
    // recovery does not find it and make it visible. If the cut fails too, recovery sees those bytes.
    if (active->synced_size < active->size) {
      auto cut = co_await truncate_cached(active->log_file, active->synced_size);
      if (cut) {
        active->size = active->synced_size;
        active->file_size = active->synced_size;
        active->next_offset = synced_end_;
        active->index.truncate(static_cast<std::uint32_t>(active->size), static_cast<std::uint32_t>(active->size));
        log_end_ = synced_end_;
      }
    }
    co_return unexpected(*fenced_);
  }
  if (fenced_) {
    // Another operation failed while this sync waited (a background sync, an append's): the log cut what followed
    // its last good sync, perhaps below `target`, and this success proves nothing about what it covered (Linux
    // reports a writeback error once). Nothing more is marked synced on a fenced log.
    co_return unexpected(*fenced_);
  }
  ++stats_.syncs;
  mark_synced(target);
  if (options_.observer != nullptr) {
    options_.observer->synced(clock_.monotonic() - started);
  }
  check_step();
  co_return expected<void>{};
}

void partition_log::mark_synced(offset_t target) {
  synced_end_ = std::max(synced_end_, target);
  segments_.back()->synced_size = segments_.back()->size;
  sync_due_.reset();
  advance_commit();
}

void partition_log::kick_background_sync() {
  if (!options_.background_sync || options_.config.durability == config::durability_mode::sync_before_ack) {
    return;
  }
  if (background_sync_running_ || background_sync_holds_ > 0 || closing_ || closed_ || fenced_ ||
      synced_end_ >= log_end_) {
    return;
  }
  background_sync_running_ = true;
  background_sync_idle_.reset();
  spawn(background_sync_loop(), [] {});
}

task<void> partition_log::background_sync_loop() {
  RILL_ASSERT(background_sync_running_);
  while (!closing_ && !closed_ && !fenced_ && background_sync_holds_ == 0 && synced_end_ < log_end_) {
    // What this sync covers: the active segment as it is now. Its size and end were set by apply_group after the
    // group's writes completed, so an fdatasync issued from here covers them (and their metadata, synced first).
    std::shared_ptr<segment> seg = segments_.back();
    const std::uint64_t size = seg->size;
    const offset_t end = seg->next_offset;
    const std::uint64_t truncations = truncations_;
    if (synced_end_ < seg->base_offset || end <= synced_end_) {
      break;  // something below the segment is unsynced, or nothing in it is: the writer's own syncs handle it
    }
    const auto started = clock_.monotonic();
    expected<void> synced = co_await sync_file(seg->meta_file, true);  // metadata before batches
    if (synced) {
      synced = co_await sync_file(seg->log_file, true);
    }
    if (!synced) {
      // After a failed fsync nothing unsynced can be trusted. No cut here (the writer may be inside a group on this
      // file): the owner reopens the log with trusted_end = synced_end(), which cuts it (partition_state).
      fence(synced.error());
      break;
    }
    if (fenced_ || closed_ || truncations_ != truncations || segments_.back() != seg) {
      continue;  // the capture is stale: raise nothing (the loop condition decides whether to go on)
    }
    ++stats_.syncs;
    RILL_ASSERT(size <= seg->size, "segment {} shrank under a background sync", seg->base_offset.value());
    RILL_ASSERT(end <= log_end_);
    seg->synced_size = std::max(seg->synced_size, size);
    synced_end_ = std::max(synced_end_, end);
    if (synced_end_ >= log_end_) {
      sync_due_.reset();
    }
    if (options_.observer != nullptr) {
      options_.observer->synced(clock_.monotonic() - started);
    }
    advance_commit();
    check_order();  // only the order: the writer may be between the awaits of a step
  }
  background_sync_running_ = false;
  background_sync_idle_.set();
}

task<void> partition_log::hold_background_sync() {
  ++background_sync_holds_;
  while (background_sync_running_) {
    co_await background_sync_idle_.wait();
  }
}

void partition_log::release_background_sync() {
  RILL_ASSERT(background_sync_holds_ > 0);
  --background_sync_holds_;
  kick_background_sync();
}

task<expected<void>> partition_log::maybe_preallocate(segment& seg) {
  const std::uint64_t ahead = options_.config.preallocate_bytes;
  const std::uint64_t cap = std::max(options_.config.segment_bytes, seg.size);
  // Top up as soon as an eighth of the window is used: one large zero write (and the fdatasync that must then
  // carry it) stalls the appends queued behind it, while small steps spread the same bytes evenly (bench/compare:
  // halving the window at a time doubled the p99 of durable produces). A segment's first write (after creation, a
  // roll or an open) gets the whole window: only partitions being written hold zeros.
  const std::uint64_t step = std::max<std::uint64_t>(ahead / 32, 64 * 1024);
  const std::uint64_t target = std::min(cap, seg.size + ahead);
  if (seg.file_size >= target || target - seg.file_size < std::min(step, target - seg.size)) {
    co_return expected<void>{};
  }
  // Zeros past the logical end do not make the file unsynced: they are never data (recovery accepts a batch only at
  // the next expected offset), so losing them to a close loses nothing; the next group's fdatasync covers them.
  RILL_CO_TRY(log, co_await seg.log_file.pin(engine_));
  auto z = co_await write_zeros(engine_, log.fd(), seg.file_size, target - seg.file_size, seg.log_path());
  if (!z) {
    // Not fatal: zeros past the logical end are never read as data; stop preallocating this segment.
    reporter_.notice("preallocation stopped for " + seg.log_path() + ": " + z.error().message());
    seg.file_size = cap;  // do not try again for this segment
    co_return z;
  }
  seg.file_size = target;
  co_return expected<void>{};
}

task<expected<void>> partition_log::sync_file(cached_file& f, bool from_background) {
  if (!f.attached()) {
    co_return expected<void>{};  // no such file (a segment without metadata)
  }
  RILL_CO_TRY(p, co_await f.pin(engine_));
  // The writer's own writes are complete whenever it syncs. The background sync runs beside the writer: a write
  // issued before this fdatasync goes down but completing after it is not covered, so the file stays marked
  // unsynced (not evictable) unless no group was in flight now and no write is marked while the sync runs.
  const std::uint64_t writes = f.writes_marked();
  const bool covers_every_write = !from_background || !group_in_flight_;
  RILL_CO_TRY_VOID(co_await datasync_file(engine_, p.fd(), f.path()));
  if (injected_sync_failures_ > 0) {
    --injected_sync_failures_;  // failure injection: the sync ran, the log is told it failed (nothing trusted)
    co_return unexpected(io_error(-EIO, "fdatasync " + f.path() + " (injected)"));
  }
  if (covers_every_write) {
    f.mark_synced_if(writes);
  }
  co_return expected<void>{};
}

task<expected<void>> partition_log::truncate_cached(cached_file& f, std::uint64_t length, bool must_sync) {
  RILL_CO_TRY(p, co_await f.pin(engine_));
  if (must_sync) {
    f.mark_unsynced();
  }
  co_return co_await truncate_file(engine_, p.fd(), length, f.path());
}

task<expected<void>> partition_log::write_cached(cached_file& f, std::span<const std::byte> data) {
  RILL_CO_TRY(p, co_await f.pin(engine_));
  f.mark_unsynced();
  co_return co_await write_all(engine_, p.fd(), 0, data, f.path());
}

task<expected<void>> partition_log::persist_superblock() {
  superblock_state s = superblock_.current();
  s.committed = committed_;
  s.log_start = log_start_;
  s.recovery_frontier = segments_.back()->base_offset;
  auto w = co_await superblock_.write(s);
  if (!w) {
    fence(w.error());
  }
  co_return w;
}

task<expected<void>> partition_log::seal(segment& seg) {
  RILL_ASSERT(!seg.sealed);
  if (seg.file_size > seg.size) {
    auto trimmed = co_await truncate_cached(seg.log_file, seg.size);
    if (!trimmed) {
      fence(trimmed.error());
      co_return trimmed;
    }
    seg.file_size = seg.size;
  }
  // The whole index with its seal entry, replacing whatever the file had.
  const auto index_bytes = seg.index.encode_sealed();
  auto w = co_await write_cached(seg.index_file, index_bytes);
  if (w) {
    w = co_await truncate_cached(seg.index_file, index_bytes.size());
  }
  if (w) {
    w = co_await sync_file(seg.index_file);
  }
  if (w) {
    w = co_await sync_file(seg.meta_file);  // metadata before batches
  }
  if (w) {
    w = co_await sync_file(seg.log_file);
  }
  if (!w) {
    fence(w.error());
    co_return w;
  }
  if (&seg == segments_.back().get()) {
    synced_end_ = std::max(synced_end_, seg.next_offset);
    advance_commit();
  }
  seg.sealed = true;
  seg.synced_size = seg.size;
  // A sealed segment's index and metadata live in memory: their files leave the cache (synced just above).
  (void)co_await seg.index_file.close(engine_);
  (void)co_await seg.meta_file.close(engine_);
  co_return expected<void>{};
}

task<expected<void>> partition_log::roll() {
  co_await hold_background_sync();  // the seal closes the active segment's meta and index files
  auto rolled = co_await do_roll();
  release_background_sync();
  co_return rolled;
}

task<expected<void>> partition_log::do_roll() {
  if (fenced_) {
    co_return unexpected(*fenced_);  // (a roll queued before a failure: the active segment may be sealed)
  }
  std::shared_ptr<segment> old = segments_.back();
  RILL_CO_TRY_VOID(co_await seal(*old));
  auto created = co_await create_segment(log_end_);
  if (!created) {
    // The old segment is sealed and there is no new one to write: stop here; recovery resumes from a clean state
    // (the sealed segment, and at most an empty new one).
    fence(created.error());
    co_return unexpected(std::move(created).error());
  }
  std::shared_ptr<segment> seg = std::move(*created);
  segments_.push_back(seg);
  ++stats_.rolls;
  // From here the old segment is below the recovery frontier: recovery may trust its index.
  auto persisted = co_await persist_superblock();
  check_all();
  co_return persisted;
}

task<expected<std::shared_ptr<segment>>> partition_log::create_segment(offset_t base) {
  auto seg = std::make_shared<segment>(dir_, base, limits::index_interval_bytes);
  // Created with O_EXCL (a fresh file) and O_TRUNC; reopened later without either, so a reopen is the same file.
  RILL_CO_TRY_VOID(
      co_await seg->log_file.create(engine_, files_, seg->log_path(), io::open_create | io::open_exclusive, 0));
  auto index = co_await seg->index_file.create(engine_, files_, seg->index_path(), io::open_create | io::open_truncate,
                                               io::open_create);
  if (!index) {
    (void)co_await seg->log_file.close(engine_);
    co_return unexpected(std::move(index).error());
  }
  auto synced = co_await sync_dir(engine_, dir_);
  if (!synced) {
    (void)co_await seg->log_file.close(engine_);
    (void)co_await seg->index_file.close(engine_);
    (void)co_await unlink_file(engine_, seg->log_path(), true);
    (void)co_await unlink_file(engine_, seg->index_path(), true);
    co_return unexpected(std::move(synced).error());
  }
  // No preallocation here: a segment gets its zeros after its first write (finish_group), so a node with thousands
  // of idle partitions holds none, and a fresh or reopened one costs two empty files.
  co_return seg;
}

task<expected<void>> partition_log::do_truncate_after(offset_t last_kept) {
  const offset_t new_end = last_kept + 1;
  if (new_end >= log_end_) {
    co_return expected<void>{};  // nothing after it
  }
  if (new_end < committed_ || new_end < log_start_) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("truncate_after({}) would cut committed data (committed {}, log start {})",
                                          last_kept.value(), committed_.value(), log_start_.value()));
  }
  RILL_CO_TRY(plan, co_await plan_truncate(last_kept));
  // From here a failure fences the log: the intent persisted first lets recovery finish what is left.
  auto failed = [this](expected<void>& r) {
    if (!r) {
      fence(r.error());
    }
    return !r;
  };
  // 1. Persist the intent: a crash from here on is completed by recovery.
  if (auto r = co_await persist_truncate_intent(plan); failed(r)) {
    co_return r;
  }
  // 2. Later segments go entirely; their files are unlinked now (open descriptors of readers stay valid).
  if (auto r = co_await drop_segments_after(plan); failed(r)) {
    co_return r;
  }
  // 3. Cut the kept segment, its index and its metadata, and sync the cut.
  if (auto r = co_await cut_segment(plan); failed(r)) {
    co_return r;
  }
  if (auto r = co_await cut_segment_metas(plan); failed(r)) {
    co_return r;
  }
  if (auto r = co_await sync_cut(plan); failed(r)) {
    co_return r;
  }
  apply_truncate(plan);
  // 4. Epochs that started after the cut are gone with it.
  if (auto r = co_await truncate_epochs(last_kept); failed(r)) {
    co_return r;
  }
  // 5. Done: clear the intent.
  if (auto r = co_await clear_truncate_intent(); failed(r)) {
    co_return r;
  }
  kick_deleter();
  check_all();
  co_return expected<void>{};
}

task<expected<partition_log::truncate_plan>> partition_log::plan_truncate(offset_t last_kept) {
  truncate_plan plan;
  plan.last_kept = last_kept;
  plan.new_end = last_kept + 1;
  const offset_t new_end = plan.new_end;
  RILL_ASSERT(new_end < log_end_);
  RILL_ASSERT(new_end >= committed_);
  RILL_ASSERT(new_end >= log_start_);
  // The segment that will end at new_end: the last one whose base is <= new_end.
  while (plan.keep + 1 < segments_.size() && segments_[plan.keep + 1]->base_offset <= new_end) {
    ++plan.keep;
  }
  std::shared_ptr<segment> seg = segments_[plan.keep];
  plan.seg = seg;
  RILL_ASSERT(seg->base_offset <= new_end, "truncate to {} before the first segment {}", new_end.value(),
              seg->base_offset.value());
  // Find the byte position of the batch that starts at new_end (a batch is never split).
  plan.cut = seg->size;
  if (new_end < seg->next_offset) {
    RILL_CO_TRY(start, co_await position_for(*seg, new_end));
    std::uint64_t pos = start;
    const auto entry = seg->index.floor(static_cast<std::uint32_t>(new_end - seg->base_offset));
    timestamp_ms_t max_ts = entry ? entry->max_timestamp : timestamp_ms_t(-1);
    std::array<std::byte, batch_format::header_bytes> head{};
    bool found = false;
    RILL_CO_TRY(log, co_await seg->log_file.pin(engine_));
    while (pos < seg->size) {
      RILL_CO_TRY(got, co_await read_at(engine_, log.fd(), pos, head, seg->log_path()));
      if (got < head.size()) {
        break;
      }
      const offset_t base(load_be<std::int64_t>(head.data() + batch_format::base_offset_at));
      if (base == new_end) {
        found = true;
        break;
      }
      if (base > new_end) {
        break;
      }
      max_ts = std::max(max_ts, timestamp_ms_t(load_be<std::int64_t>(head.data() + batch_format::max_timestamp_at)));
      RILL_CO_TRY(size, batch_view::size_from_prefix(head, stored_limits_.batch_bytes_max));
      pos += size;
    }
    if (!found) {
      co_return make_unexpected(errc::invalid_argument, fmt::format("truncate_after({}): offset {} is inside a batch",
                                                                    static_cast<std::uint64_t>(last_kept.value()),
                                                                    static_cast<std::uint64_t>(new_end.value())));
    }
    plan.cut = pos;
    plan.max_ts = max_ts;
  } else {
    plan.max_ts = seg->max_timestamp;
  }
  RILL_ASSERT(plan.cut <= seg->size);
  co_return plan;
}

task<expected<void>> partition_log::persist_truncate_intent(const truncate_plan& plan) {
  superblock_state s = superblock_.current();
  s.truncate_from = plan.new_end;
  s.committed = committed_;
  co_return co_await superblock_.write(s);
}

task<expected<void>> partition_log::drop_segments_after(const truncate_plan& plan) {
  while (segments_.size() > plan.keep + 1) {
    std::shared_ptr<segment> gone = segments_.back();
    segments_.pop_back();
    RILL_ASSERT(gone->base_offset > plan.new_end);
    // Its paths may name new files soon (a segment created again at the same base): a descriptor still open stays
    // open for the readers inside it until the deleter closes it, and a closed one is never reopened.
    for (cached_file* f : {&gone->log_file, &gone->index_file, &gone->meta_file}) {
      if (f->attached()) {
        f->forbid_reopen();
      }
    }
    // In the graveyard before the unlinks, so that close() closes its descriptors even when an unlink fails (the
    // simulator found an open descriptor left behind by a cut that a crash interrupted). The deleter only closes
    // them: the files go here, or, if an unlink fails, at recovery, from the truncate intent in the superblock.
    gone->deleting = true;
    gone->files_unlinked = true;
    gone->file_size = 0;
    graveyard_.push_back(gone);
    for (const auto& path : {gone->log_path(), gone->index_path(), gone->meta_path()}) {
      RILL_CO_TRY_VOID(co_await unlink_file(engine_, path, true));
    }
  }
  RILL_ASSERT(segments_.back() == plan.seg);
  co_return expected<void>{};
}

task<expected<void>> partition_log::cut_segment(const truncate_plan& plan) {
  segment& seg = *plan.seg;
  RILL_CO_TRY_VOID(co_await truncate_cached(seg.log_file, plan.cut));
  seg.index.truncate(static_cast<std::uint32_t>(plan.cut), static_cast<std::uint32_t>(plan.cut));
  seg.size = plan.cut;
  seg.file_size = plan.cut;
  seg.next_offset = plan.new_end;
  seg.max_timestamp = plan.max_ts;
  if (seg.sealed) {
    // The kept segment becomes the active one again: reopen its index for writing. (A failure from here on fences
    // the log like every other: the active segment would stay sealed, and a later roll would seal it again. The
    // VSR simulator found that.)
    RILL_CO_TRY_VOID(
        co_await seg.index_file.create(engine_, files_, seg.index_path(), io::open_create, io::open_create));
    seg.sealed = false;
  }
  // Active again: its index lives in memory until the next seal; the file must not keep a stale seal entry.
  // Not synced (nor marked unsynced): the segment is now the last, whose index file recovery never trusts.
  co_return co_await truncate_cached(seg.index_file, 0, false);
}

task<expected<void>> partition_log::cut_segment_metas(const truncate_plan& plan) {
  segment& seg = *plan.seg;
  while (!seg.metas.empty() && seg.metas.back().base_offset >= plan.new_end) {
    seg.metas.pop_back();
  }
  if (seg.metas_written <= seg.metas.size()) {
    co_return expected<void>{};
  }
  seg.metas_written = seg.metas.size();
  if (!seg.meta_file.attached()) {
    RILL_CO_TRY_VOID(co_await seg.meta_file.create(engine_, files_, seg.meta_path(), io::open_create, io::open_create));
  }
  RILL_CO_TRY_VOID(co_await truncate_cached(seg.meta_file, seg.metas.size() * meta_entry_format::entry_bytes));
  co_return co_await sync_file(seg.meta_file);
}

task<expected<void>> partition_log::sync_cut(const truncate_plan& plan) {
  RILL_CO_TRY_VOID(co_await sync_file(plan.seg->log_file));
  co_return co_await sync_dir(engine_, dir_);
}

void partition_log::apply_truncate(const truncate_plan& plan) {
  RILL_ASSERT(plan.seg == segments_.back());
  RILL_ASSERT(plan.seg->next_offset == plan.new_end);
  log_end_ = plan.new_end;
  ++truncations_;  // cursors drop their cached file positions
  plan.seg->synced_size = plan.cut;
  synced_end_ = plan.new_end;  // the cut file was just synced whole
  advance_commit();
  last_timestamp_ = std::max(last_timestamp_, plan.max_ts);
}

task<expected<void>> partition_log::truncate_epochs(offset_t last_kept) {
  epoch_history updated = epochs_;
  updated.truncate_after(last_kept);
  if (updated.entries() != epochs_.entries()) {
    RILL_CO_TRY_VOID(co_await write_file_atomic(engine_, dir_, epoch_history::file_name, updated.encode()));
    epochs_ = std::move(updated);
    epoch_ = epochs_.latest() ? epochs_.latest()->epoch : epoch_t(0);
  }
  co_return expected<void>{};
}

task<expected<void>> partition_log::clear_truncate_intent() {
  superblock_state s = superblock_.current();
  s.truncate_from = offset_t(-1);
  s.committed = committed_;
  s.recovery_frontier = segments_.back()->base_offset;
  co_return co_await superblock_.write(s);
}

task<expected<void>> partition_log::restart_at(offset_t start) {
  return run_exclusive([this, start]() -> task<expected<void>> {
    co_await hold_background_sync();
    auto r = co_await do_restart_at(start);
    release_background_sync();
    co_return r;
  });
}

task<expected<void>> partition_log::do_restart_at(offset_t start) {
  if (start <= log_end_ || committed_ != log_end_) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("restart_at({}): the log ends at {} with {} committed; a restart needs a "
                                          "start past its end and nothing uncommitted",
                                          start.value(), log_end_.value(), committed_.value()));
  }
  // 1. The new start, before any file changes: from here recovery removes every segment below it (@A) and
  //    continues at it.
  superblock_state s = superblock_.current();
  s.log_start = start;
  s.committed = start;
  s.truncate_from = offset_t(-1);
  if (auto w = co_await superblock_.write(s); !w) {
    fence(w.error());
    co_return w;
  }
  // 2. A new active segment at the start; then the old ones go to the deleter.
  auto created = co_await create_segment(start);
  if (!created) {
    fence(created.error());
    co_return unexpected(std::move(created).error());
  }
  for (auto& old : segments_) {
    old->deleting = true;
    graveyard_.push_back(std::move(old));
  }
  segments_.clear();
  segments_.push_back(std::move(*created));
  log_start_ = start;
  log_end_ = start;
  synced_end_ = start;
  committed_ = start;
  epochs_.truncate_before(log_start_);
  ++stats_.rolls;
  kick_deleter();
  RILL_CO_TRY_VOID(co_await persist_superblock());  // (the recovery frontier: the new segment)
  check_all();
  if (on_committed_) {
    on_committed_();
  }
  co_return expected<void>{};
}

task<expected<retention_result>> partition_log::do_retention(std::optional<offset_t> ceiling) {
  retention_result result;
  const auto& cfg = options_.config;
  std::uint64_t total = 0;
  for (const auto& s : segments_) {
    total += s->size;
  }
  const timestamp_ms_t now = clock_.wall_ms();
  std::size_t remove = 0;
  std::uint64_t removed_bytes = 0;
  while (remove + 1 < segments_.size()) {  // never the active segment
    const segment& s = *segments_[remove];
    if (s.next_offset > committed_ || (ceiling && s.next_offset > *ceiling)) {
      break;  // never delete what is not committed, nor above the caller's bound
    }
    const bool too_old = cfg.retention_ms > 0 && s.max_timestamp.value() >= 0 &&
                         s.max_timestamp.value() < now.value() - static_cast<std::int64_t>(cfg.retention_ms);
    const bool too_big = cfg.retention_bytes > 0 && total - removed_bytes > cfg.retention_bytes;
    const bool empty = s.size == 0;
    if (!too_old && !too_big && !empty) {
      break;
    }
    removed_bytes += s.size;
    ++remove;
  }
  result.log_start = log_start_;
  if (remove == 0) {
    co_return result;
  }
  const offset_t new_start = segments_[remove]->base_offset;
  // Persist the new log start before any file goes: recovery deletes leftovers below it.
  const offset_t old_start = log_start_;
  log_start_ = new_start;
  auto w = co_await persist_superblock();
  if (!w) {
    log_start_ = old_start;
    co_return unexpected(std::move(w).error());
  }
  for (std::size_t i = 0; i < remove; ++i) {
    segments_.front()->deleting = true;
    graveyard_.push_back(segments_.front());
    segments_.erase(segments_.begin());
  }
  epochs_.truncate_before(log_start_);
  result.segments_removed = static_cast<std::uint32_t>(remove);
  result.bytes_removed = removed_bytes;
  result.log_start = log_start_;
  kick_deleter();
  check_all();
  co_return result;
}

void partition_log::tick() {
  if (closing_ || closed_ || fenced_) {
    return;
  }
  const auto now = clock_.monotonic();
  // Nobody waits for this work: a failure fences the partition, which the next append reports.
  if (sync_due_ && now >= *sync_due_ && synced_end_ < log_end_) {
    sync_due_.reset();
    auto w = std::make_unique<work>();
    w->k = work::kind::sync;
    enqueue(std::move(w));
  }
  // An idle partition rolls by age too, so that retention by age can remove its data without waiting for traffic.
  if (const auto due = roll_due(); due && now >= *due && !roll_queued_) {
    roll_queued_ = true;
    auto w = std::make_unique<work>();
    w->k = work::kind::control;
    w->control = [this]() -> task<expected<void>> {
      roll_queued_ = false;
      const auto again = roll_due();
      if (!again || clock_.monotonic() < *again) {
        co_return expected<void>{};  // an append rolled it meanwhile
      }
      co_return co_await roll();
    };
    enqueue(std::move(w));
  }
}

std::optional<std::chrono::nanoseconds> partition_log::roll_due() const {
  const segment& active = *segments_.back();
  if (options_.config.segment_ms == 0 || active.size == 0 || active.first_append_mono.count() < 0) {
    return std::nullopt;
  }
  return active.first_append_mono + std::chrono::milliseconds(options_.config.segment_ms);
}

std::optional<std::chrono::nanoseconds> partition_log::next_deadline() const {
  std::optional<std::chrono::nanoseconds> d;
  if (closing_ || closed_ || fenced_) {
    return d;  // tick() does nothing then: a deadline would only make its caller spin
  }
  if (sync_due_ && synced_end_ < log_end_) {
    d = *sync_due_;
  }
  if (const auto roll = roll_due(); roll && !roll_queued_) {
    d = d ? std::min(*d, *roll) : *roll;
  }
  return d;
}

task<expected<void>> partition_log::close() {
  if (closed_) {
    co_return expected<void>{};
  }
  closing_ = true;  // from here no new work is queued and the deleter does not restart
  while (writer_running_) {
    co_await writer_idle_.wait();
  }
  while (background_sync_running_) {
    co_await background_sync_idle_.wait();  // it stops after its sync in flight (closing_)
  }
  expected<void> result;
  if (!fenced_ && !segments_.empty()) {
    result = co_await sync_log();
    if (result) {
      result = co_await persist_superblock();
    }
  }
  while (deleter_running_) {
    co_await deleter_idle_.wait();
  }
  for (const auto& s : segments_) {
    RILL_ASSERT(s->readers == 0, "closing {} with a reader in segment {}", dir_, s->base_offset.value());
  }
  auto close_segment = [this](segment& s) -> task<void> {
    for (cached_file* f : {&s.log_file, &s.index_file, &s.meta_file}) {
      (void)co_await f->close(engine_);
    }
  };
  for (auto& s : segments_) {
    co_await close_segment(*s);
  }
  for (auto& s : graveyard_) {
    co_await close_segment(*s);
  }
  (void)co_await superblock_.close();
  closed_ = true;
  co_return result;
}

void partition_log::check_order() const {
  RILL_ASSERT(log_start_.value() >= 0, "log start {}", log_start_.value());
  RILL_ASSERT(log_start_ <= committed_, "log start {} > committed {}", log_start_.value(), committed_.value());
  RILL_ASSERT(synced_end_ <= log_end_, "synced end {} > log end {}", synced_end_.value(), log_end_.value());
  if (fenced_) {
    return;  // a failed sync cut log_end_ back to synced_end_, possibly below an external commit
  }
  RILL_ASSERT(committed_ <= log_end_, "committed {} > log end {}", committed_.value(), log_end_.value());
  if (options_.auto_commit) {
    RILL_ASSERT(committed_ == synced_end_, "auto commit: committed {} != synced end {}", committed_.value(),
                synced_end_.value());
  }
}

void partition_log::check_active() const {
  if (fenced_) {
    return;  // the failed step may have left the active segment half-way; recovery rebuilds it
  }
  RILL_ASSERT(!segments_.empty());
  const segment& active = *segments_.back();
  RILL_ASSERT(!active.sealed, "the active segment {} is sealed", active.base_offset.value());
  RILL_ASSERT(!active.deleting);
  RILL_ASSERT(active.log_file.attached());
  RILL_ASSERT(active.index_file.attached());
  RILL_ASSERT(active.next_offset == log_end_, "active segment ends at {}, log end {}", active.next_offset.value(),
              log_end_.value());
  RILL_ASSERT(active.base_offset <= log_end_);
  // Sealed segments were synced whole, so everything before the active segment is on disk.
  RILL_ASSERT(active.base_offset <= synced_end_, "active segment {} starts past the synced end {}",
              active.base_offset.value(), synced_end_.value());
  RILL_ASSERT(log_end_ - active.base_offset <= static_cast<std::int64_t>(UINT32_MAX),
              "relative offsets in the index are u32");
  RILL_ASSERT(active.size <= UINT32_MAX, "positions in the index are u32");
  RILL_ASSERT(active.synced_size <= active.size);
  RILL_ASSERT(active.size <= active.file_size);
  RILL_ASSERT(active.metas_written <= active.metas.size());
  RILL_ASSERT(segments_.front()->base_offset <= log_start_, "log start {} before the first segment {}",
              log_start_.value(), segments_.front()->base_offset.value());
  const auto latest = epochs_.latest();
  RILL_ASSERT(epoch_ == (latest ? latest->epoch : epoch_t(0)), "leader epoch {} is not the latest in the history",
              epoch_.value());
  // The superblock: a lower bound of the positions, persisted before what depends on it.
  const superblock_state& sb = superblock_.current();
  RILL_ASSERT(sb.truncate_from.value() < 0, "a truncation intent {} outside truncate_after", sb.truncate_from.value());
  RILL_ASSERT(sb.committed <= committed_, "superblock committed {} > committed {}", sb.committed.value(),
              committed_.value());
  RILL_ASSERT(sb.log_start <= log_start_, "superblock log start {} > log start {}", sb.log_start.value(),
              log_start_.value());
  RILL_ASSERT(sb.recovery_frontier <= active.base_offset, "recovery frontier {} past the active segment {}",
              sb.recovery_frontier.value(), active.base_offset.value());
}

void partition_log::check_segments() const {
  if (fenced_) {
    return;
  }
  RILL_ASSERT(!segments_.empty());
  std::uint64_t queued = 0;
  for (const auto& w : queue_) {
    queued += w->bytes.size();
  }
  RILL_ASSERT(queued <= pending_bytes_, "{} bytes queued, {} pending", queued, pending_bytes_);
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const segment& s = *segments_[i];
    RILL_ASSERT(!s.deleting);
    RILL_ASSERT(s.base_offset <= s.next_offset);
    RILL_ASSERT(s.synced_size <= s.size);
    RILL_ASSERT(s.size <= s.file_size);
    RILL_ASSERT(s.metas_written <= s.metas.size());
    if (!s.metas.empty()) {
      RILL_ASSERT(s.metas.front().base_offset >= s.base_offset);
      RILL_ASSERT(s.metas.back().base_offset < s.next_offset, "segment {}: metadata for {} past its end {}",
                  s.base_offset.value(), s.metas.back().base_offset.value(), s.next_offset.value());
    }
    const auto& entries = s.index.entries();
    if (s.size == 0) {
      RILL_ASSERT(entries.empty(), "segment {} is empty but indexed", s.base_offset.value());
    } else {
      RILL_ASSERT(!entries.empty(), "segment {} has {} bytes and no index entry", s.base_offset.value(), s.size);
      RILL_ASSERT(entries.front().position == 0);
      RILL_ASSERT(entries.front().relative_offset == 0);
      RILL_ASSERT(entries.back().position < s.size);
      RILL_ASSERT(s.base_offset + entries.back().relative_offset < s.next_offset);
    }
    if (i + 1 == segments_.size()) {
      continue;  // the active segment: check_active
    }
    // Only the active segment is unsealed; sealed segments are synced whole and hold no open index or metadata file.
    const segment& after = *segments_[i + 1];
    RILL_ASSERT(s.sealed, "segment {} is not the active one but is unsealed", s.base_offset.value());
    RILL_ASSERT(s.synced_size == s.size);
    RILL_ASSERT(!s.index_file.attached());
    RILL_ASSERT(!s.meta_file.attached());
    RILL_ASSERT(s.log_file.attached());
    RILL_ASSERT(!s.log_file.unsynced(), "sealed segment {} has unsynced writes", s.base_offset.value());
    // Ordered and not overlapping (a gap is possible: recovery reports lost offsets and continues after them).
    RILL_ASSERT(s.base_offset < after.base_offset, "segments {} and {} out of order", s.base_offset.value(),
                after.base_offset.value());
    RILL_ASSERT(s.next_offset <= after.base_offset, "segment {} ends at {}, past the next segment {}",
                s.base_offset.value(), s.next_offset.value(), after.base_offset.value());
  }
  for (const auto& g : graveyard_) {
    RILL_ASSERT(g->deleting);
  }
}

void partition_log::check_step() const {
  check_order();
  check_active();
}

void partition_log::check_all() const {
  check_step();
  check_segments();
}

void partition_log::check_invariants() const {
  RILL_ASSERT(!closed_, "check_invariants() after close()");
  check_order();
  if (writer_running_) {
    return;  // a step in flight: the rest holds again when it ends
  }
  check_all();
}

log_stats partition_log::stats() const {
  log_stats s = stats_;
  s.segments = segments_.size();
  for (const auto& seg : segments_) {
    s.bytes += seg->size;
  }
  s.pending_bytes = pending_bytes_;
  return s;
}

std::optional<batch_meta> partition_log::meta_for(offset_t base_offset) const {
  auto seg = segment_for(base_offset);
  if (!seg) {
    return std::nullopt;
  }
  auto it = std::lower_bound(seg->metas.begin(), seg->metas.end(), base_offset,
                             [](const meta_entry& m, offset_t o) { return m.base_offset < o; });
  if (it == seg->metas.end() || it->base_offset != base_offset) {
    return std::nullopt;
  }
  return it->meta;
}

std::vector<meta_entry> partition_log::metas(offset_t from) const {
  std::vector<meta_entry> out;
  for (const auto& s : segments_) {
    for (const auto& m : s->metas) {
      if (m.base_offset >= from) {
        RILL_ASSERT(out.empty() || out.back().base_offset < m.base_offset, "metadata entries out of offset order");
        out.push_back(m);
      }
    }
  }
  return out;
}

std::vector<offset_t> partition_log::segment_bases() const {
  std::vector<offset_t> out;
  for (const auto& s : segments_) {
    out.push_back(s->base_offset);
  }
  return out;
}

}  // namespace rill::storage
