// load: the harness (threads, pacing, measurement, reports). Drivers live beside the system they talk to.
#include "tools/load/load.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "base/random.h"
#include "tools/load/load_report.h"

namespace rill::bench {
namespace {

using clock_type = std::chrono::steady_clock;

class bench_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "bench"; }
  std::string message(int) const override { return "benchmark failed"; }
};

std::uint64_t ns_since_epoch(clock_type::time_point t) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

std::uint64_t ns_between(clock_type::time_point from, clock_type::time_point to) {
  return to <= from
             ? 0
             : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

// What every thread of a run shares.
struct run_state {
  run_state(const load_options& opts, load_mode m) : o(opts), mode(m) {}
  const load_options& o;
  load_mode mode;
  std::vector<double> key_cdf;  // zipf: cumulative probability of keys 0..k-1

  clock_type::time_point produce_start;
  clock_type::time_point measure_from;   // producers' figures count from here (after the warm-up)
  clock_type::time_point produce_until;  // duration runs: no batch is due at or after this
  clock_type::time_point consume_from;   // consumers' per-second slots count from here

  std::atomic<bool> failed{false};
  std::atomic<std::uint32_t> producers_running{0};
  std::atomic<std::int64_t> producers_done_ns{0};  // when the last producer stopped (steady ns)
  std::atomic<std::uint64_t> produced{0};          // acknowledged, warm-up included
  std::atomic<std::uint64_t> consumed{0};          // received, warm-up included
  std::atomic<std::uint64_t> produced_measured{0};
  std::atomic<std::uint64_t> consumed_measured{0};
  std::atomic<std::uint64_t> produced_measured_bytes{0};
  std::atomic<std::uint64_t> consumed_measured_bytes{0};

  std::mutex mu;
  std::string first_error;

  void fail(const std::string& what) {
    std::lock_guard lock(mu);
    if (first_error.empty()) {
      first_error = what;
    }
    failed = true;
  }
};

std::uint32_t pick_key(run_state& s, prng& rng) {
  if (s.o.key_distribution == "zipf") {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    const auto it = std::lower_bound(s.key_cdf.begin(), s.key_cdf.end(), u);
    return static_cast<std::uint32_t>(std::min<std::size_t>(it - s.key_cdf.begin(), s.key_cdf.size() - 1));
  }
  return static_cast<std::uint32_t>(rng.below(s.o.keys));
}

// The same 32-bit FNV-1a everywhere: which unit a key lands on must not depend on the system under test.
std::uint32_t unit_of_key(std::string_view key, std::uint32_t units) {
  std::uint32_t h = 2166136261u;
  for (const char c : key) {
    h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  }
  return h % units;
}

void produce_loop(run_state& s, system_driver& system, std::uint32_t index, series& out) {
  const auto& o = s.o;
  auto made = system.make_producer(index);
  if (!made) {
    s.fail(fmt::format("producer {}: {}", index, made.error().message()));
    return;
  }
  auto& driver = **made;
  series::writer w(out);
  prng rng(0x5eed0000u + index);

  // Values: letters (so zstd has something to do, as with text payloads); the first 8 bytes of each carry the time
  // its batch was due, for end-to-end latency.
  std::vector<std::byte> values(static_cast<std::size_t>(o.batch) * o.message_size);
  for (auto& b : values) {
    b = static_cast<std::byte>('a' + rng.below(26));
  }
  std::vector<std::string> key_names;
  for (std::uint32_t k = 0; k < o.keys; ++k) {
    key_names.push_back(fmt::format("key-{:08}", k));
  }
  std::vector<bench_message> batch(o.batch);
  std::vector<std::vector<bench_message>> by_unit(o.partitioning == "key" ? o.units() : 0);

  std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
  if (o.messages > 0) {
    limit = o.messages / o.producers + (index < o.messages % o.producers ? 1 : 0);
  }
  const double per_producer_rate = o.rate / o.producers;
  const auto interval = per_producer_rate > 0 ? std::chrono::duration<double>(o.batch / per_producer_rate)
                                              : std::chrono::duration<double>(0);
  std::uint64_t sent = 0;
  for (std::uint64_t k = 0; sent < limit && !s.failed; ++k) {
    auto due = clock_type::now();
    if (per_producer_rate > 0) {
      // Producers' schedules are staggered by a fraction of the interval, so their batches do not all fall due at
      // the same instant.
      const double slot = static_cast<double>(k) + static_cast<double>(index) / o.producers;
      due = s.produce_start + std::chrono::duration_cast<clock_type::duration>(interval * slot);
      std::this_thread::sleep_until(due);
    }
    if (o.messages == 0 && due >= s.produce_until) {
      break;
    }
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.batch, limit - sent));
    std::uint64_t bytes = 0;
    for (std::uint32_t m = 0; m < n; ++m) {
      std::span<std::byte> v(values.data() + static_cast<std::size_t>(m) * o.message_size, o.message_size);
      if (v.size() >= 8) {
        store_le<std::uint64_t>(v.data(), ns_since_epoch(due));
      }
      batch[m].value = v;
      batch[m].key = o.keys > 0 ? std::string_view(key_names[pick_key(s, rng)]) : std::string_view();
      bytes += v.size() + batch[m].key.size();
    }
    expected<void> r;
    if (o.partitioning == "key") {
      for (auto& g : by_unit) {
        g.clear();
      }
      for (std::uint32_t m = 0; m < n; ++m) {
        by_unit[unit_of_key(batch[m].key, o.units())].push_back(batch[m]);
      }
      for (std::uint32_t u = 0; u < o.units() && r; ++u) {
        if (!by_unit[u].empty()) {
          r = driver.send(u, by_unit[u]);
        }
      }
    } else {
      r = driver.send(unit_of_batch(o, index, k), std::span(batch.data(), n));
    }
    if (!r) {
      s.fail(fmt::format("producer {}: {}", index, r.error().message()));
      break;
    }
    const auto done = clock_type::now();
    sent += n;
    s.produced += n;
    if (due >= s.measure_from) {
      w.record(done - s.measure_from, n, bytes, ns_between(due, done));
      s.produced_measured += n;
      s.produced_measured_bytes += bytes;
    }
  }
}

