#pragma once
// The simulator's workload: the replicated partition's state machine (ledger) and the clients that drive it.
//
// A produce request's body is one record batch in the storage layer's format (1..3 records, each keyed by the
// payload id and its index), from an idempotent producer (producer id = the client's id, epoch 0, sequences counted
// per record). The primary stamps each fresh batch when it prepares it (its offsets after every batch before it on
// the chain, leader epoch, log-append time), so the prepare's body is the batch as every replica's partition log
// stores it; apply gives the batch the next `records` offsets (the stamped ones: asserted), and the
// reply names the base offset and the op holding the batch (with the ops applied and a running hash, so a reply for
// the wrong history is visible). A consumer-offset request stores a client's consumer position; the ledger never
// lets a stored position go back (a lower one is refused, the reply says which position is stored).
//
// Idempotent produce is decided when the primary prepares (ledger::prepare, storage::producer_table's rules),
// against the committed producer state plus the produce batches of the uncommitted ops the primary holds: a retried
// batch (a client that gave up on one session and sent it again under another, as a producer does through another
// broker) becomes an operation_produce_answered op, which carries no batch and which apply answers with the
// original's offsets. So no batch is in the log twice, even when its original is not yet committed. A batch the
// replica does not execute (an evicted session's) is in the log all the same: skip() gives it its offsets too.
//
// A metadata request carries one proto::MetadataCommand (create a stream, create a topic in one, delete one); the
// ledger applies it through rilld's own metadata state machine (actors/metadata_machine.h), so the group replicates
// the broker's metadata as rilld's one-replica group does, and the checker's state digest covers it. A coordinator
// request carries one proto::CoordinatorCommand (consumer groups: create, join, heartbeat with releases, commit,
// leave, expire, refresh), applied through rilld's coordinator machine (actors/group_machine.h), its time stamped by
// the primary at prepare (timestamp_base_ms + the primary's ticks, never back); the digest covers it too.
//
// The partition log itself (storage::partition_log on each replica's simulated disk) is the replica's storage of the
// prepares' bodies, fed as they are written, not at apply: see consensus/partition_storage.h. The checker ties the
// two together (the offsets the ledger assigns are the offsets the logs hold).
//
// sim_client: registers, then sends its requests one at a time; a request not answered within its timeout is sent
// to every replica again, with the same request number; an eviction makes it register again and resend. Between
// produces it commits its consumer position when the harness gives it one.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "actors/group_machine.h"
#include "actors/metadata_machine.h"
#include "base/random.h"
#include "consensus/state_machine.h"
#include "simulation/network.h"
#include "storage/producer_table.h"

