#pragma once
// routing: what every connection needs to route a request without asking anyone: the metadata view and the actor
// of every partition. Published by the metadata actor as an immutable table behind a std::atomic<shared_ptr>: any
// shard reads the current one without a message; a change publishes a new table. Not lock-free: libstdc++ guards
// the pointer with a short internal spin lock, held only for the load or the swap.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>

#include "actors/interfaces.hpp"
#include "actors/metadata_state.h"
#include "actors/request_router.h"

namespace rill::actors {

struct routing_table {
  std::shared_ptr<const metadata_view> view = std::make_shared<const metadata_view>();
  std::map<std::uint64_t, partition_actor_hdl> partitions;  // by partition_namespace()
  std::map<std::uint64_t, group_actor_hdl> groups;          // by group_namespace()
  // The metadata op `view` is the state after: this node has applied everything up to it (what replies tell
  // clients; a request naming a higher op waits for it). What the view names may still be being carried out.
  std::uint64_t metadata_op = 0;
  std::uint64_t cluster_id = 0;  // this node's cluster (its data directory's identity)
  // A member of a cluster of several nodes: this node's id and every member's (topic_home()); empty: alone.
  std::uint64_t self = 0;
  std::vector<std::uint64_t> members;
  // Replicated partitions whose primary is this node, by topic (partition_namespace(stream, topic, 0)), ascending.
  std::map<std::uint64_t, std::vector<std::uint32_t>> led;

  [[nodiscard]] partition_actor_hdl partition(std::uint32_t stream, std::uint32_t topic,
                                              std::uint32_t partition) const {
    auto it = partitions.find(partition_namespace(stream, topic, partition));
    return it == partitions.end() ? partition_actor_hdl{} : it->second;
  }
  [[nodiscard]] group_actor_hdl group(std::uint32_t stream, std::uint32_t topic, std::uint32_t group) const {
    auto it = groups.find(group_namespace(stream, topic, group));
    return it == groups.end() ? group_actor_hdl{} : it->second;
  }
};

// A table as route_request asks it: which actors it holds.
class routing_directory final : public actor_directory {
 public:
  explicit routing_directory(const routing_table& table) : table_(table) {}
  [[nodiscard]] bool has_partition(std::uint32_t stream, std::uint32_t topic, std::uint32_t partition) const override {
    return table_.partitions.count(partition_namespace(stream, topic, partition)) > 0;
  }
  [[nodiscard]] bool has_group(std::uint32_t stream, std::uint32_t topic, std::uint32_t group) const override {
    return table_.groups.count(group_namespace(stream, topic, group)) > 0;
  }
  [[nodiscard]] std::uint64_t served_by(std::uint32_t stream, std::uint32_t topic) const override {
    const std::uint64_t home = topic_home(stream, topic, table_.members);
    return home == table_.self ? 0 : home;
  }
  [[nodiscard]] std::uint64_t partition_served_by(std::uint32_t stream, std::uint32_t topic, std::uint32_t partition,
                                                  std::uint32_t factor) const override {
    if (table_.members.empty() || factor <= 1) {
      return served_by(stream, topic);
    }
    const auto replicas = partition_replicas(stream, topic, partition, factor, table_.members);
    return std::find(replicas.begin(), replicas.end(), table_.self) != replicas.end() ? 0 : replicas.front();
  }
  [[nodiscard]] const std::vector<std::uint32_t>* led(std::uint32_t stream, std::uint32_t topic) const override {
    auto it = table_.led.find(partition_namespace(stream, topic, 0));
    return it == table_.led.end() ? nullptr : &it->second;
  }

 private:
  const routing_table& table_;
};

class routing {
 public:
  [[nodiscard]] std::shared_ptr<const routing_table> current() const { return table_.load(std::memory_order_acquire); }
  void publish(std::shared_ptr<const routing_table> next) { table_.store(std::move(next), std::memory_order_release); }

 private:
  std::atomic<std::shared_ptr<const routing_table>> table_{std::make_shared<const routing_table>()};
};

}  // namespace rill::actors
