// rill-bench: load generator and micro-benchmarks.
//
//   rill-bench storage --dir DIR --record-size B --batch-records N --batches K --sync every-batch|none [--json]
//       Appends K batches of N records of B bytes to a fresh partition in DIR through the io_uring engine and the
//       real partition log; reports append throughput (records/s, MB/s), append latency percentiles (p50, p99,
//       p999) and read-back throughput. every-batch: sync before ack (one fdatasync per append with one append in
//       flight, or per group with --inflight > 1). none: no sync until a final flush, included in the time.
//   rill-bench recovery --dir DIR [--full-scan] [--json]
//       Opens an existing partition and reports how long recovery took (--full-scan: every segment scanned and
//       its index rebuilt, as if no superblock frontier existed).
//   rill-bench produce-data --dir DIR --bytes N
//       Writes N bytes of 1 KiB records into a fresh partition (input for the recovery benchmark).
//   rill-bench produce|consume|produce-consume --server HOST:PORT --producers N --message-size B --batch N
//              --duration S [--rate R] [--consumers N] [--streams N --partitions N] [--sync before-ack|none]
//              [--replication-factor N] (--server may list several nodes: a,b,c)
//              [--compression none|zstd] [--partitioning fixed|round-robin|key --keys K] [--warmup S] [--json]
//              [--output FILE.csv] [--keep]
//       Load against a running rilld through the client library (tools/load/load.h says what is measured and how);
//       creates its streams and deletes them afterwards unless --keep.
//   rill-bench durable-floor --dir DIR [--bytes N] [--duration S] [--json]
//       What this machine allows a durable produce with one batch of N bytes in flight, with no broker at all:
//       loopback round trips, append + fdatasync, and the two together (tools/durable_floor.h).
//   rill-bench idle-connections --server HOST:PORT --monitor HOST:PORT --pid PID --connections N [--ping] [--json]
//       The memory a running rilld (on this machine) spends per idle connection: its RSS before and after N idle
//       connections, and with --ping after one request on each (tools/idle_connections.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "base/clock.h"
#include "base/histogram.h"
#include "net/client.h"
#include "storage/buffer_pool.h"
#include "storage/io/uring_engine.h"
#include "storage/partition_log.h"
#include "storage/record_batch_builder.h"
#include "tools/durable_floor.h"
#include "tools/idle_connections.h"
#include "tools/load/load.h"
#include "tools/load/rill_driver.h"

using namespace rill;
using namespace rill::storage;
using steady = std::chrono::steady_clock;

