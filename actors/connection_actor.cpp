#include "actors/connection_actor.hpp"

#include <unistd.h>

#include <fmt/core.h>

#include "actors/reply_encoding.h"

namespace rill::actors {
namespace {
const system_clock_source wall_clock;  // ping's server time

connection_state::limits limits_of(const config::server_config& c) {
  return {c.connection_inflight_requests_max, c.connection_inflight_bytes_max, c.max_frame_bytes};
}
}  // namespace

connection_actor::connection_actor(caf::actor_config& cfg, std::size_t home, int fd,
                                   const connection_services* services, const std::string& peer)
    : metered<connection_actor_impl::base>(cfg, "connection", home),
      homed(home),
      fd_(fd),
      services_(services),
      peer_(peer.empty() ? "from an unknown peer" : peer) {
  attach_metrics<connection_metrics>(published_);
  if (!peer.empty()) {
    set_metrics_name(peer);  // the peer's address names the connection in the metrics
  }
}

connection_actor::behavior_type connection_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  state_.emplace(limits_of(*services_->config), current_shard()->pool());  // the home shard's pool
  recv_ = std::make_unique<storage::io::request>();
  send_ = std::make_unique<storage::io::request>();
  services_->connections->fetch_add(1);
  start_recv();
  return {
      io_completion{io_.get()},
      [this](stop_atom) { shut_down(); },
      [this](force_atom) { force_close(); },
  };
}

void connection_actor::start_recv() {
  const auto read = state_->begin_read();
  if (!read) {
    return;
  }
  *recv_ = storage::io::request{};
  recv_->fd = fd_;
  recv_->user = this;
  if (read->poll) {
    // Idle: wait for bytes without a buffer; the receive that follows takes one from the shard's pool.
    recv_->op = storage::io::opcode::poll_readable;
    recv_->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->on_poll(r.result); };
  } else {
    recv_->op = storage::io::opcode::recv;
    recv_->buffer = read->buffer.data();
    recv_->length = read->buffer.size();
    recv_->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->on_recv(r.result); };
  }
  io_->submit(*recv_);
  publish_buffer();
}

void connection_actor::on_poll(std::int64_t result) {
  state_->end_poll(result);
  start_recv();
  maybe_finish();
}

void connection_actor::publish_buffer() {
  published_->recv_buffer_bytes.store(state_->recv_buffer_bytes(), std::memory_order_relaxed);
  published_->recv_copied_bytes.store(state_->copied_bytes(), std::memory_order_relaxed);
}

void connection_actor::on_recv(std::int64_t result) {
  if (!state_->end_recv(result)) {
    maybe_finish();
    return;
  }
  for (;;) {
    auto next = state_->next_frame();
    if (auto* req = std::get_if<connection_state::request>(&next)) {
      bump(published_->requests);
      bump(published_->bytes_in, req->bytes);
      services_->requests_inflight->fetch_add(1);
      dispatch(req->view, req->bytes);
    } else if (auto* bad = std::get_if<connection_state::frame_error>(&next)) {
      reply_error(bad->correlation, bad->st, bad->message, 0);
    } else {
      break;
    }
  }
  state_->framing_done();
  start_recv();
  maybe_finish();
}

void connection_actor::dispatch(const net::request_view& req, std::uint32_t bytes) {
  const pending p{req.correlation_id, bytes};
  if (catching_up_) {
    held_.push_back(hold(req, p));  // behind the one that waits: in order
    return;
  }
  (void)route(req, p, false);
}

connection_actor::held_request connection_actor::hold(const net::request_view& req, pending p) {
  auto kept = std::make_shared<std::vector<std::byte>>();
  kept->reserve(req.header.size() + req.batches.size());
  kept->insert(kept->end(), req.header.begin(), req.header.end());
  kept->insert(kept->end(), req.batches.begin(), req.batches.end());
  net::request_view view = req;
  view.header = std::span<const std::byte>(kept->data(), req.header.size());
  view.batches = std::span<const std::byte>(kept->data() + req.header.size(), req.batches.size());
  return held_request{std::move(kept), view, p};
}

net::metadata_position connection_actor::position() const {
  const auto table = services_->routes->current();
  return net::metadata_position{table->cluster_id, table->metadata_op};
}

