// file_cache: see the header for the invariants; check() asserts them (O(1) part) after every change.
#include "storage/file_cache.h"

#include <utility>

#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::storage {

file_cache::file_cache(std::uint64_t files_max) : files_max_(files_max) {
  RILL_ASSERT(files_max > 0, "file_cache with a limit of 0 descriptors");
}

file_cache::~file_cache() {
  // Entries left here belong to owners that never closed, or to I/O that will never complete (a process going down
  // with coroutines suspended for good): their descriptors die with the process. Nothing is asserted about them, so
  // that a shard torn down at exit does not abort.
  RILL_ASSERT(lru_.size() <= held_);
}

file_cache_stats file_cache::stats() const noexcept {
  file_cache_stats s;
  s.files_max = files_max_;
  s.open = held_;
  s.open_max = held_max_;
  s.opens = opens_;
  s.evictions = evictions_;
  s.over_limit_opens = over_limit_opens_;
  s.files = entries_.size();
  return s;
}

void file_cache::check() const {
  RILL_ASSERT(held_max_ >= held_);
  RILL_ASSERT(lru_.size() <= held_, "{} evictable entries, {} descriptors held", lru_.size(), held_);
  RILL_ASSERT(closing_ <= held_, "{} closes in flight, {} descriptors held", closing_, held_);
}

file_cache::entry& file_cache::add(std::string path, std::uint32_t reopen_flags) {
  RILL_ASSERT(!path.empty());
  RILL_ASSERT((reopen_flags & (io::open_truncate | io::open_exclusive)) == 0,
              "{} would not reopen the same file (flags {:#x})", path, reopen_flags);
  entries_.emplace_back();
  entry& en = entries_.back();
  en.self = std::prev(entries_.end());
  en.path = std::move(path);
  en.reopen_flags = reopen_flags;
  en.opened.set();
  return en;
}

void file_cache::erase(entry& en) {
  RILL_ASSERT(en.pins == 0, "erasing pinned {}", en.path);
  RILL_ASSERT(en.fd < 0, "erasing {} with descriptor {} open", en.path, en.fd);
  RILL_ASSERT(!en.opening);
  if (en.in_lru) {
    lru_.erase(en.lru_at);
    en.in_lru = false;
  }
  entries_.erase(en.self);
}

bool file_cache::evictable(const entry& en) noexcept {
  if (en.fd < 0 || en.pins > 0 || en.opening) {
    return false;
  }
  // An orphan has nobody left to sync or read it: close it whatever it holds.
  return en.orphan || (!en.unsynced && !en.reopen_forbidden);
}

void file_cache::refresh(entry& en) {
  if (en.in_lru) {
    lru_.erase(en.lru_at);
    en.in_lru = false;
  }
  if (evictable(en)) {
    // Orphans go first in line; everything else to the most recently used end.
    en.lru_at = en.orphan ? lru_.insert(lru_.begin(), &en) : lru_.insert(lru_.end(), &en);
    en.in_lru = true;
  }
}

void file_cache::unpin(entry& en) noexcept {
  RILL_ASSERT(en.pins > 0, "unpinning {} with no pin", en.path);
  --en.pins;
  refresh(en);
  maybe_trim();
}

task<void> file_cache::evict_one(io::engine& e) {
  RILL_ASSERT(!lru_.empty());
  entry* victim = lru_.front();
  RILL_ASSERT(evictable(*victim), "{} in the LRU but not evictable", victim->path);
  lru_.pop_front();
  victim->in_lru = false;
  const int fd = std::exchange(victim->fd, -1);
  std::string path = victim->path;
  ++evictions_;
  ++closing_;
  if (victim->orphan) {
    erase(*victim);
  }
  // held_ still counts the descriptor until the close has run: the kernel holds it until then.
  auto closed = co_await close_file(e, fd, std::move(path));
  (void)closed;  // a clean, unpinned file: a failing close loses nothing (its data was synced or never written)
  RILL_ASSERT(held_ > 0);
  RILL_ASSERT(closing_ > 0);
  --held_;
  --closing_;
}

