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
#include <thread>

#include <fmt/core.h>

#include "net/listen.h"

namespace rill::net {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

constexpr std::uint64_t request_bytes_max = 64 * 1024;

}  // namespace

expected<std::unique_ptr<http_server>> http_server::start(const config::address& want, handler h) {
  RILL_TRY(listening, listen_tcp(want, "network.http_address", 64));
  auto [fd, actual] = listening;
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
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // out of descriptors, say: do not spin
      continue;
    }
    serve_one(c);
  }
}

void http_server::serve_one(int fd) {
  // Asynchronous operations on a private io_context, so that one deadline bounds the whole request and another
  // the whole reply (a client that sends nothing, trickles, or does not read is dropped when they pass).
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  stream.socket().assign(asio::ip::tcp::v6(), fd, ec);  // the protocol only matters for operations we do not use
  if (ec) {
    ::close(fd);
    return;
  }
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  parser.header_limit(request_bytes_max);
  parser.body_limit(request_bytes_max);
  stream.expires_after(std::chrono::seconds(5));
  http::async_read(stream, buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
  io.run();
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::connection_reset) {
    return;  // nothing (complete) to answer
  }
  http::response<http::string_body> res;
  std::optional<std::size_t> head_bytes;
  res.version(11);
  res.set(http::field::server, "rilld");
  res.set(http::field::connection, "close");
  if (ec) {
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
      http_response out;
      try {
        out = handler_(req.method() == http::verb::post ? "POST" : "GET", std::string(req.target()));
      } catch (const std::exception& e) {
        out = http_response{500, "text/plain; charset=utf-8", fmt::format("internal error: {}\n", e.what())};
      }
      res.result(static_cast<unsigned>(out.status));
      res.set(http::field::content_type, out.content_type);
      if (out.status == 405) {
        res.set(http::field::allow, "GET, HEAD");
      }
      head_bytes = out.body.size();
      if (req.method() != http::verb::head) {
        res.body() = std::move(out.body);
      }
    }
  }
  res.prepare_payload();
  if (head_bytes && res.body().empty()) {
    res.content_length(*head_bytes);  // HEAD: the length GET would send, and no body
  }
  stream.expires_after(std::chrono::seconds(5));
  http::async_write(stream, res, [&ec](beast::error_code e, std::size_t) { ec = e; });
  io.restart();
  io.run();
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  stream.close();
}

}  // namespace rill::net
