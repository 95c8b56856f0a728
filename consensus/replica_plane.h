#pragma once
// replica_plane: this node's end of the replica plane (docs/protocol.md, The replica plane): one TCP connection to
// each peer node, over io::engine sockets (io_uring in rilld). It is the host_transport of the node's group_host:
// what the groups send is queued on the peer's link (peer_link.h: bounded, hello first, reconnect with backoff) and
// written as the socket takes it; what arrives is handed, frame by frame, to the owner's callback with the node it
// came from. No CAF and no clock: the owner calls tick() with the time, and runs it on the engine's thread.
//
// Connections: the node with the lower id dials (tick() dials every link whose backoff has passed); the listening
// socket accepts the others, reads the peer's hello first and checks it (cluster.id, membership, the members list:
// check_peer_hello), then hands the connection to that peer's link, replacing any connection it had (the peer
// restarted). A refused hello, a bad frame, an error or a close ends the connection; the link dials again (or waits
// to be dialled) and sends what it holds.
//
// Invariants (asserted): at most one connection per link is current; a connection is freed only once none of its
// requests is in flight, and a frame being sent stays alive until its send completes (a dropped connection tells
// its link only then); every received frame names a member other than this node. A dial or a hello has
// handshake_ms_max to finish; a failed accept is tried again at the next tick, not at once.
//
// Contract: single-threaded (the engine's completions and the owner's calls on one thread); the callbacks must not
// destroy the plane. stop() before destroying it: it shuts every socket down and waits for the requests in flight.
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/async.h"
#include "base/expected.h"
#include "base/task.h"
#include "consensus/group_host.h"
#include "consensus/peer_link.h"
#include "consensus/peer_wire.h"
#include "storage/io/engine.h"

namespace rill::consensus {

// A peer as the plane dials it: its node id and resolved replica-plane address.
struct plane_peer {
  std::uint64_t node_id = 0;
  std::string address;  // HOST:PORT, for messages
  ::sockaddr_storage sockaddr{};
  ::socklen_t sockaddr_size = 0;
};

// Resolves "HOST:PORT" (blocking: call it off the shards, at start-up). Errors: invalid_argument naming it.
[[nodiscard]] expected<plane_peer> resolve_peer(std::uint64_t node_id, const std::string& host, std::uint16_t port);

struct replica_plane_options {
  peer_hello ours;
  std::vector<plane_peer> peers;       // every member but this node
  std::vector<std::uint64_t> members;  // every member's id, this node's included
  peer_link_options link;
  std::size_t receive_bytes = 64 * 1024;  // one receive's buffer per connection
  std::size_t handshakes_max = 64;        // accepted connections whose hello has not arrived yet
};

// A dial not connected, or an accepted connection whose hello has not come, by then is dropped.
inline constexpr std::uint64_t handshake_ms_max = 5'000;

// Per peer, for /metrics and `rill cluster status`.
struct plane_peer_status {
  std::uint64_t node_id = 0;
  std::string address;
  bool connected = false;
  std::uint64_t queued_bytes = 0;
  std::string last_error;
  peer_link_stats stats;
};

class replica_plane final : public host_transport {
 public:
  using frame_handler = std::function<void(std::uint64_t from, peer_frame frame)>;
  using notice_handler = std::function<void(const std::string& line)>;

  // `listen_fd`: a listening socket on network.replica_address (owned by the plane from here on; -1: accept none).
  replica_plane(storage::io::engine& e, replica_plane_options options, int listen_fd, frame_handler on_frame,
                notice_handler on_notice);
  ~replica_plane() override;
  replica_plane(const replica_plane&) = delete;
  replica_plane& operator=(const replica_plane&) = delete;

  // Starts accepting.
  void start();
  // Dials what is due and writes what is queued. `now_ms`: a monotonic time in milliseconds.
  void tick(std::uint64_t now_ms);
  // Shuts every connection down and waits until nothing is in flight.
  task<void> stop();

  // host_transport: queued on the peer's link (a message to a node that is no peer is dropped).
  void send(node_t to, group_t group, message m) override;
  void send(node_t to, const node_heartbeat& beat) override;

  // The transport fault switch (debug.failure_injection): a cut peer is as if the network between the two nodes
  // were down: its connection is dropped, it is neither dialled nor accepted, and what is sent to it is lost, until
  // it is healed (cut(peer, false)). False: no such peer.
  bool cut(std::uint64_t peer, bool on);

  [[nodiscard]] std::vector<plane_peer_status> status() const;
  // Peers whose connection is up (hello checked): status()'s `connected`, counted without building it.
  [[nodiscard]] std::size_t connected_peers() const;

 private:
  struct connection;
  struct peer_state {
    plane_peer peer;
    std::unique_ptr<peer_link> link;
    connection* current = nullptr;
  };
  void start_accept();
  void dial(peer_state& p);
  void start_receive(connection& c);
  void kick(peer_state& p);
  void on_received(connection& c, std::size_t n);
  void on_hello(connection& c);
  // Ends `c`: shuts its socket down, tells its link (when current), frees it once nothing of it is in flight.
  void drop(connection& c, const std::string& why);
  void maybe_free(connection& c);
  peer_state* find(std::uint64_t node_id);

  storage::io::engine& engine_;
  replica_plane_options options_;
  int listen_fd_;
  frame_handler on_frame_;
  notice_handler on_notice_;
  std::map<std::uint64_t, peer_state> peers_;
  std::vector<std::unique_ptr<connection>> connections_;
  std::unique_ptr<storage::io::request> accept_;
  std::unique_ptr<storage::io::request> cancel_;
  bool accepting_ = false;
  bool accept_again_ = false;  // an accept failed: the next tick accepts again
  bool cancelling_ = false;
  bool stopping_ = false;
  std::uint64_t now_ms_ = 0;
  std::set<std::uint64_t> cut_;
  async_event idle_;
};

}  // namespace rill::consensus
