#include "simulation/workload.h"

#include <fmt/core.h>
#include <xxhash.h>
#include "base/assert.h"

#include "base/endian.h"
#include "config/log_config.h"
#include "net/proto/coordinator.pb.h"
#include "net/status.h"
#include "storage/producer_sequence.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"

namespace rill::simulation {

using consensus::command;
using consensus::message;

namespace {
constexpr std::size_t key_bytes = 20;

storage::batch_limits produce_limits() {
  storage::batch_limits l;
  l.batch_bytes_max = 64 * 1024;
  l.dense_offsets = true;
  return l;
}

void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  append_le<std::uint64_t>(out, v);
}
}  // namespace

std::vector<std::byte> make_batch(payload_id id, std::uint32_t records, std::size_t filler, prng& rng,
                                  std::int32_t base_sequence) {
  RILL_ASSERT(records >= 1);
  storage::batch_builder b;
  if (base_sequence >= 0) {
    b.producer(static_cast<std::int64_t>(id.client), 0, base_sequence);
  }
  for (std::uint32_t i = 0; i < records; ++i) {
    std::byte key[key_bytes];
    store_le<std::uint64_t>(key, id.client);
    store_le<std::uint64_t>(key + 8, id.sequence);
    store_le<std::uint32_t>(key + 16, i);
    std::vector<std::byte> value(filler);
    for (auto& v : value) {
      v = static_cast<std::byte>(rng.next());
    }
    b.add(std::span<const std::byte>(key, key_bytes), std::span<const std::byte>(value));
  }
  auto built = b.build();
  RILL_ASSERT(built.has_value());
  return std::move(*built);
}

std::vector<std::pair<payload_id, std::uint32_t>> records_of_batch(std::span<const std::byte> batch) {
  std::vector<std::pair<payload_id, std::uint32_t>> out;
  auto view = storage::batch_view::validate(batch, produce_limits());
  if (!view || view->size() != batch.size()) {
    return {};
  }
  std::vector<std::byte> scratch;
  auto region = storage::records_of(*view, 1u << 20, scratch);
  if (!region) {
    return {};
  }
  storage::record_reader rr(*region);
  for (;;) {
    auto r = rr.next();
    if (!r) {
      return {};
    }
    if (!r->has_value()) {
      break;
    }
    const auto& key = (*r)->key;
    if (!key || key->size() != key_bytes) {
      return {};
    }
    out.emplace_back(payload_id{load_le<std::uint64_t>(key->data()), load_le<std::uint64_t>(key->data() + 8)},
                     load_le<std::uint32_t>(key->data() + 16));
  }
  return out;
}

std::optional<batch_producer> producer_of_batch(std::span<const std::byte> batch) {
  auto view = storage::batch_view::validate(batch, produce_limits());
  if (!view || view->size() != batch.size() || view->producer_id() < 0 || view->producer_epoch() < 0 ||
      view->base_sequence() < 0) {
    return std::nullopt;
  }
  return batch_producer{view->producer_id(), view->producer_epoch(), view->base_sequence(),
                        storage::sequence_plus(view->base_sequence(), view->last_offset_delta())};
}

payload_id payload_of(std::span<const std::byte> batch) {
  auto records = records_of_batch(batch);
  return records.empty() ? payload_id{} : records.front().first;
}

namespace {
actors::group_machine_options coordinator_options(bool bug_commit_unowned) {
  actors::group_machine_options o;
  o.operation = operation_coordinator;
  o.bug_commit_unowned = bug_commit_unowned;
  return o;
}
}  // namespace

ledger::ledger(bool bug_idempotence_committed_only, bool bug_coordinator_commit_unowned)
    : bug_idempotence_committed_only_(bug_idempotence_committed_only),
      coordinator_(coordinator_options(bug_coordinator_commit_unowned),
                   [clock = coordinator_clock_ms_] { return *clock; }) {
  const auto snap = metadata_.snapshot();
  metadata_digest_ = XXH3_64bits(snap.data(), snap.size());
  const auto groups = coordinator_.snapshot();
  coordinator_digest_ = XXH3_64bits(groups.data(), groups.size());
  base_digest_ = digest();  // the state before any op (a checkpoint of ops without user payloads restores it)
}

