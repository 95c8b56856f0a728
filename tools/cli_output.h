#pragma once
// How the rill CLI speaks: exit codes, errors (in words or as JSON), and aligned tables with human sizes and times.
//
// Contract:
// - Exit codes are the same for every command (docs/cli.md): exit_ok 0, exit_refused 1 (the server answered and
//   refused, or the data was bad), exit_usage 2 (the command line or client configuration is wrong; nothing was
//   sent), exit_unreachable 3 (no server could be reached or the connection broke).
// - With JSON output on (set_json_output), every error is one JSON object on stderr:
//   {"error":{"code":"<name>","message":"<words>","exit":N}}; otherwise "rill: <words>" on stderr. Results go to
//   stdout either way, so a script can tell them apart by stream and by exit code.
// - Tables print every cell as given, columns aligned to the widest cell, numbers right-aligned; nothing is
//   truncated.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace rill::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_refused = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_unreachable = 3;

// Process-wide: whether results and errors are JSON (the --json flag).
void set_json_output(bool on) noexcept;
[[nodiscard]] bool json_output() noexcept;

// Prints a failed call; returns its exit code (exit_unreachable when no server could be reached, else
// exit_refused).
int report(const rill::error& e);
// Prints a usage error (code "usage"); returns exit_usage.
int usage_error(std::string_view message);
// Prints an error of the given exit code with a code name of its own (e.g. "not_confirmed").
int fail(int exit_code, std::string_view code, std::string_view message);
// Something a long-running command tells on stderr without stopping ("lost the server, reconnecting"): "rill: ..."
// or, with JSON output, {"notice":{"code":...,"message":...}}.
void notice(std::string_view code, std::string_view message);

// 1536 -> "1.5 KiB"; below 1 KiB the exact count ("512 B").
std::string human_bytes(std::uint64_t bytes);
// 90000 -> "1m30s", 86400000 -> "1d"; 0 -> "0s".
std::string human_duration_ms(std::uint64_t ms);
// 1234567 -> "1,234,567".
std::string grouped(std::uint64_t n);
// (1, "topic") -> "1 topic", (1204, "message") -> "1,204 messages".
std::string count_of(std::uint64_t n, std::string_view noun);

class table {
 public:
  // A column whose header ends in '>' is right-aligned (the '>' is not printed).
  explicit table(std::vector<std::string> headers);
  void add(std::vector<std::string> cells);
  [[nodiscard]] bool empty() const noexcept { return rows_.empty(); }
  // Prints to stdout with `indent` spaces before each line.
  void print(int indent = 0) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace rill::cli
