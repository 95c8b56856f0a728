#pragma once
// The live dashboard served at /ui (actors/ui/dashboard.html) and its charting library, uPlot 1.6.32 (MIT; pinned in
// actors/ui/package-lock.json), served at /ui/uplot.js and /ui/uplot.css: all embedded at build time, so the page
// needs no network beyond rilld itself. Static data: any thread.
#include <string_view>

namespace rill::actors {

std::string_view dashboard_html() noexcept;
std::string_view dashboard_uplot_js() noexcept;
std::string_view dashboard_uplot_css() noexcept;

}  // namespace rill::actors
