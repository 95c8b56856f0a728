#pragma once
// segment: one .log file (whole record batches, back to back), its sparse .index and, when replication metadata is
// written, its .meta side file. A plain state holder owned by partition_log, which does all its I/O.
//
// Invariants
// - Batches in [0, size) are whole and contiguous in offsets from base_offset to next_offset (compaction, a later
//   issue, will be the one source of gaps, and will mark the segments it writes).
// - file_size >= size; bytes in [size, file_size) are preallocation zeros (or a cut-off failed write).
// - A sealed segment is never written again; its index file is complete (with its seal entry) and synced.
// - The active segment's index lives in memory only; its .index file is empty until the seal writes it whole.
// - Files are unlinked only when deleting is set and readers == 0.
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/strong.h"
#include "storage/file_cache.h"
#include "storage/meta_entry.h"
#include "storage/segment_index.h"

namespace rill::storage {

// "00000000000000001234" for 1234.
std::string segment_name(offset_t base);
// Parses "<20 digits>.<ext>"; nullopt for any other name.
std::optional<std::pair<offset_t, std::string>> parse_segment_file_name(const std::string& name);

struct segment {
  segment(std::string dir_path, offset_t base, std::uint32_t index_interval_bytes);

  std::string log_path() const;
  std::string index_path() const;
  std::string meta_path() const;

  std::string dir;
  offset_t base_offset;
  offset_t next_offset;                            // one past the last batch (== base_offset when empty)
  std::uint64_t size = 0;                          // logical bytes: end of the last whole batch
  std::uint64_t synced_size = 0;                   // bytes covered by the last successful fdatasync
  std::uint64_t file_size = 0;                     // physical bytes (preallocation included)
  timestamp_ms_t max_timestamp{-1};                // of the batches in this segment
  std::chrono::nanoseconds first_append_mono{-1};  // monotonic time of the first append (segment_ms rolls)
  bool sealed = false;

  // Through the shard's file_cache (file_cache.h): closed while idle, reopened by path when next used. Detached
  // (no file) when the segment has none: a sealed segment's index and metadata, which live in memory.
  cached_file log_file;
  cached_file index_file;
  cached_file meta_file;

  segment_index index;

  std::vector<meta_entry> metas;  // replication metadata, one per batch appended with it
  std::size_t metas_written = 0;

  std::uint32_t readers = 0;    // reads in progress in this segment
  bool deleting = false;        // removed from the log; files go when readers == 0
  bool files_unlinked = false;  // truncation already unlinked the files: only descriptors remain
  std::uint64_t batches = 0;    // batch count (statistics)
};

}  // namespace rill::storage