namespace rill::simulation {

inline constexpr std::uint8_t operation_produce = consensus::operation_user_min;
inline constexpr std::uint8_t operation_consumer_offset = consensus::operation_user_min + 1;
inline constexpr std::uint8_t operation_metadata = consensus::operation_user_min + 2;
// A produce the primary answered at prepare without a batch (a retry, or a refusal): see ledger::prepare.
inline constexpr std::uint8_t operation_produce_answered = consensus::operation_user_min + 3;
// A consumer-group coordinator's command (proto::CoordinatorCommand), applied through rilld's group_machine.
inline constexpr std::uint8_t operation_coordinator = consensus::operation_user_min + 4;

// A client's VSR sessions: the first is its id; each one it opens after it (a retry through "another broker", an
// eviction) puts the session's number in the top 16 bits. Replies are routed to the client the low bits name.
inline constexpr unsigned session_number_shift = 48;
[[nodiscard]] inline constexpr std::uint64_t client_of_session(std::uint64_t session) noexcept {
  return session & ((std::uint64_t{1} << session_number_shift) - 1);
}

struct payload_id {
  std::uint64_t client = 0;
  std::uint64_t sequence = 0;
  friend auto operator<=>(const payload_id&, const payload_id&) = default;
};

// A produce body: one record batch of `records` records, keys "<client>/<sequence>/<index>" (as 20 bytes: client,
// sequence, index), values `filler` seeded bytes.
// With base_sequence >= 0 the batch is an idempotent producer's: producer id = id.client, epoch 0.
std::vector<std::byte> make_batch(payload_id id, std::uint32_t records, std::size_t filler, prng& rng,
                                  std::int32_t base_sequence = -1);
// The producer fields of a valid batch from an idempotent producer (nullopt otherwise).
struct batch_producer {
  std::int64_t id = -1;
  std::int16_t epoch = -1;
  std::int32_t first_sequence = -1;
  std::int32_t last_sequence = -1;
};
std::optional<batch_producer> producer_of_batch(std::span<const std::byte> batch);
// The payload of a produce body or of a stored batch (its first record's key); {} when it is not a valid batch.
payload_id payload_of(std::span<const std::byte> batch);
// Payload and record index of each record of a valid batch (in offset order); empty when it does not parse.
std::vector<std::pair<payload_id, std::uint32_t>> records_of_batch(std::span<const std::byte> batch);

class ledger final : public consensus::state_machine {
 public:
  // bug_idempotence_committed_only (test only, a deliberate bug the simulator must find): prepare() checks a batch
  // against the committed producer state alone, not the uncommitted pipeline.
  // bug_coordinator_commit_unowned (test only): the coordinator stores a commit of a partition its member does not
  // own (group_machine_options::bug_commit_unowned).
  explicit ledger(bool bug_idempotence_committed_only = false, bool bug_coordinator_commit_unowned = false);
  std::vector<std::byte> apply(const consensus::header& prepare, std::span<const std::byte> body) override;
  void skip(const consensus::header& prepare, std::span<const std::byte> body) override;
  // A fresh produce is stamped here, as a partition's primary does: base offset after every batch before it
  // (committed and pending), leader epoch = the view, log-append time = timestamp_base_ms + the primary's ticks,
  // never below a timestamp before it.
  proposal prepare(const consensus::header& request, const prepare_context& at, std::vector<std::byte> body,
                   std::span<const consensus::message* const> pending) override;
  static constexpr std::int64_t timestamp_base_ms = 1'700'000'000'000;
  // The checkpoint holds applied, hash, duplicates, the next offset, the consumer positions, the producer table,
  // every payload seen and every request executed (so one executed again after a restore still counts as a
  // duplicate); not the per-op indexes, which only serve the checker at apply time.
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
    std::uint64_t op = 0;  // the op that holds the batch (a retry's answer names the original's)
    storage::producer_verdict verdict = storage::producer_verdict::fresh;
  };
  static std::optional<produce_reply> decode_produce_reply(std::span<const std::byte> body);
  static std::optional<std::uint64_t> decode_offset_reply(std::span<const std::byte> body);

 private:
  [[nodiscard]] std::uint64_t digest() const noexcept;
  // Gives a batch in the log its offsets (apply and skip); returns {base, records}.
  std::pair<std::uint64_t, std::uint32_t> absorb(const consensus::header& prepare, std::span<const std::byte> body);

  bool bug_idempotence_committed_only_ = false;
  storage::producer_table producers_;                           // committed; a batch's tag is its op
  std::set<std::pair<std::uint64_t, std::uint64_t>> executed_;  // (client, request) of the user ops executed
  std::uint64_t executed_digest_ = 0;                           // of executed_, kept as it grows

  std::map<std::uint64_t, payload_id> by_op_;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> offsets_by_op_;
  std::map<std::uint64_t, std::uint64_t> digests_;  // op -> digest after it (user ops applied here)
  std::uint64_t base_digest_ = 0;                   // the state before the first of them (initial or restored)
  std::uint64_t applied_ = 0;
  std::uint64_t hash_ = 0;
  std::uint64_t next_offset_ = 0;
  std::int64_t last_timestamp_ = 0;                          // the newest log-append time of a batch applied
  std::map<std::uint64_t, std::uint64_t> consumer_offsets_;  // client -> stored position
  actors::metadata_machine metadata_;
  std::uint64_t metadata_digest_ = 0;  // XXH3-64 of the metadata snapshot (updated at metadata ops and restores)
  // The coordinator's clock reads what prepare() sets (shared: the machine's clock outlives a move of the ledger).
  std::shared_ptr<std::int64_t> coordinator_clock_ms_ = std::make_shared<std::int64_t>(0);
  actors::group_machine coordinator_;
  std::uint64_t coordinator_digest_ = 0;  // XXH3-64 of the coordinator's snapshot
  std::set<payload_id> seen_;
  std::uint64_t duplicates_ = 0;
};

