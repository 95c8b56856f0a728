#include "base/expected.h"

namespace rill {
std::string error::message() const {
  std::string out = code_ ? code_.message() : std::string("ok");
  if (!detail_.empty()) {
    out += ": ";
    out += detail_;
  }
  return out;
}
}  // namespace rill