bool connection_actor::route(const net::request_view& req, pending p, bool caught_up) {
  RILL_ASSERT(!catching_up_);
  const auto table = services_->routes->current();
  // Read your writes: a request naming an op of this cluster that this node has not carried out waits for it (an op
  // of another cluster, from a client that talked to one before, means nothing here).
  const auto needed = net::metadata_position_of(req.header);
  const bool behind = needed.op > table->metadata_op && needed.cluster_id == table->cluster_id;
  if (behind && !caught_up && op_failed_ != 0 && needed.op >= op_failed_) {
    // The request before it waited for an op no higher than this one and was refused: so is this one, at once (it
    // has waited behind that one already).
    reply_error(p.correlation, op_failure_.st, op_failure_.message, p.bytes);
    return true;
  }
  auto decision = route_request(req, *table->view, routing_directory(*table), balanced_next_, wall_clock,
                                net::metadata_position{table->cluster_id, table->metadata_op});
  const auto* e = std::get_if<actors::reply_error>(&decision);
  const bool not_found =
      e != nullptr && (e->st == net::status::stream_not_found || e->st == net::status::topic_not_found ||
                       e->st == net::status::group_not_found);
  if (!caught_up && (behind || (services_->cluster_member && not_found))) {
    held_.push_front(hold(req, p));
    catching_up_ = true;
    synced_wait_ = !behind;
    auto caught = [this](outcome& o) { resume(std::move(o)); };
    auto failed = [this](caf::error& err) { resume(outcome{net::status::unavailable, system().render(err)}); };
    if (behind) {
      request(services_->metadata, caf::infinite, await_op_atom::value, needed.op).then(caught, failed);
    } else {
      request(services_->metadata, caf::infinite, sync_atom::value).then(caught, failed);
    }
    return false;
  }
  std::visit(
      [&](auto&& d) {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, actors::reply_error>) {
          reply_error(p.correlation, d.st, d.message, p.bytes, d.primary_address);
        } else if constexpr (std::is_same_v<D, reply_frame>) {
          reply(std::move(d.frame), p.bytes);
        } else {
          if constexpr (std::is_same_v<D, to_partition>) {
            if (const auto* produce = std::get_if<produce_call>(&d.call)) {
              // The router validated the batches in the receive buffer and copied them once, into their write buffer.
              bump(published_->produce_bytes, req.batches.size());
              bump(published_->produce_copied_bytes, produce->batches->bytes().size());
            }
          }
          forward(p, *table, std::move(d));
        }
      },
      decision);
  return true;
}

void connection_actor::resume(outcome waited) {
  RILL_ASSERT(catching_up_);
  RILL_ASSERT(!held_.empty());
  catching_up_ = false;
  held_request head = std::move(held_.front());
  held_.pop_front();
  if (!waited.ok()) {
    if (!synced_wait_) {
      op_failed_ = net::metadata_position_of(head.view.header).op;
      op_failure_ = waited;
    }
    reply_error(head.p.correlation, waited.st, waited.message, head.p.bytes);
  } else {
    // After a sync it is routed as it is now; after waiting for its op it is routed afresh (a "not found" at the op
    // it named is still confirmed by a sync first).
    (void)route(head.view, head.p, synced_wait_);
  }
  // The ones behind it, in order, until one must wait in turn.
  while (!held_.empty() && !catching_up_) {
    held_request next = std::move(held_.front());
    held_.pop_front();
    (void)route(next.view, next.p, false);
  }
  op_failed_ = 0;  // only the requests held behind a refused wait share its refusal
}

template <class Reply, class Handle, class Encode, class... Args>
void connection_actor::ask(const Handle& dest, pending p, Encode encode, Args&&... args) {
  request(dest, caf::infinite, std::forward<Args>(args)...)
      .then(
          [this, p, encode](Reply& r) {
            if (!r.result.ok()) {
              return reply_error(p.correlation, r.result.st, r.result.message, p.bytes, r.result.redirect);
            }
            reply(encode(r, position()), p.bytes);
          },
          [this, p](caf::error& e) {
            reply_error(p.correlation, net::status::unavailable, system().render(e), p.bytes);
          });
}

