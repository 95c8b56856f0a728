#pragma once
// journal: a replica's write-ahead log of prepares on disk (journal.wal), a ring of slots with redundant headers,
// and the superblock that holds its vsr_state. Both run on io::engine, so the simulator's disk and io_uring drive the
// same code.
//
// journal.wal layout: slot_count headers of 128 bytes (the header ring), padded to 4096, then slot_count prepare
// slots of message_size_max bytes each (the prepare ring). Op k lives in slot k mod slot_count.
//
// A detached prepare (journal_options::detached_operation) is its header alone in the prepare slot: valid when the
// header is, whatever follows it in the slot. Its body is the owner's to keep, check and give back.
//
// Writes: the prepare goes to its slot and is synced (fdatasync); only then does its header go to the header ring
// (made durable by the next write's sync), and the write is complete (a replica acknowledges nothing before). A
// header thus never lands before its prepare is durable, whatever a crash keeps or tears. So at recovery, for each
// slot:
//
//   prepare slot            header slot                  verdict
//   valid                   anything                     the prepare is valid (an older or torn header is fixed
//                                                        by the next write; a newer header's op is faulty)
//   unreadable, not zero    valid (op h)                 op h is faulty: its prepare was durable, now it is lost
//                                                        (or it is the op a ring's length below, overwritten by
//                                                        a torn write: below the checkpoint, so ignored)
//   unreadable, not zero    zero or unreadable           the slot is faulty: something was there, we cannot say what
//                                                        (a torn write of an op never acknowledged looks the same)
//   zero                    valid (op h)                 op h is faulty (its prepare should be there)
//   zero                    zero or unreadable           empty
//
// A faulty op or slot is never reported as "never had it" (see docs/consensus.md, view change): the replica may
// have acknowledged it.
//
// Descriptors: each file is a storage::cached_file under a file_cache (the shard's, for a partition group's replica;
// else one of its own without a limit), pinned around each operation, so an idle replica holds none. A header-ring
// write is left for the next write's sync: until a sync covers it, the journal keeps its descriptor (the cache never
// closes an unsynced file: a writeback error must reach an fdatasync of the descriptor that wrote); sync_headers()
// covers it when no write follows.
//
// superblock: the vsr_state in four fixed-size copies in one file; each update writes two copies (the two after the
// newest) and fdatasyncs; open takes the valid copy with the highest sequence. A torn update leaves the previous
// state; one rotten copy leaves the other copy of the same update.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "consensus/message.h"
#include "consensus/vsr_state.h"
#include "storage/file_cache.h"
#include "storage/io/engine.h"

namespace rill::consensus {

struct journal_options {
  std::uint64_t slot_count = 1024;               // ops the ring holds
  std::uint32_t message_size_max = 1024 * 1024;  // the largest prepare, header included (a multiple of 512)
  // Prepares of this operation are stored as their 128-byte header alone: their bodies live elsewhere (a partition
  // group's record batches, in the partition log: consensus/partition_storage.h), so nothing is written twice.
  // Recovery counts such a slot valid when its header is; read() returns the header with an empty body (its size
  // still says how large the body is), which the owner of the bodies completes. 0 (operation_root, never written):
  // every prepare is stored whole.
  std::uint8_t detached_operation = 0;
};
inline constexpr std::uint64_t journal_slot_count_max = 1 << 20;
// The size of journal.wal with these options: the header ring, padded to a page, then the prepare ring.
[[nodiscard]] std::uint64_t journal_file_bytes(const journal_options& o) noexcept;
// The slot count of a journal.wal of `file_bytes` with slots of `message_size_max` (nullopt: no ring has that size).
[[nodiscard]] std::optional<std::uint64_t> journal_slot_count_of(std::uint64_t file_bytes,
                                                                 std::uint32_t message_size_max) noexcept;

struct journal_recovery {
  std::vector<header> valid;                // prepares that read back whole
  std::vector<header> faulty;               // prepares known by header whose bytes are lost
  std::vector<std::uint64_t> faulty_slots;  // slots that held something unreadable, op unknown
};

class journal {
 public:
  // Opens dir/journal.wal, creating it (zero-filled, synced, the directory synced) when `create` and missing, and
  // scans every slot. Errors: invalid_argument for options out of range or a file of the wrong size; I/O errors.
  // `files`: the cache its descriptor lives under (nullptr: one of its own, unlimited); it outlives the journal.
  static task<expected<std::unique_ptr<journal>>> open(storage::io::engine& e, std::string dir, journal_options options,
                                                       bool create, journal_recovery& recovered,
                                                       storage::file_cache* files = nullptr);
  ~journal();

