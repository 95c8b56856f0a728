#pragma once
// Configuration of one partition log (a topic's storage settings plus the broker's storage tunables).
//
// Every field has a default, a meaning and an allowed range; validate() names the key and its range when a value is
// out of bounds. Keys are spelled here as they are in the TOML file and the topic config (config issue 3).
#include <chrono>
#include <cstdint>

#include "base/expected.h"
#include "config/limits.h"

namespace rill::config {

// When an append is acknowledged, and when data becomes visible to consumers.
//   sync_before_ack (default): acknowledged after the fdatasync that covers it (group commit).
//   every_records:  acknowledged once written to the file; at most `sync_every_records` records unsynced.
//   every_ms:       acknowledged once written; fdatasync at least every `sync_every_ms` milliseconds.
// Under both relaxed modes a background fdatasync runs back to back while written data is unsynced, so data becomes
// visible within about one fdatasync; the two bounds limit what a power loss can take, not what consumers wait for.
// On a single node consumers see only synced data under every mode, so no offset a consumer saw is reused after a
// power loss.
enum class durability_mode : std::uint8_t { sync_before_ack, every_records, every_ms };

const char* to_string(durability_mode m) noexcept;

struct log_config {
  // segment_bytes: roll the active segment when it would exceed this many bytes. [1 MiB, 3.5 GiB], default 1 GiB.
  std::uint64_t segment_bytes = 1 * limits::gib;
  // segment_ms: roll the active segment when its first batch is older than this. 0 = never. [0, 1 year].
  std::uint64_t segment_ms = 7ull * 24 * 3600 * 1000;
  // retention_ms: delete sealed segments whose newest record is older than this. 0 = keep forever.
  std::uint64_t retention_ms = 0;
  // retention_bytes: delete the oldest sealed segments while the partition is larger than this. 0 = unlimited.
  std::uint64_t retention_bytes = 0;
  // max_message_bytes: the largest record batch accepted (as stored). [61 B, 128 MiB], default 1 MiB.
  std::uint64_t max_message_bytes = 1 * limits::mib;
  durability_mode durability = durability_mode::sync_before_ack;
  // sync_every_records: under every_records. [1, 1e9].
  std::uint64_t sync_every_records = 1000;
  // sync_every_ms: under every_ms. [1, 3600000].
  std::uint64_t sync_every_ms = 100;
  // flush_bytes_max: the most bytes one flush writes with one vectored write. [4 KiB, 64 MiB], default 4 MiB.
  std::uint64_t flush_bytes_max = 4 * limits::mib;
  // pending_bytes_max: appended but not yet flushed bytes beyond which append() fails with `overloaded`
  // (retriable). [flush_bytes_max, 1 GiB], default 64 MiB.
  std::uint64_t pending_bytes_max = 64 * limits::mib;
  // preallocate_bytes: under sync_before_ack, the active segment is kept pre-written with zeros this far ahead of
  // the write position (overwrites sync about twice as fast as appends here), from the first write to a segment on
  // (never at creation or open: idle partitions hold no zeros). 0 = off. [0, 256 MiB], default 8 MiB.
  std::uint64_t preallocate_bytes = 8 * limits::mib;
  // read_window_bytes: size of one positional read. [4 KiB, 16 MiB], default 1 MiB.
  std::uint64_t read_window_bytes = 1 * limits::mib;
  // delete_step_bytes: retention shrinks a file by this much per step before unlinking it. [1 MiB, 1 GiB].
  std::uint64_t delete_step_bytes = 64 * limits::mib;
  // superblock_interval_records: persist the committed offset after this many newly committed records (it is a
  // lower bound; recovery finds the rest in the log). [1, 1e9], default 10000.
  std::uint64_t superblock_interval_records = 10'000;

  friend bool operator==(const log_config&, const log_config&) = default;
};

// Checks every field against its range. The error names the key, the value and the allowed range.
expected<void> validate(const log_config& c);

// Whether a running log takes `to` in place of `from` (storage::partition_log::update_config): they differ at most
// in retention (retention_ms, retention_bytes) and segment rolling (segment_ms, segment_bytes), which the log reads
// each time it uses them. Any other change (durability, syncs, flush and read sizes, preallocation, the largest
// batch) is made by reopening the log.
[[nodiscard]] bool changes_in_place(const log_config& from, const log_config& to);

}  // namespace rill::config
