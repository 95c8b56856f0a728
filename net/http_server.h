#pragma once
// http_server: the monitoring listener (/metrics, /healthz, /api/..., later /ui): HTTP/1.1 on a thread of its own,
// not a shard, so a saturated or stuck shard can still be watched. Boost.Beast parses and writes the messages.
//
// Contract: requests are served one at a time, one per connection (`Connection: close`): scrapes and dashboards,
// not traffic. A client gets 5 s to send its whole request and 5 s to read the whole reply (then it is dropped), so
// no client holds the listener longer than 10 s; requests are limited to 64 KiB. A handler that throws gets a 500.
// GET, HEAD and POST reach the handler (405 otherwise); a request body is read (within the limit) and ignored. The
// handler runs on the server's thread: it may only read state that is safe to read from any thread. stop() (or the
// destructor) ends the thread within ~200 ms.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/expected.h"
#include "config/address.h"

namespace rill::net {

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

  // Binds `address` (port 0: the kernel picks one) and starts serving. Errors name the address.
  static expected<std::unique_ptr<http_server>> start(const config::address& address, handler h);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  [[nodiscard]] const config::address& address() const noexcept { return bound_; }
  void stop();

 private:
  http_server(int fd, config::address bound, handler h);
  void serve();
  void serve_one(int fd);

  int fd_;
  config::address bound_;
  handler handler_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace rill::net
