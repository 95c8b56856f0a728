#pragma once
// node_workload: what drives a whole-node run (node_cluster.h), from the seed.
//
// - The operator: one stream, then metadata changes one at a time through any serving node: topics created (1 to 3
//   partitions, replication factor min(3, nodes)) and deleted, a topic's last partition deleted and added back, a
//   topic's retention changed. While it changes a topic it holds the producers off it (they finish what is in
//   flight first), so that every record's incarnation (node_checker.h) is known.
// - Producers: idempotent (each its producer id, epoch 0, sequences per partition), one produce in flight each, sent
//   to a node whose replica of the partition is primary; a produce that fails (a view change, a node lost, a
//   timeout) is sent again with the same sequences, through whichever node leads then, until acknowledged or its
//   partition is gone. Each record's key names its producer and sequence, its value the incarnation it was written to.
// - Named consumers: read committed records from a primary from their stored offset on (the checker checks every
//   record), commit the offset they reached (auto-commit) and now and then rewind on purpose (an explicit store);
//   the stored offset read back must never be below what they committed since their last rewind.
// - Consumer groups: the operator creates a group with each topic it creates (a session timeout of 1 to 3 s).
//   Members (stable ids) join one, heartbeat through any node (giving back what is revoked from them), and poll the
//   partitions they own through a node whose replica is primary, auto-committing what they read, through the code
//   rilld runs (actors/coordinated_flows.h). Now and then one pauses for up to three session timeouts without a
//   heartbeat (a zombie): back, it polls with its old generation before it heartbeats again.
//
// done(): every producer has made its produces and the operator its changes (the liveness phase waits for it).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "actors/coordinator_requests.h"
#include "actors/metadata_state.h"
#include "base/random.h"
#include "simulation/node_checker.h"

namespace rill::actors {
class coordinators;
}

namespace rill::simulation {

class node_cluster;

// The records of a batch the workload wrote: each one's producer and sequence (its key) and the incarnation its
// value names (empty when the batch does not parse; a record whose key does not parse has sequence -1).
std::vector<std::pair<record_id, std::string>> records_in(std::span<const std::byte> batch);

class node_workload {
 public:
  node_workload(node_cluster& c, std::uint64_t seed);
  ~node_workload();
  node_workload(const node_workload&) = delete;
  node_workload& operator=(const node_workload&) = delete;

  void step();
  [[nodiscard]] bool done() const;
  // What is still to do, for a liveness failure's report.
  [[nodiscard]] std::string pending() const;
  [[nodiscard]] std::uint64_t changes() const noexcept { return changes_; }
  [[nodiscard]] std::uint64_t produced() const noexcept { return produced_; }
  [[nodiscard]] std::uint64_t retries() const noexcept { return retries_; }
  [[nodiscard]] std::uint64_t records_read() const noexcept { return records_read_; }
  [[nodiscard]] std::uint64_t group_records() const noexcept { return group_records_; }  // delivered to members
  [[nodiscard]] std::uint64_t zombie_refusals() const noexcept { return zombie_refusals_; }
  [[nodiscard]] std::uint64_t pauses() const noexcept { return pauses_; }
  // Liveness: every group a member is in has committed, for every partition, the partition's committed end.
  [[nodiscard]] bool groups_caught_up(std::string* why) const;
  // The workload's incarnation of each partition of each live topic, by (stream, topic, created_ms, partition).
  [[nodiscard]] std::optional<partition_key> current(std::uint32_t stream, std::uint32_t topic,
                                                     std::uint64_t created_ms, std::uint32_t partition) const;

  struct producer;
  struct consumer;
  struct member;

