#pragma once
// Reply status codes of the client protocol (u16 in every reply frame). 0 is success; 100-199 are retriable (the
// client library retries them); everything else is final. Every non-zero status comes with an ErrorReply header
// whose message says what exactly went wrong.
#include <cstdint>
#include <string_view>
#include <system_error>

namespace rill::net {

enum class status : std::uint16_t {
  ok = 0,
  // The frame itself (the connection is closed after the reply).
  malformed_frame = 1,
  frame_too_large = 2,
  // The request.
  unknown_api = 3,
  unsupported_version = 4,
  bad_header = 5,       // the protobuf header does not parse, or lacks a required field
  unsupported = 6,      // a reserved API (login) or option not built yet
  invalid_name = 10,    // names are 1-255 bytes of [A-Za-z0-9._-]
  invalid_config = 11,  // a topic setting out of range (the message names it)
  limit_exceeded = 12,  // the request would pass a server limit (the message names its key and value)
  stream_not_found = 20,
  topic_not_found = 21,
  partition_not_found = 22,
  already_exists = 23,
  group_not_found = 24,
  invalid_batch = 30,
  crc_mismatch = 31,
  batch_too_large = 32,
  unsupported_compression = 33,
  sequence_gap = 34,             // an idempotent producer skipped a sequence number
  producer_fenced = 35,          // an older producer epoch
  duplicate_sequence = 36,       // a retry of a batch written long ago (older than the 5 the partition remembers)
  invalid_producer_fields = 37,  // producer id, epoch, base sequence neither all -1 nor id, epoch, sequence >= 0
  unknown_producer_id = 38,      // a producer this partition does not know starts at a sequence other than 0
  unsupported_attributes = 39,   // the transactional (bit 4) or control (bit 5) attribute: rill takes neither
  offset_out_of_range = 40,
  // Consumer groups (docs/consumer-groups.md).
  unknown_member = 60,     // not (or no longer) a member of the group: join again
  stale_generation = 61,   // the request carries an old generation: heartbeat for the current assignment
  not_owner = 62,          // the partition is not (or not yet, or no longer) this member's
  offset_regression = 63,  // a commit below the group's committed offset
  group_full = 64,         // the group has as many members as it takes
  group_not_empty = 65,    // an offset reset while the group has members
  // Retriable.
  overloaded = 100,   // back-pressure: try again shortly
  unavailable = 101,  // the server is starting or stopping
  timeout = 102,
  // Another node of the cluster serves this topic: the reply's ErrorReply.primary_address names its client address
  // (when it announced one), and the client library goes there.
  not_primary = 103,
  // The server.
  storage_error = 200,     // an I/O error (the message has the file and errno)
  partition_fenced = 201,  // a storage failure fences the partition: writes fail until it recovers (by itself)
  disk_full = 202,         // the disk is full: the request was not written (a consumer group's change may stay
                           // applied in memory and be written later); retry once space is freed
  internal_error = 255,
};

[[nodiscard]] constexpr bool is_retriable(status s) noexcept {
  const auto v = static_cast<std::uint16_t>(s);
  return v >= 100 && v < 200;
}

[[nodiscard]] std::string_view to_string(status s) noexcept;

// Statuses double as error codes, so that layers above storage (metadata, partitions, connections) return
// rill::error values that map straight to a reply status.
const std::error_category& status_category() noexcept;
inline std::error_code make_error_code(status s) noexcept {
  return {static_cast<int>(s), status_category()};
}

// The reply status for any rill error: a status-category code as is, storage and config errors mapped, anything
// else internal_error.
status status_of(const std::error_code& code) noexcept;

}  // namespace rill::net

template <>
struct std::is_error_code_enum<rill::net::status> : std::true_type {};
