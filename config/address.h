#pragma once
// A listen or connect address "HOST:PORT": IPv4 ("127.0.0.1:9420"), IPv6 in brackets ("[::1]:9420") or a host name
// ("localhost:9420"). Port 0 asks the kernel for a free port (tests use it; the bound port is reported back).
#include <cstdint>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace rill::config {

struct address {
  std::string host;
  std::uint16_t port = 0;

  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const address&, const address&) = default;
};

// Parses "HOST:PORT". The error says what is wrong with the text (the caller adds the key).
expected<address> parse_address(std::string_view text);

}  // namespace rill::config
