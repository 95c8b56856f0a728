// partition_state on the simulated disk: idempotent producers (retries, gaps, epochs, failures, restarts) and
// consumer offsets.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "actors/partition_state.h"
#include "base/endian.h"
#include "net/status.h"
#include "simulation/sim_disk.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "storage/file_ops.h"
#include "storage/producer_sequence.h"
#include "tests/storage/log_fixture.h"
#include "tests/storage/replace_crash.h"
#include "tests/storage/tampered_batch.h"

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

using storage::testing::with_attributes;

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// As the router hands them over: validated (a good batch; the produce tests check refusals through fixture::produce).
storage::validated_batches validated(std::vector<std::byte> b) {
  return storage::validated_batches::validate(std::move(b), limits::batch_bytes_limit).value();
}

struct fixture {
  explicit fixture(std::uint64_t seed = 3, simulation::sim_disk_faults faults = {}) : disk(seed, faults, &clk) {
    options.config.segment_bytes = 1 << 20;
  }
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
  // As a client's produce arrives: validated by the router (against the log's limit), then the partition's checks.
  expected<produce_result> produce(std::vector<std::byte> b) {
    RILL_TRY(validated,
             storage::validated_batches::validate(std::span<const std::byte>(b), options.config.max_message_bytes));
    return run(disk, state->produce(std::move(validated)));
  }
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

BOOST_AUTO_TEST_CASE(a_fenced_partition_recovers_in_place_and_says_so_meanwhile) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(7, 0, 0, 3, "a")));
  BOOST_TEST(!f.state->fencing().has_value());
  BOOST_TEST(f.state->info(0).fenced().empty());
  // A failing device: the produce's fdatasync fails and fences the log.
  f.disk.faults().sync_error_ppm = 1'000'000;
  auto failed = f.produce(producer_batch(7, 0, 3, 2, "b"));
  BOOST_REQUIRE(!failed.has_value());
  BOOST_REQUIRE(f.state->fencing().has_value());
  const auto info = f.state->info(0);
  BOOST_TEST(info.fenced().rfind("a storage failure: ", 0) == 0, info.fenced());
  BOOST_TEST(info.fenced().find("/p") == std::string::npos, "no server path: " << info.fenced());
  BOOST_TEST((f.status(f.produce(producer_batch(7, 0, 3, 2, "b"))) == net::status::partition_fenced));
  // A recovery while the cause is still there fails (its superblock write cannot sync) and can be tried again; the
  // partition still says it is fenced, and refuses produces and polls with the fencing error.
  auto early = run(f.disk, f.state->recover_log());
  BOOST_REQUIRE(!early.has_value());
  BOOST_TEST(f.state->fencing().has_value());
  BOOST_TEST(!f.state->info(0).fenced().empty());
  BOOST_TEST((f.status(f.produce(producer_batch(7, 0, 3, 2, "b"))) == net::status::partition_fenced));
  auto poll = run(f.disk, f.state->poll(proto::PollRequest{}, std::nullopt, 1 << 20));
  BOOST_REQUIRE(!poll.has_value());
  BOOST_TEST((net::status_of(poll.error().code()) == net::status::partition_fenced));
  // The cause gone, it recovers without a restart: the producer's retry is taken where the synced log ended.
  f.disk.faults().sync_error_ppm = 0;
  RILL_REQUIRE_OK(run(f.disk, f.state->recover_log()));
  BOOST_TEST(!f.state->fencing().has_value());
  BOOST_TEST(f.state->recoveries() == 1u);
  BOOST_TEST(f.state->info(0).recoveries() == 1u);
  BOOST_TEST(f.state->log().log_end().value() == 3);
  auto retried = f.produce(producer_batch(7, 0, 3, 2, "b"));
  RILL_REQUIRE_OK(retried);
  BOOST_TEST(retried->base_offsets == (std::vector<std::int64_t>{3}));
  auto dup = f.produce(producer_batch(7, 0, 0, 3, "a"));  // the rebuilt producer table still knows "a"
  RILL_REQUIRE_OK(dup);
  BOOST_TEST(dup->duplicate);
  BOOST_TEST(dup->base_offsets == (std::vector<std::int64_t>{0}));
}

