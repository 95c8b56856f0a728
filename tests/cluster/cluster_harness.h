#pragma once
// What the cluster tests share: a cluster of real rilld processes on loopback ports the kernel picks, each node on
// its own data directory (formatted with `rilld format`), started, killed, paused, cut off with the transport fault
// switch and restarted by the tests; and small helpers around it.
#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "net/client.h"
#include "tests/integration/rilld_process.h"
#include "tests/test_util.h"

namespace rill::testing::cluster_harness {

inline net::status status_of(const rill::error& e) {
  return static_cast<net::status>(e.code().value());
}

// A port free right now on 127.0.0.1, below the kernel's ephemeral range (the members list must name ports before
// the nodes start). A port the kernel picks for bind(0) comes from the ephemeral range, where any client connection
// of any test running beside this one may take it as its source port before the node binds it (seen: "address in
// use" for the whole of a node's 2 s of retries). Below the range only another bind can take it.
inline std::uint16_t free_port() {
  static thread_local std::mt19937 pick(std::random_device{}());
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) {
    range >> ephemeral_low;
  }
  const int high = std::max(ephemeral_low - 1, 11'000);
  std::uniform_int_distribution<int> port(10'000, high);
  for (int attempt = 0; attempt < 1'000; ++attempt) {
    const auto p = static_cast<std::uint16_t>(port(pick));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(p);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (bound) {
      return p;
    }
  }
  BOOST_FAIL("no free port below the ephemeral range");
  return 0;
}

// Runs `rilld ARGS` to completion; its exit code.
inline int run(const std::vector<std::string>& args, const std::string& log) {
  std::string cmd = RILLD_PATH;
  for (const auto& a : args) {
    cmd += " '" + a + "'";
  }
  cmd += " >>'" + log + "' 2>&1";
  return std::system(cmd.c_str());
}

// N nodes of one cluster, each on its own data directory and ports.
class cluster {
 public:
  explicit cluster(std::size_t n, std::uint64_t id = 42, std::vector<std::string> extra = {})
      : id_(id), extra_(std::move(extra)) {
    for (std::size_t i = 0; i < n; ++i) {
      ports_.push_back(free_port());
    }
    for (std::size_t i = 0; i < n; ++i) {
      members_ += fmt::format("{}{}@127.0.0.1:{}", i == 0 ? "" : ",", i + 1, ports_[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      format(i, "format");
      nodes_.push_back(std::make_unique<rilld_process>(dir(i), args(i)));
    }
  }

  // A failed test shows what each node logged.
  ~cluster() {
    namespace ut = boost::unit_test;
    if (!ut::results_collector.results(ut::framework::current_test_case().p_id).passed()) {
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        BOOST_TEST_MESSAGE("--- node " << i + 1 << "'s log:\n" << nodes_[i]->log());
      }
    }
  }

  std::string dir(std::size_t i) const { return fmt::format("{}/n{}", root_.path(), i + 1); }
  std::vector<std::string> args(std::size_t i, std::uint64_t cluster_id = 0) const {
    std::vector<std::string> a = {"--set",     fmt::format("cluster.id={}", cluster_id == 0 ? id_ : cluster_id),
                                  "--set",     fmt::format("cluster.node_id={}", i + 1),
                                  "--set",     "cluster.members=" + members_,
                                  "--replica", fmt::format("127.0.0.1:{}", ports_[i])};
    a.insert(a.end(), extra_.begin(), extra_.end());
    return a;
  }
  void format(std::size_t i, const char* how) {
    std::vector<std::string> a = {how, "--data-dir", dir(i)};
    const auto rest = args(i);
    a.insert(a.end(), rest.begin(), rest.end());
    const int rc = run(a, dir(i) + ".format.log");
    if (rc != 0) {
      std::ifstream in(dir(i) + ".format.log");
      std::stringstream said;
      said << in.rdbuf();
      BOOST_FAIL("rilld " << how << " for node " << i + 1 << " exited with " << rc << ": " << said.str());
    }
  }
  void start_all() {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      start(i);
    }
  }
  void start(std::size_t i) {
    auto at = nodes_[i]->start();
    BOOST_REQUIRE_MESSAGE(at.has_value(), "node " << i + 1 << " did not start: " << nodes_[i]->log());
  }
  rilld_process& node(std::size_t i) { return *nodes_[i]; }
  // A client given every node's address ("a,b,c": it starts from the first that accepts and follows redirects).
  std::unique_ptr<net::client> client_of_all(std::chrono::milliseconds request_timeout = std::chrono::seconds(30),
                                             int retries = 20) {
    net::client_options o;
    o.server.clear();  // (it has a default)
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      o.server += (i == 0 ? "" : ",") + nodes_[i]->address();
    }
    o.retries = retries;
    o.request_timeout = request_timeout;
    auto c = net::client::connect(o);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "connect to " << o.server);
    return std::move(*c);
  }
  std::size_t size() const { return nodes_.size(); }

