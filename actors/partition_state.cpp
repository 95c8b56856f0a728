#include "actors/partition_state.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include "actors/long_poll.h"
#include "actors/metadata_state.h"
#include "base/endian.h"
#include "net/status.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "storage/file_ops.h"
#include "storage/producer_sequence.h"

namespace rill::actors {
namespace {
// Consumer offset files: offsets/consumers/<file id>, the id 20 decimal digits, assigned per partition from 0 in the
// order consumers first store an offset. A client's consumer name never becomes a file name: names are 1-255 bytes,
// and any name turned into a file name could be '.' or '..', end in the atomic-file temp suffix (.tmp, which
// recovery deletes), or not fit NAME_MAX with that suffix added. The name is stored inside the file:
//   name_length u16 | name | offset i64 | crc32c u32 (of everything before it), big-endian.
constexpr const char* offsets_dir = "offsets/consumers";
constexpr const char* offsets_entry = "offsets";  // offsets_dir's first component: the partition directory's entry
constexpr std::size_t offset_file_id_digits = 20;
constexpr std::size_t offset_file_fixed_bytes = 2 + 8 + 4;
constexpr std::size_t offset_file_bytes_max = offset_file_fixed_bytes + name_bytes_max;
static_assert(name_bytes_max <= UINT16_MAX, "a name's length fits its u16 field");

std::string offset_file_name(std::uint64_t id) {
  return fmt::format("{:0{}}", id, offset_file_id_digits);
}

// The id of an offset file's name, or nullopt for any other name.
std::optional<std::uint64_t> offset_file_id_with_name(const std::string& name) {
  if (name.size() != offset_file_id_digits) {
    return std::nullopt;
  }
  std::uint64_t id = 0;
  for (char c : name) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (id > (UINT64_MAX - digit) / 10) {
      return std::nullopt;
    }
    id = id * 10 + digit;
  }
  return id;
}

std::vector<std::byte> encode_offset_file(const std::string& consumer, std::int64_t offset) {
  RILL_ASSERT(!consumer.empty());
  RILL_ASSERT(consumer.size() <= name_bytes_max, "consumer name of {} bytes", consumer.size());
  std::vector<std::byte> bytes(offset_file_fixed_bytes + consumer.size());
  store_be<std::uint16_t>(bytes.data(), static_cast<std::uint16_t>(consumer.size()));
  std::memcpy(bytes.data() + 2, consumer.data(), consumer.size());
  store_be<std::int64_t>(bytes.data() + 2 + consumer.size(), offset);
  store_be<std::uint32_t>(bytes.data() + bytes.size() - 4, storage::crc32c(bytes.data(), bytes.size() - 4));
  return bytes;
}

struct offset_file {
  std::string consumer;
  std::int64_t offset;
};
// nullopt when the bytes do not verify (length, CRC, a valid consumer name).
std::optional<offset_file> decode_offset_file(std::span<const std::byte> bytes) {
  if (bytes.size() < offset_file_fixed_bytes) {
    return std::nullopt;
  }
  const std::size_t name_length = load_be<std::uint16_t>(bytes.data());
  if (bytes.size() != offset_file_fixed_bytes + name_length) {
    return std::nullopt;
  }
  if (load_be<std::uint32_t>(bytes.data() + bytes.size() - 4) != storage::crc32c(bytes.data(), bytes.size() - 4)) {
    return std::nullopt;
  }
  offset_file out{std::string(reinterpret_cast<const char*>(bytes.data() + 2), name_length),
                  load_be<std::int64_t>(bytes.data() + 2 + name_length)};
  if (!check_consumer_name(out.consumer) || out.offset < 0) {
    return std::nullopt;
  }
  return out;
}

rill::unexpected fail(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

}  // namespace

expected<void> check_consumer_name(const std::string& name) {
  return check_new_name("consumer", name);
}

task<expected<std::unique_ptr<partition_state>>> partition_state::open(storage::io::engine& engine,
                                                                       storage::buffer_pool& pool, const clock& clk,
                                                                       storage::log_reporter& reporter, std::string dir,
                                                                       storage::log_options options) {
  options.owner_entries.emplace_back(offsets_entry);  // ours, not the log's: recovery stays quiet about it
  std::unique_ptr<partition_state> p(new partition_state(engine, pool, clk, reporter, dir, options));
  RILL_CO_TRY(log, co_await storage::partition_log::open(engine, pool, clk, reporter, dir, options));
  p->log_ = std::move(log);
  auto rebuilt = co_await p->rebuild_producers();
  if (rebuilt) {
    rebuilt = co_await p->load_consumer_offsets();
  }
  if (!rebuilt) {
    (void)co_await p->log_->close();
    co_return unexpected(std::move(rebuilt).error());
  }
  co_return p;
}

task<expected<void>> partition_state::rebuild_producers() {
  // The newest segment's batches, in order: enough for the retries a producer can still send.
  const auto bases = log_->segment_bases();
  storage::log_cursor cursor(*log_, bases.back(), true);
  for (;;) {
    RILL_CO_TRY(r, co_await cursor.next(UINT32_MAX, 1 << 20));
    if (r.batches == 0) {
      break;
    }
    for (const auto& v : r.batch_views()) {
      // Batches from before producer fields were checked may carry a producer id with a negative epoch or
      // sequence: they take no part in idempotence.
      if (v.producer_id() >= 0 && v.producer_epoch() >= 0 && v.base_sequence() >= 0) {
        written_.record(
            v.producer_id(), v.producer_epoch(),
            storage::producer_batch{v.base_sequence(), storage::sequence_plus(v.base_sequence(), v.last_offset_delta()),
                                    v.base_offset().value()},
            v.max_timestamp().value());
      }
    }
  }
  accepted_ = written_;
  co_return expected<void>{};
}

task<expected<produce_result>> partition_state::produce(storage::validated_batches batches) {
  if (fencing_) {
    co_return unexpected(*fencing_);  // a recovery is failing: the log is closed
  }
  batches.check_invariants();
  // As validated: the producer fields passed their batch's CRC. A copy of the list (not of the bytes): the batches
  // move to the log below.
  const std::vector<storage::validated_batch> headers = batches.batches();
  // Idempotence: every batch of the request is either a retry of a recent one, or the next in sequence.
  produce_result result;
  result.base_offsets.assign(headers.size(), -1);
  std::vector<std::size_t> fresh;  // indexes of batches to append
  // What this request's batches recorded in accepted_ before their append: each producer as it was (nullopt: not
  // known). A refusal in the loop below puts them back, so a refused request leaves no trace in the table.
  std::map<std::int64_t, std::optional<storage::producer_state>> touched_before;
  const auto refuse = [&](net::status st, std::string message) {
    for (const auto& [id, before] : touched_before) {
      accepted_.put(id, before);
    }
    return fail(st, std::move(message));
  };
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const auto& h = headers[i];
    if (h.producer_id < 0) {
      fresh.push_back(i);
      continue;
    }
    RILL_ASSERT(h.producer_epoch >= 0, "validate checked the epoch");
    RILL_ASSERT(h.base_sequence >= 0, "validate checked the sequence");
    const std::int32_t last = storage::last_sequence_of(h.base_sequence, static_cast<std::int32_t>(h.records));
    auto verdict = accepted_.check(h.producer_id, h.producer_epoch, h.base_sequence, h.records);
    switch (verdict.verdict) {
      case storage::producer_verdict::fresh:
        break;
      case storage::producer_verdict::duplicate:
        if (verdict.original->base_offset < 0) {
          co_return refuse(net::status::overloaded,
                           fmt::format("producer {}: sequence {} is a retry of a batch still being written; retry",
                                       h.producer_id, h.base_sequence));
        }
        result.base_offsets[i] = verdict.original->base_offset;  // a retry: answered with its original offset
        continue;
      case storage::producer_verdict::duplicate_sequence:
        co_return refuse(net::status::duplicate_sequence, std::move(verdict.detail));
      case storage::producer_verdict::sequence_gap:
        co_return refuse(net::status::sequence_gap, std::move(verdict.detail));
      case storage::producer_verdict::producer_fenced:
        co_return refuse(net::status::producer_fenced, std::move(verdict.detail));
      case storage::producer_verdict::unknown_producer_id:
        co_return refuse(net::status::unknown_producer_id, std::move(verdict.detail));
    }
    if (!touched_before.count(h.producer_id)) {
      touched_before[h.producer_id] = accepted_.find(h.producer_id);
    }
    // The offset is known after the append.
    // (The offset is known after the append, and so is the time: accepted_ is never trimmed by time itself.)
    accepted_.record(h.producer_id, h.producer_epoch, storage::producer_batch{h.base_sequence, last, -1}, -1);
    fresh.push_back(i);
  }
  if (fresh.empty()) {
    result.duplicate = true;
    co_return result;
  }
  // All fresh: the request's bytes as they are. Some retries: the fresh batches copied out (the only second copy).
  const bool all_fresh = fresh.size() == headers.size();
  storage::validated_batches to_append = all_fresh ? std::move(batches) : batches.subset(fresh);
  auto appended = co_await log_->append(std::move(to_append));
  if (!appended) {
    // Back to what is really written, for every producer this request (and those queued with it) touched.
    for (const auto& [id, p] : touched_before) {
      accepted_.put(id, written_.find(id));
    }
    co_return unexpected(std::move(appended).error());
  }
  std::int64_t offset = appended->base_offset.value();
  for (std::size_t i : fresh) {
    const auto& h = headers[i];
    result.base_offsets[i] = offset;
    if (h.producer_id >= 0) {
      const std::int32_t last = storage::last_sequence_of(h.base_sequence, static_cast<std::int32_t>(h.records));
      written_.record(h.producer_id, h.producer_epoch, storage::producer_batch{h.base_sequence, last, offset},
                      appended->timestamp.value());
      accepted_.set_offset(h.producer_id, h.base_sequence, last, offset);  // recorded before the append
    }
    offset += h.records;
  }
  // Idle producers go (issue 38, finding 4): from accepted_ too, unless a batch of theirs is still being written
  // (then its append records the producer again, as new).
  for (const auto& gone : written_.trim(appended->timestamp.value() - producer_expiry_ms_, producers_max_)) {
    const auto held = accepted_.find(gone.producer_id);
    if (held && held->epoch == gone.state.epoch && held->last_sequence == gone.state.last_sequence) {
      accepted_.put(gone.producer_id, std::nullopt);
    }
  }
  result.timestamp = appended->timestamp;
  co_return result;
}