BOOST_AUTO_TEST_CASE(a_failed_background_sync_of_relaxed_data_fences_and_recovery_keeps_only_synced_data) {
  fixture f;
  f.options.config.durability = config::durability_mode::every_ms;
  f.options.config.sync_every_ms = 3'600'000;  // only the background sync runs
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(7, 0, 0, 3, "a")));
  storage::io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.state->log().committed().value() == 3);
  // Acknowledged at write; the background sync that follows fails and fences the log.
  f.disk.faults().sync_error_ppm = 1'000'000;
  RILL_REQUIRE_OK(f.produce(producer_batch(7, 0, 3, 2, "b")));
  storage::io::run_until(f.disk, [] { return false; });
  BOOST_REQUIRE(f.state->fencing().has_value());
  BOOST_TEST(f.state->log().committed().value() == 3);  // nobody saw "b"
  BOOST_TEST((f.status(f.produce(producer_batch(7, 0, 5, 1, "c"))) == net::status::partition_fenced));
  f.disk.faults().sync_error_ppm = 0;
  RILL_REQUIRE_OK(run(f.disk, f.state->recover_log()));
  BOOST_TEST(!f.state->fencing().has_value());
  BOOST_TEST(f.state->log().log_end().value() == 3);  // "b" was never synced: cut
  // The producer's retry of "b" (its acknowledgement did not promise durability) is taken where the log ended.
  auto retried = f.produce(producer_batch(7, 0, 3, 2, "b"));
  RILL_REQUIRE_OK(retried);
  BOOST_TEST(retried->base_offsets == (std::vector<std::int64_t>{3}));
  storage::io::run_until(f.disk, [] { return false; });
  BOOST_TEST(f.state->log().committed().value() == 5);
}

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

BOOST_AUTO_TEST_CASE(every_hostile_producer_batch_is_refused_with_its_own_status_and_nothing_is_written) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(1, 0, 0, 2, "ok")));
  auto message_of = [](const expected<produce_result>& r) { return r ? std::string{} : r.error().detail(); };
  struct refused {
    std::vector<std::byte> batch;
    net::status want;
    std::string says;
  };
  const std::vector<refused> cases = {
      {with_attributes(producer_batch(1, 0, 2, 1, "t"), storage::batch_format::transactional),
       net::status::unsupported_attributes, "transactional bit (4)"},
      {with_attributes(producer_batch(-1, -1, -1, 1, "c"), storage::batch_format::control),
       net::status::unsupported_attributes, "control bit (5)"},
      {producer_batch(1, -1, 2, 1, "e"), net::status::invalid_producer_fields, "producer_id 1 with producer_epoch -1"},
      {producer_batch(8, -1, 0, 1, "e"), net::status::invalid_producer_fields, "producer_id 8 with producer_epoch -1"},
      {producer_batch(1, 0, -1, 1, "s"), net::status::invalid_producer_fields, "producer_id 1 with base_sequence -1"},
      {producer_batch(-1, 0, -1, 1, "e"), net::status::invalid_producer_fields,
       "producer_id -1 (not idempotent) with producer_epoch 0"},
      {producer_batch(-1, -1, 4, 1, "s"), net::status::invalid_producer_fields,
       "producer_id -1 (not idempotent) with base_sequence 4"},
      {producer_batch(-3, -1, -1, 1, "i"), net::status::invalid_producer_fields, "producer_id -3"},
      {producer_batch(2, 0, 5, 1, "u"), net::status::unknown_producer_id,
       "knows no batch of this producer, and its first batch starts at sequence 5"},
      // A good batch in front of a bad one: the whole request is refused.
      {concat(producer_batch(-1, -1, -1, 1, "g"), producer_batch(3, 0, 9, 1, "u")), net::status::unknown_producer_id,
       "batch starts at sequence 9"},
      {concat(producer_batch(1, 0, 2, 1, "g"), producer_batch(1, -1, 3, 1, "e")), net::status::invalid_producer_fields,
       "batch 1 (byte"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    BOOST_TEST_CONTEXT("case " << i) {
      auto r = f.produce(cases[i].batch);
      BOOST_TEST((f.status(r) == cases[i].want), net::to_string(f.status(r)) << ": " << message_of(r));
      BOOST_TEST(message_of(r).find(cases[i].says) != std::string::npos, message_of(r));
      BOOST_TEST(f.state->log().log_end().value() == 2);
    }
  }
  // None of them touched the producer table: producer 1 goes on at 2, producer 2 may start at 0.
  auto next = f.produce(producer_batch(1, 0, 2, 1, "next"));
  RILL_REQUIRE_OK(next);
  BOOST_TEST(next->base_offsets == (std::vector<std::int64_t>{2}));
  RILL_REQUIRE_OK(f.produce(producer_batch(2, 0, 0, 1, "new")));
  // And after a restart the log holds only the accepted batches.
  f.reopen();
  BOOST_TEST(f.state->log().log_end().value() == 4);
}

