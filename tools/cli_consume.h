#pragma once
// `rill consume`: reading a topic from the command line.
//
// Without --partition it reads every partition of the topic, polling them in turn (round robin: a busy partition does
// not starve the others); --count counts across partitions. With --group it reads as a member of a consumer group
// (tools/cli_groups.h). Records are printed as tools/cli_record_output.h says, from where tools/cli_start_position.h
// says.
//
// A named consumer (--consumer) has each partition's offset stored on the server after what was printed (not after
// whole batches: --count may stop inside one), so a later `--from next` resumes after it.
//
// --follow keeps polling when the partitions are caught up. When the server is lost while following (the connection
// drops, is refused, or the server answers a retriable status), it says so on stderr ("rill: lost the server (...),
// reconnecting"), retries with a backoff of 100 ms doubling to 5 s until SIGINT, says "rill: reconnected", and resumes
// each partition at the offset after the last it printed: nothing is skipped and nothing printed twice.
//
// SIGINT or SIGTERM ends the command after the poll in progress (within about a second): what was read is printed,
// the named consumer's offsets stored, and the exit status is 0.
//
// Exit status: 0 done, 1 the server refused (the message says why), 2 bad usage (the message names the flag and
// what it allows), 3 the server could not be reached.
#include <cstdint>
#include <optional>
#include <string>

#include "net/client.h"

namespace rill::cli {

struct consume_args {
  net::client_options connection;
  bool json_output = false;
  std::string stream;
  std::string topic;
  std::optional<std::uint32_t> partition;  // none: every partition of the topic
  std::string from = "first";              // a --from value (tools/cli_start_position.h)
  std::optional<std::string> since;        // a --since duration; replaces --from
  std::uint64_t count = 0;                 // 0: until caught up (or forever with follow)
  std::string consumer;                    // empty: none
  bool follow = false;
  bool from_replica = false;          // a replicated topic: read committed data from any replica, not only the primary
  std::string value_format = "text";  // text | base64 | hex | raw
  std::optional<std::string> format;  // a --format template (text mode)
  std::string group;                  // non-empty: read as a member of this group
  std::optional<std::string> member_id;  // with group
  proto::GroupConfig group_config;       // when the group is created by this command
};

// Runs the command; returns the exit status.
int consume(const consume_args& args);

// Whether a failed call is one a server restart explains, which a follow waits out: the connection (dropped,
// refused, timed out) or a retriable status (the server is starting, overloaded).
bool server_lost(const rill::error& e);

}  // namespace rill::cli
