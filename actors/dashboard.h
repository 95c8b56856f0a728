#pragma once
// The live dashboard page served at /ui (actors/ui/dashboard.html, embedded at build time).
#include <string_view>

namespace rill::actors {

std::string_view dashboard_html() noexcept;

}  // namespace rill::actors