task<void> file_cache::make_room(io::engine& e) {
  while (held_ >= files_max_ && !lru_.empty()) {
    co_await evict_one(e);
  }
  if (held_ >= files_max_) {
    ++over_limit_opens_;  // every descriptor is pinned, unsynced or retired: go over rather than wait
  }
}

void file_cache::maybe_trim() {
  if (reclaim_ == nullptr || trimming_ || lru_.empty() || held_ - closing_ <= files_max_) {
    return;
  }
  trimming_ = true;
  spawn(trim(), [] {});
}

task<void> file_cache::trim() {
  RILL_ASSERT(trimming_);
  while (!lru_.empty() && held_ - closing_ > files_max_) {
    co_await evict_one(*reclaim_);
  }
  trimming_ = false;
  check();
}

task<expected<void>> file_cache::open_entry(io::engine& e, entry& en, std::uint32_t flags) {
  RILL_ASSERT(en.fd < 0);
  RILL_ASSERT(!en.opening, "two opens of {} at once", en.path);
  en.opening = true;
  en.opened.reset();
  co_await make_room(e);
  ++held_;
  held_max_ = std::max(held_max_, held_);
  auto fd = co_await open_file(e, en.path, flags, 0600);
  en.opening = false;
  if (!fd) {
    --held_;
    en.opened.set();
    co_return unexpected(std::move(fd).error());
  }
  RILL_ASSERT(*fd >= 0);
  en.fd = *fd;
  ++opens_;
  check();
  en.opened.set();  // resumes pins waiting for this open (they find fd set)
  co_return expected<void>{};
}

task<std::uint64_t> file_cache::evict_all(io::engine& e) {
  std::uint64_t closed = 0;
  while (!lru_.empty()) {
    co_await evict_one(e);
    ++closed;
  }
  check();
  co_return closed;
}

// cached_file

cached_file::cached_file(cached_file&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), entry_(std::exchange(o.entry_, nullptr)) {}

cached_file& cached_file::operator=(cached_file&& o) noexcept {
  if (this != &o) {
    RILL_ASSERT(entry_ == nullptr, "assigning over attached {}", entry_->path);
    cache_ = std::exchange(o.cache_, nullptr);
    entry_ = std::exchange(o.entry_, nullptr);
  }
  return *this;
}

cached_file::~cached_file() {
  if (entry_ == nullptr) {
    return;
  }
  RILL_ASSERT(entry_->pins == 0, "{} destroyed while pinned", entry_->path);
  RILL_ASSERT(!entry_->opening, "{} destroyed while being opened", entry_->path);
  if (entry_->fd < 0) {
    cache_->erase(*entry_);
    return;
  }
  entry_->orphan = true;  // the cache closes it when it next needs room (no engine to close it with here)
  cache_->refresh(*entry_);
  cache_->maybe_trim();
}

const std::string& cached_file::path() const noexcept {
  RILL_ASSERT(entry_ != nullptr, "path() of a detached cached_file");
  return entry_->path;
}

void cached_file::attach(file_cache& cache, std::string path, std::uint32_t reopen_flags) {
  RILL_ASSERT(entry_ == nullptr, "attaching {} over {}", path, entry_->path);
  cache_ = &cache;
  entry_ = &cache.add(std::move(path), reopen_flags);
}

task<expected<void>> cached_file::create(io::engine& e, file_cache& cache, std::string path, std::uint32_t first_flags,
                                         std::uint32_t reopen_flags) {
  attach(cache, std::move(path), reopen_flags);
  file_cache::entry& en = *entry_;
  auto opened = co_await cache.open_entry(e, en, first_flags);
  if (!opened) {
    cache.erase(en);
    cache_ = nullptr;
    entry_ = nullptr;
    co_return opened;
  }
  cache.refresh(en);
  co_return expected<void>{};
}

