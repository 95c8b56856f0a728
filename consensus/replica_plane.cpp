// replica_plane: sockets for the peer links (see the header).
#include "consensus/replica_plane.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"

namespace rill::consensus {

namespace io = storage::io;
using storage::errc;
using storage::make_unexpected;

// One socket: dialled (peer known from the start) or accepted (peer known once its hello checks out).
struct replica_plane::connection {
  replica_plane* plane = nullptr;
  int fd = -1;
  std::uint64_t peer = 0;  // 0: accepted, hello not yet read
  io::request rx;
  io::request tx;
  io::request dial;
  io::request cancel;  // of a dial in flight when the connection is dropped
  bool rx_busy = false;
  bool tx_busy = false;
  bool dial_busy = false;
  bool cancel_busy = false;
  bool dead = false;
  std::uint64_t started_ms = 0;  // dialled or accepted then (a dial or a hello not done by the deadline is dropped)
  // Dropped while its send was in flight: the link is told (and frees that frame) only once the send completes.
  std::optional<std::string> close_link;
  std::vector<std::byte> buffer;
  std::vector<std::byte> hello_in;  // accepted side, before the hello is whole
};

expected<plane_peer> resolve_peer(std::uint64_t node_id, const std::string& host, std::uint16_t port) {
  ::addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  ::addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string text = fmt::format("{}:{}", host, port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0 || found == nullptr) {
    return make_unexpected(errc::invalid_argument,
                           fmt::format("node {}'s replica address {} does not resolve: {}", node_id, text,
                                       rc != 0 ? ::gai_strerror(rc) : "no address"));
  }
  plane_peer p;
  p.node_id = node_id;
  p.address = text;
  RILL_ASSERT(found->ai_addrlen <= sizeof(p.sockaddr));
  std::memcpy(&p.sockaddr, found->ai_addr, found->ai_addrlen);
  p.sockaddr_size = found->ai_addrlen;
  ::freeaddrinfo(found);
  return p;
}

replica_plane::replica_plane(io::engine& e, replica_plane_options options, int listen_fd, frame_handler on_frame,
                             notice_handler on_notice)
    : engine_(e),
      options_(std::move(options)),
      listen_fd_(listen_fd),
      on_frame_(std::move(on_frame)),
      on_notice_(std::move(on_notice)) {
  RILL_ASSERT(options_.receive_bytes >= peer_hello_bytes);
  for (const auto& p : options_.peers) {
    RILL_ASSERT(p.node_id != options_.ours.node_id, "node {} is its own peer", p.node_id);
    peer_state s;
    s.peer = p;
    s.link = std::make_unique<peer_link>(options_.ours, p.node_id, options_.members, options_.link);
    const bool inserted = peers_.emplace(p.node_id, std::move(s)).second;
    RILL_ASSERT(inserted, "node {} twice", p.node_id);
  }
}

replica_plane::~replica_plane() {
  RILL_ASSERT(!accepting_, "the plane is destroyed with its accept in flight (stop() first)");
  for (const auto& c : connections_) {
    RILL_ASSERT(!c->rx_busy && !c->tx_busy && !c->dial_busy, "a connection is destroyed with I/O in flight");
    if (c->fd >= 0) {
      ::close(c->fd);
    }
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
  }
}

replica_plane::peer_state* replica_plane::find(std::uint64_t node_id) {
  auto it = peers_.find(node_id);
  return it == peers_.end() ? nullptr : &it->second;
}

void replica_plane::start() {
  if (listen_fd_ >= 0) {
    accept_ = std::make_unique<io::request>();
    start_accept();
  }
}

void replica_plane::start_accept() {
  if (stopping_) {
    return;
  }
  *accept_ = io::request{};
  accept_->op = io::opcode::accept;
  accept_->fd = listen_fd_;
  accept_->user = this;
  accept_->on_complete = [](io::request& r) {
    auto* self = static_cast<replica_plane*>(r.user);
    self->accepting_ = false;
    if (self->stopping_) {
      if (r.result >= 0) {
        ::close(static_cast<int>(r.result));
      }
      self->idle_.set();
      return;
    }
    if (r.result >= 0) {
      std::size_t handshaking = 0;
      for (const auto& c : self->connections_) {
        handshaking += (c->peer == 0 && !c->dead) ? 1 : 0;
      }
      if (handshaking >= self->options_.handshakes_max) {
        ::close(static_cast<int>(r.result));
        self->on_notice_(
            fmt::format("replica plane: refused a connection: {} are already waiting for their hello "
                        "(the most allowed)",
                        handshaking));
      } else {
        auto c = std::make_unique<connection>();
        c->plane = self;
        c->fd = static_cast<int>(r.result);
        c->started_ms = self->now_ms_;
        const int one = 1;
        ::setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        connection& ref = *c;
        self->connections_.push_back(std::move(c));
        self->start_receive(ref);
      }
    } else if (r.result != -ECANCELED) {
      // (EMFILE, ENOBUFS, ...: not again at once, which would spin; the next tick accepts again)
      self->on_notice_(fmt::format("replica plane: accept failed: {}", std::strerror(static_cast<int>(-r.result))));
      self->accept_again_ = true;
      return;
    }
    self->start_accept();
  };
  accepting_ = true;
  engine_.submit(*accept_);
}

void replica_plane::tick(std::uint64_t now_ms) {
  now_ms_ = now_ms;
  if (stopping_) {
    return;
  }
  if (accept_again_ && !accepting_) {
    accept_again_ = false;
    start_accept();
  }
  // A dial or a hello not done by its deadline ends its connection (a peer that blackholes the dial, a client that
  // connects and says nothing: neither holds a slot for long).
  std::vector<connection*> late;
  for (const auto& c : connections_) {
    const bool waiting = c->dial_busy || c->peer == 0;
    if (!c->dead && waiting && now_ms >= c->started_ms + handshake_ms_max) {
      late.push_back(c.get());
    }
  }
  for (auto* c : late) {
    drop(*c, c->dial_busy ? "connect timed out" : "no hello in time");
  }
  for (auto& [id, p] : peers_) {
    if (cut_.contains(id)) {
      continue;
    }
    if (p.current == nullptr && p.link->connect_due(now_ms)) {
      dial(p);
    }
    kick(p);
  }
}

void replica_plane::dial(peer_state& p) {
  const int fd = ::socket(p.peer.sockaddr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    p.link->connecting();
    p.link->closed(now_ms_, fmt::format("socket: {}", std::strerror(errno)));
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_unique<connection>();
  c->plane = this;
  c->fd = fd;
  c->peer = p.peer.node_id;
  c->started_ms = now_ms_;
  RILL_ASSERT(p.current == nullptr, "node {} dialled while connected", p.peer.node_id);
  p.current = c.get();
  p.link->connecting();
  c->dial.op = io::opcode::connect;
  c->dial.fd = fd;
  c->dial.cbuffer = reinterpret_cast<const std::byte*>(&p.peer.sockaddr);
  c->dial.length = p.peer.sockaddr_size;
  c->dial.user = c.get();
  c->dial.on_complete = [](io::request& r) {
    auto& conn = *static_cast<connection*>(r.user);
    replica_plane* self = conn.plane;
    conn.dial_busy = false;
    if (conn.dead) {
      self->maybe_free(conn);
      return;
    }
    peer_state* ps = self->find(conn.peer);
    RILL_ASSERT(ps != nullptr && ps->current == &conn);
    if (r.result != 0) {
      self->drop(conn, fmt::format("connect to {}: {}", ps->peer.address, std::strerror(static_cast<int>(-r.result))));
      return;
    }
    ps->link->connected();
    self->start_receive(conn);
    self->kick(*ps);
  };
  c->dial_busy = true;
  connections_.push_back(std::move(c));
  engine_.submit(connections_.back()->dial);
}

void replica_plane::start_receive(connection& c) {
  RILL_ASSERT(!c.rx_busy);
  if (c.buffer.empty()) {
    c.buffer.resize(options_.receive_bytes);
  }
  c.rx = io::request{};
  c.rx.op = io::opcode::recv;
  c.rx.fd = c.fd;
  c.rx.buffer = c.buffer.data();
  // Before the hello is whole, read no further than it: what follows belongs to the link's reader.
  c.rx.length = c.peer == 0 ? peer_hello_bytes - c.hello_in.size() : c.buffer.size();
  c.rx.user = &c;
  c.rx.on_complete = [](io::request& r) {
    auto& conn = *static_cast<connection*>(r.user);
    replica_plane* self = conn.plane;
    conn.rx_busy = false;
    if (conn.dead) {
      self->maybe_free(conn);
      return;
    }
    if (r.result <= 0) {
      self->drop(conn, r.result == 0 ? std::string("the peer closed the connection")
                                     : fmt::format("receive: {}", std::strerror(static_cast<int>(-r.result))));
      return;
    }
    self->on_received(conn, static_cast<std::size_t>(r.result));
  };
  c.rx_busy = true;
  engine_.submit(c.rx);
}

void replica_plane::on_received(connection& c, std::size_t n) {
  if (c.peer == 0) {
    c.hello_in.insert(c.hello_in.end(), c.buffer.begin(), c.buffer.begin() + static_cast<std::ptrdiff_t>(n));
    if (c.hello_in.size() == peer_hello_bytes) {
      on_hello(c);
      return;
    }
    start_receive(c);
    return;
  }
  peer_state* p = find(c.peer);
  RILL_ASSERT(p != nullptr && p->current == &c);
  auto frames = p->link->received(std::span<const std::byte>(c.buffer.data(), n));
  if (!frames) {
    on_notice_(fmt::format("replica plane: node {}: {}", c.peer, frames.error().message()));
    drop(c, frames.error().message());
    return;
  }
  // The link may have just taken the peer's hello (dialling side): what it queued can go now.
  kick(*p);
  const std::uint64_t from = c.peer;
  start_receive(c);
  for (auto& f : *frames) {
    on_frame_(from, std::move(f));
  }
}

void replica_plane::on_hello(connection& c) {
  auto theirs = decode_peer_hello(c.hello_in);
  expected<void> ok = theirs ? check_peer_hello(*theirs, options_.ours, 0, options_.members)
                             : expected<void>(rill::unexpected(theirs.error()));
  peer_state* p = ok ? find(theirs->node_id) : nullptr;
  if (ok && p == nullptr) {
    ok = make_unexpected(errc::invalid_argument, fmt::format("node {} is this node", theirs->node_id));
  }
  if (ok && cut_.contains(theirs->node_id)) {
    ok = make_unexpected(errc::invalid_argument, fmt::format("node {} is cut off (debug)", theirs->node_id));
  }
  if (ok && p->link->dials()) {
    ok = make_unexpected(errc::invalid_argument, fmt::format("node {} dialled node {}: the lower id dials",
                                                             theirs->node_id, options_.ours.node_id));
  }
  if (!ok) {
    on_notice_(fmt::format("replica plane: refused a peer's hello: {}", ok.error().message()));
    drop(c, ok.error().message());
    return;
  }
  if (p->current != nullptr) {
    drop(*p->current, "replaced by a new connection from the peer");
  }
  RILL_ASSERT(p->current == nullptr);
  if (p->link->status() != peer_link::state::idle) {
    // The old connection's send is still in flight (its link closes when it completes): the peer dials again.
    drop(c, "the previous connection is still closing");
    return;
  }
  c.peer = theirs->node_id;
  p->current = &c;
  p->link->accepted(*theirs);
  on_notice_(fmt::format("replica plane: node {} connected", c.peer));
  start_receive(c);
  kick(*p);
}

void replica_plane::kick(peer_state& p) {
  connection* c = p.current;
  if (c == nullptr || c->dead || c->tx_busy) {
    return;
  }
  const auto out = p.link->to_write();
  if (out.empty()) {
    return;
  }
  c->tx = io::request{};
  c->tx.op = io::opcode::send;
  c->tx.fd = c->fd;
  c->tx.cbuffer = out.data();
  c->tx.length = out.size();
  c->tx.user = c;
  c->tx.on_complete = [](io::request& r) {
    auto& conn = *static_cast<connection*>(r.user);
    replica_plane* self = conn.plane;
    conn.tx_busy = false;
    if (conn.dead) {
      if (conn.close_link) {
        if (peer_state* ps = self->find(conn.peer); ps != nullptr) {
          ps->link->closed(self->now_ms_, *conn.close_link);
        }
        conn.close_link.reset();
      }
      self->maybe_free(conn);
      return;
    }
    peer_state* ps = self->find(conn.peer);
    RILL_ASSERT(ps != nullptr && ps->current == &conn);
    if (r.result <= 0) {
      self->drop(conn,
                 fmt::format("send: {}", r.result == 0 ? "nothing sent" : std::strerror(static_cast<int>(-r.result))));
      return;
    }
    ps->link->wrote(static_cast<std::size_t>(r.result));
    self->kick(*ps);
  };
  c->tx_busy = true;
  engine_.submit(c->tx);
}

void replica_plane::drop(connection& c, const std::string& why) {
  if (c.dead) {
    return;
  }
  c.dead = true;
  ::shutdown(c.fd, SHUT_RDWR);  // a receive or send in flight completes now
  if (c.dial_busy && !c.cancel_busy) {
    // A connect in flight may not notice the shutdown (the kernel may retry it until its own timeout): cancel it.
    c.cancel = io::request{};
    c.cancel.op = io::opcode::cancel;
    c.cancel.target = &c.dial;
    c.cancel.user = &c;
    c.cancel.on_complete = [](io::request& r) {
      auto& conn = *static_cast<connection*>(r.user);
      conn.cancel_busy = false;
      conn.plane->maybe_free(conn);
    };
    c.cancel_busy = true;
    engine_.submit(c.cancel);
  }
  if (c.peer != 0) {
    peer_state* p = find(c.peer);
    if (p != nullptr && p->current == &c) {
      p->current = nullptr;
      const bool was_up = p->link->status() == peer_link::state::established;
      if (c.tx_busy) {
        c.close_link = why;  // the frame being sent stays alive until its send completes
      } else {
        p->link->closed(now_ms_, why);
      }
      if (was_up && !stopping_) {
        on_notice_(fmt::format("replica plane: connection to node {} lost: {}", c.peer, why));
      }
    }
  }
  maybe_free(c);
}

void replica_plane::maybe_free(connection& c) {
  if (!c.dead || c.rx_busy || c.tx_busy || c.dial_busy || c.cancel_busy) {
    return;
  }
  ::close(c.fd);
  c.fd = -1;
  auto it = std::find_if(connections_.begin(), connections_.end(), [&](const auto& p) { return p.get() == &c; });
  RILL_ASSERT(it != connections_.end());
  connections_.erase(it);
  if (stopping_) {
    idle_.set();
  }
}

bool replica_plane::cut(std::uint64_t peer, bool on) {
  peer_state* p = find(peer);
  if (p == nullptr) {
    return false;
  }
  if (!on) {
    cut_.erase(peer);
    return true;
  }
  cut_.insert(peer);
  if (p->current != nullptr) {
    drop(*p->current, "cut off (debug)");
  }
  on_notice_(fmt::format("replica plane: node {} cut off (debug.failure_injection)", peer));
  return true;
}

void replica_plane::send(node_t to, group_t group, message m) {
  if (cut_.contains(to.value())) {
    return;  // lost, as on a cut network
  }
  if (peer_state* p = find(to.value()); p != nullptr) {
    (void)p->link->send(group, m);  // a full queue refuses it: the replica resends later (the protocol copes)
    kick(*p);
  }
}

void replica_plane::send(node_t to, const node_heartbeat& beat) {
  if (cut_.contains(to.value())) {
    return;
  }
  if (peer_state* p = find(to.value()); p != nullptr) {
    (void)p->link->send(beat);
    kick(*p);
  }
}

task<void> replica_plane::stop() {
  stopping_ = true;
  std::vector<connection*> all;
  for (const auto& c : connections_) {
    all.push_back(c.get());
  }
  for (auto* c : all) {
    drop(*c, "stopping");
  }
  if (accepting_) {
    // The accept completes with -ECANCELED (or with a socket, closed at once).
    cancel_ = std::make_unique<io::request>();
    cancel_->op = io::opcode::cancel;
    cancel_->target = accept_.get();
    cancel_->user = this;
    cancel_->on_complete = [](io::request& r) {
      auto* self = static_cast<replica_plane*>(r.user);
      self->cancelling_ = false;
      self->idle_.set();
    };
    cancelling_ = true;
    engine_.submit(*cancel_);
  }
  while (accepting_ || cancelling_ || !connections_.empty()) {
    idle_.reset();
    co_await idle_.wait();
  }
}

std::size_t replica_plane::connected_peers() const {
  return static_cast<std::size_t>(std::count_if(peers_.begin(), peers_.end(), [](const auto& kv) {
    return kv.second.link->status() == peer_link::state::established;
  }));
}

std::vector<plane_peer_status> replica_plane::status() const {
  std::vector<plane_peer_status> out;
  for (const auto& [id, p] : peers_) {
    plane_peer_status s;
    s.node_id = id;
    s.address = p.peer.address;
    s.connected = p.link->status() == peer_link::state::established;
    s.queued_bytes = p.link->queued_bytes();
    s.last_error = p.link->last_error();
    s.stats = p.link->stats();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rill::consensus