std::uint64_t ledger::digest() const noexcept {
  std::uint64_t d = hash_ ^ (applied_ * 0x9e3779b97f4a7c15ULL) ^ (next_offset_ * 0xc2b2ae3d27d4eb4fULL);
  for (const auto& [client, offset] : consumer_offsets_) {
    d = (d ^ (client * 31 + offset)) * 0x100000001b3ULL;
  }
  for (const auto& [id, p] : producers_.producers()) {
    d = (d ^ (static_cast<std::uint64_t>(id) * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(p.epoch))) *
        0x100000001b3ULL;
    for (const auto& b : p.recent) {
      d = (d ^ (static_cast<std::uint64_t>(b.first_sequence) << 32 ^ static_cast<std::uint64_t>(b.last_sequence) ^
                static_cast<std::uint64_t>(b.base_offset) * 31 ^ b.tag * 0xc2b2ae3d27d4eb4fULL)) *
          0x100000001b3ULL;
    }
  }
  return d ^ metadata_digest_ ^ executed_digest_ ^ (coordinator_digest_ * 0x9e3779b97f4a7c15ULL);
}

namespace {
// operation_produce_answered's body: verdict, producer id, epoch, first and last sequence, the original's op.
constexpr std::size_t answered_bytes = 1 + 8 + 2 + 4 + 4 + 8;

// A request's share of the executed set's digest (an XOR of these: O(1) per op, the same for the same set).
std::uint64_t executed_key(std::uint64_t client, std::uint64_t request) {
  const std::uint64_t both[2] = {client, request};
  return XXH3_64bits(both, sizeof both);
}

void put_produce_reply(std::vector<std::byte>& out, const ledger::produce_reply& r) {
  put_u64(out, r.applied);
  put_u64(out, r.hash);
  put_u64(out, r.base_offset);
  put_u64(out, r.records);
  put_u64(out, r.op);
  put_u64(out, static_cast<std::uint64_t>(r.verdict));
}
}  // namespace

std::pair<std::uint64_t, std::uint32_t> ledger::absorb(const consensus::header& prepare,
                                                       std::span<const std::byte> body) {
  const auto records = records_of_batch(body);
  const payload_id id = records.empty() ? payload_id{} : records.front().first;
  if (!records.empty() && !seen_.insert(id).second) {
    ++duplicates_;  // a batch in the log twice
  }
  by_op_[prepare.op] = id;
  const std::uint64_t base = next_offset_;
  const auto count = static_cast<std::uint32_t>(records.size());
  if (count > 0) {
    // Stamped by the primary against the same history: the offsets apply gives are the ones in the bytes.
    const auto v = storage::batch_view::trusted(body);
    RILL_ASSERT(v.base_offset().value() == static_cast<std::int64_t>(base),
                "op {}'s batch was stamped at offset {}; the ops before it end at {}", prepare.op,
                v.base_offset().value(), base);
    last_timestamp_ = std::max(last_timestamp_, v.max_timestamp().value());
  }
  next_offset_ += count;
  offsets_by_op_[prepare.op] = {base, count};
  if (auto p = producer_of_batch(body); p && count > 0) {
    // Fresh when the primary prepared it (unless a deliberate bug let a retry in: then it is not recorded again).
    if (producers_.check(p->id, p->epoch, p->first_sequence, count).verdict == storage::producer_verdict::fresh) {
      producers_.record(
          p->id, p->epoch,
          storage::producer_batch{p->first_sequence, p->last_sequence, static_cast<std::int64_t>(base), prepare.op},
          0);  // (the ledger has no time and never trims)
    }
  }
  return {base, count};
}

void ledger::skip(const consensus::header& prepare, std::span<const std::byte> body) {
  if (prepare.operation == operation_produce) {
    absorb(prepare, body);
    digests_[prepare.op] = digest();
  }
}

