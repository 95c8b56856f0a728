#pragma once
// reconciler: what a node runs (partition and group actors, the data directories it may hold) made to match what the
// committed metadata names. Plain code (no CAF, no I/O): the metadata actor keeps a `node_inventory` of what it runs,
// asks plan_reconcile() for the steps from that to a view, executes them in order, and record()s each one that
// succeeded. A step that fails stops the pass; the inventory still says what really runs, so the next pass (a retry,
// the next change, the next start) plans only what is left. The plan depends on the view and the inventory only,
// not on which command led there: a command this node committed, one replicated from a peer (issue 17), a restart
// (an empty inventory) and a retry after a failure all take the same path.
//
// Invariants
// - Applying a committed metadata command does no I/O (metadata_machine); everything that can fail is a step here.
// - Steps run in this order: destroy partitions, destroy groups, remove the data of streams and topics, close
//   partitions to reopen, update partitions' settings in place, spawn partitions, spawn groups, resize groups. So
//   nothing is spawned in a directory whose old owner still runs, and a topic's data goes only after every actor that
//   held it is gone. A settings change is made in place when the log takes it so (retention and segment rolling:
//   config::changes_in_place); any other reopens the partition.
// - A partition's identity is its topic's incarnation and the op that created it (topic_meta::partitions_created):
//   one deleted and added back is destroyed and spawned again, whatever the ids (issue 38, finding 1).
// - An inventory entry is of one incarnation: a stream, topic or group deleted and created again with the same id
//   (ids are reused, metadata_state.h) has another `created_ms`, and its old actors are destroyed before the new ones
//   are spawned. (Two incarnations in one millisecond look alike; the metadata actor carries each change out before it
//   plans the next, and removes a reused id's leftovers before it commits the creation, so this matters only for a
//   node that falls behind by more than a command: issue 17, where each entity gets the op that created it.)
// - A plan for the inventory it was made from, executed in full, gives an inventory for which the plan is empty.
//
// Cost: O(partitions + groups) of the view and the inventory per plan, no I/O. Metadata changes are rare; a topic
// with partitions_max partitions costs one pass over it per change.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/metadata_state.h"
#include "base/expected.h"
#include "base/task.h"
#include "config/log_config.h"

namespace rill::actors {

struct running_partition {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
  std::uint64_t topic_created_ms = 0;  // the incarnation of its topic
  std::uint64_t created = 0;           // and its own (topic_meta::partitions_created)
  config::log_config config;           // what it was opened with
};

struct running_group {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t group_id = 0;
  std::uint64_t created_ms = 0;
  std::uint32_t partitions = 0;  // the topic's partition count it was told
};

// What this node runs, and which streams' and topics' directories it may hold data in.
struct node_inventory {
  std::map<std::uint64_t, running_partition> partitions;                    // by partition_namespace()
  std::map<std::uint64_t, running_group> groups;                            // by group_namespace()
  std::map<std::uint32_t, std::uint64_t> streams;                           // stream id -> created_ms
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> topics;  // (stream, topic) -> created_ms
};

enum class reconcile_kind : std::uint8_t {
  destroy_partition,   // the actor goes and takes its data with it
  destroy_group,       // the actor goes and takes its state with it
  remove_topic_data,   // `paths`: the topic's partition and group trees
  remove_stream_data,  // `paths`: the stream's trees
  close_partition,     // closed, not destroyed: its settings changed and a spawn step reopens it
  update_partition,    // `config`: retention or segment settings changed, taken in place (config::changes_in_place)
  spawn_partition,     // opens (or creates) its log in its directory
  spawn_group,
  resize_group,  // tell it the topic's partition count, `partitions`
};

[[nodiscard]] const char* to_string(reconcile_kind k) noexcept;

struct reconcile_step {
  reconcile_kind kind = reconcile_kind::spawn_partition;
  std::uint64_t ns = 0;  // partition or group namespace (partition and group steps)
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t id = 0;  // partition or group id
  // Incarnations: spawn steps name their stream's and topic's (and a group its own); remove steps the one removed.
  std::uint64_t stream_created_ms = 0;
  std::uint64_t topic_created_ms = 0;
  std::uint64_t group_created_ms = 0;
  std::uint64_t partition_created = 0;  // spawn_partition: topic_meta::partitions_created of it
  std::uint32_t partitions = 0;         // spawn_group, resize_group: the topic's partition count
  config::log_config config;            // spawn_partition
  // spawn_partition of a replicated topic (replication_factor > 1 in a cluster): its group's members in replica
  // order (partition_replicas), this node among them; empty: served by this node alone.
  std::vector<std::uint64_t> replicas;
  std::vector<std::string> paths;  // remove_*_data