void connection_actor::forward(pending p, const routing_table& table, to_partition&& d) {
  const auto key = d.partition;
  partition_actor_hdl target = table.partition(key.stream_id, key.topic_id, key.partition_id);
  RILL_ASSERT(target, "the router chose partition {}/{}/{}, absent from the table", key.stream_id, key.topic_id,
              key.partition_id);
  const std::uint32_t corr = p.correlation;
  if (auto* produce = std::get_if<produce_call>(&d.call)) {
    ask<produce_reply>(
        target, p,
        [corr, key](produce_reply& r, net::metadata_position at) {
          return produce_reply_frame(corr, key.partition_id, r.base_offsets, r.timestamp_ms, at);
        },
        produce_atom::value, produce_msg{std::move(produce->batches)});
  } else if (auto* poll = std::get_if<poll_call>(&d.call)) {
    auto encode = [corr, key](poll_reply& r, net::metadata_position at) {
      return poll_reply_frame(corr, key.partition_id, *r.data, at);
    };
    if (poll->group && poll->group->coordinated) {
      const auto& g = *poll->group;
      ask<poll_reply>(
          services_->metadata, p, encode, group_poll_atom::value,
          coordinated_poll_msg{g.stream_id, g.topic_id, g.group_id, std::move(poll->request), std::move(target)});
    } else if (poll->group) {
      group_actor_hdl group = table.group(poll->group->stream_id, poll->group->topic_id, poll->group->group_id);
      RILL_ASSERT(group, "the router chose group {}, absent from the table", poll->group->group_id);
      ask<poll_reply>(group, p, encode, group_poll_atom::value,
                      group_poll_msg{std::move(poll->request), std::move(target)});
    } else {
      ask<poll_reply>(target, p, encode, poll_atom::value, poll_msg{std::move(poll->request), std::nullopt});
    }
  } else {
    auto& offset = std::get<offset_call>(d.call);
    const bool store = offset.store;
    auto encode = [corr, store](offset_reply& r, net::metadata_position at) {
      return offset_reply_frame(corr, store, r.offset, at);
    };
    offset_msg msg{std::move(offset.consumer), offset.offset};
    if (store) {
      ask<offset_reply>(target, p, encode, offset_store_atom::value, std::move(msg));
    } else {
      ask<offset_reply>(target, p, encode, offset_get_atom::value, std::move(msg));
    }
  }
}

void connection_actor::forward(pending p, const routing_table& table, to_group&& d) {
  const std::uint32_t corr = p.correlation;
  auto encode = [corr](group_reply& r, net::metadata_position at) {
    return serialized_reply_frame(corr, r.header, at);
  };
  if (d.group.coordinated) {
    coordinated_ = coordinated_ || d.tracks_member;
    ask<group_reply>(
        services_->metadata, p, encode, coordinator_atom::value,
        coordinator_msg{d.group.stream_id, d.group.topic_id, d.group.group_id, d.api, std::move(d.header), id()});
    return;
  }
  group_actor_hdl group = table.group(d.group.stream_id, d.group.topic_id, d.group.group_id);
  RILL_ASSERT(group, "the router chose group {}, absent from the table", d.group.group_id);
  if (d.tracks_member) {
    groups_.emplace(group.address(), group);  // told when this connection closes
  }
  ask<group_reply>(group, p, encode, group_atom::value, group_msg{d.api, std::move(d.header), id()});
}

void connection_actor::forward(pending p, const routing_table&, to_metadata&& d) {
  const std::uint32_t corr = p.correlation;
  const bool stats = d.stats;
  auto* connections = services_->connections;
  ask<metadata_reply>(
      services_->metadata, p,
      [corr, stats, connections](metadata_reply& r, net::metadata_position at) {
        at.op = std::max(at.op, r.op);  // a change's reply names at least the op that made it
        return serialized_reply_frame(corr, stats ? stats_reply_header(r.header, connections->load()) : r.header, at);
      },
      metadata_atom::value, metadata_msg{d.api, std::move(d.header)});
}

void connection_actor::reply(std::vector<std::byte> frame, std::uint32_t request_bytes) {
  const std::size_t size = frame.size();
  if (!state_->queue_reply(std::move(frame), request_bytes)) {
    return;  // closed meanwhile: the reply has nowhere to go
  }
  if (request_bytes > 0) {
    services_->requests_inflight->fetch_sub(1);
  }
  bump(published_->bytes_out, size);
  start_send();
  start_recv();  // below the caps again, perhaps
}

