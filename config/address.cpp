#include "config/address.h"

#include <charconv>

#include <fmt/core.h>

#include "config/errc.h"

namespace rill::config {

std::string address::to_string() const {
  if (host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", host, port);
  }
  return fmt::format("{}:{}", host, port);
}

expected<address> parse_address(std::string_view text) {
  auto bad = [&](const char* why) {
    return unexpected(make_error_code(errc::bad_value), fmt::format("'{}': {} (expected HOST:PORT)", text, why));
  };
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 address needs brackets and a port, as in [::1]:9420");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return bad("no port");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return bad("an IPv6 address needs brackets, as in [::1]:9420");
    }
  }
  if (host.empty()) {
    return bad("no host");
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || port.empty() || value > 65535) {
    return bad("the port must be a number in [0, 65535]");
  }
  return address{std::string(host), static_cast<std::uint16_t>(value)};
}

}  // namespace rill::config
