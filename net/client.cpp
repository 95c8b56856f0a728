// Client library: blocking sockets on the caller's thread (a client is not a shard: blocking is fine here).
#include "net/client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string_view>
#include <thread>

#include <fmt/core.h>

#include "base/endian.h"
#include "config/address.h"
#include "net/errc.h"
#include "net/murmur2.h"
#include "storage/producer_sequence.h"
#include "storage/record_batch_builder.h"

namespace rill::net {
namespace {

rill::unexpected net_error(errc e, std::string detail) {
  return rill::unexpected(make_error_code(e), std::move(detail));
}

// Waits until fd is readable/writable or the deadline passes.
bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) {
      return true;
    }
    if (rc < 0 && errno != EINTR) {
      return false;
    }
  }
}

template <class M>
expected<M> parse_reply(const reply& r) {
  M m;
  if (!m.ParseFromString(r.header)) {
    return net_error(errc::bad_header, "the reply header does not parse");
  }
  return m;
}

}  // namespace

proto::Identifier by_name(const std::string& name) {
  proto::Identifier i;
  i.set_name(name);
  return i;
}

proto::Identifier by_id(std::uint32_t id) {
  proto::Identifier i;
  i.set_id(id);
  return i;
}

expected<std::unique_ptr<client>> client::connect(client_options options) {
  std::unique_ptr<client> c(new client(std::move(options)));
  RILL_TRY_VOID(c->reconnect());
  return c;
}

client::~client() {
  disconnect();
  for (const auto& [server, fd] : held_) {
    ::close(fd);
  }
}

expected<void> client::switch_to(const std::string& server) {
  if (fd_ >= 0 && server == current_server_) {
    return {};
  }
  if (fd_ >= 0) {
    held_.emplace_back(current_server_, fd_);
    fd_ = -1;
  }
  auto it = std::find_if(held_.begin(), held_.end(), [&](const auto& h) { return h.first == server; });
  if (it != held_.end()) {
    const int fd = it->second;
    held_.erase(it);
    // An idle connection has nothing to read: readable (a close, a reset) or in error, the server went away
    // meanwhile (a restart): a fresh connection instead of a request lost on it.
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) {
      fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  while (held_.size() > connections_max - 1) {  // with the current one: at most connections_max
    ::close(held_.front().second);
    held_.erase(held_.begin());
  }
  if (fd_ < 0) {
    RILL_TRY_VOID(connect_one(server));
  }
  current_server_ = server;
  return {};
}

void client::disconnect() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

expected<void> client::reconnect() {
  disconnect();
  // A server list "a:1,b:2": the first that accepts, starting from the one that answered last, so that a client
  // that lost its server tries the others before it comes back to it.
  std::vector<std::string> servers;
  for (std::size_t at = 0; at <= options_.server.size();) {
    const auto comma = std::min(options_.server.find(',', at), options_.server.size());
    if (comma > at) {
      servers.push_back(options_.server.substr(at, comma - at));
    }
    at = comma + 1;
  }
  if (servers.empty()) {
    return net_error(errc::connect_failed, "no server given");
  }
  std::string failures;
  bool refused_any = false;
  // In order from server_index_, the one to avoid moved last.
  std::vector<std::size_t> order(servers.size());
  for (std::size_t i = 0; i < servers.size(); ++i) {
    order[i] = (server_index_ + i) % servers.size();
  }
  std::stable_partition(order.begin(), order.end(), [&](std::size_t k) { return servers[k] != avoid_; });
  avoid_.clear();
  for (const std::size_t k : order) {
    auto r = switch_to(servers[k]);  // (a connection still held for it is taken again)
    if (r) {
      server_index_ = k;
      return {};
    }
    refused_any = refused_any || r.error().detail().find(std::strerror(ECONNREFUSED)) != std::string::npos;
    failures += (failures.empty() ? "" : "; ") + r.error().detail();
  }
  return net_error(
      errc::connect_failed,
      fmt::format("{}{}", failures, refused_any ? " (is rilld running? --server takes its network.tcp_address)" : ""));
}

expected<void> client::connect_one(const std::string& server) {
  RILL_TRY(addr, config::parse_address(server));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(addr.host.c_str(), std::to_string(addr.port).c_str(), &hints, &res); rc != 0) {
    return net_error(errc::connect_failed, fmt::format("{}: {}", server, ::gai_strerror(rc)));
  }
  std::string last = "no address";
  const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
  for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      if (wait_fd(fd, POLLOUT, deadline)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
      ++connects_;
    } else {
      last = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) {
    return net_error(errc::connect_failed, fmt::format("{}: {}", server, last));
  }
  return {};
}

