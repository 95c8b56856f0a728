// http_server: an Asio context on one thread accepts and serves every connection asynchronously; Beast parses and
// writes the messages (see http_server.h).
#include "net/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "base/assert.h"
#include "net/listen.h"

namespace rill::net {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

constexpr std::uint64_t request_bytes_max = 64 * 1024;
constexpr std::chrono::seconds request_deadline{5};
constexpr std::chrono::seconds reply_deadline{5};
constexpr std::chrono::milliseconds accept_backoff{100};

// The reply to a complete request (or to one that did not parse: `ec`).
http::response<http::string_body> answer(const http_server::handler& h, const http::request<http::string_body>& req,
                                         beast::error_code ec) {
  http::response<http::string_body> res;
  std::optional<std::size_t> head_bytes;
  res.version(11);
  res.set(http::field::server, "rilld");
  res.set(http::field::connection, "close");
  if (ec) {
    res.result(http::status::bad_request);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = fmt::format("bad request: {}\n", ec.message());
  } else if (req.method() != http::verb::get && req.method() != http::verb::head && req.method() != http::verb::post) {
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET, HEAD, POST");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "only GET, HEAD and POST\n";
  } else {
    http_response out;
    try {
      out = h(req.method() == http::verb::post ? "POST" : "GET", std::string(req.target()));
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
  res.prepare_payload();
  if (head_bytes && res.body().empty()) {
    res.content_length(*head_bytes);  // HEAD: the length GET would send, and no body
  }
  return res;
}

}  // namespace

// Everything Asio: the context the server's thread runs, the acceptor over the listening socket, and the sessions in
// progress (each owned by its pending operation's handler; `sessions` only counts and reaches them at stop).
struct http_server::loop {
  struct session : std::enable_shared_from_this<session> {
    session(loop& l, asio::ip::tcp::socket s) : owner(l), stream(std::move(s)) {
      parser.header_limit(request_bytes_max);
      parser.body_limit(request_bytes_max);
    }

    void start() {
      stream.expires_after(request_deadline);
      http::async_read(stream, buffer, parser,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
      if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
          ec == asio::error::operation_aborted) {
        return finish();  // nothing (complete) to answer
      }
      res = answer(owner.handler_fn, parser.get(), ec);
      stream.expires_after(reply_deadline);
      http::async_write(stream, res, [self = shared_from_this()](beast::error_code, std::size_t) { self->finish(); });
    }

    void finish() {
      beast::error_code ignored;
      stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      stream.close();
      owner.sessions.erase(this);
    }

    loop& owner;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    http::response<http::string_body> res;
  };

  explicit loop(int fd) : acceptor(io), backoff(io) {
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    acceptor.assign(bound.ss_family == AF_INET6 ? asio::ip::tcp::v6() : asio::ip::tcp::v4(), fd);
  }

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, asio::ip::tcp::socket s) {
      if (ec == asio::error::operation_aborted) {
        return;  // stopping
      }
      if (ec) {
        // Out of descriptors, say: wait a little rather than spin.
        backoff.expires_after(accept_backoff);
        backoff.async_wait([this](beast::error_code e) {
          if (!e) {
            accept();
          }
        });
        return;
      }
      if (sessions.size() >= http_connections_max) {
        beast::error_code ignored;
        s.close(ignored);  // over the limit: refused at once
      } else {
        auto c = std::make_shared<session>(*this, std::move(s));
        sessions.insert(c.get());
        c->start();
      }
      accept();
    });
  }

  // On the server's thread: no more accepts, every session's operations cancelled (their handlers then finish).
  void shut() {
    beast::error_code ignored;
    acceptor.close(ignored);
    backoff.cancel();
    for (auto* s : std::set<session*>(sessions)) {
      s->stream.socket().close(ignored);
    }
  }

  asio::io_context io;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer backoff;
  handler handler_fn;
  std::set<session*> sessions;
};

expected<std::unique_ptr<http_server>> http_server::bind(const config::address& want,
                                                         const listen_retry_callback& on_retry) {
  RILL_TRY(listening, listen_tcp(want, "network.http_address", 64, on_retry));
  auto [fd, actual] = listening;
  return std::unique_ptr<http_server>(new http_server(fd, actual));
}

expected<std::unique_ptr<http_server>> http_server::start(const config::address& want, handler h) {
  RILL_TRY(s, bind(want));
  s->serve(std::move(h));
  return s;
}

http_server::http_server(int fd, config::address bound) : bound_(std::move(bound)), loop_(std::make_unique<loop>(fd)) {}

http_server::~http_server() {
  stop();
}

void http_server::serve(handler h) {
  RILL_ASSERT(!thread_.joinable(), "serve() twice");
  RILL_ASSERT(h != nullptr);
  loop_->handler_fn = std::move(h);
  loop_->accept();
  thread_ = std::thread([l = loop_.get()] { l->io.run(); });
}

void http_server::stop() {
  if (!thread_.joinable()) {
    return;  // never served: the destructor of loop_ closes the socket
  }
  asio::post(loop_->io, [l = loop_.get()] { l->shut(); });
  thread_.join();  // run() returns once the cancelled operations have finished
  RILL_ASSERT(loop_->sessions.empty());
}

}  // namespace rill::net
