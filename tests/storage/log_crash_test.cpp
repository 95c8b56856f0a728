// Crash tests: a scripted workload on the simulated disk is stopped at every mutating operation in turn (every
// write, sync, truncate, create, rename and unlink), power is lost (unsynced data dropped or torn, unsynced
// directory entries undone), the partition is recovered, and the invariants are checked:
//   - every acknowledged record is there, at its offset, with its value;
//   - everything there is a record the workload submitted, in submission order, at dense offsets;
//   - nothing a consumer could have seen (committed) is lost, and no offset is ever reused;
//   - recovery itself always succeeds.
// Under relaxed durability (every_ms / every_records with bounds far beyond the workload, so that only the background
// sync makes data visible) an acknowledged record may be lost, but every offset a consumer could have read (below
// committed at any moment before the crash, watched through on_committed) survives with the same bytes, and none is
// reused.
#include <boost/test/unit_test.hpp>

#include <map>
#include <optional>

#include "storage/errc.h"
#include "storage/file_cache.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {

struct observed {
  std::map<std::int64_t, std::string> acked;   // offset -> value of acknowledged records
  std::int64_t committed_max = 0;              // the highest committed offset any reader could have seen
  bool relaxed = false;                        // acknowledged is not durable: only what was committed must survive
  std::map<std::string, int> submitted_order;  // value -> submission sequence
  bool finished = false;
};

// The workload: batches of a few records, several in flight at once (group commit), enough to roll segments;
// retention of the oldest segments; a final flush.
void workload(sim_log_fixture& f, observed& o, int rounds, bool with_retention) {
  int seq = 0;
  // Every moment committed moves (the background sync raises it between the workload's steps too).
  f.log->on_committed([&f, &o] { o.committed_max = std::max(o.committed_max, f.log->committed().value()); });
  auto note = [&](const expected<append_result>& r, const std::string& tag, int records) {
    if (!r) {
      return false;
    }
    for (int i = 0; i < records; ++i) {
      o.acked[r->base_offset.value() + i] = tag + "-" + std::to_string(i);
    }
    o.committed_max = std::max(o.committed_max, f.log->committed().value());
    return true;
  };
  for (int round = 0; round < rounds; ++round) {
    // Three appends in flight together.
    std::vector<std::optional<expected<append_result>>> results(3);
    std::vector<std::string> tags;
    for (int j = 0; j < 3; ++j) {
      std::string tag = "r" + std::to_string(round) + "b" + std::to_string(j);
      for (int i = 0; i < 4; ++i) {
        o.submitted_order[tag + "-" + std::to_string(i)] = seq++;
      }
      tags.push_back(tag);
      spawn(f.log->append(make_batch(tag, 4, 7000)),
            [&results, j](expected<append_result> r) { results[static_cast<std::size_t>(j)].emplace(std::move(r)); });
    }
    io::run_until(f.disk, [&] {
      return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); });
    });
    bool ok = true;
    for (int j = 0; j < 3; ++j) {
      ok = note(*results[static_cast<std::size_t>(j)], tags[static_cast<std::size_t>(j)], 4) && ok;
    }
    if (!ok) {
      return;
    }
    f.log->check_invariants();
    if (with_retention && round % 30 == 29) {
      auto r = run(f.disk, f.log->enforce_retention());
      if (!r) {
        return;
      }
      f.log->check_invariants();
    }
  }
  o.finished = true;
}

void check_after_recovery(sim_log_fixture& f, const observed& o, std::uint64_t crash_point) {
  BOOST_TEST_CONTEXT("crash point " << crash_point) {
    auto all = f.read_all();
    std::map<std::int64_t, std::string> present(all.begin(), all.end());
    // Every acknowledged record that retention has not removed is there (relaxed: every one a consumer could read,
    // and each of those was acknowledged before it became visible).
    for (std::int64_t offset = f.log->log_start().value(); o.relaxed && offset < o.committed_max; ++offset) {
      BOOST_TEST_REQUIRE(o.acked.count(offset) == 1u, "offset " << offset << " visible but never acknowledged");
    }
    for (const auto& [offset, value] : o.acked) {
      if (offset < f.log->log_start().value() || (o.relaxed && offset >= o.committed_max)) {
        continue;
      }
      auto it = present.find(offset);
      BOOST_TEST_REQUIRE((it != present.end()), (o.relaxed ? "visible" : "acknowledged")
                                                    << " offset " << offset << " lost");
      BOOST_TEST(it->second.rfind(value, 0) == 0, "offset " << offset);
    }
    // What is there was submitted, in order, at dense offsets.
    int last_seq = -1;
    std::int64_t last_offset = -1;
    for (const auto& [offset, value] : all) {
      const std::string key = value.substr(0, value.find('.'));
      auto it = o.submitted_order.find(key);
      BOOST_TEST_REQUIRE((it != o.submitted_order.end()), "unknown record " << key << " at " << offset);
      BOOST_TEST(it->second > last_seq, "record " << key << " out of order");
      last_seq = it->second;
      if (last_offset >= 0) {
        BOOST_TEST(offset == last_offset + 1, "gap before " << offset);
      }
      last_offset = offset;
    }
    // Nothing a consumer saw is lost; no offset is reused.
    BOOST_TEST(f.log->committed().value() >= o.committed_max);
    BOOST_TEST(f.log->log_end().value() >= o.committed_max);
    auto next = f.append(make_batch("after-crash", 1));
    RILL_REQUIRE_OK(next);
    BOOST_TEST(next->base_offset.value() >= o.committed_max);
    BOOST_TEST(next->base_offset == f.log->log_end() - 1);
    // A crash is not corruption: the only report it may cause is a torn superblock copy (the other one is used).
    for (const auto& c : f.reporter.corruptions) {
      BOOST_TEST(c.action.find("using the other") != std::string::npos,
                 "unexpected report " << c.file << " @" << c.position << ": " << c.problem << " -> " << c.action);
    }
  }
}

