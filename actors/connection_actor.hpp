#pragma once
// connection_actor: one client socket, on the shard the listener handed it to. Reads frames with io_uring recv,
// routes each request (metadata changes and reads to the metadata actor; produce, poll and offsets straight to the
// partition actor, found in the routing table without asking anyone), and sends the replies, in completion order,
// tagged with their correlation ids. What to do with a request is decided by route_request (request_router.h),
// the bytes, limits and closing by connection_state; this actor submits the I/O and the actor requests.
//
// Catching up: a request naming a metadata op the node has not published (read your writes, docs/protocol.md), or,
// on a cluster member, one whose stream, topic or group is not found, first waits for the metadata actor (the op,
// or a sync); the requests after it on the connection are held behind it and routed in arrival order once it has
// gone. Every reply names the node's metadata position (cluster id and op).
//
// Limits: a frame over network.max_frame_bytes, or one that does not parse, gets an error reply and the connection
// is closed (nothing of it is applied; other connections are untouched). Reading pauses while
// connection_inflight_requests_max requests or connection_inflight_bytes_max request bytes are being served, or
// while as many reply bytes wait for a client that does not read them: then the client's own sends block.
//
// Memory: an idle connection holds no receive buffer: it waits for readability (io_uring poll) and only then
// receives into a buffer from its shard's pool, which goes back once the bytes are framed (connection_state.h).
//
// Its public contract is connection_actor_hdl (interfaces.hpp); connection_actor_impl adds its I/O completions. It
// sends through the typed handles of the routing table and connection_services, so every request it forwards is
// checked against the receiver's interface at compile time.
#include <caf/all.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/connection_state.h"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/request_router.h"
#include "actors/routing.hpp"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "config/server_config.h"
#include "storage/partition_log.h"

namespace rill::actors {

struct connection_services {
  const config::server_config* config = nullptr;
  routing* routes = nullptr;
  metadata_actor_hdl metadata;
  std::atomic<std::uint32_t>* connections = nullptr;        // open connections (stats)
  std::atomic<std::uint64_t>* requests_inflight = nullptr;  // read and not yet answered, over all connections
  // The server's log: the full text of an error reply whose client message was redacted (client_error_of). Null in
  // tests that do not look.
  storage::log_reporter* reporter = nullptr;
  // A member of a cluster of several nodes: a stream, topic or group not found here may have been created through
  // another node a moment ago, so the node catches up (sync_atom) and routes the request again before it says so.
  bool cluster_member = false;
};

using connection_actor_impl = connection_actor_hdl::extend<io_done_signature>;

class connection_actor final : public metered<connection_actor_impl::base>, public homed {
 public:
  // `peer`: the client's address (empty when unknown), the connection's name in the metrics.
  connection_actor(caf::actor_config& cfg, std::size_t home, int fd, const connection_services* services,
                   const std::string& peer);
  behavior_type make_behavior() override;

 private:
  // What a forwarded request's reply is for: its correlation id and size.
  struct pending {
    std::uint32_t correlation = 0;
    std::uint32_t bytes = 0;
  };

  void start_recv();
  void on_poll(std::int64_t result);
  void on_recv(std::int64_t result);
  void publish_buffer();  // the receive buffer held and the bytes it copied, for the metrics
  // A request read from the socket: routed at once, or held behind one that waits for the metadata.
  void dispatch(const net::request_view& req, std::uint32_t bytes);
  // Routes a request, unless the node must first catch up with the metadata for it: a request naming a metadata op
  // the node has not carried out (read your writes), or, on a cluster member, a stream, topic or group not found
  // (confirmed by a sync before it is said). `caught_up`: it has just waited for a sync; it is routed now.
  // Returns false when it waits (then it heads `held_`).
  bool route(const net::request_view& req, pending p, bool caught_up);
  // The metadata the head of held_ waited for is here (or could not be): route it, then the ones behind it.
  void resume(outcome waited);
  // A request kept until the node has caught up (the receive buffer moves on): its bytes, and a view into them.
  struct held_request {
    std::shared_ptr<std::vector<std::byte>> bytes;
    net::request_view view;
    pending p;
  };
  static held_request hold(const net::request_view& req, pending p);
  // Requests of this connection in arrival order, held while the first waits (catching_up_) so that none overtakes
  // it (an idempotent producer's batches stay in order). At most the connection's in-flight requests.
  std::deque<held_request> held_;
  bool catching_up_ = false;
  bool synced_wait_ = false;  // what the head waits for: a sync (true) or its op (false)
  // While resume() routes the requests held behind a wait for an op that was refused: that op and the refusal
  // (0: none), so that those naming that op or a higher one are refused at once rather than wait again in turn.
  std::uint64_t op_failed_ = 0;
  outcome op_failure_;
  // What this node's replies say of the metadata: its cluster and the op of the routing table published now.
  [[nodiscard]] net::metadata_position position() const;
  void forward(pending p, const routing_table& table, to_partition&& d);
  void forward(pending p, const routing_table& table, to_group&& d);
  void forward(pending p, const routing_table& table, to_metadata&& d);
  // Sends a request and replies with encode(reply) when it succeeds, with its error otherwise.
  template <class Reply, class Handle, class Encode, class... Args>
  void ask(const Handle& dest, pending p, Encode encode, Args&&... args);
  void reply(std::vector<std::byte> frame, std::uint32_t request_bytes);
  void reply_error(std::uint32_t correlation, net::status st, const std::string& message, std::uint32_t request_bytes,
                   const std::string& primary_address = {});
  void start_send();
  void on_send(std::int64_t result);
  void shut_down();
  void force_close();
  void submit_cancel(storage::io::request* target);
  void maybe_finish();
  void close_socket();
  void on_exit() override;

  int fd_;
  const connection_services* services_;
  std::string peer_;  // the client's address, for the server's log
  std::shared_ptr<connection_metrics> published_ = std::make_shared<connection_metrics>();
  std::unique_ptr<actor_io> io_;
  std::optional<connection_state> state_;       // made on the home shard (make_behavior): it takes that shard's pool
  std::unique_ptr<storage::io::request> recv_;  // the recv in flight (stable address for cancel)
  std::unique_ptr<storage::io::request> send_;
  std::vector<std::unique_ptr<storage::io::request>> cancels_;   // cancel requests, alive until the actor goes
  std::uint32_t balanced_next_ = 0;                              // round-robin partition for balanced produces
  std::unordered_map<caf::actor_addr, group_actor_hdl> groups_;  // groups members joined through this connection
  bool coordinated_ = false;  // a member of a replicated topic's group joined or beat through it (the metadata actor)
};

}  // namespace rill::actors
