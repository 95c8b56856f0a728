// rill top (see cli_top.h): samples /api/shards and /api/actors, prints rates between two samples.
#include "tools/cli_top.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include <fmt/core.h>

#include "tools/cli_output.h"

namespace rill::cli {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using json = nlohmann::json;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_top_signal(int) {
  g_stop = 1;
}

// While top runs on a terminal: keys are read one at a time, unechoed, so that `q` quits; the terminal's settings
// are restored when this goes (a normal exit, or the loop ending after SIGINT / SIGTERM).
class keys {
 public:
  keys() {
    if (::isatty(STDIN_FILENO) == 1 && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  }
  ~keys() {
    if (active_) {
      ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
  }
  keys(const keys&) = delete;
  keys& operator=(const keys&) = delete;

  // Waits up to `wait`; true once `q` (or Q) was typed.
  bool quit_within(std::chrono::milliseconds wait) const {
    if (!active_) {
      std::this_thread::sleep_for(wait);
      return false;
    }
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        continue;  // a signal (the loop checks g_stop) or the time is up
      }
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) {
        return true;
      }
      if (g_stop != 0) {
        return false;
      }
    }
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// GET `target` from `address` ("host:port"); the body, or an error message in `error`.
std::string get(const std::string& address, const std::string& target, std::string& error) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    error = fmt::format("--http {}: expected HOST:PORT", address);
    return {};
  }
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(5));
    stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, address);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result() != http::status::ok) {
      error = fmt::format("{}{}: HTTP {}", address, target, res.result_int());
      return {};
    }
    return res.body();
  } catch (const std::exception& e) {
    error = fmt::format("{}{}: {}", address, target, e.what());
    return {};
  }
}

struct sample {
  json shards;
  json actors;
  std::chrono::steady_clock::time_point at;
};

bool take(const std::string& address, sample& s, std::string& error) {
  const auto shards = get(address, "/api/shards", error);
  if (!error.empty()) {
    return false;
  }
  const auto actors = get(address, "/api/actors", error);
  if (!error.empty()) {
    return false;
  }
  s.shards = json::parse(shards, nullptr, false);
  s.actors = json::parse(actors, nullptr, false);
  s.at = std::chrono::steady_clock::now();
  if (s.shards.is_discarded() || s.actors.is_discarded()) {
    error = "the server's JSON does not parse";
    return false;
  }
  return true;
}

// now - before, or 0 when the counter went back (rilld restarted, or another instance answered).
double delta(std::uint64_t now, std::uint64_t before) {
  return now >= before ? static_cast<double>(now - before) : 0.0;
}

struct shard_row {
  std::uint64_t shard;
  std::uint64_t actors;
  std::uint64_t run_queue;
  double busy;
  double jobs_rate;
  double io_rate;
};
struct actor_row {
  std::string kind;
  std::string name;
  std::uint64_t shard;
  double rate;
  double busy;
  std::uint64_t mailbox;
};
struct view {
  double secs = 0;
  std::size_t actors_total = 0;
  std::vector<shard_row> shards;
  std::vector<actor_row> actors;  // busiest first, at most `rows`
};

// Rates between two samples.
view compute(const sample& before, const sample& now, std::uint32_t rows) {
  view v;
  v.secs = std::max(1e-3, std::chrono::duration<double>(now.at - before.at).count());
  const double secs = v.secs;
  std::map<std::uint64_t, json> earlier;
  for (const auto& a : before.actors) {
    earlier[a["id"].get<std::uint64_t>()] = a;
  }
  std::map<std::uint64_t, json> shard_before;
  for (const auto& s : before.shards) {
    shard_before[s["shard"].get<std::uint64_t>()] = s;
  }
  for (const auto& s : now.shards) {
    const auto id = s["shard"].get<std::uint64_t>();
    const auto& b = shard_before.contains(id) ? shard_before[id] : s;
    v.shards.push_back(
        shard_row{id, s["actors"].get<std::uint64_t>(), s["run_queue"].get<std::uint64_t>(),
                  delta(s["busy_ns"].get<std::uint64_t>(), b["busy_ns"].get<std::uint64_t>()) / (secs * 1e9) * 100.0,
                  delta(s["jobs"].get<std::uint64_t>(), b["jobs"].get<std::uint64_t>()) / secs,
                  delta(s["io_completions"].get<std::uint64_t>(), b["io_completions"].get<std::uint64_t>()) / secs});
  }
  for (const auto& a : now.actors) {
    const auto id = a["id"].get<std::uint64_t>();
    const auto it = earlier.find(id);
    const auto processed = a["processed"].get<std::uint64_t>();
    const auto busy_ns = a["busy_ns"].get<std::uint64_t>();
    const auto p0 = it == earlier.end() ? 0 : it->second["processed"].get<std::uint64_t>();
    const auto b0 = it == earlier.end() ? 0 : it->second["busy_ns"].get<std::uint64_t>();
    // By names where the server gives them (partitions shop/orders/1, groups shop/orders/billing); ids otherwise.
    const auto name = a.contains("display_name") ? a["display_name"].get<std::string>() : a["name"].get<std::string>();
    v.actors.push_back(actor_row{a["kind"].get<std::string>(), name, a["shard"].get<std::uint64_t>(),
                                 static_cast<double>(processed - std::min(processed, p0)) / secs,
                                 static_cast<double>(busy_ns - std::min(busy_ns, b0)) / (secs * 1e9) * 100.0,
                                 a["mailbox"].get<std::uint64_t>()});
  }
  v.actors_total = v.actors.size();
  std::sort(v.actors.begin(), v.actors.end(), [](const actor_row& x, const actor_row& y) {
    return x.busy != y.busy ? x.busy > y.busy : x.rate != y.rate ? x.rate > y.rate : x.mailbox > y.mailbox;
  });
  v.actors.resize(std::min<std::size_t>(v.actors.size(), rows));
  return v;
}