BOOST_AUTO_TEST_CASE(a_forged_producer_header_with_a_bad_crc_is_refused_and_leaves_nothing_in_the_producer_table) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(4, 0, 0, 2, "a")));  // producer 4 at sequence 1
  // Producer 4's next sequence, and a new producer 9 at 0, written over plain batches whose CRC no longer matches:
  // refused for the CRC (the fields are only read from a batch that passed it), and nothing is recorded.
  const auto forged_next = storage::testing::with_forged_producer(producer_batch(-1, -1, -1, 1, "x"), 4, 0, 2);
  const auto forged_new = storage::testing::with_forged_producer(producer_batch(-1, -1, -1, 1, "y"), 9, 0, 0);
  for (const auto& forged : {forged_next, forged_new, concat(producer_batch(4, 0, 2, 1, "good"), forged_new)}) {
    auto r = f.produce(forged);
    BOOST_TEST((f.status(r) == net::status::crc_mismatch));
    BOOST_TEST(f.state->log().log_end().value() == 2);
  }
  // Producer 9 is unknown (a batch at sequence 1 is not taken as its next), and producer 4 goes on at 2 (its
  // sequence 2 was not taken by the forged batch, nor by the good batch refused with it).
  BOOST_TEST((f.status(f.produce(producer_batch(9, 0, 1, 1, "n"))) == net::status::unknown_producer_id));
  auto next = f.produce(producer_batch(4, 0, 2, 1, "b"));
  RILL_REQUIRE_OK(next);
  BOOST_TEST(!next->duplicate);
  BOOST_TEST(next->base_offsets == (std::vector<std::int64_t>{2}));
}

BOOST_AUTO_TEST_CASE(an_unknown_producer_must_start_at_zero_and_a_new_epoch_too) {
  fixture f;
  f.open();
  BOOST_TEST((f.status(f.produce(producer_batch(5, 0, 1, 1, "a"))) == net::status::unknown_producer_id));
  BOOST_TEST((f.status(f.produce(producer_batch(5, 3, INT32_MAX, 1, "a"))) == net::status::unknown_producer_id));
  RILL_REQUIRE_OK(f.produce(producer_batch(5, 3, 0, 1, "a")));
  // Known now: a gap is a gap, and a new epoch must start at 0.
  BOOST_TEST((f.status(f.produce(producer_batch(5, 3, 2, 1, "b"))) == net::status::sequence_gap));
  BOOST_TEST((f.status(f.produce(producer_batch(5, 4, 2, 1, "b"))) == net::status::sequence_gap));
  BOOST_TEST(f.state->log().log_end().value() == 1);
}

