#pragma once
// metadata_state: streams, topics and partitions, as a plain state machine over journal commands
// (net/proto/metadata.proto). The metadata actor checks a command, appends it to the metadata log, applies it and
// publishes the new immutable view; a restart loads the snapshot and replays the log after it, through the same
// apply(). Deterministic: the same commands give the same state (ids are assigned from counters in the state).
//
// Invariants
// - Names are 1-255 bytes of [A-Za-z0-9._-] and unique within their parent.
// - Ids fit the namespace packing: stream < 2^20, topic < 2^12, partition < 2^20 (groups < 2^20).
// - Ids are reused once what they named is gone: a stream, topic or group gets the first id at or after its
//   parent's cursor (next_*_id, wrapping at the id space's end) that no live one holds, and the cursor moves past
//   it; so an id comes back only after the whole id space went round (a client's stale id rarely meets a new
//   topic), and creation never fails while fewer than the id space are alive. A command log written by an earlier
//   build (ids from counters that only grew) replays to the same ids: its cursor never met a live id.
// - A reused id's directories may hold leftovers of the deleted one (its removal failed or a crash cut it): the
//   metadata actor removes them before it commits the creation (metadata_handlers.h, leftovers_of), so recovery
//   never finds an old topic's data under a new topic.
// - A view, once published, never changes: readers on every shard hold it without locks.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "config/log_config.h"
#include "net/proto/metadata.pb.h"
#include "net/proto/rill.pb.h"

namespace rill::actors {

inline constexpr std::uint32_t stream_ids_max = 1u << 20;
inline constexpr std::uint32_t topic_ids_max = 1u << 12;
inline constexpr std::uint32_t partitions_max = 1u << 20;
inline constexpr std::size_t name_bytes_max = 255;

inline constexpr std::uint32_t group_ids_max = 1u << 20;
inline constexpr std::size_t groups_per_topic_max = 1024;
inline constexpr std::uint32_t session_timeout_ms_min = 100;
inline constexpr std::uint32_t session_timeout_ms_max = 3'600'000;
inline constexpr std::uint32_t session_timeout_ms_default = 10'000;

// A consumer group of one topic. Its members, assignment and offsets live in its actor (group_state), not here.
struct group_meta {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t created_ms = 0;
  proto::GroupConfig config;  // complete: every field set
};

struct topic_meta {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t created_ms = 0;
  proto::TopicConfig config;        // complete: every field set
  std::uint32_t next_group_id = 0;  // the cursor of group ids (free_group_id)
  // Per partition id (config.partitions() of them), the metadata op whose command created it (metadata_state::
  // apply): the topic's creation, or the add_partitions that added it. A partition deleted and added back is another
  // partition with the same id, and this tells them apart (its replication group and the reconciler's identity: issue
  // 38, finding 1). 0: created before versions were recorded (a partition of an older snapshot).
  std::vector<std::uint64_t> partitions_created;
  [[nodiscard]] std::uint64_t partition_created(std::uint32_t p) const {
    return p < partitions_created.size() ? partitions_created[p] : 0;
  }
  std::map<std::uint32_t, group_meta> groups;
};

struct stream_meta {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t created_ms = 0;
  std::uint32_t next_topic_id = 0;  // the cursor of topic ids (free_topic_id)
  std::map<std::uint32_t, topic_meta> topics;
};

// An immutable picture of all metadata.
struct metadata_view {
  std::map<std::uint32_t, stream_meta> streams;
  std::uint32_t next_stream_id = 0;  // the cursor of stream ids (free_stream_id)
  std::uint64_t version = 0;         // commands applied so far
  // Cluster members' client addresses, as each announced it (SetNode): where a node sends clients for a topic
  // another node serves.
  std::map<std::uint64_t, std::string> nodes;

  // Partitions and groups of every topic together (what limits.partitions_max and limits.groups_max count).
  [[nodiscard]] std::uint64_t partition_count() const;
  [[nodiscard]] std::uint64_t group_count() const;

