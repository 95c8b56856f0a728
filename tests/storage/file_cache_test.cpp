// The file cache (storage/file_cache.h): many partition logs sharing one limit of open descriptors on the simulated
// disk, which counts them. Idle files are closed least recently used first and reopened by path; a file with I/O in
// flight or unsynced writes is never closed; a file whose path was unlinked is never reopened; a failed fdatasync
// still fences its partition.
#include <boost/test/unit_test.hpp>

#include <map>

#include "storage/errc.h"
#include "storage/file_cache.h"
#include "storage/file_ops.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {

void drain(sim_disk& disk) {
  io::run_until(disk, [] { return false; });
}

// `count` partition logs in one directory tree on one simulated disk, sharing `cache`.
struct many_logs {
  many_logs(std::size_t count, std::uint64_t files_max, std::uint64_t seed = 7)
      : disk(seed, {}, &clk), cache(files_max) {
    options.config.segment_bytes = 1024 * 1024;
    options.config.preallocate_bytes = 0;
    options.files = &cache;
    cache.set_reclaim_engine(&disk);
    logs.resize(count);
  }
  ~many_logs() {
    for (std::size_t i = 0; i < logs.size(); ++i) {
      if (logs[i]) {
        close(i);
      }
    }
  }
  std::string dir_of(std::size_t i) const { return "/data/streams/0/topics/0/partitions/" + std::to_string(i); }
  void open(std::size_t i) {
    auto r = run(disk, partition_log::open(disk, pool, clk, reporter, dir_of(i), options));
    RILL_REQUIRE_OK(r);
    logs[i] = std::move(*r);
    logs[i]->check_invariants();
  }
  void close(std::size_t i) {
    (void)run(disk, logs[i]->close());
    logs[i].reset();
  }
  std::vector<std::string> values(std::size_t i, std::int64_t from) {
    std::vector<std::string> out;
    offset_t at(from);
    for (;;) {
      read_request req;
      req.offset = at;
      auto r = run(disk, logs[i]->read(req));
      RILL_REQUIRE_OK(r);
      logs[i]->check_invariants();
      if (r->batches == 0) {
        break;
      }
      for (const auto& b : split_batches(r->bytes.span())) {
        for (auto& v : values_of(b)) {
          out.push_back(std::move(v));
        }
      }
      at = r->next_offset;
    }
    return out;
  }
  // Descriptors now open on the disk must be the cache's (nothing else holds one between operations).
  void check_quiet() {
    BOOST_TEST(disk.open_fds() == cache.open_count());
    BOOST_TEST(cache.open_count() <= cache.files_max());
  }

  manual_clock clk;
  sim_disk disk;
  buffer_pool pool;
  collecting_reporter reporter;
  file_cache cache;
  log_options options;
  std::vector<std::unique_ptr<partition_log>> logs;
};

std::string value_for(std::size_t partition, int batch, int record) {
  return "p" + std::to_string(partition) + "-b" + std::to_string(batch) + "-" + std::to_string(record);
}