task<expected<storage::read_result>> partition_state::poll(proto::PollRequest request,
                                                           std::optional<std::int64_t> resume_at,
                                                           std::uint64_t default_max_bytes) {
  if (fencing_) {
    co_return unexpected(*fencing_);
  }
  const bool named = request.consumer().kind_case() == proto::Consumer::kName;
  const auto stored = named ? consumer_offset(request.consumer().name()) : std::nullopt;
  const auto query =
      read_request_for(request, resume_at, stored, log_->log_start(), log_->log_end(), default_max_bytes);
  RILL_CO_TRY(result, co_await log_->read(query));
  if (request.auto_commit() && result.batches > 0 && named) {
    RILL_CO_TRY_VOID(co_await store_consumer_offset(request.consumer().name(), result.next_offset.value()));
  }
  co_return result;
}

void describe_log(const storage::partition_log& log, proto::PartitionInfo& out) {
  const auto st = log.stats();
  out.set_log_start(static_cast<std::uint64_t>(log.log_start().value()));
  out.set_high_watermark(static_cast<std::uint64_t>(log.committed().value()));
  out.set_log_end(static_cast<std::uint64_t>(log.log_end().value()));
  out.set_bytes(st.bytes);
  out.set_segments(static_cast<std::uint32_t>(st.segments));
}

