#include "config/errc.h"

#include <string>

namespace rill::config {
namespace {
class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rill.config"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::out_of_range:
        return "config value out of range";
      case errc::unknown_key:
        return "unknown config key";
      case errc::bad_value:
        return "bad config value";
    }
    return "unknown config error";
  }
};
}  // namespace

const std::error_category& config_category() noexcept {
  static const category instance;
  return instance;
}
}  // namespace rill::config
