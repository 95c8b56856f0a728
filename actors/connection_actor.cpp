#include "actors/connection_actor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "actors/runtime/shard.h"
#include "base/endian.h"
#include "net/errc.h"

namespace rill::actors {
namespace {
constexpr std::size_t recv_window_min = 64 * 1024;
constexpr std::size_t recv_window_max = 4 * 1024 * 1024;
constexpr const char* version_string = "rill 0.1.0";

template <class M>
bool parse_header(const net::request_view& req, M& m) {
  return m.ParseFromArray(req.header.data(), static_cast<int>(req.header.size()));
}

template <class M>
std::vector<std::byte> reply_frame(std::uint32_t correlation, const M& m, std::span<const std::byte> batches = {}) {
  std::vector<std::byte> out;
  net::append_reply(out, correlation, net::status::ok, m, batches);
  return out;
}
}  // namespace

connection_actor::connection_actor(caf::actor_config& cfg, std::size_t home, int fd,
                                   const connection_services* services)
    : metered<>(cfg, "connection", home), homed(home), fd_(fd), services_(services) {
  attach_metrics<connection_metrics>(published_);
  // The peer's address names the connection in the metrics (getpeername does not block).
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  char host[INET6_ADDRSTRLEN] = {};
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &len) == 0) {
    if (peer.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      set_metrics_name(fmt::format("{}:{}", host, ntohs(in->sin_port)));
    } else if (peer.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      set_metrics_name(fmt::format("[{}]:{}", host, ntohs(in6->sin6_port)));
    }
  }
}

caf::behavior connection_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  recv_ = std::make_unique<storage::io::request>();
  send_ = std::make_unique<storage::io::request>();
  services_->connections->fetch_add(1);
  start_recv();
  caf::message_handler own{[this](stop_atom) { shut_down(); }, [this](force_atom) { force_close(); }};
  return caf::behavior{io_completion_handler(*io_).or_else(own)};
}

bool connection_actor::can_read() const {
  return !closing_ && !close_after_send_ && inflight_requests_ < services_->config->connection_inflight_requests_max &&
         inflight_bytes_ < services_->config->connection_inflight_bytes_max &&
         out_bytes_ < services_->config->connection_inflight_bytes_max;
}

void connection_actor::start_recv() {
  if (recv_pending_ || framing_ || !can_read()) {
    return;
  }
  // Read at least a window; more when a large frame is known to be coming.
  std::size_t want = recv_window_min;
  if (in_.size() >= net::length_bytes) {
    const std::uint64_t frame = std::uint64_t{load_be<std::uint32_t>(in_.data())} + net::length_bytes;
    if (frame > in_.size()) {
      want = std::clamp<std::uint64_t>(frame - in_.size(), recv_window_min, recv_window_max);
    }
  }
  const std::size_t have = in_.size();
  in_.resize(have + want);
  *recv_ = storage::io::request{};
  recv_->op = storage::io::opcode::recv;
  recv_->fd = fd_;
  recv_->buffer = in_.data() + have;
  recv_->length = want;
  recv_->user = this;
  recv_->offset = have;  // remembered: where this receive writes
  recv_->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->on_recv(r.result); };
  recv_pending_ = true;
  io_->submit(*recv_);
}

void connection_actor::on_recv(std::int64_t result) {
  recv_pending_ = false;
  const std::size_t have = recv_->offset;
  if (result <= 0) {
    in_.resize(have);
    closing_ = true;  // the peer closed (0) or the socket failed: finish what is in flight, then go
    maybe_finish();
    return;
  }
  in_.resize(have + static_cast<std::size_t>(result));
  framing_ = true;
  std::size_t consumed = 0;
  while (!close_after_send_) {
    const auto rest = std::span<const std::byte>(in_).subspan(consumed);
    auto size = net::next_frame_size(rest, net::request_prefix_bytes, services_->config->max_frame_bytes);
    if (!size) {
      const std::uint32_t correlation = rest.size() >= 8 ? load_be<std::uint32_t>(rest.data() + 4) : 0;
      reply_error(correlation, net::status_of(size.error().code()), size.error().detail(), 0);
      close_after_send_ = true;
      break;
    }
    if (!size->has_value()) {
      break;
    }
    handle_frame(rest.first(**size));
    consumed += **size;
  }
  if (consumed > 0) {
    in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(consumed));
  }
  framing_ = false;
  start_recv();
  maybe_finish();
}

