// Deleting the files of segments removed by retention or truncation, in the background.
//
// Invariants
// - A segment's files are touched only after it left segments_ (deleting) and no reader is inside it.
// - Large files are shrunk in delete_step_bytes steps before the unlink: one big unlink stalls every other file's
//   fdatasync for ~100 ms on the development machines (references/machine-limits.md).
// - A crash at any step is finished by recovery (@A): the new log_start was persisted before any file changed.
#include <fmt/core.h>

#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/partition_log.h"

namespace rill::storage {

void partition_log::kick_deleter() {
  if (deleter_running_ || graveyard_.empty() || closing_) {
    return;
  }
  deleter_running_ = true;
  deleter_idle_.reset();
  spawn(deleter_loop(), [] {});
}

task<void> partition_log::deleter_loop() {
  bool unlinked_any = false;
  for (;;) {
    auto it = std::find_if(graveyard_.begin(), graveyard_.end(),
                           [](const std::shared_ptr<segment>& s) { return s->readers == 0; });
    if (it == graveyard_.end()) {
      break;
    }
    std::shared_ptr<segment> seg = *it;
    RILL_ASSERT(seg->deleting);
    graveyard_.erase(it);
    auto done = co_await delete_segment_files(*seg);
    if (!done) {
      reporter_.notice(fmt::format("{}: deleting segment {} failed ({}); recovery will finish it", dir_,
                                   seg->base_offset.value(), done.error().message()));
    }
    unlinked_any = true;
  }
  if (unlinked_any) {
    auto synced = co_await sync_dir(engine_, dir_);
    if (!synced) {
      reporter_.notice(dir_ + ": directory sync after deletions failed: " + synced.error().message());
    }
  }
  deleter_running_ = false;
  deleter_idle_.set();
  if (!graveyard_.empty() && std::any_of(graveyard_.begin(), graveyard_.end(),
                                         [](const std::shared_ptr<segment>& s) { return s->readers == 0; })) {
    kick_deleter();  // a reader left while we were finishing
  }
}

task<expected<void>> partition_log::delete_segment_files(segment& seg) {
  RILL_ASSERT(seg.deleting, "deleting the files of live segment {}", seg.base_offset.value());
  RILL_ASSERT(seg.readers == 0, "deleting the files of segment {} with a reader inside", seg.base_offset.value());
  const std::uint64_t step = options_.config.delete_step_bytes;
  RILL_ASSERT(step > 0);
  expected<void> result;
  // A truncated segment's files are unlinked already: shrink one only while its descriptor is still open (a closed
  // one is never reopened, its path may name a new file). A retention-removed one is reopened if the cache closed it.
  const bool shrink = seg.log_file.attached() && (seg.log_file.is_open() || !seg.files_unlinked);
  if (shrink && seg.file_size > step) {
    auto file = co_await seg.log_file.pin(engine_);
    std::uint64_t size = seg.file_size;
    while (file && size > step) {
      size -= step;
      auto t = co_await truncate_file(engine_, file->fd(), size, seg.log_path());
      if (!t) {
        result = std::move(t);
        break;
      }
    }
    if (!file) {
      result = unexpected(std::move(file).error());
    }
  }
  for (cached_file* f : {&seg.log_file, &seg.index_file, &seg.meta_file}) {
    (void)co_await f->close(engine_);  // the files go next: a close error loses nothing
  }
  if (!seg.files_unlinked) {
    for (const auto& path : {seg.log_path(), seg.index_path(), seg.meta_path()}) {
      auto u = co_await unlink_file(engine_, path, true);
      if (!u && result) {
        result = std::move(u);
      }
    }
  }
  co_return result;
}

}  // namespace rill::storage
