// listen_tcp (see listen.h): resolve, then socket + SO_REUSEADDR + bind + listen for each candidate address, the whole
// round retried while the address is in use.
#include "net/listen.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/core.h>

#include "base/assert.h"
#include "config/errc.h"

namespace rill::net {
namespace {

struct bound_socket {
  int fd = -1;
  int err = 0;  // errno of the last failure when fd < 0
};

// One try over every resolved candidate.
bound_socket try_listen(const addrinfo* res, int backlog) {
  bound_socket out;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      out.err = errno;
      continue;
    }
    const int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) {
      out.fd = fd;
      return out;
    }
    out.err = errno;
    ::close(fd);
  }
  return out;
}

}  // namespace

expected<std::pair<int, config::address>> listen_tcp(const config::address& want, std::string_view key, int backlog,
                                                     const listen_retry_callback& on_retry) {
  RILL_ASSERT(backlog > 0, "backlog {}", backlog);
  auto fail = [&](const std::string& why) {
    return rill::unexpected(config::make_error_code(config::errc::bad_value),
                            fmt::format("{} = {}: {}", key, want.to_string(), why));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(want.port);
  if (const int rc = ::getaddrinfo(want.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return fail(::gai_strerror(rc));
  }
  bound_socket s = try_listen(res, backlog);
  int retries = 0;
  for (; s.fd < 0 && s.err == EADDRINUSE && retries < listen_retries_max; ++retries) {
    if (on_retry) {
      on_retry(
          fmt::format("{} = {}: address in use (the previous process's socket may still be closing); retry {} "
                      "of {} in {} ms",
                      key, want.to_string(), retries + 1, listen_retries_max, listen_retry_interval.count()));
    }
    std::this_thread::sleep_for(listen_retry_interval);
    s = try_listen(res, backlog);
  }
  ::freeaddrinfo(res);
  if (s.fd < 0) {
    return fail(s.err == EADDRINUSE && retries > 0
                    ? fmt::format("cannot listen: {} (still, after {} retries over {} ms)", std::strerror(s.err),
                                  retries, retries * listen_retry_interval.count())
                    : fmt::format("cannot listen: {}", std::strerror(s.err)));
  }
  RILL_ASSERT(retries <= listen_retries_max);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &len);
  config::address actual = want;
  actual.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::make_pair(s.fd, actual);
}

}  // namespace rill::net
