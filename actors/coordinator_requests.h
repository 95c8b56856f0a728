#pragma once
// coordinator_requests: the consumer-group API of a replicated topic's group, over a coordinator (group_machine) in
// plain code. A request header comes in; out comes either a command to commit in the group's coordinator (join,
// heartbeat with releases, leave, commit, an administrator's offset reset) and, once committed, the API reply made
// from the command's reply; or a read answered from this node's replica of the coordinator (assignment, committed
// offset, describe). Also: a member's poll planned and checked against the replica (group_handlers' own checks,
// on the replica's group_state), and the commands a coordinator's primary submits to match the metadata (create,
// resize, remove).
//
// The connection a member joins or beats through is named cluster-wide (connection_key): the node's id in the top
// 16 bits, so a disconnect on one node never removes a member whose connection of the same number is on another.
//
// Invariants
// - A request refused here, or by the coordinator, changes nothing; a command's reply is answered only once it is
//   committed (and applied on this node).
// - A read (is_coordinator_read) is answered from this node's replica after the caller committed a read barrier
//   (coordinators::read_barrier): it sees every change committed before it began, on whichever node it arrives, so
//   no reader sees a committed offset go back because its next request reached a replica that lags.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/group_handlers.h"
#include "actors/group_machine.h"
#include "actors/metadata_state.h"
#include "base/expected.h"
#include "net/proto/coordinator.pb.h"
#include "net/proto/rill.pb.h"

namespace rill::actors {

// A connection's id on node `node`, unique in the cluster (connection ids are below 2^48 on a node).
[[nodiscard]] std::uint64_t connection_key(std::uint64_t node, std::uint64_t connection);

// A group of a replicated topic, as the committed metadata names it.
struct coordinated_group {
  group_identity id;  // stream, topic, group id, name, created, config, the topic's partition count (no dir)
  // Per partition, the metadata op that created it (topic_meta::partition_created; 0: unknown): a partition deleted
  // and added back is another one, whose offsets the group must not carry over (issue 38).
  std::vector<std::uint64_t> partitions_created;
  [[nodiscard]] group_key key() const { return group_key{id.stream_id, id.topic_id, id.name}; }
};
// Whether the coordinator's `state` of g has g's partitions: their count and incarnations (else a resize is due).
[[nodiscard]] bool partitions_match(const group_state& state, const coordinated_group& g);

struct coordinator_plan {
  std::optional<proto::CoordinatorCommand> command;  // commit it, then coordinator_reply()
  std::string header;                                // else: a read's reply header, ready
  bool describe = false;                             // else: group get or offsets, described with partitions' offsets
  bool offsets_only = false;
};

// A group API request (join, leave, heartbeat, assignment, commit, offset get and store, group get and offsets) for
// group `g`, `state` its group in this node's replica (null: not there yet), through connection `conn`
// (connection_key). Errors: bad_header, invalid_name, group_errc's, partition_not_found, unknown_api.
[[nodiscard]] expected<coordinator_plan> plan_coordinator_request(const coordinated_group& g, const group_state* state,
                                                                  std::uint16_t api, std::string_view header,
                                                                  std::uint64_t conn);
// Whether `api` is one plan_coordinator_request answers from the replica (assignment, offset get, group get and
// offsets): the caller commits a read barrier first.
[[nodiscard]] bool is_coordinator_read(std::uint16_t api);
// The reply header of `api` for a committed command's reply; its refusal as an error (status and detail).
[[nodiscard]] expected<std::string> coordinator_reply(const coordinated_group& g, std::uint16_t api,
                                                      const proto::CoordinatorReply& r);
// A reply's status as an error (none when applied).
[[nodiscard]] expected<void> coordinator_status(const proto::CoordinatorReply& r);

// The command that creates g in its coordinator (its config, the topic's partition count and its incarnation: the
// metadata's group id), the one that resizes it to the topic's partition count, the one that removes incarnation
// `incarnation` of a group named `key` (no other), and a member's commit of one partition's offset.
[[nodiscard]] proto::CoordinatorCommand create_command(const coordinated_group& g);
[[nodiscard]] proto::CoordinatorCommand resize_command(const coordinated_group& g);
[[nodiscard]] proto::CoordinatorCommand remove_command(const group_key& key, std::uint32_t incarnation);
// g's state in `machine`: null when the machine has none or holds another incarnation of the name (a group deleted
// and created again: the old one's members and offsets are not the new one's).
[[nodiscard]] const group_state* coordinated_state(const group_machine& machine, const coordinated_group& g);
[[nodiscard]] proto::CoordinatorCommand commit_command(const coordinated_group& g, const std::string& member,
                                                       std::uint64_t generation, std::uint32_t partition,
                                                       std::uint64_t offset);
// What coordinator `index` of `count` needs to match `view`: create the groups of replicated topics it lacks,
// resize those whose topic's partition count moved, remove those the metadata no longer names, and replace an old
// incarnation of a name by the new one (remove, then create). At most
// `commands_max` (the rest at the next pass).
[[nodiscard]] std::vector<proto::CoordinatorCommand> reconcile_commands(const metadata_view& view,
                                                                        const group_machine& machine,
                                                                        std::uint32_t index, std::uint32_t count,
                                                                        std::size_t commands_max);
// Group `group_id` of a replicated topic as `view` names it, with its topic's partition count (nullopt: no such
// group, or its topic is not replicated).
[[nodiscard]] std::optional<coordinated_group> find_coordinated_group(const metadata_view& view,
                                                                      std::uint32_t stream_id, std::uint32_t topic_id,
                                                                      std::uint32_t group_id);

// A member's poll of a replicated partition, checked against this node's replica (plan_group_poll).
[[nodiscard]] expected<group_poll> plan_coordinated_poll(const group_state* state, proto::PollRequest request);

}  // namespace rill::actors
