#pragma once
// How `rill consume` prints a record, in partition mode and with --group: the value format (--value-format), the
// text template (--format) and the JSON line (--json).
//
// Text output is line-oriented and safe on any bytes: a value, key or header printed as `text` has its valid UTF-8
// as is, and every other byte escaped: \n, \t, \r, \\ and \xNN (control bytes, DEL, and each byte of invalid UTF-8).
// `raw` prints the value's bytes unchanged (binary pipelines); `base64` and `hex` print an encoding of them.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/expected.h"
#include "net/client.h"

namespace rill::cli {

enum class value_format : std::uint8_t { text, base64, hex, raw };

// "text", "base64", "hex" or "raw"; anything else is an error whose detail names --value-format and what is allowed.
expected<value_format> parse_value_format(std::string_view name);

// A compiled --format template: literal text and the fields of a record.
//   %s value  %k key  %p partition  %o offset  %T timestamp (ms since the epoch)  %t timestamp (ISO-8601 UTC, ms)
//   %h headers (k=v,k=v)  %S value size in bytes  %K key size in bytes (0 when absent)
//   %g the group generation the record was read in (--group; 0 without)  %% a literal %
//   \n newline  \t tab  \\ a backslash
struct record_template {
  enum class field : std::uint8_t {
    value,
    key,
    partition,
    offset,
    timestamp_ms,
    timestamp_iso,
    headers,
    value_bytes,
    key_bytes,
    generation
  };
  std::vector<std::variant<std::string, field>> pieces;
};

// Compiles a template; an unknown %code or \escape, or a trailing % or \, is an error naming --format.
expected<record_template> parse_record_template(std::string_view text);

struct record_output {
  bool json = false;
  value_format values = value_format::text;
  std::optional<record_template> format;  // text mode only; none: "%s\n"
};

// Checks that the parts agree (JSON cannot carry raw bytes, and --format is for text); the error names the flags.
expected<void> check_record_output(const record_output& o);

// Text of `bytes` for a line-oriented terminal or pipe: valid UTF-8 as is, everything else escaped (see above).
std::string escaped_text(std::string_view bytes);
std::string base64_text(std::string_view bytes);
std::string hex_text(std::string_view bytes);
// Milliseconds since the epoch as ISO-8601 UTC: 2026-12-02T08:00:00.123Z.
std::string iso_time_text(std::int64_t timestamp_ms);

// The record as text mode prints it (template applied; the default template ends in a newline).
std::string record_text(const record_output& o, const net::record& rec);
// The record as --json prints it: record_json(rec), with the value as --value-format asks (text: as record_json has
// it, a string when UTF-8 else {"base64": ...}; base64 and hex: a plain string of that encoding; null when absent).
nlohmann::json record_json_as(const record_output& o, const net::record& rec);

}  // namespace rill::cli
