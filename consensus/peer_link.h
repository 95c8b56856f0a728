#pragma once
// peer_link: this node's side of its one connection to one peer node of the replica plane, as plain state (no
// socket, no clock: the caller says what happened and when). The replica-plane actor moves bytes between it and a
// socket; group_host's transport queues what the groups send. Tests drive it byte by byte.
//
//     idle --connect_due()--> connecting --connected()--> handshaking --their hello checks--> established
//      ^                          |                            |                                   |
//      +------------- closed(): backoff (doubling from reconnect_min_ms to reconnect_max_ms) <-----+
//
// - Who dials: the node with the lower id dials, the higher one accepts (one connection per pair, never two). An
//   accepted connection is handed to the link once its hello named this peer (accepted()).
// - Sending: frames are queued whether or not the connection is up (the protocol copes with loss; a queue filled
//   while the peer is away is sent when it comes back). The queue is bounded in bytes (queue_bytes_max): a message
//   that does not fit is refused (queued::full: the group backs off, its replica resends later); a node heartbeat
//   that does not fit is dropped (a newer one follows). One slow peer's queue never grows past its bound, and never
//   holds up another link.
// - The hello goes first on every connection, before anything queued; frames are written in the order queued.
// - Receiving: the peer's hello is checked (check_peer_hello: cluster.id, membership, the members list) before any
//   frame is taken; a bad hello or a bad frame closes the connection (the caller closes the socket and calls
//   closed()).
//
// Invariants (asserted): queued bytes never exceed queue_bytes_max; the hello precedes every frame on a connection;
// a frame is taken off the queue only once written whole.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "consensus/peer_wire.h"

namespace rill::consensus {

struct peer_link_options {
  std::uint64_t queue_bytes_max = 64ull * 1024 * 1024;  // frames waiting for the peer
  std::uint32_t payload_bytes_max = 64u * 1024 * 1024;  // the largest frame taken from the peer
  std::uint64_t reconnect_min_ms = 100;
  std::uint64_t reconnect_max_ms = 5'000;
};

struct peer_link_stats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t connects = 0;            // connections established (hello checked)
  std::uint64_t refused = 0;             // messages refused with a full queue
  std::uint64_t heartbeats_dropped = 0;  // heartbeats dropped with a full queue
};

class peer_link {
 public:
  enum class state : std::uint8_t { idle, connecting, handshaking, established };
  enum class queued : std::uint8_t { yes, full, heartbeat_dropped };

  // `ours`: this node's hello; `peer`: the peer's node id; `members`: every member's node id.
  peer_link(peer_hello ours, std::uint64_t peer, std::vector<std::uint64_t> members, peer_link_options options = {});

  [[nodiscard]] std::uint64_t peer() const noexcept { return peer_; }
  [[nodiscard]] bool dials() const noexcept { return ours_.node_id < peer_; }
  [[nodiscard]] state status() const noexcept { return state_; }
  [[nodiscard]] const peer_link_stats& stats() const noexcept { return stats_; }
  [[nodiscard]] std::uint64_t queued_bytes() const noexcept { return queued_bytes_; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
  // The peer's hello of the current connection (once established).
  [[nodiscard]] const std::optional<peer_hello>& theirs() const noexcept { return theirs_; }

  queued send(group_t group, const message& m);
  queued send(const node_heartbeat& beat);

  // Dialling side: whether to dial now (idle and the backoff has passed); then connecting() once the dial starts.
  [[nodiscard]] bool connect_due(std::uint64_t now_ms) const noexcept;
  void connecting();
  // The socket is connected (dialled), or an accepted connection was handed over: the hello is queued first.
  void connected();
  // An accepted connection whose hello (already read and checked by the acceptor) named this peer; bytes read after
  // the hello go to received().
  void accepted(const peer_hello& theirs);
  // What to write now (the head of the queue, hello first), and how much of it was written.
  [[nodiscard]] std::span<const std::byte> to_write() const noexcept;
  void wrote(std::size_t bytes);
  // Bytes read from the socket: the frames they complete. An error: close the connection (then closed()).
  expected<std::vector<peer_frame>> received(std::span<const std::byte> bytes);
  // The connection is gone (an error, the peer closed, a bad hello or frame): back to idle, reconnect after the
  // backoff. What was partly written is sent again whole on the next connection (the reader there starts afresh).
  void closed(std::uint64_t now_ms, std::string why);

 private:
  void push(std::vector<std::byte> frame);

  peer_hello ours_;
  std::uint64_t peer_;
  std::vector<std::uint64_t> members_;
  peer_link_options options_;
  state state_ = state::idle;
  std::deque<std::vector<std::byte>> queue_;  // whole frames (the hello, when due, at the front)
  std::size_t written_ = 0;                   // of queue_.front()
  std::uint64_t queued_bytes_ = 0;            // frames only (the hello is not counted)
  bool hello_queued_ = false;
  std::vector<std::byte> hello_in_;  // the peer's hello, as it arrives (dialling side)
  std::optional<peer_hello> theirs_;
  std::optional<peer_frame_reader> reader_;
  std::uint64_t retry_at_ms_ = 0;
  std::uint64_t backoff_ms_ = 0;
  std::string last_error_;
  peer_link_stats stats_;
};

}  // namespace rill::consensus