 private:
  void step_operator();
  void step_producer(producer& p);
  void step_consumer(consumer& c);
  void step_member(member& m);
  void member_poll(member& m);
  // The member's explicit commit of what it read of `partition` (up to `next`), through node `node`.
  void commit_read(member& m, std::size_t node, const actors::coordinated_group& g, std::uint64_t generation,
                   std::uint32_t partition, std::int64_t next);
  // Checks the committed offsets of every group whose coordinator's commit advanced (node_checker).
  void observe_groups();
  // The replica of coordinator `index` that has applied the most (null: none open), and its commit.
  [[nodiscard]] std::pair<const actors::coordinators*, std::uint64_t> most_advanced(std::uint32_t index) const;
  // The highest committed offset among the open replicas of k's incarnation.
  [[nodiscard]] std::int64_t committed_end(const partition_key& k) const;
  // Whether, in the most advanced replica of g's coordinator, `member` may still read `partition` in `generation`.
  [[nodiscard]] bool truly_owns(const actors::coordinated_group& g, const std::string& member_id,
                                std::uint64_t generation, std::uint32_t partition) const;
  // A serving node whose coordinators are open and whose metadata names group (stream, topic, group id), at random,
  // with the group as that node's metadata has it.
  [[nodiscard]] std::optional<std::pair<std::size_t, actors::coordinated_group>> node_for_group(std::uint32_t stream,
                                                                                                std::uint32_t topic,
                                                                                                std::uint32_t group);
  // A serving node at random (nullopt: none).
  [[nodiscard]] std::optional<std::size_t> any_node();
  // The node whose replica of `ns` takes produces now (nullopt: none).
  // The node whose replica of k's incarnation takes requests now, if any.
  [[nodiscard]] std::optional<std::size_t> primary_of(const partition_key& k);
  // Any node whose replica of k's incarnation serves as primary now, at random (a consumer is connected to some
  // node: during a cut, the old primary's side or the new one's).
  [[nodiscard]] std::optional<std::size_t> any_primary_of(const partition_key& k);
  [[nodiscard]] std::uint64_t group_of(const partition_key& k) const;
  // The committed metadata of the serving node that has applied the most, and that op (null: none serves).
  [[nodiscard]] std::pair<std::shared_ptr<const actors::metadata_view>, std::uint64_t> newest_view() const;
  // Learns the partitions of the committed view (new incarnations for new partitions).
  void learn(std::uint64_t tick);

  struct change;
  // Makes the next change (nullopt: none possible now); `follow` is a partition deleted to be added back.
  [[nodiscard]] std::optional<change> next_change(const actors::metadata_view& view);
  // Moves the change in flight on; true once it is over (visible, refused, or unknown for too long).
  bool progress(change& c);
  [[nodiscard]] bool frozen(std::uint32_t stream, std::uint32_t topic) const;
  // The operator's creation of the group of the topic it just created (null: the topic is gone).
  [[nodiscard]] std::unique_ptr<change> group_change(const std::string& topic_name);

  node_cluster& cluster_;
  prng rng_;
  prng pick_rng_;  // any_primary_of's (apart, so that rng_'s draws stay what they were)
  std::vector<std::unique_ptr<producer>> producers_;
  std::vector<std::unique_ptr<consumer>> consumers_;
  std::vector<std::unique_ptr<member>> members_;
  prng member_rng_;  // the members' draws (apart, so that rng_'s draws stay what they were)
  // The groups of the most advanced metadata: (stream, topic, group id) -> the topic's creation time.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::uint64_t> groups_;
  // Per (group, incarnation of a partition): members' auto-commit polls in flight (each may have committed already).
  std::map<std::pair<std::string, partition_key>, int> auto_in_flight_;
  std::vector<std::uint64_t> observed_;  // per coordinator: the commit whose groups' offsets were checked last
  // (stream, topic, created_ms, partition) -> the incarnation the workload writes to now (the metadata op that
  // created the partition).
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t, std::uint32_t>, std::uint64_t> incarnations_;
  std::uint64_t learned_op_ = 0;    // the metadata op of the view learned last (never older)
  std::unique_ptr<change> change_;  // the operator's change in flight
  // Topics held off: the one the change in flight touches, and those whose change's outcome never became known.
  std::set<std::pair<std::uint32_t, std::uint32_t>> frozen_forever_;
  bool changing_ = false;  // a change in flight (change_ set)
  std::uint64_t next_change_at_ = 0;
  std::uint32_t changes_left_ = 0;
  std::uint32_t topics_created_ = 0;
  std::uint64_t changes_ = 0;
  std::uint64_t produced_ = 0;
  std::uint64_t retries_ = 0;
  std::uint64_t records_read_ = 0;
  std::uint64_t group_records_ = 0;
  std::uint64_t zombie_refusals_ = 0;  // members' polls refused data (not the owner, a stale generation)
  std::uint64_t pauses_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rill::simulation
