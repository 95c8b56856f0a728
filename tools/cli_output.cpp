// rill CLI: exit codes, errors and tables (see cli_output.h).
#include "tools/cli_output.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "net/errc.h"
#include "net/status.h"

namespace rill::cli {
namespace {
bool g_json_output = false;

std::string code_name(const rill::error& e) {
  if (e.code().category() == net::status_category()) {
    return std::string(net::to_string(static_cast<net::status>(e.code().value())));
  }
  if (e.code().category() == net::net_category()) {
    switch (static_cast<net::errc>(e.code().value())) {
      case net::errc::frame_too_large:
        return "frame_too_large";
      case net::errc::malformed_frame:
        return "malformed_frame";
      case net::errc::bad_header:
        return "bad_header";
      case net::errc::connection_closed:
        return "connection_closed";
      case net::errc::connect_failed:
        return "connect_failed";
      case net::errc::timed_out:
        return "timed_out";
      case net::errc::server_error:
        return "server_error";
    }
  }
  return e.code().message();
}
}  // namespace

void set_json_output(bool on) noexcept {
  g_json_output = on;
}

bool json_output() noexcept {
  return g_json_output;
}

int fail(int exit_code, std::string_view code, std::string_view message) {
  if (g_json_output) {
    const nlohmann::json j{{"error", {{"code", code}, {"message", message}, {"exit", exit_code}}}};
    fmt::print(stderr, "{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(stderr, "rill: {}\n", message);
  }
  std::fflush(stdout);
  return exit_code;
}

void notice(std::string_view code, std::string_view message) {
  if (g_json_output) {
    const nlohmann::json j{{"notice", {{"code", code}, {"message", message}}}};
    fmt::print(stderr, "{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(stderr, "rill: {}\n", message);
  }
}

int report(const rill::error& e) {
  const bool unreachable = e.code().category() == net::net_category();
  return fail(unreachable ? exit_unreachable : exit_refused, code_name(e),
              unreachable ? e.message() : fmt::format("{}: {}", e.code().message(), e.detail()));
}

int usage_error(std::string_view message) {
  return fail(exit_usage, "usage", message);
}

std::string human_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return v < 10 ? fmt::format("{:.1f} {}", v, units[u]) : fmt::format("{:.0f} {}", v, units[u]);
}

std::string human_duration_ms(std::uint64_t ms) {
  if (ms < 1000) {
    return fmt::format("{}{}", ms, ms == 0 ? "s" : "ms");
  }
  static constexpr std::pair<std::uint64_t, const char*> units[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}};
  std::size_t u = 0;
  while (ms < units[u].first) {
    ++u;
  }
  // The largest unit and the next one ("1d2h", "1m30s"): a table wants a glance, not a timestamp.
  std::string out = fmt::format("{}{}", ms / units[u].first, units[u].second);
  if (u + 1 < std::size(units)) {
    const auto next = (ms % units[u].first) / units[u + 1].first;
    if (next > 0) {
      out += fmt::format("{}{}", next, units[u + 1].second);
    }
  }
  return out;
}

std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return out;
}

std::string count_of(std::uint64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", grouped(n), noun, n == 1 ? "" : "s");
}

table::table(std::vector<std::string> headers) {
  for (auto& h : headers) {
    const bool right = !h.empty() && h.back() == '>';
    right_.push_back(right);
    if (right) {
      h.pop_back();
    }
    headers_.push_back(std::move(h));
  }
}

void table::add(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void table::print(int indent) const {
  std::vector<std::size_t> widths(headers_.size());
  // Widths in code points, so that a UTF-8 name does not push its column out of line.
  auto width = [](const std::string& s) {
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  for (std::size_t i = 0; i < headers_.size(); ++i) {
    widths[i] = width(headers_[i]);
    for (const auto& r : rows_) {
      widths[i] = std::max(widths[i], width(r[i]));
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out(static_cast<std::size_t>(indent), ' ');
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(widths[i] - width(cells[i]), ' ');
      const bool last = i + 1 == cells.size();
      out += right_[i] ? pad + cells[i] : cells[i] + (last ? "" : pad);
      if (!last) {
        out += "  ";
      }
    }
    fmt::print("{}\n", out);
  };
  line(headers_);
  for (const auto& r : rows_) {
    line(r);
  }
}

}  // namespace rill::cli
