// Opening a partition: recovery of its segments, positions, metadata side files and epoch history.
//
// Decision table, one row per segment in base-offset order (S = the newest valid superblock copy). Every input
// matches exactly one row; tests/storage/log_recovery_test.cpp drives each.
//
//   @A  the next segment's base <= S.log_start, or        delete its files (an interrupted retention delete; a
//       the last segment's base < S.log_start             restart_at that persisted its start and stopped there:
//                                                          retention never moves the start past the active segment)
//   @B  T set, base > T, or base == T with a kept       delete its files (an interrupted truncate_after, or a
//       segment before (T = the lower of S.truncate_from   fenced log reopened in-process: nothing above its
//       and the caller's trusted_end)                     synced end is trusted)
//   @C  base < S.recovery_frontier, not the last segment,
//       sealed index verifies and the log verifies
//       against it                                         trust it (fast path: first batch, and everything after
//                                                          the last index entry, decode and end exactly at EOF)
//   @D  as @C but the index or the log fails              report it, scan in full, rebuild the sealed index
//   @E  base >= S.recovery_frontier, not the last          scan in full, seal (trim, sealed index): a roll was
//                                                          interrupted after the new segment appeared
//   @F  the last segment                                   scan in full; it becomes the active segment
//
// During a full scan, a batch counts only if it is whole, passes its CRC and starts at the next expected offset
// (so old bytes in recycled or preallocated space can never pass as data). At the first batch that does not:
//   @G  the last segment, or the rest is all zeros,
//       or the batch starts at T                          cut the file there and sync it (a torn tail; under
//                                                          sync-before-ack it was never acknowledged). A cut below
//                                                          S.committed is reported as lost committed data.
//   @H  any other segment                                  report corruption and skip the rest of the segment
//                                                          (its bytes stay on disk for inspection)
//
// Then: the next offset is max(end of the last valid batch, S.log_start, S.committed), so an offset a consumer
// may have seen is never reused even if its batch was lost; a gap gets a fresh segment at that offset.
#include <algorithm>
#include <map>

#include <fmt/core.h>

#include "base/endian.h"
#include "storage/atomic_file.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/partition_log.h"
#include "storage/segment_index_format.h"
#include "storage/superblock_format.h"

