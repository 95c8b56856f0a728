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
  partition_machine m{{4, 16}, [this] { return now; }};
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
    return m.apply(front.h, front.body);
  }
};

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
  partition_machine copy{{4, 16}, [] { return std::int64_t{0}; }};
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

BOOST_AUTO_TEST_SUITE_END()
