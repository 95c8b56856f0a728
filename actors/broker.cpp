#include "actors/broker.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <variant>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "actors/connection_actor.hpp"
#include "actors/dashboard.h"
#include "actors/group_actor.hpp"
#include "actors/interfaces.hpp"
#include "actors/listener_actor.hpp"
#include "actors/metadata_actor.hpp"
#include "actors/partition_actor.hpp"
#include "actors/routing.hpp"
#include "actors/runtime/metered.hpp"
#include "actors/runtime/runtime.h"
#include "actors/runtime/shard.h"
#include "actors/sample_names.h"
#include "config/descriptor_budget.h"
#include "config/errc.h"
#include "config/limits.h"
#include "consensus/node_identity.h"
#include "consensus/peer_wire.h"
#include "consensus/replica_plane.h"
#include "net/http_server.h"
#include "net/listen.h"
#include "storage/atomic_file.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/io/run.h"
#include "storage/io/sync_engine.h"

namespace rill::actors {
namespace {

rill::unexpected fail(std::string message) {
  return rill::unexpected(config::make_error_code(config::errc::bad_value), std::move(message));
}

// A reporter that writes to stderr: corruption and notices are operational events.
class stderr_reporter final : public storage::log_reporter {
 public:
  explicit stderr_reporter(config::log_level level) : level_(level) {}
  void corruption(const std::string& file, std::uint64_t position, const std::string& problem,
                  const std::string& action) override {
    if (level_ > config::log_level::error) {
      return;
    }
    std::lock_guard<std::mutex> g(mutex_);
    fmt::print(stderr, "rilld: CORRUPTION {} at byte {}: {} ({})\n", file, position, problem, action);
  }
  void notice(const std::string& what) override {
    if (level_ > config::log_level::info) {
      return;
    }
    std::lock_guard<std::mutex> g(mutex_);
    fmt::print(stderr, "rilld: {}\n", what);
  }