std::vector<std::byte> batch_for(std::size_t partition, int batch) {
  batch_builder b;
  for (int r = 0; r < 10; ++r) {
    std::string v = value_for(partition, batch, r);
    v.resize(2000, '.');  // ~20 KiB a batch: a 1 MiB segment holds ~50
    b.add("k", v);
  }
  return *b.build();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(file_cache_suite)

BOOST_AUTO_TEST_CASE(many_partitions_written_and_read_in_turn_stay_under_the_limit) {
  // 24 partitions of 3-4 segments each would hold ~150 descriptors without the cache; the limit is 16.
  const std::size_t partitions = 24;
  const std::uint64_t limit = 16;
  many_logs m(partitions, limit);
  for (std::size_t p = 0; p < partitions; ++p) {
    m.open(p);
    m.check_quiet();
  }
  const int batches = 160;
  for (int b = 0; b < batches; ++b) {
    for (std::size_t p = 0; p < partitions; ++p) {
      RILL_REQUIRE_OK(run(m.disk, m.logs[p]->append(batch_for(p, b))));
      m.logs[p]->check_invariants();
    }
    m.check_quiet();
  }
  for (std::size_t p = 0; p < partitions; ++p) {
    BOOST_TEST(m.logs[p]->segment_bases().size() >= 3u);
  }
  // Every partition read whole, in turn, from every segment.
  for (std::size_t p = 0; p < partitions; ++p) {
    const auto got = m.values(p, 0);
    BOOST_REQUIRE(got.size() == static_cast<std::size_t>(batches) * 10);
    for (int b = 0; b < batches; b += 17) {
      BOOST_TEST(got[static_cast<std::size_t>(b) * 10 + 3].rfind(value_for(p, b, 3), 0) == 0u);
    }
    m.check_quiet();
  }
  const auto st = m.cache.stats();
  BOOST_TEST(st.open_max <= limit);
  BOOST_TEST(st.over_limit_opens == 0u);
  BOOST_TEST(st.evictions > 0u);
  // Transient descriptors outside the cache (directory syncs, atomic files, superblock reads at open) are one at a
  // time here, as every operation ran alone.
  BOOST_TEST(m.disk.open_fds_max() <= limit + 1);
  // Idle: every descriptor may go, with every log still open.
  (void)run(m.disk, m.cache.evict_all(m.disk));
  BOOST_TEST(m.disk.open_fds() == 0u);
  BOOST_TEST(m.cache.open_count() == 0u);
}

BOOST_AUTO_TEST_CASE(concurrent_reads_and_writes_of_many_partitions_never_lose_a_descriptor_in_use) {
  // Every partition appends and reads at once, with seeded latencies reordering completions, under a limit smaller
  // than what is pinned at once: opens go over the limit rather than wait, a descriptor is never closed under an
  // I/O (file_pin::fd() asserts it is open), and once everything is idle the cache is back under its limit.
  const std::size_t partitions = 16;
  const std::uint64_t limit = 8;
  many_logs m(partitions, limit, 11);
  for (std::size_t p = 0; p < partitions; ++p) {
    m.open(p);
    for (int b = 0; b < 60; ++b) {
      RILL_REQUIRE_OK(run(m.disk, m.logs[p]->append(batch_for(p, b))));
    }
  }
  int finished = 0;
  int failed = 0;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t p = 0; p < partitions; ++p) {
      // A writer and two readers (the oldest segment and the newest) per partition, all in flight together.
      spawn(m.logs[p]->append(batch_for(p, 60 + round)), [&](expected<append_result> r) {
        failed += r ? 0 : 1;
        ++finished;
      });
      for (std::int64_t at : {std::int64_t{0}, std::int64_t{550}}) {
        read_request req;
        req.offset = offset_t(at);
        req.max_bytes = 64 * 1024;
        spawn(m.logs[p]->read(req), [&, p, at](expected<read_result> r) {
          if (!r || r->batches == 0) {
            ++failed;
          } else {
            const auto views = r->batch_views();
            const int batch = static_cast<int>(views.front().base_offset().value() / 10);
            failed += values_of(views.front()).front().rfind(value_for(p, batch, 0), 0) == 0 ? 0 : 1;
            failed += views.front().base_offset().value() <= at ? 0 : 1;
          }
          ++finished;
        });
      }
    }
    drain(m.disk);
  }
  BOOST_TEST(finished == static_cast<int>(partitions) * 3 * 3);
  BOOST_TEST(failed == 0);
  BOOST_TEST_MESSAGE("opens over the limit: " << m.cache.stats().over_limit_opens
                                              << ", most held: " << m.cache.stats().open_max);
  m.check_quiet();  // back under the limit: the reclaim engine closed what the burst left over it
  for (std::size_t p = 0; p < partitions; ++p) {
    m.logs[p]->check_invariants();
    BOOST_TEST(m.values(p, 0).size() == 630u);
  }
}

