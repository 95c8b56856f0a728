#pragma once
// listener_actor: accepts connections on a listening socket (shard 0) and hands them to the shards round-robin,
// refusing those over network.connections_max at once. Stopping cancels the accept and tells every connection to
// finish; forcing tells them to drop what they have.
#include <caf/all.hpp>

#include <memory>
#include <unordered_map>

#include "actors/connection_actor.hpp"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"

namespace rill::actors {

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
