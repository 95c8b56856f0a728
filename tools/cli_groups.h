#pragma once
// The consumer-group commands of the rill CLI: `consume --group` and `group create|list|describe|delete`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "net/client.h"
#include "tools/cli_output.h"  // report()
#include "tools/cli_record_output.h"

namespace rill::cli {

// A consumed record as `consume --json` prints it: partition, offset, timestamp, key, headers, value. A message
// carries bytes: a key, header value or value is a JSON string when it is valid UTF-8, else an object
// {"base64": "<its bytes in base64>"} (a header name that is not UTF-8: "base64:<its bytes>"); null when absent.
// Never throws on any bytes.
nlohmann::json record_json(const net::record& rec);

struct group_consume_args {
  net::client_options connection;
  record_output output;  // checked (check_record_output)
  std::string stream;
  std::string topic;
  std::string group;
  std::optional<std::string> member_id;
  bool follow = false;
  std::uint64_t count = 0;    // 0: until nothing more arrives (or forever with follow)
  proto::GroupConfig config;  // when the group is created by this command
};
// Joins the group and prints what the assignment lets it read (as args.output says), committing after what it
// printed; leaves on exit (end of data, --count reached, SIGINT or SIGTERM: exit 0). Following, a lost server
// (server_lost, tools/cli_consume.h) that outlasts the client library's retries is said on stderr ("rill: lost the
// server (...), reconnecting", then "rill: reconnected") and waited out, retrying with a backoff of 100 ms doubling
// to 5 s; the member keeps its positions, or rejoins and reads from the group's committed offsets.
int group_consume(const group_consume_args& args);

enum class group_op { create, list, describe, remove };
int group_command(net::client& c, group_op op, const std::string& stream, const std::string& topic,
                  const std::string& name, const proto::GroupConfig& config, bool json_output);

}  // namespace rill::cli
