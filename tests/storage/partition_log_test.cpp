// partition_log on the simulated disk: appends, reads, rolls, index and time lookups, group commit, durability
// policies, restarts, validation and I/O failures.
#include <boost/test/unit_test.hpp>

#include <set>

#include "storage/errc.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

BOOST_AUTO_TEST_SUITE(partition_log_suite)

BOOST_AUTO_TEST_CASE(append_assigns_dense_offsets_and_reads_them_back) {
  sim_log_fixture f;
  f.open();
  BOOST_TEST(f.log->log_end().value() == 0);
  auto a = f.append(make_batch("a", 3));
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->base_offset.value() == 0);
  BOOST_TEST(a->last_offset.value() == 2);
  auto b = f.append(make_batch("b", 5));
  RILL_REQUIRE_OK(b);
  BOOST_TEST(b->base_offset.value() == 3);
  BOOST_TEST(b->last_offset.value() == 7);
  BOOST_TEST(f.log->log_end().value() == 8);
  BOOST_TEST(f.log->synced_end().value() == 8);
  BOOST_TEST(f.log->committed().value() == 8);

  auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 8u);
  BOOST_TEST(all[0].second.rfind("a-0", 0) == 0);
  BOOST_TEST(all[3].second.rfind("b-0", 0) == 0);
  for (std::size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].first == static_cast<std::int64_t>(i));
  }
  // The stored batches carry broker log-append time and the CRC derived for the new header.
  auto r = f.read_at(0);
  RILL_REQUIRE_OK(r);
  auto stored = split_batches(r->bytes.span());
  BOOST_REQUIRE(stored.size() == 2u);
  BOOST_TEST(stored[0].log_append_time());
  BOOST_TEST(stored[0].max_timestamp() == a->timestamp);
  BOOST_TEST(stored[1].max_timestamp() == b->timestamp);
  BOOST_TEST(b->timestamp <= f.clk.wall_ms());
}

BOOST_AUTO_TEST_CASE(timestamps_are_monotonic_even_when_the_wall_clock_goes_back) {
  sim_log_fixture f;
  f.open();
  auto a = f.append(make_batch("a", 1));
  RILL_REQUIRE_OK(a);
  f.clk.skew_wall_ms(-60'000);
  auto b = f.append(make_batch("b", 1));
  RILL_REQUIRE_OK(b);
  BOOST_TEST(b->timestamp >= a->timestamp);
}

BOOST_AUTO_TEST_CASE(reads_return_whole_batches_and_at_least_one) {
  sim_log_fixture f;
  f.open();
  for (int i = 0; i < 10; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("x" + std::to_string(i), 10, 100)));
  }
  // max_bytes smaller than one batch: still exactly one whole batch.
  auto r = f.read_at(0, 10);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->batches == 1u);
  BOOST_TEST(r->next_offset.value() == 10);
  // An offset in the middle of a batch returns that batch.
  r = f.read_at(25, 10);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->first_offset.value() == 20);
  BOOST_TEST(r->next_offset.value() == 30);
  // max_records
  read_request req;
  req.offset = offset_t(0);
  req.max_records = 25;
  r = f.read(req);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->records == 20u);  // two whole batches; a third would exceed 25
  // At the end: empty, not an error.
  r = f.read_at(100);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->batches == 0u);
  BOOST_TEST(r->next_offset.value() == 100);
  // Beyond the end: out of range.
  r = f.read_at(101);
  BOOST_TEST(!r.has_value());
  BOOST_TEST((r.error().code() == errc::offset_out_of_range));
}