task<expected<file_pin>> cached_file::pin(io::engine& e) {
  RILL_ASSERT(entry_ != nullptr, "pin() of a detached cached_file");
  // Locals, not members: this object may be moved while the coroutine waits (it is not, today, but the entry is
  // what the pin is about).
  file_cache& cache = *cache_;
  file_cache::entry& en = *entry_;
  for (;;) {
    if (en.fd >= 0) {
      file_pin p(cache, en);
      co_return p;
    }
    if (en.reopen_forbidden) {
      co_return make_unexpected(errc::not_found, en.path + " was removed: not reopened");
    }
    if (en.opening) {
      co_await en.opened.wait();  // another pin is opening it; then look again
      continue;
    }
    RILL_CO_TRY_VOID(co_await cache.open_entry(e, en, en.reopen_flags));
  }
}

void cached_file::mark_unsynced() noexcept {
  RILL_ASSERT(entry_ != nullptr);
  RILL_ASSERT(entry_->fd >= 0, "mark_unsynced() of closed {}", entry_->path);
  RILL_ASSERT(entry_->pins > 0, "mark_unsynced() of {} without a pin", entry_->path);
  entry_->unsynced = true;
  ++entry_->writes_marked;
  cache_->refresh(*entry_);
}

std::uint64_t cached_file::writes_marked() const noexcept {
  RILL_ASSERT(entry_ != nullptr);
  return entry_->writes_marked;
}

void cached_file::mark_synced_if(std::uint64_t writes) noexcept {
  RILL_ASSERT(entry_ != nullptr);
  RILL_ASSERT(writes <= entry_->writes_marked);
  if (writes == entry_->writes_marked) {
    mark_synced();
  }
}

void cached_file::mark_synced() noexcept {
  RILL_ASSERT(entry_ != nullptr);
  entry_->unsynced = false;
  cache_->refresh(*entry_);
  cache_->maybe_trim();
}

void cached_file::forbid_reopen() noexcept {
  RILL_ASSERT(entry_ != nullptr);
  entry_->reopen_forbidden = true;
  cache_->refresh(*entry_);
}

task<expected<void>> cached_file::close(io::engine& e) {
  if (entry_ == nullptr) {
    co_return expected<void>{};
  }
  file_cache& cache = *std::exchange(cache_, nullptr);
  file_cache::entry& en = *std::exchange(entry_, nullptr);
  RILL_ASSERT(en.pins == 0, "closing {} while pinned", en.path);
  RILL_ASSERT(!en.opening, "closing {} while it is being opened", en.path);
  const int fd = std::exchange(en.fd, -1);
  std::string path = en.path;
  cache.erase(en);
  if (fd < 0) {
    co_return expected<void>{};
  }
  auto closed = co_await close_file(e, fd, std::move(path));
  RILL_ASSERT(cache.held_ > 0);
  --cache.held_;
  co_return closed;
}

// file_pin

file_pin::file_pin(file_cache& cache, file_cache::entry& en) noexcept : cache_(&cache), entry_(&en) {
  RILL_ASSERT(en.fd >= 0, "pinning closed {}", en.path);
  ++en.pins;
  cache.refresh(en);
}

file_pin::file_pin(file_pin&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), entry_(std::exchange(o.entry_, nullptr)) {}

file_pin& file_pin::operator=(file_pin&& o) noexcept {
  if (this != &o) {
    release();
    cache_ = std::exchange(o.cache_, nullptr);
    entry_ = std::exchange(o.entry_, nullptr);
  }
  return *this;
}

file_pin::~file_pin() {
  release();
}

void file_pin::release() noexcept {
  if (entry_ != nullptr) {
    cache_->unpin(*std::exchange(entry_, nullptr));
    cache_ = nullptr;
  }
}

int file_pin::fd() const noexcept {
  RILL_ASSERT(entry_ != nullptr, "fd() of an empty pin");
  RILL_ASSERT(entry_->fd >= 0, "a pinned file was closed: {}", entry_->path);
  return entry_->fd;
}

}  // namespace rill::storage