void connection_actor::handle_frame(std::span<const std::byte> frame) {
  auto req = net::parse_request(frame);
  const std::uint32_t bytes = static_cast<std::uint32_t>(frame.size());
  if (!req) {
    reply_error(frame.size() >= 8 ? load_be<std::uint32_t>(frame.data() + 4) : 0, net::status::malformed_frame,
                req.error().detail(), 0);
    close_after_send_ = true;
    return;
  }
  ++inflight_requests_;
  bump(published_->requests);
  bump(published_->bytes_in, bytes);
  services_->requests_inflight->fetch_add(1);
  inflight_bytes_ += bytes;
  dispatch(*req, bytes);
}

void connection_actor::dispatch(const net::request_view& req, std::uint32_t bytes) {
  const std::uint32_t corr = req.correlation_id;
  const auto a = net::api_from_wire(req.api_wire);
  if (!a) {
    reply_error(corr, net::status::unknown_api, fmt::format("api {} does not exist", req.api_wire), bytes);
    return;
  }
  if (req.version != net::protocol_version) {
    reply_error(corr, net::status::unsupported_version,
                fmt::format("protocol version {} (this server speaks {})", req.version, net::protocol_version), bytes);
    return;
  }
  const auto table = services_->routes->current();
  // Finds the partition actor of a request's stream, topic and partition, or replies with the error.
  // Finds a request's stream and topic, or replies with the error (and returns null).
  auto find = [&](const proto::Identifier& s,
                  const proto::Identifier& t) -> std::pair<const stream_meta*, const topic_meta*> {
    auto stream = table->view->find_stream(s);
    if (!stream) {
      reply_error(corr, net::status_of(stream.error().code()), stream.error().detail(), bytes);
      return {nullptr, nullptr};
    }
    auto topic = table->view->find_topic(**stream, t);
    if (!topic) {
      reply_error(corr, net::status_of(topic.error().code()), topic.error().detail(), bytes);
      return {nullptr, nullptr};
    }
    return {*stream, *topic};
  };
  auto route = [&](const proto::Identifier& s, const proto::Identifier& t, std::optional<std::uint32_t> partition,
                   std::uint32_t& chosen) -> caf::actor {
    const auto [stream, topic] = find(s, t);
    if (topic == nullptr) {
      return {};
    }
    const std::uint32_t count = topic->config.partitions();
    chosen = partition ? *partition : balanced_next_++ % count;
    if (chosen >= count) {
      reply_error(corr, net::status::partition_not_found,
                  fmt::format("partition {} not found in topic '{}' ({} partitions)", chosen, topic->name, count),
                  bytes);
      return {};
    }
    auto actor = table->partition(stream->id, topic->id, chosen);
    if (!actor) {
      reply_error(corr, net::status::unavailable, "the partition is being created or deleted; retry", bytes);
    }
    return actor;
  };
  auto bad_header = [&] { reply_error(corr, net::status::bad_header, "the request header does not parse", bytes); };
  // Finds a consumer group's actor, or replies with the error.
  auto route_group = [&](const proto::Identifier& s, const proto::Identifier& t,
                         const proto::Identifier& g) -> caf::actor {
    const auto [stream, topic] = find(s, t);
    if (topic == nullptr) {
      return {};
    }
    auto group = metadata_view::find_group(*topic, g);
    if (!group) {
      reply_error(corr, net::status_of(group.error().code()), group.error().detail(), bytes);
      return {};
    }
    auto actor = table->group(stream->id, topic->id, (*group)->id);
    if (!actor) {
      reply_error(corr, net::status::unavailable, "the group is being created or deleted; retry", bytes);
    }
    return actor;
  };
  // Sends a request to a group's actor and relays its reply.
  auto to_group = [&](caf::actor group) {
    if (*a == net::api::group_join || *a == net::api::group_heartbeat) {
      groups_.emplace(group.address(), group);  // told when this connection closes
    }
    group_msg msg{req.api_wire, std::string(reinterpret_cast<const char*>(req.header.data()), req.header.size()), id()};
    request(group, caf::infinite, group_atom::value, std::move(msg))
        .then(
            [this, corr, bytes](group_reply& r) {
              if (!r.result.ok()) {
                return reply_error(corr, r.result.st, r.result.message, bytes);
              }
              reply_serialized(corr, r.header, bytes);
            },
            [this, corr, bytes](caf::error& e) {
              reply_error(corr, net::status::unavailable, system().render(e), bytes);
            });
  };

  switch (*a) {
    case net::api::ping: {
      proto::PingReply r;
      r.set_server_time_ms(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count()));
      r.set_version(version_string);
      reply(reply_frame(corr, r), bytes);
      return;
    }
    case net::api::login:
      reply_error(corr, net::status::unsupported, "authentication arrives with a later version; no login is needed",
                  bytes);
      return;
    case net::api::produce: {
      proto::ProduceRequest h;
      if (!parse_header(req, h)) {
        return bad_header();
      }
      if (req.batches.empty()) {
        return reply_error(corr, net::status::invalid_batch, "a produce request carries at least one batch", bytes);
      }
      std::optional<std::uint32_t> partition;
      if (h.partitioning().kind_case() == proto::Partitioning::kPartitionId) {
        partition = h.partitioning().partition_id();
      }
      std::uint32_t chosen = 0;
      auto target = route(h.stream(), h.topic(), partition, chosen);
      if (!target) {
        return;
      }
      auto batches = std::make_shared<std::vector<std::byte>>(req.batches.begin(), req.batches.end());
      request(target, caf::infinite, produce_atom::value, produce_msg{std::move(batches)})
          .then(
              [this, corr, bytes, chosen](produce_reply& r) {
                if (!r.result.ok()) {
                  return reply_error(corr, r.result.st, r.result.message, bytes);
                }
                proto::ProduceReply out;
                out.set_partition_id(chosen);
                for (auto o : r.base_offsets) {
                  out.add_base_offsets(static_cast<std::uint64_t>(o));
                }
                out.set_timestamp_ms(static_cast<std::uint64_t>(std::max<std::int64_t>(r.timestamp_ms, 0)));
                reply(reply_frame(corr, out), bytes);
              },
              [this, corr, bytes](caf::error& e) {
                reply_error(corr, net::status::unavailable, system().render(e), bytes);
              });
      return;
    }
    case net::api::poll: {
      proto::PollRequest h;
      if (!parse_header(req, h)) {
        return bad_header();
      }
      std::uint32_t chosen = 0;
      auto target = route(h.stream(), h.topic(), h.partition_id(), chosen);
      if (!target) {
        return;
      }
      // A group member's poll goes through its group, which checks ownership and knows the group's offset.
      caf::actor group;
      if (h.consumer().kind_case() == proto::Consumer::kGroup) {
        proto::Identifier g;
        g.set_name(h.consumer().group());
        group = route_group(h.stream(), h.topic(), g);
        if (!group) {
          return;
        }
      }
      auto pending =
          group ? request(group, caf::infinite, group_poll_atom::value, group_poll_msg{std::move(h), std::move(target)})
                : request(target, caf::infinite, poll_atom::value, poll_msg{std::move(h), std::nullopt});
      pending.then(
          [this, corr, bytes, chosen](poll_reply& r) {
            if (!r.result.ok()) {
              return reply_error(corr, r.result.st, r.result.message, bytes);
            }
            proto::PollReply out;
            out.set_partition_id(chosen);
            out.set_first_offset(static_cast<std::uint64_t>(std::max<std::int64_t>(r.data->first_offset.value(), 0)));
            out.set_next_offset(static_cast<std::uint64_t>(r.data->next_offset.value()));
            out.set_high_watermark(static_cast<std::uint64_t>(r.data->high_watermark.value()));
            out.set_log_start(static_cast<std::uint64_t>(r.data->log_start.value()));
            out.set_batches(r.data->batches);
            out.set_records(r.data->records);
            out.set_start_offset(static_cast<std::uint64_t>(std::max<std::int64_t>(r.data->requested.value(), 0)));
            const auto data = r.data->bytes ? r.data->bytes.span() : std::span<const std::byte>{};
            reply(reply_frame(corr, out, data), bytes);
          },
          [this, corr, bytes](caf::error& e) {
            reply_error(corr, net::status::unavailable, system().render(e), bytes);
          });
      return;
    }
    case net::api::offset_store:
    case net::api::offset_get: {
      const bool store = *a == net::api::offset_store;
      proto::OffsetStoreRequest h;  // OffsetGetRequest has the same first four fields
      if (!parse_header(req, h)) {
        return bad_header();
      }
      if (h.consumer().kind_case() == proto::Consumer::kGroup) {
        proto::Identifier g;
        g.set_name(h.consumer().group());
        if (auto group = route_group(h.stream(), h.topic(), g)) {
          to_group(group);
        }
        return;
      }
      if (h.consumer().kind_case() != proto::Consumer::kName) {
        return reply_error(corr, net::status::bad_header, "an offset request names a consumer or a group", bytes);
      }
      std::uint32_t chosen = 0;
      auto target = route(h.stream(), h.topic(), h.partition_id(), chosen);
      if (!target) {
        return;
      }
      offset_msg msg{h.consumer().name(), static_cast<std::int64_t>(h.offset())};
      auto handle = [this, corr, bytes, store](offset_reply& r) {
        if (!r.result.ok()) {
          return reply_error(corr, r.result.st, r.result.message, bytes);
        }
        if (store) {
          proto::OffsetStoreReply out;
          if (r.offset) {
            out.set_previous(static_cast<std::uint64_t>(*r.offset));
          }
          reply(reply_frame(corr, out), bytes);
        } else {
          proto::OffsetGetReply out;
          if (r.offset) {
            out.set_offset(static_cast<std::uint64_t>(*r.offset));
          }
          reply(reply_frame(corr, out), bytes);
        }
      };
      auto on_error = [this, corr, bytes](caf::error& e) {
        reply_error(corr, net::status::unavailable, system().render(e), bytes);
      };
      if (store) {
        request(target, caf::infinite, offset_store_atom::value, std::move(msg)).then(handle, on_error);
      } else {
        request(target, caf::infinite, offset_get_atom::value, std::move(msg)).then(handle, on_error);
      }
      return;
    }
    case net::api::group_get:
    case net::api::group_join:
    case net::api::group_leave:
    case net::api::group_heartbeat:
    case net::api::group_assignment:
    case net::api::group_commit:
    case net::api::group_offsets: {
      proto::GroupGetRequest h;  // every group request starts with stream, topic and group
      if (!parse_header(req, h)) {
        return bad_header();
      }
      if (auto group = route_group(h.stream(), h.topic(), h.group())) {
        to_group(group);
      }
      return;
    }
    default: {
      // Streams, topics, partitions, stats, and creating, listing and deleting groups: the metadata actor.
      metadata_msg msg{req.api_wire, std::string(reinterpret_cast<const char*>(req.header.data()), req.header.size())};
      const bool stats = *a == net::api::stats;
      request(services_->metadata, caf::infinite, metadata_atom::value, std::move(msg))
          .then(
              [this, corr, bytes, stats](metadata_reply& r) {
                if (!r.result.ok()) {
                  return reply_error(corr, r.result.st, r.result.message, bytes);
                }
                if (stats) {
                  proto::StatsReply s;
                  s.ParseFromString(r.header);
                  s.set_connections(services_->connections->load());
                  s.set_version(version_string);
                  r.header = s.SerializeAsString();
                }
                reply_serialized(corr, r.header, bytes);
              },
              [this, corr, bytes](caf::error& e) {
                reply_error(corr, net::status::unavailable, system().render(e), bytes);
              });
      return;
    }
  }
}

