#pragma once
// superblock_store: reads and writes a partition's superblock pair (format: superblock_format.h).
//
// Invariants
// - A write goes to the copy that does not hold the newest sequence, so the newest valid copy is never the one
//   being overwritten; a crash mid-write leaves the previous state readable.
// - write() returns only after the copy is fdatasynced; the in-memory state changes only on success.
// - Sequences only grow. A failed write leaves the store unusable for writes (the partition fences itself).
// - Both copies are cached files (file_cache.h): closed while the partition is idle, reopened for the next write.
//   A copy is unsynced only between a write and its fdatasync; one whose write or sync failed stays open (and the
//   store failed) until close().
#include <cstdint>
#include <optional>
#include <string>

#include "base/expected.h"
#include "base/strong.h"
#include "base/task.h"
#include "storage/file_cache.h"
#include "storage/io/engine.h"

namespace rill::storage {

struct superblock_state {
  std::uint64_t sequence = 0;
  offset_t committed{0};
  offset_t log_start{0};
  offset_t recovery_frontier{0};
  offset_t truncate_from{-1};

  friend bool operator==(const superblock_state&, const superblock_state&) = default;
};

// Encoding, exposed for tests and rill-dump.
void encode_superblock(const superblock_state& s, std::byte* out64) noexcept;
// nullopt when magic, version or CRC do not check out.
std::optional<superblock_state> decode_superblock(const std::byte* in64) noexcept;

class superblock_store {
 public:
  superblock_store() = default;
  superblock_store(superblock_store&&) noexcept = default;
  superblock_store& operator=(superblock_store&&) noexcept = default;

  struct opened;
  // Opens (creating them if `create` and both are missing) the two copies in `dir` and picks the newest valid one.
  // `found` is false when no valid copy existed (fresh partition, or both copies damaged: the caller decides).
  // The copies' descriptors are kept by `files`, which outlives the store. While open() reads the copies it holds
  // up to one descriptor of its own at a time, outside the cache's count.
  static task<expected<opened>> open(io::engine& e, file_cache& files, std::string dir, bool create);

  [[nodiscard]] const superblock_state& current() const noexcept { return state_; }
  // Persists `next` (its sequence is assigned here) to the older copy and fdatasyncs it.
  task<expected<void>> write(superblock_state next);
  // For a fresh partition: writes `s` to both copies, so neither looks damaged at the next open.
  task<expected<void>> initialize(superblock_state s);
  task<expected<void>> close();

 private:
  io::engine* engine_ = nullptr;
  std::string dir_;
  cached_file a_;
  cached_file b_;
  superblock_state state_;
  bool failed_ = false;
};

struct superblock_store::opened {
  superblock_store store;
  bool found = false;        // a valid copy existed
  bool one_damaged = false;  // exactly one copy was missing or invalid (reported, then rewritten by the next write)
};

}  // namespace rill::storage