struct client_options {
  std::uint64_t requests = 50;  // produce requests to complete
  std::uint32_t request_timeout_ticks = 60;
  std::size_t body_bytes_max = 256;
  // A produce that timed out is given up on its session, with this chance, and sent again at once under a spare
  // session registered ahead (a producer retrying through another broker, whose session is open): only idempotence,
  // checked against the pipeline too, keeps its batch from the log twice while the original is uncommitted.
  std::uint32_t session_switch_ppm = 250'000;
  std::uint32_t sessions_max = 6;  // per client (clients * sessions_max stays below the client table's size)
  // Every request is a metadata command (create a stream or a topic, delete a stream), and `requests` counts them:
  // a client of a metadata group.
  bool metadata_only = false;
  // Of those, this share (ppm) are consumer-group coordinator commands instead (two members per client, two groups).
  std::uint32_t coordinator_ppm = 700'000;
};

struct client_ack {
  enum class kind { produce, consumer_offset, metadata, coordinator } what = kind::produce;
  payload_id payload;
  std::uint64_t request = 0;
  std::uint64_t op = 0;
  consensus::checksum_t prepare_checksum;
  std::uint64_t latency_ticks = 0;
  std::uint64_t base_offset = 0;  // produce: the first offset; consumer_offset: the position stored
  std::uint32_t records = 0;
  std::uint64_t batch_op = 0;  // produce: the op holding the batch (ack.op for a fresh one; a retry names another)
  storage::producer_verdict verdict = storage::producer_verdict::fresh;
  std::vector<std::byte> coordinator_command;  // coordinator: what was sent (the primary's time not yet in it)
  std::vector<std::byte> coordinator_reply;    // coordinator: the reply
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
  [[nodiscard]] std::uint32_t sessions_opened() const noexcept { return sessions_opened_; }

 private:
  void send_current(std::uint64_t now, const sender& send, bool all);
  // Leaves the session: the next request registers a new one; a produce in flight goes again under it.
  void switch_session();
  [[nodiscard]] std::vector<std::byte> metadata_command(std::uint64_t now);
  [[nodiscard]] std::vector<std::byte> coordinator_command();
  void on_coordinator_reply(std::span<const std::byte> sent, std::span<const std::byte> reply);

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
  std::uint64_t session_ = 0;     // the VSR client id in use (the first is id_)
  std::uint64_t session_op_ = 0;  // the op that registered it (stamped into every request: consensus::session_of)
  struct spare {
    std::uint64_t client = 0;
    std::uint64_t op = 0;
  };
  std::deque<spare> spares_;  // sessions registered ahead (a retry moves to the first at once)
  std::uint32_t sessions_opened_ = 1;
  std::int32_t next_sequence_ = 0;                    // the producer's next sequence
  std::optional<std::vector<std::byte>> retry_body_;  // a produce given up on one session, sent again under the next
  std::vector<std::uint32_t> streams_;                // ids of streams this client created (and has not deleted)
  enum class sent_kind { other, create_stream, create_topic, delete_stream } in_flight_sent_ = sent_kind::other;
  std::uint64_t metadata_sent_ = 0;
  // What this client's two group members know from their replies: generation, owned, revoking, next offset to commit.
  struct member_knows {
    bool joined = false;
    std::uint64_t generation = 0;
    std::vector<std::uint32_t> owned;
    std::vector<std::uint32_t> revoking;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, member_knows> members_;  // (group, member) -> what it knows
  std::uint64_t commit_offset_ = 0;                                          // grows with every commit it sends
  bool group_missing_[2] = {false, false};                                   // a reply said the group is not there
  std::uint64_t sent_at_ = 0;
  std::uint64_t first_sent_at_ = 0;
  std::uint8_t target_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace rill::simulation