void configure(sim_log_fixture& f, bool with_retention, config::durability_mode mode) {
  // Relaxed: bounds the workload never reaches, so only the background sync makes its data visible.
  f.options.config.durability = mode;
  f.options.config.sync_every_ms = 3'600'000;
  f.options.config.sync_every_records = 1'000'000;
  // A sync covers only what was written before it went down: what a background sync running beside the writer
  // gets from a real disk.
  f.disk.faults().sync_covers_only_submitted = true;
  if (with_retention) {
    // 3 MiB segments deleted in 1 MiB steps: a crash can land between two shrink steps.
    f.options.config.segment_bytes = 3 * 1024 * 1024;
    f.options.config.retention_bytes = 4 * 1024 * 1024;
    f.options.config.delete_step_bytes = 1024 * 1024;
  }
}

// Runs the workload once to count its mutating operations, then once per crash point. files_max > 0: the log's
// descriptors go through a file cache of that many (storage/file_cache.h), so files are closed and reopened
// between the operations a crash lands among.
void enumerate_crash_points(std::uint64_t seed, int rounds, bool with_retention, std::uint64_t stride = 1,
                            std::uint64_t files_max = 0,
                            config::durability_mode mode = config::durability_mode::sync_before_ack) {
  const bool relaxed = mode != config::durability_mode::sync_before_ack;
  // Declared before the fixture: it outlives the log, and is empty again after each close (every crash closes every
  // descriptor on the disk, so it must not keep any across one).
  std::optional<file_cache> cache;
  auto use_cache = [&](sim_log_fixture& f) {
    if (files_max > 0) {
      BOOST_REQUIRE(!cache || cache->open_count() == 0);
      cache.emplace(files_max);
      cache->set_reclaim_engine(&f.disk);
      f.options.files = &*cache;
    }
  };
  std::uint64_t total = 0;
  {
    sim_log_fixture f(seed);
    configure(f, with_retention, mode);
    use_cache(f);
    f.open();
    observed o;
    o.relaxed = relaxed;
    workload(f, o, rounds, with_retention);
    BOOST_REQUIRE(o.finished);
    f.close();
    total = f.disk.mutating_ops();
  }
  BOOST_TEST_MESSAGE("seed " << seed << ": " << total << " mutating operations, crashing at each");
  std::uint64_t checked = 0;
  for (std::uint64_t k = 1; k <= total; k += stride) {
    cache.reset();
    sim_log_fixture f(seed);
    configure(f, with_retention, mode);
    use_cache(f);
    f.disk.fail_stop_after(k);
    observed o;
    o.relaxed = relaxed;
    auto opened = f.try_open();
    if (opened) {
      f.log = std::move(*opened);
      workload(f, o, rounds, with_retention);
      f.close();  // after the stop every operation fails; close() completes anyway
    }
    io::run_until(f.disk, [] { return false; });
    BOOST_TEST((!cache || cache->open_count() == 0));
    f.disk.crash();
    f.reporter.corruptions.clear();
    f.open();
    check_after_recovery(f, o, k);
    ++checked;
  }
  BOOST_TEST(checked >= total / stride);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(log_crash_suite)

BOOST_AUTO_TEST_CASE(crash_at_every_write_and_sync_of_appends_and_rolls) {
  // ~12 segments of 1 MiB: every roll (seal, index, new files, directory sync, superblock) is crossed.
  enumerate_crash_points(11, 60, false);
}

BOOST_AUTO_TEST_CASE(crash_at_every_step_of_retention_deletes) {
  enumerate_crash_points(12, 90, true);
}

BOOST_AUTO_TEST_CASE(crash_points_under_other_seeds) {
  // Different latencies reorder completions and pick different torn sectors.
  for (std::uint64_t seed : {21, 22, 23}) {
    enumerate_crash_points(seed, 30, true, 3);
  }
}

BOOST_AUTO_TEST_CASE(crash_points_with_descriptors_closed_and_reopened) {
  // Three descriptors for a log that holds at least four files: every append, roll, retention step and recovery
  // reopens some; a crash at each point must recover the same as without the cache.
  enumerate_crash_points(31, 90, true, 1, 3);
  enumerate_crash_points(32, 60, false, 1, 3);
}

BOOST_AUTO_TEST_CASE(relaxed_durability_at_every_crash_point_loses_nothing_a_consumer_saw) {
  // Acknowledged at write, visible after the background sync: every append, background sync, roll and recovery.
  enumerate_crash_points(41, 60, false, 1, 0, config::durability_mode::every_ms);
  enumerate_crash_points(42, 30, false, 1, 0, config::durability_mode::every_records);
}

BOOST_AUTO_TEST_CASE(relaxed_durability_crash_points_with_retention_and_closed_descriptors) {
  // Retention deletes beside the background sync; three descriptors: the background sync must never let the cache
  // close a file whose writes it did not cover.
  enumerate_crash_points(43, 90, true, 2, 0, config::durability_mode::every_ms);
  enumerate_crash_points(44, 60, true, 2, 3, config::durability_mode::every_ms);
}

BOOST_AUTO_TEST_SUITE_END()