consensus::state_machine::proposal ledger::prepare(const consensus::header& request, const prepare_context& at,
                                                   std::vector<std::byte> body,
                                                   std::span<const consensus::message* const> pending) {
  if (request.operation == operation_coordinator) {
    *coordinator_clock_ms_ = timestamp_base_ms + static_cast<std::int64_t>(at.ticks);
    return coordinator_.prepare(request, at, std::move(body), pending);
  }
  if (request.operation != operation_produce) {
    return {request.operation, std::move(body)};
  }
  const auto fields = producer_of_batch(body);
  RILL_ASSERT(fields.has_value(), "a produce request whose body is not one idempotent producer's batch");
  const std::int64_t records = storage::sequence_distance(fields->first_sequence, fields->last_sequence) + 1;
  // The producer as it will be once every pending op is applied (their batches are in the log: executed or not).
  std::optional<storage::producer_state> state = producers_.find(fields->id);
  if (!bug_idempotence_committed_only_) {
    for (const consensus::message* m : pending) {
      if (m->h.operation != operation_produce) {
        continue;
      }
      const auto f = producer_of_batch(m->body);
      if (!f || f->id != fields->id) {
        continue;
      }
      const std::int64_t n = storage::sequence_distance(f->first_sequence, f->last_sequence) + 1;
      if (storage::producer_table::check(state, f->id, f->epoch, f->first_sequence, n).verdict ==
          storage::producer_verdict::fresh) {
        if (!state) {
          state.emplace();
        }
        storage::producer_table::record(*state, f->epoch,
                                        storage::producer_batch{f->first_sequence, f->last_sequence, -1, m->h.op}, 0);
      }
    }
  }
  const auto c = storage::producer_table::check(state, fields->id, fields->epoch, fields->first_sequence, records);
  if (c.verdict == storage::producer_verdict::fresh) {
    // The primary stamps the batch: offsets after every batch before it (committed, then pending), leader epoch =
    // the view, and a log-append time that never goes back. Backups append these bytes as they are.
    std::int64_t base = static_cast<std::int64_t>(next_offset_);
    std::int64_t time = last_timestamp_;
    for (const consensus::message* m : pending) {
      if (m->h.operation == operation_produce) {
        const auto v = storage::batch_view::trusted(m->body);
        base = v.next_offset().value();
        time = std::max(time, v.max_timestamp().value());
      }
    }
    time = std::max(time, timestamp_base_ms + static_cast<std::int64_t>(at.ticks));
    std::uint32_t crc_tail = 0;
    const auto v = storage::batch_view::validate(body, produce_limits(), &crc_tail);
    RILL_ASSERT(v.has_value() && v->size() == body.size());
    storage::stamp_batch(body, offset_t(base), epoch_t(static_cast<std::int32_t>(at.view.value())),
                         timestamp_ms_t(time), crc_tail);
    return {request.operation, std::move(body)};
  }
  std::vector<std::byte> answer(answered_bytes);
  answer[0] = static_cast<std::byte>(c.verdict);
  store_le<std::int64_t>(answer.data() + 1, fields->id);
  store_le<std::int16_t>(answer.data() + 9, fields->epoch);
  store_le<std::int32_t>(answer.data() + 11, fields->first_sequence);
  store_le<std::int32_t>(answer.data() + 15, fields->last_sequence);
  store_le<std::uint64_t>(answer.data() + 19, c.original ? c.original->tag : 0);
  return {operation_produce_answered, std::move(answer)};
}

