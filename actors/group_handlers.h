#pragma once
// group_handlers: every decision of the consumer-group API, in plain code (no CAF) over group_state. A request
// header comes in; out comes the reply (or the error), whether the state changed and must be durable before the
// reply goes, and whether sessions moved (the actor then looks again at when the next one ends). Also: a member's
// poll before the partition is asked and when its data comes back (ownership checked twice, the auto-commit), the
// group's description, the state file's bytes, and the group's answers to disconnects, expiries and resizes. The
// group actor keeps the file writes (through durable_versions), the timers and the requests to partitions.
//
// Invariants
// - A refused request changes nothing.
// - Every successful request's reply waits until what changed before it is durable (a reply never tells what a
//   crash could take back).
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/group_state.h"
#include "base/expected.h"
#include "net/proto/rill.pb.h"
#include "net/status.h"

namespace rill::actors {

struct group_identity {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t group_id = 0;
  std::string name;
  std::uint64_t created_ms = 0;
  proto::GroupConfig config;  // complete
  std::uint32_t partitions = 0;
  std::string dir;
};

// "<data>/groups/<stream>/<topic>/<group>"
std::string group_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic, std::uint32_t group);

// The reply status of a group_state error (other codes: net::status_of).
net::status status_of_group(const std::error_code& code) noexcept;

struct group_decision {
  std::optional<rill::error> error;   // refused: answered at once
  std::string header;                 // the reply, sent once everything changed so far is durable
  bool changed = false;               // the state changed: write it (and look again at the sessions)
  bool sessions = false;              // only sessions moved: look again at when the next one ends
  bool describe = false;              // group get or offsets: describe the group, then describe_reply()
  bool offsets_only = false;          // with describe: the offsets reply
  std::optional<std::string> notice;  // a line for the operator's log
};

// A group API request (join, leave, heartbeat, assignment, commit, offset get and store, group get and offsets) at
// `now`, through client connection `conn`. Errors: bad_header, invalid_name, group_errc's, partition_not_found,
// unknown_api.
group_decision decide_group_request(group_state& state, const group_identity& id, std::uint16_t api,
                                    std::string_view header, group_state::time_point now,
                                    group_state::connection_id conn);

// A member's poll as the partition gets it: NEXT resolved to the group's offset (or FIRST where it has none), auto
// commit off (the group commits its own), and what the delivery needs.
struct group_poll {
  proto::PollRequest request;
  std::optional<std::int64_t> resume_at;
  std::string member;
  std::uint32_t partition = 0;
  std::uint64_t generation = 0;
  bool auto_commit = false;
};
// Errors: group_errc's (the member may not read the partition now).
expected<group_poll> plan_group_poll(const group_state& state, proto::PollRequest request);
// At the instant data comes back: the member must own the partition now, whatever happened while it waited.
// Error: not_owner.
expected<void> check_delivery(const group_state& state, const group_poll& poll);
struct delivery_commit {
  bool changed = false;  // committed: write the state
  bool wait = false;     // the data goes once what changed is durable
};
// Data up to `next_offset` was delivered to the member: an auto-commit poll commits it (when ahead of the group).
delivery_commit commit_delivered(group_state& state, const group_poll& poll, std::int64_t next_offset);

// The other inputs of a group: each returns whether the state changed (to be written).
bool on_disconnect(group_state& state, group_state::time_point now, group_state::connection_id conn);
bool on_expire(group_state& state, group_state::time_point now);
bool on_resize(group_state& state, group_state::time_point now, std::uint32_t partitions);

// The group without its partitions' lines (`state` null: not open).
proto::GroupInfo describe_group(const group_identity& id, const group_state* state, group_state::time_point now);
// Appends partition p's line; `partition`: its offsets, when its actor answered (then the lag is known).
void describe_partition(proto::GroupInfo& info, const group_state& state, std::uint32_t p,
                        const proto::PartitionInfo* partition);
// GroupOffsetsReply (offsets_only) or GroupGetReply.
std::string describe_reply(bool offsets_only, proto::GroupInfo info);

// The state file, <group dir>/state, replaced whole with storage::write_file_atomic at every change: the serialized
// state, then its CRC-32C (big-endian).
inline constexpr const char* group_state_file_name = "state";
std::vector<std::byte> encode_state_file(const group_state& state);
// The state a file holds; nullopt when it does not verify. `now`: when the restored sessions start.
std::optional<group_state> decode_state_file(std::span<const std::byte> bytes, const group_identity& id,
                                             group_state::time_point now);
// A group without members or offsets.
group_state fresh_group_state(const group_identity& id);

}  // namespace rill::actors
