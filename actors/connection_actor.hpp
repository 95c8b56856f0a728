#pragma once
// connection_actor: one client socket, on the shard the listener handed it to. Reads frames with io_uring recv,
// routes each request (metadata changes and reads to the metadata actor; produce, poll and offsets straight to the
// partition actor, found in the routing table without asking anyone), and sends the replies, in completion order,
// tagged with their correlation ids.
//
// Limits: a frame over network.max_frame_bytes, or one that does not parse, gets an error reply and the connection
// is closed (nothing of it is applied; other connections are untouched). Reading pauses while
// connection_inflight_requests_max requests or connection_inflight_bytes_max request bytes are being served, or
// while as many reply bytes wait for a client that does not read them: then the client's own sends block.
#include <caf/all.hpp>

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/messages.hpp"
#include "actors/runtime/metered.hpp"
#include "actors/routing.hpp"
#include "config/server_config.h"
#include "net/frame.h"

namespace rill::actors {

struct connection_services {
  const config::server_config* config = nullptr;
  routing* routes = nullptr;
  caf::actor metadata;
  std::atomic<std::uint32_t>* connections = nullptr;        // open connections (stats)
  std::atomic<std::uint64_t>* requests_inflight = nullptr;  // read and not yet answered, over all connections
};

class connection_actor final : public metered<>, public homed {
 public:
  connection_actor(caf::actor_config& cfg, std::size_t home, int fd, const connection_services* services);
  caf::behavior make_behavior() override;

 private:
  void start_recv();
  void on_recv(std::int64_t result);
  void handle_frame(std::span<const std::byte> frame);
  void dispatch(const net::request_view& req, std::uint32_t bytes);
  void reply(std::vector<std::byte> frame, std::uint32_t request_bytes);
  void reply_error(std::uint32_t correlation, net::status st, const std::string& message, std::uint32_t request_bytes);
  // An ok reply whose header another actor serialized.
  void reply_serialized(std::uint32_t correlation, const std::string& header, std::uint32_t request_bytes);
  void start_send();
  void on_send(std::int64_t result);
  void shut_down();
  void force_close();
  void submit_cancel(storage::io::request* target);
  void maybe_finish();
  void on_exit() override;
  bool can_read() const;

  int fd_;
  const connection_services* services_;
  std::shared_ptr<connection_metrics> published_ = std::make_shared<connection_metrics>();
  std::unique_ptr<actor_io> io_;
  std::vector<std::byte> in_;                   // received, not yet framed
  std::unique_ptr<storage::io::request> recv_;  // the recv in flight (stable address for cancel)
  std::unique_ptr<storage::io::request> send_;
  std::vector<std::unique_ptr<storage::io::request>> cancels_;  // cancel requests, alive until the actor goes
  std::deque<std::vector<std::byte>> out_;                      // replies waiting to be sent; front is being sent
  std::size_t out_sent_ = 0;                                    // bytes of out_.front() already sent
  std::uint64_t out_bytes_ = 0;  // bytes queued in out_ (a client that does not read its replies pauses reading)
  std::uint32_t inflight_requests_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  std::uint32_t balanced_next_ = 0;                         // round-robin partition for balanced produces
  std::unordered_map<caf::actor_addr, caf::actor> groups_;  // groups members joined through this connection
  bool recv_pending_ = false;
  bool framing_ = false;  // on_recv is splitting frames: in_ must not be touched by a new receive yet
  bool send_pending_ = false;
  bool closing_ = false;           // no more reading; finish replies, then close
  bool close_after_send_ = false;  // a protocol error: send what is queued, then close
  bool forced_ = false;            // the server is stopping: drop pending replies and unsent bytes, then close
};

// listener_actor: accepts connections on a listening socket (shard 0) and hands them to the shards round-robin.
class listener_actor final : public metered<>, public homed {
 public:
  listener_actor(caf::actor_config& cfg, int fd, std::size_t shards, const connection_services* services);
  caf::behavior make_behavior() override;

 private:
  void start_accept();
  void maybe_quit();
  int fd_;
  std::size_t shards_;
  std::size_t next_shard_ = 0;
  const connection_services* services_;
  std::unique_ptr<actor_io> io_;
  std::unique_ptr<storage::io::request> accept_;
  std::unique_ptr<storage::io::request> cancel_;
  bool stopping_ = false;
  bool forced_ = false;  // told to drop every connection: quits once they are gone
  caf::response_promise stopped_;
  // Strong handles keep the connections alive (an unreferenced actor is terminated); monitored, and forgotten
  // when they go. Told to stop when the listener stops.
  std::unordered_map<caf::actor_addr, caf::actor> connections_;
};

}  // namespace rill::actors
