// partition_state on the simulated disk: idempotent producers (retries, gaps, epochs, failures, restarts) and
// consumer offsets.
#include <boost/test/unit_test.hpp>

#include "actors/partition_state.h"
#include "net/status.h"
#include "simulation/sim_disk.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::actors;
using storage::testing::run;

namespace {
std::vector<std::byte> producer_batch(std::int64_t pid, std::int16_t epoch, std::int32_t seq, int records,
                                      const std::string& tag) {
  storage::batch_builder b;
  b.producer(pid, epoch, seq);
  for (int i = 0; i < records; ++i) {
    b.add("k", tag + "-" + std::to_string(i));
  }
  return *b.build();
}

struct fixture {
  fixture() : disk(3, simulation::sim_disk_faults{}, &clk) { options.config.segment_bytes = 1 << 20; }
  void open() {
    auto p = run(disk, partition_state::open(disk, pool, clk, reporter, "/p", options));
    RILL_REQUIRE_OK(p);
    state = std::move(*p);
  }
  void reopen() {
    RILL_REQUIRE_OK(run(disk, state->close()));
    state.reset();
    open();
  }
  ~fixture() {
    if (state) {
      (void)run(disk, state->close());
    }
  }
  expected<produce_result> produce(std::vector<std::byte> b) { return run(disk, state->produce(std::move(b))); }
  net::status status(const expected<produce_result>& r) {
    return r ? net::status::ok : net::status_of(r.error().code());
  }

  manual_clock clk;
  simulation::sim_disk disk;
  storage::buffer_pool pool;
  storage::collecting_reporter reporter;
  storage::log_options options;
  std::unique_ptr<partition_state> state;
};
}  // namespace

BOOST_AUTO_TEST_SUITE(partition_state_suite)

BOOST_AUTO_TEST_CASE(retries_are_answered_with_their_original_offsets) {
  fixture f;
  f.open();
  auto a = f.produce(producer_batch(7, 0, 0, 3, "a"));
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->base_offsets == (std::vector<std::int64_t>{0}));
  auto b = f.produce(producer_batch(7, 0, 3, 2, "b"));
  RILL_REQUIRE_OK(b);
  BOOST_TEST(b->base_offsets == (std::vector<std::int64_t>{3}));
  // The reply to b was lost; the producer sends it again.
  auto again = f.produce(producer_batch(7, 0, 3, 2, "b"));
  RILL_REQUIRE_OK(again);
  BOOST_TEST(again->duplicate);
  BOOST_TEST(again->base_offsets == (std::vector<std::int64_t>{3}));
  BOOST_TEST(f.state->log().log_end().value() == 5);
  // Non-idempotent batches are always appended.
  auto plain = f.produce(producer_batch(-1, -1, -1, 1, "p"));
  RILL_REQUIRE_OK(plain);
  BOOST_TEST(plain->base_offsets == (std::vector<std::int64_t>{5}));
}

BOOST_AUTO_TEST_CASE(gaps_old_epochs_and_new_epochs) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(1, 2, 0, 2, "a")));
  BOOST_TEST((f.status(f.produce(producer_batch(1, 2, 5, 1, "gap"))) == net::status::sequence_gap));
  // A retry from long ago: written, but no longer among the remembered batches.
  for (int s = 2; s < 8; ++s) {
    RILL_REQUIRE_OK(f.produce(producer_batch(1, 2, s, 1, "more")));
  }
  BOOST_TEST((f.status(f.produce(producer_batch(1, 2, 0, 2, "a"))) == net::status::duplicate_sequence));
  BOOST_TEST((f.status(f.produce(producer_batch(1, 1, 2, 1, "old"))) == net::status::producer_fenced));
  BOOST_TEST((f.status(f.produce(producer_batch(1, 3, 4, 1, "new-not-0"))) == net::status::sequence_gap));
  auto bumped = f.produce(producer_batch(1, 3, 0, 1, "new"));
  RILL_REQUIRE_OK(bumped);
  BOOST_TEST((f.status(f.produce(producer_batch(1, 2, 2, 1, "fenced-now"))) == net::status::producer_fenced));
  BOOST_TEST(f.state->log().log_end().value() == 9);
}

BOOST_AUTO_TEST_CASE(a_request_mixing_retries_and_new_batches_appends_only_the_new) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(4, 0, 0, 2, "a")));
  auto req = producer_batch(4, 0, 0, 2, "a");
  auto next = producer_batch(4, 0, 2, 3, "b");
  req.insert(req.end(), next.begin(), next.end());
  auto r = f.produce(req);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offsets == (std::vector<std::int64_t>{0, 2}));
  BOOST_TEST(!r->duplicate);
  BOOST_TEST(f.state->log().log_end().value() == 5);
}

BOOST_AUTO_TEST_CASE(producer_state_survives_a_restart) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(9, 1, 0, 4, "a")));
  RILL_REQUIRE_OK(f.produce(producer_batch(9, 1, 4, 4, "b")));
  f.reopen();
  auto retry = f.produce(producer_batch(9, 1, 4, 4, "b"));
  RILL_REQUIRE_OK(retry);
  BOOST_TEST(retry->duplicate);
  BOOST_TEST(retry->base_offsets == (std::vector<std::int64_t>{4}));
  BOOST_TEST((f.status(f.produce(producer_batch(9, 1, 10, 1, "gap"))) == net::status::sequence_gap));
  RILL_REQUIRE_OK(f.produce(producer_batch(9, 1, 8, 1, "c")));
}