BOOST_AUTO_TEST_CASE(data_reads_back_intact_after_eviction_reopen_and_restart) {
  const std::size_t partitions = 6;
  many_logs m(partitions, 16);
  for (std::size_t p = 0; p < partitions; ++p) {
    m.open(p);
    for (int b = 0; b < 120; ++b) {
      RILL_REQUIRE_OK(run(m.disk, m.logs[p]->append(batch_for(p, b))));
    }
  }
  auto check = [&](std::size_t p, int batches) {
    const auto got = m.values(p, 0);
    BOOST_REQUIRE(got.size() == static_cast<std::size_t>(batches) * 10);
    for (int b = 0; b < batches; ++b) {
      for (int r = 0; r < 10; ++r) {
        BOOST_REQUIRE(
            got[static_cast<std::size_t>(b) * 10 + static_cast<std::size_t>(r)].rfind(value_for(p, b, r), 0) == 0u);
      }
    }
  };
  // Cold: nothing open; every read reopens what it needs.
  (void)run(m.disk, m.cache.evict_all(m.disk));
  BOOST_TEST(m.disk.open_fds() == 0u);
  for (std::size_t p = 0; p < partitions; ++p) {
    check(p, 120);
    m.check_quiet();
  }
  // Cold again, then appends (the active segment reopens for writing) and a restart (recovery through the cache).
  (void)run(m.disk, m.cache.evict_all(m.disk));
  for (std::size_t p = 0; p < partitions; ++p) {
    auto r = run(m.disk, m.logs[p]->append(batch_for(p, 120)));
    RILL_REQUIRE_OK(r);
    BOOST_TEST(r->base_offset.value() == 1200);
    m.logs[p]->check_invariants();
  }
  for (std::size_t p = 0; p < partitions; ++p) {
    m.close(p);
  }
  BOOST_TEST(m.cache.open_count() == 0u);
  BOOST_TEST(m.cache.stats().files == 0u);
  BOOST_TEST(m.disk.open_fds() == 0u);
  for (std::size_t p = 0; p < partitions; ++p) {
    m.open(p);
    BOOST_TEST(m.logs[p]->log_end().value() == 1210);
    check(p, 121);
  }
  BOOST_TEST(m.reporter.corruptions.empty());
}

BOOST_AUTO_TEST_CASE(retention_deletes_segments_whose_files_were_closed) {
  many_logs m(2, 16);
  m.options.config.retention_bytes = 1;  // by size: keep the active segment only
  m.open(0);
  m.open(1);
  for (int b = 0; b < 200; ++b) {
    RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, b))));
  }
  const auto bases = m.logs[0]->segment_bases();
  BOOST_REQUIRE(bases.size() >= 4u);
  (void)run(m.disk, m.cache.evict_all(m.disk));
  BOOST_TEST(m.disk.open_fds() == 0u);
  auto removed = run(m.disk, m.logs[0]->enforce_retention());
  RILL_REQUIRE_OK(removed);
  BOOST_TEST(removed->segments_removed == bases.size() - 1);
  drain(m.disk);
  for (std::size_t i = 0; i + 1 < bases.size(); ++i) {
    BOOST_TEST(!m.disk.exists(m.dir_of(0) + "/" + segment_name(bases[i]) + ".log"));
    BOOST_TEST(!m.disk.exists(m.dir_of(0) + "/" + segment_name(bases[i]) + ".index"));
  }
  BOOST_TEST(m.disk.exists(m.dir_of(0) + "/" + segment_name(bases.back()) + ".log"));
  m.logs[0]->check_invariants();
  m.check_quiet();
  // What is left reads back; the partition still takes writes.
  const auto rest = m.values(0, m.logs[0]->log_start().value());
  BOOST_TEST(rest.size() == static_cast<std::size_t>(m.logs[0]->log_end() - m.logs[0]->log_start()));
  RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, 200))));
  BOOST_TEST(m.reporter.corruptions.empty());
}