proto::PartitionInfo partition_state::info(std::uint32_t partition_id) const {
  proto::PartitionInfo out;
  out.set_id(partition_id);
  describe_log(*log_, out);
  if (const auto f = fencing()) {
    // The cause without the server's paths (no reply shows them): the text after the last ": ", which for an I/O
    // error is the errno's ("No space left on device"); the server's log has the whole message.
    const std::string& m = f->message();
    const auto at = m.rfind(": ");
    out.set_fenced("a storage failure: " +
                   (at == std::string::npos ? std::string("see the server's log") : m.substr(at + 2)));
  }
  out.set_recoveries(recoveries_);
  return out;
}

std::optional<std::int64_t> partition_state::consumer_offset(const std::string& consumer) const {
  auto it = consumer_offsets_.find(consumer);
  if (it == consumer_offsets_.end()) {
    return std::nullopt;
  }
  return it->second;
}

task<expected<std::optional<std::int64_t>>> partition_state::store_consumer_offset(std::string consumer,
                                                                                   std::int64_t offset) {
  RILL_CO_TRY_VOID(check_consumer_name(consumer));
  if (offset < 0 || offset > log_->log_end().value()) {
    co_return fail(
        net::status::offset_out_of_range,
        fmt::format("offset {} for consumer '{}': the partition has offsets up to {}",
                    static_cast<std::uint64_t>(offset), consumer, static_cast<std::uint64_t>(log_->log_end().value())));
  }
  // Counted by offset files (reserved or written), since each new name takes one.
  if (!consumer_files_.contains(consumer) && consumer_files_.size() >= consumers_max_) {
    co_return fail(net::status::limit_exceeded,
                   fmt::format("limits.consumers_per_partition_max = {}: partition {} has {} named consumers; "
                               "consumer '{}' is refused",
                               consumers_max_, dir_, consumer_files_.size(), consumer));
  }
  // The file id is reserved before anything is awaited: stores for new consumers run concurrently, and each must be
  // counted against the limit above before the next one checks it. Two stores never share an id, and a store after
  // a failed one reuses it.
  auto [file, fresh] = consumer_files_.try_emplace(consumer, consumer_file_next_);
  if (fresh) {
    ++consumer_file_next_;
  }
  const std::string dir = storage::join_path(dir_, offsets_dir);
  if (!offsets_dir_exists_) {
    RILL_CO_TRY_VOID(co_await storage::make_dirs(engine_, dir));  // mkdir -p: concurrent first stores may both ask
    offsets_dir_exists_ = true;
  }
  RILL_CO_TRY_VOID(co_await storage::write_file_atomic(engine_, dir, offset_file_name(file->second),
                                                       encode_offset_file(consumer, offset)));
  const auto previous = consumer_offset(consumer);
  if (previous && *previous > offset) {
    reporter_.notice(fmt::format("{}: consumer '{}' moved back from offset {} to {}", dir_, consumer,
                                 static_cast<std::uint64_t>(*previous), static_cast<std::uint64_t>(offset)));
  }
  consumer_offsets_[consumer] = offset;
  co_return previous;
}

