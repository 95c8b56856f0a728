#pragma once
// partition_log: the durable, segmented log of one partition, and (in a cluster) its replication journal.
//
// Positions (strong offsets; always log_start <= committed <= synced_end <= log_end under auto commit):
//   log_start   first offset retained (moves forward with retention)
//   log_end     the next offset to assign: everything below it has been written to the file (page cache)
//   synced_end  everything below it is on disk (covered by an fdatasync)
//   committed   the high-watermark, the visible bound for consumers. Under auto commit (one node) it follows
//               synced_end, so a consumer never sees what a power loss could take back; under external commit
//               (a cluster) the replication layer sets it with commit_to().
//
// Durability (log_config::durability):
//   sync_before_ack  append() completes after the fdatasync that covers it. Group commit: appends that arrive while
//                    a flush is in flight form the next flush: one vectored write, one fdatasync for all of them.
//   every_records / every_ms: append() completes once written. While written data is unsynced, a background sync
//                    runs fdatasyncs of the active segment back to back (group commit without the producer waiting),
//                    so relaxed data becomes visible within about one fdatasync. The N records / T ms bound what a
//                    power loss can take: the writer also syncs once N records / T ms are unsynced, even if the
//                    background sync is slow. Consumers see only synced data under every mode.
//
// Failures: a batch that does not validate is refused whole (nothing of the request is written). A failed write is
// cut off the file (ftruncate to the last good end) before the error is returned, and every append queued behind it
// fails too (their offsets are reassigned to later appends; none was ever visible). If the cut fails, or an
// fdatasync fails, the partition is fenced: every later write fails with errc::fenced until the log is closed and
// opened again (recovery), because after a failed fsync nothing unsynced can be trusted. Opened again in the same
// process (the page cache may still hold the bytes whose sync failed, readable and valid-looking), the caller passes
// the fenced log's synced_end() as log_options::trusted_end and recovery cuts everything from it.
//
// Concurrency: single-threaded. Every call must come from the thread that drives the io::engine; coroutines resume
// from that engine's poll(). All mutations (appends, rolls, truncation, retention decisions, epoch changes) run one
// at a time on an internal writer; reads run concurrently with them and pin the segments they read. Under relaxed
// durability the background sync runs concurrently with the writer too: it only syncs the active segment's files
// and raises synced_end (and committed under auto commit); rolls and truncations wait for it and hold it off.
//
// Lifetime: open() -> use -> close() (waits for queued work, persists the superblock, closes files) -> destroy.
// Every read_result and log_cursor must be released before close().
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/async.h"
#include "base/clock.h"
#include "base/expected.h"
#include "base/strong.h"
#include "base/task.h"
#include "config/log_config.h"
#include "storage/buffer_pool.h"
#include "storage/epoch_file.h"
#include "storage/file_cache.h"
#include "storage/io/engine.h"
#include "storage/record_batch.h"
#include "storage/segment.h"
#include "storage/superblock.h"
#include "storage/validated_batches.h"

