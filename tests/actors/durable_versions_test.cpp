// durable_versions: replies wait for the version current when they began to wait, one write is in flight at a time,
// changes made during a write ride the next one, and a failed write fences: every waiter, queued or new, gets its
// error and nothing more is written.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "actors/durable_versions.h"
#include "net/status.h"

using namespace rill;
using namespace rill::actors;

namespace {

// Records which waiter ran, and with what.
struct waiters_log {
  std::vector<std::string> ran;
  durable_versions::done_fn waiter(std::string name) {
    return [this, name](const std::optional<rill::error>& e) { ran.push_back(e ? name + ":" + e->detail() : name); };
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_waiter_runs_at_once_when_nothing_is_pending) {
  durable_versions v;
  waiters_log l;
  BOOST_TEST(!v.start_write().has_value());  // nothing changed
  v.wait(l.waiter("a"));
  BOOST_TEST(l.ran == std::vector<std::string>{"a"});
  BOOST_TEST(v.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(waiters_wait_for_the_version_current_when_they_began) {
  durable_versions v;
  waiters_log l;
  v.changed();
  v.wait(l.waiter("a"));  // waits for 1
  const auto first = v.start_write();
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(*first == 1u);
  BOOST_TEST(v.writing());
  // Changes during the write ride the next one: no second write while one is in flight.
  v.changed();
  v.wait(l.waiter("b"));  // waits for 2
  BOOST_TEST(!v.start_write().has_value());
  BOOST_TEST(l.ran.empty());
  v.write_done(*first, std::nullopt);
  BOOST_TEST(v.durable() == 1u);
  BOOST_TEST(l.ran == std::vector<std::string>{"a"});  // b waits for its own change
  BOOST_TEST(v.waiting() == 1u);
  const auto second = v.start_write();
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(*second == 2u);
  v.changed();            // 3: written by a later write
  v.wait(l.waiter("c"));  // waits for 3
  v.write_done(*second, std::nullopt);
  BOOST_TEST((l.ran == std::vector<std::string>{"a", "b"}));
  const auto third = v.start_write();
  BOOST_REQUIRE(third.has_value());
  BOOST_TEST(*third == 3u);
  v.write_done(*third, std::nullopt);
  BOOST_TEST((l.ran == std::vector<std::string>{"a", "b", "c"}));
  BOOST_TEST(!v.start_write().has_value());
  BOOST_TEST(v.version() == 3u);
  BOOST_TEST(v.durable() == 3u);
}

BOOST_AUTO_TEST_CASE(several_changes_are_written_by_one_write_and_waiters_run_in_order) {
  durable_versions v;
  waiters_log l;
  v.changed();
  v.wait(l.waiter("a"));
  v.changed();
  v.wait(l.waiter("b"));
  v.wait(l.waiter("c"));
  const auto w = v.start_write();
  BOOST_REQUIRE(w.has_value());
  BOOST_TEST(*w == 2u);
  v.write_done(*w, std::nullopt);
  BOOST_TEST((l.ran == std::vector<std::string>{"a", "b", "c"}));
}

BOOST_AUTO_TEST_CASE(a_failed_write_fences_every_waiter_queued_or_new) {
  durable_versions v;
  waiters_log l;
  v.changed();
  v.wait(l.waiter("a"));
  const auto w = v.start_write();
  BOOST_REQUIRE(w.has_value());
  v.changed();
  v.wait(l.waiter("b"));
  v.write_done(*w, rill::error(make_error_code(net::status::storage_error), "disk"));
  BOOST_TEST((l.ran == std::vector<std::string>{"a:disk", "b:disk"}));
  BOOST_REQUIRE(v.fenced().has_value());
  BOOST_TEST((net::status_of(v.fenced()->code()) == net::status::storage_error));
  BOOST_TEST(v.durable() == 0u);
  v.changed();
  BOOST_TEST(!v.start_write().has_value());  // nothing more is written
  v.wait(l.waiter("c"));
  BOOST_TEST(l.ran.back() == "c:disk");
  BOOST_TEST(v.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(a_refused_write_fails_its_waiters_fences_nothing_and_retries_only_for_a_waiter) {
  durable_versions v;
  waiters_log l;
  const rill::error full(make_error_code(net::status::disk_full), "full");
  v.changed();
  v.wait(l.waiter("a"));
  const auto w = v.start_write();
  BOOST_REQUIRE(w.has_value());
  v.changed();
  v.wait(l.waiter("b"));  // waits for a change the refused write does not carry
  v.write_refused(*w, full);
  BOOST_TEST((l.ran == std::vector<std::string>{"a:full"}));
  BOOST_TEST(!v.fenced().has_value());
  BOOST_TEST(v.durable() == 0u);
  // b still waits: a write starts again for it, and is refused again: b fails too.
  const auto retry = v.start_write();
  BOOST_REQUIRE(retry.has_value());
  BOOST_TEST(*retry == 2u);
  v.write_refused(*retry, full);
  BOOST_TEST((l.ran == std::vector<std::string>{"a:full", "b:full"}));
  // Nobody waits: no write starts (no retry loop on a full disk)...
  BOOST_TEST(!v.start_write().has_value());
  // ...until a request waits, with no change of its own (a heartbeat): the room is back, the write works.
  v.wait(l.waiter("c"));
  const auto again = v.start_write();
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(*again == 2u);
  v.write_done(*again, std::nullopt);
  BOOST_TEST((l.ran == std::vector<std::string>{"a:full", "b:full", "c"}));
  BOOST_TEST(v.durable() == 2u);
  BOOST_TEST(v.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(a_fence_before_any_write_answers_with_its_error) {
  durable_versions v;
  waiters_log l;
  v.fence(rill::error(make_error_code(net::status::storage_error), "cannot open"));
  v.changed();
  BOOST_TEST(!v.start_write().has_value());
  v.wait(l.waiter("a"));
  BOOST_TEST(l.ran == std::vector<std::string>{"a:cannot open"});
  // The first error stays.
  v.fence(rill::error(make_error_code(net::status::storage_error), "later"));
  BOOST_TEST(v.fenced()->detail() == "cannot open");
}

BOOST_AUTO_TEST_CASE(a_waiter_may_wait_again_while_waiters_run) {
  durable_versions v;
  waiters_log l;
  v.changed();
  v.wait([&](const std::optional<rill::error>&) {
    l.ran.push_back("a");
    v.wait(l.waiter("nested"));  // durable now: runs at once
  });
  v.wait(l.waiter("b"));
  const auto w = v.start_write();
  BOOST_REQUIRE(w.has_value());
  v.write_done(*w, std::nullopt);
  BOOST_TEST((l.ran == std::vector<std::string>{"a", "nested", "b"}));
}
