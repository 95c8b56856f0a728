#pragma once
// listen_tcp: a listening TCP socket on a configured address, for the client and monitoring listeners.
//
// Invariants:
// - The socket has SO_REUSEADDR (a restart binds while connections of the previous process linger in TIME_WAIT) and
//   never SO_REUSEPORT (two rillds must not share a port: the second one's bind fails).
// - A bind that fails with EADDRINUSE is retried at most listen_retries_max times, listen_retry_interval apart:
//   after SIGKILL, the kernel tears the old process's listening socket down asynchronously (an io_uring accept still
//   in flight holds it for up to about a second), so a restart at once may find the port still taken. Every retry is
//   reported through `on_retry`. Any other error fails at once.
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "base/expected.h"
#include "config/address.h"

namespace rill::net {

// The retry window of a bind that finds its address in use: listen_retries_max * listen_retry_interval (2 s).
inline constexpr int listen_retries_max = 40;
inline constexpr std::chrono::milliseconds listen_retry_interval{50};
static_assert(listen_retries_max * listen_retry_interval <= std::chrono::seconds(5),
              "a port that stays taken fails startup within seconds");

// Told about each retry: what is retried and why (one line, for the server's log).
using listen_retry_callback = std::function<void(const std::string& what)>;

// Binds and listens on `want` (port 0: the kernel picks one); returns the socket (close-on-exec, blocking, owned by
// the caller) and the address actually bound. Blocks the calling thread for up to the retry window while the address
// is in use (never call it on a shard). Errors (config bad_value) name `key` and the address: a host that does not
// resolve, a port still in use after every retry, any other bind or listen failure.
expected<std::pair<int, config::address>> listen_tcp(const config::address& want, std::string_view key, int backlog,
                                                     const listen_retry_callback& on_retry = {});

}  // namespace rill::net
