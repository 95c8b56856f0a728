#pragma once
// Framing of the client protocol. All integers big-endian.
//
//   request:  u32 length | u32 correlation_id | u16 api | u16 version | u32 header_length | header | batches
//   reply:    u32 length | u32 correlation_id | u16 status | u32 header_length | header | batches
//
// `length` counts the bytes after itself. `header` is the protobuf message of the API (net/proto/rill.proto);
// `batches` are Kafka RecordBatch v2 bytes, back to back, exactly as stored, so a produce is validated in place and
// a poll is served from the file without re-encoding.
//
// A frame whose length exceeds the configured maximum is refused from its first four bytes, before anything is
// buffered for it; a frame that does not parse gets an error reply and its connection is closed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "net/status.h"

namespace google::protobuf {
class MessageLite;
}

namespace rill::net {

enum class api : std::uint16_t {
  ping = 1,
  login = 2,
  stream_create = 10,
  stream_get = 11,
  stream_list = 12,
  stream_update = 13,
  stream_delete = 14,
  topic_create = 20,
  topic_get = 21,
  topic_list = 22,
  topic_update = 23,
  topic_delete = 24,
  partitions_add = 25,
  partitions_delete = 26,
  produce = 30,
  poll = 31,
  offset_store = 40,
  offset_get = 41,
  stats = 50,
  group_create = 60,
  group_get = 61,
  group_list = 62,
  group_delete = 63,
  group_join = 64,
  group_leave = 65,
  group_heartbeat = 66,
  group_assignment = 67,
  group_commit = 68,
  group_offsets = 69,
  cluster_status = 80,
};

[[nodiscard]] std::string_view to_string(api a) noexcept;
// The api for a wire value, or nullopt for an unknown one.
[[nodiscard]] std::optional<api> api_from_wire(std::uint16_t v) noexcept;

inline constexpr std::uint16_t protocol_version = 1;
inline constexpr std::size_t request_prefix_bytes = 16;
inline constexpr std::size_t reply_prefix_bytes = 14;
inline constexpr std::size_t length_bytes = 4;

// Where a request needs the metadata to be, or where a reply was served (proto::MetadataPosition, appended to the
// header). Zero: none.
struct metadata_position {
  std::uint64_t cluster_id = 0;
  std::uint64_t op = 0;
  friend bool operator==(const metadata_position&, const metadata_position&) = default;
};
// What a header says for routing, read from its wire bytes without parsing the API's message: the position (fields
// 1000 and 1001) and fields 1 and 2 as encoded (the stream and topic Identifiers of every request that names a
// topic, rill.proto; views into `header`, empty when absent). All empty when the bytes do not parse.
struct header_scan {
  metadata_position position;
  std::span<const std::byte> stream;
  std::span<const std::byte> topic;
};
[[nodiscard]] header_scan scan_header(std::span<const std::byte> header);
// The position a header carries ({} when it carries none, or does not parse).
[[nodiscard]] inline metadata_position metadata_position_of(std::span<const std::byte> header) {
  return scan_header(header).position;
}

struct request_view {
  std::uint32_t correlation_id = 0;
  std::uint16_t api_wire = 0;
  std::uint16_t version = 0;
  std::span<const std::byte> header;
  std::span<const std::byte> batches;
};

struct reply_view {
  std::uint32_t correlation_id = 0;
  status st = status::ok;
  std::span<const std::byte> header;
  std::span<const std::byte> batches;
};

// How much of `buffered` the next frame takes: nullopt while fewer bytes than its length prefix says (or fewer
// than the prefix itself) have arrived, the whole frame size once they have. An error for a length above
// `frame_bytes_max` or below the smallest frame (`min_frame_bytes`, the prefix of the frame kind).
expected<std::optional<std::size_t>> next_frame_size(std::span<const std::byte> buffered, std::size_t min_frame_bytes,
                                                     std::uint64_t frame_bytes_max);

// Parse one whole frame (as sized by next_frame_size). Errors: the header length runs past the frame.
expected<request_view> parse_request(std::span<const std::byte> frame);
expected<reply_view> parse_reply(std::span<const std::byte> frame);

// Append one frame to `out`. `header` is serialized in place, `at` (when not zero) after it as part of the header;
// `batches` are copied after that.
void append_request(std::vector<std::byte>& out, std::uint32_t correlation_id, api a,
                    const google::protobuf::MessageLite& header, std::span<const std::byte> batches = {},
                    metadata_position at = {});
// The frame append_request writes, less its batches (its length counts them): the caller sends `batches` right
// after these bytes (one vectored send), so they are never copied into the frame.
void append_request_head(std::vector<std::byte>& out, std::uint32_t correlation_id, api a,
                         const google::protobuf::MessageLite& header, std::span<const std::byte> batches,
                         metadata_position at = {});
void append_reply(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                  const google::protobuf::MessageLite& header, std::span<const std::byte> batches = {},
                  metadata_position at = {});
// A reply whose header is already serialized.
void append_reply_raw(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                      std::span<const std::byte> header, std::span<const std::byte> batches = {},
                      metadata_position at = {});
// An error reply: status plus an ErrorReply header carrying `message`.
void append_error_reply(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                        const std::string& message, const std::string& primary_address = {}, metadata_position at = {});

}  // namespace rill::net
