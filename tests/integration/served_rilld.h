#pragma once
// A real rilld on a temporary data directory with one client library connection to it: the fixture of the
// integration tests that talk to one server through net/client.h. Boost.Test is included by the test first.
#include <memory>
#include <string>
#include <vector>

#include "net/client.h"
#include "tests/integration/rilld_process.h"

namespace rill::testing {

struct served_rilld {
  // Starts rilld (extra: its further arguments) and connects; a failure ends the test with rilld's log.
  explicit served_rilld(std::vector<std::string> extra = {}) : proc(dir.path() + "/data", std::move(extra)) {
    auto a = proc.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "rilld did not start:\n" << proc.log());
    connect();
  }
  void connect() {
    net::client_options o;
    o.server = proc.address();
    auto c = net::client::connect(o);
    BOOST_REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error().message()));
    cli = std::move(*c);
  }
  // A graceful stop (exit status 0 expected) and a start on the same data directory and port.
  void restart() {
    cli.reset();
    BOOST_TEST(proc.stop() == 0);
    auto a = proc.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "rilld did not restart:\n" << proc.log());
    connect();
  }
  [[nodiscard]] std::string data() const { return dir.path() + "/data"; }

  temp_data_dir dir;
  rilld_process proc;
  std::unique_ptr<net::client> cli;
};

}  // namespace rill::testing