  // Writes a prepare into its slot (replacing whatever op was there) and makes it durable. The message must fit
  // (a detached one: its header only, so any size).
  task<expected<void>> write(const message& prepare);
  // Reads op back; errors: corrupt_data when the slot holds another op, a different checksum, or bad bytes. A
  // detached prepare comes back with an empty body.
  task<expected<message>> read(std::uint64_t op, checksum_t checksum);
  // Syncs header-ring writes no later sync covered (nothing to do: returns at once), so the descriptor may close.
  task<expected<void>> sync_headers();
  // Header-ring writes wait for a sync (sync_headers(), or the next write's).
  [[nodiscard]] bool headers_unsynced() const noexcept { return headers_written_ != headers_synced_; }
  task<expected<void>> close();

  [[nodiscard]] const journal_options& options() const noexcept { return options_; }
  [[nodiscard]] std::string path() const { return path_; }

 private:
  journal(storage::io::engine& e, std::string path, journal_options o)
      : engine_(&e), path_(std::move(path)), options_(o) {}
  // An fdatasync of the file through `fd` (pinned by the caller): what it covers of the header ring is synced.
  task<expected<void>> datasync(int fd);
  // Marks the file synced when every header-ring write is covered (and none is in flight).
  void settle_marks();
  [[nodiscard]] std::uint64_t prepares_offset() const noexcept;
  [[nodiscard]] bool is_detached(const header& h) const noexcept {
    return options_.detached_operation != operation_root && h.operation == options_.detached_operation;
  }

  storage::io::engine* engine_;
  std::string path_;
  journal_options options_;
  std::unique_ptr<storage::file_cache> own_files_;  // (declared before file_: it outlives it)
  storage::cached_file file_;
  std::uint64_t headers_written_ = 0;  // header-ring writes completed
  std::uint64_t headers_synced_ = 0;   // of those, covered by a completed sync that started after them
  std::uint32_t headers_in_flight_ = 0;
  // The first failed fdatasync: every later write and sync fails with it (Linux reports a writeback error to one
  // fdatasync of the file description; one running concurrently may return 0), and the file is never marked synced.
  std::optional<error> sync_failed_;
};

class superblock {
 public:
  static constexpr std::size_t copies = 4;
  static constexpr std::size_t copy_size = 16 * 1024;

  // Opens dir/superblock. A missing file with `create`: written with `initial` in every copy. Errors: corrupt_data
  // when no copy is valid (the replica cannot know its view: it must not start), not_found when missing.
  static task<expected<std::unique_ptr<superblock>>> open(storage::io::engine& e, std::string dir, bool create,
                                                          const vsr_state& initial,
                                                          storage::file_cache* files = nullptr);
  ~superblock();

  [[nodiscard]] const vsr_state& state() const noexcept { return state_; }
  [[nodiscard]] std::uint64_t sequence() const noexcept { return sequence_; }
  // This open wrote the file (it was missing or empty): the replica's very first start on it.
  [[nodiscard]] bool created() const noexcept { return created_; }
  // Persists `next`: two copies, then fdatasync. On error the old state stays current (and the caller must not
  // advertise `next`).
  task<expected<void>> write(vsr_state next);
  task<expected<void>> close();

 private:
  superblock(storage::io::engine& e, std::string path) : engine_(&e), path_(std::move(path)) {}

  storage::io::engine* engine_;
  std::string path_;
  std::unique_ptr<storage::file_cache> own_files_;  // (declared before file_: it outlives it)
  storage::cached_file file_;
  vsr_state state_;
  std::uint64_t sequence_ = 0;
  bool created_ = false;
};

}  // namespace rill::consensus