void connection_actor::reply_error(std::uint32_t correlation, net::status st, const std::string& message,
                                   std::uint32_t request_bytes, const std::string& primary_address) {
  bump(published_->errors);
  auto told = client_error_of(st, message, services_->config->data_dir);
  if (told.redacted && services_->reporter != nullptr) {
    services_->reporter->notice(
        fmt::format("connection {}: request {} failed with {}: {}", peer_, correlation, net::to_string(st), message));
  }
  reply(error_reply_frame(correlation, st, told.message, primary_address, position()), request_bytes);
}

void connection_actor::start_send() {
  const auto bytes = state_->begin_send();
  if (!bytes) {
    return;
  }
  *send_ = storage::io::request{};
  send_->op = storage::io::opcode::send;
  send_->fd = fd_;
  send_->cbuffer = bytes->data();
  send_->length = bytes->size();
  send_->user = this;
  send_->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->on_send(r.result); };
  io_->submit(*send_);
}

void connection_actor::on_send(std::int64_t result) {
  state_->end_send(result);
  start_send();
  start_recv();  // replies drained: reading may resume
  maybe_finish();
}

void connection_actor::shut_down() {
  if (state_->shut_down()) {
    submit_cancel(recv_.get());
  }
  maybe_finish();
}

void connection_actor::submit_cancel(storage::io::request* target) {
  auto cancel = std::make_unique<storage::io::request>();
  cancel->op = storage::io::opcode::cancel;
  cancel->target = target;
  cancel->user = this;
  // The actor finishes only once every request it submitted has completed, cancels included.
  cancel->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->maybe_finish(); };
  io_->submit(*cancel);
  cancels_.push_back(std::move(cancel));
}

void connection_actor::force_close() {
  // The server is going away: stop waiting for replies still being computed and for a client that does not read.
  if (state_->force()) {
    submit_cancel(send_.get());
  }
  shut_down();
}

void connection_actor::on_exit() {
  // Members that joined or beat through this connection leave their groups now, not when their sessions end.
  for (auto& [addr, g] : groups_) {
    anon_send(g, disconnect_atom::value, std::uint64_t{id()});
  }
  groups_.clear();
  if (coordinated_) {
    anon_send(services_->metadata, disconnect_atom::value, std::uint64_t{id()});
    coordinated_ = false;
  }
  if (io_ && io_->in_flight() > 0) {
    RILL_ASSERT(state_.has_value());
    if (state_->recv_pending() && !state_->poll_pending()) {
      state_->abandon_recv_buffer();  // the kernel may still write into it
    } else {
      state_->release_recv_buffer();  // only sends, polls or cancels in the kernel: nothing writes into it
    }
    // Terminated from outside (the runtime going down) with requests still in the kernel: what they point at (the
    // requests, their buffers, the router) is leaked on purpose rather than freed under the kernel's feet.
    struct orphaned_io {
      std::unique_ptr<actor_io> io;
      std::unique_ptr<storage::io::request> recv;
      std::unique_ptr<storage::io::request> send;
      std::vector<std::unique_ptr<storage::io::request>> cancels;
      connection_state state;
    };
    [[maybe_unused]] auto* leaked =
        new orphaned_io{std::move(io_), std::move(recv_), std::move(send_), std::move(cancels_), std::move(*state_)};
  }
  close_socket();
}

void connection_actor::maybe_finish() {
  publish_buffer();
  switch (state_->next_step(io_->in_flight() > 0)) {
    case connection_state::step::wait:
      return;
    case connection_state::step::shut_down:
      shut_down();  // stop the pending read; its completion brings us back here
      return;
    case connection_state::step::close:
      state_->check_invariants();
      close_socket();  // not an I/O wait: closing a socket does not block
      quit();
      return;
  }
}

void connection_actor::close_socket() {
  if (fd_ < 0) {
    return;
  }
  ::close(fd_);
  fd_ = -1;
  if (state_) {
    state_->closed();
  }
  services_->connections->fetch_sub(1);
  services_->requests_inflight->fetch_sub(state_ ? state_->inflight_requests() : 0);  // forced: never to be answered
}

}  // namespace rill::actors