std::vector<std::byte> ledger::apply(const consensus::header& prepare, std::span<const std::byte> body) {
  std::vector<std::byte> reply;
  if (prepare.operation == operation_metadata) {
    reply = metadata_.apply(prepare, body);
    const auto snap = metadata_.snapshot();
    metadata_digest_ = XXH3_64bits(snap.data(), snap.size());
  } else if (prepare.operation == operation_coordinator) {
    reply = coordinator_.apply(prepare, body);
    coordinator_.check_invariants();
    const auto snap = coordinator_.snapshot();
    coordinator_digest_ = XXH3_64bits(snap.data(), snap.size());
  } else if (prepare.operation == operation_consumer_offset) {
    std::uint64_t stored = 0;
    if (body.size() == 16) {
      std::uint64_t& at = consumer_offsets_[load_le<std::uint64_t>(body.data())];
      const std::uint64_t wanted = load_le<std::uint64_t>(body.data() + 8);
      if (wanted >= at && wanted <= next_offset_) {
        at = wanted;  // a position never goes back, nor past what exists
      }
      stored = at;
    }
    put_u64(reply, stored);
  } else if (prepare.operation == operation_produce_answered) {
    produce_reply r{applied_, hash_, 0, 0, 0, storage::producer_verdict::duplicate_sequence};
    if (body.size() == answered_bytes) {
      r.verdict = static_cast<storage::producer_verdict>(body[0]);
      const auto id = load_le<std::int64_t>(body.data() + 1);
      const auto first = load_le<std::int32_t>(body.data() + 11);
      const auto last = load_le<std::int32_t>(body.data() + 15);
      const auto original = load_le<std::uint64_t>(body.data() + 19);
      if (r.verdict == storage::producer_verdict::duplicate) {
        // The original precedes this op in the log, so it is applied by now; it may have left the kept batches
        // since (a producer far ahead of its retry): then its offset is no longer known.
        r.verdict = storage::producer_verdict::duplicate_sequence;
        if (const auto p = producers_.find(id)) {
          for (const auto& b : p->recent) {
            if (b.first_sequence == first && b.last_sequence == last && b.tag == original) {
              r.verdict = storage::producer_verdict::duplicate;
              r.base_offset = static_cast<std::uint64_t>(b.base_offset);
              r.records = static_cast<std::uint32_t>(storage::sequence_distance(first, last) + 1);
              r.op = original;
            }
          }
        }
      }
    }
    put_produce_reply(reply, r);
  } else {
    const auto [base, count] = absorb(prepare, body);
    ++applied_;
    hash_ = hash_ * 0x100000001b3ULL ^ prepare.checksum.low;
    put_produce_reply(reply, produce_reply{applied_, hash_, base, count, prepare.op, storage::producer_verdict::fresh});
  }
  if (executed_.emplace(prepare.client, prepare.request).second) {
    executed_digest_ ^= executed_key(prepare.client, prepare.request);
  } else {
    ++duplicates_;  // a request executed twice: the client table should have answered it
  }
  digests_[prepare.op] = digest();
  return reply;
}

std::optional<ledger::produce_reply> ledger::decode_produce_reply(std::span<const std::byte> body) {
  if (body.size() != 48) {
    return std::nullopt;
  }
  return produce_reply{load_le<std::uint64_t>(body.data()),
                       load_le<std::uint64_t>(body.data() + 8),
                       load_le<std::uint64_t>(body.data() + 16),
                       static_cast<std::uint32_t>(load_le<std::uint64_t>(body.data() + 24)),
                       load_le<std::uint64_t>(body.data() + 32),
                       static_cast<storage::producer_verdict>(load_le<std::uint64_t>(body.data() + 40))};
}

std::optional<std::uint64_t> ledger::decode_offset_reply(std::span<const std::byte> body) {
  if (body.size() != 8) {
    return std::nullopt;
  }
  return load_le<std::uint64_t>(body.data());
}

// Snapshot: applied, hash, duplicates, next offset, last timestamp, then counted lists: (consumer, offset) pairs,
// (client, sequence) payloads, (client, request) pairs executed, producers (id, epoch, last sequence, then their kept
// batches: first, last, base offset, op); then the metadata machine's snapshot (its length first), then the
// coordinator's (the rest). All integers 8 bytes.
std::vector<std::byte> ledger::snapshot() const {
  std::vector<std::byte> out;
  put_u64(out, applied_);
  put_u64(out, hash_);
  put_u64(out, duplicates_);
  put_u64(out, next_offset_);
  put_u64(out, static_cast<std::uint64_t>(last_timestamp_));
  put_u64(out, consumer_offsets_.size());
  for (const auto& [client, offset] : consumer_offsets_) {
    put_u64(out, client);
    put_u64(out, offset);
  }
  put_u64(out, seen_.size());
  for (const auto& id : seen_) {
    put_u64(out, id.client);
    put_u64(out, id.sequence);
  }
  put_u64(out, executed_.size());
  for (const auto& [client, request] : executed_) {
    put_u64(out, client);
    put_u64(out, request);
  }
  put_u64(out, producers_.size());
  for (const auto& [id, p] : producers_.producers()) {
    put_u64(out, static_cast<std::uint64_t>(id));
    put_u64(out, static_cast<std::uint64_t>(p.epoch));
    put_u64(out, static_cast<std::uint64_t>(p.last_sequence));
    put_u64(out, p.recent.size());
    for (const auto& b : p.recent) {
      put_u64(out, static_cast<std::uint64_t>(b.first_sequence));
      put_u64(out, static_cast<std::uint64_t>(b.last_sequence));
      put_u64(out, static_cast<std::uint64_t>(b.base_offset));
      put_u64(out, b.tag);
    }
  }
  const auto meta = metadata_.snapshot();
  put_u64(out, meta.size());
  out.insert(out.end(), meta.begin(), meta.end());
  const auto groups = coordinator_.snapshot();
  out.insert(out.end(), groups.begin(), groups.end());  // the rest
  return out;
}

