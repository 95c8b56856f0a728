// Reads: whole batches by offset, timestamp, first or last, through log_cursor.
//
// Invariants
// - A read never returns part of a batch, and never a batch at or beyond the visible bound (committed, or log_end
//   for replication reads).
// - A read returns at least one batch when one is visible at its position, even if it exceeds max_bytes.
// - While a cursor is inside a segment it holds a pin (segment::readers), so retention deletes the files only after
//   it has moved on; the bytes it reads are the ones the segment had when it was removed.
// - A read never skips offsets retention removed while it ran: leaving a pinned segment for a position below the
//   log start ends the read there (offset_out_of_range when it returned nothing).
// - A read holds the segment's descriptor (a file_pin) only while its positional read is in flight; between reads
//   the shard's file_cache may close it, and the next read reopens it by path. A segment that truncation dropped is
//   never reopened (its path may name a new file): a descriptor still open stays open for the readers inside it.
#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include "base/endian.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/partition_log.h"

namespace rill::storage {

std::vector<batch_view> read_result::batch_views() const {
  std::vector<batch_view> out;
  out.reserve(batches);
  const auto all = bytes ? bytes.span() : std::span<const std::byte>{};
  std::size_t pos = 0;
  while (pos < all.size()) {
    const auto size = batch_view::size_from_prefix(all.subspan(pos), UINT32_MAX);
    RILL_ASSERT(size.has_value(), "a read result holds whole batches");
    RILL_ASSERT(*size <= all.size() - pos, "a read result holds whole batches");
    out.push_back(batch_view::trusted(all.subspan(pos, *size)));
    pos += *size;
  }
  return out;
}

std::shared_ptr<segment> partition_log::segment_for(offset_t offset) const {
  if (segments_.empty() || offset < segments_.front()->base_offset) {
    return nullptr;
  }
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](offset_t o, const std::shared_ptr<segment>& s) { return o < s->base_offset; });
  return *(it - 1);
}

void partition_log::unpin(segment& seg) noexcept {
  RILL_ASSERT(seg.readers > 0);
  --seg.readers;
  if (seg.readers == 0 && seg.deleting) {
    kick_deleter();
  }
}

task<expected<std::uint64_t>> partition_log::position_for(segment& seg, offset_t offset) {
  // The floor index entry; the caller scans forward from it (at most one index interval plus one batch).
  const auto rel = offset - seg.base_offset;
  RILL_ASSERT(rel >= 0);
  RILL_ASSERT(seg.log_file.attached());
  const auto entry = seg.index.floor(static_cast<std::uint32_t>(std::min<std::int64_t>(rel, UINT32_MAX)));
  co_return entry ? std::uint64_t{entry->position} : std::uint64_t{0};
}

task<expected<std::optional<offset_t>>> partition_log::offset_for_timestamp(timestamp_ms_t ts, offset_t bound) {
  // The first segment whose newest record is at or after ts; within it, the first such batch below `bound`.
  // Iterates a copy of the segment list: the writer may roll or truncate while this coroutine waits for a read.
  RILL_ASSERT(bound.value() >= 0);
  const std::vector<std::shared_ptr<segment>> snapshot = segments_;
  for (const auto& s : snapshot) {
    if (s->base_offset >= bound) {
      break;
    }
    if (s->max_timestamp < ts || s->size == 0) {
      continue;
    }
    pin(*s);
    const auto entry = s->index.scan_start_for_timestamp(ts);
    std::uint64_t pos = entry ? entry->position : 0;
    std::array<std::byte, batch_format::header_bytes> head{};
    std::optional<offset_t> found;
    bool past_bound = false;
    expected<void> failed;
    auto file = co_await s->log_file.pin(engine_);  // the descriptor, reopened if the cache had closed it
    if (!file) {
      failed = unexpected(file.error());
    }
    while (file && pos < s->size) {
      auto got = co_await read_at(engine_, file->fd(), pos, head, s->log_path());
      if (!got || *got < head.size()) {
        failed = got ? expected<void>(make_unexpected(
                           errc::corrupt_data, fmt::format("{}: short batch header at byte {}", s->log_path(), pos)))
                     : expected<void>(unexpected(std::move(got).error()));
        break;
      }
      const offset_t base(load_be<std::int64_t>(head.data() + batch_format::base_offset_at));
      if (base >= bound) {
        past_bound = true;
        break;
      }
      if (timestamp_ms_t(load_be<std::int64_t>(head.data() + batch_format::max_timestamp_at)) >= ts) {
        found = base;
        break;
      }
      auto size = batch_view::size_from_prefix(head, stored_limits_.batch_bytes_max);
      if (!size) {
        failed = unexpected(rill::error(make_error_code(errc::corrupt_data),
                                        fmt::format("{} at byte {}: {}", s->log_path(), pos, size.error().detail())));
        break;
      }
      pos += *size;
    }
    if (file) {
      file->release();  // the descriptor before the segment
    }
    unpin(*s);
    if (!failed) {
      co_return unexpected(std::move(failed).error());
    }
    if (found || past_bound) {
      co_return found;
    }
  }
  co_return std::optional<offset_t>{};
}

