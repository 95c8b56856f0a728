#include "actors/listener_actor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>

namespace rill::actors {
namespace {
// A connected socket's peer, "host:port" or "[host]:port"; empty when unknown (getpeername does not block).
std::string peer_name(int fd) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  char host[INET6_ADDRSTRLEN] = {};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
    return {};
  }
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
  }
  return {};
}
}  // namespace

listener_actor::listener_actor(caf::actor_config& cfg, int fd, std::size_t shards, const connection_services* services)
    : metered<listener_actor_impl::base>(cfg, "listener", 0), homed(0), fd_(fd), shards_(shards), services_(services) {
  set_metrics_name("client");
}

listener_actor::behavior_type listener_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  accept_ = std::make_unique<storage::io::request>();
  cancel_ = std::make_unique<storage::io::request>();
  start_accept();
  set_down_handler([this](caf::down_msg& m) {
    connections_.erase(m.source);
    maybe_quit();
  });
  return {
      io_completion{io_.get()},
      [this](force_atom) {
        // Connections still open are dropped; the listener keeps their handles until they are gone.
        forced_ = true;
        for (auto& [addr, c] : connections_) {
          anon_send(c, force_atom::value);
        }
        maybe_quit();
      },
      [this](stop_atom) -> caf::result<outcome> {
        stopped_ = make_response_promise<outcome>();
        stopping_ = true;
        for (auto& [addr, c] : connections_) {
          anon_send(c, stop_atom::value);
        }
        *cancel_ = storage::io::request{};
        cancel_->op = storage::io::opcode::cancel;
        cancel_->target = accept_.get();
        cancel_->user = this;
        cancel_->on_complete = [](storage::io::request& r) { static_cast<listener_actor*>(r.user)->maybe_quit(); };
        io_->submit(*cancel_);
        return stopped_;
      },
  };
}

void listener_actor::maybe_quit() {
  if (forced_ && connections_.empty() && fd_ < 0 && io_->in_flight() == 0) {
    quit();
  }
}

void listener_actor::start_accept() {
  *accept_ = storage::io::request{};
  accept_->op = storage::io::opcode::accept;
  accept_->fd = fd_;
  accept_->user = this;
  accept_->on_complete = [](storage::io::request& r) {
    auto* self = static_cast<listener_actor*>(r.user);
    if (self->stopping_) {
      if (r.result >= 0) {
        ::close(static_cast<int>(r.result));
      }
      ::close(self->fd_);
      self->fd_ = -1;
      self->stopped_.deliver(outcome{});
      self->maybe_quit();  // not before force: the listener holds the connections' handles
      return;
    }
    if (r.result >= 0) {
      const int fd = static_cast<int>(r.result);
      if (self->services_->connections->load() >= self->services_->config->connections_max) {
        ::close(fd);  // over the limit: refused at once
      } else {
        connection_actor_hdl c = self->system().spawn<connection_actor>(self->next_shard_++ % self->shards_, fd,
                                                                        self->services_, peer_name(fd));
        self->monitor(c);
        self->connections_.emplace(c.address(), c);
      }
    }
    self->start_accept();
  };
  io_->submit(*accept_);
}

}  // namespace rill::actors