 private:
  config::log_level level_;
  std::mutex mutex_;
};

// A thread-safe clock for the storage layer: the system's.
system_clock_source g_clock;

template <class T>
T run_sync(storage::io::engine& e, task<T> t) {
  auto out = storage::io::run_task(e, std::move(t));
  RILL_ASSERT(out.has_value(), "a startup task did not finish");
  return std::move(*out);
}

}  // namespace

struct broker::impl {
  config::server_config config;
  config::address bound;
  config::address http_bound;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::unique_ptr<net::http_server> http;
  int lock_fd = -1;
  int listen_fd = -1;  // the client listener's socket until the listener actor takes it
  std::unique_ptr<stderr_reporter> reporter;
  routing routes;
  replica_links links;
  partition_services partition_svc;
  group_services group_svc;
  metadata_services metadata_svc;
  metadata_cluster cluster;  // a member of a cluster of several nodes
  cluster_board board;
  connection_services connection_svc;
  std::atomic<std::uint32_t> connections{0};
  std::atomic<std::uint64_t> requests_inflight{0};
  std::unique_ptr<runtime> rt;
  metadata_actor_hdl metadata;
  listener_actor_hdl listener;
  bool stopped = false;
};

broker::broker(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
broker::~broker() {
  stop();
}
const config::address& broker::tcp_address() const noexcept {
  return impl_->bound;
}
const config::address& broker::http_address() const noexcept {
  return impl_->http_bound;
}

namespace {
// The NAME=NUMBER pairs of a query string (an item without '=' is skipped); a value that is not a number is an
// error that names it.
expected<std::map<std::string, std::uint64_t>> query_numbers(const std::string& query) {
  std::map<std::string, std::uint64_t> args;
  std::size_t at = 0;
  while (at < query.size()) {
    const auto end = std::min(query.find('&', at), query.size());
    const auto eq = query.find('=', at);
    if (eq < end) {
      const auto text = query.substr(eq + 1, end - eq - 1);
      std::uint64_t v = 0;
      const auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (err != std::errc{} || ptr != text.data() + text.size()) {
        return fail(fmt::format("{} = '{}': expected a number\n", query.substr(at, eq - at), text));
      }
      args[query.substr(at, eq - at)] = v;
    }
    at = end + 1;
  }
  return args;
}

// The numeric arguments of a /debug query ("a=1&b=2") naming a partition, or the 400 reply.
std::variant<std::map<std::string, std::uint64_t>, net::http_response> debug_args(const std::string& query,
                                                                                  const std::string& usage) {
  auto parsed = query_numbers(query);
  if (!parsed) {
    return net::http_response{400, "text/plain; charset=utf-8", parsed.error().detail()};
  }
  auto& args = *parsed;
  for (const char* k : {"stream", "topic", "partition"}) {
    if (!args.contains(k)) {
      return net::http_response{400, "text/plain; charset=utf-8", usage};
    }
  }
  if (args["stream"] >= stream_ids_max || args["topic"] >= topic_ids_max || args["partition"] >= partitions_max) {
    return net::http_response{400, "text/plain; charset=utf-8", "ids within their ranges\n"};
  }
  return std::move(args);
}

// POST /debug/cut?peer=N and /debug/heal?peer=N: the replica plane to node N goes down (or comes back), as a cut
// network would (the metadata actor's plane drops its connection, dials and accepts nothing from it, loses what it
// sends it).
net::http_response debug_cut(const std::string& query, const metadata_actor_hdl& metadata, bool cut) {
  const std::string usage = cut ? "usage: POST /debug/cut?peer=N (a node id)\n" : "usage: POST /debug/heal?peer=N\n";
  auto parsed = query_numbers(query);
  if (!parsed || parsed->size() != 1 || !parsed->contains("peer") || parsed->at("peer") == 0) {
    return net::http_response{400, "text/plain; charset=utf-8", usage};
  }
  caf::anon_send(metadata, cut_atom::value, parsed->at("peer"), cut);
  return net::http_response{200, "text/plain; charset=utf-8", cut ? "cut off\n" : "healed\n"};
}

// POST /debug/stall?stream=S&topic=T&partition=P&ms=N: the partition's actor handles nothing for N ms (or until
// POST /debug/unstall?stream=S&topic=T&partition=P, which ends the stall at once).
net::http_response debug_stall(const std::string& query, const routing& routes, bool stall) {
  const std::string usage = stall
                                ? "usage: POST /debug/stall?stream=S&topic=T&partition=P&ms=N (ids, 1 <= N <= 60000)\n"
                                : "usage: POST /debug/unstall?stream=S&topic=T&partition=P (ids)\n";
  auto parsed = debug_args(query, usage);
  if (auto* refused = std::get_if<net::http_response>(&parsed)) {
    return std::move(*refused);
  }
  auto& args = std::get<std::map<std::string, std::uint64_t>>(parsed);
  if (stall && !args.contains("ms")) {
    return net::http_response{400, "text/plain; charset=utf-8", usage};
  }
  if (stall && (args["ms"] < 1 || args["ms"] > 60'000)) {
    return net::http_response{400, "text/plain; charset=utf-8", "ms is 1 to 60000; ids within their ranges\n"};
  }
  auto actor =
      routes.current()->partition(static_cast<std::uint32_t>(args["stream"]), static_cast<std::uint32_t>(args["topic"]),
                                  static_cast<std::uint32_t>(args["partition"]));
  if (!actor) {
    return net::http_response{404, "text/plain; charset=utf-8", "no such partition\n"};
  }
  if (!stall) {
    caf::anon_send(actor, unstall_atom::value);
    return net::http_response{200, "text/plain; charset=utf-8", "unstalled\n"};
  }
  caf::anon_send(actor, stall_atom::value, static_cast<std::uint32_t>(args["ms"]));
  return net::http_response{200, "text/plain; charset=utf-8", "stalled\n"};
}

// POST /debug/fail-syncs?stream=S&topic=T&partition=P&n=N: the partition's next N fdatasyncs report EIO.
net::http_response debug_fail_syncs(const std::string& query, const routing& routes) {
  const std::string usage = "usage: POST /debug/fail-syncs?stream=S&topic=T&partition=P&n=N (ids, 1 <= N <= 1000)\n";
  auto parsed = debug_args(query, usage);
  if (auto* refused = std::get_if<net::http_response>(&parsed)) {
    return std::move(*refused);
  }
  auto& args = std::get<std::map<std::string, std::uint64_t>>(parsed);
  if (!args.contains("n") || args["n"] < 1 || args["n"] > 1000) {
    return net::http_response{400, "text/plain; charset=utf-8", usage};
  }
  auto actor =
      routes.current()->partition(static_cast<std::uint32_t>(args["stream"]), static_cast<std::uint32_t>(args["topic"]),
                                  static_cast<std::uint32_t>(args["partition"]));
  if (!actor) {
    return net::http_response{404, "text/plain; charset=utf-8", "no such partition\n"};
  }
  caf::anon_send(actor, fail_syncs_atom::value, static_cast<std::uint32_t>(args["n"]));
  return net::http_response{200, "text/plain; charset=utf-8", "the next syncs fail\n"};
}

net::http_response monitoring(const std::string& method, const std::string& target, runtime& rt,
                              std::chrono::steady_clock::time_point started,
                              const std::atomic<std::uint32_t>& connections, const routing& routes,
                              const cluster_board& board, const metadata_actor_hdl& metadata, bool failure_injection,
                              const series_limits& limits) {
  const auto path = target.substr(0, target.find('?'));
  if (method == "POST") {
    if (failure_injection && (path == "/debug/stall" || path == "/debug/unstall")) {
      return debug_stall(target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1), routes,
                         path == "/debug/stall");
    }
    if (failure_injection && (path == "/debug/cut" || path == "/debug/heal")) {
      return debug_cut(target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1), metadata,
                       path == "/debug/cut");
    }
    if (failure_injection && path == "/debug/fail-syncs") {
      return debug_fail_syncs(target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1), routes);
    }
    return net::http_response{405, "text/plain; charset=utf-8",
                              failure_injection
                                  ? "POST serves /debug/stall, /debug/unstall, /debug/fail-syncs, /debug/cut and "
                                    "/debug/heal only\n"
                                  : "POST serves nothing (debug.failure_injection is off)\n"};
  }
  if (path == "/healthz") {
    return net::http_response{200, "text/plain; charset=utf-8", "ok\n"};
  }
  if (path == "/ui" || path == "/ui/") {
    return net::http_response{200, "text/html; charset=utf-8", std::string(dashboard_html())};
  }
  if (path == "/ui/uplot.js") {
    return net::http_response{200, "text/javascript; charset=utf-8", std::string(dashboard_uplot_js())};
  }
  if (path == "/api/cluster") {
    return net::http_response{200, "application/json", render_cluster_json(*board.current())};
  }
  if (path == "/ui/uplot.css") {
    return net::http_response{200, "text/css; charset=utf-8", std::string(dashboard_uplot_css())};
  }
  auto actors = metrics_registry::instance().snapshot();
  const auto table = routes.current();  // names of now (a stream or topic may have been renamed)
  name_samples(actors, *table->view);
  std::vector<shard_sample> shards(rt.shard_count());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto& st = rt.shard_at(i).stats();
    shards[i].index = i;
    shards[i].busy_ns = metrics_registry::instance().retired_busy_ns(i);
    shards[i].jobs_run = st.jobs_run.load(std::memory_order_relaxed);
    shards[i].run_queue = st.run_queue_length.load(std::memory_order_relaxed);
    shards[i].completions = st.completions.load(std::memory_order_relaxed);
    shards[i].submissions = st.submissions.load(std::memory_order_relaxed);
    shards[i].inline_syncs = st.inline_syncs.load(std::memory_order_relaxed);
    shards[i].in_flight = st.in_flight.load(std::memory_order_relaxed);
    shards[i].pool_cached_bytes = st.pool_cached_bytes.load(std::memory_order_relaxed);
    shards[i].pool_outstanding = st.pool_outstanding.load(std::memory_order_relaxed);
    shards[i].open_files = st.open_files.load(std::memory_order_relaxed);
    shards[i].open_file_evictions = st.open_file_evictions.load(std::memory_order_relaxed);
    shards[i].timers_fired = st.timers_fired.load(std::memory_order_relaxed);
    shards[i].sleeps = st.sleeps.load(std::memory_order_relaxed);
    shards[i].wakes_sent = st.wakes_sent.load(std::memory_order_relaxed);
  }
  for (const auto& a : actors) {
    if (a.shard < shards.size()) {
      ++shards[a.shard].actors;
      shards[a.shard].busy_ns += a.busy_ns;
    }
  }
  if (path == "/api/actors") {
    return net::http_response{200, "application/json", render_actors_json(actors)};
  }
  if (path == "/api/partitions") {
    return net::http_response{200, "application/json", render_partitions_json(actors)};
  }
  if (path == "/api/topics") {
    return net::http_response{200, "application/json",
                              render_topics_json(actors, node_totals_of(*table->view, connections.load()))};
  }
  if (path == "/api/shards") {
    return net::http_response{200, "application/json", render_shards_json(shards)};
  }
  if (path == "/metrics") {
    // GET /metrics?stream=S&topic=T: one topic's partitions and groups only, under the same series limits (so as
    // bounded as the whole page; a topic within partition_series_max gets one series per partition).
    if (const auto q = target.find('?'); q != std::string::npos) {
      const auto args = query_numbers(target.substr(q + 1));
      if (!args) {
        return net::http_response{400, "text/plain; charset=utf-8", args.error().detail()};
      }
      if (args->size() != 2 || !args->contains("stream") || !args->contains("topic") ||
          args->at("stream") >= stream_ids_max || args->at("topic") >= topic_ids_max) {
        return net::http_response{400, "text/plain; charset=utf-8",
                                  "usage: GET /metrics or GET /metrics?stream=S&topic=T (ids)\n"};
      }
      const auto stream = static_cast<std::uint32_t>(args->at("stream"));
      const auto topic = static_cast<std::uint32_t>(args->at("topic"));
      std::erase_if(actors, [stream, topic](const actor_sample& a) {
        const bool partition = a.partition && a.partition->stream_id == stream && a.partition->topic_id == topic;
        const bool group = a.group && a.group->stream_id == stream && a.group->topic_id == topic;
        return !partition && !group;
      });
      shards.clear();
    }
    process_sample p;
    p.uptime_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long size = 0;
      unsigned long resident = 0;
      if (std::fscanf(f, "%lu %lu", &size, &resident) == 2) {
        p.resident_bytes = static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
      }
      std::fclose(f);
    }
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++p.open_files;
    }
    p.connections = connections.load();
    return net::http_response{
        200, "text/plain; version=0.0.4; charset=utf-8",
        render_prometheus(actors, shards, p, limits) + render_cluster_prometheus(*board.current())};
  }
  return net::http_response{
      404, "text/plain; charset=utf-8",
      "not found: try /ui, /metrics, /healthz, /api/actors, /api/partitions, /api/topics, /api/shards or "
      "/api/cluster\n"};
}
}  // namespace
std::size_t broker::shards() const noexcept {
  return impl_->rt ? impl_->rt->shard_count() : 0;
}

