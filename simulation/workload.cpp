#include "simulation/workload.h"

#include "base/assert.h"
#include "base/endian.h"

namespace rill::simulation {

using consensus::command;
using consensus::message;

std::vector<std::byte> make_payload(payload_id id, std::size_t filler, prng& rng) {
  std::vector<std::byte> body(16 + filler);
  store_le<std::uint64_t>(body.data(), id.client);
  store_le<std::uint64_t>(body.data() + 8, id.sequence);
  for (std::size_t i = 16; i < body.size(); ++i) {
    body[i] = static_cast<std::byte>(rng.next());
  }
  return body;
}

payload_id payload_of(std::span<const std::byte> body) {
  if (body.size() < 16) {
    return {};
  }
  return {load_le<std::uint64_t>(body.data()), load_le<std::uint64_t>(body.data() + 8)};
}

std::vector<std::byte> ledger::apply(const consensus::header& prepare, std::span<const std::byte> body) {
  const payload_id id = payload_of(body);
  if (!seen_.insert(id).second) {
    ++duplicates_;
  }
  by_op_[prepare.op] = id;
  ++applied_;
  hash_ = hash_ * 0x100000001b3ULL ^ prepare.checksum.low;
  std::vector<std::byte> reply(16);
  store_le<std::uint64_t>(reply.data(), applied_);
  store_le<std::uint64_t>(reply.data() + 8, hash_);
  digests_[prepare.op] = digest();
  return reply;
}

std::vector<std::byte> ledger::snapshot() const {
  std::vector<std::byte> out(32 + seen_.size() * 16);
  store_le<std::uint64_t>(out.data(), applied_);
  store_le<std::uint64_t>(out.data() + 8, hash_);
  store_le<std::uint64_t>(out.data() + 16, duplicates_);
  store_le<std::uint64_t>(out.data() + 24, seen_.size());
  std::byte* p = out.data() + 32;
  for (const auto& id : seen_) {
    store_le<std::uint64_t>(p, id.client);
    store_le<std::uint64_t>(p + 8, id.sequence);
    p += 16;
  }
  return out;
}

bool ledger::restore(std::span<const std::byte> bytes) {
  if (bytes.size() < 32) {
    return false;
  }
  const std::uint64_t n = load_le<std::uint64_t>(bytes.data() + 24);
  if (n > (bytes.size() - 32) / 16 || bytes.size() != 32 + n * 16) {
    return false;
  }
  std::set<payload_id> seen;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::byte* p = bytes.data() + 32 + i * 16;
    seen.insert(payload_id{load_le<std::uint64_t>(p), load_le<std::uint64_t>(p + 8)});
  }
  applied_ = load_le<std::uint64_t>(bytes.data());
  hash_ = load_le<std::uint64_t>(bytes.data() + 8);
  duplicates_ = load_le<std::uint64_t>(bytes.data() + 16);
  seen_ = std::move(seen);
  by_op_.clear();
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
  if (registered_ && completed_ >= options_.requests) {
    return;
  }
  message m;
  m.h.cmd = command::request;
  m.h.cluster = cluster_;
  m.h.client = id_;
  if (!registered_) {
    request_ = 0;
    m.h.operation = consensus::operation_register;
  } else {
    ++request_;
    m.h.operation = operation_ledger_append;
    m.body = make_payload(in_flight_payload_, rng_.below(options_.body_bytes_max), rng_);
  }
  m.h.request = request_;
  consensus::seal(m);
  in_flight_ = std::move(m);
  first_sent_at_ = now;
  send_current(now, send, false);
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
  client_ack ack{in_flight_payload_, request_, m.h.op, m.h.context, now - first_sent_at_};
  ++completed_;
  in_flight_payload_.sequence += 1;
  return ack;
}

}  // namespace rill::simulation
