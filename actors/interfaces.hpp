#pragma once
// interfaces: the public message contract of every rill actor that others send to, as CAF typed actor handles.
// A send or request through one of these handles whose message is not in the interface, or whose reply handler
// expects another type, does not compile. Each actor implements its interface extended with its internal messages
// (I/O completions, timers, self-sends: <actor>_impl in its own header); those never appear here, so no other actor
// can send them. Every reply is a value: errors travel in its `outcome` (a CAF error only when the actor is gone).
#include <caf/all.hpp>

#include <cstdint>

#include "actors/messages.hpp"

namespace rill::actors {

// One partition (partition_actor.hpp). Requests that arrive while its log is being opened, or while it is stalled,
// wait in its mailbox; after a failed open, or once closing, produce/poll/offsets are refused in their outcome.
using partition_actor_hdl = caf::typed_actor<
    // Appends the batches: replies once they are durable (synced), with the base offset of each batch.
    caf::replies_to<produce_atom, produce_msg>::with<produce_reply>,
    // Reads from the log: replies at once with data, or parks the poll until data is committed, its max_wait_ms
    // passes, the server drains, or the partition closes (then with what there is, possibly nothing).
    caf::replies_to<poll_atom, poll_msg>::with<poll_reply>,
    // A consumer's stored offset (none if it never stored one): replies at once.
    caf::replies_to<offset_get_atom, offset_msg>::with<offset_reply>,
    // Stores a consumer's offset: replies once it is written (atomic file replacement), with the previous one.
    caf::replies_to<offset_store_atom, offset_msg>::with<offset_reply>,
    // The partition's offsets, sizes and segments (or why it is not open): replies at once.
    caf::replies_to<info_atom>::with<partition_info>,
    // Answers parked polls (unavailable), closes the log and quits: replies once the log is closed.
    caf::replies_to<close_atom>::with<outcome>,
    // As close, and removes the partition's directory before replying.
    caf::replies_to<destroy_atom>::with<outcome>,
    // The server is stopping: parked polls are answered now and no poll parks any more. No reply.
    caf::reacts_to<drain_atom>,
    // New retention and segment settings (config::changes_in_place of the running ones), taken in place: the log is
    // not reopened, a replica keeps serving. No reply.
    caf::reacts_to<settings_atom, config::log_config>,
    // Failure injection (debug.failure_injection): handles nothing else for the given milliseconds. No reply.
    caf::reacts_to<stall_atom, std::uint32_t>,
    // Failure injection: ends the stall now, if there is one (what waited is then handled in order). No reply.
    caf::reacts_to<unstall_atom>,
    // Failure injection: the log's next N fdatasyncs report EIO (the partition fences, then recovers). No reply.
    caf::reacts_to<fail_syncs_atom, std::uint32_t>,
    // A message from a peer node for the partition's VSR group (a replicated partition; others drop it). No reply.
    caf::reacts_to<replica_atom, replica_frame>>;

// A poll by a group member: the group checks the member, resolves NEXT to the group's offset, asks the partition
// and checks ownership again when the data comes back.
struct group_poll_msg {
  proto::PollRequest request;
  partition_actor_hdl partition;
};

// A member's poll of a replicated topic's partition (its replica on this node): the metadata actor checks it against
// this node's replica of the group's coordinator, asks the partition, and checks ownership again when data comes back.
struct coordinated_poll_msg {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t group_id = 0;
  proto::PollRequest request;
  partition_actor_hdl partition;
};

// One consumer group (group_actor.hpp). Requests that arrive while its state is being loaded wait in its mailbox;
// a group whose open or state write failed (fenced) refuses everything in the outcome until a restart.
using group_actor_hdl = caf::typed_actor<
    // A group API (join, leave, heartbeat, assignment, commit, committed offsets): replies with the reply header
    // once every change it depends on is durable.
    caf::replies_to<group_atom, group_msg>::with<group_reply>,
    // A member's poll: replies with the partition's answer once the member still owns the partition (refused
    // otherwise) and, auto-committing, once the commit is durable.
    caf::replies_to<group_poll_atom, group_poll_msg>::with<poll_reply>,
    // The group's description with its partitions' offsets (a group_get reply header).
    caf::replies_to<describe_atom>::with<group_reply>,
    // A client connection closed: the members that joined or beat through it leave at once. No reply.
    caf::reacts_to<disconnect_atom, std::uint64_t>,
    // The topic now has this many partitions: the group rebalances. No reply.
    caf::reacts_to<resize_atom, std::uint32_t>,
    // Answers members' polls waiting for a partition (unavailable); replies and quits once the state is durable
    // and the actor's coroutines have finished.
    caf::replies_to<close_atom>::with<outcome>,
    // As close, and removes the group's directory before replying.
    caf::replies_to<destroy_atom>::with<outcome>>;

// The metadata (metadata_actor.hpp), on shard 0. Requests wait in its mailbox until recovery finishes.
using metadata_actor_hdl = caf::typed_actor<
    // A metadata API: a read replies at once (after asking partitions and groups what it needs); a change replies
    // once it is committed to the metadata journal and its effects (spawns, closes, removals) are done. Changes run
    // one at a time, in arrival order. After a failed recovery everything is refused (unavailable).
    caf::replies_to<metadata_atom, metadata_msg>::with<metadata_reply>,
    // A cluster member: replies once it has applied every change committed before the request arrived (a barrier
    // committed through its session), so that a "not found" it then gives is the cluster's answer, not a lagging
    // node's. A node alone replies at once.
    caf::replies_to<sync_atom>::with<outcome>,
    // Replies once this node has applied the metadata up to the op and published the view (a request naming it,
    // read your writes), or unavailable after op_wait_timeout.
    caf::replies_to<await_op_atom, std::uint64_t>::with<outcome>,
    // Failure injection (debug.failure_injection): cuts (true) or heals (false) the replica plane to a peer node.
    // No reply.
    caf::reacts_to<cut_atom, std::uint64_t, bool>,
    // Sends a replicated partition's VSR message to the peer node it names, on the replica plane (best effort: a
    // message to a node out of reach is lost, as VSR allows). No reply.
    caf::reacts_to<replica_atom, replica_frame>,
    // A replicated partition (its partition_namespace) has its primary on this node (true), or no longer (false):
    // produces that name no partition go to the partitions this node leads. No reply.
    caf::reacts_to<leader_atom, std::uint64_t, bool>,
    // A group API request for a group of a replicated topic (a cluster member): committed in the group's coordinator
    // through this node's session, or read from this node's replica of it; replies with the reply header.
    caf::replies_to<coordinator_atom, coordinator_msg>::with<group_reply>,
    // A member's poll of a replicated partition whose replica is here: checked against this node's replica of the
    // group's coordinator, before the partition is asked and when its data comes back.
    caf::replies_to<group_poll_atom, coordinated_poll_msg>::with<poll_reply>,
    // A client connection closed: the members of replicated topics' groups that joined or beat through it leave
    // (a disconnected command to each coordinator it reached). No reply.
    caf::reacts_to<disconnect_atom, std::uint64_t>,
    // Closes every partition, then every group, then the journal; replies and quits.
    caf::replies_to<close_atom>::with<outcome>>;

// One client connection (connection_actor.hpp); only its listener sends to it.
using connection_actor_hdl = caf::typed_actor<
    // Reads no new request; answers those in flight, flushes the replies, closes and quits. No reply.
    caf::reacts_to<stop_atom>,
    // Drops what is in flight and what the client has not read; closes and quits. No reply.
    caf::reacts_to<force_atom>>;

// The client listener (listener_actor.hpp), on shard 0; only the broker sends to it.
using listener_actor_hdl = caf::typed_actor<
    // Stops accepting and tells every connection to stop: replies once the listening socket is closed.
    caf::replies_to<stop_atom>::with<outcome>,
    // Tells every connection still open to force; quits once they are gone (after stop). No reply.
    caf::reacts_to<force_atom>>;

}  // namespace rill::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::group_poll_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rill::actors::coordinated_poll_msg)
