// http_server: accept loop with poll(2) (so stop() is noticed), Beast for the HTTP messages (see http_server.h).
#include "net/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/core.h>

#include "config/errc.h"

namespace rill::net {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

constexpr std::uint64_t request_bytes_max = 64 * 1024;

rill::unexpected fail(std::string message) {
  return rill::unexpected(config::make_error_code(config::errc::bad_value), std::move(message));
}
}  // namespace

expected<std::unique_ptr<http_server>> http_server::start(const config::address& want, handler h) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(want.port);
  if (const int rc = ::getaddrinfo(want.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return fail(fmt::format("network.http_address = {}: {}", want.to_string(), ::gai_strerror(rc)));
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      break;
    }
    err = errno;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return fail(fmt::format("network.http_address = {}: cannot listen: {}", want.to_string(), std::strerror(err)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  config::address actual = want;
  actual.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  std::unique_ptr<http_server> s(new http_server(fd, actual, std::move(h)));
  s->thread_ = std::thread([p = s.get()] { p->serve(); });
  return s;
}

http_server::http_server(int fd, config::address bound, handler h)
    : fd_(fd), bound_(std::move(bound)), handler_(std::move(h)) {}

http_server::~http_server() {
  stop();
}

void http_server::stop() {
  stopping_ = true;
  if (thread_.joinable()) {
    thread_.join();
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void http_server::serve() {
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) {
      continue;
    }
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      continue;
    }
    timeval t{5, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
    ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
    serve_one(c);
  }
}

void http_server::serve_one(int fd) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  beast::error_code ec;
  socket.assign(asio::ip::tcp::v6(), fd, ec);  // the protocol only matters for operations we do not use
  if (ec) {
    ::close(fd);
    return;
  }
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  parser.header_limit(request_bytes_max);
  parser.body_limit(request_bytes_max);
  http::read(socket, buffer, parser, ec);
  http::response<http::string_body> res;
  std::optional<std::size_t> head_bytes;
  res.version(11);
  res.set(http::field::server, "rilld");
  res.set(http::field::connection, "close");
  if (ec) {
    if (ec == http::error::end_of_stream) {
      socket.close(ec);
      return;
    }
    res.result(http::status::bad_request);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = fmt::format("bad request: {}\n", ec.message());
  } else {
    const auto& req = parser.get();
    if (req.method() != http::verb::get && req.method() != http::verb::head && req.method() != http::verb::post) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD, POST");
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "only GET, HEAD and POST\n";
    } else {
      auto out = handler_(req.method() == http::verb::post ? "POST" : "GET", std::string(req.target()));
      res.result(static_cast<unsigned>(out.status));
      res.set(http::field::content_type, out.content_type);
      head_bytes = out.body.size();
      if (req.method() == http::verb::get) {
        res.body() = std::move(out.body);
      }
    }
  }
  res.prepare_payload();
  if (head_bytes && res.body().empty()) {
    res.content_length(*head_bytes);  // HEAD: the length GET would send, and no body
  }
  http::write(socket, res, ec);
  socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

}  // namespace rill::net
