#pragma once
// node_checker: the safety properties of a whole-node run (node_cluster.h), checked as events happen and at the end.
//
// - A partition is named by its incarnation: stream and topic ids, the topic's creation time, the partition id, and
//   the metadata op that created it (partition_key: a delete and an add back make another incarnation; the
//   workload holds its producers off a topic while it changes it, so a record's incarnation is never in doubt). Every
//   record the workload writes says which incarnation it was written to: reading it from another one (a deleted
//   partition's records read again, an old replica joining a new group) is a failure.
// - Offsets: an offset names one record, ever (acknowledgements and every read); an acknowledged produce names the
//   offsets its records got, and they never name another record.
// - At the end, every replica of every partition that exists holds, committed, exactly the records acknowledged for
//   that incarnation, each once, at the acknowledged offsets, with no gap from the log's start on.
// - A named consumer's stored offset never goes back, except by an explicit reset it asked for (an offset read
//   back is at least the highest it committed since its last reset).
// - Reads are not stale: a poll a primary serves, issued at tick t, shows (by its high watermark) every record
//   acknowledged before t - stale_ticks_max. A primary cut off from its group stops serving once its quorum has not
//   heard it for the backups' primary timeout, before a new primary can acknowledge anything (issue 38, finding 5).
//
// - Consumer groups (of replicated topics, served by the coordinators): one reader per partition at any instant: a
//   member's poll delivers data only if, when the poll was issued, the committed state of the group's coordinator
//   (the most advanced replica's) still let that member read that partition in that generation: a zombie (a member
//   whose session ended, whose partition moved) reads nothing, whichever node it asks. A group never skips records:
//   a delivery of a partition's incarnation starts at or below what the group was delivered before (or the log's
//   start). Committed group offsets never go back, except where the group's partitions were removed (a resize).
//
// The first violation is kept, with its tick; later ones are counted.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace rill::simulation {

struct partition_key {
  std::uint32_t stream = 0;
  std::uint32_t topic = 0;
  std::uint64_t topic_created_ms = 0;
  std::uint32_t partition = 0;
  std::uint64_t incarnation = 0;  // topic_meta::partitions_created: the metadata op that created this partition
  friend auto operator<=>(const partition_key&, const partition_key&) = default;
  [[nodiscard]] std::string describe() const;
  // What a record written to this incarnation carries as its value's prefix.
  [[nodiscard]] std::string tag() const;
};

// One record as the workload writes it: its producer, sequence number and index in its batch.
struct record_id {
  std::uint64_t producer = 0;
  std::int64_t sequence = 0;
  friend auto operator<=>(const record_id&, const record_id&) = default;
};

class node_checker {
 public:
  // A produce acknowledged: `records` records of `first`'s producer from its sequence on, at base_offset on.
  void on_ack(std::uint64_t tick, const partition_key& p, record_id first, std::int64_t base_offset,
              std::uint32_t records);
  // A record read from node `node`'s replica (a consumer, or the final check): its offset, its key's record id and
  // the incarnation its value names.
  void on_read(std::uint64_t tick, std::uint32_t node, const partition_key& p, std::int64_t offset, record_id id,
               const std::string& tag);
  // A named consumer's offset committed (auto-commit) or stored explicitly (`reset`), acknowledged.
  void on_offset_stored(std::uint64_t tick, const std::string& consumer, const partition_key& p, std::int64_t offset,
                        bool reset);
  // An explicit store (a reset) whose outcome is unknown (it may still be made): until the consumer makes it again
  // and it is acknowledged, the offset may be seen back there.
  void on_offset_reset_unknown(const std::string& consumer, const partition_key& p, std::int64_t offset);
  // A poll issued at `tick` to node `node`'s primary of `p` (caught up in its view) saw this high watermark.
  void on_poll(std::uint64_t tick, std::uint32_t node, const partition_key& p, std::int64_t high_watermark);
  static constexpr std::uint64_t stale_ticks_max = 10;
  // A named consumer's stored offset read back from a primary.
  void on_offset_read(std::uint64_t tick, const std::string& consumer, const partition_key& p,
                      std::optional<std::int64_t> offset);
  // A group member's poll of `p`, issued at `issued` (`owned`: the committed coordinator state then let the member
  // read it), delivered records [start, end) at `tick`; the replica's log started at `log_start` as it read.
  // `others_in_flight`: another auto-commit poll of `p` for the group is in flight (it may have committed further).
  void on_group_delivery(std::uint64_t issued, std::uint64_t tick, const std::string& group, const std::string& member,
                         std::uint64_t generation, const partition_key& p, bool owned, std::int64_t start,
                         std::int64_t end, std::int64_t log_start, bool others_in_flight = false);
  // A member's auto-commit poll of `p` was refused after it read (a submit that failed), or was given up (its node
  // died): its commit may have applied, how far is not known, so the group's next delivery of `p` may start past what
  // it was delivered, as a client whose reply was lost would find.
  void on_group_uncertain(const std::string& group, const partition_key& p);
  // The committed offsets of `group` (a name and its incarnation) in the most advanced replica of its coordinator, by
  // partition, as the coordinator's commit advanced.
  void on_group_offsets(std::uint64_t tick, const std::string& group,
                        const std::vector<std::optional<std::uint64_t>>& offsets);
  // At the end: node `node`'s replica of `p` holds these records, committed, from its log start (`start`) on.
  void check_log(std::uint64_t tick, std::uint32_t node, const partition_key& p, std::int64_t start,
                 const std::vector<std::pair<std::int64_t, record_id>>& records);
  void fail(std::uint64_t tick, std::string what);

  [[nodiscard]] bool ok() const noexcept { return !violation_; }
  [[nodiscard]] const std::string& violation() const noexcept { return *violation_; }
  [[nodiscard]] std::uint64_t acks() const noexcept { return acks_; }

 private:
  // Per incarnation: offset -> the record it names.
  std::map<partition_key, std::map<std::int64_t, record_id>> offsets_;
  // Per incarnation: the acknowledged records and their offsets.
  std::map<partition_key, std::map<record_id, std::int64_t>> acked_;
  // Per incarnation, in tick order: (tick of an acknowledgement, the highest end offset acknowledged by then).
  std::map<partition_key, std::vector<std::pair<std::uint64_t, std::int64_t>>> ack_ends_;
  // Per (consumer, incarnation): the highest offset stored since the last reset.
  std::map<std::pair<std::string, partition_key>, std::int64_t> floor_;
  // Per (group, incarnation of a partition): the end of what the group was delivered.
  std::map<std::pair<std::string, partition_key>, std::int64_t> delivered_end_;
  // (group, incarnation of a partition) after an auto-commit poll whose outcome is unknown, until the next delivery.
  std::set<std::pair<std::string, partition_key>> uncertain_;
  // Per group: the highest committed offset seen, by partition.
  std::map<std::string, std::vector<std::optional<std::uint64_t>>> group_floor_;
  std::optional<std::string> violation_;
  std::uint64_t violations_ = 0;
  std::uint64_t acks_ = 0;
};

}  // namespace rill::simulation