bool ledger::restore(std::span<const std::byte> bytes) {
  std::size_t at = 0;
  bool ok = true;
  const auto u64 = [&]() -> std::uint64_t {
    if (!ok || bytes.size() - at < 8) {
      ok = false;
      return 0;
    }
    at += 8;
    return load_le<std::uint64_t>(bytes.data() + at - 8);
  };
  // A count of entries of `words` integers each, no more than the bytes left could hold.
  const auto count = [&](std::size_t words) -> std::uint64_t {
    const std::uint64_t n = u64();
    if (n > (bytes.size() - at) / (8 * words)) {
      ok = false;
      return 0;
    }
    return n;
  };
  const std::uint64_t applied = u64();
  const std::uint64_t hash = u64();
  const std::uint64_t duplicates = u64();
  const std::uint64_t next_offset = u64();
  const auto last_timestamp = static_cast<std::int64_t>(u64());
  std::map<std::uint64_t, std::uint64_t> offsets;
  for (std::uint64_t i = 0, n = count(2); i < n; ++i) {
    const std::uint64_t client = u64();
    offsets[client] = u64();
  }
  std::set<payload_id> seen;
  for (std::uint64_t i = 0, n = count(2); i < n; ++i) {
    const std::uint64_t client = u64();
    seen.insert(payload_id{client, u64()});
  }
  std::set<std::pair<std::uint64_t, std::uint64_t>> executed;
  for (std::uint64_t i = 0, n = count(2); i < n; ++i) {
    const std::uint64_t client = u64();
    executed.emplace(client, u64());
  }
  storage::producer_table producers;
  for (std::uint64_t i = 0, n = count(4); i < n && ok; ++i) {
    const auto id = static_cast<std::int64_t>(u64());
    const auto epoch = static_cast<std::int16_t>(u64());
    (void)u64();  // the last sequence: the newest kept batch's
    const std::uint64_t kept = count(4);
    if (id < 0 || epoch < 0 || kept == 0 || kept > storage::producer_table::batches_kept) {
      return false;
    }
    for (std::uint64_t k = 0; k < kept; ++k) {
      storage::producer_batch b;
      b.first_sequence = static_cast<std::int32_t>(u64());
      b.last_sequence = static_cast<std::int32_t>(u64());
      b.base_offset = static_cast<std::int64_t>(u64());
      b.tag = u64();
      if (b.first_sequence < 0 || b.last_sequence < 0) {
        return false;
      }
      producers.record(id, epoch, b, 0);
    }
  }
  const std::uint64_t meta_bytes = u64();
  if (!ok || meta_bytes > bytes.size() - at) {
    return false;
  }
  const auto meta = bytes.subspan(at, meta_bytes);
  actors::metadata_machine metadata;
  if (!metadata.restore(meta)) {
    return false;
  }
  const auto groups = bytes.subspan(at + meta_bytes);
  if (!coordinator_.restore(groups)) {  // (last: nothing below fails, so the restore is all or nothing)
    return false;
  }
  coordinator_digest_ = XXH3_64bits(groups.data(), groups.size());
  applied_ = applied;
  hash_ = hash;
  duplicates_ = duplicates;
  next_offset_ = next_offset;
  last_timestamp_ = last_timestamp;
  consumer_offsets_ = std::move(offsets);
  metadata_ = std::move(metadata);
  metadata_digest_ = XXH3_64bits(meta.data(), meta.size());
  seen_ = std::move(seen);
  executed_ = std::move(executed);
  executed_digest_ = 0;
  for (const auto& [client, request] : executed_) {
    executed_digest_ ^= executed_key(client, request);
  }
  producers_ = std::move(producers);
  by_op_.clear();
  offsets_by_op_.clear();
  digests_.clear();
  base_digest_ = digest();
  return true;
}