BOOST_AUTO_TEST_CASE(rolls_by_size_and_reads_across_segment_boundaries_by_offset_and_time) {
  sim_log_fixture f;
  f.open();
  // ~3.5 MiB in 1 MiB segments, batches of ~20 KiB; the clock moves 1 s per batch.
  std::vector<append_result> results;
  for (int i = 0; i < 180; ++i) {
    auto r = f.append(make_batch("b" + std::to_string(i), 20, 1000));
    RILL_REQUIRE_OK(r);
    results.push_back(*r);
    f.clk.advance(std::chrono::seconds(1));
  }
  BOOST_TEST(f.log->segment_bases().size() >= 4u);
  BOOST_TEST(f.log->stats().rolls >= 3u);
  // Every segment boundary is a batch boundary, and each segment is at most segment_bytes.
  for (auto base : f.log->segment_bases()) {
    BOOST_TEST(base.value() % 20 == 0);
  }
  // Every offset reads back the batch containing it.
  for (std::int64_t o = 0; o < 3600; o += 37) {
    auto r = f.read_at(o, 1);
    RILL_REQUIRE_OK(r);
    BOOST_REQUIRE(r->batches == 1u);
    BOOST_TEST(r->first_offset.value() == o / 20 * 20);
  }
  // Reading everything in one pass crosses every boundary without losing or repeating a record.
  auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 3600u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].first == static_cast<std::int64_t>(i));
  }
  // Time lookups: the first batch at or after a given time, in any segment.
  for (int i : {0, 1, 50, 99, 100, 150, 179}) {
    read_request req;
    req.start = read_start::timestamp;
    req.timestamp = results[static_cast<std::size_t>(i)].timestamp;
    req.max_bytes = 1;
    auto r = f.read(req);
    RILL_REQUIRE_OK(r);
    BOOST_REQUIRE(r->batches == 1u);
    BOOST_TEST(r->first_offset == results[static_cast<std::size_t>(i)].base_offset);
  }
  read_request late;
  late.start = read_start::timestamp;
  late.timestamp = results.back().timestamp + 1;
  auto none = f.read(late);
  RILL_REQUIRE_OK(none);
  BOOST_TEST(none->batches == 0u);
  // first and last
  read_request first;
  first.start = read_start::first;
  first.max_bytes = 1;
  auto r1 = f.read(first);
  RILL_REQUIRE_OK(r1);
  BOOST_TEST(r1->first_offset.value() == 0);
  read_request last;
  last.start = read_start::last;
  auto r2 = f.read(last);
  RILL_REQUIRE_OK(r2);
  BOOST_TEST(r2->first_offset.value() == 3580);
  BOOST_TEST(r2->batches == 1u);
}

BOOST_AUTO_TEST_CASE(a_batch_larger_than_a_segment_gets_its_own_segment) {
  sim_log_fixture f;
  f.options.config.max_message_bytes = 3 * 1024 * 1024;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("small", 1)));
  auto big = f.append(make_batch("big", 4, 600 * 1024));  // ~2.4 MiB
  RILL_REQUIRE_OK(big);
  RILL_REQUIRE_OK(f.append(make_batch("after", 1)));
  BOOST_TEST(f.log->segment_bases().size() == 3u);
  auto r = f.read_at(1, 1);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->batches == 1u);
  BOOST_TEST(r->bytes.size() > 2u * 1024 * 1024);
  auto all = f.read_all();
  BOOST_TEST(all.size() == 6u);
}

BOOST_AUTO_TEST_CASE(rolls_by_age) {
  sim_log_fixture f;
  f.options.config.segment_ms = 60'000;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 1)));
  f.clk.advance(std::chrono::seconds(30));
  RILL_REQUIRE_OK(f.append(make_batch("b", 1)));
  BOOST_TEST(f.log->segment_bases().size() == 1u);
  f.clk.advance(std::chrono::seconds(31));
  RILL_REQUIRE_OK(f.append(make_batch("c", 1)));
  BOOST_TEST(f.log->segment_bases().size() == 2u);
  BOOST_TEST(f.log->segment_bases().back().value() == 2);
  // An idle partition rolls by age through tick(), at the deadline it announces.
  const auto due = f.log->next_deadline();
  BOOST_REQUIRE(due.has_value());
  BOOST_TEST(due->count() == (f.clk.monotonic() + std::chrono::seconds(60)).count());
  f.clk.advance(std::chrono::seconds(59));
  f.log->tick();
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.log->segment_bases().size() == 2u);
  f.clk.advance(std::chrono::seconds(2));
  f.log->tick();
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.log->segment_bases().size() == 3u);
  BOOST_TEST(!f.log->next_deadline().has_value());  // the new segment is empty: nothing to age
}

