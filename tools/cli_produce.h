#pragma once
// `rill produce`: one message per line of standard input, sent as it is read.
//
// Contract:
// - Streaming: a line is sent within linger of being read (a pipe fed by `tail -f` delivers line by line, a line
//   typed in a terminal goes when Enter is pressed); lines read together go in one batch per partition.
// - Nothing read is lost: at end of input, SIGINT or SIGTERM, everything already read (a last line without its
//   newline included) is sent and acknowledged before the command exits 0; a failure exits with report()'s code
//   and says how many messages were acknowledged before it.
// - With --json one {"partition":P,"offset":O} line per acknowledged message, as acknowledgements arrive.
// - A line longer than line_bytes_max is refused (exit 1) after everything before it was sent.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/client.h"

namespace rill::cli {

inline constexpr std::size_t line_bytes_max = 16 * 1024 * 1024;

struct produce_args {
  std::string stream;
  std::string topic;
  std::optional<std::uint32_t> partition;
  std::optional<std::string> key;
  std::string key_separator;  // non-empty: each line is KEY<separator>VALUE (a line without it: value only)
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
  bool zstd = false;
  std::chrono::milliseconds linger{10};
};
int produce(net::client& c, const produce_args& args);

}  // namespace rill::cli
