// rill-micro: Google Benchmark micro-benchmarks of the broker's hot paths, per produced batch or request:
//   crc32c            the checksum alone, by input size
//   batch_validate    batch_view::validate of a producer batch (length, magic, CRC-32C, record framing)
//   offset_assign     validate with crc_tail + stamp_batch: what a partition does to every produced batch before
//                     it is written (base offset, epoch, log-append time, CRC derived without a second pass)
//   index_floor       segment_index::floor, the sparse-index lookup that starts every poll, by index size
//   frame_encode      append_request of a produce request (protobuf header + the batch bytes)
//   frame_decode      next_frame_size + parse_request + parsing the protobuf header
//   metrics_render    render_prometheus of a node of N partitions, one series each or aggregated (synthetic
//                     samples: tests/actors/synthetic_samples.h); the counter page_bytes is the /metrics page's size
//   segment_read      a 1-batch read of a sealed segment through the io_uring engine, on a real file in $TMPDIR
//                     (page cache warm): cold=1 has the shard's file cache close the file first, so the read pays
//                     the reopen (storage/file_cache.h), cold=0 finds it open
// Run: build/bench/rill-micro [--benchmark_filter=REGEX]. Figures are per operation; bytes_per_second counts the
// batch or frame bytes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/runtime/metrics.h"
#include "base/random.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"
#include "storage/crc32c.h"
#include "storage/file_cache.h"
#include "storage/io/run.h"
#include "storage/io/uring_engine.h"
#include "storage/partition_log.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"
#include "storage/segment_index.h"
#include "tests/actors/synthetic_samples.h"