  // Errors carry net::status codes (stream_not_found, topic_not_found) with a message naming what was asked.
  expected<const stream_meta*> find_stream(const proto::Identifier& id) const;
  expected<const topic_meta*> find_topic(const stream_meta& stream, const proto::Identifier& id) const;
  // Error: group_not_found.
  static expected<const group_meta*> find_group(const topic_meta& topic, const proto::Identifier& id);
};

// The id a new stream, topic or group would get (see the invariants), or nullopt when every id is live.
[[nodiscard]] std::optional<std::uint32_t> free_stream_id(const metadata_view& view);
[[nodiscard]] std::optional<std::uint32_t> free_topic_id(const stream_meta& stream);
[[nodiscard]] std::optional<std::uint32_t> free_group_id(const topic_meta& topic);

// The partition's position in the namespace (stream 20 bits, topic 12 bits, partition 20 bits) and the shard that
// owns it: upper 16 bits of murmur3_64(namespace) modulo the shard count.
std::uint64_t partition_namespace(std::uint32_t stream_id, std::uint32_t topic_id, std::uint32_t partition_id);
std::size_t shard_of(std::uint64_t ns, std::size_t shards);
// The node that serves a topic's partitions and consumer groups in a cluster of several nodes (partition data stays
// on one node until partitions are replicated): one of `members` (every member's node id, ascending), chosen by a
// hash of the topic's ids so that topics spread over the nodes, the same on every node. 0 when `members` is empty
// (a node alone serves everything).
std::uint64_t topic_home(std::uint32_t stream_id, std::uint32_t topic_id, std::span<const std::uint64_t> members);
// The nodes that replicate partition `partition_id` of a topic with replication factor `factor` (> 1), in replica
// order: `factor` consecutive members (ascending, wrapping) from the topic's home onwards, shifted by the partition
// id, so that the first, the partition's preferred primary, differs from one partition to the next and a topic's
// primaries spread evenly over the members. A function of committed metadata alone (the topic's ids and
// replication factor, and the cluster's fixed membership): every node places every partition the same way. Empty
// when `members` is empty; at most members.size() nodes.
std::vector<std::uint64_t> partition_replicas(std::uint32_t stream_id, std::uint32_t topic_id,
                                              std::uint32_t partition_id, std::uint32_t factor,
                                              std::span<const std::uint64_t> members);
// The VSR group id of a replicated partition: a hash of its topic's ids, the topic's creation time, the partition id
// and the metadata version that created the partition (topic_meta::partitions_created), so that a topic created
// again under the same ids, even within the same millisecond, and a partition deleted and added back get other
// groups (messages of the old ones are dropped; a directory an old group left is not opened as the new one's).
// partition_created 0 (a partition of an older snapshot) gives the id such partitions always had. Never 0 (the
// metadata group's).
std::uint64_t partition_group_id(std::uint32_t stream_id, std::uint32_t topic_id, std::uint64_t topic_created_ms,
                                 std::uint32_t partition_id, std::uint64_t partition_created);
// A consumer group's key: like a partition's namespace with the group id in the partition bits and the top bit set
// (so it never equals a partition's); its shard is shard_of(group_namespace(...)).
std::uint64_t group_namespace(std::uint32_t stream_id, std::uint32_t topic_id, std::uint32_t group_id);

// A new group's complete configuration (defaults where unset), range-checked: errors (invalid_config) name the
// field and its allowed range.
expected<proto::GroupConfig> complete_group_config(const proto::GroupConfig& requested);

// A name as the protocol allows: 1-255 bytes of [A-Za-z0-9._-]. `what` names the kind in the error (invalid_name).
// This is the rule metadata_state::check applies, at a commit and when the journal is replayed, so it never
// narrows: a command an older build committed must replay to the same state (and the same ids).
expected<void> check_name(std::string_view what, std::string_view name);
// A name a request may give from now on: check_name's rule, and not exactly "." or ".." (earlier builds took those;
// their journals still replay). The metadata handlers apply it to names a request creates or renames to, and the
// partition and group to consumer names and member ids.
expected<void> check_new_name(std::string_view what, std::string_view name);

// The complete configuration of a new topic: `requested` fields where set, the server's defaults elsewhere. Every
// field is range-checked; errors (invalid_config) name the field and the allowed range.
// What a node's cluster allows a topic: replication_factor at most `members`, `factor_default` when none is asked.
struct replication_limits {
  std::uint32_t members = 1;
  std::uint32_t factor_default = 1;
};
expected<proto::TopicConfig> complete_topic_config(const proto::TopicConfig& requested,
                                                   const config::log_config& defaults, replication_limits r = {});
// `current` with the fields `patch` sets, checked the same way (replication_factor cannot change).
expected<proto::TopicConfig> patch_topic_config(const proto::TopicConfig& current, const proto::TopicConfig& patch);
// The storage settings of a partition of a topic with `topic` config.
config::log_config log_config_for(const proto::TopicConfig& topic, const config::log_config& defaults);

class metadata_state {
 public:
  metadata_state();

  // Is `cmd` valid now? Changes nothing. Errors: invalid_name, already_exists, stream_not_found, topic_not_found,
  // invalid_config, partition_not_found (deleting more partitions than exist), unsupported, limit_exceeded (every id
  // of the id space live, or groups_per_topic_max groups: the state's own bounds; the configured limits are the
  // handlers', before the commit, since they may change between runs and replay must accept what was committed).
  expected<void> check(const proto::MetadataCommand& cmd) const;

  struct applied {
    std::uint32_t stream_id = 0;
    std::uint32_t topic_id = 0;
  };
  // Applies a command that check() accepts (asserted). Returns the ids it created or touched. `op`: the metadata
  // group's op that applies it, which names the partitions it creates (topic_meta::partitions_created: every replica
  // applies it at the same op); 0 (a state applied without a log: tests) names them by the version after it.
  applied apply(const proto::MetadataCommand& cmd, std::uint64_t op = 0);

  [[nodiscard]] std::shared_ptr<const metadata_view> view() const noexcept { return view_; }

  [[nodiscard]] proto::MetadataSnapshot snapshot(std::uint64_t applied_offset) const;
  static expected<metadata_state> from_snapshot(const proto::MetadataSnapshot& s);

 private:
  std::shared_ptr<const metadata_view> view_;
};

}  // namespace rill::actors
