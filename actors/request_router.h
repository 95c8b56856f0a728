#pragma once
// request_router: what a connection does with one parsed client request, decided without CAF. Given the request,
// the routing table's metadata view, which actors the table holds, and the connection's round-robin counter, it
// resolves names to ids and returns one decision: answer now (an error, or a whole frame), or forward to a partition's
// actor, to a group's actor, or to the metadata actor, with everything the forward and its reply need. The
// connection actor looks the actor handles up and sends; the replies are encoded by actors/reply_encoding.h.
//
// Every error a request can get before it reaches another actor is decided here, with the message the client sees.
// A produce's batches are validated here, in the connection's receive buffer, once and in full
// (storage::validated_batches, against the topic's max_message_bytes): a bad batch is answered now, with the status
// the partition used to give it, and only good batches are copied, once, into the buffer the log writes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/metadata_state.h"
#include "base/clock.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"
#include "net/status.h"
#include "storage/validated_batches.h"

namespace rill::actors {

// Which partition and group actors the routing table holds (one being created or deleted has none).
class actor_directory {
 public:
  virtual ~actor_directory() = default;
  [[nodiscard]] virtual bool has_partition(std::uint32_t stream_id, std::uint32_t topic_id,
                                           std::uint32_t partition_id) const = 0;
  [[nodiscard]] virtual bool has_group(std::uint32_t stream_id, std::uint32_t topic_id,
                                       std::uint32_t group_id) const = 0;
  // The node that serves the topic's partitions and groups, when it is not this one (a cluster of several nodes:
  // topic_home()); 0: this node.
  [[nodiscard]] virtual std::uint64_t served_by(std::uint32_t stream_id, std::uint32_t topic_id) const {
    (void)stream_id;
    (void)topic_id;
    return 0;
  }
  // A partition of a topic with replication factor `factor`: 0 when this node runs a replica of it (its replica
  // answers, or names the primary), else the partition's preferred primary (partition_replicas()' first), which
  // knows the primary if it is not it. A node alone, or a topic not replicated: served_by().
  [[nodiscard]] virtual std::uint64_t partition_served_by(std::uint32_t stream_id, std::uint32_t topic_id,
                                                          std::uint32_t partition_id, std::uint32_t factor) const {
    (void)partition_id;
    (void)factor;
    return served_by(stream_id, topic_id);
  }
  // The partitions of a replicated topic whose primary is this node, ascending (null: none).
  [[nodiscard]] virtual const std::vector<std::uint32_t>* led(std::uint32_t stream_id, std::uint32_t topic_id) const {
    (void)stream_id;
    (void)topic_id;
    return nullptr;
  }
};

struct partition_key {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
};

struct group_route {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t group_id = 0;
  // A replicated topic's group: no actor of its own; the metadata actor takes its requests (and its members' polls)
  // to its coordinator (actors/coordinators.h), whichever node the request reached.
  bool coordinated = false;
};

// Answer now with an error reply.
struct reply_error {
  reply_error() = default;
  reply_error(net::status s, std::string m, std::string primary = {})
      : st(s), message(std::move(m)), primary_address(std::move(primary)) {}
  net::status st = net::status::ok;
  std::string message;
  std::string primary_address;  // not_primary: where the client goes instead
};

// Answer now with this frame (ping).
struct reply_frame {
  std::vector<std::byte> frame;
};

// To the partition's actor: append these batches, validated in the request's own bytes and copied once.
struct produce_call {
  std::shared_ptr<storage::validated_batches> batches;
};
// To the partition's actor, or, for a group member, through its group's actor (which checks ownership).
struct poll_call {
  proto::PollRequest request;
  std::optional<group_route> group;
};
// To the partition's actor: a named consumer's offset.
struct offset_call {
  bool store = false;  // offset_store (else offset_get)
  std::string consumer;
  std::int64_t offset = -1;  // offset_store only
};

struct to_partition {
  partition_key partition;  // the one chosen: the reply names it
  std::variant<produce_call, poll_call, offset_call> call;
};

// To a group's actor: the API and its header (group_msg), answered with a serialized reply header.
struct to_group {
  group_route group;
  std::uint16_t api = 0;
  std::string header;
  bool tracks_member = false;  // join and heartbeat: the group hears when this connection closes
};

// To the metadata actor: the API and its header (metadata_msg), answered with a serialized reply header.
struct to_metadata {
  std::uint16_t api = 0;
  std::string header;
  bool stats = false;  // the reply header gets this server's connection count and version (reply_encoding.h)
};

using route_decision = std::variant<reply_error, reply_frame, to_partition, to_group, to_metadata>;

// The decision for `req`. `balanced_next` is the connection's round-robin counter for produces that name no
// partition: read and advanced only when such a produce's topic is found. `clk` gives ping's server time, `at` the
// metadata position a reply built here carries.
route_decision route_request(const net::request_view& req, const metadata_view& view, const actor_directory& actors,
                             std::uint32_t& balanced_next, const clock& clk, net::metadata_position at = {});

}  // namespace rill::actors
