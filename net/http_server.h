#pragma once
// http_server: the monitoring listener (/metrics, /healthz, /api/..., later /ui): HTTP/1.1 on a thread of its own,
// not a shard, so a saturated or stuck shard can still be watched. Boost.Beast parses and writes the messages.
//
// Contract: one request per connection (`Connection: close`): scrapes, probes and dashboards, not traffic.
// Connections are served concurrently (asynchronous reads and writes on the server's one thread), up to
// http_connections_max at once; one over the limit is closed at once. Each client gets 5 s to send its whole request
// and 5 s to read the whole reply (then it is dropped), so idle, silent or slow clients never delay another's
// request (a liveness probe is answered while they wait). Requests are limited to 64 KiB. A handler that throws gets
// a 500. GET, HEAD and POST reach the handler (405 otherwise); a request body is read (within the limit) and ignored.
// The handler runs on the server's thread, one request at a time: it may only read state that is safe to read from
// any thread, and must not block. stop() (or the destructor) drops every connection and ends the thread.
//
// Two phases, so that a start-up can take its port before it does anything that could be observed: bind() listens
// (the kernel queues connections; none is accepted and nothing is served), serve() starts the thread that accepts
// and answers. A server that is bound and never served answers nothing; destroying it closes the socket, and the
// connections the kernel had queued are reset.
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/expected.h"
#include "config/address.h"
#include "net/listen.h"

namespace rill::net {

// Connections the monitoring listener serves at once (the rest are closed as they arrive).
inline constexpr std::size_t http_connections_max = 64;

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class http_server {
 public:
  // `method` is "GET" (HEAD is answered as GET without the body) or "POST"; `target` is the request's path and
  // query, e.g. "/metrics".
  using handler = std::function<http_response(const std::string& method, const std::string& target)>;

  // Binds `address` (port 0: the kernel picks one), retrying while it is in use (net/listen.h, each retry told to
  // `on_retry`), and serves nothing yet. Errors name network.http_address and the address.
  static expected<std::unique_ptr<http_server>> bind(const config::address& address,
                                                     const listen_retry_callback& on_retry = {});
  // bind(), then serve(h).
  static expected<std::unique_ptr<http_server>> start(const config::address& address, handler h);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  [[nodiscard]] const config::address& address() const noexcept { return bound_; }
  // Starts accepting and answering with `h` on the server's own thread. Called once, on a bound server.
  void serve(handler h);
  // Ends serving (a no-op on a server that never served) and closes the socket.
  void stop();

 private:
  struct loop;  // the Asio context, acceptor and sessions (http_server.cpp): Boost stays out of this header

  http_server(int fd, config::address bound);

  config::address bound_;
  std::unique_ptr<loop> loop_;
  std::thread thread_;
};

}  // namespace rill::net
