// rill-sim: runs the deterministic simulator (docs/simulation.md).
//
//   rill-sim --seed S [knobs] [--trace FILE] [--metrics FILE [--metrics-every-ticks N]]   one seed
//   rill-sim --seeds N [--master-seed M] [knobs]  N seeds drawn from M
//   rill-sim --duration-s T [--master-seed M]      seeds drawn from M until T seconds have passed
//   rill-sim --seed-file FILE [knobs]              the seeds listed in FILE (one per line, # comments)
//   rill-sim --list-bugs                           the deliberate bugs the simulator must find
//   rill-sim --bug NAME --seeds N [--master-seed M] seeds with NAME planted until one catches it
//   rill-sim --bug-seeds FILE                      each "NAME SEED" line of FILE must catch NAME (CI's list)
//
// Knobs not given on the command line are drawn from the seed (a swarm: each seed is a different cluster and fault
// mix), so `--seed S` alone replays a run. Each seed runs in a child process, so that a crash (a failed assertion) is
// reported as one, with the command that replays it.
//
// Exit status: 0 all passed; 129 a safety failure; 128 a liveness failure; 127 a crash; 2 bad usage. With --bug
// and --seeds (or --duration-s): 129 when a seed caught the bug (a safety failure, or a failed assertion in the
// replica), 1 when none did. With --bug-seeds: 0 when every line caught its bug, 1 otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "base/random.h"
#include "simulation/cluster.h"
#include "simulation/node_cluster.h"
#include "simulation/swarm.h"