expected<reply> client::call_once(api a, std::span<const std::byte> head, std::span<const std::byte> batches,
                                  bool leave_if_silent, std::chrono::steady_clock::time_point call_deadline) {
  if (fd_ < 0) {
    RILL_TRY_VOID(reconnect());
  }
  const auto deadline = std::min(std::chrono::steady_clock::now() + options_.request_timeout, call_deadline);
  const std::size_t frame_bytes = head.size() + batches.size();
  std::size_t sent = 0;
  while (sent < frame_bytes) {
    // The head and the batches in one vectored send, from wherever the last one stopped.
    ::iovec iov[2];
    int count = 0;
    if (sent < head.size()) {
      iov[count++] = ::iovec{const_cast<std::byte*>(head.data() + sent), head.size() - sent};
    }
    const std::size_t batches_sent = sent > head.size() ? sent - head.size() : 0;
    if (batches_sent < batches.size()) {
      iov[count++] = ::iovec{const_cast<std::byte*>(batches.data() + batches_sent), batches.size() - batches_sent};
    }
    ::msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (bool dead = false; !wait_server(POLLOUT, deadline, leave_if_silent, &dead)) {
        disconnect();
        return net_error(errc::timed_out, fmt::format("sending {} to {}{}", to_string(a), current_server_,
                                                      dead ? ": it did not answer a liveness ping" : ""));
      }
    } else {
      const std::string why = std::strerror(errno);
      disconnect();
      return net_error(errc::connection_closed,
                       fmt::format("sending {} to {}: {}", to_string(a), current_server_, why));
    }
  }
  const std::uint32_t want_correlation = load_be<std::uint32_t>(head.data() + 4);
  if (in_.size() > in_kept_bytes_max) {
    in_.resize(in_kept_bytes_max);
    in_.shrink_to_fit();
  }
  std::size_t have = 0;  // bytes of in_ received in this call
  for (;;) {
    const std::span<const std::byte> in(in_.data(), have);
    auto size = next_frame_size(in, reply_prefix_bytes, options_.max_frame_bytes);
    if (!size) {
      disconnect();
      static constexpr std::string_view http = "HTTP/";
      if (in.size() >= http.size() && std::memcmp(in.data(), http.data(), http.size()) == 0) {
        // "HTTP" read as a length is a frame of about 1.2 GB: say what happened instead.
        return net_error(errc::malformed_frame,
                         fmt::format("{} answered in HTTP: that is rilld's HTTP listener (network.http_address); "
                                     "--server takes its client listener (network.tcp_address)",
                                     current_server_));
      }
      return unexpected(std::move(size).error());
    }
    if (size->has_value()) {
      auto r = parse_reply(in.first(**size));
      if (!r) {
        disconnect();
        return unexpected(std::move(r).error());
      }
      if (r->correlation_id != want_correlation) {
        disconnect();
        return net_error(errc::malformed_frame, fmt::format("a reply for request {} while waiting for {}",
                                                            r->correlation_id, want_correlation));
      }
      reply out;
      out.st = r->st;
      out.header.assign(reinterpret_cast<const char*>(r->header.data()), r->header.size());
      out.batches.assign(r->batches.begin(), r->batches.end());
      return out;
    }
    // Room for the rest of the frame when its size is known (at least 64 KiB more): received straight into in_.
    if (in_.size() < have + 64 * 1024) {
      in_.resize(std::max(have + 64 * 1024, 2 * in_.size()));
    }
    const ssize_t n = ::recv(fd_, in_.data() + have, in_.size() - have, 0);
    if (n > 0) {
      have += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (bool dead = false; !wait_server(POLLIN, deadline, leave_if_silent, &dead)) {
        disconnect();
        return net_error(errc::timed_out,
                         fmt::format("waiting for the reply to {} from {}{}", to_string(a), current_server_,
                                     dead ? ": it did not answer a liveness ping" : ""));
      }
      continue;
    }
    disconnect();
    return net_error(errc::connection_closed,
                     fmt::format("{} closed the connection during {}", current_server_, to_string(a)));
  }
}