namespace rill::storage {

task<expected<std::unique_ptr<partition_log>>> partition_log::open(io::engine& engine, buffer_pool& pool,
                                                                   const clock& clk, log_reporter& reporter,
                                                                   std::string dir, log_options options) {
  RILL_ASSERT(!dir.empty());
  RILL_CO_TRY_VOID(config::validate(options.config));
  std::unique_ptr<partition_log> log(new partition_log(engine, pool, clk, reporter, std::move(dir), options));
  auto recovered = co_await log->recover();
  if (!recovered) {
    // Close whatever recovery opened; the error is the one to report.
    log->fenced_ = recovered.error();
    (void)co_await log->close();
    co_return unexpected(std::move(recovered).error());
  }
  co_return log;
}

namespace {
struct found_files {
  bool log = false;
  bool index = false;
  bool meta = false;
};

bool all_zero(std::span<const std::byte> b) {
  return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}
}  // namespace

offset_t partition_log::recovery_cut() const noexcept {
  const offset_t intent = superblock_.current().truncate_from;
  const offset_t trusted = options_.trusted_end;
  if (intent.value() < 0) {
    return trusted;
  }
  return trusted.value() < 0 ? intent : std::min(intent, trusted);
}

task<expected<void>> partition_log::open_segment_files(segment& seg, bool has_meta) {
  RILL_ASSERT(!seg.log_file.attached());
  RILL_ASSERT(!seg.index_file.attached());
  RILL_ASSERT(!seg.meta_file.attached());
  // Opened now (so a missing or unreadable file fails the open), then left to the cache like every other.
  RILL_CO_TRY_VOID(co_await seg.log_file.create(engine_, files_, seg.log_path(), 0, 0));
  RILL_CO_TRY_VOID(co_await seg.index_file.create(engine_, files_, seg.index_path(), io::open_create, io::open_create));
  if (has_meta) {
    RILL_CO_TRY_VOID(co_await seg.meta_file.create(engine_, files_, seg.meta_path(), 0, 0));
  }
  co_return expected<void>{};
}

task<expected<void>> partition_log::recover_segment_fast(segment& seg, bool& ok) {
  ok = false;
  RILL_ASSERT(seg.log_file.attached());
  RILL_ASSERT(!seg.sealed);
  RILL_CO_TRY(log, co_await seg.log_file.pin(engine_));
  RILL_CO_TRY(size, co_await size_of_file(engine_, log.fd(), seg.log_path()));
  const std::uint64_t index_bytes_max = (size / batch_format::header_bytes + 2) * segment_index_format::entry_bytes;
  auto index_bytes = co_await read_whole_file(engine_, seg.index_path(), index_bytes_max);
  if (!index_bytes || !index_bytes->has_value()) {
    reporter_.corruption(seg.index_path(), 0, index_bytes ? "missing" : index_bytes.error().message(),
                         "rebuilt from a full scan of the segment");
    co_return expected<void>{};
  }
  auto index = segment_index::decode_sealed(**index_bytes, size, limits::index_interval_bytes);
  if (!index) {
    reporter_.corruption(seg.index_path(), 0, index.error().message(), "rebuilt from a full scan of the segment");
    co_return expected<void>{};
  }
  if (index->size() == 0) {
    if (size != 0) {
      reporter_.corruption(seg.index_path(), 0, "empty index for a non-empty segment", "rebuilt from a full scan");
      co_return expected<void>{};
    }
    seg.size = 0;
    seg.file_size = 0;
    ok = true;
    co_return expected<void>{};
  }
  // Verify: the first batch, then everything from the last index entry to the end of the file.
  auto verify = [&](std::uint64_t from, offset_t expected_base, bool to_end, offset_t& next, timestamp_ms_t& max_ts,
                    std::string& problem) -> task<expected<std::uint64_t>> {
    std::uint64_t pos = from;
    std::array<std::byte, batch_format::length_prefix_bytes> prefix{};
    do {
      RILL_CO_TRY(got, co_await read_at(engine_, log.fd(), pos, prefix, seg.log_path()));
      if (got < prefix.size()) {
        problem = fmt::format("truncated batch at byte {}", pos);
        co_return pos;
      }
      auto bsize = batch_view::size_from_prefix(prefix, stored_limits_.batch_bytes_max);
      if (!bsize || pos + *bsize > size) {
        problem = fmt::format("bad batch length at byte {}", pos);
        co_return pos;
      }
      pooled_buffer buf = pool_.acquire(*bsize);
      RILL_CO_TRY(all,
                  co_await read_at(engine_, log.fd(), pos, std::span<std::byte>(buf.data(), *bsize), seg.log_path()));
      auto v = batch_view::validate(std::span<const std::byte>(buf.data(), all), stored_limits_);
      if (!v) {
        problem = fmt::format("batch at byte {}: {}", pos, v.error().message());
        co_return pos;
      }
      if (v->base_offset() != expected_base) {
        problem = fmt::format("batch at byte {} has base offset {}, expected {}", pos, v->base_offset().value(),
                              expected_base.value());
        co_return pos;
      }
      max_ts = std::max(max_ts, v->max_timestamp());
      next = v->next_offset();
      expected_base = next;
      pos += *bsize;
    } while (to_end && pos < size);
    co_return pos;
  };
  std::string problem;
  offset_t next = seg.base_offset;
  timestamp_ms_t max_ts = index->entries().back().max_timestamp;
  RILL_CO_TRY(first_end, co_await verify(0, seg.base_offset, false, next, max_ts, problem));
  if (problem.empty()) {
    (void)first_end;
    const auto& last = index->entries().back();
    RILL_CO_TRY(end,
                co_await verify(last.position, seg.base_offset + last.relative_offset, true, next, max_ts, problem));
    if (problem.empty() && end != size) {
      problem = fmt::format("last batch ends at byte {}, file has {}", end, size);
    }
  }
  if (!problem.empty()) {
    reporter_.corruption(seg.log_path(), 0, problem, "scanned in full, index rebuilt");
    co_return expected<void>{};
  }
  seg.index = std::move(*index);
  seg.size = size;
  seg.synced_size = size;  // sealed below the frontier: synced when it was sealed
  seg.file_size = size;
  seg.next_offset = next;
  seg.max_timestamp = max_ts;
  // What the fast path establishes: the verified batches end at the file's end, after the indexed ones.
  RILL_ASSERT(seg.next_offset > seg.base_offset);
  RILL_ASSERT(seg.index.entries().back().position < seg.size);
  RILL_ASSERT(seg.base_offset + seg.index.entries().back().relative_offset < seg.next_offset);
  ok = true;
  co_return expected<void>{};
}

task<expected<bool>> partition_log::scan_segment(segment& seg, bool is_last, offset_t committed_hint) {
  // Returns true when the segment ended cleanly (or its tail was cut), false when its rest was skipped (@H).
  RILL_ASSERT(seg.log_file.attached());
  RILL_ASSERT(!seg.sealed);
  RILL_ASSERT(committed_hint.value() >= 0);
  RILL_CO_TRY(log, co_await seg.log_file.pin(engine_));
  // A scanned segment's batches are trusted as found: they must be what the disk holds (settle_file: a crashed
  // process's unsynced writes made durable, the pages of a failed sync dropped), before its size is taken.
  RILL_CO_TRY_VOID(co_await settle_file(engine_, log.fd(), seg.log_path()));
  RILL_CO_TRY(file_size, co_await size_of_file(engine_, log.fd(), seg.log_path()));
  const offset_t stop_at = recovery_cut();
  seg.index.clear();
  seg.batches = 0;
  timestamp_ms_t max_ts{-1};
  offset_t expected_base = seg.base_offset;
  std::uint64_t pos = 0;
  std::string problem;
  bool truncation = false;
  pooled_buffer buf = pool_.acquire(std::max<std::uint64_t>(options_.config.read_window_bytes, 1024 * 1024));
  while (pos < file_size && problem.empty() && !truncation) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.capacity(), file_size - pos);
    RILL_CO_TRY(got, co_await read_at(engine_, log.fd(), pos, std::span<std::byte>(buf.data(), n), seg.log_path()));
    std::uint64_t q = 0;
    while (q + batch_format::length_prefix_bytes <= got) {
      auto size = batch_view::size_from_prefix(std::span<const std::byte>(buf.data() + q, got - q),
                                               stored_limits_.batch_bytes_max);
      if (!size) {
        problem = size.error().detail();
        break;
      }
      if (q + *size > got) {
        if (pos + q + *size > file_size) {
          problem = fmt::format("a batch of {} bytes runs past the end of the file", *size);
        } else if (q == 0) {
          buf = pool_.acquire(*size);  // larger than the window: re-read it whole
        }
        break;
      }
      auto v = batch_view::validate(std::span<const std::byte>(buf.data() + q, *size), stored_limits_);
      if (!v) {
        problem = v.error().message();
        break;
      }
      if (v->base_offset() != expected_base) {
        problem = fmt::format("batch with base offset {} where {} was expected", v->base_offset().value(),
                              expected_base.value());
        break;
      }
      if (stop_at.value() >= 0 && v->base_offset() >= stop_at) {
        truncation = true;  // completing an interrupted truncate_after
        break;
      }
      seg.index.on_batch(static_cast<std::uint32_t>(v->base_offset() - seg.base_offset),
                         static_cast<std::uint32_t>(pos + q), static_cast<std::uint32_t>(*size), v->max_timestamp());
      max_ts = std::max(max_ts, v->max_timestamp());
      expected_base = v->next_offset();
      ++seg.batches;
      q += *size;
    }
    if (q == 0 && problem.empty() && !truncation && got < batch_format::length_prefix_bytes) {
      problem = fmt::format("{} trailing bytes, shorter than a batch header", got);
    }
    pos += q;
  }
  // The scan stops at the first batch that does not count: what it accepted lies within the file, and the next
  // offset follows the last valid batch (the segment's base when none was).
  RILL_ASSERT(pos <= file_size, "scan ended at byte {} of {}", pos, file_size);
  RILL_ASSERT(expected_base >= seg.base_offset);
  RILL_ASSERT(pos > 0 || expected_base == seg.base_offset);
  RILL_ASSERT(pos == 0 || !seg.index.entries().empty());
  seg.size = pos;
  seg.file_size = file_size;
  seg.next_offset = expected_base;
  seg.max_timestamp = max_ts;
  if (pos >= file_size) {
    // What a scan accepts becomes visible: it must be on disk first (the previous process may have died with it
    // still in the page cache, written but never synced).
    RILL_CO_TRY_VOID(co_await sync_file(seg.log_file));
    seg.synced_size = pos;
    co_return true;
  }
  // What follows the last valid batch: zeros (preallocation), a torn write, or corruption.
  bool zeros = true;
  for (std::uint64_t at = pos; at < file_size && zeros;) {
    const std::uint64_t n = std::min<std::uint64_t>(buf.capacity(), file_size - at);
    RILL_CO_TRY(got, co_await read_at(engine_, log.fd(), at, std::span<std::byte>(buf.data(), n), seg.log_path()));
    zeros = all_zero(std::span<const std::byte>(buf.data(), got));
    at += std::max<std::uint64_t>(got, 1);
  }
  if (!is_last && !zeros && !truncation) {
    RILL_CO_TRY_VOID(co_await sync_file(seg.log_file));
    seg.synced_size = pos;
    reporter_.corruption(seg.log_path(), pos, problem,
                         fmt::format("skipped the rest of this segment ({} bytes); offsets continue at the next "
                                     "segment",
                                     file_size - pos));
    co_return false;
  }
  if (!zeros && !truncation) {
    if (expected_base < committed_hint) {
      reporter_.corruption(seg.log_path(), pos, problem,
                           fmt::format("cut {} bytes; committed offsets from {} up to {} are lost", file_size - pos,
                                       expected_base.value(), committed_hint.value()));
    } else {
      reporter_.notice(fmt::format("{}: cut a torn tail of {} bytes at byte {} ({})", seg.log_path(), file_size - pos,
                                   pos, problem));
    }
  }
  RILL_CO_TRY_VOID(co_await truncate_cached(seg.log_file, pos));
  RILL_CO_TRY_VOID(co_await sync_file(seg.log_file));
  seg.file_size = pos;
  seg.synced_size = pos;
  co_return true;
}

