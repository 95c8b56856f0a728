// rill CLI: streaming produce from standard input (see cli_produce.h).
#include "tools/cli_produce.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "tools/cli_output.h"

namespace rill::cli {
namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop(int) {
  g_stop = 1;
}

// Installed without SA_RESTART, so that a blocked poll or read returns at once on Ctrl-C.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}
}  // namespace

int produce(net::client& c, const produce_args& args) {
  net::producer_options po;
  po.zstd = args.zstd;
  po.linger = args.linger;
  auto made = net::producer::create(c, net::by_name(args.stream), net::by_name(args.topic), po);
  if (!made) {
    return report(made.error());
  }
  net::producer& p = **made;
  install_stop_handlers();

  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  const bool progress = !interactive && ::isatty(STDERR_FILENO) != 0 && !json_output();
  std::uint64_t queued = 0;
  std::uint64_t acked = 0;
  auto last_progress = std::chrono::steady_clock::now();
  auto emit = [&](const std::vector<net::producer::ack>& acks) {
    for (const auto& a : acks) {
      ++acked;
      if (json_output()) {
        fmt::print("{}\n", nlohmann::json{{"partition", a.partition}, {"offset", a.offset}}.dump());
      } else if (interactive) {
        fmt::print(stderr, "acknowledged: partition {} offset {}\n", a.partition, a.offset);
      }
    }
    std::fflush(stdout);
    if (progress && std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(1)) {
      fmt::print(stderr, "\r{} messages acknowledged", acked);
      last_progress = std::chrono::steady_clock::now();
    }
  };
  auto failed = [&](const rill::error& e) {
    const int rc = report(e);
    if (!json_output()) {
      fmt::print(stderr, "rill: {} of {} messages read were acknowledged before the failure\n", acked, queued);
    }
    return rc;
  };
  auto send_line = [&](std::string_view line) -> std::optional<rill::error> {
    net::message m;
    if (!args.key_separator.empty()) {
      if (const auto at = line.find(args.key_separator); at != std::string_view::npos) {
        m.key = std::string(line.substr(0, at));
        line.remove_prefix(at + args.key_separator.size());
      }
    }
    if (args.key) {
      m.key = args.key;
    }
    m.value = std::string(line);
    m.partition = args.partition;
    m.headers = args.headers;
    ++queued;
    auto acks = p.send(m);
    if (!acks) {
      return acks.error();
    }
    emit(*acks);
    return std::nullopt;
  };

  std::string buffer;
  std::vector<char> chunk(64 * 1024);
  bool input_open = true;
  // After Ctrl-C, what the pipe already holds is read and sent, but a writer that keeps writing cannot hold the
  // command open: a bounded number of reads.
  int reads_after_stop = 0;
  static constexpr int reads_after_stop_max = 64;
  while (input_open && reads_after_stop <= reads_after_stop_max) {
    reads_after_stop += g_stop != 0 ? 1 : 0;
    // Wait for input; while something is unacknowledged, at most the linger, then send it.
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    const bool unsent = acked < queued;
    const int timeout_ms = g_stop != 0 ? 0 : unsent ? static_cast<int>(args.linger.count()) : -1;
    const int ready = ::poll(&pfd, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      return fail(exit_refused, "stdin", fmt::format("reading standard input: {}", std::strerror(errno)));
    }
    if (ready <= 0) {
      if (g_stop != 0) {
        break;  // nothing more is waiting: send what was read
      }
      if (unsent) {
        auto acks = p.flush();
        if (!acks) {
          return failed(acks.error());
        }
        emit(*acks);
      }
      continue;
    }
    const ssize_t n = ::read(STDIN_FILENO, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return fail(exit_refused, "stdin", fmt::format("reading standard input: {}", std::strerror(errno)));
    }
    if (n == 0) {
      input_open = false;
    }
    buffer.append(chunk.data(), static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (auto e = send_line(std::string_view(buffer).substr(start, nl - start))) {
        return failed(*e);
      }
    }
    buffer.erase(0, start);
    if (buffer.size() > line_bytes_max) {
      if (auto acks = p.flush(); acks) {
        emit(*acks);
      }
      return fail(exit_refused, "line_too_long",
                  fmt::format("a line of more than {} bytes on standard input: rill produce sends one message per "
                              "line, of at most {} bytes; {} messages before it were acknowledged",
                              line_bytes_max, line_bytes_max, acked));
    }
  }
  if (!buffer.empty()) {
    // The last line, without its newline (end of input or Ctrl-C): it was read, so it is sent.
    if (auto e = send_line(buffer)) {
      return failed(*e);
    }
  }
  auto rest = p.flush();
  if (!rest) {
    return failed(rest.error());
  }
  emit(*rest);
  if (!json_output()) {
    fmt::print(stderr, "{}{} acknowledged\n", progress ? "\r" : "", count_of(acked, "message"));
  }
  return exit_ok;
}

}  // namespace rill::cli
