// rilld: the rill server.
//
//   rilld [--config FILE] [--data-dir DIR] [--tcp ADDR:PORT] [--http ADDR:PORT] [--replica ADDR:PORT]
//         [--set KEY=VALUE]...
//   rilld format  [the same flags]: formats the data directory as a node of a new cluster (or a node alone)
//   rilld recover [the same flags]: formats it for a member of a cluster whose data was lost (it votes for nothing
//                                  until it has caught up)
//
// Configuration layers: defaults < FILE (TOML) < RILL_* environment variables < flags. SIGTERM or SIGINT: stop
// accepting, finish in-flight requests, sync and close every partition, exit 0. Exit 2 for a bad configuration
// (the message names the key), 1 when startup fails (address in use, data directory locked, recovery failed).
#include <malloc.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "actors/broker.h"
#include "config/server_config.h"

extern char** environ;

namespace {
// glibc hands the free memory at the top of a thread's arena back to the kernel (madvise) once 128 KiB of it are
// free, and its next large allocation faults those pages in again, zero-filled by the kernel. A shard allocates and
// frees a write buffer per produce request (a batch of 100 KiB is common): with the defaults every such request paid
// some 25 page faults (perf under produce load: madvise, native_set_pte, clear_page in the shard threads). Each arena
// now keeps up to 32 MiB free, and blocks up to 16 MiB come from the arenas instead of an mmap of their own (setting
// the trim threshold fixes glibc's mmap threshold, which would otherwise stay at 128 KiB). The memory this holds is
// bounded: 32 MiB per arena, and glibc keeps at most 8 arenas per core.
constexpr int malloc_trim_bytes = 32 << 20;
constexpr int malloc_mmap_bytes = 16 << 20;
}  // namespace

int main(int argc, char** argv) {
  ::mallopt(M_TRIM_THRESHOLD, malloc_trim_bytes);
  ::mallopt(M_MMAP_THRESHOLD, malloc_mmap_bytes);
  CLI::App app{"rilld: the rill message-streaming server"};
  std::string config_file;
  std::string data_dir;
  std::string tcp;
  std::string http;
  std::string replica;
  std::vector<std::string> sets;
  bool print_config = false;
  bool list_keys = false;
  app.add_option("--config", config_file, "TOML configuration file");
  auto* data_dir_option =
      app.add_option("--data-dir", data_dir, "data directory (server.data_dir; default ./rill-data)");
  auto* tcp_option =
      app.add_option("--tcp", tcp, "client listener ADDR:PORT (network.tcp_address; default 127.0.0.1:9420)");
  auto* http_option =
      app.add_option("--http", http, "HTTP listener ADDR:PORT (network.http_address; default 127.0.0.1:9421)");
  auto* replica_option = app.add_option(
      "--replica", replica, "replica-plane listener ADDR:PORT (network.replica_address; default 127.0.0.1:9422)");
  app.add_option("--set", sets, "any configuration key, KEY=VALUE (repeatable)");
  auto* format_command =
      app.add_subcommand("format",
                         "format the data directory as a node of a new cluster (cluster.id, cluster.node_id, "
                         "cluster.members), or as a node alone, and exit");
  format_command->fallthrough();
  auto* recover_command = app.add_subcommand(
      "recover",
      "format the data directory for a member of a cluster whose data was lost, and exit: it votes for "
      "nothing until it has caught up");
  recover_command->fallthrough();
  app.require_subcommand(0, 1);
  app.add_flag("--print-config", print_config, "print the effective configuration and exit");
  app.add_flag("--list-keys", list_keys, "list every configuration key with its range and default, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (list_keys) {
    for (const auto& k : rill::config::describe_keys()) {
      fmt::print("{} ({}; {}; default {}): {} [env {}]\n", k.key, k.type, k.allowed, k.default_text, k.description,
                 k.env);
    }
    return 0;
  }

  rill::config::config_builder builder;
  auto bad = [](const rill::error& e) {
    fmt::print(stderr, "rilld: configuration error: {}\n", e.detail());
    return 2;
  };
  if (!config_file.empty()) {
    if (auto r = builder.load_toml_file(config_file); !r) {
      return bad(r.error());
    }
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  if (auto r = builder.load_environment(env); !r) {
    return bad(r.error());
  }
  // A flag given with an empty value is a value like any other (and refused where empty is not allowed): only an
  // absent flag leaves the key to the layers below.
  auto flag = [&](const char* key, const CLI::Option* option, const std::string& value,
                  const char* name) -> rill::expected<void> {
    if (option->count() == 0) {
      return {};
    }
    return builder.set(key, value, name);
  };
  for (auto r : {flag("server.data_dir", data_dir_option, data_dir, "--data-dir"),
                 flag("network.tcp_address", tcp_option, tcp, "--tcp"),
                 flag("network.http_address", http_option, http, "--http"),
                 flag("network.replica_address", replica_option, replica, "--replica")}) {
    if (!r) {
      return bad(r.error());
    }
  }
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) {
      fmt::print(stderr, "rilld: --set {}: expected KEY=VALUE\n", s);
      return 2;
    }
    if (auto r = builder.set(s.substr(0, eq), s.substr(eq + 1), "--set " + s.substr(0, eq)); !r) {
      return bad(r.error());
    }
  }
  auto config = builder.build();
  if (!config) {
    return bad(config.error());
  }
  if (print_config) {
    fmt::print("{}", rill::config::render_toml(*config));
    return 0;
  }
  if (format_command->parsed() || recover_command->parsed()) {
    const bool recover = recover_command->parsed();
    auto formatted = rill::actors::broker::format(*config, recover);
    if (!formatted) {
      fmt::print(stderr, "rilld: cannot {}: {}\n", recover ? "recover" : "format", formatted.error().detail());
      return 1;
    }
    fmt::print("rilld: {} {} as node {} of cluster {}{}\n", config->data_dir,
               recover ? "formatted to recover" : "formatted", formatted->node_id, formatted->cluster_id,
               formatted->members.empty() ? std::string(" (a node alone)")
                                          : fmt::format(" (members {})", fmt::join(formatted->members, ", ")));
    return 0;
  }

  // Signals are taken by this thread with sigwait: block them before any other thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto broker = rill::actors::broker::start(*config);
  if (!broker) {
    fmt::print(stderr, "rilld: cannot start: {}\n", broker.error().detail());
    return 1;
  }
  fmt::print("rilld: serving {} with {} shards, data in {}\n", (*broker)->tcp_address().to_string(),
             (*broker)->shards(), config->data_dir);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print("rilld: {} received: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  (*broker)->stop();
  fmt::print("rilld: stopped\n");
  return 0;
}