bool client::wait_server(short events, std::chrono::steady_clock::time_point deadline, bool leave_if_silent,
                         bool* dead) {
  const auto every = options_.liveness_probe_after;
  const bool probe = leave_if_silent && every.count() > 0 && options_.liveness_probe_timeout.count() > 0;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const auto until = probe ? std::min(deadline, now + every) : deadline;
    if (wait_fd(fd_, events, until)) {
      return true;
    }
    if (until >= deadline) {
      return false;
    }
    if (!server_answers()) {
      *dead = true;
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // The probe took the rest of the time: what arrived meanwhile still counts.
      pollfd p{fd_, events, 0};
      return ::poll(&p, 1, 0) > 0;
    }
  }
}

bool client::server_answers() {
  ++liveness_probes_;
  client_options o;
  o.server = current_server_;
  o.connect_timeout = options_.liveness_probe_timeout;
  o.request_timeout = options_.liveness_probe_timeout;
  o.liveness_probe_after = std::chrono::milliseconds(0);
  o.retries = 0;
  o.max_frame_bytes = options_.max_frame_bytes;
  auto probe = client::connect(o);
  // Any reply says the server runs, an error status too (overloaded, shutting down), and so does a connection it
  // closes (at network.connections_max): a paused process can do none of these. Only silence, or no connection,
  // says it is not there.
  const auto silent = [](const rill::error& e) {
    return e.code() == make_error_code(errc::timed_out) || e.code() == make_error_code(errc::connect_failed);
  };
  bool alive = false;
  if (!probe) {
    alive = !silent(probe.error());
  } else if (auto r = (*probe)->ping(); r || !silent(r.error())) {
    alive = true;
  }
  if (!alive) {
    ++liveness_probes_failed_;
  }
  return alive;
}