namespace {
// What a start-up has claimed before recovery: the directories and the lock file it created, the lock, the two
// listening sockets. Phase 2 of broker::start (see broker.h); release() undoes it exactly, so a start that fails
// before recovery leaves the data directory as it found it.
struct claim {
  std::vector<std::string> dirs_created;  // deepest first
  std::string lock_path;
  bool lock_created = false;
  int lock_fd = -1;

  // Unlinks what this start created (the lock file while still holding its lock, so that no other start holds a
  // lock on the unlinked file: see take_lock), then the directories it created, deepest first; rmdir leaves any
  // directory that is not empty.
  void release() {
    if (lock_fd >= 0) {
      if (lock_created) {
        ::unlink(lock_path.c_str());
      }
      ::flock(lock_fd, LOCK_UN);
      ::close(lock_fd);
      lock_fd = -1;
    }
    for (const auto& d : dirs_created) {
      ::rmdir(d.c_str());
    }
    dirs_created.clear();
  }
};

// The directories on the way to `path` that do not exist yet, deepest first.
std::vector<std::string> missing_dirs(const std::string& path) {
  std::vector<std::string> out;
  std::filesystem::path at = std::filesystem::path(path).lexically_normal();
  if (!at.has_filename()) {
    at = at.parent_path();  // "dir/" names dir
  }
  std::error_code ec;
  for (; !at.empty() && at != at.root_path(); at = at.parent_path()) {
    if (std::filesystem::exists(at, ec) || ec) {
      break;  // "." and ".." exist, so a relative path stops there at the latest
    }
    out.push_back(at.string());
  }
  return out;
}

// Locks <data>/runtime/lock. A lock held on a file that was meanwhile unlinked (a failing start on a fresh directory
// removes the lock file it created) protects nothing: take it again, on the file the path names now.
expected<void> take_lock(claim& c, const std::string& data_dir) {
  constexpr int lock_attempts_max = 8;
  for (int attempt = 0; attempt < lock_attempts_max; ++attempt) {
    RILL_ASSERT(c.lock_fd < 0);
    c.lock_created = false;
    int fd = ::open(c.lock_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      c.lock_created = true;
    } else if (errno == EEXIST) {
      fd = ::open(c.lock_path.c_str(), O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
      if (errno == ENOENT) {
        continue;  // unlinked between the two opens
      }
      return fail(fmt::format("server.data_dir = {}: {}: {}", data_dir, c.lock_path, std::strerror(errno)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      // Someone else holds the lock, on this file even if this start created it (opened between our open and our
      // flock): it is theirs now, and stays.
      const int e = errno;
      ::close(fd);
      c.lock_created = false;
      return fail(fmt::format("server.data_dir = {}: {}", data_dir,
                              e == EWOULDBLOCK ? "another rilld is using this data directory" : std::strerror(e)));
    }
    struct stat held {};
    struct stat named {};
    if (::fstat(fd, &held) == 0 && ::stat(c.lock_path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      c.lock_fd = fd;
      return {};
    }
    ::close(fd);  // the file was unlinked under us: try the one there now
  }
  return fail(
      fmt::format("server.data_dir = {}: {} keeps being replaced; is another rilld starting?", data_dir, c.lock_path));
}

consensus::wanted_identity wanted_of(const config::server_config& c) {
  consensus::wanted_identity w;
  w.cluster_id = c.cluster_id;
  w.node_id = c.node_id;
  for (const auto& m : c.members) {
    w.members.push_back(m.node_id);
  }
  if (w.members.size() == 1 && w.members[0] == c.node_id) {
    w.members.clear();  // a members list of this node alone is a node alone
  }
  return w;
}

// A cluster id for a node alone that names none: random, never 0.
std::uint64_t new_cluster_id() {
  std::random_device rd;
  std::uint64_t id = 0;
  while (id == 0 || id > limits::cluster_id_limit) {
    id = ((std::uint64_t{rd()} << 32) | rd()) & limits::cluster_id_limit;
  }
  return id;
}

// Whether the data directory holds a node's data already (its metadata group), identity or not.
bool holds_data(const std::string& data_dir) {
  std::error_code ec;
  return std::filesystem::exists(storage::join_path(data_dir, "metadata/superblock"), ec);
}

// The identity check of a start (broker.h, phase 2): what to start as, or why not.
expected<consensus::identity_verdict> judge_start(storage::io::engine& e, const config::server_config& c) {
  RILL_TRY(found, run_sync(e, consensus::read_node_identity(e, c.data_dir)));
  auto judged = consensus::judge_identity(found, wanted_of(c), holds_data(c.data_dir), new_cluster_id());
  if (!judged) {
    return fail(fmt::format("server.data_dir = {}: {}", c.data_dir, judged.error().detail()));
  }
  return std::move(*judged);
}

// Creates <data>/runtime/ and takes its lock (what a start and a format claim first); a failure releases what it
// created.
expected<void> claim_directory(claim& c, storage::io::engine& e, const std::string& data_dir) {
  const std::string runtime_dir = storage::join_path(data_dir, "runtime");
  c.dirs_created = missing_dirs(runtime_dir);
  c.lock_path = storage::join_path(runtime_dir, "lock");
  if (auto made = run_sync(e, storage::make_dirs(e, runtime_dir)); !made) {
    c.release();
    return unexpected(std::move(made).error());
  }
  if (auto locked = take_lock(c, data_dir); !locked) {
    c.release();
    return unexpected(std::move(locked).error());
  }
  return {};
}
}  // namespace

expected<format_result> broker::format(const config::server_config& cfg, bool recover) {
  storage::io::sync_engine sync;
  claim c;
  RILL_TRY_VOID(claim_directory(c, sync, cfg.data_dir));
  auto found = run_sync(sync, consensus::read_node_identity(sync, cfg.data_dir));
  if (!found) {
    c.release();
    return unexpected(std::move(found).error());
  }
  auto id = consensus::identity_to_format(*found, wanted_of(cfg), holds_data(cfg.data_dir), recover, new_cluster_id());
  if (!id) {
    c.release();
    return unexpected(std::move(id).error());
  }
  if (auto written = run_sync(sync, consensus::write_node_identity(sync, cfg.data_dir, *id)); !written) {
    c.release();
    return unexpected(std::move(written).error());
  }
  c.dirs_created.clear();  // the directory is formatted: it stays
  c.release();
  return format_result{id->cluster_id, id->node_id, id->members, id->recovering};
}

expected<std::unique_ptr<broker>> broker::start(config::server_config cfg) {
  auto p = std::make_unique<impl>();
  p->config = std::move(cfg);
  RILL_ASSERT(!p->config.data_dir.empty(), "the config builder refuses an empty server.data_dir");
  p->reporter = std::make_unique<stderr_reporter>(p->config.level);
  auto* reporter = p->reporter.get();
  const net::listen_retry_callback on_retry = [reporter](const std::string& what) { reporter->notice(what); };

  // Phase 1, validate: everything that needs no disk and no socket. Nothing is touched yet.
  RILL_TRY_VOID(config::fit_descriptor_budget(p->config));  // the soft RLIMIT_NOFILE raised, the limits checked
  RILL_TRY(spec, config::parse_cpu_allocation(p->config.cpu_allocation));
  RILL_TRY(cpus, config::resolve_cpu_allocation(spec, config::machine_topology::detect()));

  // Phase 2, claim: the data directory's lock and every listening socket. A failure here undoes the claim (the lock
  // file and directories this start created are removed), so it writes nothing to the data directory.
  storage::io::sync_engine sync;
  const std::string runtime_dir = storage::join_path(p->config.data_dir, "runtime");
  claim c;
  RILL_TRY_VOID(claim_directory(c, sync, p->config.data_dir));
  auto identity = judge_start(sync, p->config);
  if (!identity) {
    c.release();
    return unexpected(std::move(identity).error());
  }
  auto client_socket = net::listen_tcp(p->config.tcp_address, "network.tcp_address", 1024, on_retry);
  if (!client_socket) {
    c.release();
    return unexpected(std::move(client_socket).error());
  }
  auto http = net::http_server::bind(p->config.http_address, on_retry);
  if (!http) {
    ::close(client_socket->first);
    c.release();
    return unexpected(std::move(http).error());
  }
  // A member of a cluster of several nodes: the replica plane's socket, and every peer's address resolved.
  if (!identity->use.members.empty()) {
    auto fail_claim = [&](rill::error e) {
      ::close(client_socket->first);
      p->http.reset();
      c.release();
      return unexpected(std::move(e));
    };
    auto replica_socket = net::listen_tcp(p->config.replica_address, "network.replica_address", 64, on_retry);
    if (!replica_socket) {
      return fail_claim(std::move(replica_socket).error());
    }
    metadata_cluster& mc = p->cluster;
    mc.replica_fd = replica_socket->first;
    mc.cluster_id = identity->use.cluster_id;
    mc.node_id = identity->use.node_id;
    mc.members = identity->use.members;
    mc.recovering = identity->use.recovering;
    mc.topics_lost_through_ms = identity->use.topics_lost_through_ms;
    std::vector<consensus::peer_member> digest;
    for (const auto& m : p->config.members) {
      digest.push_back({m.node_id, m.replica_address.to_string()});
      if (m.node_id == mc.node_id) {
        continue;
      }
      auto peer = consensus::resolve_peer(m.node_id, m.replica_address.host, m.replica_address.port);
      if (!peer) {
        ::close(mc.replica_fd);
        return fail_claim(rill::error(config::make_error_code(config::errc::bad_value),
                                      "cluster.members: " + peer.error().message()));
      }
      mc.peers.push_back(std::move(*peer));
    }
    mc.members_digest = consensus::members_digest(std::move(digest));
    p->metadata_svc.cluster = &mc;
    p->group_svc.node_id = mc.node_id;
    p->metadata_svc.advertised_address = p->config.advertised_address.host.empty()
                                             ? client_socket->second.to_string()
                                             : p->config.advertised_address.to_string();
  }
  p->lock_fd = c.lock_fd;  // the broker holds the lock from here on; the lock file stays
  p->listen_fd = client_socket->first;
  p->bound = client_socket->second;
  p->http = std::move(*http);
  p->http_bound = p->http->address();

  // Phase 3, recover: a node alone's first start formats its directory (its identity), the shards start, the
  // metadata and every partition are recovered (a fresh directory is initialised). Connections the kernel queues
  // meanwhile wait; none is accepted.
  if (identity->format_alone) {
    if (auto written = run_sync(sync, consensus::write_node_identity(sync, p->config.data_dir, identity->use));
        !written) {
      broker b(std::move(p));
      b.stop();
      return unexpected(std::move(written).error());
    }
  }
  runtime_options ro;
  ro.cpus = cpus;
  ro.pin = p->config.pin_cores;
  ro.max_throughput = p->config.max_throughput;
  ro.inline_syncs = p->config.inline_syncs;
  ro.open_files_max = p->config.limits.open_files_max;
  timing_enabled().store(p->config.actor_metrics);
  p->rt = std::make_unique<runtime>(ro);

  p->partition_svc.clk = &g_clock;
  p->partition_svc.stamps_from = elapsed_clock::anchor_of(g_clock);
  p->partition_svc.reporter = reporter;
  p->partition_svc.long_poll_wait_ms_max = p->config.long_poll_wait_ms_max;
  p->partition_svc.retention_interval = std::chrono::milliseconds(p->config.retention_check_ms);
  p->partition_svc.consumers_per_partition_max = p->config.limits.consumers_per_partition_max;
  p->partition_svc.producers_per_partition_max = p->config.limits.producers_per_partition_max;
  p->partition_svc.producer_expiry_ms = p->config.producer_expiry_ms;
  p->partition_svc.links = &p->links;
  p->metadata_svc.links = &p->links;
  std::promise<std::pair<bool, std::string>> ready;
  auto ready_future = ready.get_future();
  p->metadata_svc.config = &p->config;
  p->metadata_svc.routes = &p->routes;
  p->metadata_svc.partitions = &p->partition_svc;
  p->metadata_svc.partition_journal_slots = static_cast<std::uint32_t>(p->config.partition_journal_slots);
  p->group_svc.clk = &g_clock;
  p->group_svc.reporter = reporter;
  p->group_svc.routes = &p->routes;
  p->metadata_svc.groups = &p->group_svc;
  p->metadata_svc.shards = p->rt->shard_count();
  p->metadata_svc.board = &p->board;
  p->metadata_svc.cluster_id = identity->use.cluster_id;
  if (p->metadata_svc.advertised_address.empty()) {
    p->metadata_svc.advertised_address = p->bound.to_string();
  }
  p->metadata_svc.on_ready = [&ready](bool ok, const std::string& why) { ready.set_value({ok, why}); };
  p->metadata = p->rt->system().spawn<metadata_actor>(&p->metadata_svc);
  const auto [ok, why] = ready_future.get();
  p->metadata_svc.on_ready = nullptr;
  if (!ok) {
    broker b(std::move(p));
    b.stop();
    return fail("metadata recovery failed: " + why);
  }

  // The effective configuration, with the addresses actually bound: the last step that can fail.
  config::server_config effective = p->config;
  effective.tcp_address = p->bound;
  effective.http_address = p->http_bound;
  const std::string text = config::render_toml(effective);
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data()) + text.size());
  if (auto written =
          run_sync(sync, storage::write_file_atomic(sync, runtime_dir, "current_config.toml", std::move(bytes)));
      !written) {
    if (written.error().code() != storage::errc::no_space) {
      broker b(std::move(p));
      b.stop();
      return unexpected(std::move(written).error());
    }
    // A full disk must not keep rilld from starting and serving reads (and deletes, which free space): the file is
    // informational. The one of an earlier start goes (its port may be stale; removing it frees its blocks).
    (void)run_sync(sync, storage::unlink_file(sync, storage::join_path(runtime_dir, "current_config.toml"), true));
    (void)run_sync(sync, storage::unlink_file(sync, storage::join_path(runtime_dir, "current_config.toml.tmp"), true));
    reporter->notice("the disk is full: " + written.error().message() +
                     "; runtime/current_config.toml is not written (the serving line names the addresses)");
  }

  // Phase 4, accept: from here on nothing fails, so no client is ever served by a start that then fails.
  p->connection_svc.config = &p->config;
  p->connection_svc.routes = &p->routes;
  p->connection_svc.metadata = p->metadata;
  p->connection_svc.connections = &p->connections;
  p->connection_svc.requests_inflight = &p->requests_inflight;
  p->connection_svc.reporter = reporter;
  p->connection_svc.cluster_member = p->metadata_svc.cluster != nullptr;
  p->listener = p->rt->system().spawn<listener_actor>(p->listen_fd, p->rt->shard_count(), &p->connection_svc);
  p->listen_fd = -1;  // the listener owns it
  {
    auto* rt = p->rt.get();
    const auto started = p->started;
    const auto* connections = &p->connections;
    const auto* routes = &p->routes;
    const auto* board = &p->board;
    const auto metadata = p->metadata;
    const bool injection = p->config.failure_injection;
    const series_limits limits{p->config.partition_series_max, p->config.actor_series_max};
    p->http->serve([rt, started, connections, routes, board, metadata, injection, limits](const std::string& method,
                                                                                          const std::string& t) {
      return monitoring(method, t, *rt, started, *connections, *routes, *board, metadata, injection, limits);
    });
  }
  return std::unique_ptr<broker>(new broker(std::move(p)));
}

void broker::stop() {
  if (!impl_ || impl_->stopped) {
    return;
  }
  impl_->stopped = true;
  if (impl_->http) {
    impl_->http->stop();  // first: it reads the runtime's shards
  }
  if (impl_->rt) {
    caf::scoped_actor self{impl_->rt->system()};
    if (impl_->listener) {
      self->request(impl_->listener, std::chrono::seconds(10), stop_atom::value)
          .receive([](outcome&) {}, [](caf::error&) {});
    }
    // Connections read no new requests now. Parked long polls are answered with what there is, at once.
    for (const auto& [ns, partition] : impl_->routes.current()->partitions) {
      self->send(partition, drain_atom::value);
    }
    auto wait_until = [](int rounds, auto&& done) {
      for (int i = 0; i < rounds && !done(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
    };
    // Requests being served finish (a produce waiting for its fsync is acknowledged): up to 5 s.
    wait_until(200, [&] { return impl_->requests_inflight.load() == 0; });
    // Partitions close, then the metadata log.
    if (impl_->metadata) {
      self->request(impl_->metadata, std::chrono::seconds(60), close_atom::value)
          .receive([](outcome&) {}, [](caf::error&) {});
    }
    // Connections flush their replies and close: up to 1 s; then whoever is left (a client that does not read its
    // replies) is dropped.
    wait_until(40, [&] { return impl_->connections.load() == 0; });
    if (impl_->listener) {
      self->send(impl_->listener, force_atom::value);
    }
    wait_until(200, [&] { return impl_->connections.load() == 0; });
  }
  impl_->rt.reset();  // joins the shards
  if (impl_->listen_fd >= 0) {
    ::close(impl_->listen_fd);  // never accepted on: the connections the kernel queued are reset
    impl_->listen_fd = -1;
  }
  if (impl_->lock_fd >= 0) {
    ::flock(impl_->lock_fd, LOCK_UN);
    ::close(impl_->lock_fd);
    impl_->lock_fd = -1;
  }
}

}  // namespace rill::actors
