#pragma once
// file_cache: the open descriptors of one shard's storage files (segment .log/.index/.meta, superblock copies), kept
// under a limit, least recently used closed first, reopened on their next use (issue 13: a partition that is
// neither written nor read holds no descriptor, as Kafka's and Redpanda's open-file LRUs do).
//
// A cached_file names one file (its path, and the flags it is reopened with). Its owner (a segment, a superblock
// store) takes a file_pin around every operation on it: the pin opens the file if the cache had closed it, and
// while any pin is held the descriptor is not closed. The owner tells the cache when the file holds writes that an
// fdatasync must still cover (mark_unsynced) and when one has (mark_synced): such a file is never closed by the
// cache, so a writeback error always reaches the fdatasync of the descriptor that wrote (the partition's fencing
// rule, partition_log.h), never a close nobody checks.
//
// Invariants
// - held_ counts the descriptors the cache's entries hold, including those being opened or closed; the kernel never
//   has more of them open than held_.
// - held_ <= files_max_, except when every held descriptor is pinned, unsynced or retired: then an open goes over
//   the limit (over_limit_opens counts it) instead of waiting, because the holder may be the one waiting. Once such
//   descriptors become evictable again, the reclaim engine (if set) closes them down to the limit at once; without
//   one, the next opens do (a burst of opens, e.g. thousands of partitions recovering at once, must not leave the
//   shard over its limit until the next open).
// - The cache closes a descriptor only when its entry is evictable: open, no pin, no unsynced write, reopenable.
//   The LRU list holds exactly the evictable entries, least recently used first.
// - A file is reopened only by the path and flags it was registered with, and never after forbid_reopen() (its path
//   was unlinked and may name another file by now: a truncation dropped the segment).
// - An entry outlives its cached_file only while it still holds a descriptor (an owner that went away without
//   close()); such an orphan is the first to be closed.
//
// Concurrency: single-threaded, like io::engine. One cache per shard (or per log, when none is given), used only on
// the thread that drives the engines of the logs that share it. Closing an evicted descriptor goes through the
// engine of the coroutine that needed the room; that is safe because a descriptor is process-wide and no I/O is in
// flight on an evictable one.
//
// Lifetime: the cache outlives every cached_file attached to it and every file_pin (at exit, a shard may go with
// pins still held by coroutines that will never resume: the destructor tolerates that).
#include <cstdint>
#include <list>
#include <string>

#include "base/async.h"
#include "base/expected.h"
#include "base/task.h"
#include "storage/io/engine.h"

namespace rill::storage {

class cached_file;
class file_pin;

struct file_cache_stats {
  std::uint64_t files_max = 0;
  std::uint64_t open = 0;              // held_: descriptors held now
  std::uint64_t open_max = 0;          // the most held at once since the cache was made
  std::uint64_t opens = 0;             // descriptors opened (first opens and reopens)
  std::uint64_t evictions = 0;         // descriptors closed to make room
  std::uint64_t over_limit_opens = 0;  // opens past files_max (nothing was evictable)
  std::uint64_t files = 0;             // cached_files attached (open or not)
};

class file_cache {
 public:
  // A limit that never evicts (a log given no cache: the behaviour before issue 13).
  static constexpr std::uint64_t files_unlimited = UINT64_MAX;

  explicit file_cache(std::uint64_t files_max);
  file_cache(const file_cache&) = delete;
  file_cache& operator=(const file_cache&) = delete;
  ~file_cache();

  [[nodiscard]] file_cache_stats stats() const noexcept;
  [[nodiscard]] std::uint64_t files_max() const noexcept { return files_max_; }
  [[nodiscard]] std::uint64_t open_count() const noexcept { return held_; }

  // Closes every evictable descriptor (tests; a shard going idle). Returns how many it closed.
  task<std::uint64_t> evict_all(io::engine& e);
  // The engine that closes descriptors beyond the limit when nothing opens (the shard's own ring; the simulated
  // disk in tests). It must outlive the cache and be driven on the cache's thread; a close it has in flight when
  // the cache is destroyed must never complete (the shard is gone by then). Null: only opens make room.
  void set_reclaim_engine(io::engine* e) noexcept { reclaim_ = e; }

 private:
  friend class cached_file;
  friend class file_pin;
  struct entry {
    std::string path;
    std::uint32_t reopen_flags = 0;
    int fd = -1;
    std::uint32_t pins = 0;
    bool unsynced = false;
    std::uint64_t writes_marked = 0;
    bool reopen_forbidden = false;
    bool opening = false;
    bool orphan = false;  // its cached_file is gone
    async_event opened;   // set when no open is in progress
    bool in_lru = false;
    std::list<entry*>::iterator lru_at;
    std::list<entry>::iterator self;
  };

