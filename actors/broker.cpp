#include "actors/broker.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include <fmt/core.h>

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
#include "config/descriptor_budget.h"
#include "config/errc.h"
#include "net/http_server.h"
#include "net/listen.h"
#include "storage/atomic_file.h"
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
  std::unique_ptr<stderr_reporter> reporter;
  routing routes;
  partition_services partition_svc;
  group_services group_svc;
  metadata_services metadata_svc;
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
// What /proc says about this process: resident bytes and open descriptors.
// POST /debug/stall?stream=S&topic=T&partition=P&ms=N: the partition's actor handles nothing for N ms.
net::http_response debug_stall(const std::string& query, const routing& routes) {
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
        return net::http_response{400, "text/plain; charset=utf-8",
                                  fmt::format("{} = '{}': expected a number\n", query.substr(at, eq - at), text)};
      }
      args[query.substr(at, eq - at)] = v;
    }
    at = end + 1;
  }
  for (const char* k : {"stream", "topic", "partition", "ms"}) {
    if (!args.contains(k)) {
      return net::http_response{400, "text/plain; charset=utf-8",
                                "usage: POST /debug/stall?stream=S&topic=T&partition=P&ms=N (ids, 1 <= N <= 60000)\n"};
    }
  }
  if (args["ms"] < 1 || args["ms"] > 60'000 || args["stream"] >= stream_ids_max || args["topic"] >= topic_ids_max ||
      args["partition"] >= partitions_max) {
    return net::http_response{400, "text/plain; charset=utf-8", "ms is 1 to 60000; ids within their ranges\n"};
  }
  auto actor =
      routes.current()->partition(static_cast<std::uint32_t>(args["stream"]), static_cast<std::uint32_t>(args["topic"]),
                                  static_cast<std::uint32_t>(args["partition"]));
  if (!actor) {
    return net::http_response{404, "text/plain; charset=utf-8", "no such partition\n"};
  }
  caf::anon_send(actor, stall_atom::value, static_cast<std::uint32_t>(args["ms"]));
  return net::http_response{200, "text/plain; charset=utf-8", "stalled\n"};
}

net::http_response monitoring(const std::string& method, const std::string& target, runtime& rt,
                              std::chrono::steady_clock::time_point started,
                              const std::atomic<std::uint32_t>& connections, const routing& routes,
                              bool failure_injection) {
  const auto path = target.substr(0, target.find('?'));
  if (method == "POST") {
    if (failure_injection && path == "/debug/stall") {
      return debug_stall(target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1), routes);
    }
    return net::http_response{405, "text/plain; charset=utf-8",
                              failure_injection ? "POST serves /debug/stall only\n"
                                                : "POST serves nothing (debug.failure_injection is off)\n"};
  }
  if (path == "/healthz") {
    return net::http_response{200, "text/plain; charset=utf-8", "ok\n"};
  }
  if (path == "/ui" || path == "/ui/") {
    return net::http_response{200, "text/html; charset=utf-8", std::string(dashboard_html())};
  }
  auto actors = metrics_registry::instance().snapshot();
  std::vector<shard_sample> shards(rt.shard_count());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto& st = rt.shard_at(i).stats();
    shards[i].index = i;
    shards[i].busy_ns = metrics_registry::instance().retired_busy_ns(i);
    shards[i].jobs_run = st.jobs_run.load(std::memory_order_relaxed);
    shards[i].run_queue = st.run_queue_length.load(std::memory_order_relaxed);
    shards[i].completions = st.completions.load(std::memory_order_relaxed);
    shards[i].submissions = st.submissions.load(std::memory_order_relaxed);
    shards[i].in_flight = st.in_flight.load(std::memory_order_relaxed);
    shards[i].pool_cached_bytes = st.pool_cached_bytes.load(std::memory_order_relaxed);
    shards[i].pool_outstanding = st.pool_outstanding.load(std::memory_order_relaxed);
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
  if (path == "/api/shards") {
    return net::http_response{200, "application/json", render_shards_json(shards)};
  }
  if (path == "/metrics") {
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
    return net::http_response{200, "text/plain; version=0.0.4; charset=utf-8", render_prometheus(actors, shards, p)};
  }
  return net::http_response{404, "text/plain; charset=utf-8",
                            "not found: try /ui, /metrics, /healthz, /api/actors, /api/partitions or /api/shards\n"};
}
}  // namespace
std::size_t broker::shards() const noexcept {
  return impl_->rt ? impl_->rt->shard_count() : 0;
}

