// Relaxed durability (every_ms / every_records): appends are acknowledged once written, and the background sync
// makes them visible within about one fdatasync, with no tick() and no clock advance, however far the bounds are.
#include <boost/test/unit_test.hpp>

#include <optional>

#include "storage/errc.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {

void configure_relaxed(sim_log_fixture& f, config::durability_mode mode) {
  f.options.config.durability = mode;
  f.options.config.sync_every_ms = 3'600'000;  // an hour: never reached here
  f.options.config.sync_every_records = 1'000'000;
  f.options.config.segment_ms = 0;  // no age rolls: no deadline at all
  f.disk.faults().sync_covers_only_submitted = true;
}

// Appends a few batches one at a time; each is acknowledged before its sync; all become visible by driving the
// disk alone. Returns the simulated time from the last acknowledgement to its visibility.
std::uint64_t appends_become_visible(config::durability_mode mode) {
  sim_log_fixture f;
  configure_relaxed(f, mode);
  f.open();
  std::uint64_t acked_ns = 0;
  std::int64_t acked_end = 0;
  for (int i = 0; i < 5; ++i) {
    std::optional<expected<append_result>> r;
    bool synced_before_ack = true;
    spawn(f.log->append(make_batch("v" + std::to_string(i), 3)), [&](expected<append_result> got) {
      if (got) {
        synced_before_ack = f.log->synced_end() > got->last_offset;
      }
      r.emplace(std::move(got));
    });
    io::run_until(f.disk, [&] { return r.has_value(); });
    BOOST_REQUIRE(r.has_value());
    RILL_REQUIRE_OK(*r);
    BOOST_TEST(!synced_before_ack, "append " << i << " was acknowledged only after its sync");
    acked_end = (*r)->last_offset.value() + 1;
    acked_ns = f.disk.now_ns();
    f.log->check_invariants();
  }
  BOOST_TEST(f.log->committed().value() < acked_end);  // not yet: its sync is in flight
  io::run_until(f.disk, [&] { return f.log->committed().value() == acked_end; });
  const std::uint64_t visible_after_ns = f.disk.now_ns() - acked_ns;
  BOOST_TEST(f.log->committed() == f.log->log_end());
  BOOST_TEST(f.log->synced_end() == f.log->log_end());
  BOOST_TEST(!f.log->next_deadline().has_value());
  f.log->check_invariants();
  BOOST_TEST(f.read_all().size() == 15u);
  drain(f);
  BOOST_TEST(f.disk.unsynced_ops(f.dir + "/00000000000000000000.log") == 0u);
  f.log->check_invariants();
  return visible_after_ns;
}

void replicated_waves(std::uint64_t seed) {
  // A replica's appends carry metadata (.meta files, synced before the batches); rolls seal and close those files
  // while the background sync may be syncing them: the roll must wait for it.
  // Latencies from 1 us to 2 ms: a sync of the background loop is sometimes still in flight at a seal.
  sim_disk_faults faults;
  faults.latency_ns_min = 1'000;
  faults.latency_ns_max = 2'000'000;
  sim_log_fixture f(seed, faults);
  configure_relaxed(f, config::durability_mode::every_ms);
  f.options.auto_commit = false;
  f.open();
  std::int64_t base = 0;
  int acked = 0;
  int failed = 0;
  for (int wave = 0; wave < 80; ++wave) {
    for (int j = 0; j < 3; ++j) {
      std::vector<batch_meta> metas(2);
      metas[0].payload[0] = std::byte{1};
      auto bytes = primary_batches(base, 2, 10, 1, "p");
      base += 20;
      spawn(f.log->append_replicated(std::move(bytes), std::move(metas)),
            [&](expected<append_result> r) { r ? ++acked : ++failed; });
    }
    io::run_until(f.disk, [&] { return acked + failed == (wave + 1) * 3; });
    f.log->check_invariants();
  }
  BOOST_TEST(failed == 0);
  drain(f);
  f.log->check_invariants();
  BOOST_TEST(f.log->segment_bases().size() >= 3u);
  BOOST_TEST(f.log->synced_end() == f.log->log_end());
  BOOST_TEST(f.log->log_end().value() == base);
  BOOST_TEST(f.log->meta_for(offset_t(base - 20)).has_value());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(background_sync_suite)

BOOST_AUTO_TEST_CASE(every_ms_appends_are_visible_without_a_tick) {
  const auto ns = appends_become_visible(config::durability_mode::every_ms);
  // Within about one fdatasync: the sync in flight for earlier appends, then the meta and log syncs for this one
  // (each at most latency_ns_max on the simulated disk).
  BOOST_TEST(ns <= 4 * sim_disk_faults{}.latency_ns_max);
  BOOST_TEST_MESSAGE("every_ms: visible " << ns / 1000 << " us (simulated) after the acknowledgement");
}

BOOST_AUTO_TEST_CASE(every_records_appends_below_the_bound_are_visible_on_an_idle_partition) {
  const auto ns = appends_become_visible(config::durability_mode::every_records);
  BOOST_TEST(ns <= 4 * sim_disk_faults{}.latency_ns_max);
}

BOOST_AUTO_TEST_CASE(appends_during_background_syncs_and_rolls_all_become_visible) {
  sim_log_fixture f(5);
  configure_relaxed(f, config::durability_mode::every_ms);
  f.open();
  int acked = 0;
  int failed = 0;
  std::uint64_t syncs_seen_in_flight = 0;
  // Waves of appends, each started while the previous wave's background sync runs; ~2.4 MiB: two rolls.
  for (int wave = 0; wave < 40; ++wave) {
    for (int j = 0; j < 3; ++j) {
      spawn(f.log->append(make_batch("w" + std::to_string(wave) + "-" + std::to_string(j), 4, 5000)),
            [&](expected<append_result> r) { r ? ++acked : ++failed; });
    }
    const int want = (wave + 1) * 3;
    io::run_until(f.disk, [&] { return acked + failed == want; });
    if (f.log->synced_end() < f.log->log_end()) {
      ++syncs_seen_in_flight;
    }
    f.log->check_invariants();
  }
  BOOST_TEST(failed == 0);
  BOOST_TEST(syncs_seen_in_flight > 0u);
  drain(f);
  f.log->check_invariants();
  BOOST_TEST(f.log->committed().value() == 40 * 3 * 4);
  BOOST_TEST(f.log->committed() == f.log->log_end());
  BOOST_TEST(f.log->segment_bases().size() >= 3u);
  const auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 480u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].first == static_cast<std::int64_t>(i));
  }
  // Group commit without the producer waiting: fewer syncs than appends.
  BOOST_TEST(f.log->stats().syncs < 120u);
  f.reopen();
  BOOST_TEST(f.read_all() == all);
}

