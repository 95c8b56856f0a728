#pragma once
// taken_port: a listening socket on a loopback port the kernel picks, held while it lives. It accepts connections
// (the kernel completes them) and answers nothing: a port no rilld can bind, or a server that never answers (a
// paused node). Test-only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include <boost/test/unit_test.hpp>

namespace rill::testing {

struct taken_port {
  taken_port() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd, 16) == 0);
    socklen_t len = sizeof a;
    BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~taken_port() { ::close(fd); }
  taken_port(const taken_port&) = delete;
  taken_port& operator=(const taken_port&) = delete;
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  int fd = -1;
  std::uint16_t port = 0;
};

}  // namespace rill::testing
