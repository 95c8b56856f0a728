// The simulator's partition state machine (ledger): idempotent produce decided at prepare, against the committed
// producer state and the uncommitted ops the primary holds; skipped ops keep their batches' offsets; checkpoints
// keep the producer table.
#include <boost/test/unit_test.hpp>

#include <ostream>

#include "base/endian.h"
#include "simulation/workload.h"
#include "storage/record_batch.h"

using namespace rill;
using namespace rill::simulation;
using consensus::header;
using consensus::message;

namespace rill::storage {
std::ostream& operator<<(std::ostream& os, producer_verdict v) {
  return os << to_string(v);
}
}  // namespace rill::storage

namespace {
struct fixture {
  prng rng{42};
  std::uint64_t op = 0;
  consensus::view_t view{0};
  std::uint64_t ticks = 0;

  // A prepare of `operation` with `body` at the next op, from client session `client`, request `request`.
  message prepare_of(std::uint8_t operation, std::vector<std::byte> body, std::uint64_t client, std::uint64_t request) {
    message m;
    m.h.cmd = consensus::command::prepare;
    m.h.op = ++op;
    m.h.client = client;
    m.h.request = request;
    m.h.operation = operation;
    m.body = std::move(body);
    consensus::seal(m);
    return m;
  }
  static header request_of(std::uint64_t client, std::uint64_t request) {
    header h;
    h.cmd = consensus::command::request;
    h.client = client;
    h.request = request;
    h.operation = operation_produce;
    return h;
  }
  // What the primary prepares for a produce of `body`, given the pending prepares.
  message propose(ledger& l, std::vector<std::byte> body, std::uint64_t client, std::uint64_t request,
                  const std::vector<const message*>& pending) {
    auto p = l.prepare(request_of(client, request), consensus::state_machine::prepare_context{op + 1, view, ticks},
                       std::move(body), pending);
    return prepare_of(p.operation, std::move(p.body), client, request);
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(ledger_suite, fixture)

BOOST_AUTO_TEST_CASE(the_primary_stamps_offsets_after_every_batch_before_it_the_view_and_a_time_that_never_goes_back) {
  ledger l;
  view = consensus::view_t(3);
  ticks = 500;
  const message first = propose(l, make_batch(payload_id{7, 1}, 3, 10, rng, 0), 7, 1, {});
  ticks = 400;  // a primary whose tick count is lower (another replica, or a restart)
  const message second = propose(l, make_batch(payload_id{8, 1}, 2, 10, rng, 0), 8, 1, {&first});
  for (const message* m : {&first, &second}) {
    auto v = storage::batch_view::validate(m->body, storage::batch_limits{});
    BOOST_REQUIRE(v.has_value());  // stamped bytes keep a valid CRC
  }
  const auto a = storage::batch_view::trusted(first.body);
  const auto b = storage::batch_view::trusted(second.body);
  BOOST_TEST(a.base_offset().value() == 0);
  BOOST_TEST(b.base_offset().value() == 3, "after the pending batch's 3 records");
  BOOST_TEST(a.leader_epoch().value() == 3);
  BOOST_TEST(a.max_timestamp().value() == ledger::timestamp_base_ms + 500);
  BOOST_TEST(b.max_timestamp().value() == ledger::timestamp_base_ms + 500, "never below the time before it");
  // Applied, the offsets are the stamped ones; a third batch prepared after both applied follows them.
  const auto r1 = ledger::decode_produce_reply(l.apply(first.h, first.body));
  const auto r2 = ledger::decode_produce_reply(l.apply(second.h, second.body));
  BOOST_REQUIRE(r1 && r2);
  BOOST_TEST(r2->base_offset == 3u);
  ticks = 900;
  const message third = propose(l, make_batch(payload_id{7, 2}, 1, 10, rng, 3), 7, 2, {});
  BOOST_TEST(storage::batch_view::trusted(third.body).base_offset().value() == 5);
  BOOST_TEST(storage::batch_view::trusted(third.body).max_timestamp().value() == ledger::timestamp_base_ms + 900);
}

BOOST_AUTO_TEST_CASE(a_retry_of_an_uncommitted_batch_is_answered_with_the_original_not_stored_again) {
  ledger l;
  const auto batch = make_batch(payload_id{7, 1}, 3, 10, rng, 0);
  const message first = propose(l, batch, 7, 1, {});
  BOOST_TEST(first.h.operation == operation_produce);
  // The same batch again under another session, its original still pending (not applied).
  const message retry = propose(l, batch, 7 | (std::uint64_t{1} << session_number_shift), 1, {&first});
  BOOST_TEST(retry.h.operation == operation_produce_answered);
  BOOST_TEST(!producer_of_batch(retry.body).has_value());  // no batch in it

  const auto r1 = ledger::decode_produce_reply(l.apply(first.h, first.body));
  const auto r2 = ledger::decode_produce_reply(l.apply(retry.h, retry.body));
  BOOST_REQUIRE(r1 && r2);
  BOOST_TEST(r1->verdict == storage::producer_verdict::fresh);
  BOOST_TEST(r2->verdict == storage::producer_verdict::duplicate);
  BOOST_TEST(r2->base_offset == r1->base_offset);
  BOOST_TEST(r2->records == 3u);
  BOOST_TEST(r2->op == first.h.op);
  BOOST_TEST(l.next_offset() == 3u);
  BOOST_TEST(l.duplicates() == 0u);

  // The next batch of the producer is fresh; a gap is refused at prepare, without a batch.
  const message next = propose(l, make_batch(payload_id{7, 2}, 1, 10, rng, 3), 7, 2, {});
  BOOST_TEST(next.h.operation == operation_produce);
  const message gap = propose(l, make_batch(payload_id{7, 3}, 1, 10, rng, 9), 7, 3, {&next});
  BOOST_TEST(gap.h.operation == operation_produce_answered);
  (void)l.apply(next.h, next.body);
  const auto rg = ledger::decode_produce_reply(l.apply(gap.h, gap.body));
  BOOST_REQUIRE(rg);
  BOOST_TEST(rg->verdict == storage::producer_verdict::sequence_gap);
  BOOST_TEST(rg->records == 0u);
}

BOOST_AUTO_TEST_CASE(checking_only_the_committed_state_lets_a_pending_batch_in_twice) {
  ledger l(/*bug_idempotence_committed_only=*/true);
  const auto batch = make_batch(payload_id{7, 1}, 2, 10, rng, 0);
  const message first = propose(l, batch, 7, 1, {});
  const message retry = propose(l, batch, 7 | (std::uint64_t{1} << session_number_shift), 1, {&first});
  BOOST_TEST(retry.h.operation == operation_produce);  // the deliberate bug: the batch goes into the log again
  (void)l.apply(first.h, first.body);
  (void)l.apply(retry.h, retry.body);
  BOOST_TEST(l.duplicates() == 1u);  // what the simulator's checker reports
}

BOOST_AUTO_TEST_CASE(a_skipped_op_keeps_its_offsets_and_a_retry_of_it_is_answered) {
  ledger l;
  const auto batch = make_batch(payload_id{5, 1}, 2, 10, rng, 0);
  const message evicted = propose(l, batch, 5, 1, {});
  l.skip(evicted.h, evicted.body);  // its session was gone when it committed: not executed, but in the log
  BOOST_TEST(l.next_offset() == 2u);
  BOOST_TEST(l.offsets_at(evicted.h.op).second == 2u);
  const message retry = propose(l, batch, 5 | (std::uint64_t{1} << session_number_shift), 1, {});
  BOOST_TEST(retry.h.operation == operation_produce_answered);
  const auto r = ledger::decode_produce_reply(l.apply(retry.h, retry.body));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->verdict == storage::producer_verdict::duplicate);
  BOOST_TEST(r->base_offset == 0u);
  BOOST_TEST(r->op == evicted.h.op);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_keeps_the_producers_and_the_executed_requests) {
  ledger l;
  const auto batch = make_batch(payload_id{9, 1}, 1, 10, rng, 0);
  const message first = propose(l, batch, 9, 1, {});
  (void)l.apply(first.h, first.body);
  std::vector<std::byte> consumer(16);
  store_le<std::uint64_t>(consumer.data(), 9);
  store_le<std::uint64_t>(consumer.data() + 8, 1);
  const message position = prepare_of(operation_consumer_offset, consumer, 9, 2);
  (void)l.apply(position.h, position.body);

  ledger restored;
  BOOST_REQUIRE(restored.restore(l.snapshot()));
  BOOST_TEST(restored.digest_at(position.h.op) == l.digest_at(position.h.op));
  BOOST_TEST(restored.consumer_offsets().at(9) == 1u);
  const message retry = propose(restored, batch, 9 | (std::uint64_t{2} << session_number_shift), 1, {});
  BOOST_TEST(retry.h.operation == operation_produce_answered);
  (void)restored.apply(position.h, position.body);  // the same request executed again: counted
  BOOST_TEST(restored.duplicates() == 1u);

  // Damaged bytes are refused, and the state stays.
  auto bytes = l.snapshot();
  bytes.resize(56);  // cut inside the counted lists
  ledger other;
  BOOST_TEST(!other.restore(bytes));
  BOOST_TEST(other.next_offset() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