std::uint64_t ledger::digest_at(std::uint64_t op) const {
  auto it = digests_.upper_bound(op);
  return it == digests_.begin() ? base_digest_ : std::prev(it)->second;
}

payload_id ledger::payload_at(std::uint64_t op) const {
  auto it = by_op_.find(op);
  return it == by_op_.end() ? payload_id{} : it->second;
}

std::pair<std::uint64_t, std::uint32_t> ledger::offsets_at(std::uint64_t op) const {
  auto it = offsets_by_op_.find(op);
  return it == offsets_by_op_.end() ? std::pair<std::uint64_t, std::uint32_t>{0, 0} : it->second;
}

sim_client::sim_client(std::uint64_t cluster, std::uint64_t id, std::uint8_t replica_count,
                       const client_options& options, std::uint64_t seed)
    : cluster_(cluster), id_(id), replica_count_(replica_count), options_(options), rng_(seed), session_(id) {
  RILL_ASSERT(replica_count_ >= 1);
  RILL_ASSERT(client_of_session(id_) == id_, "client id {} leaves no room for session numbers", id_);
  in_flight_payload_ = payload_id{id_, 1};
}

void sim_client::tick(std::uint64_t now, const sender& send) {
  if (in_flight_) {
    if (now - sent_at_ >= options_.request_timeout_ticks) {
      target_ = static_cast<std::uint8_t>((target_ + 1) % replica_count_);
      if (in_flight_->h.operation == operation_produce && !spares_.empty() &&
          rng_.chance_ppm(options_.session_switch_ppm)) {
        switch_session();  // the next tick registers the new session
        return;
      }
      send_current(now, send, true);
    }
    return;
  }
  if (registered_ && completed_ >= options_.requests && !position_to_commit_) {
    return;
  }
  message m;
  m.h.cmd = command::request;
  m.h.cluster = cluster_;
  m.h.client = session_;
  if (!registered_) {
    request_ = 0;
    m.h.operation = consensus::operation_register;
  } else if (!retry_body_ && spares_.empty() && sessions_opened_ < options_.sessions_max &&
             completed_ < options_.requests) {
    // A spare session, registered ahead, so that a retry can move to it at once.
    m.h.client = id_ | (std::uint64_t{sessions_opened_++} << session_number_shift);
    m.h.operation = consensus::operation_register;
  } else if (retry_body_) {
    ++request_;
    m.h.operation = operation_produce;
    m.body = std::move(*retry_body_);  // the same batch, the same sequences
    retry_body_.reset();
  } else if (completed_ < options_.requests && options_.metadata_only &&
             rng_.below(1'000'000) < options_.coordinator_ppm) {
    ++request_;
    m.h.operation = operation_coordinator;
    m.body = coordinator_command();
  } else if (completed_ < options_.requests && (options_.metadata_only || rng_.below(6) == 0)) {
    ++request_;
    m.h.operation = operation_metadata;
    m.body = metadata_command(now);
  } else if (position_to_commit_) {
    ++request_;
    m.h.operation = operation_consumer_offset;
    m.body.resize(16);
    store_le<std::uint64_t>(m.body.data(), id_);  // the consumer: the client, whichever session carries it
    store_le<std::uint64_t>(m.body.data() + 8, *position_to_commit_);
    position_to_commit_.reset();
  } else {
    ++request_;
    m.h.operation = operation_produce;
    m.body = make_batch(in_flight_payload_, static_cast<std::uint32_t>(1 + rng_.below(3)),
                        rng_.below(options_.body_bytes_max / 3 + 1), rng_, next_sequence_);
  }
  if (m.h.operation == consensus::operation_register) {
    m.h.request = 0;
  } else {
    m.h.request = request_;
    consensus::set_session(m.h, session_op_);
  }
  consensus::seal(m);
  in_flight_ = std::move(m);
  first_sent_at_ = now;
  send_current(now, send, false);
}

void sim_client::switch_session() {
  if (in_flight_ && in_flight_->h.operation == operation_produce) {
    retry_body_ = in_flight_->body;
  }
  in_flight_.reset();
  request_ = 0;
  if (!spares_.empty()) {
    session_ = spares_.front().client;
    session_op_ = spares_.front().op;
    spares_.pop_front();
    return;
  }
  RILL_ASSERT(sessions_opened_ < (1u << 16));
  registered_ = false;
  session_ = id_ | (std::uint64_t{sessions_opened_++} << session_number_shift);
}

