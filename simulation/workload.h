#pragma once
// The simulator's workload: the replicated partition's state machine (ledger) and the clients that drive it.
//
// A produce request's body is one record batch in the storage layer's format (1..3 records, each keyed by the
// payload id and its index). The ledger assigns offsets at apply, in op order: the batch gets the next
// `records` offsets, and the reply names the base offset (with the ops applied and a running hash, so a reply for
// the wrong history is visible). A consumer-offset request stores a client's consumer position; the ledger never
// lets a stored position go back (a lower one is refused, the reply says which position is stored).
//
// A metadata request carries one proto::MetadataCommand (create a stream, create a topic in one, delete one); the
// ledger applies it through rilld's own metadata state machine (actors/metadata_machine.h), so the group replicates
// the broker's metadata as rilld's one-replica group does, and the checker's state digest covers it.
//
// The partition log itself (storage::partition_log on each replica's simulated disk) is fed from the prepares, not
// from apply: see partition_mirror.h. The checker ties the two together (the offsets the ledger assigns are the
// offsets the logs hold).
//
// sim_client: registers, then sends its requests one at a time; a request not answered within its timeout is sent
// to every replica again, with the same request number; an eviction makes it register again and resend. Between
// produces it commits its consumer position when the harness gives it one.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "actors/metadata_machine.h"
#include "base/random.h"
#include "consensus/state_machine.h"
#include "simulation/network.h"

namespace rill::simulation {

inline constexpr std::uint8_t operation_produce = consensus::operation_user_min;
inline constexpr std::uint8_t operation_consumer_offset = consensus::operation_user_min + 1;
inline constexpr std::uint8_t operation_metadata = consensus::operation_user_min + 2;

struct payload_id {
  std::uint64_t client = 0;
  std::uint64_t sequence = 0;
  friend auto operator<=>(const payload_id&, const payload_id&) = default;
};

// A produce body: one record batch of `records` records, keys "<client>/<sequence>/<index>" (as 20 bytes: client,
// sequence, index), values `filler` seeded bytes.
std::vector<std::byte> make_batch(payload_id id, std::uint32_t records, std::size_t filler, prng& rng);
// The payload of a produce body or of a stored batch (its first record's key); {} when it is not a valid batch.
payload_id payload_of(std::span<const std::byte> batch);
// Payload and record index of each record of a valid batch (in offset order); empty when it does not parse.
std::vector<std::pair<payload_id, std::uint32_t>> records_of_batch(std::span<const std::byte> batch);

class ledger final : public consensus::state_machine {
 public:
  ledger();
  std::vector<std::byte> apply(const consensus::header& prepare, std::span<const std::byte> body) override;
  // The checkpoint holds applied, hash, duplicates, the next offset, the consumer positions and every payload seen
  // (so a payload executed again after a restore still counts as a duplicate); not the per-op indexes, which only
  // serve the checker at apply time.
  [[nodiscard]] std::vector<std::byte> snapshot() const override;
  [[nodiscard]] bool restore(std::span<const std::byte> bytes) override;

  [[nodiscard]] std::uint64_t applied() const noexcept { return applied_; }
  [[nodiscard]] std::uint64_t duplicates() const noexcept { return duplicates_; }
  [[nodiscard]] std::uint64_t next_offset() const noexcept { return next_offset_; }
  [[nodiscard]] const std::map<std::uint64_t, std::uint64_t>& consumer_offsets() const noexcept {
    return consumer_offsets_;
  }
  // The payload this replica executed at op (none for register ops and for retries answered from the table).
  [[nodiscard]] payload_id payload_at(std::uint64_t op) const;
  // The offsets op was given ({base, records}; records 0 for ops without a batch).
  [[nodiscard]] std::pair<std::uint64_t, std::uint32_t> offsets_at(std::uint64_t op) const;
  // A digest of the state after op (equal on every replica after the same op: the checker compares them). Known
  // for ops this instance applied or restored to, and for any op after those (ops without a user payload leave the
  // state as it was).
  [[nodiscard]] std::uint64_t digest_at(std::uint64_t op) const;

  // Reply bodies.
  struct produce_reply {
    std::uint64_t applied = 0;
    std::uint64_t hash = 0;
    std::uint64_t base_offset = 0;
    std::uint32_t records = 0;
  };
  static std::optional<produce_reply> decode_produce_reply(std::span<const std::byte> body);
  static std::optional<std::uint64_t> decode_offset_reply(std::span<const std::byte> body);

 private:
  [[nodiscard]] std::uint64_t digest() const noexcept;

  std::map<std::uint64_t, payload_id> by_op_;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> offsets_by_op_;
  std::map<std::uint64_t, std::uint64_t> digests_;  // op -> digest after it (user ops applied here)
  std::uint64_t base_digest_ = 0;                   // the state before the first of them (initial or restored)
  std::uint64_t applied_ = 0;
  std::uint64_t hash_ = 0;
  std::uint64_t next_offset_ = 0;
  std::map<std::uint64_t, std::uint64_t> consumer_offsets_;  // client -> stored position
  actors::metadata_machine metadata_;
  std::uint64_t metadata_digest_ = 0;  // XXH3-64 of the metadata snapshot (updated at metadata ops and restores)
  std::set<payload_id> seen_;
  std::uint64_t duplicates_ = 0;
};

struct client_options {
  std::uint64_t requests = 50;  // produce requests to complete
  std::uint32_t request_timeout_ticks = 60;
  std::size_t body_bytes_max = 256;
};

struct client_ack {
  enum class kind { produce, consumer_offset, metadata } what = kind::produce;
  payload_id payload;
  std::uint64_t request = 0;
  std::uint64_t op = 0;
  consensus::checksum_t prepare_checksum;
  std::uint64_t latency_ticks = 0;
  std::uint64_t base_offset = 0;  // produce: the first offset; consumer_offset: the position stored
  std::uint32_t records = 0;
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
  // The consumer position to commit next (sent between produces; a later call replaces one not yet sent).
  void commit_position(std::uint64_t offset) { position_to_commit_ = offset; }

  [[nodiscard]] bool done() const noexcept {
    return completed_ >= options_.requests && !in_flight_ && !position_to_commit_;
  }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::uint64_t completed() const noexcept { return completed_; }
  [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

 private:
  void send_current(std::uint64_t now, const sender& send, bool all);
  [[nodiscard]] std::vector<std::byte> metadata_command(std::uint64_t now);

  std::uint64_t cluster_;
  std::uint64_t id_;
  std::uint8_t replica_count_;
  client_options options_;
  prng rng_;
  bool registered_ = false;
  std::uint64_t request_ = 0;  // the number of the request in flight (0: register)
  std::optional<consensus::message> in_flight_;
  payload_id in_flight_payload_;
  std::optional<std::uint64_t> position_to_commit_;
  std::vector<std::uint32_t> streams_;  // ids of streams this client created (and has not deleted)
  enum class sent_kind { other, create_stream, create_topic, delete_stream } in_flight_sent_ = sent_kind::other;
  std::uint64_t metadata_sent_ = 0;
  std::uint64_t sent_at_ = 0;
  std::uint64_t first_sent_at_ = 0;
  std::uint8_t target_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace rill::simulation
