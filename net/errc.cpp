#include "net/errc.h"

#include <string>

namespace rill::net {
namespace {
class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rill.net"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::frame_too_large:
        return "frame too large";
      case errc::malformed_frame:
        return "malformed frame";
      case errc::bad_header:
        return "bad request header";
      case errc::connection_closed:
        return "connection closed";
      case errc::connect_failed:
        return "connect failed";
      case errc::timed_out:
        return "timed out";
      case errc::server_error:
        return "server error";
    }
    return "unknown network error";
  }
};
}  // namespace

const std::error_category& net_category() noexcept {
  static const category instance;
  return instance;
}
}  // namespace rill::net
