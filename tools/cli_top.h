#pragma once
// rill top: a terminal view of a rilld's shards and busiest actors, from its monitoring listener (/api/shards,
// /api/actors), refreshed every interval.
#include <chrono>
#include <cstdint>
#include <string>

namespace rill::cli {

struct top_args {
  std::string http = "127.0.0.1:9421";  // rilld's network.http_address
  std::chrono::milliseconds interval{1000};
  std::uint32_t rows = 15;  // busiest actors shown
  bool once = false;        // one view (two samples an interval apart), no screen clearing
};
int top(const top_args& args);

}  // namespace rill::cli
