#pragma once
// partition_machine: the state machine a replicated partition's VSR group runs in rilld (docs/replication.md). Its
// state is what the partition's log implies plus what a broker must decide once for every replica: the next offset,
// the newest log-append time, the idempotent producers (storage::producer_table) and the named consumers' offsets.
// The records themselves are the prepares' bodies, kept in the partition log by partition_storage (written as they
// are prepared, shown to consumers as they commit), never in this machine or its checkpoints.
//
// Operations (the request a node's partition actor submits to its own replica when that replica is primary):
//   produce_batch   request body: the CRC-32C tail of the batch (u32, from validation) + one client batch that was
//                   validated in full (storage::validated_batches). prepare() stamps it (base offset after every
//                   batch before it, committed or pending; leader epoch = the view; log-append time = the injected
//                   wall clock, never below a time before it) and the prepare's body is the stamped batch alone,
//                   which every replica's partition log stores byte for byte. A batch the producer rules refuse or
//                   answer (a retry of a kept batch, a gap, a fenced epoch...) becomes a produce_answered op instead,
//                   carrying no batch, so no batch is ever in the log twice, even when its original is still pending.
//   produce_answered  (made by prepare() only) the verdict, the producer fields, the original's op and the detail.
//   consumer_offset request body: the offset (i64) + the consumer's name (1..consumer_name_bytes_max bytes).
//                   Stored only when it is not below the offset stored (an auto-commit of a poll, which a stale read
//                   or a late retry must not move back): a lower one is answered `behind`, with the stored one.
//   consumer_offset_reset  the same body; stored whatever the offset stored (the consumer moves back on purpose:
//                   an explicit store through the API), and the reply names the previous offset (the log of it).
// Replies (produce_reply, offset_reply) are encoded here and decoded by the submitter.
//
// Invariants (asserted):
// - A produce_batch op applied here was stamped at exactly the next offset: offsets are dense and never reused.
// - next_offset() only grows; the log-append time of applied batches never goes back.
// - A consumer offset is never stored beyond next_offset() (what exists) nor below 0; at most consumers_max names
//   are added (a lower consumers_max set later refuses new names and removes none).
// - Once settled() (a settings op applied: a group's primary commits one at the start of its leadership), at most
//   settings().producers_max producers are held, none whose newest batch is older than producer_expiry_ms before
//   the newest applied batch (trimmed as each batch is applied, by its log-append time, and as settings change: the
//   same on every replica), and with accepts() snapshot() never exceeds partition_snapshot_bytes_budget (asserted).
//   Before it (a group of a version without expiry, or one whose primary has not settled it yet), nothing is
//   trimmed and nothing is bounded, as then. prepare() judges a batch against the producers before
//   that trim (a producer idle past its expiry can still have its last batch recognised as a retry); a batch judged
//   fresh whose producer the trim then forgot starts that producer again.
// - A consumer's offset goes back only through consumer_offset_reset (an explicit store), never through
//   consumer_offset (issue 38, finding 9: a new primary read an offset from state behind what was committed, and the
//   auto-commit that followed stored it lower).
// - prepare() is called on the primary only, with every op from the last applied up to the new one (pending); what
//   it returns depends only on its arguments, this state and the clock's reading.
//
// Contract: single-threaded, as the replica that drives it. The clock outlives the machine.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "consensus/state_machine.h"
#include "storage/producer_table.h"