  std::unique_ptr<net::client> client(std::size_t i) {
    net::client_options o;
    o.server = nodes_[i]->address();
    o.retries = 20;
    o.request_timeout = std::chrono::seconds(30);
    auto c = net::client::connect(o);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "connect to node " << i + 1);
    return std::move(*c);
  }

  // The streams node i lists (sorted), or nullopt when it does not answer.
  std::optional<std::vector<std::string>> streams(std::size_t i) {
    net::client_options o;
    o.server = nodes_[i]->address();
    o.retries = 0;
    o.request_timeout = std::chrono::seconds(5);
    auto c = net::client::connect(o);
    if (!c) {
      return std::nullopt;
    }
    auto l = (*c)->list_streams();
    if (!l) {
      return std::nullopt;
    }
    std::vector<std::string> names;
    for (const auto& s : *l) {
      names.push_back(s.name());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Waits until every node in `which` lists exactly `want`.
  bool converge(const std::vector<std::size_t>& which, const std::vector<std::string>& want,
                std::chrono::seconds within = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (auto i : which) {
        auto got = streams(i);
        all = all && got && *got == want;
      }
      if (all) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto i : which) {
      auto got = streams(i);
      BOOST_TEST_MESSAGE("node " << i + 1 << " lists " << (got ? fmt::format("{}", fmt::join(*got, ",")) : "nothing"));
    }
    return false;
  }

 private:
  std::uint64_t id_;
  std::vector<std::string> extra_;
  temp_data_dir root_;
  std::vector<std::uint16_t> ports_;
  std::string members_;
  std::vector<std::unique_ptr<rilld_process>> nodes_;
};

// A connected socket to a node's HTTP listener ("host:port" on loopback), or -1.
inline int http_connect(const std::string& address) {
  const auto colon = address.rfind(':');
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends one request with Connection: close and reads the whole answer ("" when there is none).
inline std::string http_exchange(const std::string& address, const std::string& request) {
  const int fd = http_connect(address);
  if (fd < 0) {
    return {};
  }
  std::string out;
  if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// POST `path` to a node's HTTP listener; the status code (0: no answer).
inline int http_post(const std::string& address, const std::string& path) {
  const std::string out =
      http_exchange(address, "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  return out.size() > 12 ? std::atoi(out.c_str() + 9) : 0;  // "HTTP/1.1 200 ..."
}

// GET `path` from a node's HTTP listener; the body ("" when there is no answer).
inline std::string http_get(const std::string& address, const std::string& path) {
  const std::string out = http_exchange(address, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : out.substr(body + 4);
}

inline std::vector<std::string> names(std::initializer_list<const char*> l) {
  std::vector<std::string> out(l.begin(), l.end());
  std::sort(out.begin(), out.end());
  return out;
}

// Cuts node `n` off from every other node (cut) or heals it, on both sides, with the transport fault switch
// (debug.failure_injection).
inline void set_cut_off(cluster& c, std::size_t n, bool cut) {
  const char* what = cut ? "cut" : "heal";
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i != n) {
      BOOST_REQUIRE_EQUAL(http_post(c.node(i).http_address(), fmt::format("/debug/{}?peer={}", what, n + 1)), 200);
      BOOST_REQUIRE_EQUAL(http_post(c.node(n).http_address(), fmt::format("/debug/{}?peer={}", what, i + 1)), 200);
    }
  }
}

// Creates a stream through node i, retrying until it is made (the first attempts may find no primary yet), and
// returns how long it took.
inline std::chrono::milliseconds create_through(cluster& c, std::size_t i, const std::string& name) {
  const auto t0 = std::chrono::steady_clock::now();
  auto cli = c.client(i);
  auto made = cli->create_stream(name);
  BOOST_REQUIRE_MESSAGE(made.has_value() || status_of(made.error()) == net::status::already_exists,
                        "create " << name << " through node " << i + 1 << ": " << (made ? "" : made.error().message()));
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

}  // namespace rill::testing::cluster_harness