namespace {

class stderr_reporter final : public log_reporter {
 public:
  void corruption(const std::string& file, std::uint64_t position, const std::string& problem,
                  const std::string& action) override {
    fmt::print(stderr, "corruption: {} at byte {}: {} ({})\n", file, position, problem, action);
  }
  void notice(const std::string& what) override { fmt::print(stderr, "notice: {}\n", what); }
};

template <class T>
T drive(io::engine& e, task<T> t) {
  std::optional<T> out;
  spawn(std::move(t), [&](T v) { out.emplace(std::move(v)); });
  while (!out) {
    if (e.in_flight() == 0 && !out) {
      fmt::print(stderr, "rill-bench: task stalled with nothing in flight\n");
      std::exit(3);
    }
    e.poll(true);
  }
  return std::move(*out);
}

[[noreturn]] void die(const std::string& what, const rill::error& e) {
  fmt::print(stderr, "rill-bench: {}: {}\n", what, e.message());
  std::exit(1);
}

// What every benchmark needs around one partition log: an io_uring engine, the system clock, a buffer pool and a
// reporter that prints to stderr. Declared in this order so that the pool outlives the log's buffers.
struct bench_env {
  bench_env() {
    auto e = io::uring_engine::create(256);
    if (!e) {
      die("io_uring", e.error());
    }
    engine = std::move(*e);
  }
  std::unique_ptr<io::uring_engine> engine;
  system_clock_source clk;
  buffer_pool pool;
  stderr_reporter reporter;
};

std::vector<std::byte> make_batch(std::size_t record_bytes, int records) {
  batch_builder b;
  std::string value(record_bytes, 'v');
  for (int i = 0; i < records; ++i) {
    // Vary the bytes a little so nothing downstream can shortcut identical records.
    value[i % record_bytes] = static_cast<char>('a' + i % 26);
    b.add_value(value);
  }
  return *b.build();
}

// A percentile of a latency histogram in nanoseconds, in microseconds.
double percentile_us(const histogram& h, double p) {
  return static_cast<double>(h.percentile(p)) / 1000.0;
}

struct storage_args {
  std::string dir;
  std::size_t record_size = 1024;
  int batch_records = 100;
  std::uint64_t batches = 10000;
  std::string sync = "every-batch";
  int inflight = 1;
  std::uint64_t segment_bytes = 1ull << 30;
  std::uint64_t preallocate_bytes = 0;
  std::string writes = "blocking";
  bool json = false;
};

int run_storage(const storage_args& a) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(a.dir, ec);
  bench_env env;
  auto& engine = *env.engine;
  log_options opts;
  opts.config.segment_bytes = a.segment_bytes;
  opts.config.max_message_bytes = 64 * 1024 * 1024;
  opts.config.preallocate_bytes = a.preallocate_bytes;
  opts.config.flush_bytes_max = 64 * 1024 * 1024;
  opts.config.pending_bytes_max = 1024 * 1024 * 1024;
  opts.blocking_writes = a.writes == "blocking";
  if (a.sync == "every-batch") {
    opts.config.durability = config::durability_mode::sync_before_ack;
  } else if (a.sync == "none") {
    opts.config.durability = config::durability_mode::every_records;
    opts.config.sync_every_records = 1'000'000'000;
    opts.background_sync = false;  // none: no fdatasync at all
  } else {
    fmt::print(stderr, "rill-bench: --sync must be every-batch or none, not {}\n", a.sync);
    return 2;
  }
  auto log_or = drive(engine, partition_log::open(engine, env.pool, env.clk, env.reporter, a.dir, opts));
  if (!log_or) {
    die("open " + a.dir, log_or.error());
  }
  auto log = std::move(*log_or);
  const auto batch = make_batch(a.record_size, a.batch_records);
  const std::uint64_t bytes_per_batch = batch.size();
  // Each append copies the batch into a buffer of its own, timed, as rilld's router copies each batch from the
  // connection's receive buffer into the write buffer (the one copy of the produce path). Copies prepared before
  // the clock (up to 1 GiB of them, as this benchmark did before) make every write read memory no cache holds:
  // 220 us per 100 KiB append at the median against 40 us from a just-written buffer, on this machine, which
  // measured the DRAM rather than the log (fio, the comparison, writes from one buffer).
  histogram latencies_ns;  // every append counted (base/histogram.h), not a sample
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
  int inflight = 0;
  bool failed = false;
  const auto start = steady::now();
  auto submit_one = [&]() {
    const auto t0 = steady::now();
    ++submitted;
    ++inflight;
    std::vector<std::byte> bytes = batch;
    spawn(log->append(std::move(bytes)), [&, t0](expected<append_result> r) {
      --inflight;
      ++completed;
      if (!r) {
        fmt::print(stderr, "rill-bench: append: {}\n", r.error().message());
        failed = true;
        return;
      }
      latencies_ns.record(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0).count()));
    });
  };
  while (completed < a.batches && !failed) {
    while (inflight < a.inflight && submitted < a.batches) {
      submit_one();
    }
    engine.poll(true);
  }
  while (inflight > 0) {
    engine.poll(true);
  }
  if (failed) {
    (void)drive(engine, log->close());
    return 1;
  }
  auto flushed = drive(engine, log->flush());
  if (!flushed) {
    die("flush", flushed.error());
  }
  const double append_s = std::chrono::duration<double>(steady::now() - start).count();

  // Read everything back.
  const auto read_start = steady::now();
  offset_t at = log->log_start();
  std::uint64_t read_bytes = 0;
  std::uint64_t read_records = 0;
  for (;;) {
    read_request req;
    req.offset = at;
    req.max_bytes = 1024 * 1024;
    auto r = drive(engine, log->read(req));
    if (!r) {
      die("read", r.error());
    }
    if (r->batches == 0) {
      break;
    }
    read_bytes += r->bytes.size();
    read_records += r->records;
    at = r->next_offset;
  }
  const double read_s = std::chrono::duration<double>(steady::now() - read_start).count();
  const auto stats = log->stats();
  (void)drive(engine, log->close());

  const double records = static_cast<double>(a.batches) * a.batch_records;
  const double mb = static_cast<double>(a.batches * bytes_per_batch) / 1e6;
  const double p50 = percentile_us(latencies_ns, 50);
  const double p99 = percentile_us(latencies_ns, 99);
  const double p999 = percentile_us(latencies_ns, 99.9);
  if (a.json) {
    fmt::print(
        "{{\"bench\":\"storage\",\"sync\":\"{}\",\"record_size\":{},\"batch_records\":{},\"batches\":{},"
        "\"inflight\":{},\"batch_bytes\":{},\"append_records_per_s\":{:.0f},\"append_mb_per_s\":{:.2f},"
        "\"append_latency_us_p50\":{:.1f},\"append_latency_us_p99\":{:.1f},\"append_latency_us_p999\":{:.1f},"
        "\"syncs\":{},\"flushes\":{},\"read_records_per_s\":{:.0f},\"read_mb_per_s\":{:.2f}}}\n",
        a.sync, a.record_size, a.batch_records, a.batches, a.inflight, bytes_per_batch, records / append_s,
        mb / append_s, p50, p99, p999, stats.syncs, stats.flushes, static_cast<double>(read_records) / read_s,
        static_cast<double>(read_bytes) / 1e6 / read_s);
  } else {
    fmt::print("append: {:.0f} records/s, {:.2f} MB/s ({} batches of {} bytes, sync {}, {} in flight)\n",
               records / append_s, mb / append_s, a.batches, bytes_per_batch, a.sync, a.inflight);
    fmt::print("append latency: p50 {:.1f} us, p99 {:.1f} us, p999 {:.1f} us; {} fdatasyncs, {} writes\n", p50, p99,
               p999, stats.syncs, stats.flushes);
    fmt::print("read-back: {:.0f} records/s, {:.2f} MB/s\n", static_cast<double>(read_records) / read_s,
               static_cast<double>(read_bytes) / 1e6 / read_s);
  }
  return 0;
}