BOOST_AUTO_TEST_CASE(sequences_wrap_from_int32_max_to_zero_and_retries_and_gaps_are_seen_across_the_wrap) {
  fixture f;
  f.open();
  // A long-lived producer near the end of the sequence space: its batch is in the log (written as a replica or
  // before a restart would), and the state learns it at open.
  const std::int32_t max = INT32_MAX;
  RILL_REQUIRE_OK(run(f.disk, f.state->log().append(producer_batch(3, 0, max - 2, 2, "a"))));  // max-2, max-1
  f.reopen();
  auto spanning = f.produce(producer_batch(3, 0, max, 3, "b"));  // max, 0, 1
  RILL_REQUIRE_OK(spanning);
  BOOST_TEST(spanning->base_offsets == (std::vector<std::int64_t>{2}));
  auto retry = f.produce(producer_batch(3, 0, max, 3, "b"));
  RILL_REQUIRE_OK(retry);
  BOOST_TEST(retry->duplicate);
  BOOST_TEST(retry->base_offsets == (std::vector<std::int64_t>{2}));
  auto older = f.produce(producer_batch(3, 0, max - 2, 2, "a"));  // a retry from before the wrap
  RILL_REQUIRE_OK(older);
  BOOST_TEST(older->duplicate);
  BOOST_TEST(older->base_offsets == (std::vector<std::int64_t>{0}));
  // Behind across the wrap (never sent as such, but written before by its sequence): duplicate, not a gap.
  BOOST_TEST((f.status(f.produce(producer_batch(3, 0, max - 1, 1, "x"))) == net::status::duplicate_sequence));
  BOOST_TEST((f.status(f.produce(producer_batch(3, 0, 0, 2, "x"))) == net::status::duplicate_sequence));
  // Ahead: a gap.
  BOOST_TEST((f.status(f.produce(producer_batch(3, 0, 5, 1, "x"))) == net::status::sequence_gap));
  auto next = f.produce(producer_batch(3, 0, 2, 1, "c"));
  RILL_REQUIRE_OK(next);
  BOOST_TEST(next->base_offsets == (std::vector<std::int64_t>{5}));
  // Rebuilt across the wrap at open.
  f.reopen();
  auto again = f.produce(producer_batch(3, 0, max, 3, "b"));
  RILL_REQUIRE_OK(again);
  BOOST_TEST(again->duplicate);
  BOOST_TEST(again->base_offsets == (std::vector<std::int64_t>{2}));
  RILL_REQUIRE_OK(f.produce(producer_batch(3, 0, 3, 1, "d")));
  BOOST_TEST(f.state->log().log_end().value() == 7);
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

// A request refused for one of its batches leaves nothing of its other batches in the producer table: the batch of
// producer 4 that rode with a refused one is neither taken for a retry still being written nor skipped over.
BOOST_AUTO_TEST_CASE(a_refused_request_leaves_no_trace_in_the_producer_table) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(4, 0, 0, 2, "a")));
  for (auto refused_with : {producer_batch(6, 0, 5, 1, "unknown"), producer_batch(4, 0, 9, 1, "gap")}) {
    auto req = producer_batch(4, 0, 2, 1, "b");
    req.insert(req.end(), refused_with.begin(), refused_with.end());
    BOOST_TEST(!f.produce(req).has_value());
  }
  BOOST_TEST(f.state->log().log_end().value() == 2);
  auto r = f.produce(producer_batch(4, 0, 2, 1, "b"));  // the same batch alone: new, written
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offsets == (std::vector<std::int64_t>{2}));
  BOOST_TEST(!r->duplicate);
  RILL_REQUIRE_OK(f.produce(producer_batch(6, 0, 0, 1, "c")));  // and producer 6 is still unknown: it starts at 0
  BOOST_TEST(f.state->log().log_end().value() == 4);
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