std::vector<std::byte> sim_client::metadata_command(std::uint64_t now) {
  proto::MetadataCommand cmd;
  cmd.set_time_ms(1'700'000'000'000 + now);
  const std::uint64_t n = ++metadata_sent_;
  const std::uint64_t pick = rng_.below(4);
  if (streams_.empty() || pick == 0) {
    cmd.mutable_create_stream()->set_name(fmt::format("c{}-{}", id_, n));
    in_flight_sent_ = sent_kind::create_stream;
  } else if (pick == 3) {
    cmd.mutable_delete_stream()->set_stream_id(streams_.back());
    in_flight_sent_ = sent_kind::delete_stream;
  } else {
    proto::TopicConfig wanted;
    wanted.set_partitions(static_cast<std::uint32_t>(1 + rng_.below(3)));
    auto complete = actors::complete_topic_config(wanted, config::log_config{});
    RILL_ASSERT(complete.has_value());
    auto* t = cmd.mutable_create_topic();
    t->set_stream_id(streams_[rng_.below(streams_.size())]);
    t->set_name(fmt::format("t{}", n));
    *t->mutable_config() = *complete;
    in_flight_sent_ = sent_kind::create_topic;
  }
  const std::string bytes = cmd.SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  return {p, p + bytes.size()};
}

// Two groups of four partitions (session timeout 400 ticks), two members per client. A member joins, heartbeats
// (giving back what it is asked to), commits what it owns under the generation it knows (sometimes an older one, or
// a partition it does not own: those are refused), sometimes leaves; any client
// may ask for an expiry or a refresh (as a primary does, by time and at a takeover).
std::vector<std::byte> sim_client::coordinator_command() {
  proto::CoordinatorCommand c;
  const auto group = static_cast<std::uint32_t>(rng_.below(2));
  const auto member = static_cast<std::uint32_t>(rng_.below(2));
  c.set_stream_id(1);
  c.set_topic_id(1);
  c.set_group(group == 0 ? std::string("g0") : std::string("\0g1", 3));  // (any bytes)
  const std::string id = fmt::format("c{}m{}", id_, member);
  member_knows& k = members_[{group, member}];
  const std::uint64_t pick = rng_.below(100);
  if (pick < 3 || group_missing_[group]) {
    c.mutable_create()->set_partitions(4);
    c.mutable_create()->set_session_timeout_ms(400);
  } else if (pick < 8) {
    c.mutable_expire();
  } else if (pick < 10) {
    c.mutable_refresh();
  } else if (!k.joined || pick < 14) {
    c.mutable_join()->set_member_id(id);
    c.mutable_join()->set_conn(id_);
  } else if (pick < 17) {
    c.mutable_leave()->set_member_id(id);
  } else if (pick < 45 || k.owned.empty()) {
    c.mutable_heartbeat()->set_member_id(id);
    for (const auto p : k.revoking) {
      c.mutable_heartbeat()->add_released(p);
    }
  } else {
    auto* commit = c.mutable_commit();
    commit->set_member_id(id);
    commit->set_generation(k.generation - (rng_.below(10) == 0 ? 1 : 0));  // sometimes a stale one
    auto* po = commit->add_offsets();
    // Sometimes a partition it does not own (a confused member): refused, never stored.
    po->set_partition(rng_.below(8) == 0 ? static_cast<std::uint32_t>(rng_.below(4))
                                         : k.owned[rng_.below(k.owned.size())]);
    commit_offset_ += rng_.below(5);
    po->set_offset(commit_offset_);
  }
  const std::string bytes = c.SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  return {p, p + bytes.size()};
}