namespace {

using namespace rill;
using namespace rill::storage;

// A producer batch of `records` values of `value_bytes` each, as a client builds it.
std::vector<std::byte> producer_batch(int records, std::size_t value_bytes) {
  batch_builder b;
  b.producer(42, 0, 0);
  std::string value(value_bytes, 'x');
  for (int i = 0; i < records; ++i) {
    value[static_cast<std::size_t>(i) % value_bytes] = static_cast<char>('a' + i % 26);
    b.add_value(value);
  }
  return *b.build();
}

batch_limits producer_limits() {
  batch_limits l;
  l.batch_bytes_max = 64u << 20;
  l.dense_offsets = true;
  return l;
}

void crc32c_bench(benchmark::State& state) {
  std::vector<std::byte> data(static_cast<std::size_t>(state.range(0)), std::byte{0x5a});
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32c(data));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(crc32c_bench)->Name("crc32c")->Arg(1024)->Arg(100 * 1024)->Arg(1 << 20);

void batch_validate(benchmark::State& state) {
  const auto batch = producer_batch(static_cast<int>(state.range(0)), static_cast<std::size_t>(state.range(1)));
  const auto limits = producer_limits();
  for (auto _ : state) {
    auto v = batch_view::validate(batch, limits);
    if (!v) {
      state.SkipWithError("the batch does not validate");
      break;
    }
    benchmark::DoNotOptimize(v->size());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch.size()));
  state.counters["records/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}
BENCHMARK(batch_validate)->ArgNames({"records", "value_bytes"})->Args({100, 1024})->Args({100, 256})->Args({1, 1024});

void offset_assign(benchmark::State& state) {
  auto batch = producer_batch(static_cast<int>(state.range(0)), 1024);
  const auto limits = producer_limits();
  std::int64_t next = 0;
  for (auto _ : state) {
    std::uint32_t tail = 0;
    auto v = batch_view::validate(batch, limits, &tail);
    if (!v) {
      state.SkipWithError("the batch does not validate");
      break;
    }
    stamp_batch(batch, offset_t(next), epoch_t(3), timestamp_ms_t(1'700'000'000'000), tail);
    next += state.range(0);
    benchmark::DoNotOptimize(batch.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch.size()));
}
BENCHMARK(offset_assign)->ArgName("records")->Arg(100)->Arg(1);

void index_floor(benchmark::State& state) {
  segment_index index(4096);
  const auto entries = static_cast<std::uint32_t>(state.range(0));
  // One entry per 100-record batch of 103 KiB (the interval is below a batch, so every batch gets one).
  for (std::uint32_t i = 0; i < entries; ++i) {
    index.on_batch(i * 100, i * 105'000u % 0x7fffffffu, 105'000, timestamp_ms_t(i));
  }
  prng rng(7);
  std::vector<std::uint32_t> probes(4096);
  for (auto& p : probes) {
    p = static_cast<std::uint32_t>(rng.below(std::uint64_t{entries} * 100));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(index.floor(probes[i++ & 4095]));
  }
}
BENCHMARK(index_floor)->ArgName("entries")->Arg(100)->Arg(10'000);

rill::proto::ProduceRequest produce_header() {
  rill::proto::ProduceRequest req;
  req.mutable_stream()->set_id(1);
  req.mutable_topic()->set_id(1);
  req.mutable_partitioning()->set_partition_id(3);
  return req;
}

void frame_encode(benchmark::State& state) {
  const auto batch = producer_batch(static_cast<int>(state.range(0)), 1024);
  const auto header = produce_header();
  std::vector<std::byte> out;
  std::uint32_t correlation = 0;
  for (auto _ : state) {
    out.clear();
    net::append_request(out, ++correlation, net::api::produce, header, batch);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
}
BENCHMARK(frame_encode)->ArgName("records")->Arg(100)->Arg(1);

void frame_decode(benchmark::State& state) {
  const auto batch = producer_batch(static_cast<int>(state.range(0)), 1024);
  std::vector<std::byte> frame;
  net::append_request(frame, 7, net::api::produce, produce_header(), batch);
  rill::proto::ProduceRequest parsed;
  for (auto _ : state) {
    auto size = net::next_frame_size(frame, net::request_prefix_bytes, 64u << 20);
    if (!size || !*size) {
      state.SkipWithError("the frame does not size");
      break;
    }
    auto req = net::parse_request(std::span(frame).first(**size));
    if (!req || !parsed.ParseFromArray(req->header.data(), static_cast<int>(req->header.size()))) {
      state.SkipWithError("the frame does not parse");
      break;
    }
    benchmark::DoNotOptimize(req->batches.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
}
BENCHMARK(frame_decode)->ArgName("records")->Arg(100)->Arg(1);

// What metered<> adds to every message an actor handles: with timing (runtime.actor_metrics = true) two clock reads
// and the per-type histogram; without, the processed counter only. Eight message types, as a partition sees.
void actor_metrics_per_message(benchmark::State& state) {
  const bool timing = state.range(0) != 0;
  actors::actor_metrics m;
  std::uint64_t key = 100;
  for (auto _ : state) {
    if (timing) {
      const auto start = std::chrono::steady_clock::now();
      benchmark::ClobberMemory();
      m.handled(key, std::chrono::steady_clock::now() - start);
    } else {
      actors::bump(m.processed);
    }
    key = key == 107 ? 100 : key + 1;
  }
  benchmark::DoNotOptimize(m.processed.load());
}
BENCHMARK(actor_metrics_per_message)->ArgName("timing")->Arg(0)->Arg(1);

// One /metrics page of a node of `partitions` partitions in topics of 1,000, 100 connections, two shards, with
// monitoring.partition_series_max and monitoring.actor_series_max at `series_max` (1,000,000: one series each).
void metrics_render(benchmark::State& state) {
  test::synthetic_node node;
  node.partitions = static_cast<std::uint32_t>(state.range(0));
  const auto actors = test::synthetic_actors(node);
  const auto shards = test::synthetic_shards(node);
  const actors::process_sample process;
  const auto series_max = static_cast<std::uint64_t>(state.range(1));
  const actors::series_limits limits{series_max, series_max};
  std::size_t bytes = 0;
  for (auto _ : state) {
    const auto page = actors::render_prometheus(actors, shards, process, limits);
    bytes = page.size();
    benchmark::DoNotOptimize(page.data());
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(metrics_render)
    ->ArgNames({"partitions", "series_max"})
    ->Args({2'000, 1'000'000})
    ->Args({10'000, 1'000'000})
    ->Args({10'000, 1'000})
    ->Unit(benchmark::kMillisecond);

}  // namespace

void segment_read(benchmark::State& state) {
  const bool cold = state.range(0) != 0;
  auto ring = io::uring_engine::create();
  if (!ring) {
    state.SkipWithError(ring.error().message().c_str());
    return;
  }
  io::engine& e = **ring;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/rill-micro-" + std::to_string(::getpid());
  system_clock_source clk;
  buffer_pool pool;
  collecting_reporter reporter;
  file_cache files(16);
  log_options options;
  options.files = &files;
  options.config.segment_bytes = 1024 * 1024;
  options.config.preallocate_bytes = 0;
  auto opened = io::run_task(e, partition_log::open(e, pool, clk, reporter, dir, options));
  if (!opened || !*opened) {
    state.SkipWithError("cannot open a partition log in $TMPDIR");
    return;
  }
  auto log = std::move(**opened);
  for (int i = 0; i < 80; ++i) {  // ~1.6 MiB: the first segment is sealed
    (void)io::run_task(e, log->append(producer_batch(20, 1000)));
  }
  read_request req;
  req.offset = offset_t(100);
  req.max_bytes = 1;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      (void)io::run_task(e, files.evict_all(e));
      state.ResumeTiming();
    }
    auto r = io::run_task(e, log->read(req));
    benchmark::DoNotOptimize(r);
  }
  state.counters["opens"] =
      benchmark::Counter(static_cast<double>(files.stats().opens), benchmark::Counter::kAvgIterations);
  (void)io::run_task(e, log->close());
  log.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(segment_read)->ArgName("cold")->Arg(0)->Arg(1)->UseRealTime();

BENCHMARK_MAIN();