BOOST_AUTO_TEST_CASE(consumer_names_never_become_file_names_and_every_valid_name_round_trips) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  // Names that once clashed with the temp-file suffix, meant a directory, hid, or did not fit NAME_MAX with ".tmp".
  const std::vector<std::string> names = {"x.tmp",
                                          "a..b",
                                          ".hidden",
                                          "-",
                                          "...",
                                          "_",
                                          "00000000000000000000",
                                          std::string(255, 'n'),
                                          std::string(251, '.') + ".tmp"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    BOOST_TEST_CONTEXT(names[i]) {
      RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset(names[i], i + 1)));
    }
  }
  for (const std::string bad : {".", ".."}) {
    auto refused = run(f.disk, f.state->store_consumer_offset(bad, 1));
    BOOST_REQUIRE(!refused.has_value());
    BOOST_TEST((refused.error().code() == net::make_error_code(net::status::invalid_name)));
    BOOST_TEST(refused.error().detail().find("'.' and '..' are not names") != std::string::npos);
  }
  // A file in the layout before numbered files (named by the consumer): not read, reported.
  RILL_REQUIRE_OK(run(
      f.disk, storage::write_file_atomic(f.disk, "/p/offsets/consumers", "old-consumer", std::vector<std::byte>(12))));
  f.reopen();
  for (std::size_t i = 0; i < names.size(); ++i) {
    BOOST_TEST_CONTEXT(names[i]) {
      BOOST_REQUIRE(f.state->consumer_offset(names[i]).has_value());
      BOOST_TEST(*f.state->consumer_offset(names[i]) == static_cast<std::int64_t>(i + 1));
    }
  }
  BOOST_TEST(!f.state->consumer_offset("old-consumer").has_value());
  BOOST_TEST(f.reporter.corruptions.empty());
  BOOST_TEST(!f.reporter.notices.empty());
  BOOST_TEST(f.reporter.notices.back().find("ignoring old-consumer") != std::string::npos);
  // The files are numbered; a new consumer after the restart takes a new number, an old one keeps its file.
  auto listed = run(f.disk, storage::list_dir(f.disk, "/p/offsets/consumers"));
  RILL_REQUIRE_OK(listed);
  BOOST_TEST(listed->size() == names.size() + 1);
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("late", 3)));
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("x.tmp", 4)));
  listed = run(f.disk, storage::list_dir(f.disk, "/p/offsets/consumers"));
  RILL_REQUIRE_OK(listed);
  BOOST_TEST(listed->size() == names.size() + 2);
  BOOST_TEST(std::count(listed->begin(), listed->end(), "00000000000000000009") == 1);
  f.reopen();
  BOOST_TEST(*f.state->consumer_offset("late") == 3);
  BOOST_TEST(*f.state->consumer_offset("x.tmp") == 4);
}

namespace {
// A consumer's offset stored once (`first`: its file and the offsets directory are created) or replaced (from 5 to
// 9), with the power lost at `stop_after` (tests/storage/replace_crash.h); after the crash the partition reopens with
// the old offset or the new one and reports nothing.
storage::testing::replacement_outcome store_offset_and_crash(std::uint64_t seed,
                                                             const simulation::sim_disk_faults& faults,
                                                             std::optional<std::uint64_t> stop_after, bool first) {
  const std::string dir = "/p/offsets/consumers";
  fixture f(seed, faults);
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  std::optional<std::int64_t> old_offset;
  if (!first) {
    RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("c", 5)));
    old_offset = 5;
  }
  const auto old_files = f.disk.exists(dir) ? f.disk.list(dir) : std::vector<std::string>{};
  storage::testing::replacement_outcome o;
  const auto before = f.disk.mutating_ops();
  if (stop_after) {
    f.disk.fail_stop_after(*stop_after);
  }
  o.acknowledged = run(f.disk, f.state->store_consumer_offset("c", 9)).has_value();
  o.mutating_ops = f.disk.mutating_ops() - before;
  if (!f.disk.stopped()) {
    f.disk.halt();  // the crash comes before anything later (the close's syncs) could make the store durable
  }
  (void)run(f.disk, f.state->close());
  f.state.reset();
  storage::io::run_until(f.disk, [] { return false; });
  f.disk.crash();
  // The file itself: the one the first store wrote (numbered 0), with the old content or the new.
  const std::string file = dir + "/00000000000000000000";
  const auto content = f.disk.file_content(file);
  BOOST_TEST(old_files == (first ? std::vector<std::string>{} : std::vector<std::string>{"00000000000000000000"}));
  f.open();
  const auto offset = f.state->consumer_offset("c");
  o.is_new = content.has_value() && offset == std::optional<std::int64_t>(9);
  o.is_old = offset == old_offset && content.has_value() != first;
  for (const auto& c : f.reporter.corruptions) {  // a crash is not corruption (a torn superblock copy aside)
    BOOST_TEST(c.action.find("using the other") != std::string::npos,
               "unexpected report " << c.file << " @" << c.position << ": " << c.problem << " -> " << c.action);
  }
  return o;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_consumer_offset_is_old_or_new_after_a_crash_at_any_step_of_its_store) {
  for (const bool first : {true, false}) {
    BOOST_TEST_CONTEXT((first ? "first store of the consumer" : "replacement of its offset")) {
      storage::testing::crash_at_every_step_of_a_replacement(
          [&](std::uint64_t seed, const simulation::sim_disk_faults& faults, std::optional<std::uint64_t> stop_after) {
            return store_offset_and_crash(seed, faults, stop_after, first);
          });
    }
  }
}