void sim_client::on_coordinator_reply(std::span<const std::byte> sent, std::span<const std::byte> reply) {
  proto::CoordinatorCommand c;
  auto r = actors::group_machine::decode_reply(reply);
  if (!r || !c.ParseFromArray(sent.data(), static_cast<int>(sent.size()))) {
    return;
  }
  const auto group = static_cast<std::uint32_t>(c.group() == "g0" ? 0 : 1);
  const auto status = static_cast<net::status>(r->status());
  if (status == net::status::group_not_found || c.has_create()) {
    group_missing_[group] = status == net::status::group_not_found;
  }
  std::string id;
  if (c.has_join()) {
    id = c.join().member_id();
  } else if (c.has_heartbeat()) {
    id = c.heartbeat().member_id();
  } else if (c.has_leave()) {
    id = c.leave().member_id();
  } else if (c.has_commit()) {
    id = c.commit().member_id();
  } else {
    return;
  }
  const auto member = static_cast<std::uint32_t>(id.back() - '0');
  member_knows& k = members_[{group, member}];
  if (c.has_leave() || status == net::status::unknown_member || status == net::status::group_not_found) {
    k = member_knows{};  // gone (or never there): it joins again
    return;
  }
  if (status != net::status::ok || !(c.has_join() || c.has_heartbeat())) {
    return;
  }
  k.joined = true;
  k.generation = r->generation();
  k.owned.assign(r->owned().begin(), r->owned().end());
  k.revoking.assign(r->revoking().begin(), r->revoking().end());
}

void sim_client::send_current(std::uint64_t now, const sender& send, bool all) {
  sent_at_ = now;
  if (all) {
    for (std::uint8_t r = 0; r < replica_count_; ++r) {
      send(r, *in_flight_);
    }
  } else {
    send(target_, *in_flight_);
  }
}

std::optional<client_ack> sim_client::on_message(const message& m, std::uint64_t now, const sender&) {
  if (!in_flight_ || m.h.client != in_flight_->h.client || m.h.request != in_flight_->h.request) {
    return std::nullopt;
  }
  if (m.h.cmd == command::eviction) {
    ++evictions_;
    // The same batch goes again under a new session (a session number is never used twice: the ledger counts a
    // request executed twice as a duplicate).
    const bool produce = in_flight_->h.operation == operation_produce;
    switch_session();
    if (!produce) {
      retry_body_.reset();
    }
    return std::nullopt;
  }
  if (m.h.cmd != command::reply) {
    return std::nullopt;
  }
  target_ = m.h.replica < replica_count_ ? m.h.replica : target_;
  const bool registration = in_flight_->h.operation == consensus::operation_register;
  const std::uint64_t session = in_flight_->h.client;
  std::vector<std::byte> sent_body = std::move(in_flight_->body);
  in_flight_.reset();
  if (registration) {
    if (session == session_) {
      registered_ = true;
      session_op_ = m.h.op;
    } else {
      spares_.push_back(spare{session, m.h.op});
    }
    return std::nullopt;
  }
  client_ack ack;
  ack.request = request_;
  ack.op = m.h.op;
  ack.prepare_checksum = m.h.context;
  ack.latency_ticks = now - first_sent_at_;
  if (m.h.operation == operation_coordinator) {
    ack.what = client_ack::kind::coordinator;
    ack.coordinator_command = sent_body;
    ack.coordinator_reply = m.body;
    on_coordinator_reply(ack.coordinator_command, ack.coordinator_reply);
    ++completed_;
    return ack;
  }
  if (m.h.operation == operation_metadata) {
    ack.what = client_ack::kind::metadata;
    auto applied = actors::metadata_machine::decode_reply(m.body);
    const auto& sent = in_flight_sent_;
    if (applied && sent == sent_kind::create_stream) {
      streams_.push_back(applied->stream_id);
    } else if (sent == sent_kind::delete_stream && !streams_.empty()) {
      streams_.pop_back();  // deleted (or already gone: either way not ours to use)
    }
    if (options_.metadata_only) {
      ++completed_;
    }
    return ack;
  }
  if (m.h.operation == operation_consumer_offset) {
    ack.what = client_ack::kind::consumer_offset;
    ack.base_offset = ledger::decode_offset_reply(m.body).value_or(0);
    return ack;
  }
  ack.payload = in_flight_payload_;
  if (auto r = ledger::decode_produce_reply(m.body)) {
    ack.base_offset = r->base_offset;
    ack.records = r->records;
    ack.batch_op = r->op;
    ack.verdict = r->verdict;
    if (r->records > 0) {
      next_sequence_ = storage::sequence_plus(next_sequence_, r->records);
    }
  }
  ++completed_;
  in_flight_payload_.sequence += 1;
  return ack;
}

}  // namespace rill::simulation