namespace {

using namespace rill;
using namespace rill::simulation;

constexpr int exit_safety = 129;
constexpr int exit_liveness = 128;
constexpr int exit_crash = 127;
constexpr int exit_not_caught = 1;
bool node_mode = false;  // --node: the whole-node simulator instead of the groups' (run_node_seed)

std::string replay_command(std::uint64_t seed, const knobs& k) {
  std::string cmd = fmt::format("rill-sim{} --seed {}", node_mode ? " --node" : "", seed);
  for (const auto& [name, value] : k.given) {
    cmd += fmt::format(" --{} {}", name, value);
  }
  if (k.ticks != knobs{}.ticks) {
    cmd += fmt::format(" --ticks {}", k.ticks);
  }
  if (k.liveness_ticks != knobs{}.liveness_ticks) {
    cmd += fmt::format(" --liveness-ticks {}", k.liveness_ticks);
  }
  for (const auto& b : k.bugs) {
    cmd += fmt::format(" --bug {}", b);
  }
  if (k.model_storage) {
    cmd += " --model-storage";
  }
  if (!k.check_ack_durable) {
    cmd += " --no-ack-durable-check";
  }
  return cmd;
}

// Where a single seed's replica samples go (--metrics): CSV, one row per replica per sample.
struct metrics_output {
  std::string path;
  std::uint32_t every_ticks = 100;
};

// Runs one seed in this process: prints its line, returns its exit status.
int run_seed(std::uint64_t seed, const knobs& k, const std::string& trace_path, bool quiet, int ticks_fd,
             const metrics_output& metrics = {}) {
  cluster_options o = options_for(seed, k);
  trace t;
  if (!trace_path.empty() && !t.open(trace_path)) {
    std::fprintf(stderr, "rill-sim: cannot write trace to %s\n", trace_path.c_str());
    return 2;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
  if (!metrics.path.empty()) {
    csv.reset(std::fopen(metrics.path.c_str(), "w"));
    if (!csv) {
      std::fprintf(stderr, "rill-sim: cannot write metrics to %s\n", metrics.path.c_str());
      return 2;
    }
    std::fprintf(
        csv.get(),
        "tick,replica,up,normal,view,log_view,op,commit,messages_sent,messages_received,crashes,checkpoints\n");
    o.sample_every_ticks = metrics.every_ticks;
    o.on_sample = [f = csv.get()](const replica_sample& r) {
      std::fprintf(f, "%llu,%u,%d,%d,%u,%u,%llu,%llu,%llu,%llu,%llu,%llu\n", static_cast<unsigned long long>(r.tick),
                   r.replica, r.up ? 1 : 0, r.normal ? 1 : 0, r.view, r.log_view, static_cast<unsigned long long>(r.op),
                   static_cast<unsigned long long>(r.commit), static_cast<unsigned long long>(r.messages_sent),
                   static_cast<unsigned long long>(r.messages_received), static_cast<unsigned long long>(r.crashes),
                   static_cast<unsigned long long>(r.checkpoints));
    };
  }
  cluster c(o, t);
  const run_result r = c.run();
  const char* verdict = r.result == outcome::passed           ? "passed"
                        : r.result == outcome::safety_failure ? "SAFETY FAILURE"
                                                              : "LIVENESS FAILURE";
  if (!quiet || r.result != outcome::passed) {
    std::printf(
        "seed %llu: %s replicas=%u groups=%u side_committed=%llu group_commits=%llu clients=%u loss=%u dup=%u crash=%u "
        "partition=%u "
        "faults=%u/%u/%u ticks=%llu "
        "committed=%llu acks=%llu retried=%llu evicted=%llu crashes=%llu process_crashes=%llu power_losses=%llu "
        "lost=%llu partitions=%llu view=%u lagging=%zu "
        "checkpoints=%llu "
        "syncs=%llu "
        "consumed=%llu cuts=%llu copies=%llu retained=%llu restarts=%llu messages=%llu hash=%016llx\n",
        static_cast<unsigned long long>(seed), verdict, o.replicas, o.groups,
        static_cast<unsigned long long>(r.side_committed), static_cast<unsigned long long>(r.group_commits), o.clients,
        o.network.loss_ppm, o.network.duplicate_ppm, o.crash_ppm, o.partition_ppm, o.storage.write_fault_ppm,
        o.storage.read_fault_ppm, o.rot_ppm, static_cast<unsigned long long>(r.ticks),
        static_cast<unsigned long long>(r.committed), static_cast<unsigned long long>(r.acks),
        static_cast<unsigned long long>(r.retries_answered), static_cast<unsigned long long>(r.evictions),
        static_cast<unsigned long long>(r.crashes), static_cast<unsigned long long>(r.process_crashes),
        static_cast<unsigned long long>(r.power_losses), static_cast<unsigned long long>(r.disks_lost),
        static_cast<unsigned long long>(r.partitions), r.final_view, r.lagging,
        static_cast<unsigned long long>(r.checkpoints), static_cast<unsigned long long>(r.state_transfers),
        static_cast<unsigned long long>(r.records_consumed), static_cast<unsigned long long>(r.partition_truncations),
        static_cast<unsigned long long>(r.partition_transfers), static_cast<unsigned long long>(r.segments_retained),
        static_cast<unsigned long long>(r.partition_restarts), static_cast<unsigned long long>(r.messages),
        static_cast<unsigned long long>(r.hash));
  }
  if (r.result != outcome::passed) {
    std::printf("  %s\n", r.detail.c_str());
  }
  std::fflush(stdout);
  if (ticks_fd >= 0) {
    const std::uint64_t figures[8] = {r.ticks,
                                      r.checkpoints,
                                      r.state_transfers,
                                      r.records_consumed,
                                      r.partition_truncations,
                                      r.segments_retained,
                                      r.partition_restarts,
                                      r.group_commits};
    [[maybe_unused]] const ssize_t n = ::write(ticks_fd, figures, sizeof figures);
  }
  return r.result == outcome::passed ? 0 : r.result == outcome::safety_failure ? exit_safety : exit_liveness;
}

// --node: one seed of the whole-node simulator (simulation/node_cluster.h): prints its line, returns its status.
int run_node_seed(std::uint64_t seed, const knobs& k, const std::string& trace_path, bool quiet, int ticks_fd) {
  node_cluster_options o = node_options_for(seed, k.bugs);
  if (k.given.contains("replicas")) {
    o.nodes = static_cast<std::uint8_t>(k.given.at("replicas"));
  }
  if (k.given.contains("sync-fault-ppm")) {
    o.sync_error_ppm = static_cast<std::uint32_t>(k.given.at("sync-fault-ppm"));
  }
  if (k.given.contains("disk-lost-ppm")) {
    o.disk_lost_ppm = static_cast<std::uint32_t>(k.given.at("disk-lost-ppm"));
  }
  if (k.given.contains("process-crash-ppm")) {
    o.process_crash_ppm = static_cast<std::uint32_t>(k.given.at("process-crash-ppm"));
  }
  trace t;
  if (!trace_path.empty() && !t.open(trace_path)) {
    std::fprintf(stderr, "rill-sim: cannot write trace to %s\n", trace_path.c_str());
    return 2;
  }
  node_cluster c(o, t);
  const node_run_result r = c.run();
  const char* verdict = r.result == node_outcome::passed           ? "passed"
                        : r.result == node_outcome::safety_failure ? "SAFETY FAILURE"
                                                                   : "LIVENESS FAILURE";
  if (!quiet || r.result != node_outcome::passed) {
    std::printf(
        "seed %llu (node): %s nodes=%u crash=%u partition=%u lost_ppm=%u ticks=%llu changes=%llu produced=%llu "
        "retries=%llu read=%llu crashes=%llu process_crashes=%llu disks_lost=%llu replicas=%llu steps=%llu "
        "settings_updates=%llu sync_errors=%llu fence_restarts=%llu reopens=%llu group_read=%llu refused=%llu "
        "pauses=%llu "
        "hash=%016llx\n",
        static_cast<unsigned long long>(seed), verdict, o.nodes, o.crash_ppm, o.partition_ppm, o.disk_lost_ppm,
        static_cast<unsigned long long>(r.ticks), static_cast<unsigned long long>(r.metadata_changes),
        static_cast<unsigned long long>(r.produced), static_cast<unsigned long long>(r.produce_retries),
        static_cast<unsigned long long>(r.records_read), static_cast<unsigned long long>(r.crashes),
        static_cast<unsigned long long>(r.process_crashes), static_cast<unsigned long long>(r.disks_lost),
        static_cast<unsigned long long>(r.partitions_hosted), static_cast<unsigned long long>(r.reconcile_steps),
        static_cast<unsigned long long>(r.settings_updates), static_cast<unsigned long long>(r.sync_errors),
        static_cast<unsigned long long>(r.fence_restarts), static_cast<unsigned long long>(r.partition_reopens),
        static_cast<unsigned long long>(r.group_records), static_cast<unsigned long long>(r.zombie_refusals),
        static_cast<unsigned long long>(r.pauses), static_cast<unsigned long long>(r.hash));
  }
  if (r.result != node_outcome::passed) {
    std::printf("  %s\n", r.detail.c_str());
  }
  std::fflush(stdout);
  if (ticks_fd >= 0) {
    const std::uint64_t figures[8] = {r.ticks, 0, 0, r.records_read, 0, 0, 0, 0};
    [[maybe_unused]] const ssize_t n = ::write(ticks_fd, figures, sizeof figures);
  }
  return r.result == node_outcome::passed ? 0 : r.result == node_outcome::safety_failure ? exit_safety : exit_liveness;
}

std::uint64_t ticks_total = 0;          // simulated ticks over every seed run (for the rate figure)
std::uint64_t checkpoints_total = 0;    // checkpoints written, every replica of every seed
std::uint64_t syncs_total = 0;          // state transfers
std::uint64_t consumed_total = 0;       // records read by the simulated consumers
std::uint64_t cuts_total = 0;           // partition-log suffixes truncated at view changes
std::uint64_t retained_total = 0;       // partition-log segments removed by retention
std::uint64_t restarts_total = 0;       // partition logs started over at a peer's log start
std::uint64_t group_commits_total = 0;  // consumer-group commits accepted by the coordinator machine

int run_forked(std::uint64_t seed, const knobs& k, const std::string& trace_path, bool quiet,
               const metrics_output& metrics = {}) {
  std::fflush(stdout);
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("rill-sim: pipe");
    return exit_crash;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("rill-sim: fork");
    return exit_crash;
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::_Exit(node_mode ? run_node_seed(seed, k, trace_path, quiet, fds[1])
                         : run_seed(seed, k, trace_path, quiet, fds[1], metrics));
  }
  ::close(fds[1]);
  std::uint64_t figures[8] = {};
  if (::read(fds[0], figures, sizeof figures) == static_cast<ssize_t>(sizeof figures)) {
    ticks_total += figures[0];
    checkpoints_total += figures[1];
    syncs_total += figures[2];
    consumed_total += figures[3];
    cuts_total += figures[4];
    retained_total += figures[5];
    restarts_total += figures[6];
    group_commits_total += figures[7];
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  std::printf("seed %llu: CRASH (signal %d)\n", static_cast<unsigned long long>(seed),
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return exit_crash;
}

// A planted bug is caught by a safety failure, or by a failed assertion in the replica (its own checks). A liveness
// failure is a catch only for a bug whose harm is liveness (planted_bug::liveness: a group that waits for good).
bool caught(int rc, const std::vector<std::string>& bugs) {
  if (rc == exit_safety || rc == exit_crash) {
    return true;
  }
  if (rc != exit_liveness || bugs.empty()) {
    return false;
  }
  for (const auto& name : bugs) {
    const auto& all = planted_bugs();
    auto it = std::find_if(all.begin(), all.end(), [&](const planted_bug& b) { return name == b.name; });
    if (it == all.end() || !it->liveness) {
      return false;
    }
  }
  return true;
}

std::string bugs_joined(const std::vector<std::string>& bugs) {
  std::string out;
  for (const auto& b : bugs) {
    out += (out.empty() ? "" : "+") + b;
  }
  return out;
}

// CI's list: each line "BUG SEED" (# comments) must catch BUG. Returns 0 when every line did, 1 otherwise.
int run_bug_seeds(const std::string& path, const knobs& base) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "rill-sim: cannot read %s\n", path.c_str());
    return 2;
  }
  std::string line;
  std::size_t lines = 0;
  std::size_t caught_lines = 0;
  std::size_t missed = 0;
  std::map<std::string, bool> covered;  // (with --node, the node bugs: each line runs the whole-node simulator)
  if (node_mode) {
    for (const auto& b : node_bug_list()) {
      covered[b.name] = false;
    }
  } else {
    for (const auto& b : bug_names()) {
      covered[b] = false;
    }
  }
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string bug;
    std::uint64_t s = 0;
    if (!(words >> bug)) {
      continue;
    }
    if (!(words >> s) || !covered.contains(bug)) {
      std::fprintf(stderr, "rill-sim: %s: not \"BUG SEED\" with a known bug: %s\n", path.c_str(), line.c_str());
      return 2;
    }
    knobs k = base;
    k.bugs = {bug};
    const int rc = run_forked(s, k, "", true);
    ++lines;
    if (caught(rc, k.bugs)) {
      ++caught_lines;
      covered[bug] = true;
      std::printf("%s: caught by seed %llu\n", bug.c_str(), static_cast<unsigned long long>(s));
    } else {
      ++missed;
      std::printf("%s: NOT caught by seed %llu (exit %d): %s\n", bug.c_str(), static_cast<unsigned long long>(s), rc,
                  replay_command(s, k).c_str());
    }
  }
  for (const auto& [bug, yes] : covered) {
    const auto& all = planted_bugs();
    const auto it = std::find_if(all.begin(), all.end(), [&](const planted_bug& b) { return bug == b.name; });
    if (!yes && it != all.end() && it->rare) {
      std::printf("%s: no seed in %s (a rare bug: its unit test plants it)\n", bug.c_str(), path.c_str());
    } else if (!yes) {
      std::printf("%s: no seed in %s catches it\n", bug.c_str(), path.c_str());
      ++missed;
    }
  }
  std::printf("%zu/%zu bug seeds caught their bug\n", caught_lines, lines);
  return missed == 0 ? 0 : exit_not_caught;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rill-sim: the deterministic simulator of rill's VSR replication"};
  std::optional<std::uint64_t> seed;
  std::uint64_t seeds = 0;
  double duration_s = 0;
  std::string seed_file;
  bool print_seeds = false;
  std::uint64_t master = 0;
  std::string trace_path;
  bool quiet = false;
  knobs k;
  app.add_option("--seed", seed, "run this one seed");
  app.add_option("--seeds", seeds, "run this many seeds, drawn from --master-seed");
  app.add_option("--master-seed", master, "the seed the --seeds are drawn from (default 0)");
  app.add_option("--duration-s", duration_s, "run seeds drawn from --master-seed until this many seconds pass")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--seed-file", seed_file, "run the seeds listed in this file (one per line; # starts a comment)");
  app.add_flag("--print-seeds", print_seeds, "print every seed run (eight per line) before the summary");
  app.add_option("--trace", trace_path, "write the run's events as JSON lines (one seed only)");
  metrics_output metrics;
  app.add_option("--metrics", metrics.path,
                 "write each replica's state (view, op, commit, messages, crashes, checkpoints) as CSV every "
                 "--metrics-every-ticks (one seed only)");
  app.add_option("--metrics-every-ticks", metrics.every_ticks, "ticks between samples for --metrics")
      ->check(CLI::Range(1, 1'000'000));
  app.add_flag("--quiet", quiet, "print only failures and the summary");
  app.add_option("--ticks", k.ticks, "ticks of the faulty (safety) phase, at most");
  app.add_option("--liveness-ticks", k.liveness_ticks, "ticks the healed cluster has to converge");
  app.add_flag("--model-storage", k.model_storage,
               "each replica on the in-memory storage model instead of its journal.wal and superblock on a simulated "
               "disk (about twice as fast; no file formats)");
  std::map<std::string, std::uint64_t> values;
  for (const auto& knob : swarm_knobs()) {
    app.add_option_function<std::uint64_t>(
        std::string("--") + knob.name, [&values, n = std::string(knob.name)](std::uint64_t v) { values[n] = v; },
        fmt::format("{} (default: drawn from the seed in {}..{})", knob.help, knob.lo, knob.hi));
  }
  std::vector<std::string> bugs;
  std::string bug_list;
  std::vector<std::string> every_bug = bug_names();
  for (const auto& b : node_bug_list()) {
    every_bug.emplace_back(b.name);
  }
  for (const auto& b : every_bug) {
    bug_list += (bug_list.empty() ? "" : ", ") + b;
  }
  app.add_flag("--node", node_mode,
               "run the whole-node simulator: every node runs the metadata group, the reconciler and its partition "
               "replicas, under an operator changing the metadata, producers and consumers (docs/simulation.md)");
  app.add_option("--bug", bugs,
                 "test only: plant a deliberate bug (" + bug_list +
                     "); with --seeds or --duration-s, stop at the first seed that catches it")
      ->check(CLI::IsMember(every_bug));
  bool list_bugs = false;
  app.add_flag("--list-bugs", list_bugs, "print the deliberate bugs, one a line: its name and what it breaks");
  std::string bug_seeds;
  app.add_option("--bug-seeds", bug_seeds,
                 "run each line \"BUG SEED\" of this file with BUG planted; every seed must catch its bug");
  bool no_ack_durable_check = false;
  app.add_flag("--no-ack-durable-check", no_ack_durable_check,
               "turn off the checker's \"prepare_ok only for a durable write\" (the end-to-end checkers remain)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; any other parse error is bad usage: exit 2, as documented (CLI11's own
    // codes, 105 and so on, would read as a seed's outcome).
    const int printed = app.exit(e);
    return printed == 0 ? 0 : 2;
  }
  k.check_ack_durable = !no_ack_durable_check;
  if (list_bugs) {
    for (const auto& b : planted_bugs()) {
      std::printf("%-28s %s\n", b.name, b.breaks);
    }
    for (const auto& b : node_bug_list()) {
      std::printf("%-28s %s (--node)\n", b.name, b.breaks);
    }
    return 0;
  }
  k.given = values;
  k.bugs = bugs;
  if (values.contains("replicas") && (values["replicas"] < 1 || values["replicas"] > 6)) {
    std::fprintf(stderr, "rill-sim: --replicas %llu: allowed is 1..6\n",
                 static_cast<unsigned long long>(values["replicas"]));
    return 2;
  }
  if (values.contains("groups") && (values["groups"] < 1 || values["groups"] > groups_max_sim)) {
    std::fprintf(stderr, "rill-sim: --groups %llu: allowed is 1..%u\n",
                 static_cast<unsigned long long>(values["groups"]), groups_max_sim);
    return 2;
  }
  if (values.contains("pipeline") && (values["pipeline"] < 1 || values["pipeline"] > 64)) {
    std::fprintf(stderr, "rill-sim: --pipeline: allowed is 1..64\n");
    return 2;
  }
  const int modes = (seed ? 1 : 0) + (seeds > 0 ? 1 : 0) + (duration_s > 0 ? 1 : 0) + (seed_file.empty() ? 0 : 1) +
                    (bug_seeds.empty() ? 0 : 1);
  if (modes != 1) {
    std::fprintf(stderr,
                 "rill-sim: give exactly one of --seed S, --seeds N, --duration-s T, --seed-file FILE, --bug-seeds "
                 "FILE\n");
    return 2;
  }
  if (!bug_seeds.empty()) {
    if (!bugs.empty()) {
      std::fprintf(stderr, "rill-sim: --bug-seeds names the bugs itself; no --bug\n");
      return 2;
    }
    return run_bug_seeds(bug_seeds, k);
  }
  if (seed) {
    const int rc = run_forked(*seed, k, trace_path, false, metrics);
    if (rc != 0) {
      std::printf("replay: %s\n", replay_command(*seed, k).c_str());
    }
    return rc;
  }
  if (!trace_path.empty() || !metrics.path.empty()) {
    std::fprintf(stderr, "rill-sim: --trace and --metrics need a single --seed\n");
    return 2;
  }
  std::vector<std::uint64_t> listed;
  if (!seed_file.empty()) {
    std::ifstream in(seed_file);
    if (!in) {
      std::fprintf(stderr, "rill-sim: cannot read %s\n", seed_file.c_str());
      return 2;
    }
    std::string line;
    while (std::getline(in, line)) {
      line = line.substr(0, line.find('#'));
      if (line.find_first_not_of(" \t\r") == std::string::npos) {
        continue;
      }
      try {
        listed.push_back(std::stoull(line));
      } catch (const std::exception&) {
        std::fprintf(stderr, "rill-sim: %s: not a seed: %s\n", seed_file.c_str(), line.c_str());
        return 2;
      }
    }
  }
  prng draw(master);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::uint64_t passed = 0;
  int worst = 0;
  std::vector<std::uint64_t> ran;
  const bool hunting = !bugs.empty() && listed.empty();  // --bug with --seeds or --duration-s
  bool found = false;
  for (std::uint64_t i = 0;; ++i) {
    if (!listed.empty() ? i >= listed.size() : duration_s > 0 ? elapsed() >= duration_s : i >= seeds) {
      break;
    }
    const std::uint64_t s = !listed.empty() ? listed[i] : draw.next();
    ran.push_back(s);
    const int rc = run_forked(s, k, "", quiet);
    if (rc == 0) {
      ++passed;
      continue;
    }
    std::printf("replay: %s\n", replay_command(s, k).c_str());
    worst = worst == 0 ? rc : std::max(worst, rc);
    if (hunting && caught(rc, bugs)) {
      std::printf("%s: caught by seed %llu, seed #%zu drawn from master seed %llu\n", bugs_joined(bugs).c_str(),
                  static_cast<unsigned long long>(s), ran.size(), static_cast<unsigned long long>(master));
      found = true;
      break;
    }
  }
  if (print_seeds) {
    for (std::size_t i = 0; i < ran.size(); ++i) {
      std::printf("%s%llu", i % 8 == 0 ? (i == 0 ? "seeds: " : "\n       ") : " ",
                  static_cast<unsigned long long>(ran[i]));
    }
    std::printf("\n");
  }
  const double seconds = elapsed();
  std::printf("%llu/%zu seeds passed (%s) in %.1f s: %.0f seeds per minute, %.2f million simulated ticks per second\n",
              static_cast<unsigned long long>(passed), ran.size(),
              listed.empty() ? fmt::format("master seed {}", master).c_str() : seed_file.c_str(), seconds,
              static_cast<double>(ran.size()) / seconds * 60.0, static_cast<double>(ticks_total) / seconds / 1e6);
  if (node_mode) {
    // (A node seed reports its ticks and the records read; the groups' figures are the replica swarm's.)
    std::printf("records read: %llu\n", static_cast<unsigned long long>(consumed_total));
  } else {
    std::printf(
        "checkpoints written: %llu; state transfers: %llu; records consumed: %llu; partition suffixes truncated: %llu; "
        "segments retained: %llu; logs started over: %llu; consumer-group commits: %llu\n",
        static_cast<unsigned long long>(checkpoints_total), static_cast<unsigned long long>(syncs_total),
        static_cast<unsigned long long>(consumed_total), static_cast<unsigned long long>(cuts_total),
        static_cast<unsigned long long>(retained_total), static_cast<unsigned long long>(restarts_total),
        static_cast<unsigned long long>(group_commits_total));
  }
  if (hunting) {
    if (!found) {
      std::printf("%s: not caught in %zu seeds\n", bugs_joined(bugs).c_str(), ran.size());
      return exit_not_caught;
    }
    return exit_safety;
  }
  return worst;
}