BOOST_AUTO_TEST_CASE(replicated_appends_with_metadata_sync_beside_rolls) {
  // A replica's appends carry metadata (.meta files, synced before the batches); rolls seal and close those files
  // while the background sync may be syncing them: the roll must wait for it.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      replicated_waves(seed);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_truncation_during_a_background_sync_is_not_undone_by_it) {
  sim_log_fixture f(6);
  configure_relaxed(f, config::durability_mode::every_ms);
  f.options.auto_commit = false;  // a replica: truncation is allowed above committed
  f.open();
  for (int i = 0; i < 3; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("t" + std::to_string(i), 2)));
  }
  BOOST_TEST(f.log->synced_end() < f.log->log_end());  // a background sync in flight
  RILL_REQUIRE_OK(f.run_checked(f.log->truncate_after(offset_t(1))));
  BOOST_TEST(f.log->log_end().value() == 2);
  RILL_REQUIRE_OK(f.append(make_batch("u", 2)));
  drain(f);
  f.log->check_invariants();
  BOOST_TEST(f.log->synced_end().value() == 4);
  f.log->commit_to(offset_t(4));
  const auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 4u);
  BOOST_TEST(all[2].second.rfind("u-0", 0) == 0);
}

BOOST_AUTO_TEST_CASE(a_failed_background_sync_fences_the_log) {
  sim_log_fixture f(7);
  configure_relaxed(f, config::durability_mode::every_ms);
  f.open();
  int fenced_calls = 0;
  f.log->on_fenced([&] { ++fenced_calls; });
  RILL_REQUIRE_OK(f.append(make_batch("a", 3)));
  drain(f);
  BOOST_TEST(f.log->committed().value() == 3);
  f.disk.faults().sync_error_ppm = 1'000'000;
  auto b = f.append(make_batch("b", 2));  // acknowledged at write; nobody waits for its sync
  RILL_REQUIRE_OK(b);
  drain(f);
  BOOST_TEST(f.log->fenced());
  BOOST_TEST(fenced_calls == 1);
  BOOST_TEST(f.log->committed().value() == 3);  // consumers never saw "b"
  BOOST_TEST(f.log->synced_end().value() == 3);
  f.log->check_invariants();
  auto refused = f.append(make_batch("c", 1));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((refused.error().code() == errc::fenced));
  // Recovery in place, trusting only what was synced (as partition_state::recover_log does).
  f.disk.faults().sync_error_ppm = 0;
  const offset_t trusted = f.log->synced_end();
  f.close();
  f.options.trusted_end = trusted;
  f.open();
  BOOST_TEST(!f.log->fenced());
  BOOST_TEST(f.log->log_end().value() == 3);
  auto c = f.append(make_batch("c", 1));
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->base_offset.value() == 3);
  drain(f);
  BOOST_TEST(f.log->committed().value() == 4);
}

BOOST_AUTO_TEST_CASE(without_the_background_sync_only_the_bounds_sync) {
  // The knob the bound-only tests use (and rill-bench --sync none): nothing is synced before a bound is reached.
  sim_log_fixture f;
  configure_relaxed(f, config::durability_mode::every_records);
  f.options.background_sync = false;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("n", 3)));
  drain(f);
  BOOST_TEST(f.log->committed().value() == 0);
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));
  BOOST_TEST(f.log->committed().value() == 3);
}

BOOST_AUTO_TEST_SUITE_END()