  entry& add(std::string path, std::uint32_t reopen_flags);
  void erase(entry& en);
  [[nodiscard]] static bool evictable(const entry& en) noexcept;
  // Puts `en` at the most recent end of the LRU if it is evictable, takes it out if not.
  void refresh(entry& en);
  void unpin(entry& en) noexcept;
  // Closes least recently used descriptors until one more fits under files_max_ (or nothing is evictable).
  task<void> make_room(io::engine& e);
  // Opens `en` with `flags`, within the limit. `en.fd` is set on success.
  task<expected<void>> open_entry(io::engine& e, entry& en, std::uint32_t flags);
  // Pops the least recently used evictable entry and closes its descriptor through `e` (held_ counts it until the
  // close has run).
  task<void> evict_one(io::engine& e);
  // Over the limit with something evictable: start trim() on the reclaim engine.
  void maybe_trim();
  task<void> trim();
  void check() const;

  std::uint64_t files_max_;
  std::uint64_t held_ = 0;
  std::uint64_t held_max_ = 0;
  std::uint64_t opens_ = 0;
  std::uint64_t evictions_ = 0;
  std::uint64_t over_limit_opens_ = 0;
  std::uint64_t closing_ = 0;  // evictions whose close has not run yet (counted in held_)
  io::engine* reclaim_ = nullptr;
  bool trimming_ = false;
  std::list<entry> entries_;
  std::list<entry*> lru_;  // evictable entries, least recently used first
};

// One file under a file_cache. Movable; not copyable. Detached (no file) when default-constructed or closed.
class cached_file {
 public:
  cached_file() = default;
  cached_file(cached_file&& o) noexcept;
  cached_file& operator=(cached_file&& o) noexcept;
  cached_file(const cached_file&) = delete;
  cached_file& operator=(const cached_file&) = delete;
  // Requires no pin held. A descriptor still open is left to the cache to close (the first one it evicts).
  ~cached_file();

  // Registers `path`, closed: the first pin() opens it with `reopen_flags` (io::open_flag bits; never open_truncate
  // or open_exclusive, which would not reopen the same file). Requires detached.
  void attach(file_cache& cache, std::string path, std::uint32_t reopen_flags);
  // Registers `path` and opens it now with `first_flags` (may create, truncate, be exclusive); later opens use
  // `reopen_flags`. On error the file stays detached. Requires detached.
  task<expected<void>> create(io::engine& e, file_cache& cache, std::string path, std::uint32_t first_flags,
                              std::uint32_t reopen_flags);
  // The descriptor, opened if the cache had closed it, held open until the pin goes. Errors: io_error from the
  // open; not_found when the file was retired (forbid_reopen) and is closed. Requires attached.
  task<expected<file_pin>> pin(io::engine& e);
  // A write that a later fdatasync must cover is about to be issued: until mark_synced the file is not evicted.
  // Requires a pin held.
  void mark_unsynced() noexcept;
  // An fdatasync covering every write so far succeeded (or what was unsynced is gone: cut and synced).
  void mark_synced() noexcept;
  // Writes marked so far (mark_unsynced calls): a sync that ran concurrently with writes marks the file synced only
  // if this did not change while it ran (mark_synced_if).
  [[nodiscard]] std::uint64_t writes_marked() const noexcept;
  // mark_synced() if no write was marked since writes_marked() returned `writes`.
  void mark_synced_if(std::uint64_t writes) noexcept;
  // The path was unlinked (or is about to be): the descriptor, if open, stays open until close(); if closed, it is
  // never reopened.
  void forbid_reopen() noexcept;
  // Closes the descriptor if open and detaches. Requires no pin held. The close error, if any, is returned; the file
  // is detached either way.
  task<expected<void>> close(io::engine& e);

  [[nodiscard]] bool attached() const noexcept { return entry_ != nullptr; }
  [[nodiscard]] bool is_open() const noexcept { return entry_ != nullptr && entry_->fd >= 0; }
  [[nodiscard]] bool unsynced() const noexcept { return entry_ != nullptr && entry_->unsynced; }
  [[nodiscard]] const std::string& path() const noexcept;

 private:
  file_cache* cache_ = nullptr;
  file_cache::entry* entry_ = nullptr;
};

// A held descriptor: while it lives, its file is not closed by the cache. Movable; the moved-from pin holds nothing.
class file_pin {
 public:
  file_pin() = default;
  file_pin(file_pin&& o) noexcept;
  file_pin& operator=(file_pin&& o) noexcept;
  file_pin(const file_pin&) = delete;
  file_pin& operator=(const file_pin&) = delete;
  ~file_pin();

  [[nodiscard]] int fd() const noexcept;
  [[nodiscard]] bool held() const noexcept { return entry_ != nullptr; }
  void release() noexcept;

 private:
  friend class cached_file;
  file_pin(file_cache& cache, file_cache::entry& en) noexcept;
  file_cache* cache_ = nullptr;
  file_cache::entry* entry_ = nullptr;
};

}  // namespace rill::storage
