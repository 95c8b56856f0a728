// rill consume: printing records (see cli_record_output.h).
#include "tools/cli_record_output.h"

#include <array>
#include <chrono>
#include <system_error>

#include <fmt/core.h>

#include "base/assert.h"
#include "tools/cli_groups.h"

namespace rill::cli {
namespace {

rill::unexpected usage(std::string detail) {
  return rill::unexpected(std::make_error_code(std::errc::invalid_argument), std::move(detail));
}

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or 0 when there is none.
std::size_t utf8_sequence_bytes(std::string_view s) {
  RILL_ASSERT(!s.empty());
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  std::size_t n = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead < 0x80) {
    return 1;
  } else if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < low || b(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) {
      return 0;
    }
  }
  return n;
}

std::string value_text(value_format f, const std::optional<std::string>& value) {
  if (!value) {
    return {};
  }
  switch (f) {
    case value_format::text:
      return escaped_text(*value);
    case value_format::base64:
      return base64_text(*value);
    case value_format::hex:
      return hex_text(*value);
    case value_format::raw:
      return *value;
  }
  return {};
}

std::string headers_text(const net::record& rec) {
  std::string out;
  for (const auto& [k, v] : rec.headers) {
    out += (out.empty() ? "" : ",") + escaped_text(k) + "=" + (v ? escaped_text(*v) : std::string());
  }
  return out;
}

}  // namespace

expected<value_format> parse_value_format(std::string_view name) {
  if (name == "text") {
    return value_format::text;
  }
  if (name == "base64") {
    return value_format::base64;
  }
  if (name == "hex") {
    return value_format::hex;
  }
  if (name == "raw") {
    return value_format::raw;
  }
  return usage(fmt::format("--value-format {}: allowed are text, base64, hex, raw", name));
}

expected<record_template> parse_record_template(std::string_view text) {
  using field = record_template::field;
  record_template t;
  std::string literal;
  const auto flush = [&] {
    if (!literal.empty()) {
      t.pieces.emplace_back(std::move(literal));
      literal.clear();
    }
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '%' && c != '\\') {
      literal += c;
      continue;
    }
    if (i + 1 == text.size()) {
      return usage(fmt::format("--format {}: a trailing '{}' (write %% or \\\\ for the character itself)", text, c));
    }
    const char code = text[++i];
    if (c == '\\') {
      switch (code) {
        case 'n':
          literal += '\n';
          break;
        case 't':
          literal += '\t';
          break;
        case '\\':
          literal += '\\';
          break;
        default:
          return usage(fmt::format("--format {}: unknown escape \\{} (allowed are \\n, \\t, \\\\)", text, code));
      }
      continue;
    }
    std::optional<field> f;
    switch (code) {
      case '%':
        literal += '%';
        continue;
      case 's':
        f = field::value;
        break;
      case 'k':
        f = field::key;
        break;
      case 'p':
        f = field::partition;
        break;
      case 'o':
        f = field::offset;
        break;
      case 'T':
        f = field::timestamp_ms;
        break;
      case 't':
        f = field::timestamp_iso;
        break;
      case 'h':
        f = field::headers;
        break;
      case 'S':
        f = field::value_bytes;
        break;
      case 'K':
        f = field::key_bytes;
        break;
      case 'g':
        f = field::generation;
        break;
      default:
        return usage(
            fmt::format("--format {}: unknown code %{} (allowed are %s %k %p %o %T %t %h %S %K %g %%)", text, code));
    }
    flush();
    t.pieces.emplace_back(*f);
  }
  flush();
  return t;
}

expected<void> check_record_output(const record_output& o) {
  if (o.json && o.values == value_format::raw) {
    return usage("--value-format raw: JSON cannot carry raw bytes; with --json use text, base64 or hex");
  }
  if (o.json && o.format) {
    return usage("--format is a text template: use it without --json");
  }
  return {};
}

std::string escaped_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    const std::size_t n = utf8_sequence_bytes(bytes.substr(i));
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

std::string base64_text(std::string_view bytes) {
  static constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      v = (v << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      out += j <= n ? alphabet[(v >> (18 - 6 * j)) & 0x3f] : '=';
    }
  }
  return out;
}

std::string hex_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return out;
}

std::string iso_time_text(std::int64_t timestamp_ms) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds(timestamp_ms)};
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

std::string record_text(const record_output& o, const net::record& rec) {
  using field = record_template::field;
  if (!o.format) {
    return value_text(o.values, rec.value) + "\n";
  }
  std::string out;
  for (const auto& piece : o.format->pieces) {
    if (const auto* literal = std::get_if<std::string>(&piece)) {
      out += *literal;
      continue;
    }
    switch (std::get<field>(piece)) {
      case field::value:
        out += value_text(o.values, rec.value);
        break;
      case field::key:
        out += rec.key ? escaped_text(*rec.key) : std::string();
        break;
      case field::partition:
        out += std::to_string(rec.partition);
        break;
      case field::offset:
        out += std::to_string(rec.offset);
        break;
      case field::timestamp_ms:
        out += std::to_string(rec.timestamp_ms);
        break;
      case field::timestamp_iso:
        out += iso_time_text(rec.timestamp_ms);
        break;
      case field::headers:
        out += headers_text(rec);
        break;
      case field::value_bytes:
        out += std::to_string(rec.value ? rec.value->size() : 0);
        break;
      case field::key_bytes:
        out += std::to_string(rec.key ? rec.key->size() : 0);
        break;
      case field::generation:
        out += std::to_string(rec.generation);
        break;
    }
  }
  return out;
}

nlohmann::json record_json_as(const record_output& o, const net::record& rec) {
  RILL_ASSERT(o.values != value_format::raw);
  auto j = record_json(rec);
  if (rec.value && o.values == value_format::base64) {
    j["value"] = base64_text(*rec.value);
  } else if (rec.value && o.values == value_format::hex) {
    j["value"] = hex_text(*rec.value);
  }
  return j;
}

}  // namespace rill::cli