namespace rill::consensus {

inline constexpr std::uint8_t operation_produce_batch = operation_user_min;
inline constexpr std::uint8_t operation_produce_answered = operation_user_min + 1;
inline constexpr std::uint8_t operation_consumer_offset = operation_user_min + 2;
// Changes nothing: a primary whose backups are behind what they acknowledged (they caught up by repair, which
// acknowledges nothing) commits one to hear from them (partition_group). Replied to with nothing.
inline constexpr std::uint8_t operation_probe = operation_user_min + 3;
inline constexpr std::uint8_t operation_consumer_offset_reset = operation_user_min + 4;
// Body: consumers_max, producers_max, producer_expiry_ms (u64 each). Applied at once (the producers trimmed to the
// new bounds) when accepts() them; otherwise it changes nothing. Replied to with nothing.
inline constexpr std::uint8_t operation_partition_settings = operation_user_min + 5;

// The bounds a partition's state keeps: part of the replicated state (snapshotted), changed only by a committed
// operation_partition_settings op, so every replica forgets the same producers and refuses the same consumers at
// the same op whatever its node's configuration says. A group's primary submits its node's values when they
// differ (partition_group).
struct partition_settings {
  std::uint64_t consumers_max = 1'000;            // limits.consumers_per_partition_max
  std::uint64_t producers_max = 100'000;          // limits.producers_per_partition_max
  std::uint64_t producer_expiry_ms = 86'400'000;  // storage.producer_expiry_ms (a day, as Kafka's)
  friend bool operator==(const partition_settings&, const partition_settings&) = default;
};
// The ranges each may take (the configuration keys' ranges).
inline constexpr std::uint64_t partition_consumers_limit = 1'000'000;
inline constexpr std::uint64_t partition_producers_limit = 1'000'000;
inline constexpr std::uint64_t producer_expiry_ms_min = 1'000;
inline constexpr std::uint64_t producer_expiry_ms_limit = std::uint64_t{365} * 86'400'000;  // a year
[[nodiscard]] bool within_limits(const partition_settings& s) noexcept;
// What a snapshot may hold (its head, producers_max producers with every batch kept, consumers with 255-byte names):
// the budget that keeps a checkpoint within a region of snapshot.bin (64 MiB; the client table takes the rest).
// Settings whose bound is past it are ignored (partition_machine::accepts); a cluster node's configuration is
// refused at load for the same reason (config::partition_checkpoint_budget_bytes).
inline constexpr std::uint64_t partition_snapshot_head_bytes = 8 + 8 + 8 + 3 * 8 + 1 + 8 + 8;
inline constexpr std::uint64_t partition_snapshot_producer_bytes = 8 + 2 + 4 + 8 + 4 + 5 * (4 + 4 + 8 + 8);
inline constexpr std::uint64_t partition_snapshot_consumer_bytes = 4 + 8 + 255;
inline constexpr std::uint64_t partition_snapshot_bytes_budget = std::uint64_t{63} << 20;

struct partition_machine_options {
  std::size_t consumer_name_bytes_max = 255;  // as a single node's consumer offset files
  // What a snapshot may hold (partition_snapshot_bytes_budget; smaller in tests, which fill a machine to it).
  std::uint64_t snapshot_bytes_budget = partition_snapshot_bytes_budget;
};

class partition_machine final : public state_machine {
 public:
  // Milliseconds since the Unix epoch (rilld: the system clock; the simulator: its own).
  using wall_clock = std::function<std::int64_t()>;

  partition_machine(partition_machine_options options, wall_clock now_ms);

  // Request bodies.
  [[nodiscard]] static std::vector<std::byte> produce_request(std::span<const std::byte> batch, std::uint32_t crc_tail);
  // The body of a consumer_offset or consumer_offset_reset request.
  [[nodiscard]] static std::vector<std::byte> offset_request(std::string_view consumer, std::int64_t offset);

  // The reply to a produce_batch request (its op: produce_batch or produce_answered).
  struct produce_reply {
    storage::producer_verdict verdict = storage::producer_verdict::fresh;
    std::int64_t base_offset = -1;  // fresh, duplicate: where the batch is; else -1
    std::uint32_t records = 0;
    std::uint64_t op = 0;            // the op holding the batch (a duplicate's: the original's)
    std::int64_t timestamp_ms = -1;  // fresh: its log-append time
    std::string detail;              // a refusal's explanation
  };
  [[nodiscard]] static std::optional<produce_reply> decode_produce_reply(std::span<const std::byte> body);