BOOST_AUTO_TEST_CASE(group_commit_covers_many_appends_with_one_sync) {
  sim_log_fixture f;
  f.open();
  const int n = 64;
  std::vector<std::optional<expected<append_result>>> results(n);
  for (int i = 0; i < n; ++i) {
    spawn(f.log->append(make_batch("g" + std::to_string(i), 2)),
          [&results, i](expected<append_result> r) { results[static_cast<std::size_t>(i)].emplace(std::move(r)); });
  }
  io::run_until(
      f.disk, [&] { return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); }); });
  std::set<std::int64_t> bases;
  for (auto& r : results) {
    BOOST_REQUIRE(r.has_value());
    RILL_REQUIRE_OK(*r);
    bases.insert((*r)->base_offset.value());
  }
  BOOST_TEST(bases.size() == static_cast<std::size_t>(n));
  BOOST_TEST(*bases.rbegin() == 2 * (n - 1));
  const auto st = f.log->stats();
  BOOST_TEST_MESSAGE("appends " << st.appends << " flushes " << st.flushes << " syncs " << st.syncs);
  BOOST_TEST(st.syncs < 4u);  // the first append's flush, then everything that queued behind it
  BOOST_TEST(st.flushes < 4u);
}

BOOST_AUTO_TEST_CASE(no_append_completes_before_its_covering_sync) {
  // Under sync_before_ack, at the moment an append completes its records must be durable: a crash right then
  // (power loss of everything unsynced) keeps them.
  sim_log_fixture f;
  f.open();
  bool done = false;
  spawn(f.log->append(make_batch("d", 4)), [&](expected<append_result> r) {
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(f.disk.unsynced_ops(f.dir + "/00000000000000000000.log") == 0u);
    done = true;
  });
  io::run_until(f.disk, [&] { return done; });
  BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(relaxed_durability_acks_after_write_and_shows_only_synced_data) {
  // The bound alone (no background sync: as on a disk whose syncs take longer than the test): every 10 records.
  sim_log_fixture f;
  f.options.config.durability = config::durability_mode::every_records;
  f.options.config.sync_every_records = 10;
  f.options.background_sync = false;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("r", 4)));
  BOOST_TEST(f.log->log_end().value() == 4);
  BOOST_TEST(f.log->committed().value() == 0);  // written, not synced: invisible
  auto r = f.read_at(0);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->batches == 0u);
  RILL_REQUIRE_OK(f.append(make_batch("s", 6)));  // 10 records: a sync follows the acknowledgement
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.log->committed().value() == 10);
  RILL_REQUIRE_OK(f.append(make_batch("t", 1)));
  BOOST_TEST(f.log->committed().value() == 10);
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));
  BOOST_TEST(f.log->committed().value() == 11);
}

BOOST_AUTO_TEST_CASE(every_ms_durability_syncs_when_the_deadline_passes) {
  sim_log_fixture f;
  f.options.config.durability = config::durability_mode::every_ms;
  f.options.config.sync_every_ms = 50;
  f.options.config.segment_ms = 0;    // no age rolls: the only deadline is the sync
  f.options.background_sync = false;  // the bound alone
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("m", 3)));
  BOOST_TEST(f.log->committed().value() == 0);
  auto d = f.log->next_deadline();
  BOOST_REQUIRE(d.has_value());
  f.log->tick();  // not yet due
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.log->committed().value() == 0);
  f.clk.advance(std::chrono::milliseconds(50));
  f.log->tick();
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.log->committed().value() == 3);
  BOOST_TEST(!f.log->next_deadline().has_value());
}

BOOST_AUTO_TEST_CASE(restart_finds_everything_and_continues_offsets) {
  sim_log_fixture f;
  f.open();
  for (int i = 0; i < 120; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("p" + std::to_string(i), 10, 900)));
  }
  const auto bases = f.log->segment_bases();
  BOOST_TEST(bases.size() > 1u);
  f.reopen();
  BOOST_TEST(f.log->segment_bases() == bases);
  BOOST_TEST(f.log->log_end().value() == 1200);
  BOOST_TEST(f.log->committed().value() == 1200);
  BOOST_TEST(f.reporter.corruptions.empty());
  auto a = f.append(make_batch("after", 2));
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->base_offset.value() == 1200);
  auto all = f.read_all();
  BOOST_TEST(all.size() == 1202u);
}

