// rill-sim: runs the deterministic simulator (docs/simulation.md).
//
//   rill-sim --seed S [knobs] [--trace FILE]      one seed
//   rill-sim --seeds N [--master-seed M] [knobs]  N seeds drawn from M
//
// Knobs not given on the command line are drawn from the seed (a swarm: each seed is a different cluster and fault
// mix), so `--seed S` alone replays a run. Each seed runs in a child process, so that a crash (a failed assertion) is
// reported as one, with the command that replays it.
//
// Exit status: 0 all passed; 129 a safety failure; 128 a liveness failure; 127 a crash; 2 bad usage.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "base/random.h"
#include "simulation/cluster.h"

namespace {

using namespace rill;
using namespace rill::simulation;

constexpr int exit_safety = 129;
constexpr int exit_liveness = 128;
constexpr int exit_crash = 127;

struct knobs {
  std::map<std::string, std::uint64_t> given;  // knob name -> value, as typed
  std::vector<std::string> bugs;
  std::uint64_t ticks = 20'000;
  std::uint64_t liveness_ticks = 30'000;
};

// Draws every knob not given from the seed.
cluster_options options_for(std::uint64_t seed, const knobs& k) {
  prng r(seed ^ 0x5357'4152'4d21'0001ULL);  // the swarm's own stream: independent of the run's
  auto pick = [&](const char* name, std::uint64_t lo, std::uint64_t hi) {
    const std::uint64_t drawn = r.between(lo, hi);  // drawn even when given: later knobs do not shift
    auto it = k.given.find(name);
    return it != k.given.end() ? it->second : drawn;
  };
  cluster_options o;
  o.seed = seed;
  o.replica.cluster = 1;
  o.replicas = static_cast<std::uint8_t>(pick("replicas", 1, 6));
  o.clients = static_cast<std::uint32_t>(pick("clients", 1, 8));
  o.client.requests = pick("requests", 10, 60);
  o.network.delay_min_ticks = static_cast<std::uint32_t>(pick("delay-min", 1, 3));
  o.network.delay_spread_ticks = static_cast<std::uint32_t>(pick("delay-spread", 0, 10));
  o.network.loss_ppm = static_cast<std::uint32_t>(pick("loss-ppm", 0, 100'000));
  o.network.duplicate_ppm = static_cast<std::uint32_t>(pick("duplicate-ppm", 0, 100'000));
  o.crash_ppm = static_cast<std::uint32_t>(pick("crash-ppm", 0, 600));
  o.partition_ppm = static_cast<std::uint32_t>(pick("partition-ppm", 0, 400));
  o.storage.write_fault_ppm = static_cast<std::uint32_t>(pick("write-fault-ppm", 0, 20'000));
  o.storage.read_fault_ppm = static_cast<std::uint32_t>(pick("read-fault-ppm", 0, 20'000));
  o.rot_ppm = static_cast<std::uint32_t>(pick("rot-ppm", 0, 300));
  o.replica.pipeline_max = static_cast<std::uint32_t>(pick("pipeline", 1, 8));
  o.safety_ticks = k.ticks;
  o.liveness_ticks = k.liveness_ticks;
  for (const auto& b : k.bugs) {
    if (b == "commit_without_quorum") {
      o.bugs.commit_without_quorum = true;
    } else if (b == "advertise_before_persist") {
      o.bugs.advertise_before_persist = true;
    } else if (b == "accept_out_of_order") {
      o.bugs.accept_out_of_order = true;
    } else if (b == "forget_client_table") {
      o.bugs.forget_client_table = true;
    }
  }
  return o;
}

std::string replay_command(std::uint64_t seed, const knobs& k) {
  std::string cmd = fmt::format("rill-sim --seed {}", seed);
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
  return cmd;
}

// Runs one seed in this process: prints its line, returns its exit status.
int run_seed(std::uint64_t seed, const knobs& k, const std::string& trace_path, bool quiet) {
  const cluster_options o = options_for(seed, k);
  trace t;
  if (!trace_path.empty() && !t.open(trace_path)) {
    std::fprintf(stderr, "rill-sim: cannot write trace to %s\n", trace_path.c_str());
    return 2;
  }
  cluster c(o, t);
  const run_result r = c.run();
  const char* verdict = r.result == outcome::passed             ? "passed"
                        : r.result == outcome::safety_failure ? "SAFETY FAILURE"
                                                              : "LIVENESS FAILURE";
  if (!quiet || r.result != outcome::passed) {
    std::printf(
        "seed %llu: %s replicas=%u clients=%u loss=%u dup=%u crash=%u partition=%u faults=%u/%u/%u ticks=%llu "
        "committed=%llu acks=%llu crashes=%llu partitions=%llu view=%u lagging=%zu messages=%llu hash=%016llx\n",
        static_cast<unsigned long long>(seed), verdict, o.replicas, o.clients, o.network.loss_ppm,
        o.network.duplicate_ppm, o.crash_ppm, o.partition_ppm, o.storage.write_fault_ppm, o.storage.read_fault_ppm,
        o.rot_ppm, static_cast<unsigned long long>(r.ticks), static_cast<unsigned long long>(r.committed),
        static_cast<unsigned long long>(r.acks), static_cast<unsigned long long>(r.crashes),
        static_cast<unsigned long long>(r.partitions), r.final_view, r.lagging,
        static_cast<unsigned long long>(r.messages),
        static_cast<unsigned long long>(r.hash));
  }
  if (r.result != outcome::passed) {
    std::printf("  %s\n", r.detail.c_str());
  }
  std::fflush(stdout);
  // Ticks for the parent's rate figure travel in the exit... no: through a pipe would do; stdout is enough here.
  return r.result == outcome::passed ? 0 : r.result == outcome::safety_failure ? exit_safety : exit_liveness;
}

int run_forked(std::uint64_t seed, const knobs& k, const std::string& trace_path, bool quiet) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("rill-sim: fork");
    return exit_crash;
  }
  if (pid == 0) {
    std::_Exit(run_seed(seed, k, trace_path, quiet));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  std::printf("seed %llu: CRASH (signal %d)\n", static_cast<unsigned long long>(seed),
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return exit_crash;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rill-sim: the deterministic simulator of rill's VSR replication"};
  std::optional<std::uint64_t> seed;
  std::uint64_t seeds = 0;
  std::uint64_t master = 0;
  std::string trace_path;
  bool quiet = false;
  knobs k;
  app.add_option("--seed", seed, "run this one seed");
  app.add_option("--seeds", seeds, "run this many seeds, drawn from --master-seed");
  app.add_option("--master-seed", master, "the seed the --seeds are drawn from (default 0)");
  app.add_option("--trace", trace_path, "write the run's events as JSON lines (one seed only)");
  app.add_flag("--quiet", quiet, "print only failures and the summary");
  app.add_option("--ticks", k.ticks, "ticks of the faulty (safety) phase, at most");
  app.add_option("--liveness-ticks", k.liveness_ticks, "ticks the healed cluster has to converge");
  std::map<std::string, std::uint64_t> values;
  const std::vector<std::pair<const char*, const char*>> knob_help = {
      {"replicas", "replicas, 1..6"},
      {"clients", "clients"},
      {"requests", "requests per client"},
      {"delay-min", "minimum network delay, ticks"},
      {"delay-spread", "extra network delay, uniform in [0, this] ticks"},
      {"loss-ppm", "packet loss, parts per million"},
      {"duplicate-ppm", "packet duplication, ppm"},
      {"crash-ppm", "replica crash chance per tick, ppm"},
      {"partition-ppm", "chance per tick that a partition begins, ppm"},
      {"write-fault-ppm", "failed journal writes, ppm (within the fault atlas)"},
      {"read-fault-ppm", "failed journal reads, ppm (within the fault atlas)"},
      {"rot-ppm", "chance per replica per tick that a stored prepare rots, ppm (within the fault atlas)"},
      {"pipeline", "prepares in flight at the primary, 1..64"},
  };
  for (const auto& [name, help] : knob_help) {
    app.add_option_function<std::uint64_t>(
        std::string("--") + name, [&values, n = std::string(name)](std::uint64_t v) { values[n] = v; },
        std::string(help) + " (default: drawn from the seed)");
  }
  std::vector<std::string> bugs;
  app.add_option("--bug", bugs,
                 "test only: enable a deliberate bug (commit_without_quorum, advertise_before_persist, "
                 "accept_out_of_order, forget_client_table)")
      ->check(CLI::IsMember({"commit_without_quorum", "advertise_before_persist", "accept_out_of_order",
                             "forget_client_table"}));
  CLI11_PARSE(app, argc, argv);
  k.given = values;
  k.bugs = bugs;
  if (values.contains("replicas") && (values["replicas"] < 1 || values["replicas"] > 6)) {
    std::fprintf(stderr, "rill-sim: --replicas %llu: allowed is 1..6\n",
                 static_cast<unsigned long long>(values["replicas"]));
    return 2;
  }
  if (values.contains("pipeline") && (values["pipeline"] < 1 || values["pipeline"] > 64)) {
    std::fprintf(stderr, "rill-sim: --pipeline: allowed is 1..64\n");
    return 2;
  }
  if (seed.has_value() == (seeds > 0)) {
    std::fprintf(stderr, "rill-sim: give either --seed S or --seeds N\n");
    return 2;
  }
  if (seed) {
    const int rc = run_forked(*seed, k, trace_path, false);
    if (rc != 0) {
      std::printf("replay: %s\n", replay_command(*seed, k).c_str());
    }
    return rc;
  }
  if (!trace_path.empty()) {
    std::fprintf(stderr, "rill-sim: --trace needs a single --seed\n");
    return 2;
  }
  prng draw(master);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t passed = 0;
  int worst = 0;
  std::vector<std::uint64_t> ran;
  for (std::uint64_t i = 0; i < seeds; ++i) {
    const std::uint64_t s = draw.next();
    ran.push_back(s);
    const int rc = run_forked(s, k, "", quiet);
    if (rc == 0) {
      ++passed;
      continue;
    }
    std::printf("replay: %s\n", replay_command(s, k).c_str());
    worst = worst == 0 ? rc : std::max(worst, rc);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%llu/%llu seeds passed (master seed %llu) in %.1f s: %.0f seeds per minute\n",
              static_cast<unsigned long long>(passed), static_cast<unsigned long long>(seeds),
              static_cast<unsigned long long>(master), seconds, seeds / seconds * 60.0);
  return worst;
}