namespace rill::storage {

// Loud reports from recovery and background work (LevelDB's Reporter): corruption found and what was done about it.
class log_reporter {
 public:
  virtual ~log_reporter() = default;
  // `file` at byte `position` failed verification; `action` says what recovery did (skipped, rebuilt, cut).
  virtual void corruption(const std::string& file, std::uint64_t position, const std::string& problem,
                          const std::string& action) = 0;
  virtual void notice(const std::string& what) = 0;
};

// Keeps what it was told; for tests and tools.
class collecting_reporter final : public log_reporter {
 public:
  struct report {
    std::string file;
    std::uint64_t position;
    std::string problem;
    std::string action;
  };
  void corruption(const std::string& file, std::uint64_t position, const std::string& problem,
                  const std::string& action) override {
    corruptions.push_back(report{file, position, problem, action});
  }
  void notice(const std::string& what) override { notices.push_back(what); }
  std::vector<report> corruptions;
  std::vector<std::string> notices;
};

// Told how long the log's writes and syncs take (metrics). Called on the log's thread; must not block.
class log_observer {
 public:
  virtual ~log_observer() = default;
  // A group of appends was written (and, under sync_before_ack, synced): from the start of its write to the end.
  virtual void group_written(std::chrono::nanoseconds took, std::uint32_t appends, bool synced) = 0;
  // A sync of a relaxed policy (every_records / every_ms) finished.
  virtual void synced(std::chrono::nanoseconds took) = 0;
};

struct log_options {
  config::log_config config;
  log_observer* observer = nullptr;  // outlives the log, or null
  bool create = true;                // create the directory and files if missing
  bool auto_commit = true;           // one node: committed follows synced_end; false: commit_to() sets it
  // Recovery scans every segment in full and rebuilds its index, instead of trusting sealed segments that verify
  // (for a suspicious disk, and to measure what the fast path saves).
  bool scan_all_segments = false;
  // The open descriptors of this log's files are kept by `files` (one per shard in rilld, shared by its partitions;
  // it outlives the log) under its limit: an idle partition holds none. Null: the log keeps a cache of its own with
  // no limit (every file stays open while the log is, as before issue 13).
  file_cache* files = nullptr;
  // Entries of the partition directory that belong to the log's owner, not to the log (the partition actor's
  // "offsets" directory): recovery leaves them alone and does not report them. Any other name it does not know is
  // reported as unknown (and left alone too).
  std::vector<std::string> owner_entries;
  // >= 0: recovery trusts no batch at or above this offset (it cuts them, as an interrupted truncation): the synced
  // end of a fenced log reopened in-process. Must be a batch boundary the log had synced (synced_end()).
  offset_t trusted_end{-1};
  // Relaxed durability: sync written data in the background, back to back, so it becomes visible within about one
  // fdatasync. false: only the every_records / every_ms bounds sync (rill-bench --sync none; tests that need
  // written data to stay unsynced).
  bool background_sync = true;
  // Writes not fused with their fdatasync (relaxed durability, and groups that carry replication metadata) run as
  // plain pwritev on the engine owner's thread (io::request::blocking_ok) instead of a kernel worker thread: no
  // cross-thread hand-off per write (docs/storage.md, "Blocking writes"). false: every write goes through the ring.
  bool blocking_writes = true;
};

struct append_result {
  offset_t base_offset;      // of the first batch
  offset_t last_offset;      // of the last record
  timestamp_ms_t timestamp;  // the log-append time given to the batches (leader appends)
  std::uint32_t batches = 0;
  std::uint32_t records = 0;
};

enum class read_start : std::uint8_t { offset, timestamp, first, last };

struct read_request {
  read_start start = read_start::offset;
  offset_t offset{0};           // read_start::offset
  timestamp_ms_t timestamp{0};  // read_start::timestamp: the first batch whose max_timestamp >= this
  std::uint32_t max_records = UINT32_MAX;
  std::uint64_t max_bytes = 1024 * 1024;
  bool uncommitted = false;  // replication reads: up to log_end instead of committed
  bool verify_crc = true;    // check each returned batch's CRC (corruption becomes errc::corrupt_data)
};

struct read_result {
  pooled_buffer bytes;  // whole batches, back to back (may be empty)
  std::uint32_t batches = 0;
  std::uint32_t records = 0;
  offset_t requested{-1};      // where the read was resolved to start: records before it in the first batch precede
                               // the position asked for
  offset_t first_offset{-1};   // base offset of the first batch returned
  offset_t next_offset{0};     // where a following read continues
  offset_t high_watermark{0};  // committed at the time of the read
  offset_t log_start{0};

