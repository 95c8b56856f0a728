#pragma once
// request_header: the protobuf header of a request another actor passed on (metadata_msg, group_msg), parsed, for
// the plain handlers.
#include <string_view>

#include "base/expected.h"
#include "net/status.h"

namespace rill::actors {

// The header as an M; bad_header when it does not parse.
template <class M>
expected<M> parse_request_header(std::string_view header) {
  M m;
  if (!m.ParseFromArray(header.data(), static_cast<int>(header.size()))) {
    return rill::unexpected(make_error_code(net::status::bad_header), "the request header does not parse");
  }
  return m;
}

}  // namespace rill::actors
