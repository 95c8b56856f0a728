// long_poll without CAF: waiters parked by empty reads, woken by a high watermark past what they want, expired by
// the time passed in, drained and closed; and where a poll's read starts.
#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/long_poll.h"

using namespace rill;
using namespace rill::actors;
using namespace std::chrono_literals;

namespace {
using polls = long_poll<std::string>;
using after = polls::after_read;

std::vector<polls::waiter_id> ids(std::initializer_list<polls::waiter_id> l) {
  return l;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(long_poll_suite)

BOOST_AUTO_TEST_CASE(a_poll_without_wait_is_answered_by_its_first_read) {
  polls p(30s);
  const auto id = p.add("a", 0, 0ns);
  p.check_invariants();
  BOOST_TEST(!p.next_deadline().has_value());
  BOOST_TEST(p.start_read(id));
  p.check_invariants();
  BOOST_TEST(!p.start_read(id));  // already reading
  BOOST_TEST((p.read_done(id, true, offset_t(5)) == after::answer));
  BOOST_TEST(p.take(id) == "a");
  p.check_invariants();
  BOOST_TEST(p.size() == 0u);
  BOOST_TEST((p.read_done(id, true, offset_t(5)) == after::gone));
}

BOOST_AUTO_TEST_CASE(an_empty_read_parks_until_the_high_watermark_passes_the_wanted_offset) {
  polls p(30s);
  const auto a = p.add("a", 1000, 0ns);
  p.check_invariants();
  const auto b = p.add("b", 1000, 0ns);
  p.check_invariants();
  BOOST_TEST(p.start_read(a));
  p.check_invariants();
  BOOST_TEST(p.start_read(b));
  p.check_invariants();
  BOOST_TEST((p.read_done(a, true, offset_t(10)) == after::parked));
  BOOST_TEST((p.read_done(b, true, offset_t(12)) == after::parked));
  BOOST_TEST(p.woken(offset_t(10)).empty());
  BOOST_TEST(p.woken(offset_t(11)) == ids({a}));
  BOOST_TEST(p.woken(offset_t(13)) == ids({a, b}));
  // A waiter whose start moves is woken by any commit; one reading is not woken.
  const auto c = p.add("c", 1000, 0ns);
  p.check_invariants();
  BOOST_TEST(p.start_read(c));
  p.check_invariants();
  BOOST_TEST(p.woken(offset_t(13)) == ids({a, b}));
  BOOST_TEST((p.read_done(c, true, std::nullopt) == after::parked));
  BOOST_TEST(p.woken(offset_t(0)) == ids({c}));
  // Data (or an error) answers.
  BOOST_TEST(p.start_read(a));
  p.check_invariants();
  BOOST_TEST((p.read_done(a, false, std::nullopt) == after::answer));
  BOOST_TEST(p.take(a) == "a");
  p.check_invariants();
}

BOOST_AUTO_TEST_CASE(deadlines_expire_by_the_time_passed_in) {
  polls p(5s);  // the server's maximum caps what a poll asks for
  const auto a = p.add("a", 2000, 1s);
  p.check_invariants();
  const auto b = p.add("b", 60'000, 1s);
  p.check_invariants();
  const auto c = p.add("c", 3000, 1s);
  p.check_invariants();
  BOOST_TEST((p.next_deadline() == std::optional<std::chrono::nanoseconds>(3s)));
  BOOST_TEST((p.deadline_of(b) == std::optional<std::chrono::nanoseconds>(6s)));
  for (auto id : {a, b, c}) {
    BOOST_TEST(p.start_read(id));
    p.check_invariants();
    BOOST_TEST((p.read_done(id, true, offset_t(0)) == after::parked));
  }
  BOOST_TEST(p.expire(2999ms).empty());
  p.check_invariants();
  BOOST_TEST(p.expire(3s) == ids({a}));
  p.check_invariants();
  BOOST_TEST((p.next_deadline() == std::optional<std::chrono::nanoseconds>(4s)));
  // An expired waiter's next read answers, data or not.
  BOOST_TEST(p.start_read(a));
  p.check_invariants();
  BOOST_TEST((p.read_done(a, true, offset_t(0)) == after::answer));
  BOOST_TEST(p.take(a) == "a");
  p.check_invariants();
  // One reading when it expires is answered when its read ends.
  BOOST_TEST(p.start_read(c));
  p.check_invariants();
  BOOST_TEST(p.expire(10s) == ids({b}));
  p.check_invariants();
  BOOST_TEST(!p.next_deadline().has_value());
  BOOST_TEST((p.read_done(c, true, offset_t(0)) == after::answer));
  BOOST_TEST(p.take(c) == "c");
  p.check_invariants();
  BOOST_TEST(p.take(b) == "b");
  p.check_invariants();
}

BOOST_AUTO_TEST_CASE(draining_expires_every_waiter_now_and_later) {
  polls p(30s);
  const auto a = p.add("a", 1000, 0ns);
  p.check_invariants();
  const auto b = p.add("b", 1000, 0ns);
  p.check_invariants();
  BOOST_TEST(p.start_read(a));
  p.check_invariants();
  BOOST_TEST((p.read_done(a, true, offset_t(0)) == after::parked));
  BOOST_TEST(p.start_read(b));
  p.check_invariants();
  BOOST_TEST(p.drain() == ids({a}));  // b is reading: its read answers it
  BOOST_TEST(!p.next_deadline().has_value());
  BOOST_TEST((p.read_done(b, true, offset_t(0)) == after::answer));
  const auto c = p.add("c", 1000, 0ns);
  p.check_invariants();
  BOOST_TEST(!p.next_deadline().has_value());
  BOOST_TEST(p.start_read(c));
  p.check_invariants();
  BOOST_TEST((p.read_done(c, true, offset_t(0)) == after::answer));
}

BOOST_AUTO_TEST_CASE(closing_returns_the_idle_waiters_and_answers_the_reading_ones_after) {
  polls p(30s);
  const auto a = p.add("a", 1000, 0ns);
  p.check_invariants();
  const auto b = p.add("b", 1000, 0ns);
  p.check_invariants();
  BOOST_TEST(p.start_read(a));
  p.check_invariants();
  BOOST_TEST((p.read_done(a, true, offset_t(0)) == after::parked));
  BOOST_TEST(p.start_read(b));
  p.check_invariants();
  BOOST_TEST(p.close() == (std::vector<std::string>{"a"}));
  p.check_invariants();
  BOOST_TEST(p.size() == 1u);
  BOOST_TEST((p.read_done(b, true, offset_t(0)) == after::answer));
  BOOST_TEST(p.take(b) == "b");
  p.check_invariants();
  BOOST_TEST(p.size() == 0u);
}

BOOST_AUTO_TEST_CASE(where_a_poll_reads_from) {
  proto::PollRequest r;
  r.mutable_consumer()->set_name("c");
  auto q = read_request_for(r, std::nullopt, std::nullopt, offset_t(3), offset_t(10), 4096);
  BOOST_TEST((q.start == storage::read_start::offset));  // OFFSET 0 is the default strategy
  BOOST_TEST(q.offset.value() == 0);
  BOOST_TEST(q.max_bytes == 4096u);
  BOOST_TEST(q.max_records == UINT32_MAX);
  r.set_max_bytes(100);
  r.set_max_records(7);
  r.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  q = read_request_for(r, std::nullopt, std::nullopt, offset_t(3), offset_t(10), 4096);
  BOOST_TEST((q.start == storage::read_start::first));  // nothing stored
  BOOST_TEST(q.max_bytes == 100u);
  BOOST_TEST(q.max_records == 7u);
  q = read_request_for(r, std::nullopt, 1, offset_t(3), offset_t(10), 4096);
  BOOST_TEST((q.start == storage::read_start::offset));
  BOOST_TEST(q.offset.value() == 3);  // retention removed the stored offset: the log start
  q = read_request_for(r, std::nullopt, 6, offset_t(3), offset_t(10), 4096);
  BOOST_TEST(q.offset.value() == 6);
  // A group's position overrides the strategy and is clamped into the log.
  q = read_request_for(r, 20, 6, offset_t(3), offset_t(10), 4096);
  BOOST_TEST((q.start == storage::read_start::offset));
  BOOST_TEST(q.offset.value() == 10);
  r.mutable_strategy()->set_kind(proto::PollStrategy::TIMESTAMP);
  r.mutable_strategy()->set_value(1234);
  q = read_request_for(r, std::nullopt, 6, offset_t(3), offset_t(10), 4096);
  BOOST_TEST((q.start == storage::read_start::timestamp));
  BOOST_TEST(q.timestamp.value() == 1234);
  r.mutable_strategy()->set_kind(proto::PollStrategy::LAST);
  BOOST_TEST(
      (read_request_for(r, std::nullopt, 6, offset_t(3), offset_t(10), 4096).start == storage::read_start::last));
}

BOOST_AUTO_TEST_CASE(what_a_parked_poll_wants) {
  storage::read_result empty;
  empty.next_offset = offset_t(8);
  proto::PollRequest r;
  r.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
  BOOST_TEST((wanted_offset(r, std::nullopt, empty) == std::optional<offset_t>(offset_t(8))));
  r.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  r.mutable_consumer()->set_name("c");
  BOOST_TEST(!wanted_offset(r, std::nullopt, empty).has_value());  // its stored offset may move
  BOOST_TEST((wanted_offset(r, 8, empty) == std::optional<offset_t>(offset_t(8))));
  r.mutable_consumer()->set_group("g");
  BOOST_TEST((wanted_offset(r, std::nullopt, empty) == std::optional<offset_t>(offset_t(8))));
}

BOOST_AUTO_TEST_SUITE_END()
