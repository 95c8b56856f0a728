// consensus::partition_machine: stamping at prepare against committed and pending batches, idempotence decided on
// the pipeline, answered retries, consumer offsets and their limits, checkpoints.
#include <boost/test/unit_test.hpp>

#include "consensus/partition_machine.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"
#include "storage/validated_batches.h"

using namespace rill;
using namespace rill::consensus;

namespace {

// A client's batch as the router validated it, ready to submit: the request body (CRC tail + batch).
std::vector<std::byte> client_batch(std::uint32_t records, std::int64_t producer = -1, std::int32_t sequence = -1) {
  storage::batch_builder b;
  if (producer >= 0) {
    b.producer(producer, 0, sequence);
  }
  for (std::uint32_t i = 0; i < records; ++i) {
    b.add("k", "value");
  }
  auto built = b.build();
  BOOST_REQUIRE(built.has_value());
  auto v = storage::validated_batches::validate(std::move(*built), 1 << 20);
  BOOST_REQUIRE(v.has_value());
  return partition_machine::produce_request(v->bytes(), v->batches().front().crc_tail);
}

header request_of(std::uint8_t operation, std::uint64_t request) {
  header h;
  h.cmd = command::request;
  h.client = 7;
  h.request = request;
  h.operation = operation;
  return h;
}

// Runs the primary's part and the apply, as a group of one would: prepare against `pending`, then apply.
struct primary {
  std::int64_t now = 1'000;
  partition_machine m{{16}, [this] { return now; }};
  std::uint64_t op = 0;
  std::vector<message> pending;  // prepared, not yet applied