BOOST_AUTO_TEST_CASE(a_failed_append_rolls_the_producer_back_so_its_retry_is_written) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(2, 0, 0, 1, "a")));
  f.disk.faults().write_error_ppm = 1'000'000;
  auto failed = f.produce(producer_batch(2, 0, 1, 1, "b"));
  BOOST_REQUIRE(!failed.has_value());
  f.disk.faults().write_error_ppm = 0;
  auto retry = f.produce(producer_batch(2, 0, 1, 1, "b"));
  RILL_REQUIRE_OK(retry);
  BOOST_TEST(!retry->duplicate);
  BOOST_TEST(retry->base_offsets == (std::vector<std::int64_t>{1}));
}

BOOST_AUTO_TEST_CASE(consumer_offsets_are_stored_reloaded_and_may_move_back) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  BOOST_TEST(!f.state->consumer_offset("c1").has_value());
  auto prev = run(f.disk, f.state->store_consumer_offset("c1", 7));
  RILL_REQUIRE_OK(prev);
  BOOST_TEST(!prev->has_value());
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("c2", 10)));
  BOOST_TEST((run(f.disk, f.state->store_consumer_offset("c3", 11)).error().code() ==
              net::make_error_code(net::status::offset_out_of_range)));
  BOOST_TEST(!run(f.disk, f.state->store_consumer_offset("bad name", 1)).has_value());
  f.reopen();
  BOOST_TEST(*f.state->consumer_offset("c1") == 7);
  BOOST_TEST(*f.state->consumer_offset("c2") == 10);
  auto back = run(f.disk, f.state->store_consumer_offset("c1", 2));
  RILL_REQUIRE_OK(back);
  BOOST_TEST(**back == 7);
  BOOST_TEST(!f.reporter.notices.empty());
  BOOST_TEST(f.reporter.notices.back().find("moved back from offset 7 to 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(acknowledged_produces_survive_a_crash_at_every_step_and_retries_stay_exactly_once) {
  // Two idempotent producers, three batches in flight at a time; the disk loses power at every mutating step in
  // turn (dropping or tearing what was not synced). After recovery every acknowledged batch is there once, at its
  // acknowledged offset, and every batch retried (acknowledged or not) is there exactly once.
  struct sent {
    std::int64_t pid;
    std::int32_t seq;
    std::string tag;
  };
  std::vector<sent> plan;
  for (int i = 0; i < 24; ++i) {
    plan.push_back(sent{i % 2 ? 11 : 22, i / 2 * 2, "b" + std::to_string(i)});
  }
  auto workload = [&](fixture& f, std::map<std::string, std::int64_t>& acked) {
    for (std::size_t i = 0; i < plan.size(); i += 3) {
      int done = 0;
      for (std::size_t j = i; j < i + 3 && j < plan.size(); ++j) {
        const auto& p = plan[j];
        spawn(f.state->produce(producer_batch(p.pid, 0, p.seq, 2, p.tag)),
              [&acked, &done, tag = p.tag](expected<produce_result> r) {
                ++done;
                if (r) {
                  acked[tag] = r->base_offsets[0];
                }
              });
      }
      storage::io::run_until(f.disk,
                             [&] { return done == static_cast<int>(std::min<std::size_t>(3, plan.size() - i)); });
    }
  };
  std::uint64_t total = 0;
  {
    fixture f;
    f.open();
    std::map<std::string, std::int64_t> acked;
    workload(f, acked);
    BOOST_REQUIRE(acked.size() == plan.size());
    total = f.disk.mutating_ops();
  }
  for (std::uint64_t k = 1; k <= total; ++k) {
    BOOST_TEST_CONTEXT("crash point " << k) {
      fixture f;
      f.disk.fail_stop_after(k);
      std::map<std::string, std::int64_t> acked;
      auto opened = run(f.disk, partition_state::open(f.disk, f.pool, f.clk, f.reporter, "/p", f.options));
      if (opened) {
        f.state = std::move(*opened);
        workload(f, acked);
        (void)run(f.disk, f.state->close());
        f.state.reset();
      }
      storage::io::run_until(f.disk, [] { return false; });
      f.disk.crash();
      f.open();
      // Producers retry what was not acknowledged, in order, as after reconnecting; and (a lost reply) the last
      // acknowledged batch of each, which must be answered, not appended.
      std::map<std::int64_t, std::size_t> last_acked;
      for (std::size_t i = 0; i < plan.size(); ++i) {
        if (acked.count(plan[i].tag)) {
          last_acked[plan[i].pid] = i;
        }
      }
      for (std::size_t i = 0; i < plan.size(); ++i) {
        const auto& p = plan[i];
        const bool is_last_acked = last_acked.count(p.pid) && last_acked[p.pid] == i;
        if (acked.count(p.tag) && !is_last_acked) {
          continue;
        }
        auto r = f.produce(producer_batch(p.pid, 0, p.seq, 2, p.tag));
        RILL_REQUIRE_OK(r);
        if (auto it = acked.find(p.tag); it != acked.end()) {
          BOOST_TEST(r->duplicate, p.tag << " was acknowledged: its retry must not append");
          BOOST_TEST(r->base_offsets[0] == it->second);
        }
      }
      // Every batch exactly once.
      storage::read_request all;
      all.start = storage::read_start::first;
      all.max_bytes = 1 << 20;
      auto r = run(f.disk, f.state->read(all));
      RILL_REQUIRE_OK(r);
      std::map<std::string, int> seen;
      for (const auto& b : storage::testing::split_batches(r->bytes.span())) {
        const auto v = storage::testing::values_of(b)[0];
        ++seen[v.substr(0, v.find('-'))];
      }
      BOOST_TEST(seen.size() == plan.size());
      for (const auto& [tag, n] : seen) {
        BOOST_TEST(n == 1, tag << " appears " << n << " times");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