void print(const std::string& address, const view& v) {
  fmt::print("rill top: {}, {} shards, {} actors, every {:.1f} s\n\n", address, v.shards.size(), v.actors_total,
             v.secs);
  fmt::print("{:>5} {:>7} {:>6} {:>7} {:>10} {:>12}\n", "SHARD", "ACTORS", "RUNQ", "BUSY%", "JOBS/s", "IO/s");
  for (const auto& s : v.shards) {
    fmt::print("{:>5} {:>7} {:>6} {:>7.1f} {:>10.0f} {:>12.0f}\n", s.shard, s.actors, s.run_queue, s.busy, s.jobs_rate,
               s.io_rate);
  }
  fmt::print("\n{:<11} {:<32} {:>5} {:>10} {:>7} {:>8}\n", "KIND", "NAME", "SHARD", "MSG/s", "BUSY%", "MAILBOX");
  for (const auto& r : v.actors) {
    fmt::print("{:<11} {:<32} {:>5} {:>10.0f} {:>7.1f} {:>8}\n", r.kind, r.name.substr(0, 32), r.shard, r.rate, r.busy,
               r.mailbox);
  }
  std::fflush(stdout);
}

// One JSON object per view (a line each, for scripts): the same figures as the table.
void print_json(const std::string& address, const view& v) {
  json shards = json::array();
  for (const auto& s : v.shards) {
    shards.push_back({{"shard", s.shard},
                      {"actors", s.actors},
                      {"run_queue", s.run_queue},
                      {"busy_percent", s.busy},
                      {"jobs_per_s", s.jobs_rate},
                      {"io_per_s", s.io_rate}});
  }
  json actors = json::array();
  for (const auto& r : v.actors) {
    actors.push_back({{"kind", r.kind},
                      {"name", r.name},
                      {"shard", r.shard},
                      {"messages_per_s", r.rate},
                      {"busy_percent", r.busy},
                      {"mailbox", r.mailbox}});
  }
  fmt::print("{}\n", json{{"http", address},
                          {"interval_s", v.secs},
                          {"actors_total", v.actors_total},
                          {"shards", shards},
                          {"actors", actors}}
                         .dump(-1, ' ', false, json::error_handler_t::replace));
  std::fflush(stdout);
}

}  // namespace

int top(const top_args& args) {
  std::signal(SIGINT, on_top_signal);
  std::signal(SIGTERM, on_top_signal);
  sample before;
  std::string error;
  if (!take(args.http, before, error)) {
    return fail(exit_unreachable, "connect_failed", error);
  }
  // A live view reads `q` from the terminal; --once and --json (lines for a script) leave the terminal alone.
  const bool live = !args.once && !json_output();
  std::optional<keys> k;
  if (live) {
    k.emplace();
  }
  while (g_stop == 0) {
    if (!k) {
      std::this_thread::sleep_for(args.interval);
    } else if (k->quit_within(args.interval)) {
      break;
    }
    sample now;
    if (!take(args.http, now, error)) {
      return fail(exit_unreachable, "connect_failed", error);
    }
    if (live) {
      fmt::print("\x1b[H\x1b[2J");  // home, clear screen
    }
    try {
      const view v = compute(before, now, args.rows);
      json_output() ? print_json(args.http, v) : print(args.http, v);
    } catch (const std::exception& e) {
      return fail(exit_unreachable, "bad_answer",
                  fmt::format("{} answered something else than rilld's /api: {}", args.http, e.what()));
    }
    if (args.once) {
      return 0;
    }
    before = std::move(now);
  }
  return 0;
}

}  // namespace rill::cli
