#pragma once
// The simulator's workload: a ledger state machine and the clients that drive it.
//
// ledger: each user request carries a payload id (client id, sequence) and some bytes; apply records the payload
// and returns (ops applied, running hash), so every replica's replies are a function of the committed history and
// a reply for the wrong history is visible. It counts a payload applied twice (exactly-once is a checker property).
//
// sim_client: registers, then sends its requests one at a time; a request not answered within its timeout is sent
// to every replica again, with the same request number; an eviction makes it register again and resend.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/random.h"
#include "consensus/state_machine.h"
#include "simulation/network.h"

namespace rill::simulation {

inline constexpr std::uint8_t operation_ledger_append = consensus::operation_user_min;

struct payload_id {
  std::uint64_t client = 0;
  std::uint64_t sequence = 0;
  friend auto operator<=>(const payload_id&, const payload_id&) = default;
};

// The body of a ledger request: payload id then filler bytes.
std::vector<std::byte> make_payload(payload_id id, std::size_t filler, prng& rng);
payload_id payload_of(std::span<const std::byte> body);

class ledger final : public consensus::state_machine {
 public:
  std::vector<std::byte> apply(const consensus::header& prepare, std::span<const std::byte> body) override;
  // The checkpoint holds applied, hash, duplicates and every payload seen (so a payload executed again after a
  // restore still counts as a duplicate); not the op -> payload index, which only serves the checker at apply time.
  [[nodiscard]] std::vector<std::byte> snapshot() const override;
  [[nodiscard]] bool restore(std::span<const std::byte> bytes) override;
  // A digest of the state after op (equal on every replica after the same op: the checker compares them). Known
  // for ops this instance applied or restored to, and for any op after those (ops without a user payload leave the
  // state as it was).
  [[nodiscard]] std::uint64_t digest_at(std::uint64_t op) const;
  [[nodiscard]] std::uint64_t applied() const noexcept { return applied_; }
  [[nodiscard]] std::uint64_t duplicates() const noexcept { return duplicates_; }
  // The payload this replica executed at op (none for register ops and for retries answered from the table).
  [[nodiscard]] payload_id payload_at(std::uint64_t op) const;

 private:
  [[nodiscard]] std::uint64_t digest() const noexcept { return hash_ ^ (applied_ * 0x9e3779b97f4a7c15ULL); }

  std::map<std::uint64_t, payload_id> by_op_;
  std::map<std::uint64_t, std::uint64_t> digests_;  // op -> digest after it (user ops applied here)
  std::uint64_t base_digest_ = 0;                   // the state before the first of them (initial or restored)
  std::uint64_t applied_ = 0;
  std::uint64_t hash_ = 0;
  std::set<payload_id> seen_;
  std::uint64_t duplicates_ = 0;
};

struct client_options {
  std::uint64_t requests = 50;  // user requests to complete
  std::uint32_t request_timeout_ticks = 60;
  std::size_t body_bytes_max = 256;
};

struct client_ack {
  payload_id payload;
  std::uint64_t request = 0;
  std::uint64_t op = 0;
  consensus::checksum_t prepare_checksum;
  std::uint64_t latency_ticks = 0;
};

class sim_client {
 public:
  sim_client(std::uint64_t cluster, std::uint64_t id, std::uint8_t replica_count, const client_options& options,
             std::uint64_t seed);

  // Outputs go through `send(to, message)`.
  using sender = std::function<void(node_t to, consensus::message m)>;
  void tick(std::uint64_t now, const sender& send);
  // Returns the acknowledgement a reply completes, if any.
  std::optional<client_ack> on_message(const consensus::message& m, std::uint64_t now, const sender& send);

  [[nodiscard]] bool done() const noexcept { return completed_ >= options_.requests && !in_flight_; }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::uint64_t completed() const noexcept { return completed_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

 private:
  void send_current(std::uint64_t now, const sender& send, bool all);

  std::uint64_t cluster_;
  std::uint64_t id_;
  std::uint8_t replica_count_;
  client_options options_;
  prng rng_;
  bool registered_ = false;
  std::uint64_t request_ = 0;  // the number of the request in flight (0: register)
  std::optional<consensus::message> in_flight_;
  payload_id in_flight_payload_;
  std::uint64_t sent_at_ = 0;
  std::uint64_t first_sent_at_ = 0;
  std::uint8_t target_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace rill::simulation
