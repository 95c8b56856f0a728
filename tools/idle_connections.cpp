// idle_connections: the memory per idle connection of a running rilld (see the header).
#include "tools/idle_connections.h"

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "base/endian.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"

namespace rill::bench {
namespace {
using steady = std::chrono::steady_clock;

// A connected blocking TCP socket to "host:port", or -1.
int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return -1;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &res) != 0) {
    return -1;
  }
  int fd = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  return fd;
}

bool send_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) {
      return false;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) {
      return false;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// The body of GET /metrics, or nothing.
std::optional<std::string> metrics(const std::string& monitor) {
  const int fd = connect_to(monitor);
  if (fd < 0) {
    return std::nullopt;
  }
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: rill\r\nConnection: close\r\n\r\n";
  std::string raw;
  if (send_all(fd, req.data(), req.size())) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      raw.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const auto end = raw.find("\r\n\r\n");
  if (end == std::string::npos) {
    return std::nullopt;
  }
  return raw.substr(end + 4);
}

// The sum of every sample of metric `name` (any labels); nothing when it has none.
std::optional<double> metric_sum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  std::optional<double> sum;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size() ||
        (line[name.size()] != ' ' && line[name.size()] != '{')) {
      continue;
    }
    const auto space = line.rfind(' ');
    sum = sum.value_or(0) + std::stod(line.substr(space + 1));
  }
  return sum;
}

std::uint64_t rss_kib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoull(line.substr(6));
    }
  }
  return 0;
}

// The server's RSS once it stops moving (three equal samples 200 ms apart, at most 5 s).
std::uint64_t settled_rss_kib(int pid) {
  std::uint64_t last = rss_kib(pid);
  int same = 0;
  const auto deadline = steady::now() + std::chrono::seconds(5);
  while (same < 3 && steady::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::uint64_t now = rss_kib(pid);
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

// Waits until the server counts `want` open connections; false at the deadline.
bool wait_for_connections(const idle_connections_options& o, double want) {
  const auto deadline = steady::now() + std::chrono::duration<double>(o.accept_timeout_s);
  while (steady::now() < deadline) {
    if (const auto text = metrics(o.monitor)) {
      if (metric_sum(*text, "rill_connections").value_or(-1) >= want) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void raise_nofile() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
    l.rlim_cur = l.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &l);
  }
}

double per_connection_kib(std::uint64_t before, std::uint64_t after, std::uint32_t n) {
  return (static_cast<double>(after) - static_cast<double>(before)) / n;
}
}  // namespace

int run_idle_connections(const idle_connections_options& o) {
  raise_nofile();
  const auto first = metrics(o.monitor);
  if (!first) {
    fmt::print(stderr, "idle-connections: no /metrics at {}\n", o.monitor);
    return 1;
  }
  const double open_before = metric_sum(*first, "rill_connections").value_or(0);
  const std::uint64_t rss_before = settled_rss_kib(o.pid);
  if (rss_before == 0) {
    fmt::print(stderr, "idle-connections: no VmRSS for pid {}\n", o.pid);
    return 1;
  }
  std::vector<int> fds;
  fds.reserve(o.connections);
  int code = 0;
  for (std::uint32_t i = 0; i < o.connections; ++i) {
    const int fd = connect_to(o.server);
    if (fd < 0) {
      fmt::print(stderr, "idle-connections: connection {} to {} failed\n", i, o.server);
      code = 1;
      break;
    }
    fds.push_back(fd);
  }
  std::uint64_t rss_idle = 0;
  std::uint64_t rss_pinged = 0;
  std::optional<double> buffer_bytes;
  std::optional<double> pool_outstanding;
  if (code == 0 && !wait_for_connections(o, open_before + o.connections)) {
    fmt::print(stderr, "idle-connections: the server did not count {} connections within {} s\n", o.connections,
               o.accept_timeout_s);
    code = 1;
  }
  if (code == 0) {
    rss_idle = settled_rss_kib(o.pid);
  }
  if (code == 0 && o.ping) {
    std::vector<std::byte> frame;
    proto::PingRequest h;
    net::append_request(frame, 1, net::api::ping, h);
    for (int fd : fds) {
      code = send_all(fd, frame.data(), frame.size()) ? code : 1;
    }
    for (int fd : fds) {
      std::byte prefix[net::length_bytes];
      if (!recv_all(fd, prefix, sizeof prefix)) {
        code = 1;
        continue;
      }
      std::vector<std::byte> rest(load_be<std::uint32_t>(prefix));
      code = recv_all(fd, rest.data(), rest.size()) ? code : 1;
    }
    if (code != 0) {
      fmt::print(stderr, "idle-connections: a ping went unanswered\n");
    } else {
      rss_pinged = settled_rss_kib(o.pid);
    }
  }
  if (const auto text = metrics(o.monitor)) {
    buffer_bytes = metric_sum(*text, "rill_connection_receive_buffer_bytes");
    pool_outstanding = metric_sum(*text, "rill_shard_buffer_pool_outstanding_buffers");
  }
  for (int fd : fds) {
    ::close(fd);
  }
  if (code != 0) {
    return code;
  }
  const double idle = per_connection_kib(rss_before, rss_idle, o.connections);
  const double pinged = o.ping ? per_connection_kib(rss_before, rss_pinged, o.connections) : 0;
  if (o.json) {
    fmt::print(R"({{"connections":{},"rss_before_kib":{},"rss_idle_kib":{},"idle_kib_per_connection":{:.2f},)"
               R"("rss_after_ping_kib":{},"after_ping_kib_per_connection":{:.2f},"receive_buffer_bytes":{},)"
               R"("pool_outstanding_buffers":{}}})"
               "\n",
               o.connections, rss_before, rss_idle, idle, rss_pinged, pinged, buffer_bytes.value_or(-1),
               pool_outstanding.value_or(-1));
    return 0;
  }
  fmt::print("connections              {}\n", o.connections);
  fmt::print("rilld RSS before         {} KiB\n", rss_before);
  fmt::print("rilld RSS, all idle      {} KiB  ({:.2f} KiB per connection, {:.0f} KiB per 1,000)\n", rss_idle, idle,
             idle * 1000);
  if (o.ping) {
    fmt::print("after one ping each      {} KiB  ({:.2f} KiB per connection, {:.0f} KiB per 1,000)\n", rss_pinged,
               pinged, pinged * 1000);
  }
  if (buffer_bytes) {
    fmt::print("receive buffers held     {:.0f} bytes (all connections)\n", *buffer_bytes);
  }
  if (pool_outstanding) {
    fmt::print("pool buffers outstanding {:.0f} (all shards)\n", *pool_outstanding);
  }
  return 0;
}

}  // namespace rill::bench