task<expected<offset_t>> partition_log::resolve_start(const read_request& r) {
  const offset_t bound = r.uncommitted ? log_end_ : committed_;
  RILL_ASSERT(bound >= log_start_);
  switch (r.start) {
    case read_start::offset:
      co_return r.offset;
    case read_start::first:
      co_return log_start_;
    case read_start::last:
      co_return bound > log_start_ ? bound - 1 : log_start_;
    case read_start::timestamp: {
      RILL_CO_TRY(found, co_await offset_for_timestamp(r.timestamp, bound));
      co_return found ? std::max(*found, log_start_) : bound;
    }
  }
  co_return r.offset;
}

task<expected<read_result>> partition_log::read(read_request request) {
  if (closed_) {
    co_return make_unexpected(errc::closed, "partition " + dir_ + " is closed");
  }
  RILL_CO_TRY(start, co_await resolve_start(request));
  log_cursor cursor(*this, start, request.uncommitted);
  RILL_CO_TRY(result, co_await cursor.next(request.max_records, request.max_bytes, request.verify_crc));
  result.requested = start;
  co_return result;
}

log_cursor::log_cursor(log_cursor&& o) noexcept
    : log_(o.log_),
      position_(o.position_),
      uncommitted_(o.uncommitted_),
      seg_(std::move(o.seg_)),
      file_pos_(o.file_pos_),
      truncations_seen_(o.truncations_seen_) {
  o.seg_.reset();
}

log_cursor::~log_cursor() {
  unpin();
}

void log_cursor::unpin() noexcept {
  if (seg_) {
    log_->unpin(*seg_);
    seg_.reset();
  }
  file_pos_.reset();
}