int run_produce_data(const std::string& dir, std::uint64_t bytes, std::uint64_t segment_bytes) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  bench_env env;
  auto& engine = *env.engine;
  log_options opts;
  opts.config.durability = config::durability_mode::every_records;
  opts.config.sync_every_records = 1'000'000'000;
  opts.background_sync = false;
  opts.config.segment_bytes = segment_bytes;
  opts.config.max_message_bytes = 4 * 1024 * 1024;
  auto log_or = drive(engine, partition_log::open(engine, env.pool, env.clk, env.reporter, dir, opts));
  if (!log_or) {
    die("open " + dir, log_or.error());
  }
  auto log = std::move(*log_or);
  const auto batch = make_batch(1024, 100);
  std::uint64_t written = 0;
  while (written < bytes) {
    auto r = drive(engine, log->append(batch));
    if (!r) {
      die("append", r.error());
    }
    written += batch.size();
  }
  (void)drive(engine, log->close());
  fmt::print("wrote {} bytes in {} segments to {}\n", written, log->segment_bases().size(), dir);
  return 0;
}

int run_recovery(const std::string& dir, bool full_scan, bool json) {
  bench_env env;
  auto& engine = *env.engine;
  log_options opts;
  opts.create = false;
  opts.scan_all_segments = full_scan;
  opts.config.max_message_bytes = 4 * 1024 * 1024;
  const auto t0 = steady::now();
  auto log_or = drive(engine, partition_log::open(engine, env.pool, env.clk, env.reporter, dir, opts));
  const double s = std::chrono::duration<double>(steady::now() - t0).count();
  if (!log_or) {
    die("open " + dir, log_or.error());
  }
  const auto st = (*log_or)->stats();
  (void)drive(engine, (*log_or)->close());
  if (json) {
    fmt::print("{{\"bench\":\"recovery\",\"full_scan\":{},\"segments\":{},\"bytes\":{},\"seconds\":{:.4f}}}\n",
               full_scan, st.segments, st.bytes, s);
  } else {
    fmt::print("recovery ({}): {} segments, {} bytes in {:.4f} s\n", full_scan ? "full scan" : "fast path", st.segments,
               st.bytes, s);
  }
  return 0;
}

}  // namespace