BOOST_AUTO_TEST_CASE(a_retention_change_is_taken_in_place_by_the_open_log) {
  // Issue 38, finding 10: a topic's retention changes without a reopen (config::changes_in_place).
  many_logs m(1, 16);
  m.open(0);
  for (int b = 0; b < 200; ++b) {
    RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, b))));
  }
  const auto bases = m.logs[0]->segment_bases();
  BOOST_REQUIRE(bases.size() >= 4u);
  auto none = run(m.disk, m.logs[0]->enforce_retention());
  RILL_REQUIRE_OK(none);
  BOOST_TEST(none->segments_removed == 0u, "no retention yet");
  config::log_config next = m.options.config;
  next.retention_bytes = 1;
  BOOST_TEST(config::changes_in_place(m.options.config, next));
  m.logs[0]->update_config(next);
  auto removed = run(m.disk, m.logs[0]->enforce_retention());
  RILL_REQUIRE_OK(removed);
  BOOST_TEST(removed->segments_removed == bases.size() - 1);
  m.logs[0]->check_invariants();
  RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, 200))));
  // What a reopen is needed for is not a change in place.
  config::log_config other = next;
  other.max_message_bytes = next.max_message_bytes / 2;
  BOOST_TEST(!config::changes_in_place(next, other));
  other = next;
  other.durability = config::durability_mode::every_ms;
  BOOST_TEST(!config::changes_in_place(next, other));
  m.check_quiet();
}

BOOST_AUTO_TEST_CASE(a_parked_cursor_finishes_a_segment_retention_removed_after_its_file_was_closed) {
  many_logs m(1, 16);
  m.options.config.retention_bytes = 1;
  m.open(0);
  for (int b = 0; b < 120; ++b) {
    RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, b))));
  }
  BOOST_REQUIRE(m.logs[0]->segment_bases().size() >= 3u);
  log_cursor parked(*m.logs[0], offset_t(0));
  auto first = run(m.disk, parked.next(UINT32_MAX, 1));
  RILL_REQUIRE_OK(first);
  BOOST_REQUIRE(first->batches == 1u);
  (void)run(m.disk, m.cache.evict_all(m.disk));
  auto removed = run(m.disk, m.logs[0]->enforce_retention());
  RILL_REQUIRE_OK(removed);
  BOOST_TEST(removed->segments_removed >= 2u);
  drain(m.disk);
  // The first segment is out of the log but its files stay while the cursor is inside: it reopens the file.
  BOOST_TEST(m.disk.exists(m.dir_of(0) + "/" + segment_name(offset_t(0)) + ".log"));
  auto second = run(m.disk, parked.next(UINT32_MAX, 1));
  RILL_REQUIRE_OK(second);
  BOOST_REQUIRE(second->batches == 1u);
  BOOST_TEST(second->first_offset.value() == 10);
  BOOST_TEST(values_of(second->batch_views().front()).front().rfind(value_for(0, 1, 0), 0) == 0u);
}

BOOST_AUTO_TEST_CASE(a_dropped_segment_is_never_reopened_by_its_path) {
  // Truncation unlinks the files of the segments after the cut; the next roll may create a segment at the same
  // base, under the same names. A descriptor the cache had closed must not be reopened onto the new file.
  many_logs m(1, 16);
  m.options.auto_commit = false;
  m.open(0);
  partition_log& log = *m.logs[0];
  for (int b = 0; b < 120; ++b) {
    RILL_REQUIRE_OK(run(m.disk, log.append(batch_for(0, b))));
  }
  const auto bases = log.segment_bases();
  BOOST_REQUIRE(bases.size() >= 3u);
  log.commit_to(offset_t(100));
  (void)run(m.disk, m.cache.evict_all(m.disk));
  // Cut inside the first segment: every later segment goes, its closed files retired.
  RILL_REQUIRE_OK(run(m.disk, log.truncate_after(offset_t(109))));
  log.check_invariants();
  drain(m.disk);
  BOOST_TEST(log.segment_bases().size() == 1u);
  // New data rolls again over the same bases.
  for (int b = 0; b < 120; ++b) {
    RILL_REQUIRE_OK(run(m.disk, log.append(batch_for(0, 1000 + b))));
  }
  log.commit_to(log.log_end());
  // The kept segment filled up again as before: the roll reused the first dropped segment's base and file names.
  const auto again = log.segment_bases();
  BOOST_TEST((std::find(again.begin(), again.end(), bases[1]) != again.end()));
  const auto got = m.values(0, 0);
  BOOST_REQUIRE(got.size() == 110u + 1200u);
  BOOST_TEST(got[109].rfind(value_for(0, 10, 9), 0) == 0u);
  BOOST_TEST(got[110].rfind(value_for(0, 1000, 0), 0) == 0u);
  BOOST_TEST(got.back().rfind(value_for(0, 1119, 9), 0) == 0u);
  m.check_quiet();
}