  // behind: a consumer_offset below the stored one, not stored (`previous` is the stored one).
  enum class offset_status : std::uint8_t {
    stored = 0,
    out_of_range = 1,
    limit_exceeded = 2,
    invalid_name = 3,
    behind = 4
  };
  struct offset_reply {
    offset_status status = offset_status::stored;
    std::int64_t previous = -1;  // the offset stored before (-1: none)
    std::int64_t next_offset = 0;
  };
  [[nodiscard]] static std::optional<offset_reply> decode_offset_reply(std::span<const std::byte> body);

  std::vector<std::byte> apply(const header& prepare, std::span<const std::byte> body) override;
  void skip(const header& prepare, std::span<const std::byte> body) override;
  proposal prepare(const header& request, const prepare_context& at, std::vector<std::byte> body,
                   std::span<const message* const> pending) override;
  // Magic and version, then next offset, last timestamp, settings (consumers_max, producers_max, producer_expiry_ms),
  // whether settled (u8), producers (id, epoch, last sequence, last timestamp, kept batches) and consumers (name,
  // offset); all integers little-endian. restore() also reads the first version
  // ("partm01", no producer times: each producer counts as last seen at the snapshot's last timestamp).
  [[nodiscard]] std::vector<std::byte> snapshot() const override;
  // The most bytes snapshot() returns holding producers_max producers with every batch kept and `consumers`
  // consumers with the longest names (issue 38, finding 4: past about 480,000 producers a checkpoint outgrew its
  // region and the partition stopped on every replica at once).
  [[nodiscard]] static std::uint64_t snapshot_bytes_max(std::uint64_t producers_max, std::uint64_t consumers,
                                                        std::size_t consumer_name_bytes_max) noexcept;
  // Whether an operation_partition_settings op of `s` would be applied: within the ranges, and its bound, with the
  // consumers already held if more than s.consumers_max, within partition_snapshot_bytes_budget.
  [[nodiscard]] bool accepts(const partition_settings& s) const noexcept;
  [[nodiscard]] static std::vector<std::byte> settings_request(const partition_settings& s);
  [[nodiscard]] bool restore(std::span<const std::byte> bytes) override;

  [[nodiscard]] std::int64_t next_offset() const noexcept { return next_offset_; }
  [[nodiscard]] std::int64_t last_timestamp() const noexcept { return last_timestamp_; }
  [[nodiscard]] std::optional<std::int64_t> consumer_offset(const std::string& name) const;
  [[nodiscard]] const std::map<std::string, std::int64_t>& consumers() const noexcept { return consumers_; }
  [[nodiscard]] const storage::producer_table& producers() const noexcept { return producers_; }
  [[nodiscard]] const partition_settings& settings() const noexcept { return settings_; }
  [[nodiscard]] bool settled() const noexcept { return settled_; }

 private:
  // A batch in the log takes its offsets (apply and skip alike: its bytes are in the log whether executed or not).
  void absorb(const header& prepare, std::span<const std::byte> body);
  // The time before which a producer's newest batch has expired, seen from a batch at `time`.
  [[nodiscard]] std::int64_t expire_before(std::int64_t time) const noexcept;

  partition_machine_options options_;
  wall_clock now_ms_;
  partition_settings settings_;  // replicated: changed by operation_partition_settings only
  // Whether an operation_partition_settings op has been applied. Until then nothing is trimmed, as before producers
  // expired: a replica that restored a checkpoint of that time and one that replayed the same ops hold the same
  // producers, whatever times each recorded. The first such op stamps every producer with the op's time.
  bool settled_ = false;
  std::int64_t next_offset_ = 0;
  std::int64_t last_timestamp_ = 0;
  storage::producer_table producers_;  // a kept batch's tag is its op
  std::map<std::string, std::int64_t> consumers_;
};

}  // namespace rill::consensus