// append(validated_batches) does not validate again, but the log's own max_message_bytes still applies: batches
// validated against a larger limit (a router with an older view of the topic) are refused whole, before anything is
// queued; within the limit they are written as validated, stamped from their crc_tail.
BOOST_AUTO_TEST_CASE(validated_batches_are_appended_as_they_are_and_the_logs_own_size_limit_still_applies) {
  sim_log_fixture f;
  f.options.config.max_message_bytes = 4096;
  f.open();
  auto small = make_batch("s", 2);
  auto big = make_batch("big", 10, 1000);
  BOOST_REQUIRE(big.size() > 4096u);
  std::vector<std::byte> both = small;
  both.insert(both.end(), big.begin(), big.end());
  auto validated = validated_batches::validate(std::span<const std::byte>(both), std::uint64_t{1} << 20);
  RILL_REQUIRE_OK(validated);
  auto refused = run(f.disk, f.log->append(std::move(*validated)));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((refused.error().code() == errc::batch_too_large));
  BOOST_TEST(refused.error().detail().find("batch 1 (byte " + std::to_string(small.size())) != std::string::npos,
             refused.error().detail());
  BOOST_TEST(f.log->log_end().value() == 0);
  auto fits = validated_batches::validate(std::span<const std::byte>(small), std::uint64_t{1} << 20);
  RILL_REQUIRE_OK(fits);
  auto a = run(f.disk, f.log->append(std::move(*fits)));
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->base_offset.value() == 0);
  f.log->check_invariants();
  // What was written reads back and validates as a stored batch (its CRC re-derived when it was stamped).
  auto all = f.read_all();
  BOOST_TEST(all.size() == 2u);
  auto stored = f.read_at(0);
  RILL_REQUIRE_OK(stored);
  RILL_REQUIRE_OK(batch_view::validate(stored->bytes.span(), batch_limits{}));
}

BOOST_AUTO_TEST_CASE(invalid_batches_are_refused_whole_and_nothing_is_written) {
  sim_log_fixture f;
  f.options.config.max_message_bytes = 4096;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("ok", 2)));
  // A request of two batches whose second is corrupt: neither is written.
  auto good = make_batch("g", 2);
  auto bad = make_batch("b", 2);
  bad[bad.size() - 1] ^= std::byte{1};
  std::vector<std::byte> both = good;
  both.insert(both.end(), bad.begin(), bad.end());
  auto r = f.append(both);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.error().code() == errc::crc_mismatch));
  BOOST_TEST(r.error().detail().find("batch 1") != std::string::npos);
  // Oversized.
  auto big = f.append(make_batch("big", 10, 1000));
  BOOST_REQUIRE(!big.has_value());
  BOOST_TEST((big.error().code() == errc::batch_too_large));
  // Garbage and an empty request.
  std::vector<std::byte> junk(100, std::byte{7});
  BOOST_TEST(!f.append(junk).has_value());
  BOOST_TEST(!f.append({}).has_value());
  BOOST_TEST(f.log->log_end().value() == 2);
  auto ok = f.append(make_batch("ok2", 1));
  RILL_REQUIRE_OK(ok);
  BOOST_TEST(ok->base_offset.value() == 2);
}

BOOST_AUTO_TEST_CASE(pending_bytes_over_the_limit_are_refused_as_overloaded) {
  sim_log_fixture f;
  f.options.config.flush_bytes_max = 4096;
  f.options.config.pending_bytes_max = 16 * 1024;
  f.open();
  int ok = 0;
  int overloaded = 0;
  int finished = 0;
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    spawn(f.log->append(make_batch("o", 4, 250)), [&](expected<append_result> r) {
      ++finished;
      if (r) {
        ++ok;
      } else if (r.error().code() == errc::overloaded) {
        ++overloaded;
      }
    });
  }
  io::run_until(f.disk, [&] { return finished == n; });
  BOOST_TEST(finished == n);
  BOOST_TEST(overloaded > 0);
  BOOST_TEST(ok + overloaded == n);
  BOOST_TEST(f.log->log_end().value() == 4 * ok);
  BOOST_TEST(f.log->stats().pending_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_write_is_cut_off_and_the_partition_continues) {
  sim_disk_faults faults;
  sim_log_fixture f(3, faults);
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 2)));
  f.disk.faults().write_error_ppm = 1'000'000;
  auto r = f.append(make_batch("b", 2));
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.error().code() == errc::io_error));
  f.disk.faults().write_error_ppm = 0;
  BOOST_TEST(!f.log->fenced());
  BOOST_TEST(f.log->log_end().value() == 2);
  auto c = f.append(make_batch("c", 2));
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->base_offset.value() == 2);  // the failed append's offsets were never visible: reused
  auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 4u);
  BOOST_TEST(all[2].second.rfind("c-0", 0) == 0);
}

