#pragma once
// Errors of the config layer.
#include <system_error>

namespace rill::config {

enum class errc : int {
  out_of_range = 1,  // a value outside its allowed range (the detail names key, value and range)
  unknown_key,       // a key that does not exist
  bad_value,         // a value of the wrong type or format
};

const std::error_category& config_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), config_category()};
}

}  // namespace rill::config

template <>
struct std::is_error_code_enum<rill::config::errc> : std::true_type {};