BOOST_AUTO_TEST_CASE(a_retired_file_is_not_reopened_and_an_open_one_stays_open) {
  sim_disk disk(3);
  file_cache cache(4);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d")));
  cached_file kept;
  cached_file gone;
  RILL_REQUIRE_OK(run(disk, kept.create(disk, cache, "/d/kept", io::open_create, 0)));
  RILL_REQUIRE_OK(run(disk, gone.create(disk, cache, "/d/gone", io::open_create, 0)));
  // Open and retired: never evicted, so readers inside keep reading the unlinked file.
  kept.forbid_reopen();
  (void)run(disk, cache.evict_all(disk));
  BOOST_TEST(kept.is_open());
  BOOST_TEST(!gone.is_open());
  // Closed and retired: a pin fails instead of opening whatever the path names now.
  gone.forbid_reopen();
  RILL_REQUIRE_OK(run(disk, unlink_file(disk, "/d/gone")));
  RILL_REQUIRE_OK(run(disk, open_file(disk, "/d/gone", io::open_create)));  // a new file, same name (fd leaks)
  auto pinned = run(disk, gone.pin(disk));
  BOOST_REQUIRE(!pinned.has_value());
  BOOST_TEST((pinned.error().code() == errc::not_found));
  RILL_REQUIRE_OK(run(disk, kept.close(disk)));
  RILL_REQUIRE_OK(run(disk, gone.close(disk)));
  BOOST_TEST(cache.open_count() == 0u);
}

BOOST_AUTO_TEST_CASE(pinned_and_unsynced_files_are_never_closed_and_the_lru_goes_first) {
  sim_disk disk(5);
  file_cache cache(3);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d")));
  std::vector<cached_file> files(6);
  for (std::size_t i = 0; i < files.size(); ++i) {
    files[i].attach(cache, "/d/f" + std::to_string(i), io::open_create);
  }
  // f0 pinned, f1 unsynced, f2 plain: the cache is full.
  auto p0 = run(disk, files[0].pin(disk));
  RILL_REQUIRE_OK(p0);
  {
    auto p1 = run(disk, files[1].pin(disk));
    RILL_REQUIRE_OK(p1);
    files[1].mark_unsynced();
  }
  { RILL_REQUIRE_OK(run(disk, files[2].pin(disk))); }
  BOOST_TEST(cache.open_count() == 3u);
  // f3 evicts f2 (the only evictable one), f4 then evicts f3.
  { RILL_REQUIRE_OK(run(disk, files[3].pin(disk))); }
  BOOST_TEST(!files[2].is_open());
  BOOST_TEST(files[0].is_open());
  BOOST_TEST(files[1].is_open());
  { RILL_REQUIRE_OK(run(disk, files[4].pin(disk))); }
  BOOST_TEST(!files[3].is_open());
  BOOST_TEST(cache.stats().over_limit_opens == 0u);
  // Two pins held and f1 unsynced: a fourth open finds nothing evictable but f4; with f4 pinned, it goes over.
  auto p4 = run(disk, files[4].pin(disk));
  RILL_REQUIRE_OK(p4);
  { RILL_REQUIRE_OK(run(disk, files[5].pin(disk))); }
  BOOST_TEST(cache.stats().over_limit_opens == 1u);
  BOOST_TEST(cache.open_count() == 4u);
  BOOST_TEST(disk.open_fds() == 4u);
  // Once f1 is synced and the pins go, the next open brings the count back under the limit.
  files[1].mark_synced();
  p0->release();
  p4->release();
  { RILL_REQUIRE_OK(run(disk, files[2].pin(disk))); }
  BOOST_TEST(cache.open_count() <= 3u);
  BOOST_TEST(disk.open_fds() == cache.open_count());
  for (auto& f : files) {
    RILL_REQUIRE_OK(run(disk, f.close(disk)));
  }
  BOOST_TEST(disk.open_fds() == 0u);
}