void connection_actor::reply(std::vector<std::byte> frame, std::uint32_t request_bytes) {
  if (fd_ < 0 || forced_) {
    return;  // closed meanwhile: the reply has nowhere to go
  }
  if (request_bytes > 0) {
    RILL_ASSERT(inflight_requests_ > 0);
    --inflight_requests_;
    services_->requests_inflight->fetch_sub(1);
    inflight_bytes_ -= request_bytes;
  }
  out_bytes_ += frame.size();
  bump(published_->bytes_out, frame.size());
  out_.push_back(std::move(frame));
  start_send();
  start_recv();  // below the caps again, perhaps
}

void connection_actor::reply_serialized(std::uint32_t correlation, const std::string& header,
                                        std::uint32_t request_bytes) {
  std::vector<std::byte> out;
  net::append_reply_raw(out, correlation, net::status::ok,
                        std::span<const std::byte>(reinterpret_cast<const std::byte*>(header.data()), header.size()));
  reply(std::move(out), request_bytes);
}

void connection_actor::reply_error(std::uint32_t correlation, net::status st, const std::string& message,
                                   std::uint32_t request_bytes) {
  bump(published_->errors);
  std::vector<std::byte> out;
  net::append_error_reply(out, correlation, st, message);
  reply(std::move(out), request_bytes);
}

