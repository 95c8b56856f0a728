#pragma once
// A partition log on a simulated disk with a manual clock, and helpers to drive coroutines to completion.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "simulation/sim_disk.h"
#include "storage/buffer_pool.h"
#include "storage/partition_log.h"
#include "storage/record_batch_builder.h"
#include "tests/test_util.h"

namespace rill::storage::testing {

using simulation::sim_disk;
using simulation::sim_disk_faults;

// Drives `e` until `t` finishes and returns its result.
template <class T>
T run(io::engine& e, task<T> t) {
  std::optional<T> out;
  spawn(std::move(t), [&](T v) { out.emplace(std::move(v)); });
  io::run_until(e, [&] { return out.has_value(); });
  BOOST_REQUIRE_MESSAGE(out.has_value(), "task did not finish: nothing left in flight");
  return std::move(*out);
}

// A producer batch of `records` records, each value "<tag>-<i>" padded to `value_bytes`.
inline std::vector<std::byte> make_batch(const std::string& tag, int records, std::size_t value_bytes = 16,
                                         compression c = compression::none) {
  batch_builder b(c);
  for (int i = 0; i < records; ++i) {
    std::string v = tag + "-" + std::to_string(i);
    if (v.size() < value_bytes) {
      v.resize(value_bytes, '.');
    }
    b.add("k" + std::to_string(i), v);
  }
  return *b.build();
}

// Batches as a primary would have stamped them: offsets from `base`, one epoch, increasing timestamps.
inline std::vector<std::byte> primary_batches(std::int64_t base, int count, int records, std::int32_t epoch,
                                              const std::string& tag) {
  std::vector<std::byte> out;
  for (int i = 0; i < count; ++i) {
    batch_builder b;
    b.base_offset(offset_t(base)).leader_epoch(epoch_t(epoch)).base_timestamp(timestamp_ms_t(1'000'000 + base));
    for (int r = 0; r < records; ++r) {
      b.add("k", tag + "-" + std::to_string(base + r) + std::string(900, '.'));
    }
    auto bytes = *b.build();
    out.insert(out.end(), bytes.begin(), bytes.end());
    base += records;
  }
  return out;
}

// Every batch in `bytes` (back to back).
inline std::vector<batch_view> split_batches(std::span<const std::byte> bytes) {
  std::vector<batch_view> out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    auto v = batch_view::validate(bytes.subspan(pos), batch_limits{.batch_bytes_max = 1u << 30});
    BOOST_REQUIRE_MESSAGE(v.has_value(), (v ? std::string() : v.error().message()));
    out.push_back(*v);
    pos += v->size();
  }
  return out;
}

// The first value of each record in a batch (decompressed if needed).
inline std::vector<std::string> values_of(const batch_view& v) {
  std::vector<std::byte> scratch;
  auto region = records_of(v, 1u << 30, scratch);
  BOOST_REQUIRE(region.has_value());
  std::vector<std::string> out;
  record_reader rr(*region);
  for (;;) {
    auto r = rr.next();
    BOOST_REQUIRE(r.has_value());
    if (!r->has_value()) {
      break;
    }
    out.emplace_back(reinterpret_cast<const char*>((*r)->value->data()), (*r)->value->size());
  }
  return out;
}

struct sim_log_fixture {
  explicit sim_log_fixture(std::uint64_t seed = 1, sim_disk_faults faults = {}) : disk(seed, faults, &clk) {
    options.config.segment_bytes = 1024 * 1024;
    options.config.preallocate_bytes = 0;
  }
  ~sim_log_fixture() {
    if (log) {
      close();
    }
  }

  void open() {
    auto r = run(disk, partition_log::open(disk, pool, clk, reporter, dir, options));
    RILL_REQUIRE_OK(r);
    log = std::move(*r);
    log->check_invariants();
  }
  expected<std::unique_ptr<partition_log>> try_open() {
    return run(disk, partition_log::open(disk, pool, clk, reporter, dir, options));
  }
  void close() {
    auto r = run(disk, log->close());
    log.reset();
    (void)r;
  }
  void reopen() {
    close();
    open();
  }
  // Every operation through the fixture is followed by the log's invariant check.
  template <class T>
  T run_checked(task<T> t) {
    auto r = run(disk, std::move(t));
    log->check_invariants();
    return r;
  }
  expected<append_result> append(std::vector<std::byte> batch) {
    auto r = run(disk, log->append(std::move(batch)));
    log->check_invariants();
    return r;
  }
  expected<read_result> read(read_request r) {
    auto got = run(disk, log->read(r));
    log->check_invariants();
    return got;
  }
  expected<read_result> read_at(std::int64_t offset, std::uint64_t max_bytes = 1 << 20) {
    read_request r;
    r.offset = offset_t(offset);
    r.max_bytes = max_bytes;
    return read(r);
  }
  // Every record value from `from` to the visible end, in order, with its offset.
  std::vector<std::pair<std::int64_t, std::string>> read_all(std::int64_t from = -1) {
    std::vector<std::pair<std::int64_t, std::string>> out;
    offset_t at = from < 0 ? log->log_start() : offset_t(from);
    for (;;) {
      auto r = read_at(at.value());
      RILL_REQUIRE_OK(r);
      if (r->batches == 0) {
        break;
      }
      for (const auto& b : split_batches(r->bytes.span())) {
        auto vals = values_of(b);
        for (std::size_t i = 0; i < vals.size(); ++i) {
          out.emplace_back(b.base_offset().value() + static_cast<std::int64_t>(i), vals[i]);
        }
      }
      at = r->next_offset;
    }
    return out;
  }

  manual_clock clk;
  sim_disk disk;
  buffer_pool pool;
  collecting_reporter reporter;
  std::string dir = "/data/streams/0/topics/0/partitions/0";
  log_options options;
  std::unique_ptr<partition_log> log;
};

// Runs the simulated disk until nothing is in flight (every pending completion has run).
inline void drain(sim_log_fixture& f) {
  io::run_until(f.disk, [] { return false; });
}

}  // namespace rill::storage::testing