// rill-bench metadata: one client, one change at a time (a metadata change is committed, applied and carried out
// before it is answered): the rate and latency of creating, then of deleting, `changes` streams.
int run_metadata(const std::string& server, int changes, bool json) {
  net::client_options o;
  o.server = server;
  auto c = net::client::connect(o);
  if (!c) {
    fmt::print(stderr, "rill-bench: {}\n", c.error().message());
    return 1;
  }
  const std::string prefix = fmt::format("bench-{}-", std::chrono::steady_clock::now().time_since_epoch().count());
  auto phase = [&](const char* what, auto&& op) -> std::optional<std::pair<double, std::vector<double>>> {
    std::vector<double> ms;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < changes; ++i) {
      const auto s = std::chrono::steady_clock::now();
      if (auto r = op(prefix + std::to_string(i)); !r) {
        fmt::print(stderr, "rill-bench: {} {}: {}\n", what, i, r.error().message());
        return std::nullopt;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(ms.begin(), ms.end());
    return std::pair{changes / secs, ms};
  };
  auto created = phase("create", [&](const std::string& n) -> expected<void> {
    RILL_TRY_VOID((*c)->create_stream(n));
    return {};
  });
  auto deleted = created ? phase("delete", [&](const std::string& n) { return (*c)->delete_stream(net::by_name(n)); })
                         : std::nullopt;
  if (!created || !deleted) {
    return 1;
  }
  auto pct = [](const std::vector<double>& v, double q) { return v[static_cast<std::size_t>(q * (v.size() - 1))]; };
  if (json) {
    fmt::print(
        "{{\"server\":\"{}\",\"changes\":{},\"create_per_s\":{:.1f},\"create_p50_ms\":{:.3f},"
        "\"create_p99_ms\":{:.3f},\"delete_per_s\":{:.1f},\"delete_p50_ms\":{:.3f},\"delete_p99_ms\":{:.3f}}}\n",
        server, changes, created->first, pct(created->second, 0.5), pct(created->second, 0.99), deleted->first,
        pct(deleted->second, 0.5), pct(deleted->second, 0.99));
  } else {
    fmt::print(
        "{}: {} creates at {:.0f}/s (p50 {:.2f} ms, p99 {:.2f} ms), {} deletes at {:.0f}/s (p50 {:.2f} ms, "
        "p99 {:.2f} ms)\n",
        server, changes, created->first, pct(created->second, 0.5), pct(created->second, 0.99), changes, deleted->first,
        pct(deleted->second, 0.5), pct(deleted->second, 0.99));
  }
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"rill-bench: rill load generator and benchmarks"};
  app.require_subcommand(1);
  storage_args sa;
  auto* storage = app.add_subcommand("storage", "append and read-back throughput and latency of one partition log");
  storage->add_option("--dir", sa.dir, "partition directory (removed and recreated)")->required();
  storage->add_option("--record-size", sa.record_size, "bytes per record value")->check(CLI::Range(1, 16 << 20));
  storage->add_option("--batch-records", sa.batch_records, "records per batch")->check(CLI::Range(1, 1 << 20));
  storage->add_option("--batches", sa.batches, "batches to append")->check(CLI::Range(1ull, 1ull << 40));
  storage->add_option("--sync", sa.sync, "every-batch | none")->check(CLI::IsMember({"every-batch", "none"}));
  storage->add_option("--inflight", sa.inflight, "appends in flight at once (group commit)")
      ->check(CLI::Range(1, 4096));
  storage->add_option("--segment-bytes", sa.segment_bytes, "segment size");
  storage->add_option("--preallocate-bytes", sa.preallocate_bytes, "pre-write zeros this far ahead (sync every-batch)");
  storage
      ->add_option("--writes", sa.writes,
                   "unsynced writes: blocking (pwritev on the writer's thread) | ring (io_uring, a kernel worker)")
      ->check(CLI::IsMember({"blocking", "ring"}));
  storage->add_flag("--json", sa.json, "print one JSON object");

  std::string rdir;
  bool full_scan = false;
  bool rjson = false;
  auto* recovery = app.add_subcommand("recovery", "time the recovery of an existing partition");
  recovery->add_option("--dir", rdir, "partition directory")->required();
  recovery->add_flag("--full-scan", full_scan, "scan every segment in full (no fast path)");
  recovery->add_flag("--json", rjson, "print one JSON object");

  std::string pdir;
  std::uint64_t pbytes = 1ull << 30;
  std::uint64_t psegment = 1ull << 30;
  auto* produce = app.add_subcommand("produce-data", "fill a fresh partition with 1 KiB records");
  produce->add_option("--dir", pdir, "partition directory (removed and recreated)")->required();
  produce->add_option("--bytes", pbytes, "bytes to write");
  produce->add_option("--segment-bytes", psegment, "segment size");

  bench::idle_connections_options io;
  auto* idle = app.add_subcommand("idle-connections", "memory per idle connection of a running rilld");
  idle->add_option("--server", io.server, "rilld's client listener HOST:PORT")->required();
  idle->add_option("--monitor", io.monitor, "rilld's monitoring listener HOST:PORT")->required();
  idle->add_option("--pid", io.pid, "rilld's process id (its VmRSS is read)")->required();
  idle->add_option("--connections", io.connections, "idle connections to open")->check(CLI::Range(1, 1 << 20));
  idle->add_flag("--ping", io.ping, "then one ping on each connection, and measure again");
  idle->add_option("--accept-timeout", io.accept_timeout_s, "seconds to wait for the server to count them all");
  idle->add_flag("--json", io.json, "print one JSON object");

  std::string mserver = "127.0.0.1:9420";
  int mchanges = 200;
  bool mjson = false;
  auto* meta = app.add_subcommand("metadata",
                                  "metadata changes per second through one node (a stream created, "
                                  "then deleted, one at a time)");
  meta->add_option("--server", mserver, "rilld's client listener HOST:PORT");
  meta->add_option("--changes", mchanges, "streams to create (and then delete)")->check(CLI::Range(1, 100000));
  meta->add_flag("--json", mjson, "print one JSON object");

  bench::durable_floor_options fo;
  auto* floor = app.add_subcommand("durable-floor",
                                   "loopback round trip + append + fdatasync per batch, no broker: the most durable "
                                   "batches per second with one in flight");
  floor->add_option("--dir", fo.dir, "directory on the disk to measure (a scratch file is written there)")->required();
  floor->add_option("--bytes", fo.bytes, "bytes per batch")->check(CLI::Range(1, 64 << 20));
  floor->add_option("--duration", fo.duration_s, "seconds per figure")->check(CLI::Range(0.1, 3600.0));
  floor->add_flag("--json", fo.json, "print one JSON object");

  // The load modes: one harness (tools/load) for rill and the peers under bench/peers.
  bench::load_options lo;
  const bench::load_commands load(app, lo);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*storage) {
    return run_storage(sa);
  }
  if (*floor) {
    return bench::run_durable_floor(fo);
  }
  if (*idle) {
    return bench::run_idle_connections(io);
  }
  if (*recovery) {
    return run_recovery(rdir, full_scan, rjson);
  }
  if (*meta) {
    return run_metadata(mserver, mchanges, mjson);
  }
  if (const auto mode = load.chosen()) {
    auto system = bench::make_rill_driver(lo);
    return bench::run_load(*mode, lo, *system);
  }
  return run_produce_data(pdir, pbytes, psegment);
}