void connection_actor::start_send() {
  if (send_pending_ || out_.empty() || fd_ < 0) {
    return;
  }
  *send_ = storage::io::request{};
  send_->op = storage::io::opcode::send;
  send_->fd = fd_;
  send_->cbuffer = out_.front().data() + out_sent_;
  send_->length = out_.front().size() - out_sent_;
  send_->user = this;
  send_->on_complete = [](storage::io::request& r) { static_cast<connection_actor*>(r.user)->on_send(r.result); };
  send_pending_ = true;
  io_->submit(*send_);
}

void connection_actor::on_send(std::int64_t result) {
  send_pending_ = false;
  if (result < 0) {
    out_.clear();  // the peer is gone: nothing more can be delivered
    out_bytes_ = 0;
    closing_ = true;
    maybe_finish();
    return;
  }
  if (forced_) {
    out_.clear();  // nothing more is sent
    out_bytes_ = 0;
    maybe_finish();
    return;
  }
  out_sent_ += static_cast<std::size_t>(result);
  if (out_sent_ == out_.front().size()) {
    out_bytes_ -= out_.front().size();
    out_.pop_front();
    out_sent_ = 0;
  }
  start_send();
  start_recv();  // replies drained: reading may resume
  maybe_finish();
}

void connection_actor::shut_down() {
  closing_ = true;
  if (recv_pending_) {
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
  forced_ = true;
  if (send_pending_) {
    // The kernel may still read the front reply: it stays until the send completes (cancelled).
    while (out_.size() > 1) {
      out_bytes_ -= out_.back().size();
      out_.pop_back();
    }
    submit_cancel(send_.get());
  } else {
    out_.clear();
    out_bytes_ = 0;
    out_sent_ = 0;
  }
  shut_down();
}

void connection_actor::on_exit() {
  // Members that joined or beat through this connection leave their groups now, not when their sessions end.
  for (auto& [addr, g] : groups_) {
    anon_send(g, disconnect_atom::value, std::uint64_t{id()});
  }
  groups_.clear();
  if (io_ && io_->in_flight() > 0) {
    // Terminated from outside (the runtime going down) with requests still in the kernel: what they point at (the
    // requests, their buffers, the router) is leaked on purpose rather than freed under the kernel's feet.
    struct orphaned_io {
      std::unique_ptr<actor_io> io;
      std::unique_ptr<storage::io::request> recv;
      std::unique_ptr<storage::io::request> send;
      std::vector<std::unique_ptr<storage::io::request>> cancels;
      std::vector<std::byte> in;
      std::deque<std::vector<std::byte>> out;
    };
    [[maybe_unused]] auto* leaked = new orphaned_io{std::move(io_),      std::move(recv_), std::move(send_),
                                                    std::move(cancels_), std::move(in_),   std::move(out_)};
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    services_->connections->fetch_sub(1);
    services_->requests_inflight->fetch_sub(inflight_requests_);
  }
}

void connection_actor::maybe_finish() {
  const bool done_sending = out_.empty() && !send_pending_;
  const bool requests_done = inflight_requests_ == 0 || forced_;
  if (fd_ < 0 || !done_sending || !requests_done) {
    return;
  }
  if (!closing_) {
    if (close_after_send_) {
      shut_down();  // stop the pending read; its completion brings us back here
    }
    return;
  }
  // Nothing of ours may be left in the kernel when the actor goes: the pending read and the cancels complete first.
  if (recv_pending_ || io_->in_flight() > 0) {
    return;
  }
  ::close(fd_);  // not an I/O wait: closing a socket does not block
  fd_ = -1;
  services_->connections->fetch_sub(1);
  services_->requests_inflight->fetch_sub(inflight_requests_);  // forced: never to be answered
  quit();
}

listener_actor::listener_actor(caf::actor_config& cfg, int fd, std::size_t shards, const connection_services* services)
    : metered<>(cfg, "listener", 0), homed(0), fd_(fd), shards_(shards), services_(services) {
  set_metrics_name("client");
}

caf::behavior listener_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  accept_ = std::make_unique<storage::io::request>();
  cancel_ = std::make_unique<storage::io::request>();
  start_accept();
  set_down_handler([this](caf::down_msg& m) {
    connections_.erase(m.source);
    maybe_quit();
  });
  caf::message_handler own{[this](force_atom) {
                             // Connections still open are dropped; the listener keeps their handles until they are
                             // gone.
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
                             cancel_->on_complete = [](storage::io::request& r) {
                               static_cast<listener_actor*>(r.user)->maybe_quit();
                             };
                             io_->submit(*cancel_);
                             return stopped_;
                           }};
  return caf::behavior{io_completion_handler(*io_).or_else(own)};
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
        auto c = self->system().spawn<connection_actor>(self->next_shard_++ % self->shards_, fd, self->services_);
        self->monitor(c);
        self->connections_.emplace(c.address(), c);
      }
    }
    self->start_accept();
  };
  io_->submit(*accept_);
}

}  // namespace rill::actors
