// rill consume's start positions without a server: --from values, ISO-8601 times (zones, fractions, invalid dates),
// --since durations, and the poll strategies they become.
#define BOOST_TEST_MODULE cli_start_position
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "tools/cli_start_position.h"

using namespace rill;
using namespace rill::cli;
using kind = start_position::kind;

BOOST_AUTO_TEST_CASE(iso_times_with_zones_and_fractions) {
  BOOST_TEST(*parse_iso_time_ms("1970-01-01T00:00:00Z") == 0);
  BOOST_TEST(*parse_iso_time_ms("2026-12-02T08:00:00Z") == 1796198400000);
  BOOST_TEST(*parse_iso_time_ms("2026-12-02T09:00:00+01:00") == 1796198400000);
  BOOST_TEST(*parse_iso_time_ms("2026-12-02T02:30:00-05:30") == 1796198400000);
  BOOST_TEST(*parse_iso_time_ms("2026-12-02T08:00:00.25Z") == 1796198400250);
  BOOST_TEST(*parse_iso_time_ms("2026-12-02T08:00:00.123456789Z") == 1796198400123);
  BOOST_TEST(*parse_iso_time_ms("2024-02-29T00:00:00Z") == 1709164800000);  // a leap day
}

BOOST_AUTO_TEST_CASE(iso_times_refused) {
  for (const char* bad :
       {"", "2026-12-02", "2026-12-02T08:00:00", "2026-12-02T08:00Z", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-12-32T00:00:00Z", "2026-12-02T24:00:00Z", "2026-12-02T08:60:00Z", "2026-12-02T08:00:00+1:00",
        "2026-12-02T08:00:00+01:00x", "2026-12-02T08:00:00.Z", "26-12-02T08:00:00Z", "1969-12-31T23:59:59Z", "now"}) {
    const auto r = parse_iso_time_ms(bad);
    BOOST_TEST(!r, bad);
    if (!r) {
      BOOST_TEST(r.error().code() == std::make_error_code(std::errc::invalid_argument));
    }
  }
}

BOOST_AUTO_TEST_CASE(from_values) {
  BOOST_TEST((parse_from("first")->at == kind::first));
  BOOST_TEST((parse_from("last")->at == kind::last));
  BOOST_TEST((parse_from("end")->at == kind::end));
  BOOST_TEST((parse_from("next")->at == kind::next));
  const auto o = parse_from("offset:42");
  BOOST_TEST((o->at == kind::offset));
  BOOST_TEST(o->value == 42u);
  const auto ms = parse_from("timestamp:1796198400000");
  BOOST_TEST((ms->at == kind::timestamp));
  BOOST_TEST(ms->value == 1796198400000u);
  const auto iso = parse_from("timestamp:2026-12-02T09:00:00+01:00");
  BOOST_TEST((iso->at == kind::timestamp));
  BOOST_TEST(iso->value == 1796198400000u);
  for (const char* bad : {"", "start", "offset:", "offset:-1", "offset:1x", "timestamp:", "timestamp:yesterday",
                          "timestamp:2026-12-02T08:00:00"}) {
    const auto r = parse_from(bad);
    BOOST_TEST(!r, bad);
    if (!r) {
      BOOST_TEST(r.error().detail().find("--from") != std::string::npos, r.error().detail());
    }
  }
}

BOOST_AUTO_TEST_CASE(since_durations) {
  using namespace std::chrono;
  BOOST_TEST(parse_duration("90s")->count() == 90'000);
  BOOST_TEST(parse_duration("500ms")->count() == 500);
  BOOST_TEST(parse_duration("15m")->count() == 900'000);
  BOOST_TEST(parse_duration("1h")->count() == 3'600'000);
  BOOST_TEST(parse_duration("2d")->count() == 172'800'000);
  BOOST_TEST(parse_duration("1h30m")->count() == 5'400'000);
  for (const char* bad : {"", "h", "5", "5x", "1.5h", "-1h", "1h 30m", "1H"}) {
    const auto r = parse_duration(bad);
    BOOST_TEST(!r, bad);
    if (!r) {
      BOOST_TEST(r.error().detail().find("--since") != std::string::npos, r.error().detail());
    }
  }
  const auto now = system_clock::time_point(milliseconds(1796198400000));
  const auto s = parse_since("1h", now);
  BOOST_TEST((s->at == kind::timestamp));
  BOOST_TEST(s->value == 1796198400000u - 3'600'000u);
  BOOST_TEST(parse_since("100000d", now)->value == 0u);  // before the epoch: from the start
}

BOOST_AUTO_TEST_CASE(poll_strategies) {
  BOOST_TEST((poll_strategy_for({kind::first, 0}).kind() == proto::PollStrategy::FIRST));
  BOOST_TEST((poll_strategy_for({kind::last, 0}).kind() == proto::PollStrategy::LAST));
  BOOST_TEST((poll_strategy_for({kind::next, 0}).kind() == proto::PollStrategy::NEXT));
  const auto o = poll_strategy_for({kind::offset, 7});
  BOOST_TEST((o.kind() == proto::PollStrategy::OFFSET));
  BOOST_TEST(o.value() == 7u);
  const auto t = poll_strategy_for({kind::timestamp, 1796198400000});
  BOOST_TEST((t.kind() == proto::PollStrategy::TIMESTAMP));
  BOOST_TEST(t.value() == 1796198400000u);
}
