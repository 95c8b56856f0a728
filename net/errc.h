#pragma once
// Errors of the network layer (framing, connections, the client library).
#include <system_error>

#include "base/expected.h"

namespace rill::net {

enum class errc : int {
  frame_too_large = 1,  // a frame over the configured maximum
  malformed_frame,      // a length or header length that cannot be right
  bad_header,           // a protobuf header that does not parse
  connection_closed,    // the peer closed the connection
  connect_failed,       // no connection could be made (the detail has the address and errno)
  timed_out,
  server_error,  // a reply with a non-zero status (the detail has the status name and message)
};

const std::error_category& net_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), net_category()};
}

}  // namespace rill::net

template <>
struct std::is_error_code_enum<rill::net::errc> : std::true_type {};