task<expected<void>> partition_log::rebuild_index_file(segment& seg) {
  RILL_ASSERT(seg.index_file.attached());
  RILL_ASSERT(seg.synced_size == seg.size, "an index is sealed only over synced batches");
  const auto bytes = seg.index.encode_sealed();
  RILL_CO_TRY_VOID(co_await write_cached(seg.index_file, bytes));
  RILL_CO_TRY_VOID(co_await truncate_cached(seg.index_file, bytes.size()));
  co_return co_await sync_file(seg.index_file);
}

task<expected<void>> partition_log::load_metas(segment& seg, bool settle) {
  RILL_ASSERT(seg.metas.empty());
  RILL_ASSERT(seg.base_offset <= seg.next_offset);
  if (!seg.meta_file.attached()) {
    co_return expected<void>{};
  }
  const std::uint64_t bytes_max = (seg.size / batch_format::header_bytes + 1) * meta_entry_format::entry_bytes;
  RILL_CO_TRY(meta, co_await seg.meta_file.pin(engine_));
  if (settle) {
    RILL_CO_TRY_VOID(co_await settle_file(engine_, meta.fd(), seg.meta_path()));
  }
  RILL_CO_TRY(size, co_await size_of_file(engine_, meta.fd(), seg.meta_path()));
  const std::uint64_t n = std::min(size, bytes_max) / meta_entry_format::entry_bytes;
  std::vector<std::byte> bytes(n * meta_entry_format::entry_bytes);
  RILL_CO_TRY(got, co_await read_at(engine_, meta.fd(), 0, bytes, seg.meta_path()));
  seg.metas.clear();
  for (std::uint64_t i = 0; i < got / meta_entry_format::entry_bytes; ++i) {
    const auto m = decode_meta_entry(std::span<const std::byte, meta_entry_format::entry_bytes>(
        bytes.data() + i * meta_entry_format::entry_bytes, meta_entry_format::entry_bytes));
    if (!m) {
      break;  // a torn or damaged entry
    }
    const offset_t base = m->base_offset;
    const bool in_range =
        base >= seg.base_offset && base < seg.next_offset && (seg.metas.empty() || base > seg.metas.back().base_offset);
    if (!in_range) {
      break;
    }
    seg.metas.push_back(*m);
  }
  const std::uint64_t keep = seg.metas.size() * meta_entry_format::entry_bytes;
  RILL_ASSERT(keep <= got);
  RILL_ASSERT(keep <= size);
  if (keep != size) {
    reporter_.notice(fmt::format("{}: kept {} metadata entries, cut {} bytes after them", seg.meta_path(),
                                 seg.metas.size(), size - keep));
    RILL_CO_TRY_VOID(co_await truncate_cached(seg.meta_file, keep));
    RILL_CO_TRY_VOID(co_await sync_file(seg.meta_file));
  }
  seg.metas_written = seg.metas.size();
  co_return expected<void>{};
}