void consume_loop(run_state& s, system_driver& system, std::uint32_t index, std::vector<std::uint32_t> units,
                  series& out) {
  auto made = system.make_consumer(index, std::move(units));
  if (!made) {
    s.fail(fmt::format("consumer {}: {}", index, made.error().message()));
    return;
  }
  auto& driver = **made;
  const bool end_to_end = s.mode == load_mode::produce_consume;
  const auto measure_from_ns = ns_since_epoch(s.measure_from);
  series::writer w(out);
  std::uint64_t got_bytes = 0;
  std::uint64_t got_measured = 0;
  clock_type::time_point received;
  bool stamped = false;
  // A poll's messages were received when the poll's reply arrived: the first callback of the poll takes the time.
  const consumer_driver::on_message on = [&](std::span<const std::byte> value) {
    if (!stamped) {
      received = clock_type::now();
      stamped = true;
    }
    if (end_to_end) {
      const auto sent_ns = value.size() >= 8 ? load_le<std::uint64_t>(value.data()) : 0;
      if (sent_ns < measure_from_ns) {
        return;  // produced during the warm-up
      }
      const auto now_ns = ns_since_epoch(received);
      w.latency(received - s.consume_from, now_ns > sent_ns ? now_ns - sent_ns : 0);
    }
    got_bytes += value.size();
    ++got_measured;
  };
  while (!s.failed) {
    const auto before = clock_type::now();
    got_bytes = 0;
    got_measured = 0;
    stamped = false;
    auto got = driver.poll(on);
    const auto after = clock_type::now();
    if (!got) {
      s.fail(fmt::format("consumer {}: {}", index, got.error().message()));
      break;
    }
    if (*got > 0) {
      s.consumed += *got;
      if (end_to_end) {
        // Throughput only; the latencies were recorded per message.
        w.record(after - s.consume_from, got_measured, got_bytes, std::nullopt);
      } else {
        w.record(after - s.consume_from, got_measured, got_bytes, ns_between(before, after));
      }
      s.consumed_measured += got_measured;
      s.consumed_measured_bytes += got_bytes;
    }
    if (s.producers_running == 0) {
      const auto produced = s.produced.load();
      const auto consumed = s.consumed.load();
      if (consumed >= produced) {
        break;
      }
      const auto since_ns = static_cast<std::int64_t>(ns_since_epoch(after)) - s.producers_done_ns.load();
      if (since_ns > static_cast<std::int64_t>(s.o.drain_timeout_s * 1e9)) {
        s.fail(
            fmt::format("consumers received {} of the {} acknowledged messages within {} s after the producers "
                        "stopped (consumer {} at {})",
                        consumed, produced, s.o.drain_timeout_s, index, driver.positions()));
        break;
      }
    }
  }
}

}  // namespace

