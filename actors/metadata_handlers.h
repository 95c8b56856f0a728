#pragma once
// metadata_handlers: every decision of the metadata API, in plain code (no CAF). A request header comes in; out
// comes an error, or a read's reply plan, or a change: the command to commit and, once it is committed, the plan of
// its reply. The actor only commits (through the local VSR group), has the reconciler's steps run (reconciler.h:
// what the committed view names, spawned, closed, destroyed, resized, removed), asks the partitions and groups what
// a reply plan needs, and answers with build_reply().
//
// Invariants
// - Functions of the view they are given only: the same view and request give the same decision.
// - A change's reply is planned from the view after its command applied.
// - A reply plan names each partition or group it needs by namespace, in the order the reply lists them.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/metadata_state.h"
#include "base/expected.h"
#include "config/log_config.h"
#include "config/resource_limits.h"
#include "net/frame.h"
#include "net/proto/metadata.pb.h"
#include "net/proto/rill.pb.h"

namespace rill::actors {

// "<data>/streams/<s>/topics/<t>/partitions/<p>"
std::string partition_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic,
                          std::uint32_t partition);

// Does `api` only read? Reads run at once; changes wait in line, one at a time.
[[nodiscard]] bool is_metadata_read(std::uint16_t api) noexcept;

// A topic's description without its partitions, and the partitions whose info the actor appends, in order (those
// whose actor exists when it asks).
struct topic_fill {
  proto::TopicInfo info;
  std::vector<std::uint64_t> partitions;  // namespaces
};

enum class reply_kind {
  ready,   // `header` is the reply
  stream,  // StreamGetReply: `stream` and the filled `topics`
  topic,   // the API's reply holding the one filled topic (topic get, create, update; partitions add, delete)
  topics,  // TopicListReply: the filled `topics`
  group,   // GroupCreateReply: the description of the one group
  groups,  // GroupListReply: the descriptions of `groups`
  stats,   // StatsReply: `stats`, its partition, shard, message and byte counts added by the actor
};

// What a reply needs from other actors before it can be built.
struct reply_plan {
  net::api api = net::api::ping;
  reply_kind kind = reply_kind::ready;
  std::string header;                 // ready
  proto::StreamInfo stream;           // stream
  std::vector<topic_fill> topics;     // stream, topic, topics
  std::vector<std::uint64_t> groups;  // group, groups: namespaces, described in this order (those that exist)
  proto::StatsReply stats;            // stats: streams and topics counted
};

// The reply header once the actor filled the plan's topics and described its groups (GroupGetReply headers, in
// the order of plan.groups).
[[nodiscard]] std::string build_reply(reply_plan plan, std::span<const std::string> described);

// A read. Errors: bad_header, stream_not_found, topic_not_found, unknown_api (not a read).
expected<reply_plan> plan_read(const metadata_view& view, std::uint16_t api, std::string_view header);

// A change the request asks for: the command to commit (its time is set when it is committed) and what its reply
// needs from the view before it.
struct metadata_change {
  net::api api = net::api::ping;
  proto::MetadataCommand command;
  std::uint32_t stream_id = 0;  // the stream and topic it names (existing ones)
  std::uint32_t topic_id = 0;
  std::string name;                   // what it creates: stream, topic or group
  std::uint32_t partitions_from = 0;  // partitions add, delete: the topic's count before
  std::uint32_t count = 0;            // and how many it adds or deletes
  // stream, topic, group create: the id it will get (free_*_id of the view; the commit assigns the same, since
  // changes run one at a time).
  std::optional<std::uint32_t> created_id;
};

// Errors: bad_header, stream_not_found, topic_not_found, group_not_found, invalid_config, invalid_name (a name
// check_new_name refuses), unknown_api (not a change), limit_exceeded (the change would pass one of `limits`: the
// message names the key and its value; checked here, before anything is committed or created). What only the state can
// tell (exists, names, id space) is metadata_state::check's, at the commit.
expected<metadata_change> plan_change(const metadata_view& view, std::uint16_t api, std::string_view header,
                                      const config::log_config& defaults, const config::resource_limits& limits,
                                      replication_limits replication = {});

// The directories a change's creation will use (a reused stream, topic or group id; partitions added back after a
// delete), which the actor removes, durably, before it commits the change: what a deleted one with the same id left
// there (its removal failed, or a crash cut it short) must never become the new one's data. Empty for other changes.
[[nodiscard]] std::vector<std::string> leftovers_of(const metadata_change& change, const std::string& data_dir);

// The plan of a committed change's reply. `after`: the view once `change` applied. (What the change makes this node
// run or remove is not decided here: the reconciler (reconciler.h) plans that from the view alone.)
[[nodiscard]] reply_plan reply_of(const metadata_change& change, const metadata_view& after);

// Recovery removes the data directories the view does not know, in two trees: <data>/groups/<s>/<t>/<g> and
// <data>/streams/<s>/topics/<t>/partitions/<p>.
enum class data_tree { groups, streams };
inline constexpr std::size_t data_tree_depth = 3;
[[nodiscard]] std::string data_tree_root(const std::string& data_dir, data_tree tree);
// The directory listing the entries below `dir`, an entry kept at `depth` (0: the root itself).
[[nodiscard]] std::string data_tree_children(data_tree tree, const std::string& dir, std::size_t depth);
// The id of entry `name` below the kept entries `parents` (their ids, from the root down), or nullopt when the view
// knows no such stream, topic, group or partition (or the name is not a number): an orphan.
[[nodiscard]] std::optional<std::uint64_t> known_data_entry(const metadata_view& view, data_tree tree,
                                                            std::span<const std::uint64_t> parents,
                                                            const std::string& name);

}  // namespace rill::actors