  // The returned batches, one view each (they came from the log, which checked them).
  [[nodiscard]] std::vector<batch_view> batch_views() const;
};

struct retention_result {
  std::uint32_t segments_removed = 0;
  std::uint64_t bytes_removed = 0;
  offset_t log_start{0};
};

struct log_stats {
  std::uint64_t segments = 0;
  std::uint64_t bytes = 0;
  std::uint64_t appends = 0;
  std::uint64_t flushes = 0;  // vectored writes
  std::uint64_t syncs = 0;    // fdatasyncs of the log
  std::uint64_t rolls = 0;
  std::uint64_t pending_bytes = 0;
};

class log_cursor;

class partition_log {
 public:
  // Opens (creating if options.create) the partition in `dir` and runs recovery (docs/storage.md, Recovery).
  // `engine`, `pool`, `clk` and `reporter` must outlive the log.
  static task<expected<std::unique_ptr<partition_log>>> open(io::engine& engine, buffer_pool& pool, const clock& clk,
                                                             log_reporter& reporter, std::string dir,
                                                             log_options options);
  ~partition_log();
  partition_log(const partition_log&) = delete;
  partition_log& operator=(const partition_log&) = delete;

  // Leader path: appends batches validated as producer batches (validated_batches.h: each was validated once, where
  // it arrived), assigns offsets and the log-append time, and stamps the current leader epoch (from each batch's
  // crc_tail: no second pass over the bytes). Completes per the durability policy. The batches are not validated
  // again; only their sizes are checked against this log's max_message_bytes (the caller may have validated them
  // against another limit). Errors: batch_too_large (nothing written); overloaded (retriable); io_error/no_space
  // (nothing of it remains); fenced; closed.
  task<expected<append_result>> append(validated_batches batches);
  // The same for raw bytes (tools, tests, the simulator): validates every batch in `batches` (one or more, back to
  // back) with producer_batch_limits(max_message_bytes), in place, then appends them as above. Errors: those of
  // validated_batches::validate (invalid_batch, crc_mismatch, batch_too_large, unsupported_compression,
  // unsupported_attributes, invalid_producer_fields; nothing written), then those of append(validated_batches).
  task<expected<append_result>> append(std::vector<std::byte> batches);

  // Replica path: appends batches whose offsets, timestamps and epochs were assigned elsewhere, byte for byte. The
  // first batch must start at log_end(), and batches must be contiguous. `metas`, if not empty, has one entry per
  // batch and is stored in the segment's .meta side file. A batch whose epoch is newer than the latest known
  // epoch starts a new entry in the epoch history.
  task<expected<append_result>> append_replicated(std::vector<std::byte> batches, std::vector<batch_meta> metas = {});

  // Syncs everything written so far (for relaxed policies, and before a clean shutdown).
  task<expected<void>> flush();

  // External commit (auto_commit = false): raises committed to `offset` (<= log_end; never lowers it).
  void commit_to(offset_t offset);

  // Called (on the log's thread, from inside its own work) each time committed moves forward: long polls wait on
  // it. It must not call back into the log synchronously (spawning a read is fine).
  void on_committed(std::function<void()> callback) { on_committed_ = std::move(callback); }
  // Failure injection (rilld's debug.failure_injection, tests): the next `n` fdatasyncs of the log's files report
  // EIO (after running: what a failing device does), which fences the log as a real failure would.
  void inject_sync_failures(std::uint32_t n) noexcept { injected_sync_failures_ += n; }
  // New retention and segment-rolling settings, taken at once (config::changes_in_place must hold, asserted): the
  // next retention run deletes by them, the active segment rolls by them. Nothing is reopened (issue 38, 10).
  void update_config(const config::log_config& next);
  // Called (the same way) once, when the log becomes fenced: also by a sync nobody waits for (relaxed durability).
  void on_fenced(std::function<void()> callback) { on_fenced_ = std::move(callback); }

  // Makes `epoch` the leader epoch stamped on future appends, starting at log_end(); persisted in leader-epochs
  // before it returns. Epochs must increase.
  task<expected<void>> set_leader_epoch(epoch_t epoch);

