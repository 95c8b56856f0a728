#pragma once
// producer_table: the idempotent-producer rules, as plain data and pure functions, shared by the single-node broker
// (actors/partition_state: checked before an append, against appends still in flight) and by a replicated
// partition's state machine (checked when its primary prepares, against the committed state plus the uncommitted
// pipeline; see simulation/workload.h). No I/O, no clock.
//
// Kafka's rules for a non-transactional idempotent producer (producer_id >= 0; a batch with producer_id -1 takes no
// part). Per producer the table keeps its epoch, its last sequence and its last batches_kept batches:
// - a batch with the same first and last sequence as a kept batch of the same epoch is a retry (duplicate): it is
//   answered with the original's offset and never stored again;
// - a batch at or up to 2^30 sequences behind the last one, not among the kept batches, was stored before but its
//   offset is forgotten (duplicate_sequence);
// - otherwise, in the same epoch, it must start right after the last sequence (sequence_gap);
// - an older epoch is refused (producer_fenced); a newer epoch must start at sequence 0 (sequence_gap);
// - a producer the table does not hold must start at sequence 0 (unknown_producer_id: its earlier batches are
//   gone; the client starts a new producer id).
// Sequences wrap from INT32_MAX to 0 (storage/producer_sequence.h).
//
// Expiry and the bound (issue 38, finding 4): producer ids are chosen by clients, so the table would otherwise grow
// with every producer a partition ever saw, and a replicated partition's checkpoint holds all of them. trim()
// forgets producers whose newest batch is older than a cut-off time (the owner's producer expiry, a day by default
// as Kafka's producer.id.expiration.ms) and, beyond a count, the producers idle longest (by the log-append time of
// their newest batch, ties by id), as Redpanda bounds its producers. A forgotten producer is a new one: its next
// batch must start at sequence 0 (unknown_producer_id otherwise), and a retry of a batch from before it was
// forgotten is no longer recognised. Both depend only on the table and the arguments, so replicas that trim at the
// same ops with the same times stay identical.
//
// Invariants
// - A held producer has epoch >= 0, last_sequence >= 0, and 1..batches_kept recent batches, the newest last, whose
//   last_sequence is the producer's.
// - check() never changes anything; record() is the only way a producer moves on.
// - by_time_ holds exactly one (last_timestamp_ms, id) pair per held producer.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace rill::storage {

struct producer_batch {
  std::int32_t first_sequence = 0;
  std::int32_t last_sequence = 0;
  std::int64_t base_offset = -1;  // -1: not known yet (still being written, or not yet committed)
  std::uint64_t tag = 0;          // the owner's reference to where the batch is (a replicated partition: its op)
  friend bool operator==(const producer_batch&, const producer_batch&) = default;
};

struct producer_state {
  std::int16_t epoch = -1;
  std::int32_t last_sequence = -1;
  std::int64_t last_timestamp_ms = -1;  // the log-append time of its newest batch (what expiry is judged by)
  std::deque<producer_batch> recent;    // at most producer_table::batches_kept, oldest first
  friend bool operator==(const producer_state&, const producer_state&) = default;
};

enum class producer_verdict : std::uint8_t {
  fresh,                // the next batch of its producer (or not idempotent): store it
  duplicate,            // a retry of a kept batch: answer with it (`original`)
  duplicate_sequence,   // stored before; its offset is no longer kept
  sequence_gap,         // not the next sequence (or a new epoch not at 0)
  producer_fenced,      // an epoch older than the producer's
  unknown_producer_id,  // a producer the table does not hold, not at sequence 0
};

[[nodiscard]] const char* to_string(producer_verdict v) noexcept;

struct producer_check {
  producer_verdict verdict = producer_verdict::fresh;
  std::optional<producer_batch> original;  // duplicate: the kept batch it repeats
  std::string detail;                      // for a refusal: what was wrong, with the numbers, for the client
};

class producer_table {
 public:
  static constexpr std::size_t batches_kept = 5;

  // The verdict on a batch of `records` (>= 1) records at base_sequence of (producer_id >= 0, epoch >= 0), given
  // the producer's state (nullopt: not held).
  [[nodiscard]] static producer_check check(const std::optional<producer_state>& p, std::int64_t producer_id,
                                            std::int16_t epoch, std::int32_t base_sequence, std::int64_t records);
  // Moves a producer on past a fresh batch appended at timestamp_ms (a new epoch starts it over).
  static void record(producer_state& p, std::int16_t epoch, const producer_batch& batch, std::int64_t timestamp_ms);

  [[nodiscard]] std::optional<producer_state> find(std::int64_t producer_id) const;
  [[nodiscard]] producer_check check(std::int64_t producer_id, std::int16_t epoch, std::int32_t base_sequence,
                                     std::int64_t records) const {
    return check(find(producer_id), producer_id, epoch, base_sequence, records);
  }
  void record(std::int64_t producer_id, std::int16_t epoch, const producer_batch& batch, std::int64_t timestamp_ms);
  // Sets the offset of a kept batch recorded without one (no effect when it is no longer kept).
  void set_offset(std::int64_t producer_id, std::int32_t first_sequence, std::int32_t last_sequence,
                  std::int64_t base_offset);
  // Puts a producer back as it was (nullopt: not held): undoing records.
  void put(std::int64_t producer_id, const std::optional<producer_state>& p);
  void clear() noexcept {
    producers_.clear();
    by_time_.clear();
  }
  // Forgets every producer whose newest batch is older than expire_before_ms, then, while more than producers_max
  // remain, the one idle longest other than `keep` (the producer just recorded). Returns what it forgot, oldest
  // first.
  struct forgotten {
    std::int64_t producer_id = -1;
    producer_state state;
  };
  std::vector<forgotten> trim(std::int64_t expire_before_ms, std::size_t producers_max, std::int64_t keep = -1);
  // Sets every producer's last time to `timestamp_ms` (a replicated partition starting to trim: times recorded
  // before may differ between its replicas, this one does not).
  void stamp_all(std::int64_t timestamp_ms);

  [[nodiscard]] const std::map<std::int64_t, producer_state>& producers() const noexcept { return producers_; }
  [[nodiscard]] std::size_t size() const noexcept { return producers_.size(); }
  friend bool operator==(const producer_table&, const producer_table&) = default;

 private:
  std::map<std::int64_t, producer_state> producers_;
  std::set<std::pair<std::int64_t, std::int64_t>> by_time_;  // (last_timestamp_ms, id) of every held producer
};

}  // namespace rill::storage