  message prepare(std::uint8_t operation, std::vector<std::byte> body) {
    std::vector<const message*> p;
    for (const auto& x : pending) {
      p.push_back(&x);
    }
    auto proposal = m.prepare(request_of(operation, op + 1), {op + 1, view_t(3), 0}, std::move(body), p);
    message out;
    out.h.cmd = command::prepare;
    out.h.op = ++op;
    out.h.operation = proposal.operation;
    out.body = std::move(proposal.body);
    pending.push_back(out);
    return out;
  }
  std::vector<std::byte> apply_next() {
    BOOST_REQUIRE(!pending.empty());
    message front = pending.front();
    pending.erase(pending.begin());
    applied.push_back(front);
    return m.apply(front.h, front.body);
  }
  void apply_all() {
    while (!pending.empty()) {
      (void)apply_next();
    }
  }
  // Commits settings (as a group's primary does when its node's differ).
  void settle(const partition_settings& s) {
    (void)prepare(operation_partition_settings, partition_machine::settings_request(s));
    apply_all();
    BOOST_TEST((m.settings() == s));
  }
  std::vector<message> applied;  // every op applied, in order (a backup replays them)
};

partition_settings settings_of(std::uint64_t consumers, std::uint64_t producers, std::uint64_t expiry_ms) {
  partition_settings s;
  s.consumers_max = consumers;
  s.producers_max = producers;
  s.producer_expiry_ms = expiry_ms;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(partition_machine_suite)

BOOST_AUTO_TEST_CASE(a_batch_is_stamped_after_every_batch_before_it_committed_or_pending) {
  primary p;
  const auto a = p.prepare(operation_produce_batch, client_batch(3));
  const auto b = p.prepare(operation_produce_batch, client_batch(2));  // a is still pending
  BOOST_TEST(storage::batch_view::trusted(a.body).base_offset().value() == 0);
  BOOST_TEST(storage::batch_view::trusted(b.body).base_offset().value() == 3);
  BOOST_TEST(storage::batch_view::trusted(b.body).leader_epoch().value() == 3);  // the view
  // The stamped batch is a valid batch (its CRC was derived from the tail): a backup's log takes it as is.
  BOOST_TEST(storage::batch_view::validate(b.body, storage::batch_limits{}).has_value());
  auto ra = partition_machine::decode_produce_reply(p.apply_next());
  auto rb = partition_machine::decode_produce_reply(p.apply_next());
  BOOST_REQUIRE(ra && rb);
  BOOST_TEST(ra->base_offset == 0);
  BOOST_TEST(ra->records == 3u);
  BOOST_TEST(rb->base_offset == 3);
  BOOST_TEST(rb->op == 2u);
  BOOST_TEST(p.m.next_offset() == 5);
}

BOOST_AUTO_TEST_CASE(the_log_append_time_never_goes_back) {
  primary p;
  p.now = 5'000;
  const auto a = p.prepare(operation_produce_batch, client_batch(1));
  p.now = 4'000;  // the clock stepped back
  const auto b = p.prepare(operation_produce_batch, client_batch(1));
  BOOST_TEST(storage::batch_view::trusted(a.body).max_timestamp().value() == 5'000);
  BOOST_TEST(storage::batch_view::trusted(b.body).max_timestamp().value() == 5'000);
}

BOOST_AUTO_TEST_CASE(a_retry_of_a_pending_batch_is_answered_without_a_second_copy) {
  primary p;
  const auto first = p.prepare(operation_produce_batch, client_batch(2, 42, 0));
  const auto retry = p.prepare(operation_produce_batch, client_batch(2, 42, 0));  // the original is not committed
  BOOST_TEST(first.h.operation == operation_produce_batch);
  BOOST_TEST(retry.h.operation == operation_produce_answered);
  const auto gap = p.prepare(operation_produce_batch, client_batch(1, 42, 5));
  BOOST_TEST(gap.h.operation == operation_produce_answered);
  const auto next = p.prepare(operation_produce_batch, client_batch(1, 42, 2));
  BOOST_TEST(next.h.operation == operation_produce_batch);
  BOOST_TEST(storage::batch_view::trusted(next.body).base_offset().value() == 2);

  (void)p.apply_next();
  auto r = partition_machine::decode_produce_reply(p.apply_next());
  BOOST_REQUIRE(r);
  BOOST_TEST((r->verdict == storage::producer_verdict::duplicate));
  BOOST_TEST(r->base_offset == 0);
  BOOST_TEST(r->op == 1u);
  r = partition_machine::decode_produce_reply(p.apply_next());
  BOOST_REQUIRE(r);
  BOOST_TEST((r->verdict == storage::producer_verdict::sequence_gap));
  BOOST_TEST(!r->detail.empty());
  r = partition_machine::decode_produce_reply(p.apply_next());
  BOOST_REQUIRE(r);
  BOOST_TEST(r->base_offset == 2);
  BOOST_TEST(p.m.next_offset() == 3);
}

BOOST_AUTO_TEST_CASE(consumer_offsets_are_bounded_by_what_exists_and_by_the_name_limits) {
  primary p;
  p.settle(settings_of(4, 100, 86'400'000));
  (void)p.prepare(operation_produce_batch, client_batch(4));
  (void)p.apply_next();
  auto store = [&](std::uint8_t operation, std::string_view name, std::int64_t offset) {
    (void)p.prepare(operation, partition_machine::offset_request(name, offset));
    auto r = partition_machine::decode_offset_reply(p.apply_next());
    BOOST_REQUIRE(r);
    return *r;
  };
  auto put = [&](std::string_view name, std::int64_t offset) {
    return store(operation_consumer_offset_reset, name, offset);
  };
  BOOST_TEST((put("a", 3).status == partition_machine::offset_status::stored));
  // A poll's auto-commit (consumer_offset) never moves a consumer back (issue 38, finding 9): a lower offset is
  // answered `behind` with the one stored, which stays; an equal or higher one is stored.
  auto behind = store(operation_consumer_offset, "a", 2);
  BOOST_TEST((behind.status == partition_machine::offset_status::behind));
  BOOST_TEST(behind.previous == 3);
  BOOST_TEST(*p.m.consumer_offset("a") == 3);
  BOOST_TEST((store(operation_consumer_offset, "a", 3).status == partition_machine::offset_status::stored));
  // An explicit store (consumer_offset_reset) moves it back on purpose, and names the previous offset.
  auto back = put("a", 1);
  BOOST_TEST((back.status == partition_machine::offset_status::stored));
  BOOST_TEST(back.previous == 3);
  BOOST_TEST((put("a", 5).status == partition_machine::offset_status::out_of_range));
  BOOST_TEST((put("", 0).status == partition_machine::offset_status::invalid_name));
  BOOST_TEST((put(std::string(17, 'x'), 0).status == partition_machine::offset_status::invalid_name));
  BOOST_TEST((put("b", 0).status == partition_machine::offset_status::stored));
  BOOST_TEST((put("c", 0).status == partition_machine::offset_status::stored));
  BOOST_TEST((put("d", 0).status == partition_machine::offset_status::stored));
  BOOST_TEST((put("e", 0).status == partition_machine::offset_status::limit_exceeded));  // consumers_max = 4
  BOOST_TEST(*p.m.consumer_offset("a") == 1);
  BOOST_TEST(!p.m.consumer_offset("e").has_value());
}

BOOST_AUTO_TEST_CASE(a_checkpoint_restores_the_same_state_and_refuses_damage) {
  primary p;
  (void)p.prepare(operation_produce_batch, client_batch(2, 9, 0));
  (void)p.prepare(operation_produce_batch, client_batch(3));
  (void)p.prepare(operation_consumer_offset, partition_machine::offset_request("reader", 4));
  for (int i = 0; i < 3; ++i) {
    (void)p.apply_next();
  }
  const auto bytes = p.m.snapshot();
  partition_machine copy{{16}, [] { return std::int64_t{0}; }};
  BOOST_REQUIRE(copy.restore(bytes));
  BOOST_TEST(copy.next_offset() == 5);
  BOOST_TEST(*copy.consumer_offset("reader") == 4);
  BOOST_TEST((copy.producers() == p.m.producers()));
  BOOST_TEST((copy.snapshot() == bytes));
  // Truncated, extended or with a consumer beyond the log: refused, and the state is left as it was.
  auto cut = bytes;
  cut.pop_back();
  BOOST_TEST(!copy.restore(cut));
  auto longer = bytes;
  longer.push_back(std::byte{0});
  BOOST_TEST(!copy.restore(longer));
  BOOST_TEST(copy.next_offset() == 5);
}

// Issue 38, finding 4: producer ids are the clients' and were never forgotten, so a checkpoint outgrew its region.
BOOST_AUTO_TEST_CASE(a_producer_idle_past_its_expiry_is_forgotten_at_the_next_batch) {
  primary p;
  p.settle(settings_of(10, 100, 10'000));
  p.now = 1'000;
  (void)p.prepare(operation_produce_batch, client_batch(1, 5, 0));
  (void)p.prepare(operation_produce_batch, client_batch(1, 6, 0));
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == 2u);
  // Nothing happens while no batch comes: expiry is judged by the applied batches' times, as on every replica.
  p.now = 9'000;
  (void)p.prepare(operation_produce_batch, client_batch(1, 6, 1));
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == 2u);
  // Past 10 s after producer 5's batch, the next batch forgets it; producer 6 (at 9 s) stays.
  p.now = 11'001;
  (void)p.prepare(operation_produce_batch, client_batch(1));
  p.apply_all();
  BOOST_TEST(!p.m.producers().find(5).has_value());
  BOOST_TEST(p.m.producers().find(6).has_value());
  // Its next sequence is refused as a producer unknown here; a new start at 0 is fresh.
  auto refused = p.prepare(operation_produce_batch, client_batch(1, 5, 1));
  BOOST_TEST(refused.h.operation == operation_produce_answered);
  auto r = partition_machine::decode_produce_reply(p.apply_next());
  BOOST_REQUIRE(r);
  BOOST_TEST((r->verdict == storage::producer_verdict::unknown_producer_id));
  BOOST_TEST(p.prepare(operation_produce_batch, client_batch(1, 5, 0)).h.operation == operation_produce_batch);
  p.apply_all();
  BOOST_TEST(p.m.producers().find(5)->last_timestamp_ms == 11'001);
}

BOOST_AUTO_TEST_CASE(beyond_the_bound_the_producer_idle_longest_goes_and_replicas_agree) {
  primary p;
  p.settle(settings_of(10, 3, 86'400'000));
  for (std::int64_t id = 1; id <= 5; ++id) {
    p.now = 1'000 * id;
    (void)p.prepare(operation_produce_batch, client_batch(1, id, 0));
  }
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == 3u);
  BOOST_TEST(!p.m.producers().find(1).has_value());
  BOOST_TEST(!p.m.producers().find(2).has_value());
  // A batch judged fresh against a producer that a batch applied before it then forgot: producer 3 is held when
  // its second batch is prepared, but producer 6's batch, pending ahead of it, pushes it out at apply. The batch
  // starts producer 3 again (no assertion fires, nothing is refused after the fact).
  p.now = 10'000;
  (void)p.prepare(operation_produce_batch, client_batch(1, 6, 0));
  const auto again = p.prepare(operation_produce_batch, client_batch(1, 3, 1));
  BOOST_TEST(again.h.operation == operation_produce_batch);
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == 3u);
  BOOST_TEST(p.m.producers().find(3)->last_sequence == 1);
  BOOST_TEST(!p.m.producers().find(4).has_value());
  // Lowering the bound trims at once. A backup applying the same ops holds the same state, byte for byte.
  p.settle(settings_of(10, 1, 86'400'000));
  BOOST_TEST(p.m.producers().size() == 1u);
  partition_machine backup{{16}, [] { return std::int64_t{0}; }};
  for (const auto& m : p.applied) {
    (void)backup.apply(m.h, m.body);
  }
  BOOST_TEST((backup.snapshot() == p.m.snapshot()));
  // Settings outside the ranges change nothing.
  (void)p.prepare(operation_partition_settings, partition_machine::settings_request(settings_of(10, 0, 1'000)));
  p.apply_all();
  BOOST_TEST(p.m.settings().producers_max == 1u);
}

// The checkpoint at its bound: every producer with every batch kept and every consumer with the longest name make
// a snapshot of exactly snapshot_bytes_max, which restores.
BOOST_AUTO_TEST_CASE(a_snapshot_at_the_bounds_is_exactly_snapshot_bytes_max) {
  primary p;
  const auto s = settings_of(50, 2'000, 86'400'000);
  p.settle(s);
  for (std::int32_t seq = 0; seq < 6; ++seq) {
    for (std::int64_t id = 0; id < 2'000; ++id) {
      (void)p.prepare(operation_produce_batch, client_batch(1, id, seq));
      p.apply_all();
    }
  }
  for (int c = 0; c < 50; ++c) {
    std::string name = std::to_string(c);
    name.resize(16, 'n');
    (void)p.prepare(operation_consumer_offset, partition_machine::offset_request(name, c));
    p.apply_all();
  }
  BOOST_TEST(p.m.producers().size() == 2'000u);
  BOOST_TEST(p.m.consumers().size() == 50u);
  const auto bytes = p.m.snapshot();
  BOOST_TEST(bytes.size() == partition_machine::snapshot_bytes_max(2'000, 50, 16));
  // One more producer: the table stays at its bound, and so does the snapshot.
  (void)p.prepare(operation_produce_batch, client_batch(1, 99'999, 0));
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == 2'000u);
  BOOST_TEST(p.m.snapshot().size() <= partition_machine::snapshot_bytes_max(2'000, 50, 16));
  partition_machine copy{{16}, [] { return std::int64_t{0}; }};
  BOOST_REQUIRE(copy.restore(bytes));
  BOOST_TEST((copy.settings() == s));
  BOOST_TEST((copy.snapshot() == bytes));
  // Settings whose bound is past the budget (with the consumers held, when more than asked for) are not applied.
  BOOST_TEST(p.m.accepts(settings_of(50, 400'000, 86'400'000)));
  BOOST_TEST(!p.m.accepts(settings_of(50, 500'000, 86'400'000)));         // 500,000 producers: 73 MB
  BOOST_TEST(!p.m.accepts(settings_of(1'000'000, 400'000, 86'400'000)));  // 28 MB of consumers, 58 of producers
  (void)p.prepare(operation_partition_settings, partition_machine::settings_request(settings_of(50, 500'000, 1'000)));
  p.apply_all();
  BOOST_TEST((p.m.settings() == s));
}

// The budget at the largest bound accepted: a machine filled to it snapshots within the budget (1 MiB here, so
// that the test fills it in a moment; rilld's is 63 MiB, which the settings rilld allows by default stay well
// within: checked at compile time in partition_machine.cpp).
BOOST_AUTO_TEST_CASE(the_largest_settings_accepted_keep_the_snapshot_within_its_budget) {
  primary p;
  const std::uint64_t budget = std::uint64_t{1} << 20;
  p.m = partition_machine{{16, budget}, [&p] { return p.now; }};
  const std::uint64_t producers =
      (budget - partition_snapshot_head_bytes - 10 * (12 + 16)) / partition_snapshot_producer_bytes;
  const auto s = settings_of(10, producers, 86'400'000);
  BOOST_REQUIRE(p.m.accepts(s));
  BOOST_TEST(!p.m.accepts(settings_of(10, producers + 1, 86'400'000)));
  p.settle(s);
  // Fill it: every producer with every batch kept (records and the apply, not the prepare, are what cost here).
  for (std::int32_t seq = 0; seq < 5; ++seq) {
    for (std::uint64_t id = 0; id < producers; ++id) {
      (void)p.prepare(operation_produce_batch, client_batch(1, static_cast<std::int64_t>(id), seq));
      (void)p.apply_next();
      p.applied.clear();
    }
  }
  for (int c = 0; c < 10; ++c) {
    (void)p.prepare(operation_consumer_offset, partition_machine::offset_request(std::string(16, 'a' + c), 0));
    p.apply_all();
  }
  const auto bytes = p.m.snapshot();
  BOOST_TEST(bytes.size() == partition_machine::snapshot_bytes_max(producers, 10, 16));
  BOOST_TEST(bytes.size() <= budget);
  BOOST_TEST(bytes.size() > budget - partition_snapshot_producer_bytes);
  // One producer more: the one idle longest goes, and the snapshot stays within the budget.
  (void)p.prepare(operation_produce_batch, client_batch(1, 1'000'000, 0));
  p.apply_all();
  BOOST_TEST(p.m.producers().size() == producers);
  BOOST_TEST(p.m.snapshot().size() <= budget);
}

// A checkpoint from before producers expired ("partm01": no settings, no producer times) restores unsettled:
// nothing is trimmed until a settings op is applied, which stamps every producer with that op's time, so replicas
// that restored it at different ops, or replayed those ops, hold the same producers.
BOOST_AUTO_TEST_CASE(a_checkpoint_from_before_expiry_restores_unsettled_until_a_settings_op) {
  std::vector<std::byte> v1;
  const auto put64 = [&](std::uint64_t x) {
    for (int i = 0; i < 8; ++i) {
      v1.push_back(static_cast<std::byte>(x >> (8 * i)));
    }
  };
  put64(0x3130'6d74'7261'70ULL);  // "partm01"
  put64(3);                       // next offset
  put64(5'000);                   // last timestamp
  put64(1);  // one producer: id 9, epoch 0, last sequence 2, one kept batch (0..2 at offset 0, op 1)
  put64(9);
  v1.insert(v1.end(), {std::byte{0}, std::byte{0}});
  v1.insert(v1.end(), {std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}});
  v1.insert(v1.end(), {std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}});
  v1.insert(v1.end(), {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}});
  v1.insert(v1.end(), {std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}});
  put64(0);
  put64(1);
  put64(0);  // no consumers
  primary p;
  BOOST_REQUIRE(p.m.restore(v1));
  BOOST_TEST(!p.m.settled());
  BOOST_TEST(p.m.producers().size() == 1u);
  // Unsettled: a batch far past any expiry forgets nothing.
  p.now = 5'000 + 365LL * 86'400'000;
  (void)p.prepare(operation_produce_batch, client_batch(1));
  p.apply_all();
  BOOST_TEST(p.m.producers().find(9).has_value());
  // Settled: every producer is stamped with the settings op's time (the newest batch's), then trimmed from there on.
  p.settle(settings_of(10, 100, 10'000));
  BOOST_TEST(p.m.settled());
  BOOST_TEST(p.m.producers().find(9)->last_timestamp_ms == p.now);
  p.now += 10'001;
  (void)p.prepare(operation_produce_batch, client_batch(1));
  p.apply_all();
  BOOST_TEST(!p.m.producers().find(9).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