task<expected<void>> partition_log::recover() {
  RILL_ASSERT(segments_.empty());
  RILL_ASSERT(log_end_.value() == 0);
  RILL_ASSERT(!closed_);
  if (options_.create) {
    RILL_CO_TRY_VOID(co_await make_dirs(engine_, dir_));
  }
  RILL_CO_TRY(names, co_await list_dir(engine_, dir_));
  // The files found are trusted below: their directory entries must be on disk (file_ops.h, settle_dir).
  RILL_CO_TRY_VOID(co_await settle_dir(engine_, dir_));
  bool dir_changed = false;
  std::map<offset_t, found_files> found;
  for (const auto& name : names) {
    if (is_temp_name(name)) {
      RILL_CO_TRY_VOID(co_await unlink_file(engine_, join_path(dir_, name), true));
      dir_changed = true;
      continue;
    }
    if (auto parsed = parse_segment_file_name(name)) {
      auto& f = found[parsed->first];
      if (parsed->second == "log") {
        f.log = true;
      } else if (parsed->second == "index") {
        f.index = true;
      } else if (parsed->second == "meta") {
        f.meta = true;
      } else {
        reporter_.notice(dir_ + ": ignoring unknown file " + name);
      }
      continue;
    }
    const bool owners =
        std::find(options_.owner_entries.begin(), options_.owner_entries.end(), name) != options_.owner_entries.end();
    if (!owners && name != superblock_format::name_a && name != superblock_format::name_b &&
        name != epoch_history::file_name) {
      reporter_.notice(dir_ + ": ignoring unknown file " + name);
    }
  }
  // Index or metadata files whose log is gone belong to a segment whose deletion was interrupted.
  for (auto it = found.begin(); it != found.end();) {
    if (!it->second.log) {
      const std::string base = join_path(dir_, segment_name(it->first));
      RILL_CO_TRY_VOID(co_await unlink_file(engine_, base + ".index", true));
      RILL_CO_TRY_VOID(co_await unlink_file(engine_, base + ".meta", true));
      dir_changed = true;
      it = found.erase(it);
    } else {
      ++it;
    }
  }

  RILL_CO_TRY(sb, co_await superblock_store::open(engine_, files_, dir_, options_.create));
  superblock_ = std::move(sb.store);
  if (!sb.found && found.empty() && !options_.create) {
    co_return make_unexpected(errc::not_found, "no partition in " + dir_);
  }
  if (sb.one_damaged) {
    reporter_.corruption(join_path(dir_, "superblock"), 0, "one of the two copies is missing or invalid",
                         "using the other; the next write replaces the bad copy");
  }
  if (!sb.found && !found.empty()) {
    reporter_.corruption(join_path(dir_, "superblock"), 0, "no valid copy",
                         "recovered from the segments alone (committed restarts at the log end)");
  }
  if (!sb.found && found.empty()) {
    // A fresh partition: both superblock copies exist and are valid before any segment does, so a crash during
    // creation never leaves segments without a superblock.
    RILL_CO_TRY_VOID(co_await superblock_.initialize(superblock_state{}));
    sb.found = true;
  }
  const superblock_state state = superblock_.current();
  log_start_ = sb.found ? state.log_start : offset_t(0);
  const offset_t truncate_from = sb.found ? recovery_cut() : options_.trusted_end;

  // Epoch history.
  auto epoch_bytes = co_await read_whole_file(engine_, join_path(dir_, epoch_history::file_name), 1024 * 1024);
  if (!epoch_bytes) {
    reporter_.corruption(join_path(dir_, epoch_history::file_name), 0, epoch_bytes.error().message(),
                         "ignored: the history restarts empty");
  } else if (epoch_bytes->has_value()) {
    auto decoded = epoch_history::decode(**epoch_bytes);
    if (decoded) {
      epochs_ = std::move(*decoded);
    } else {
      reporter_.corruption(join_path(dir_, epoch_history::file_name), 0, decoded.error().message(),
                           "ignored: the history restarts empty");
    }
  }

  // @A and @B: leftovers of interrupted deletions and truncations.
  std::vector<offset_t> bases;
  for (const auto& [base, files] : found) {
    bases.push_back(base);
  }
  std::vector<offset_t> kept;
  for (std::size_t i = 0; i < bases.size(); ++i) {
    const bool below_start = i + 1 < bases.size() ? bases[i + 1] <= log_start_ : sb.found && bases[i] < log_start_;
    const bool truncated =
        truncate_from.value() >= 0 && (bases[i] > truncate_from || (bases[i] == truncate_from && !kept.empty()));
    if (below_start || truncated) {
      const std::string base = join_path(dir_, segment_name(bases[i]));
      for (const char* ext : {".log", ".index", ".meta"}) {
        RILL_CO_TRY_VOID(co_await unlink_file(engine_, base + ext, true));
      }
      reporter_.notice(fmt::format("{}: removed segment {} ({})", dir_, bases[i].value(),
                                   below_start ? "below the log start: an interrupted retention delete or restart"
                                               : "after an interrupted truncation"));
      dir_changed = true;
      continue;
    }
    kept.push_back(bases[i]);
  }
  if (dir_changed) {
    RILL_CO_TRY_VOID(co_await sync_dir(engine_, dir_));
  }

  // @C .. @H
  offset_t expected_next{-1};
  for (std::size_t i = 0; i < kept.size(); ++i) {
    auto seg = std::make_shared<segment>(dir_, kept[i], limits::index_interval_bytes);
    segments_.push_back(seg);  // from here close() owns its descriptors, even if recovery fails below
    RILL_CO_TRY_VOID(co_await open_segment_files(*seg, found[kept[i]].meta));
    const bool last = i + 1 == kept.size();
    bool trusted = false;
    if (sb.found && seg->base_offset < state.recovery_frontier && !last && !options_.scan_all_segments) {
      RILL_CO_TRY_VOID(co_await recover_segment_fast(*seg, trusted));
    }
    if (!trusted) {
      RILL_CO_TRY(clean, co_await scan_segment(*seg, last, sb.found ? state.committed : offset_t(0)));
      (void)clean;
      if (!last) {
        RILL_CO_TRY_VOID(co_await rebuild_index_file(*seg));
      }
    }
    if (expected_next.value() >= 0 && seg->base_offset != expected_next) {
      if (seg->base_offset < expected_next) {
        co_return make_unexpected(errc::corrupt_data,
                                  fmt::format("{}: segment {} overlaps the previous one, which ends at {}; refusing "
                                              "to guess which copy is right",
                                              dir_, seg->base_offset.value(), expected_next.value()));
      }
      reporter_.corruption(
          seg->log_path(), 0,
          fmt::format("offsets {} to {} are missing", expected_next.value(), seg->base_offset.value() - 1),
          "reads skip the gap");
    }
    // What recovery established for this segment: its batches lie in the file and are on disk.
    RILL_ASSERT(seg->size <= seg->file_size);
    RILL_ASSERT(seg->synced_size == seg->size);
    RILL_ASSERT(seg->next_offset >= seg->base_offset);
    RILL_ASSERT(seg->base_offset >= expected_next, "segment {} overlaps the one before", seg->base_offset.value());
    expected_next = seg->next_offset;
    // A sealed segment's .meta was synced before the seal; one that was scanned may hold what a crash left unsynced.
    RILL_CO_TRY_VOID(co_await load_metas(*seg, !trusted));
    if (!last) {
      seg->sealed = true;
      RILL_CO_TRY_VOID(co_await seg->index_file.close(engine_));
      RILL_CO_TRY_VOID(co_await seg->meta_file.close(engine_));
    }
  }

  const offset_t floor_next = std::max(log_start_, sb.found ? state.committed : offset_t(0));
  if (segments_.empty()) {
    RILL_CO_TRY(seg, co_await create_segment(floor_next));
    segments_.push_back(seg);
  }
  std::shared_ptr<segment> active = segments_.back();
  // The active segment's index lives in memory (rebuilt by the scan above); its file stays empty until the seal.
  // Not synced, and not marked unsynced: recovery never trusts the last segment's index file (@E, @F), so losing
  // this cut to a crash or to a close by the cache loses nothing.
  RILL_CO_TRY_VOID(co_await truncate_cached(active->index_file, 0, false));
  if (!active->meta_file.attached() && !active->metas.empty()) {
    RILL_CO_TRY_VOID(
        co_await active->meta_file.create(engine_, files_, active->meta_path(), io::open_create, io::open_create));
  }
  log_end_ = active->next_offset;
  if (log_end_ < floor_next) {
    reporter_.corruption(
        active->log_path(), active->size,
        fmt::format("the log ends at offset {} but offsets up to {} were committed or retained", log_end_.value(),
                    floor_next.value()),
        fmt::format("continuing at offset {} in a new segment, so no offset is reused", floor_next.value()));
    RILL_CO_TRY_VOID(co_await seal(*active));
    RILL_CO_TRY(seg, co_await create_segment(floor_next));
    segments_.push_back(seg);
    active = seg;
    log_end_ = floor_next;
  }
  // The next offset follows the last valid batch, and never reuses one that was committed or retained.
  RILL_ASSERT(log_end_ == active->next_offset);
  RILL_ASSERT(log_end_ >= floor_next);
  RILL_ASSERT(!active->sealed);
  if (log_start_ < segments_.front()->base_offset) {
    log_start_ = segments_.front()->base_offset;
  }
  synced_end_ = log_end_;
  committed_ = options_.auto_commit ? log_end_ : std::clamp(state.committed, log_start_, log_end_);
  for (const auto& s : segments_) {
    last_timestamp_ = std::max(last_timestamp_, s->max_timestamp);
  }
  {
    // Epochs that start past the end (their batches were cut off) go; one that starts exactly at the end stays: a
    // set_leader_epoch() with nothing appended since is as durable as its return said.
    epoch_history trimmed = epochs_;
    trimmed.truncate_after(log_end_);
    if (trimmed.entries() != epochs_.entries()) {
      RILL_CO_TRY_VOID(co_await write_file_atomic(engine_, dir_, epoch_history::file_name, trimmed.encode()));
      epochs_ = std::move(trimmed);
    }
  }
  epoch_ = epochs_.latest() ? epochs_.latest()->epoch : epoch_t(0);

  superblock_state next = superblock_.current();
  next.committed = committed_;
  next.log_start = log_start_;
  next.recovery_frontier = active->base_offset;
  next.truncate_from = offset_t(-1);
  if (sb.found) {
    RILL_CO_TRY_VOID(co_await superblock_.write(next));
  } else {
    RILL_CO_TRY_VOID(co_await superblock_.initialize(next));  // both copies were damaged: rewrite both
  }
  check_all();
  co_return expected<void>{};
}

}  // namespace rill::storage