  // "spawn partition 3 of topic 1 of stream 0", for errors and notices.
  [[nodiscard]] std::string describe() const;
};

// The steps that take `running` to what `desired` names, in the order they must run (see the invariants).
// `defaults` are the server's storage settings under each topic's own (log_config_for).
// What this node serves: everything alone; in a cluster of several, the consumer groups (and, for a topic not
// replicated, the partitions) of the topics whose topic_home() it is, and a replica of every partition of a
// replicated topic whose partition_replicas() name it.
struct node_placement {
  std::uint64_t self = 0;
  std::vector<std::uint64_t> members;  // ascending; empty: a node alone
  [[nodiscard]] bool serves(std::uint32_t stream_id, std::uint32_t topic_id) const {
    return members.empty() || topic_home(stream_id, topic_id, members) == self;
  }
  // The members of a replicated partition's group, when the topic is replicated in a cluster (else empty).
  [[nodiscard]] std::vector<std::uint64_t> replicas(std::uint32_t stream_id, std::uint32_t topic_id,
                                                    std::uint32_t partition_id, std::uint32_t factor) const {
    return members.empty() || factor <= 1 ? std::vector<std::uint64_t>{}
                                          : partition_replicas(stream_id, topic_id, partition_id, factor, members);
  }
  [[nodiscard]] bool serves_partition(std::uint32_t stream_id, std::uint32_t topic_id, std::uint32_t partition_id,
                                      std::uint32_t factor) const {
    if (members.empty() || factor <= 1) {
      return serves(stream_id, topic_id);
    }
    const auto r = replicas(stream_id, topic_id, partition_id, factor);
    return std::find(r.begin(), r.end(), self) != r.end();
  }
  // This node may hold data of the topic: it serves its groups or a partition of it.
  [[nodiscard]] bool holds(std::uint32_t stream_id, std::uint32_t topic_id, const proto::TopicConfig& config) const {
    if (serves(stream_id, topic_id)) {
      return true;
    }
    for (std::uint32_t p = 0; p < config.partitions(); ++p) {
      if (serves_partition(stream_id, topic_id, p, config.replication_factor())) {
        return true;
      }
    }
    return false;
  }
};

// The steps from `running` to what `desired` names for this node (`here`: the topics it serves; a topic served by
// another node is, for this one, as if it did not exist).
[[nodiscard]] std::vector<reconcile_step> plan_reconcile(const metadata_view& desired, const node_inventory& running,
                                                         const config::log_config& defaults,
                                                         const std::string& data_dir, const node_placement& here = {});

// `running` once `step` succeeded.
void record(node_inventory& running, const reconcile_step& step);

// Who carries out the steps: rilld's metadata actor (actors and files), the simulator's nodes (partition replicas on
// their simulated disks, simulation/node_cluster.h).
class reconcile_executor {
 public:
  virtual ~reconcile_executor() = default;
  // A step done at once, without I/O, that cannot fail (a spawn, a settings update, a resize): true when it was; false
  // when the step is
  // not one of those (it is run() instead).
  virtual bool run_now(const reconcile_step& step) = 0;
  // Any other step; an error stops the pass.
  virtual task<expected<void>> run(const reconcile_step& step) = 0;
  // Called once before the pass's first resize_group step (a group hands out partitions the node's routing must
  // already name).
  virtual void before_resize() {}
};

// One pass: the steps from `running` to `desired` (plan_reconcile), carried out in order, each recorded in `running`
// once it succeeded. Stops at the first step that fails: the error names the step ("spawn partition 3 of topic 1
// of stream 0: ..."), and `running` says what really runs, so the next pass plans only what is left.
task<expected<void>> carry_out(const metadata_view& desired, node_inventory& running,
                               const config::log_config& defaults, const std::string& data_dir,
                               const node_placement& here, reconcile_executor& executor);

}  // namespace rill::actors
