#include "simulation/trace.h"

#include <fmt/format.h>

#include "base/assert.h"

namespace rill::simulation {

trace::trace() : state_(XXH3_createState()) {
  RILL_ASSERT(state_ != nullptr);
  XXH3_64bits_reset(state_);
}

trace::~trace() {
  if (file_ != nullptr) {
    std::fclose(file_);
  }
  XXH3_freeState(state_);
}

bool trace::open(const std::string& path) {
  file_ = std::fopen(path.c_str(), "w");
  return file_ != nullptr;
}

void trace::event(std::uint64_t tick, std::string_view name, std::initializer_list<field> fields,
                  std::string_view what) {
  ++events_;
  line_.clear();
  fmt::format_to(std::back_inserter(line_), R"({{"tick":{},"event":"{}")", tick, name);
  for (const auto& [k, v] : fields) {
    fmt::format_to(std::back_inserter(line_), R"(,"{}":{})", k, v);
  }
  if (!what.empty()) {
    fmt::format_to(std::back_inserter(line_), R"(,"what":"{}")", what);
  }
  line_ += "}\n";
  XXH3_64bits_update(state_, line_.data(), line_.size());
  if (file_ != nullptr) {
    std::fwrite(line_.data(), 1, line_.size(), file_);
  }
}

void trace::mix(std::uint64_t value) {
  XXH3_64bits_update(state_, &value, sizeof value);
}

std::uint64_t trace::hash() const {
  return XXH3_64bits_digest(state_);
}

}  // namespace rill::simulation