namespace {
// The APIs a cluster serves on the topic's node (the others any node answers).
bool served_by_topic_node(api a) {
  switch (a) {
    case api::produce:
    case api::poll:
    case api::offset_get:
    case api::offset_store:
    case api::group_join:
    case api::group_leave:
    case api::group_heartbeat:
    case api::group_assignment:
    case api::group_commit:
    case api::group_offsets:
      return true;
    default:
      return false;
  }
}

// The topic a request names (its stream and topic fields as encoded), as a key of routes_; empty when it names none.
std::string topic_route(std::span<const std::byte> frame) {
  const auto header_length = load_be<std::uint32_t>(frame.data() + request_prefix_bytes - 4);
  const auto scan = scan_header(frame.subspan(request_prefix_bytes, header_length));
  if (scan.stream.empty() || scan.topic.empty()) {
    return {};
  }
  const auto text = [](std::span<const std::byte> b) {
    return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
  };
  return fmt::format("{}:{}{}", scan.stream.size(), text(scan.stream), text(scan.topic));
}
// The partition a request names, when it names one (a replicated topic's partitions may each be led by another
// node: routes_ keeps one node per partition then).
std::optional<std::uint32_t> partition_of(api a, const google::protobuf::MessageLite& header) {
  switch (a) {
    case api::produce:
      if (const auto* p = dynamic_cast<const proto::ProduceRequest*>(&header);
          p != nullptr && p->partitioning().kind_case() == proto::Partitioning::kPartitionId) {
        return p->partitioning().partition_id();
      }
      return std::nullopt;
    case api::poll:
      if (const auto* p = dynamic_cast<const proto::PollRequest*>(&header); p != nullptr) {
        return p->partition_id();
      }
      return std::nullopt;  // (a from_replica poll is answered by the replica it reached: no redirect to learn)
    case api::offset_store:
      if (const auto* p = dynamic_cast<const proto::OffsetStoreRequest*>(&header); p != nullptr) {
        return p->partition_id();
      }
      return std::nullopt;
    case api::offset_get:
      if (const auto* p = dynamic_cast<const proto::OffsetGetRequest*>(&header); p != nullptr) {
        return p->partition_id();
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}
}  // namespace

expected<reply> client::call(api a, const google::protobuf::MessageLite& header, std::span<const std::byte> batches) {
  auto backoff = options_.retry_backoff;
  int redirects = 0;
  std::string route;
  const auto call_deadline = std::chrono::steady_clock::now() + options_.call_timeout;
  for (int attempt = 0;; ++attempt) {
    head_.clear();
    append_request_head(head_, next_correlation_++, a, header, batches, seen_);
    if (attempt == 0 && served_by_topic_node(a)) {
      route = topic_route(head_);
      if (const auto p = partition_of(a, header); p && !route.empty()) {
        route += fmt::format("#{}", *p);
      }
    }
    // A topic whose node a redirect named goes there directly (a hint: a not_primary corrects it).
    if (auto known = route.empty() ? routes_.end() : routes_.find(route); known != routes_.end()) {
      if (!switch_to(known->second)) {
        routes_.erase(known);  // that node is away: start again from the servers given
      }
    }
    // A silent server is left early only for somewhere else to go (and a try to go there with).
    const bool elsewhere = options_.server.find(',') != std::string::npos || current_server_ != options_.server;
    auto r = call_once(a, head_, batches, elsewhere && attempt < options_.retries, call_deadline);
    if (r) {
      observe(metadata_position_of(std::as_bytes(std::span(r->header))));
    }
    bool retriable = false;
    rill::error err;
    if (!r) {
      const auto code = r.error().code();
      retriable = code == make_error_code(errc::connection_closed) || code == make_error_code(errc::connect_failed) ||
                  code == make_error_code(errc::timed_out);
      err = std::move(r).error();
      if (retriable && code != make_error_code(errc::connect_failed)) {
        avoid_ = current_server_;
      }
      if (!route.empty()) {
        routes_.erase(route);
      }
    } else if (r->st != status::ok) {
      proto::ErrorReply e;
      e.ParseFromString(r->header);
      err = rill::error(make_error_code(r->st), e.message());
      retriable = is_retriable(r->st);
      // Another node of the cluster serves it: go there at once (a few hops at most: the nodes agree on where a
      // topic lives, so one is enough unless the metadata changed meanwhile).
      if (r->st == status::not_primary && !e.primary_address().empty() && redirects < redirects_max) {
        ++redirects;
        ++redirects_;
        if (!route.empty()) {
          if (routes_.size() >= topic_routes_max) {
            routes_.clear();  // hints only: they are learnt again
          }
          routes_[route] = e.primary_address();
        }
        if (switch_to(e.primary_address())) {
          --attempt;  // a redirect is not a failed attempt
          continue;
        }
      }
    } else {
      return r;
    }
    if (!retriable || attempt >= options_.retries) {
      return unexpected(std::move(err));
    }
    if (std::chrono::steady_clock::now() + backoff >= call_deadline) {
      return unexpected(rill::error(err.code(), fmt::format("{} (call_timeout {} ms spent over {} tries)", err.detail(),
                                                            options_.call_timeout.count(), attempt + 1)));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::milliseconds(2000));
    // Each try may follow redirects again: those of a try that failed may have named a node that has died since
    // (a failover: its peers named it until they noticed), and the next try's answers name its successor.
    redirects = 0;
  }
}

void client::observe(metadata_position at) noexcept {
  if (at.cluster_id == 0 && at.op == 0) {
    return;  // a reply that names no position (a server before read-your-writes)
  }
  if (at.cluster_id != seen_.cluster_id) {
    seen_ = at;  // another cluster (or the first reply): its ops are not comparable with the ones seen before
    return;
  }
  seen_.op = std::max(seen_.op, at.op);
}

expected<proto::PingReply> client::ping() {
  RILL_TRY(r, call(api::ping, proto::PingRequest{}));
  return parse_reply<proto::PingReply>(r);
}

expected<proto::ClusterStatusReply> client::cluster_status() {
  RILL_TRY(r, call(api::cluster_status, proto::ClusterStatusRequest{}));
  return parse_reply<proto::ClusterStatusReply>(r);
}

expected<proto::StatsReply> client::stats() {
  RILL_TRY(r, call(api::stats, proto::StatsRequest{}));
  return parse_reply<proto::StatsReply>(r);
}

expected<proto::StreamInfo> client::create_stream(const std::string& name) {
  proto::StreamCreateRequest req;
  req.set_name(name);
  RILL_TRY(r, call(api::stream_create, req));
  RILL_TRY(out, parse_reply<proto::StreamCreateReply>(r));
  return out.stream();
}

expected<std::vector<proto::StreamInfo>> client::list_streams() {
  RILL_TRY(r, call(api::stream_list, proto::StreamListRequest{}));
  RILL_TRY(out, parse_reply<proto::StreamListReply>(r));
  return std::vector<proto::StreamInfo>(out.streams().begin(), out.streams().end());
}

expected<proto::StreamGetReply> client::get_stream(const proto::Identifier& stream) {
  proto::StreamGetRequest req;
  *req.mutable_stream() = stream;
  RILL_TRY(r, call(api::stream_get, req));
  return parse_reply<proto::StreamGetReply>(r);
}

expected<void> client::delete_stream(const proto::Identifier& stream) {
  proto::StreamDeleteRequest req;
  *req.mutable_stream() = stream;
  RILL_TRY_VOID(call(api::stream_delete, req));
  return {};
}

expected<proto::TopicInfo> client::create_topic(const proto::Identifier& stream, const std::string& name,
                                                const proto::TopicConfig& config) {
  proto::TopicCreateRequest req;
  *req.mutable_stream() = stream;
  req.set_name(name);
  *req.mutable_config() = config;
  RILL_TRY(r, call(api::topic_create, req));
  RILL_TRY(out, parse_reply<proto::TopicCreateReply>(r));
  return out.topic();
}

expected<proto::TopicInfo> client::get_topic(const proto::Identifier& stream, const proto::Identifier& topic) {
  proto::TopicGetRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  RILL_TRY(r, call(api::topic_get, req));
  RILL_TRY(out, parse_reply<proto::TopicGetReply>(r));
  return out.topic();
}

expected<std::vector<proto::TopicInfo>> client::list_topics(const proto::Identifier& stream) {
  proto::TopicListRequest req;
  *req.mutable_stream() = stream;
  RILL_TRY(r, call(api::topic_list, req));
  RILL_TRY(out, parse_reply<proto::TopicListReply>(r));
  return std::vector<proto::TopicInfo>(out.topics().begin(), out.topics().end());
}

expected<void> client::delete_topic(const proto::Identifier& stream, const proto::Identifier& topic) {
  proto::TopicDeleteRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  RILL_TRY_VOID(call(api::topic_delete, req));
  return {};
}

expected<proto::StreamInfo> client::update_stream(const proto::Identifier& stream, const std::string& new_name) {
  proto::StreamUpdateRequest req;
  *req.mutable_stream() = stream;
  req.set_name(new_name);
  RILL_TRY(r, call(api::stream_update, req));
  RILL_TRY(out, parse_reply<proto::StreamUpdateReply>(r));
  return out.stream();
}

expected<proto::TopicInfo> client::update_topic(const proto::Identifier& stream, const proto::Identifier& topic,
                                                const proto::TopicConfig& config, std::optional<std::string> new_name) {
  proto::TopicUpdateRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  *req.mutable_config() = config;
  if (new_name) {
    req.set_name(*new_name);
  }
  RILL_TRY(r, call(api::topic_update, req));
  RILL_TRY(out, parse_reply<proto::TopicUpdateReply>(r));
  return out.topic();
}

expected<proto::TopicInfo> client::add_partitions(const proto::Identifier& stream, const proto::Identifier& topic,
                                                  std::uint32_t count) {
  proto::PartitionsAddRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  req.set_count(count);
  RILL_TRY(r, call(api::partitions_add, req));
  RILL_TRY(out, parse_reply<proto::PartitionsAddReply>(r));
  return out.topic();
}

expected<proto::TopicInfo> client::delete_partitions(const proto::Identifier& stream, const proto::Identifier& topic,
                                                     std::uint32_t count) {
  proto::PartitionsDeleteRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  req.set_count(count);
  RILL_TRY(r, call(api::partitions_delete, req));
  RILL_TRY(out, parse_reply<proto::PartitionsDeleteReply>(r));
  return out.topic();
}

expected<proto::ProduceReply> client::produce(const proto::Identifier& stream, const proto::Identifier& topic,
                                              std::optional<std::uint32_t> partition,
                                              std::span<const std::byte> batches) {
  proto::ProduceRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  if (partition) {
    req.mutable_partitioning()->set_partition_id(*partition);
  } else {
    req.mutable_partitioning()->set_balanced(true);
  }
  RILL_TRY(r, call(api::produce, req, batches));
  return parse_reply<proto::ProduceReply>(r);
}

expected<client::poll_result> client::poll(const proto::PollRequest& request) {
  RILL_TRY(r, call(api::poll, request));
  RILL_TRY(h, parse_reply<proto::PollReply>(r));
  return poll_result{std::move(h), std::move(r.batches)};
}

expected<std::optional<std::uint64_t>> client::get_offset(const proto::Identifier& stream,
                                                          const proto::Identifier& topic, std::uint32_t partition,
                                                          const std::string& consumer) {
  proto::OffsetGetRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  req.set_partition_id(partition);
  req.mutable_consumer()->set_name(consumer);
  RILL_TRY(r, call(api::offset_get, req));
  RILL_TRY(out, parse_reply<proto::OffsetGetReply>(r));
  return out.has_offset() ? std::optional<std::uint64_t>(out.offset()) : std::nullopt;
}

expected<std::optional<std::uint64_t>> client::store_offset(const proto::Identifier& stream,
                                                            const proto::Identifier& topic, std::uint32_t partition,
                                                            const std::string& consumer, std::uint64_t offset) {
  proto::OffsetStoreRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  req.set_partition_id(partition);
  req.mutable_consumer()->set_name(consumer);
  req.set_offset(offset);
  RILL_TRY(r, call(api::offset_store, req));
  RILL_TRY(out, parse_reply<proto::OffsetStoreReply>(r));
  return out.has_previous() ? std::optional<std::uint64_t>(out.previous()) : std::nullopt;
}

// --- producer -------------------------------------------------------------------------------------------------

namespace {
// Bytes a message adds to a batch, at most: its key, value and headers, and a record's varints (length, attributes,
// timestamp and offset deltas, key and value lengths, header count: 36 at most) plus each header's two lengths.
std::uint64_t record_bytes_max(const message& m) {
  std::uint64_t n = 36 + (m.key ? m.key->size() : 0) + (m.value ? m.value->size() : 0);
  for (const auto& [k, v] : m.headers) {
    n += 10 + k.size() + (v ? v->size() : 0);
  }
  return n;
}
constexpr std::uint64_t batch_header_bytes = 61;  // a record batch's header (record_batch_format.h)
}  // namespace

producer::producer(client& c, proto::Identifier s, proto::Identifier t, producer_options o, std::uint32_t partitions,
                   std::uint64_t topic_batch_bytes_max)
    : client_(c),
      stream_(std::move(s)),
      topic_(std::move(t)),
      options_(o),
      partitions_(partitions),
      batch_bytes_max_(std::min(o.max_batch_bytes, topic_batch_bytes_max)),
      builder_(o.zstd ? storage::compression::zstd : storage::compression::none) {
  start_producer_id();
}

expected<std::unique_ptr<producer>> producer::create(client& c, proto::Identifier stream, proto::Identifier topic,
                                                     producer_options options) {
  RILL_TRY(info, c.get_topic(stream, topic));
  const std::uint64_t topic_max =
      info.config().max_message_bytes() > 0 ? info.config().max_message_bytes() : UINT64_MAX;
  return std::unique_ptr<producer>(
      new producer(c, std::move(stream), std::move(topic), options, info.config().partitions(), topic_max));
}

expected<std::vector<producer::ack>> producer::send(const message& m) {
  std::uint32_t p = 0;
  if (m.partition) {
    p = *m.partition;
  } else if (m.key) {
    p = partition_for_key(storage::as_bytes(*m.key), partitions_);
  } else {
    p = next_balanced_++ % partitions_;
  }
  std::vector<ack> acks;
  const std::uint64_t adds = record_bytes_max(m);
  if (auto it = pending_.find(p);
      it != pending_.end() && !it->second.messages.empty() && it->second.bytes + adds > batch_bytes_max_) {
    RILL_TRY(sent, send_partition(p));  // this message would take the batch past the limit: the batch goes first
    acks.insert(acks.end(), sent.begin(), sent.end());
  }
  auto& q = pending_[p];
  if (q.messages.empty()) {
    q.first = std::chrono::steady_clock::now();
    q.bytes = batch_header_bytes;
  }
  q.messages.push_back(m);
  q.messages.back().partition = p;
  q.bytes += adds;
  for (auto& [partition, pend] : pending_) {
    const bool full = pend.messages.size() >= options_.max_batch_records || pend.bytes >= batch_bytes_max_;
    const bool old = !pend.messages.empty() && std::chrono::steady_clock::now() - pend.first >= options_.linger;
    if (full || (old && partition == p)) {
      RILL_TRY(sent, send_partition(partition));
      acks.insert(acks.end(), sent.begin(), sent.end());
    }
  }
  return acks;
}

expected<std::vector<producer::ack>> producer::flush() {
  std::vector<ack> acks;
  for (auto& [partition, pend] : pending_) {
    if (!pend.messages.empty()) {
      RILL_TRY(sent, send_partition(partition));
      acks.insert(acks.end(), sent.begin(), sent.end());
    }
  }
  return acks;
}

void producer::start_producer_id() {
  std::random_device rd;
  producer_id_ = static_cast<std::int64_t>((std::uint64_t{rd()} << 31) ^ rd()) & 0x3fffffffffffffffLL;
  sequences_.clear();  // a new producer id starts at sequence 0 on every partition
}

expected<std::vector<producer::ack>> producer::send_partition(std::uint32_t partition) {
  auto& pend = pending_[partition];
  const auto timestamp = timestamp_ms_t(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  for (int restarts = 0;; ++restarts) {
    storage::batch_builder& b = builder_;
    b.reset();
    const std::int32_t sequence = sequences_[partition];
    if (options_.idempotent) {
      b.producer(producer_id_, 0, sequence);
    }
    b.base_timestamp(timestamp);
    for (const auto& m : pend.messages) {
      std::vector<storage::header_kv> headers;
      for (const auto& [k, v] : m.headers) {
        headers.push_back(
            storage::header_kv{storage::as_bytes(k), v ? std::optional(storage::as_bytes(*v)) : std::nullopt});
      }
      b.add(m.key ? std::optional(storage::as_bytes(*m.key)) : std::nullopt,
            m.value ? std::optional(storage::as_bytes(*m.value)) : std::nullopt, headers);
    }
    RILL_TRY_VOID(b.build_into(batch_));
    // The client retries retriable failures itself; the sequence makes a retry of a batch that did land a no-op.
    auto r = client_.produce(stream_, topic_, partition, batch_);
    if (!r && options_.idempotent && restarts < producer_id_restarts_max &&
        r.error().code() == make_error_code(status::unknown_producer_id)) {
      // The partition no longer knows this producer (its batches are gone: a restart with them in older segments,
      // or retention) and nothing of this batch was written. As Kafka's producer does: a new producer id, which
      // starts at sequence 0 everywhere, and the same batch again.
      start_producer_id();
      continue;
    }
    RILL_TRY(reply, std::move(r));
    const std::uint64_t base = reply.base_offsets().empty() ? 0 : reply.base_offsets(0);
    std::vector<ack> acks;
    for (std::size_t i = 0; i < pend.messages.size(); ++i) {
      acks.push_back(ack{partition, base + i});
    }
    // Wraps from INT32_MAX to 0, as the partition expects (storage/producer_sequence.h).
    sequences_[partition] = storage::sequence_plus(sequence, static_cast<std::int64_t>(pend.messages.size()));
    pend = pending{};
    return acks;
  }
}

expected<void> for_each_record(std::span<const std::byte> batches, std::vector<std::byte>& scratch,
                               const record_visitor& on) {
  std::size_t pos = 0;
  storage::batch_limits limits;
  limits.batch_bytes_max = 1u << 30;
  while (pos < batches.size()) {
    RILL_TRY(v, storage::batch_view::validate(batches.subspan(pos), limits));
    RILL_TRY(region, storage::records_of(v, limits.uncompressed_bytes_max, scratch));
    storage::record_reader rr(region);
    for (;;) {
      RILL_TRY(next, rr.next());
      if (!next) {
        break;
      }
      RILL_TRY_VOID(on(v, *next));
    }
    pos += v.size();
  }
  return {};
}

expected<record> copy_record(std::uint32_t partition, const storage::batch_view& v, const storage::record_view& r) {
  auto str = [](const std::optional<std::span<const std::byte>>& b) -> std::optional<std::string> {
    if (!b) {
      return std::nullopt;
    }
    return std::string(reinterpret_cast<const char*>(b->data()), b->size());
  };
  record rec;
  rec.partition = partition;
  rec.offset = v.base_offset().value() + r.offset_delta;
  rec.timestamp_ms = v.log_append_time() ? v.max_timestamp().value() : v.base_timestamp().value() + r.timestamp_delta;
  rec.key = str(r.key);
  rec.value = str(r.value);
  storage::header_reader hr(r.headers, r.header_count);
  for (;;) {
    RILL_TRY(h, hr.next());
    if (!h) {
      break;
    }
    rec.headers.emplace_back(std::string(reinterpret_cast<const char*>(h->key.data()), h->key.size()), str(h->value));
  }
  return rec;
}

expected<std::vector<record>> decode_records(std::uint32_t partition, std::span<const std::byte> batches) {
  std::vector<record> out;
  std::vector<std::byte> scratch;
  RILL_TRY_VOID(for_each_record(batches, scratch,
                                [&](const storage::batch_view& v, const storage::record_view& next) -> expected<void> {
                                  RILL_TRY(rec, copy_record(partition, v, next));
                                  out.push_back(std::move(rec));
                                  return {};
                                }));
  return out;
}

consumer::consumer(client& c, proto::Identifier stream, proto::Identifier topic, std::uint32_t partition,
                   consumer_options options)
    : client_(c),
      stream_(std::move(stream)),
      topic_(std::move(topic)),
      partition_(partition),
      options_(std::move(options)) {}

expected<std::vector<record>> consumer::next() {
  proto::PollRequest req;
  *req.mutable_stream() = stream_;
  *req.mutable_topic() = topic_;
  req.set_partition_id(partition_);
  if (position_) {
    req.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
    req.mutable_strategy()->set_value(*position_);
  } else {
    req.mutable_strategy()->set_kind(options_.start);
    req.mutable_strategy()->set_value(options_.start_value);
  }
  if (options_.name) {
    req.mutable_consumer()->set_name(*options_.name);
  }
  req.set_max_records(options_.max_records);
  req.set_max_bytes(options_.max_bytes);
  req.set_max_wait_ms(static_cast<std::uint32_t>(options_.max_wait.count()));
  req.set_from_replica(options_.from_replica);
  RILL_TRY(r, client_.poll(req));
  RILL_TRY(all, decode_records(partition_, r.batches));
  // Records before the position the poll resolved to (the rest of the first batch) were read before.
  std::vector<record> out;
  for (auto& rec : all) {
    if (rec.offset >= static_cast<std::int64_t>(r.header.start_offset())) {
      out.push_back(std::move(rec));
    }
  }
  if (r.header.batches() > 0) {
    position_ = r.header.next_offset();
    if (options_.name) {
      RILL_TRY_VOID(client_.store_offset(stream_, topic_, partition_, *options_.name, *position_));
    }
  } else if (!position_) {
    position_ = r.header.start_offset();
  }
  return out;
}

}  // namespace rill::net
