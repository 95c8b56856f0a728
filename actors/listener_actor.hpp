#pragma once
// listener_actor: accepts connections on a listening socket (shard 0) and hands them to the shards round-robin,
// refusing those over network.connections_max at once. Stopping cancels the accept and tells every connection to
// finish; forcing tells them to drop what they have. Its public contract is listener_actor_hdl (interfaces.hpp);
// listener_actor_impl adds its I/O completions.
#include <caf/all.hpp>

#include <memory>
#include <unordered_map>

#include "actors/connection_actor.hpp"
#include "actors/interfaces.hpp"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"

namespace rill::actors {

using listener_actor_impl = listener_actor_hdl::extend<io_done_signature>;

class listener_actor final : public metered<listener_actor_impl::base>, public homed {
 public:
  listener_actor(caf::actor_config& cfg, int fd, std::size_t shards, const connection_services* services);
  behavior_type make_behavior() override;

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
  std::unordered_map<caf::actor_addr, connection_actor_hdl> connections_;
};

}  // namespace rill::actors
