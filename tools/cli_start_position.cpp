// rill consume: start positions (see cli_start_position.h).
//
// GCC 12's libstdc++ has the C++20 calendar types but not std::chrono::parse, so ISO-8601 is read by the small strict
// parser below (fixed field widths, validated by year_month_day::ok()), and the arithmetic is std::chrono's.
#include "tools/cli_start_position.h"

#include <optional>
#include <string>
#include <system_error>

#include <fmt/core.h>

#include "base/assert.h"

namespace rill::cli {
namespace {

rill::unexpected usage(std::string detail) {
  return rill::unexpected(std::make_error_code(std::errc::invalid_argument), std::move(detail));
}

std::optional<std::uint64_t> digits_value(std::string_view s) {
  if (s.empty() || s.size() > 19) {
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// Reads exactly `n` digits at `at`, moving it past them.
std::optional<int> fixed_digits(std::string_view s, std::size_t& at, std::size_t n) {
  if (at + n > s.size()) {
    return std::nullopt;
  }
  const auto v = digits_value(s.substr(at, n));
  if (!v) {
    return std::nullopt;
  }
  at += n;
  return static_cast<int>(*v);
}

bool expect_char(std::string_view s, std::size_t& at, char c) {
  if (at < s.size() && s[at] == c) {
    ++at;
    return true;
  }
  return false;
}

}  // namespace

expected<std::int64_t> parse_iso_time_ms(std::string_view text) {
  using namespace std::chrono;
  const auto bad = [&] {
    return usage(
        fmt::format("timestamp {}: expected ISO-8601 with a zone, like 2026-12-02T08:00:00Z or "
                    "2026-12-02T09:00:00.250+01:00",
                    text));
  };
  std::size_t at = 0;
  const auto y = fixed_digits(text, at, 4);
  if (!y || !expect_char(text, at, '-')) {
    return bad();
  }
  const auto mo = fixed_digits(text, at, 2);
  if (!mo || !expect_char(text, at, '-')) {
    return bad();
  }
  const auto d = fixed_digits(text, at, 2);
  if (!d || !(expect_char(text, at, 'T') || expect_char(text, at, 't') || expect_char(text, at, ' '))) {
    return bad();
  }
  const auto h = fixed_digits(text, at, 2);
  if (!h || !expect_char(text, at, ':')) {
    return bad();
  }
  const auto mi = fixed_digits(text, at, 2);
  if (!mi || !expect_char(text, at, ':')) {
    return bad();
  }
  const auto s = fixed_digits(text, at, 2);
  if (!s) {
    return bad();
  }
  milliseconds fraction{0};
  if (expect_char(text, at, '.') || expect_char(text, at, ',')) {
    std::size_t n = 0;
    int scale = 100;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      fraction += milliseconds((text[at] - '0') * scale);
      scale /= 10;
      ++at;
      ++n;
    }
    if (n == 0 || n > 9) {
      return bad();
    }
  }
  minutes offset{0};
  if (expect_char(text, at, 'Z') || expect_char(text, at, 'z')) {
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const int sign = text[at++] == '-' ? -1 : 1;
    const auto oh = fixed_digits(text, at, 2);
    if (!oh || !expect_char(text, at, ':')) {
      return bad();
    }
    const auto om = fixed_digits(text, at, 2);
    if (!om || *oh > 23 || *om > 59) {
      return bad();
    }
    offset = minutes(sign * (*oh * 60 + *om));
  } else {
    return bad();
  }
  if (at != text.size()) {
    return bad();
  }
  const year_month_day ymd{year(*y), month(static_cast<unsigned>(*mo)), day(static_cast<unsigned>(*d))};
  if (!ymd.ok() || *h > 23 || *mi > 59 || *s > 60) {  // 60: a leap second, read as the next second
    return bad();
  }
  const auto local = sys_days(ymd) + hours(*h) + minutes(*mi) + seconds(*s) + fraction;
  const auto ms = duration_cast<milliseconds>((local - offset).time_since_epoch()).count();
  if (ms < 0) {
    return usage(fmt::format("timestamp {}: before 1970", text));
  }
  return ms;
}

expected<std::chrono::milliseconds> parse_duration(std::string_view text) {
  using namespace std::chrono;
  const auto bad = [&] {
    return usage(
        fmt::format("--since {}: expected a number and a unit (ms, s, m, h, d), or several: 90s, 1h, 2d, "
                    "1h30m",
                    text));
  };
  milliseconds total{0};
  std::size_t at = 0;
  if (text.empty()) {
    return bad();
  }
  while (at < text.size()) {
    const std::size_t number_at = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      ++at;
    }
    const auto n = digits_value(text.substr(number_at, at - number_at));
    if (!n || *n > 1'000'000'000) {
      return bad();
    }
    const auto v = static_cast<std::int64_t>(*n);
    const std::size_t unit_at = at;
    while (at < text.size() && (text[at] < '0' || text[at] > '9')) {
      ++at;
    }
    const auto unit = text.substr(unit_at, at - unit_at);
    if (unit == "ms") {
      total += milliseconds(v);
    } else if (unit == "s") {
      total += seconds(v);
    } else if (unit == "m") {
      total += minutes(v);
    } else if (unit == "h") {
      total += hours(v);
    } else if (unit == "d") {
      total += days(v);
    } else {
      return bad();
    }
  }
  return total;
}

expected<start_position> parse_from(std::string_view from) {
  using kind = start_position::kind;
  const auto allowed = [&](std::string why) {
    return usage(
        fmt::format("--from {}: {}allowed are first, last, end, next, offset:N, timestamp:MS and "
                    "timestamp:ISO-8601 (2026-12-02T08:00:00Z)",
                    from, why));
  };
  if (from == "first") {
    return start_position{kind::first, 0};
  }
  if (from == "last") {
    return start_position{kind::last, 0};
  }
  if (from == "end") {
    return start_position{kind::end, 0};
  }
  if (from == "next") {
    return start_position{kind::next, 0};
  }
  static constexpr std::string_view offset_prefix = "offset:";
  static constexpr std::string_view timestamp_prefix = "timestamp:";
  if (from.starts_with(offset_prefix)) {
    const auto v = digits_value(from.substr(offset_prefix.size()));
    if (!v) {
      return allowed("an offset is a number; ");
    }
    return start_position{kind::offset, *v};
  }
  if (from.starts_with(timestamp_prefix)) {
    const auto rest = from.substr(timestamp_prefix.size());
    if (const auto v = digits_value(rest)) {
      return start_position{kind::timestamp, *v};
    }
    auto ms = parse_iso_time_ms(rest);
    if (!ms) {
      return usage("--from " + std::string(from) + ": " + ms.error().detail());
    }
    return start_position{kind::timestamp, static_cast<std::uint64_t>(*ms)};
  }
  return allowed("");
}

expected<start_position> parse_since(std::string_view since, std::chrono::system_clock::time_point now) {
  using namespace std::chrono;
  RILL_TRY(d, parse_duration(since));
  const auto now_ms = duration_cast<milliseconds>(now.time_since_epoch());
  const auto at = d >= now_ms ? milliseconds(0) : now_ms - d;
  return start_position{start_position::kind::timestamp, static_cast<std::uint64_t>(at.count())};
}

proto::PollStrategy poll_strategy_for(const start_position& p) {
  using kind = start_position::kind;
  RILL_ASSERT(p.at != kind::end, "end is resolved to an offset per partition");
  proto::PollStrategy s;
  switch (p.at) {
    case kind::first:
      s.set_kind(proto::PollStrategy::FIRST);
      break;
    case kind::last:
      s.set_kind(proto::PollStrategy::LAST);
      break;
    case kind::next:
      s.set_kind(proto::PollStrategy::NEXT);
      break;
    case kind::offset:
    case kind::end:
      s.set_kind(proto::PollStrategy::OFFSET);
      s.set_value(p.value);
      break;
    case kind::timestamp:
      s.set_kind(proto::PollStrategy::TIMESTAMP);
      s.set_value(p.value);
      break;
  }
  return s;
}

}  // namespace rill::cli