BOOST_AUTO_TEST_CASE(concurrent_pins_of_a_closed_file_open_it_once) {
  sim_disk disk(9);
  file_cache cache(2);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d")));
  cached_file f;
  f.attach(cache, "/d/f", io::open_create);
  int done = 0;
  std::vector<int> fds;
  auto reader = [&]() -> task<expected<void>> {
    RILL_CO_TRY(p, co_await f.pin(disk));
    fds.push_back(p.fd());
    RILL_CO_TRY_VOID(co_await datasync_file(disk, p.fd(), "/d/f"));
    ++done;
    co_return expected<void>{};
  };
  for (int i = 0; i < 3; ++i) {
    spawn(reader(), [](expected<void> r) { BOOST_TEST(r.has_value()); });
  }
  drain(disk);
  BOOST_TEST(done == 3);
  BOOST_TEST(cache.stats().opens == 1u);
  BOOST_REQUIRE(fds.size() == 3u);
  BOOST_TEST(fds[0] == fds[1]);
  BOOST_TEST(fds[1] == fds[2]);
  RILL_REQUIRE_OK(run(disk, f.close(disk)));
}

BOOST_AUTO_TEST_CASE(a_failed_sync_fences_even_under_eviction_pressure) {
  // A relaxed policy leaves written data unsynced; other partitions then need every descriptor. The written file
  // must stay open (closing it could hide the writeback error), and the failed fdatasync must fence the partition.
  const std::size_t partitions = 8;
  many_logs m(partitions, 16);
  m.options.config.durability = config::durability_mode::every_ms;
  m.options.config.sync_every_ms = 60'000;
  m.options.background_sync = false;  // the written data must stay unsynced through the pressure
  for (std::size_t p = 0; p < partitions; ++p) {
    m.open(p);
  }
  RILL_REQUIRE_OK(run(m.disk, m.logs[0]->flush()));
  for (int b = 0; b < 3; ++b) {
    RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, b))));
  }
  const offset_t committed = m.logs[0]->committed();
  BOOST_TEST(m.logs[0]->synced_end() < m.logs[0]->log_end());
  // Pressure: the others write (and sync) and read many segments' worth.
  for (int b = 0; b < 60; ++b) {
    for (std::size_t p = 1; p < partitions; ++p) {
      RILL_REQUIRE_OK(run(m.disk, m.logs[p]->append(batch_for(p, b))));
      RILL_REQUIRE_OK(run(m.disk, m.logs[p]->flush()));
    }
  }
  (void)run(m.disk, m.cache.evict_all(m.disk));
  const std::string active = m.dir_of(0) + "/" + segment_name(m.logs[0]->segment_bases().back()) + ".log";
  BOOST_TEST(m.disk.unsynced_ops(active) > 0u);
  BOOST_TEST(m.cache.open_count() >= 1u);  // partition 0's active .log: unsynced, so still open
  m.disk.faults().sync_error_ppm = 1'000'000;
  auto synced = run(m.disk, m.logs[0]->flush());
  BOOST_REQUIRE(!synced.has_value());
  BOOST_TEST(m.logs[0]->fenced());
  BOOST_TEST(m.logs[0]->committed() == committed);  // the unsynced batches never became visible
  m.disk.faults().sync_error_ppm = 0;
  auto refused = run(m.disk, m.logs[0]->append(batch_for(0, 9)));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((refused.error().code() == errc::fenced));
  // Recovery (close and open again) clears the fence.
  m.close(0);
  m.open(0);
  BOOST_TEST(!m.logs[0]->fenced());
  RILL_REQUIRE_OK(run(m.disk, m.logs[0]->append(batch_for(0, 10))));
}

BOOST_AUTO_TEST_SUITE_END()
