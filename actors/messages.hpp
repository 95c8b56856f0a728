#pragma once
// Messages between rill's actors (process-local: never serialized, so CAF may move them as they are).
#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/proto/rill.pb.h"
#include "net/status.h"
#include "storage/partition_log.h"
#include "storage/validated_batches.h"

namespace rill::consensus {
struct message;
}

namespace rill::actors {

using produce_atom = caf::atom_constant<caf::atom("produce")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;
using offset_get_atom = caf::atom_constant<caf::atom("offget")>;
using offset_store_atom = caf::atom_constant<caf::atom("offstore")>;
using info_atom = caf::atom_constant<caf::atom("info")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
using destroy_atom = caf::atom_constant<caf::atom("destroy")>;
using metadata_atom = caf::atom_constant<caf::atom("metadata")>;
using accept_atom = caf::atom_constant<caf::atom("accept")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using force_atom = caf::atom_constant<caf::atom("force")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using group_atom = caf::atom_constant<caf::atom("group")>;
using group_poll_atom = caf::atom_constant<caf::atom("gpoll")>;
using coordinator_atom = caf::atom_constant<caf::atom("coord")>;  // a replicated topic's group request
using disconnect_atom = caf::atom_constant<caf::atom("disconn")>;
using resize_atom = caf::atom_constant<caf::atom("resize")>;
using settings_atom = caf::atom_constant<caf::atom("settings")>;  // a partition's retention or segment settings
using describe_atom = caf::atom_constant<caf::atom("describe")>;
using stall_atom = caf::atom_constant<caf::atom("stall")>;           // failure injection: handle nothing for a while
using unstall_atom = caf::atom_constant<caf::atom("unstall")>;       // ends a stall (its time is over, or asked to)
using fail_syncs_atom = caf::atom_constant<caf::atom("failsyncs")>;  // failure injection: fdatasyncs report EIO
using sync_atom = caf::atom_constant<caf::atom("sync")>;
using await_op_atom = caf::atom_constant<caf::atom("awaitop")>;
using replica_atom = caf::atom_constant<caf::atom("replica")>;  // a replicated partition's VSR message
using leader_atom = caf::atom_constant<caf::atom("leader")>;    // a replicated partition's replica here leads, or not
using cut_atom = caf::atom_constant<caf::atom("cut")>;  // failure injection: the replica plane to a peer is down  // a
                                                        // cluster member catches up with the committed metadata

// The outcome of a request to an actor: a status (ok or the error) and its message.
struct outcome {
  outcome() = default;
  outcome(net::status s, std::string m, std::string to = {}) : st(s), message(std::move(m)), redirect(std::move(to)) {}
  net::status st = net::status::ok;
  std::string message;
  std::string redirect;  // not_primary: the client address of the node to ask instead (empty: unknown)
  [[nodiscard]] bool ok() const noexcept { return st == net::status::ok; }
  static outcome of(const rill::error& e) { return outcome{net::status_of(e.code()), e.detail()}; }
};

// Batches the request router validated in the connection's receive buffer and copied once (the write buffer).
struct produce_msg {
  std::shared_ptr<storage::validated_batches> batches;
};
struct produce_reply {
  outcome result;
  std::vector<std::int64_t> base_offsets;
  std::int64_t timestamp_ms = -1;
};

struct poll_msg {
  proto::PollRequest request;
  // A consumer group's position for a NEXT poll (the strategy is then ignored): read from here, moved up to the log
  // start if retention removed what it points at, and down to the log end if it is beyond it.
  std::optional<std::int64_t> resume_at;
};
struct poll_reply {
  outcome result;
  std::shared_ptr<storage::read_result> data;  // null with an error
};

struct offset_msg {
  std::string consumer;
  std::int64_t offset = -1;  // offset_store only
};
struct offset_reply {
  outcome result;
  std::optional<std::int64_t> offset;  // get: the stored one; store: the previous one
};

struct partition_info {
  outcome result;
  proto::PartitionInfo info;
};

// A metadata request: the API and its protobuf header; the reply is the reply header (or an error).
struct metadata_msg {
  std::uint16_t api = 0;
  std::string header;  // serialized request header
};
struct metadata_reply {
  outcome result;
  std::string header;    // serialized reply header
  std::uint64_t op = 0;  // the metadata op of the view it describes (what the reply tells the client it saw)
};

// A consumer-group request for the group's actor: the API, its protobuf header, and the client connection it came
// through (members are removed when their connection closes).
struct group_msg {
  std::uint16_t api = 0;
  std::string header;  // serialized request header
  std::uint64_t connection = 0;
};
struct group_reply {
  outcome result;
  std::string header;  // serialized reply header
};
// A group request of a replicated topic, for the metadata actor, which submits it to the group's coordinator
// (actors/coordinators.h): the group by ids, the API, its header, and the client connection it came through.
struct coordinator_msg {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t group_id = 0;
  std::uint16_t api = 0;
  std::string header;
  std::uint64_t connection = 0;
};
// group_poll_msg, which carries a partition's handle, is in interfaces.hpp.

// A message of a replicated partition's VSR group on the replica plane: to a peer node (partition -> metadata actor,
// which owns the plane), or from one (metadata actor -> the partition whose group it is).
struct replica_frame {
  std::uint64_t node = 0;   // the peer it goes to, or came from
  std::uint64_t group = 0;  // the partition's group id (partition_group_id)
  std::shared_ptr<const consensus::message> m;
};

}  // namespace rill::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::group_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::group_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::coordinator_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::produce_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::produce_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::poll_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::poll_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::offset_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::offset_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::partition_info)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::config::log_config)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::metadata_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::metadata_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::replica_frame)