std::uint32_t unit_of_batch(const load_options& o, std::uint32_t producer, std::uint64_t k) {
  const std::uint64_t units = o.units();
  const std::uint64_t producers = o.producers;
  RILL_ASSERT(units > 0, "no units");
  RILL_ASSERT(producer < producers, "producer {} of {}", producer, producers);
  if (o.partitioning == "round-robin") {
    return static_cast<std::uint32_t>((producer + k) % units);
  }
  if (producers >= units) {
    return static_cast<std::uint32_t>(producer % units);  // a unit (or more producers) each
  }
  // fixed, fewer producers than units: producer i owns units i, i + P, i + 2P, ... and writes them in turn.
  const std::uint64_t owned = (units - producer + producers - 1) / producers;
  const auto unit = producer + (k % owned) * producers;
  RILL_ASSERT(unit < units, "unit {} of {}", unit, units);
  return static_cast<std::uint32_t>(unit);
}

namespace {

// Prints a progress line every second while `running` threads remain (stdout a terminal, text output only).
void wait_with_progress(run_state& s, std::vector<std::thread>& threads, bool show) {
  std::uint64_t last_p = 0;
  std::uint64_t last_c = 0;
  std::uint64_t last_pb = 0;
  std::uint64_t last_cb = 0;
  auto next = clock_type::now() + std::chrono::seconds(1);
  const auto start = clock_type::now();
  std::atomic<bool> done{false};
  std::thread joiner([&] {
    for (auto& t : threads) {
      t.join();
    }
    done = true;
  });
  while (!done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!show || clock_type::now() < next) {
      continue;
    }
    next += std::chrono::seconds(1);
    const auto p = s.produced_measured.load();
    const auto c = s.consumed_measured.load();
    const auto pb = s.produced_measured_bytes.load();
    const auto cb = s.consumed_measured_bytes.load();
    // Only what the run measures: produce mode has no consumers; consume mode fills the streams first (producers
    // alone), then reads them (consumers alone); produce-consume runs both.
    const bool show_produce = s.mode != load_mode::consume || c == 0;
    const bool show_consume = s.mode == load_mode::produce_consume || (s.mode == load_mode::consume && c > 0);
    fmt::print("\r{:>5.0f} s", std::chrono::duration<double>(clock_type::now() - start).count());
    if (show_produce) {
      fmt::print("  produce {:>10} msg/s {:>8.1f} MB/s", p - last_p, static_cast<double>(pb - last_pb) / 1e6);
    }
    if (show_consume) {
      fmt::print("  consume {:>10} msg/s {:>8.1f} MB/s", c - last_c, static_cast<double>(cb - last_cb) / 1e6);
    }
    fmt::print("  ");
    std::fflush(stdout);
    last_p = p;
    last_c = c;
    last_pb = pb;
    last_cb = cb;
  }
  joiner.join();
  if (show) {
    fmt::print("\r{:120}\r", "");
    std::fflush(stdout);
  }
}

}  // namespace

rill::unexpected load_error(std::string detail) {
  static const bench_category category;
  return rill::unexpected(std::error_code(1, category), std::move(detail));
}

std::string_view to_string(load_mode m) noexcept {
  switch (m) {
    case load_mode::produce:
      return "produce";
    case load_mode::consume:
      return "consume";
    case load_mode::produce_consume:
      return "produce-consume";
  }
  return "?";
}