BOOST_AUTO_TEST_CASE(a_corrupt_consumer_offset_file_is_reported_and_its_number_not_reused) {
  fixture f;
  f.open();
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("a", 5)));
  RILL_REQUIRE_OK(run(f.disk, storage::write_file_atomic(f.disk, "/p/offsets/consumers", "00000000000000000007",
                                                         std::vector<std::byte>(20))));
  f.reopen();
  BOOST_TEST(*f.state->consumer_offset("a") == 5);
  BOOST_REQUIRE(f.reporter.corruptions.size() == 1);
  BOOST_TEST(f.reporter.corruptions[0].file.find("00000000000000000007") != std::string::npos);
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("b", 6)));
  auto listed = run(f.disk, storage::list_dir(f.disk, "/p/offsets/consumers"));
  RILL_REQUIRE_OK(listed);
  BOOST_TEST(std::count(listed->begin(), listed->end(), "00000000000000000008") == 1);
  f.reopen();
  BOOST_TEST(*f.state->consumer_offset("b") == 6);
}

// limits.consumers_per_partition_max: a new named consumer beyond it is refused before its offset file is written;
// those it knows keep storing.
// First stores of new consumers run concurrently (the partition actor does not wait for one before the next):
// each is counted against the limit before any of them waits for the disk.
BOOST_AUTO_TEST_CASE(concurrent_first_stores_cannot_pass_the_consumer_limit_together) {
  fixture f;
  f.open();
  f.state->set_consumers_max(1);
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  std::vector<std::optional<expected<std::optional<std::int64_t>>>> results(3);
  for (std::size_t i = 0; i < results.size(); ++i) {
    spawn(f.state->store_consumer_offset("c" + std::to_string(i), 1),
          [&results, i](expected<std::optional<std::int64_t>> r) { results[i].emplace(std::move(r)); });
  }
  storage::io::run_until(
      f.disk, [&] { return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); }); });
  std::size_t stored = 0;
  for (const auto& r : results) {
    BOOST_REQUIRE(r.has_value());
    if (r->has_value()) {
      ++stored;
    } else {
      BOOST_TEST((r->error().code() == net::make_error_code(net::status::limit_exceeded)));
    }
  }
  BOOST_TEST(stored == 1u);
  auto listed = run(f.disk, storage::list_dir(f.disk, "/p/offsets/consumers"));
  RILL_REQUIRE_OK(listed);
  BOOST_TEST(listed->size() == 1u);
}

BOOST_AUTO_TEST_CASE(named_consumers_beyond_the_limit_are_refused) {
  fixture f;
  f.open();
  f.state->set_consumers_max(2);
  RILL_REQUIRE_OK(f.produce(producer_batch(-1, -1, -1, 10, "x")));
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("c1", 1)));
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("c2", 2)));
  auto refused = run(f.disk, f.state->store_consumer_offset("c3", 3));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((refused.error().code() == net::make_error_code(net::status::limit_exceeded)));
  BOOST_TEST(refused.error().message().find("limits.consumers_per_partition_max = 2") != std::string::npos);
  auto listed = run(f.disk, storage::list_dir(f.disk, "/p/offsets/consumers"));
  RILL_REQUIRE_OK(listed);
  BOOST_TEST(listed->size() == 2u);                                       // no file for the refused one
  RILL_REQUIRE_OK(run(f.disk, f.state->store_consumer_offset("c1", 5)));  // a known consumer still stores
  f.reopen();
  f.state->set_consumers_max(2);
  BOOST_TEST(!run(f.disk, f.state->store_consumer_offset("c3", 3)).has_value());
  BOOST_TEST(*f.state->consumer_offset("c1") == 5);
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
        spawn(f.state->produce(validated(producer_batch(p.pid, 0, p.seq, 2, p.tag))),
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
