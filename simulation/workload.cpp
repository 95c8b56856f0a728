#include "simulation/workload.h"

#include <fmt/core.h>
#include <xxhash.h>
#include "base/assert.h"

#include "base/endian.h"
#include "config/log_config.h"
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

std::vector<std::byte> make_batch(payload_id id, std::uint32_t records, std::size_t filler, prng& rng) {
  RILL_ASSERT(records >= 1);
  storage::batch_builder b;
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

payload_id payload_of(std::span<const std::byte> batch) {
  auto records = records_of_batch(batch);
  return records.empty() ? payload_id{} : records.front().first;
}

ledger::ledger() {
  const auto snap = metadata_.snapshot();
  metadata_digest_ = XXH3_64bits(snap.data(), snap.size());
}

std::uint64_t ledger::digest() const noexcept {
  std::uint64_t d = hash_ ^ (applied_ * 0x9e3779b97f4a7c15ULL) ^ (next_offset_ * 0xc2b2ae3d27d4eb4fULL);
  for (const auto& [client, offset] : consumer_offsets_) {
    d = (d ^ (client * 31 + offset)) * 0x100000001b3ULL;
  }
  return d ^ metadata_digest_;
}

std::vector<std::byte> ledger::apply(const consensus::header& prepare, std::span<const std::byte> body) {
  std::vector<std::byte> reply;
  if (prepare.operation == operation_metadata) {
    reply = metadata_.apply(prepare, body);
    const auto snap = metadata_.snapshot();
    metadata_digest_ = XXH3_64bits(snap.data(), snap.size());
  } else if (prepare.operation == operation_consumer_offset) {
    std::uint64_t& stored = consumer_offsets_[prepare.client];
    if (body.size() == 8) {
      const std::uint64_t wanted = load_le<std::uint64_t>(body.data());
      if (wanted >= stored && wanted <= next_offset_) {
        stored = wanted;  // a position never goes back, nor past what exists
      }
    }
    put_u64(reply, stored);
  } else {
    const auto records = records_of_batch(body);
    const payload_id id = records.empty() ? payload_id{} : records.front().first;
    if (!seen_.insert(id).second) {
      ++duplicates_;
    }
    by_op_[prepare.op] = id;
    const std::uint64_t base = next_offset_;
    const auto count = static_cast<std::uint32_t>(records.size());
    next_offset_ += count;
    offsets_by_op_[prepare.op] = {base, count};
    ++applied_;
    hash_ = hash_ * 0x100000001b3ULL ^ prepare.checksum.low;
    put_u64(reply, applied_);
    put_u64(reply, hash_);
    put_u64(reply, base);
    put_u64(reply, count);
  }
  digests_[prepare.op] = digest();
  return reply;
}

std::optional<ledger::produce_reply> ledger::decode_produce_reply(std::span<const std::byte> body) {
  if (body.size() != 32) {
    return std::nullopt;
  }
  return produce_reply{load_le<std::uint64_t>(body.data()), load_le<std::uint64_t>(body.data() + 8),
                       load_le<std::uint64_t>(body.data() + 16),
                       static_cast<std::uint32_t>(load_le<std::uint64_t>(body.data() + 24))};
}

std::optional<std::uint64_t> ledger::decode_offset_reply(std::span<const std::byte> body) {
  if (body.size() != 8) {
    return std::nullopt;
  }
  return load_le<std::uint64_t>(body.data());
}

// Snapshot: applied, hash, duplicates, next offset, consumer count, payload count, then (client, offset) pairs and
// (client, sequence) pairs.
std::vector<std::byte> ledger::snapshot() const {
  std::vector<std::byte> out;
  put_u64(out, applied_);
  put_u64(out, hash_);
  put_u64(out, duplicates_);
  put_u64(out, next_offset_);
  put_u64(out, consumer_offsets_.size());
  put_u64(out, seen_.size());
  for (const auto& [client, offset] : consumer_offsets_) {
    put_u64(out, client);
    put_u64(out, offset);
  }
  for (const auto& id : seen_) {
    put_u64(out, id.client);
    put_u64(out, id.sequence);
  }
  const auto meta = metadata_.snapshot();
  out.insert(out.end(), meta.begin(), meta.end());  // the rest
  return out;
}

bool ledger::restore(std::span<const std::byte> bytes) {
  if (bytes.size() < 48) {
    return false;
  }
  const std::uint64_t consumers = load_le<std::uint64_t>(bytes.data() + 32);
  const std::uint64_t payloads = load_le<std::uint64_t>(bytes.data() + 40);
  if (consumers > bytes.size() / 16 || payloads > bytes.size() / 16 ||
      bytes.size() < 48 + (consumers + payloads) * 16) {
    return false;
  }
  const auto meta = bytes.subspan(48 + (consumers + payloads) * 16);
  actors::metadata_machine metadata;
  if (!metadata.restore(meta)) {
    return false;
  }
  const std::byte* p = bytes.data() + 48;
  std::map<std::uint64_t, std::uint64_t> offsets;
  for (std::uint64_t i = 0; i < consumers; ++i, p += 16) {
    offsets[load_le<std::uint64_t>(p)] = load_le<std::uint64_t>(p + 8);
  }
  std::set<payload_id> seen;
  for (std::uint64_t i = 0; i < payloads; ++i, p += 16) {
    seen.insert(payload_id{load_le<std::uint64_t>(p), load_le<std::uint64_t>(p + 8)});
  }
  applied_ = load_le<std::uint64_t>(bytes.data());
  hash_ = load_le<std::uint64_t>(bytes.data() + 8);
  duplicates_ = load_le<std::uint64_t>(bytes.data() + 16);
  next_offset_ = load_le<std::uint64_t>(bytes.data() + 24);
  consumer_offsets_ = std::move(offsets);
  metadata_ = std::move(metadata);
  metadata_digest_ = XXH3_64bits(meta.data(), meta.size());
  seen_ = std::move(seen);
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
    : cluster_(cluster), id_(id), replica_count_(replica_count), options_(options), rng_(seed) {
  RILL_ASSERT(replica_count_ >= 1);
  in_flight_payload_ = payload_id{id_, 1};
}

void sim_client::tick(std::uint64_t now, const sender& send) {
  if (in_flight_) {
    if (now - sent_at_ >= options_.request_timeout_ticks) {
      target_ = static_cast<std::uint8_t>((target_ + 1) % replica_count_);
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
  m.h.client = id_;
  if (!registered_) {
    request_ = 0;
    m.h.operation = consensus::operation_register;
  } else if (completed_ < options_.requests && rng_.below(6) == 0) {
    ++request_;
    m.h.operation = operation_metadata;
    m.body = metadata_command(now);
  } else if (position_to_commit_) {
    ++request_;
    m.h.operation = operation_consumer_offset;
    m.body.resize(8);
    store_le<std::uint64_t>(m.body.data(), *position_to_commit_);
    position_to_commit_.reset();
  } else {
    ++request_;
    m.h.operation = operation_produce;
    m.body = make_batch(in_flight_payload_, static_cast<std::uint32_t>(1 + rng_.below(3)),
                        rng_.below(options_.body_bytes_max / 3 + 1), rng_);
  }
  m.h.request = request_;
  consensus::seal(m);
  in_flight_ = std::move(m);
  first_sent_at_ = now;
  send_current(now, send, false);
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
  if (!in_flight_ || m.h.client != id_ || m.h.request != request_) {
    return std::nullopt;
  }
  if (m.h.cmd == command::eviction) {
    ++evictions_;
    registered_ = false;  // the same payload goes again under a new session
    in_flight_.reset();
    return std::nullopt;
  }
  if (m.h.cmd != command::reply) {
    return std::nullopt;
  }
  target_ = m.h.replica < replica_count_ ? m.h.replica : target_;
  in_flight_.reset();
  if (request_ == 0) {
    registered_ = true;
    return std::nullopt;
  }
  client_ack ack;
  ack.request = request_;
  ack.op = m.h.op;
  ack.prepare_checksum = m.h.context;
  ack.latency_ticks = now - first_sent_at_;
  if (m.h.operation == operation_metadata) {
    ack.what = client_ack::kind::metadata;
    auto applied = actors::metadata_machine::decode_reply(m.body);
    const auto& sent = in_flight_sent_;
    if (applied && sent == sent_kind::create_stream) {
      streams_.push_back(applied->stream_id);
    } else if (sent == sent_kind::delete_stream && !streams_.empty()) {
      streams_.pop_back();  // deleted (or already gone: either way not ours to use)
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
  }
  ++completed_;
  in_flight_payload_.sequence += 1;
  return ack;
}

}  // namespace rill::simulation