void add_load_options(CLI::App& app, load_options& o, load_mode mode) {
  app.add_option("--server", o.server, "HOST:PORT of the system under test")->required();
  app.add_option("--producers", o.producers, "producer threads, one connection each")->check(CLI::Range(1, 1024));
  if (mode != load_mode::produce) {
    app.add_option("--consumers", o.consumers, "consumer threads, one connection each; units are dealt round robin")
        ->check(CLI::Range(1, 1024));
    app.add_option("--fetch", o.fetch, "messages per poll")->check(CLI::Range(1, 1'000'000));
    app.add_option("--group", o.group,
                   "consumers read as members of this consumer group (rill; the group's assignment, not a fixed "
                   "deal, gives them their partitions)");
    app.add_option("--drain-timeout", o.drain_timeout_s, "seconds consumers may take to catch up after producing")
        ->check(CLI::Range(0.1, 3600.0));
  }
  app.add_option("--streams", o.streams, "streams to create")->check(CLI::Range(1, 1000));
  app.add_option("--partitions", o.partitions, "partitions per stream")->check(CLI::Range(1, 10'000));
  app.add_option("--replication-factor", o.replication_factor,
                 "rill: nodes each partition of the created topics is replicated on (0: the server's "
                 "cluster.replication_factor)")
      ->check(CLI::Range(0, 6));
  app.add_option("--message-size", o.message_size, "bytes per message value")->check(CLI::Range(1, 16 << 20));
  app.add_option("--batch", o.batch, "messages per produce request (pipeline depth for peers)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--duration", o.duration_s, "seconds to measure (after the warm-up)")
      ->check(CLI::Range(0.1, 86'400.0));
  app.add_option("--messages", o.messages, "total messages to produce instead of a duration");
  app.add_option("--rate", o.rate, "target messages/s over all producers (0: as fast as acks allow)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--warmup", o.warmup_s, "seconds produced before measuring")->check(CLI::Range(0.0, 3600.0));
  app.add_option("--sync", o.sync, "before-ack: acknowledged after fsync; none: no fsync per message")
      ->check(CLI::IsMember({"before-ack", "none"}));
  app.add_option("--compression", o.compression, "batch compression")->check(CLI::IsMember({"none", "zstd"}));
  app.add_option("--partitioning", o.partitioning,
                 "fixed: producer i owns units i, i + producers, ... and writes them batch by batch in turn (unit "
                 "i % units with as many producers as units or more); round-robin: every unit, batch by batch; key: "
                 "by each message's key")
      ->check(CLI::IsMember({"fixed", "round-robin", "key"}));
  app.add_option("--keys", o.keys, "distinct message keys (0: messages have no key)")->check(CLI::Range(0, 10'000'000));
  app.add_option("--key-distribution", o.key_distribution, "how keys are drawn")
      ->check(CLI::IsMember({"uniform", "zipf"}));
  app.add_option("--name-prefix", o.name_prefix, "prefix of the streams, subjects or keys the run creates");
  app.add_flag("--keep", o.keep, "leave the streams in place afterwards");
  app.add_flag("--json", o.json, "print one JSON object instead of the summary");
  app.add_option("--output", o.output, "write per-second throughput and latency to this CSV file");
}

load_commands::load_commands(CLI::App& app, load_options& o)
    : produce_(app.add_subcommand("produce", "produce throughput and latency")),
      consume_(app.add_subcommand("consume", "fill the streams, then measure reading them back")),
      both_(app.add_subcommand("produce-consume", "produce and consume at once: end-to-end latency")) {
  add_load_options(*produce_, o, load_mode::produce);
  add_load_options(*consume_, o, load_mode::consume);
  add_load_options(*both_, o, load_mode::produce_consume);
}

std::optional<load_mode> load_commands::chosen() const {
  if (*produce_) {
    return load_mode::produce;
  }
  if (*consume_) {
    return load_mode::consume;
  }
  if (*both_) {
    return load_mode::produce_consume;
  }
  return std::nullopt;
}

expected<void> check_options(const load_options& o, load_mode mode) {
  if (o.units() > 100'000) {
    return load_error(fmt::format("--streams x --partitions is {}; at most 100000", o.units()));
  }
  if (mode != load_mode::produce && o.consumers > o.units()) {
    return load_error(
        fmt::format("--consumers ({}) must be at most --streams x --partitions ({}): each consumer "
                    "reads whole units",
                    o.consumers, o.units()));
  }
  if (mode == load_mode::produce_consume && o.message_size < 8) {
    return load_error("--message-size must be at least 8 for produce-consume (each value carries its send time)");
  }
  if (o.partitioning == "key" && o.keys == 0) {
    return load_error("--partitioning key needs --keys of at least 1");
  }
  if (mode == load_mode::consume && o.warmup_s > 0) {
    return load_error("--warmup does not apply to consume (the fill is not measured); leave it at 0");
  }
  if (static_cast<std::uint64_t>(o.batch) * o.message_size > (256u << 20)) {
    return load_error(fmt::format("--batch x --message-size is {} bytes; at most 268435456",
                                  static_cast<std::uint64_t>(o.batch) * o.message_size));
  }
  return {};
}

int run_load(load_mode mode, const load_options& o, system_driver& system) {
  if (auto ok = check_options(o, mode); !ok) {
    fmt::print(stderr, "{}: {}\n", system.name(), ok.error().detail());
    return 1;
  }
  if (auto ok = system.setup(); !ok) {
    fmt::print(stderr, "{}: setup: {}\n", system.name(), ok.error().message());
    return 1;
  }
  run_state s(o, mode);
  if (o.keys > 0 && o.key_distribution == "zipf") {
    double sum = 0;
    for (std::uint32_t k = 0; k < o.keys; ++k) {
      sum += 1.0 / (k + 1);
      s.key_cdf.push_back(sum);
    }
    for (auto& c : s.key_cdf) {
      c /= sum;
    }
  }
  const bool progress = !o.json && ::isatty(STDOUT_FILENO) != 0;

  series produced;
  series consumed;
  s.produce_start = clock_type::now();
  const double warmup = mode == load_mode::consume ? 0 : o.warmup_s;
  s.measure_from =
      s.produce_start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(warmup));
  s.produce_until =
      s.measure_from + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.duration_s));
  s.consume_from = mode == load_mode::produce_consume ? s.measure_from : s.produce_start;
  s.producers_running = o.producers;

  auto start_producers = [&](std::vector<std::thread>& threads) {
    for (std::uint32_t i = 0; i < o.producers; ++i) {
      threads.emplace_back([&, i] {
        produce_loop(s, system, i, produced);
        s.producers_done_ns = static_cast<std::int64_t>(ns_since_epoch(clock_type::now()));
        --s.producers_running;
      });
    }
  };
  auto start_consumers = [&](std::vector<std::thread>& threads) {
    for (std::uint32_t c = 0; c < o.consumers; ++c) {
      std::vector<std::uint32_t> units;
      for (std::uint32_t u = c; u < o.units(); u += o.consumers) {
        units.push_back(u);
      }
      threads.emplace_back([&, c, units] { consume_loop(s, system, c, units, consumed); });
    }
  };

  if (mode == load_mode::consume) {
    std::vector<std::thread> fill;
    start_producers(fill);
    wait_with_progress(s, fill, progress);
    s.consume_from = clock_type::now();
    std::vector<std::thread> readers;
    if (!s.failed) {
      start_consumers(readers);
    }
    wait_with_progress(s, readers, progress);
  } else {
    std::vector<std::thread> threads;
    start_producers(threads);
    if (mode == load_mode::produce_consume) {
      start_consumers(threads);
    }
    wait_with_progress(s, threads, progress);
  }
  const bool short_read = mode != load_mode::produce && s.consumed.load() != s.produced.load();
  if (s.failed || short_read) {
    fmt::print(stderr, "{}: {}\n", system.name(),
               s.failed ? s.first_error
                        : fmt::format("consumers received {} messages; {} were acknowledged", s.consumed.load(),
                                      s.produced.load()));
    fmt::print(stderr, "{}: the run's streams are left in place for inspection (prefix {})\n", system.name(),
               o.name_prefix);
    return 1;
  }
  if (!o.keep) {
    if (auto ok = system.teardown(); !ok) {
      fmt::print(stderr, "{}: teardown: {}\n", system.name(), ok.error().message());
    }
  }

  report rep;
  rep.system = system.name();
  rep.mode = mode;
  rep.options = &o;
  rep.settings = system.settings();
  // The produce phase's length: the measured duration (batches due in it may finish a little after), or, for a
  // fixed message count, until the last acknowledgement.
  const double produced_s = std::chrono::duration<double>(produced.last_at()).count();
  const double produce_s = o.messages > 0 ? produced_s : std::max(o.duration_s, produced_s);
  rep.roles.push_back(role_result{"produce", "per batch, from when it was due to its last ack", produce_s, &produced});
  if (mode != load_mode::produce) {
    const double consume_s = std::chrono::duration<double>(consumed.last_at()).count();
    if (mode == load_mode::consume) {
      rep.roles.push_back(role_result{"consume", "per poll", consume_s, &consumed});
    } else {
      rep.roles.push_back(
          role_result{"end-to-end", "per message, from when its batch was due to its receipt", consume_s, &consumed});
    }
  }
  print_report(rep);
  if (!o.output.empty()) {
    if (auto ok = write_csv(rep, o.output); !ok) {
      fmt::print(stderr, "{}: {}\n", system.name(), ok.error().detail());
      return 1;
    }
  }
  return 0;
}

}  // namespace rill::bench