BOOST_AUTO_TEST_CASE(a_full_disk_refuses_the_write_and_loses_nothing) {
  sim_log_fixture f;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 2)));
  f.disk.faults().capacity_bytes = f.disk.used_bytes() + 100;
  auto r = f.append(make_batch("b", 60, 100));  // past the block the first batch is in
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.error().code() == errc::no_space));
  BOOST_TEST(!f.log->fenced());
  f.disk.faults().capacity_bytes = UINT64_MAX;
  RILL_REQUIRE_OK(f.append(make_batch("c", 1)));
  BOOST_TEST(f.read_all().size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_failed_fsync_fences_the_partition_until_reopened) {
  sim_log_fixture f;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 2)));
  f.disk.faults().sync_error_ppm = 1'000'000;
  auto r = f.append(make_batch("b", 2));
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(f.log->fenced());
  f.disk.faults().sync_error_ppm = 0;
  auto again = f.append(make_batch("c", 1));
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST((again.error().code() == errc::fenced));
  BOOST_TEST(f.log->committed().value() == 2);  // the unsynced batch never became visible
  f.reopen();                                   // recovery
  BOOST_TEST(!f.log->fenced());
  auto after = f.append(make_batch("d", 1));
  RILL_REQUIRE_OK(after);
  BOOST_TEST(after->base_offset == f.log->log_end() - 1);
}

BOOST_AUTO_TEST_CASE(a_leader_epoch_set_with_nothing_appended_after_survives_a_reopen) {
  sim_log_fixture f;
  f.open();
  RILL_REQUIRE_OK(f.run_checked(f.log->set_leader_epoch(epoch_t(1))));
  RILL_REQUIRE_OK(f.append(make_batch("e1", 3)));
  RILL_REQUIRE_OK(f.run_checked(f.log->set_leader_epoch(epoch_t(2))));  // starts at 3, nothing appended yet
  f.reopen();
  BOOST_TEST(f.log->leader_epoch().value() == 2);
  BOOST_REQUIRE(f.log->epochs().latest().has_value());
  BOOST_TEST(f.log->epochs().latest()->start_offset.value() == 3);
  // On an empty log too.
  sim_log_fixture empty(2);
  empty.open();
  RILL_REQUIRE_OK(empty.run_checked(empty.log->set_leader_epoch(epoch_t(5))));
  empty.reopen();
  BOOST_TEST(empty.log->leader_epoch().value() == 5);
}

BOOST_AUTO_TEST_CASE(leader_epochs_are_stamped_persisted_and_queried) {
  sim_log_fixture f;
  f.open();
  RILL_REQUIRE_OK(f.run_checked(f.log->set_leader_epoch(epoch_t(3))));
  RILL_REQUIRE_OK(f.append(make_batch("e3", 5)));
  RILL_REQUIRE_OK(f.run_checked(f.log->set_leader_epoch(epoch_t(7))));
  RILL_REQUIRE_OK(f.append(make_batch("e7", 5)));
  auto r = f.read_at(0);
  RILL_REQUIRE_OK(r);
  auto batches = split_batches(r->bytes.span());
  BOOST_REQUIRE(batches.size() == 2u);
  BOOST_TEST(batches[0].leader_epoch().value() == 3);
  BOOST_TEST(batches[1].leader_epoch().value() == 7);
  BOOST_TEST(!f.run_checked(f.log->set_leader_epoch(epoch_t(5))).has_value());
  f.reopen();
  BOOST_TEST(f.log->leader_epoch().value() == 7);
  BOOST_TEST(f.log->epochs().epoch_for(offset_t(4)).value().value() == 3);
  BOOST_TEST(f.log->epochs().epoch_for(offset_t(5)).value().value() == 7);
  BOOST_TEST(f.log->epochs().end_offset_for(epoch_t(3), f.log->log_end()).value().value() == 5);
  BOOST_TEST(f.log->epochs().end_offset_for(epoch_t(7), f.log->log_end()).value().value() == 10);
}

BOOST_AUTO_TEST_CASE(config_values_out_of_range_are_refused_with_the_key_named) {
  sim_log_fixture f;
  f.options.config.segment_bytes = 1000;
  auto r = f.try_open();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().detail().find("segment_bytes") != std::string::npos);
  BOOST_TEST(r.error().detail().find("[1048576,") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
