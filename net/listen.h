#pragma once
// listen_tcp: a listening TCP socket on a configured address, for the client and monitoring listeners.
#include <string_view>
#include <utility>

#include "base/expected.h"
#include "config/address.h"

namespace rill::net {

// Binds and listens on `want` (port 0: the kernel picks one); returns the socket and the address actually bound.
// Errors (config bad_value) name `key` and the address: a host that does not resolve, a port in use.
expected<std::pair<int, config::address>> listen_tcp(const config::address& want, std::string_view key, int backlog);

}  // namespace rill::net