  // Removes every batch after the one containing `last_kept` (that batch must end at last_kept + 1: a batch is
  // never split), across segments, and the matching metadata and epoch entries. Crash-safe: the intent is
  // persisted in the superblock first and completed by recovery. Refused for offsets below committed.
  task<expected<void>> truncate_after(offset_t last_kept);

  // Reads whole batches starting at the batch containing the requested position, up to max_records / max_bytes
  // (at least one batch, even when it exceeds max_bytes) and never past the visible bound. An empty result means
  // nothing is visible there yet. Errors: offset_out_of_range (below log_start), corrupt_data, io_error.
  task<expected<read_result>> read(read_request request);

  // Deletes sealed segments by age (newest record older than retention_ms) and by size (oldest first while the
  // partition is larger than retention_bytes). The new log_start is persisted first; files are shrunk in steps and
  // unlinked in the background once no reader is inside them.
  // `ceiling`, when given, is a further bound: no segment ending above it goes (a replicated partition keeps what
  // its replica may still need: partition_storage::enforce_retention).
  task<expected<retention_result>> enforce_retention(std::optional<offset_t> ceiling = std::nullopt);

  // Replica path, state transfer from a peer whose log starts at `start`, beyond all this log holds: every segment
  // goes and the log continues, empty, at `start` (log_start = committed = log_end = start). Requires start >
  // log_end() and nothing uncommitted (committed() == log_end()); invalid_argument otherwise. Crash-safe: the new
  // start is persisted first, and recovery removes every segment below it (@A) and continues there. A failure after
  // that fences the log.
  task<expected<void>> restart_at(offset_t start);

  // Time-driven work (every_ms syncs, segment_ms rolls). Call it when next_deadline() passes.
  void tick();
  [[nodiscard]] std::optional<std::chrono::nanoseconds> next_deadline() const;

  task<expected<void>> close();