task<expected<read_result>> log_cursor::next(std::uint32_t max_records, std::uint64_t max_bytes, bool verify_crc) {
  RILL_ASSERT(log_ != nullptr, "next() on a moved-from cursor");
  partition_log& log = *log_;
  const offset_t started_at = position_;
  read_result out;
  out.log_start = log.log_start_;
  out.high_watermark = log.committed_;
  out.next_offset = position_;
  if (position_ < log.log_start_ && !(seg_ && position_ < seg_->next_offset)) {
    co_return make_unexpected(
        errc::offset_out_of_range,
        fmt::format("offset {} is below the log start {}", static_cast<std::uint64_t>(position_.value()),
                    static_cast<std::uint64_t>(log.log_start_.value())));
  }
  if (position_ > log.log_end_) {
    co_return make_unexpected(errc::offset_out_of_range, fmt::format("offset {} is beyond the log end {}",
                                                                     static_cast<std::uint64_t>(position_.value()),
                                                                     static_cast<std::uint64_t>(log.log_end_.value())));
  }
  if (truncations_seen_ != log.truncations_) {
    // A truncation may have rewritten the bytes after position_: find the position again from the index.
    unpin();
    truncations_seen_ = log.truncations_;
  }
  const offset_t bound = uncommitted_ ? log.log_end_ : log.committed_;
  const std::uint64_t window = log.options_.config.read_window_bytes;
  const batch_limits& limits = log.stored_limits_;
  std::uint64_t used = 0;  // bytes of accepted batches at the front of out.bytes
  std::uint64_t need = 0;  // a batch larger than one window must be read whole
  bool stop = false;
  while (!stop && position_ < bound) {
    // Stay in the pinned segment while it covers position_ (even after retention removed it); else move on.
    if (seg_ && (position_ >= seg_->next_offset || (file_pos_ && *file_pos_ > seg_->size))) {
      unpin();
    }
    if (!seg_) {
      std::shared_ptr<segment> s = log.segment_for(position_);
      if (!s || position_ >= s->next_offset) {
        if (position_ < log.log_start_) {
          // Retention removed the batches from here on while this read ran (the cursor held only the segment it
          // left): what was read is returned, and the next read finds the position below the log start. Skipping
          // to the next segment would hand the reader a gap as if it were the log.
          if (out.batches > 0) {
            break;
          }
          co_return make_unexpected(
              errc::offset_out_of_range,
              fmt::format("offset {} is below the log start {}", static_cast<std::uint64_t>(position_.value()),
                          static_cast<std::uint64_t>(log.log_start_.value())));
        }
        // Past this segment's batches (a corrupt tail skipped at recovery): continue at the next segment.
        auto it = std::find_if(log.segments_.begin(), log.segments_.end(),
                               [&](const auto& c) { return c->base_offset > position_; });
        if (it == log.segments_.end()) {
          break;
        }
        position_ = (*it)->base_offset;
        s = *it;
        if (position_ >= bound) {
          break;
        }
      }
      seg_ = s;
      log.pin(*seg_);
    }
    segment& seg = *seg_;
    if (!file_pos_) {
      RILL_CO_TRY(p, co_await log.position_for(seg, position_));
      file_pos_ = p;
    }
    const std::uint64_t pos = *file_pos_;
    if (pos >= seg.size) {
      if (seg_.get() == log.segments_.back().get()) {
        break;  // the end of the active segment
      }
      position_ = std::max(position_, seg.next_offset);
      unpin();
      continue;
    }
    // One positional read, appended after what is already accepted.
    std::uint64_t want = std::min<std::uint64_t>(seg.size - pos, std::max(window, need));
    if (used > 0) {
      const std::uint64_t budget = max_bytes > used ? max_bytes - used : 0;
      want = std::min(want, std::max<std::uint64_t>(budget, batch_format::header_bytes));
    }
    need = 0;
    if (!out.bytes || out.bytes.capacity() < used + want) {
      pooled_buffer bigger = log.pool_.acquire(used + want);
      if (used > 0) {
        std::memcpy(bigger.data(), out.bytes.data(), used);
      }
      out.bytes = std::move(bigger);
    }
    std::byte* chunk = out.bytes.data() + used;
    // The descriptor is held for this one read only: between reads (and between polls) the cache may close it.
    RILL_CO_TRY(file, co_await seg.log_file.pin(log.engine_));
    RILL_CO_TRY(got, co_await read_at(log.engine_, file.fd(), pos, std::span<std::byte>(chunk, want), seg.log_path()));
    file.release();
    if (got < batch_format::length_prefix_bytes) {
      co_return make_unexpected(errc::corrupt_data, fmt::format("{}: {} bytes at byte {}, the segment says {}",
                                                                seg.log_path(), got, pos, seg.size));
    }
    std::uint64_t q = 0;      // parse position in this chunk
    std::uint64_t write = 0;  // accepted bytes of this chunk, moved to chunk[0, write)
    while (q + batch_format::length_prefix_bytes <= got) {
      auto size = batch_view::size_from_prefix(std::span<const std::byte>(chunk + q, got - q), limits.batch_bytes_max);
      if (!size) {
        co_return make_unexpected(errc::corrupt_data,
                                  fmt::format("{} at byte {}: {}", seg.log_path(), pos + q, size.error().detail()));
      }
      if (q + *size > got) {
        if (pos + q + *size > seg.size) {
          co_return make_unexpected(errc::corrupt_data, fmt::format("{}: batch at byte {} of {} bytes runs past the "
                                                                    "segment end {}",
                                                                    seg.log_path(), pos + q, *size, seg.size));
        }
        if (used == 0 && write == 0) {
          need = *size;  // read it whole next turn
        } else if (out.batches > 0) {
          stop = true;  // return what we have; the rest next time
        }
        break;
      }
      const std::span<const std::byte> bytes(chunk + q, *size);
      batch_view view = batch_view::trusted(bytes);
      if (verify_crc) {
        auto checked = batch_view::validate(bytes, limits);
        if (!checked) {
          co_return make_unexpected(
              errc::corrupt_data, fmt::format("{} at byte {}: {}", seg.log_path(), pos + q, checked.error().message()));
        }
      }
      if (view.next_offset() <= position_) {
        q += *size;  // before the requested offset: skip (the forward scan from an index entry)
        continue;
      }
      if (view.base_offset() >= bound) {
        stop = true;
        break;
      }
      const auto records = static_cast<std::uint32_t>(std::max(view.records_count(), 0));
      if (out.batches > 0 && (used + write + *size > max_bytes || out.records + records > max_records)) {
        stop = true;
        break;
      }
      // Take what we need from the header before the batch moves (the view points at its old place).
      const offset_t base = view.base_offset();
      const offset_t next = view.next_offset();
      if (q != write) {
        std::memmove(chunk + write, chunk + q, *size);
      }
      if (out.batches == 0) {
        out.first_offset = base;
      }
      ++out.batches;
      out.records += records;
      write += *size;
      q += *size;
      position_ = next;
      if (used + write >= max_bytes || out.records >= max_records) {
        stop = true;
        break;
      }
    }
    used += write;
    file_pos_ = pos + q;
  }
  // A read moves forward only, and returns whole batches from where it was asked.
  RILL_ASSERT(position_ >= started_at);
  RILL_ASSERT(out.batches == 0 || out.first_offset.value() >= 0);
  RILL_ASSERT(out.batches > 0 || used == 0);
  if (out.bytes) {
    RILL_ASSERT(used <= out.bytes.capacity());
    out.bytes.set_size(used);
  }
  out.next_offset = position_;
  co_return out;
}

}  // namespace rill::storage
