#pragma once
// partition_state: one partition as the broker serves it: its log, idempotent producers, and consumer offsets.
// Plain C++ over injected I/O (the partition actor gives it an actor_io; tests give it the simulated disk).
//
// Produce checks, in this order, before anything of the request is recorded or written (a refused request writes
// nothing, not even its good batches):
//   1. every batch was validated once, in full, where it arrived (storage::validated_batches, made by the request
//      router in the connection's receive buffer: length and limit, CRC-32C, codec, check_producer_fields, dense
//      offsets, records): the producer fields used below passed their batch's CRC;
//   2. per idempotent batch, against the producer table (below);
//   3. the log appends without validating again (partition_log::append(validated_batches)), checking only the
//      batch sizes against its own max_message_bytes.
//
// Idempotent producers: a batch with producer_id >= 0 carries its producer epoch and base sequence; the rules
// (retries answered with their original offsets, duplicate_sequence, sequence_gap, producer_fenced,
// unknown_producer_id, the wrap) are storage::producer_table's, shared with the replicated partition.
// Checks use the sequences of accepted appends still in flight; when an append fails, every producer it touched goes
// back to its last written state (all appends queued behind a failure fail with it, so the producers retry from
// there). At open, the state is rebuilt from the batches of the newest segment (a producer whose batches are all in
// older segments is unknown after a restart).
//
// Consumer offsets: the next offset to consume per named consumer, one atomic file each under offsets/consumers/
// (the partition is their only writer); moving one back is allowed and reported. A file is named by a number the
// partition assigns, never by the consumer's name (which the file holds, with a CRC): no client-supplied name
// becomes part of a path, so '.tmp' endings, '.', '..' and 255-byte names are all safe.
//
// A fenced log (a failed fdatasync, or a write that could not be cut back: partition_log.h) is recovered in place by
// recover_log(): closed, then opened again trusting nothing at or above the synced end it had (the page cache may
// hold the bytes whose sync failed), and the producer table rebuilt from what remains. Consumer offsets stay: they
// never pass the high-watermark, which never passes the synced end. The caller makes sure no read or write of the
// log is in flight. When the reopen fails (the cause is still there), the old log stays, closed and fenced: writes
// fail with its fencing error, reads with closed; recover_log() may be called again.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/expected.h"
#include "base/task.h"
#include "net/proto/rill.pb.h"
#include "storage/partition_log.h"
#include "storage/producer_table.h"
#include "storage/validated_batches.h"

namespace rill::actors {

struct produce_result {
  std::vector<std::int64_t> base_offsets;  // one per batch of the request, in order
  timestamp_ms_t timestamp{-1};
  bool duplicate = false;  // every batch was a retry: nothing was appended
};

// A log's offsets and sizes as PartitionInfo reports them (a replicated partition's log too).
void describe_log(const storage::partition_log& log, proto::PartitionInfo& out);

class partition_state {
 public:
  static constexpr std::size_t producer_batches_kept = storage::producer_table::batches_kept;

  static task<expected<std::unique_ptr<partition_state>>> open(storage::io::engine& engine, storage::buffer_pool& pool,
                                                               const clock& clk, storage::log_reporter& reporter,
                                                               std::string dir, storage::log_options options);

  // Checks idempotence on the validated batches' producer fields, appends. Errors: those of
  // partition_log::append(validated_batches), plus (net::status codes) unknown_producer_id, sequence_gap,
  // producer_fenced, duplicate_sequence, and overloaded for a retry of a batch still being written.
  task<expected<produce_result>> produce(storage::validated_batches batches);

  task<expected<storage::read_result>> read(storage::read_request request) { return log_->read(request); }
  // One read for a poll, from where read_request_for (long_poll.h) puts it (`resume_at`: a group's position); when
  // the poll auto-commits for a named consumer and batches came back, their next offset is stored as its offset.
  task<expected<storage::read_result>> poll(proto::PollRequest request, std::optional<std::int64_t> resume_at,
                                            std::uint64_t default_max_bytes);
  // The partition's offsets and size, as the metadata actor reports them.
  [[nodiscard]] proto::PartitionInfo info(std::uint32_t partition_id) const;

  [[nodiscard]] std::optional<std::int64_t> consumer_offset(const std::string& consumer) const;
  // Stores `offset` for `consumer` (atomic file). Returns the previous offset, if any. Error limit_exceeded: a new
  // consumer beyond consumers_max (nothing is written).
  task<expected<std::optional<std::int64_t>>> store_consumer_offset(std::string consumer, std::int64_t offset);
  // Named consumers with offsets this partition keeps at most (limits.consumers_per_partition_max); those loaded at
  // open beyond it stay, only new ones are refused.
  void set_consumers_max(std::uint64_t consumers_max) noexcept { consumers_max_ = consumers_max; }
  // Idempotent producers are forgotten once idle past expiry_ms (storage.producer_expiry_ms), and beyond
  // producers_max (limits.producers_per_partition_max) the one idle longest (storage::producer_table::trim),
  // as each append lands.
  void set_producer_limits(std::int64_t expiry_ms, std::uint64_t producers_max) noexcept {
    producer_expiry_ms_ = expiry_ms;
    producers_max_ = producers_max;
  }

  storage::partition_log& log() noexcept { return *log_; }
  // Retention and segment settings changed in place (config::changes_in_place), kept for a recovery's reopen too.
  void update_config(const config::log_config& c) {
    options_.config = c;
    if (log_) {
      log_->update_config(c);
    }
  }
  // Requires log().fenced() and nothing of the log in flight. Errors: those of partition_log::open.
  task<expected<void>> recover_log();
  // The error that fenced the log, while it is fenced (also while a recovery is failing); recoveries that worked.
  [[nodiscard]] std::optional<rill::error> fencing() const;
  [[nodiscard]] std::uint64_t recoveries() const noexcept { return recoveries_; }
  task<expected<void>> close();

 private:
  partition_state(storage::io::engine& engine, storage::buffer_pool& pool, const clock& clk,
                  storage::log_reporter& reporter, std::string dir, storage::log_options options)
      : engine_(engine),
        pool_(pool),
        clk_(clk),
        reporter_(reporter),
        dir_(std::move(dir)),
        options_(std::move(options)) {}
  task<expected<void>> rebuild_producers();
  task<expected<void>> load_consumer_offsets();

  storage::io::engine& engine_;
  storage::buffer_pool& pool_;
  const clock& clk_;
  storage::log_reporter& reporter_;
  std::string dir_;
  storage::log_options options_;  // as opened (recover_log() adds the trusted end to a copy)
  std::unique_ptr<storage::partition_log> log_;
  std::optional<rill::error> fencing_;  // set while a recovery is failing (the log's own error is gone with it)
  std::uint64_t recoveries_ = 0;
  storage::producer_table written_;   // producers as of the last successful append
  storage::producer_table accepted_;  // including appends still in flight (what checks use)
  std::map<std::string, std::int64_t> consumer_offsets_;
  std::map<std::string, std::uint64_t> consumer_files_;  // the id of each consumer's offset file (reserved or written)
  std::uint64_t consumer_file_next_ = 0;
  bool offsets_dir_exists_ = false;  // offsets/consumers/ is there (listed at open, or made by a store)
  std::uint64_t consumers_max_ = 1'000;
  std::int64_t producer_expiry_ms_ = 86'400'000;
  std::uint64_t producers_max_ = 100'000;
};

// Consumer names: the same rules as stream and topic names (1-255 bytes of [A-Za-z0-9._-], not '.' or '..').
expected<void> check_consumer_name(const std::string& name);

}  // namespace rill::actors