  [[nodiscard]] offset_t log_start() const noexcept { return log_start_; }
  [[nodiscard]] offset_t log_end() const noexcept { return log_end_; }
  [[nodiscard]] offset_t synced_end() const noexcept { return synced_end_; }
  [[nodiscard]] offset_t committed() const noexcept { return committed_; }
  [[nodiscard]] bool fenced() const noexcept { return fenced_.has_value(); }
  // The error every write fails with once fenced (nullptr otherwise).
  [[nodiscard]] const rill::error* fencing_error() const noexcept { return fenced_ ? &*fenced_ : nullptr; }
  [[nodiscard]] epoch_t leader_epoch() const noexcept { return epoch_; }
  [[nodiscard]] const epoch_history& epochs() const noexcept { return epochs_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
  [[nodiscard]] log_stats stats() const;
  [[nodiscard]] const superblock_state& superblock() const noexcept { return superblock_.current(); }
  // Replication metadata stored for the batch starting at `base_offset`, if any.
  [[nodiscard]] std::optional<batch_meta> meta_for(offset_t base_offset) const;
  // Every replication metadata entry the log holds at or above `from`, in offset order (O(entries): for recovery
  // of a replicated partition, which indexes them once).
  [[nodiscard]] std::vector<meta_entry> metas(offset_t from = offset_t(0)) const;
  // Base offsets of the live segments, oldest first (for tools and tests).
  [[nodiscard]] std::vector<offset_t> segment_bases() const;

  // Asserts the invariants of partition_log.cpp, one RILL_ASSERT each (an abort names the one that failed). The
  // position order always; when no writer step is in flight (a step may hold the segment table half-way between two
  // of its awaits), also the active segment, every segment (O(segments)) and the superblock. Once fenced, only what a
  // fenced log still keeps (recovery rebuilds the rest). The writer checks the O(1) part after every step and the
  // whole after rolls, truncations, retention and recovery; tests call this after every operation. Not after close().
  void check_invariants() const;

 private:
  friend class log_cursor;
  struct work;
  struct append_group;
  struct truncate_plan;
  struct batch_info {
    std::uint32_t size = 0;
    std::uint32_t offset_count = 0;  // last_offset_delta + 1
    std::uint32_t records = 0;
    std::uint32_t crc_tail = 0;  // leader appends: CRC of the unchanged part, for stamping
    offset_t base{0};            // replica appends: as received; leader appends: assigned at write time
    timestamp_ms_t max_timestamp{-1};
    epoch_t epoch{0};
  };

  partition_log(io::engine& engine, buffer_pool& pool, const clock& clk, log_reporter& reporter, std::string dir,
                log_options options);

  // Recovery (log_recovery.cpp).
  task<expected<void>> recover();
  // Where recovery cuts: the lower of the superblock's truncate_from and options.trusted_end (-1: nowhere).
  [[nodiscard]] offset_t recovery_cut() const noexcept;
  task<expected<void>> recover_segment_fast(segment& seg, bool& ok);
  task<expected<bool>> scan_segment(segment& seg, bool is_last, offset_t committed_hint);
  task<expected<void>> rebuild_index_file(segment& seg);
  // settle: the .meta is made what the disk holds first (a segment recovery scanned, not one it trusts as sealed).
  task<expected<void>> load_metas(segment& seg, bool settle);
  task<expected<void>> open_segment_files(segment& seg, bool writable);
  task<expected<std::shared_ptr<segment>>> create_segment(offset_t base);

  // Writer (partition_log.cpp).
  void enqueue(std::unique_ptr<work> w);
  // Queues `body` for the writer, to run alone (no append or other work at the same time), and waits for it. An
  // empty body is a sync of everything written.
  task<expected<void>> run_exclusive(std::function<task<expected<void>>()> body);
  task<void> writer_loop();
  // Writes one group of appends (write_group) in named steps, each of which sees the group's state (append_group,
  // partition_log_internal.h). Until apply_group nothing of the log's state describes the group; a failure after
  // the pending bytes are released goes through undo_group.
  task<void> write_group(std::vector<std::unique_ptr<work>> items);
  // Assigns offsets, the log-append time and the epoch (leader), or checks that the batches start at log_end_
  // (replica). Changes no log state.
  expected<void> assign_group(append_group& g);
  // Persists the epochs first seen in a replicated group's batches, before those batches are written.
  task<expected<void>> persist_group_epochs(append_group& g);
  // The vectored write of the group's bytes at g.position (fused with its fdatasync under sync_before_ack without
  // metadata: then g.synced, or g.sync_failed).
  task<expected<void>> write_group_batches(append_group& g);
  // Adds the group's metadata entries to the active segment and writes the ones not yet in its .meta file.
  task<expected<void>> write_group_metas(append_group& g);
  // sync_before_ack: fdatasyncs the metadata, then the batches; sets g.synced, or g.sync_failed.
  task<expected<void>> sync_group(append_group& g);
  // Cuts the files back to where the group started (fencing the log if that fails or a sync failed) and fails the
  // group and everything queued behind it with `e`.
  task<void> undo_group(append_group& g, const rill::error& e);
  // Completes every append of the group with `e`.
  void fail_group(append_group& g, const rill::error& e);
  // Every step succeeded: the index, the active segment, log_end_ (and synced_end_ if synced) take the group in.
  void apply_group(append_group& g);
  // Completes the group's appends, then the follow-ups: a relaxed sync that is due, the superblock, preallocation.
  task<void> finish_group(append_group& g);
  task<expected<void>> sync_log();
  void mark_synced(offset_t target);
  // Relaxed durability: starts the background sync if written data is unsynced and nothing holds it off.
  void kick_background_sync();
  // Syncs the active segment back to back while unsynced data remains; raises synced_end_ to what each sync
  // covered. A failure fences the log (the owner recovers it with trusted_end = synced_end()).
  task<void> background_sync_loop();
  // Rolls and truncations close, cut and replace the active segment's files: they stop the background sync and
  // wait until its fdatasync in flight (and the pin it holds) is done, and start it again when they end.
  task<void> hold_background_sync();
  void release_background_sync();
  task<expected<void>> roll();
  task<expected<void>> do_roll();
  task<expected<void>> seal(segment& seg);
  // Keeps `seg` (the active segment, just written) pre-written with zeros preallocate_bytes ahead of its end. Called
  // only after a write, never at creation or open: an idle partition holds no zeros.
  task<expected<void>> maybe_preallocate(segment& seg);
  task<expected<void>> persist_superblock();
  // I/O on a segment's cached file (file_cache.h), each under a pin for its duration. Writes and truncations mark
  // the file unsynced before they are issued; sync_file marks it synced once its fdatasync succeeded (a detached
  // file has nothing to sync). While unsynced, the cache never closes it, so a failed fdatasync is seen here.
  // from_background: the background sync, concurrent with the writer's writes: the file is marked synced only if no
  // write was issued before the fdatasync went down (none in flight, none since).
  task<expected<void>> sync_file(cached_file& f, bool from_background = false);
  // must_sync = false: a cut that need not survive a crash (an active segment's index file, which recovery
  // rebuilds): the file stays evictable.
  task<expected<void>> truncate_cached(cached_file& f, std::uint64_t length, bool must_sync = true);
  task<expected<void>> write_cached(cached_file& f, std::span<const std::byte> data);  // at byte 0
  void fail_pending(const rill::error& e);
  void fence(const rill::error& e);
  void advance_commit();
  expected<void> check_writable() const;
  bool needs_roll(const segment& active, std::uint64_t bytes) const;
  // When the active segment reaches segment_ms (monotonic), if it has data and an age limit is set.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> roll_due() const;
  // truncate_after's body, in named steps; each step after plan_truncate that fails fences the log (the persisted
  // intent lets recovery finish the truncation).
  // The parts of check_invariants(): the position order (holds at every await of every step), the active segment
  // and the superblock (O(1), hold between writer steps), every segment (O(segments), between writer steps).
  void check_order() const;
  void check_active() const;
  void check_segments() const;
  // The O(1) checks, and the whole check: what writer steps call when they finish.
  void check_step() const;
  void check_all() const;
  task<expected<void>> do_truncate_after(offset_t last_kept);
  // Where the cut goes: the segment that keeps last_kept and the byte where its batch ends. Changes nothing.
  task<expected<truncate_plan>> plan_truncate(offset_t last_kept);
  // Step 1: the superblock records truncate_from, so a crash from here on is completed by recovery.
  task<expected<void>> persist_truncate_intent(const truncate_plan& plan);
  // Step 2: the segments after the kept one leave segments_; their files are unlinked now, descriptors later.
  task<expected<void>> drop_segments_after(const truncate_plan& plan);
  // Step 3a: the kept segment's log is cut and it becomes the (unsealed) active segment with an empty index file.
  task<expected<void>> cut_segment(const truncate_plan& plan);
  // Step 3b: its metadata entries at or after the cut go, in memory and in the .meta file (synced).
  task<expected<void>> cut_segment_metas(const truncate_plan& plan);
  // Step 3c: the cut log file and the directory are synced.
  task<expected<void>> sync_cut(const truncate_plan& plan);
  // The cut is durable: log_end_ and synced_end_ move to it.
  void apply_truncate(const truncate_plan& plan);
  // Step 4: epochs that started after last_kept are gone with the cut (persisted before they leave memory).
  task<expected<void>> truncate_epochs(offset_t last_kept);
  // Step 5: the superblock forgets the intent.
  task<expected<void>> clear_truncate_intent();
  task<expected<retention_result>> do_retention(std::optional<offset_t> ceiling);
  task<expected<void>> do_restart_at(offset_t start);

  // Reads (log_read.cpp).
  std::shared_ptr<segment> segment_for(offset_t offset) const;
  task<expected<offset_t>> resolve_start(const read_request& r);
  task<expected<std::uint64_t>> position_for(segment& seg, offset_t offset);
  task<expected<std::optional<offset_t>>> offset_for_timestamp(timestamp_ms_t ts, offset_t bound);
  void pin(segment& seg) noexcept { ++seg.readers; }
  void unpin(segment& seg) noexcept;

  // Retention deletion (log_retention.cpp).
  void kick_deleter();
  task<void> deleter_loop();
  task<expected<void>> delete_segment_files(segment& seg);

  io::engine& engine_;
  std::unique_ptr<file_cache> own_files_;  // when options.files is null; declared before every cached_file
  file_cache& files_;
  buffer_pool& pool_;
  const clock& clock_;
  log_reporter& reporter_;
  std::string dir_;
  log_options options_;
  batch_limits stored_limits_;

  std::vector<std::shared_ptr<segment>> segments_;  // ordered by base offset; back() is the active segment
  std::deque<std::shared_ptr<segment>> graveyard_;  // removed by retention/truncation, files not yet deleted
  superblock_store superblock_;
  epoch_history epochs_;
  epoch_t epoch_{0};

  offset_t log_start_{0};
  offset_t log_end_{0};  // written; offsets are assigned at write time from here
  offset_t synced_end_{0};
  offset_t committed_{0};
  timestamp_ms_t last_timestamp_{-1};
  std::optional<std::chrono::nanoseconds> sync_due_;

  std::deque<std::unique_ptr<work>> queue_;
  std::uint64_t pending_bytes_ = 0;
  bool writer_running_ = false;
  bool roll_queued_ = false;  // tick() queued an age roll that has not run yet
  bool deleter_running_ = false;
  bool background_sync_running_ = false;
  std::uint32_t background_sync_holds_ = 0;  // rolls and truncations in progress (hold_background_sync)
  // The writer is inside a group, from its first write to apply_group or the end of undo_group: a write to the
  // active segment's files may be in flight.
  bool group_in_flight_ = false;
  async_event writer_idle_;
  async_event deleter_idle_;
  async_event background_sync_idle_;
  std::optional<rill::error> fenced_;
  bool closing_ = false;
  std::uint64_t truncations_ = 0;  // truncate_after calls so far (cursors revalidate their positions)
  bool closed_ = false;
  log_stats stats_;
  std::function<void()> on_committed_;
  std::function<void()> on_fenced_;
  std::uint32_t injected_sync_failures_ = 0;
};

// A read position that survives between reads: it keeps the segment it is in pinned, so a segment that retention
// removes meanwhile is finished from the same bytes before the cursor moves on. Release before the log closes.
class log_cursor {
 public:
  log_cursor(partition_log& log, offset_t position, bool uncommitted = false) noexcept
      : log_(&log), position_(position), uncommitted_(uncommitted) {}
  log_cursor(log_cursor&& o) noexcept;
  log_cursor& operator=(log_cursor&&) = delete;
  log_cursor(const log_cursor&) = delete;
  ~log_cursor();

  // The next whole batches from position(), as partition_log::read describes; advances position().
  task<expected<read_result>> next(std::uint32_t max_records, std::uint64_t max_bytes, bool verify_crc = true);
  [[nodiscard]] offset_t position() const noexcept { return position_; }

 private:
  void unpin() noexcept;
  partition_log* log_;
  offset_t position_;
  bool uncommitted_;
  std::shared_ptr<segment> seg_;           // pinned
  std::optional<std::uint64_t> file_pos_;  // byte position of the batch at position_ in seg_, when known
  std::uint64_t truncations_seen_ = 0;     // the log's truncation count when file_pos_ was computed
};

}  // namespace rill::storage