expected<std::unique_ptr<broker>> broker::start(config::server_config cfg) {
  auto p = std::make_unique<impl>();
  p->config = std::move(cfg);
  RILL_TRY_VOID(config::fit_descriptor_budget(p->config));  // the soft RLIMIT_NOFILE raised, the limits checked
  // The data directory, and its lock.
  storage::io::sync_engine sync;
  const std::string runtime_dir = storage::join_path(p->config.data_dir, "runtime");
  RILL_TRY_VOID(run_sync(sync, storage::make_dirs(sync, runtime_dir)));
  const std::string lock_path = storage::join_path(runtime_dir, "lock");
  p->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p->lock_fd < 0 || ::flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (p->lock_fd >= 0) {
      ::close(p->lock_fd);
    }
    return fail(fmt::format("server.data_dir = {}: {}", p->config.data_dir,
                            e == EWOULDBLOCK ? "another rilld is using this data directory" : std::strerror(e)));
  }
  // CPUs.
  RILL_TRY(spec, config::parse_cpu_allocation(p->config.cpu_allocation));
  RILL_TRY(cpus, config::resolve_cpu_allocation(spec, config::machine_topology::detect()));
  // The listener socket first: a port in use stops startup before anything else happens.
  RILL_TRY(listener, net::listen_tcp(p->config.tcp_address, "network.tcp_address", 1024));
  p->bound = listener.second;
  runtime_options ro;
  ro.cpus = cpus;
  ro.pin = p->config.pin_cores;
  ro.max_throughput = p->config.max_throughput;
  timing_enabled().store(p->config.actor_metrics);
  p->rt = std::make_unique<runtime>(ro);

  p->partition_svc.clk = &g_clock;
  p->reporter = std::make_unique<stderr_reporter>(p->config.level);
  p->partition_svc.reporter = p->reporter.get();
  p->partition_svc.long_poll_wait_ms_max = p->config.long_poll_wait_ms_max;
  p->partition_svc.consumers_per_partition_max = p->config.limits.consumers_per_partition_max;
  std::promise<std::pair<bool, std::string>> ready;
  auto ready_future = ready.get_future();
  p->metadata_svc.config = &p->config;
  p->metadata_svc.routes = &p->routes;
  p->metadata_svc.partitions = &p->partition_svc;
  p->group_svc.clk = &g_clock;
  p->group_svc.reporter = p->reporter.get();
  p->group_svc.routes = &p->routes;
  p->metadata_svc.groups = &p->group_svc;
  p->metadata_svc.shards = p->rt->shard_count();
  p->metadata_svc.on_ready = [&ready](bool ok, const std::string& why) { ready.set_value({ok, why}); };
  p->metadata = p->rt->system().spawn<metadata_actor>(&p->metadata_svc);
  const auto [ok, why] = ready_future.get();
  p->metadata_svc.on_ready = nullptr;
  if (!ok) {
    ::close(listener.first);
    broker b(std::move(p));
    b.stop();
    return fail("metadata recovery failed: " + why);
  }
  p->connection_svc.config = &p->config;
  p->connection_svc.routes = &p->routes;
  p->connection_svc.metadata = p->metadata;
  p->connection_svc.connections = &p->connections;
  p->connection_svc.requests_inflight = &p->requests_inflight;
  p->listener = p->rt->system().spawn<listener_actor>(listener.first, p->rt->shard_count(), &p->connection_svc);
  // The monitoring listener, on a thread of its own.
  {
    auto* rt = p->rt.get();
    const auto started = p->started;
    const auto* connections = &p->connections;
    const auto* routes = &p->routes;
    const bool injection = p->config.failure_injection;
    auto http = net::http_server::start(p->config.http_address, [rt, started, connections, routes, injection](
                                                                    const std::string& method, const std::string& t) {
      return monitoring(method, t, *rt, started, *connections, *routes, injection);
    });
    if (!http) {
      broker b(std::move(p));
      b.stop();
      return unexpected(std::move(http).error());
    }
    p->http = std::move(*http);
    p->http_bound = p->http->address();
  }

  // The effective configuration, with the address actually bound.
  config::server_config effective = p->config;
  effective.tcp_address = p->bound;
  effective.http_address = p->http_bound;
  const std::string text = config::render_toml(effective);
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data()) + text.size());
  auto written = run_sync(sync, storage::write_file_atomic(sync, runtime_dir, "current_config.toml", std::move(bytes)));
  std::unique_ptr<broker> b(new broker(std::move(p)));
  if (!written) {
    b->stop();
    return unexpected(std::move(written).error());
  }
  return b;
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
  if (impl_->lock_fd >= 0) {
    ::flock(impl_->lock_fd, LOCK_UN);
    ::close(impl_->lock_fd);
    impl_->lock_fd = -1;
  }
}

}  // namespace rill::actors