task<expected<void>> partition_state::load_consumer_offsets() {
  const std::string dir = storage::join_path(dir_, offsets_dir);
  auto names = co_await storage::list_dir(engine_, dir);
  if (!names) {
    co_return expected<void>{};  // no consumer stored an offset yet
  }
  offsets_dir_exists_ = true;
  std::sort(names->begin(), names->end());  // in id order, so a (never expected) duplicate name keeps the oldest
  for (const auto& name : *names) {
    if (storage::is_temp_name(name)) {
      continue;  // an interrupted replacement: the file it was to replace is intact
    }
    const auto id = offset_file_id_with_name(name);
    if (!id) {
      reporter_.notice(
          fmt::format("{}: ignoring {}: not a consumer offset file (offset files named by the consumer, "
                      "before they were numbered, are not read)",
                      dir, name));
      continue;
    }
    consumer_file_next_ = std::max(consumer_file_next_, *id + 1);  // never reuse an id, even a corrupt file's
    const std::string path = storage::join_path(dir, name);
    auto bytes = co_await storage::read_whole_file(engine_, path, offset_file_bytes_max);
    const auto decoded = bytes && bytes->has_value() ? decode_offset_file(**bytes) : std::nullopt;
    if (!decoded) {
      reporter_.corruption(path, 0, "consumer offset file does not verify",
                           "ignored: the consumer starts from its poll strategy");
      continue;
    }
    if (consumer_files_.count(decoded->consumer)) {
      reporter_.corruption(path, 0, fmt::format("a second offset file for consumer '{}'", decoded->consumer),
                           fmt::format("ignored: the consumer's offset is that of {}",
                                       offset_file_name(consumer_files_[decoded->consumer])));
      continue;
    }
    consumer_files_[decoded->consumer] = *id;
    consumer_offsets_[decoded->consumer] = decoded->offset;
  }
  co_return expected<void>{};
}

std::optional<rill::error> partition_state::fencing() const {
  if (fencing_) {
    return fencing_;
  }
  return log_->fenced() ? std::optional(*log_->fencing_error()) : std::nullopt;
}

task<expected<void>> partition_state::recover_log() {
  RILL_ASSERT(fencing_ || log_->fenced(), "recover_log() of {}, which is not fenced", dir_);
  if (!fencing_) {
    fencing_ = *log_->fencing_error();
  }
  // What the fenced log had synced is all that is trusted; the close does not sync (the log is fenced).
  const offset_t trusted = log_->synced_end();
  const offset_t end_before = log_->log_end();
  (void)co_await log_->close();
  storage::log_options options = options_;
  options.trusted_end = trusted;
  RILL_CO_TRY(log, co_await storage::partition_log::open(engine_, pool_, clk_, reporter_, dir_, options));
  RILL_ASSERT(log->log_end() <= std::max(trusted, log->log_start()),
              "{}: recovery kept offsets up to {} above the trusted end {}", dir_, log->log_end().value(),
              trusted.value());
  // The new log has no callbacks: the caller installs them again.
  log_ = std::move(log);
  written_.clear();
  accepted_.clear();
  if (auto rebuilt = co_await rebuild_producers(); !rebuilt) {
    (void)co_await log_->close();  // closed and still fenced (fencing_), as after a failed reopen: try again later
    co_return unexpected(std::move(rebuilt).error());
  }
  reporter_.notice(
      fmt::format("{}: recovered from a storage failure ({}); the log ends at {} (it had reached {}; "
                  "nothing above the synced end was kept)",
                  dir_, fencing_->message(), log_->log_end().value(), end_before.value()));
  fencing_.reset();
  ++recoveries_;
  co_return expected<void>{};
}

task<expected<void>> partition_state::close() {
  co_return co_await log_->close();
}

}  // namespace rill::actors
