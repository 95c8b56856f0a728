#include "net/frame.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "base/assert.h"
#include "base/endian.h"
#include "config/errc.h"
#include "net/errc.h"
#include "net/proto/rill.pb.h"
#include "storage/errc.h"

namespace rill::net {

std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::ok:
      return "ok";
    case status::malformed_frame:
      return "malformed_frame";
    case status::frame_too_large:
      return "frame_too_large";
    case status::unknown_api:
      return "unknown_api";
    case status::unsupported_version:
      return "unsupported_version";
    case status::bad_header:
      return "bad_header";
    case status::unsupported:
      return "unsupported";
    case status::invalid_name:
      return "invalid_name";
    case status::invalid_config:
      return "invalid_config";
    case status::limit_exceeded:
      return "limit_exceeded";
    case status::stream_not_found:
      return "stream_not_found";
    case status::topic_not_found:
      return "topic_not_found";
    case status::partition_not_found:
      return "partition_not_found";
    case status::already_exists:
      return "already_exists";
    case status::invalid_batch:
      return "invalid_batch";
    case status::crc_mismatch:
      return "crc_mismatch";
    case status::batch_too_large:
      return "batch_too_large";
    case status::unsupported_compression:
      return "unsupported_compression";
    case status::sequence_gap:
      return "sequence_gap";
    case status::producer_fenced:
      return "producer_fenced";
    case status::duplicate_sequence:
      return "duplicate_sequence";
    case status::invalid_producer_fields:
      return "invalid_producer_fields";
    case status::unknown_producer_id:
      return "unknown_producer_id";
    case status::unsupported_attributes:
      return "unsupported_attributes";
    case status::offset_out_of_range:
      return "offset_out_of_range";
    case status::overloaded:
      return "overloaded";
    case status::unavailable:
      return "unavailable";
    case status::not_primary:
      return "not_primary";
    case status::timeout:
      return "timeout";
    case status::storage_error:
      return "storage_error";
    case status::partition_fenced:
      return "partition_fenced";
    case status::disk_full:
      return "disk_full";
    case status::internal_error:
      return "internal_error";
    case status::group_not_found:
      return "group_not_found";
    case status::unknown_member:
      return "unknown_member";
    case status::stale_generation:
      return "stale_generation";
    case status::not_owner:
      return "not_owner";
    case status::offset_regression:
      return "offset_regression";
    case status::group_full:
      return "group_full";
    case status::group_not_empty:
      return "group_not_empty";
  }
  return "unknown_status";
}

namespace {
class status_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rill.status"; }
  std::string message(int ev) const override { return std::string(to_string(static_cast<status>(ev))); }
};
}  // namespace

const std::error_category& status_category() noexcept {
  static const status_category_impl instance;
  return instance;
}

status status_of(const std::error_code& code) noexcept {
  if (!code) {
    return status::ok;
  }
  if (code.category() == status_category()) {
    return static_cast<status>(code.value());
  }
  if (code.category() == storage::storage_category()) {
    switch (static_cast<storage::errc>(code.value())) {
      case storage::errc::invalid_batch:
        return status::invalid_batch;
      case storage::errc::crc_mismatch:
        return status::crc_mismatch;
      case storage::errc::batch_too_large:
        return status::batch_too_large;
      case storage::errc::unsupported_compression:
        return status::unsupported_compression;
      case storage::errc::unsupported_attributes:
        return status::unsupported_attributes;
      case storage::errc::invalid_producer_fields:
        return status::invalid_producer_fields;
      case storage::errc::compression_error:
        return status::invalid_batch;
      case storage::errc::overloaded:
        return status::overloaded;
      case storage::errc::offset_out_of_range:
      case storage::errc::removed:  // (a replica's read, never a client's)
        return status::offset_out_of_range;
      case storage::errc::fenced:
        return status::partition_fenced;
      case storage::errc::closed:
      case storage::errc::superseded:  // (a replica's write, never a client's: retriable if it ever reached one)
      case storage::errc::unavailable:
        return status::unavailable;
      case storage::errc::invalid_argument:
        return status::bad_header;
      case storage::errc::no_space:
        return status::disk_full;
      case storage::errc::io_error:
      case storage::errc::corrupt_data:
      case storage::errc::not_found:
        return status::storage_error;
    }
  }
  if (code.category() == config::config_category()) {
    return status::invalid_config;
  }
  if (code.category() == net_category()) {
    switch (static_cast<errc>(code.value())) {
      case errc::frame_too_large:
        return status::frame_too_large;
      case errc::malformed_frame:
        return status::malformed_frame;
      case errc::bad_header:
        return status::bad_header;
      default:
        return status::internal_error;
    }
  }
  return status::internal_error;
}

std::string_view to_string(api a) noexcept {
  switch (a) {
    case api::ping:
      return "ping";
    case api::login:
      return "login";
    case api::stream_create:
      return "stream_create";
    case api::stream_get:
      return "stream_get";
    case api::stream_list:
      return "stream_list";
    case api::stream_update:
      return "stream_update";
    case api::stream_delete:
      return "stream_delete";
    case api::topic_create:
      return "topic_create";
    case api::topic_get:
      return "topic_get";
    case api::topic_list:
      return "topic_list";
    case api::topic_update:
      return "topic_update";
    case api::topic_delete:
      return "topic_delete";
    case api::partitions_add:
      return "partitions_add";
    case api::partitions_delete:
      return "partitions_delete";
    case api::produce:
      return "produce";
    case api::poll:
      return "poll";
    case api::offset_store:
      return "offset_store";
    case api::offset_get:
      return "offset_get";
    case api::stats:
      return "stats";
    case api::group_create:
      return "group_create";
    case api::group_get:
      return "group_get";
    case api::group_list:
      return "group_list";
    case api::group_delete:
      return "group_delete";
    case api::group_join:
      return "group_join";
    case api::group_leave:
      return "group_leave";
    case api::group_heartbeat:
      return "group_heartbeat";
    case api::group_assignment:
      return "group_assignment";
    case api::group_commit:
      return "group_commit";
    case api::group_offsets:
      return "group_offsets";
    case api::cluster_status:
      return "cluster_status";
  }
  return "unknown_api";
}

std::optional<api> api_from_wire(std::uint16_t v) noexcept {
  const auto a = static_cast<api>(v);
  return to_string(a) == "unknown_api" ? std::nullopt : std::optional<api>(a);
}

expected<std::optional<std::size_t>> next_frame_size(std::span<const std::byte> buffered, std::size_t min_frame_bytes,
                                                     std::uint64_t frame_bytes_max) {
  if (buffered.size() < length_bytes) {
    return std::optional<std::size_t>{};
  }
  const std::uint64_t total = std::uint64_t{load_be<std::uint32_t>(buffered.data())} + length_bytes;
  if (total > frame_bytes_max) {
    return unexpected(make_error_code(errc::frame_too_large),
                      fmt::format("a frame of {} bytes; the limit is {}", total, frame_bytes_max));
  }
  if (total < min_frame_bytes) {
    return unexpected(make_error_code(errc::malformed_frame),
                      fmt::format("a frame of {} bytes is shorter than its {}-byte prefix", total, min_frame_bytes));
  }
  if (buffered.size() < total) {
    return std::optional<std::size_t>{};
  }
  return std::optional<std::size_t>{static_cast<std::size_t>(total)};
}

namespace {
expected<std::pair<std::span<const std::byte>, std::span<const std::byte>>> split(std::span<const std::byte> frame,
                                                                                  std::size_t prefix) {
  const std::uint32_t header_length = load_be<std::uint32_t>(frame.data() + prefix - 4);
  if (header_length > frame.size() - prefix) {
    return unexpected(make_error_code(errc::malformed_frame),
                      fmt::format("header length {} runs past the {}-byte frame", header_length, frame.size()));
  }
  return std::make_pair(frame.subspan(prefix, header_length), frame.subspan(prefix + header_length));
}

proto::MetadataPosition position_message(metadata_position at) {
  proto::MetadataPosition m;
  m.set_metadata_op(at.op);
  m.set_cluster_id(at.cluster_id);
  return m;
}

// One frame: the length, `prefix_tail`, the header length, the header (serialized by `write_header`, then the
// position), the batches (`with_batches` false: all but the batches, which the caller sends after).
template <class WriteHeader>
void append_frame(std::vector<std::byte>& out, std::span<const std::byte> prefix_tail, std::size_t header_length,
                  WriteHeader write_header, metadata_position at, std::span<const std::byte> batches,
                  bool with_batches = true) {
  const proto::MetadataPosition position = position_message(at);
  const std::size_t position_length = position.ByteSizeLong();  // 0 when both are zero
  const std::size_t start = out.size();
  const std::size_t head = length_bytes + prefix_tail.size() + 4 + header_length + position_length;
  const std::size_t total = head + batches.size();
  if (const std::size_t needed = start + (with_batches ? total : head); out.capacity() < needed) {
    out.reserve(std::max(needed, 2 * out.capacity()));  // geometric, as resize would: frames are appended in runs
  }
  out.resize(start + head);  // (the batches are inserted below: resize would zero-fill them first)
  std::byte* p = out.data() + start;
  store_be<std::uint32_t>(p, static_cast<std::uint32_t>(total - length_bytes));
  p += length_bytes;
  std::memcpy(p, prefix_tail.data(), prefix_tail.size());
  p += prefix_tail.size();
  store_be<std::uint32_t>(p, static_cast<std::uint32_t>(header_length + position_length));
  p += 4;
  write_header(p);
  p += header_length;
  if (position_length > 0) {
    position.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(p));
    p += position_length;
  }
  RILL_ASSERT(p == out.data() + start + head);
  if (with_batches) {
    out.insert(out.end(), batches.begin(), batches.end());
  }
}

void append_message_frame(std::vector<std::byte>& out, std::span<const std::byte> prefix_tail,
                          const google::protobuf::MessageLite& header, std::span<const std::byte> batches,
                          metadata_position at, bool with_batches = true) {
  append_frame(
      out, prefix_tail, header.ByteSizeLong(),
      [&](std::byte* p) { header.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(p)); }, at, batches,
      with_batches);
}

void request_prefix_tail(std::byte (&tail)[8], std::uint32_t correlation_id, api a) {
  store_be<std::uint32_t>(tail, correlation_id);
  store_be<std::uint16_t>(tail + 4, static_cast<std::uint16_t>(a));
  store_be<std::uint16_t>(tail + 6, protocol_version);
}
}  // namespace

expected<request_view> parse_request(std::span<const std::byte> frame) {
  RILL_ASSERT(frame.size() >= request_prefix_bytes);
  request_view v;
  v.correlation_id = load_be<std::uint32_t>(frame.data() + 4);
  v.api_wire = load_be<std::uint16_t>(frame.data() + 8);
  v.version = load_be<std::uint16_t>(frame.data() + 10);
  RILL_TRY(parts, split(frame, request_prefix_bytes));
  v.header = parts.first;
  v.batches = parts.second;
  return v;
}

expected<reply_view> parse_reply(std::span<const std::byte> frame) {
  RILL_ASSERT(frame.size() >= reply_prefix_bytes);
  reply_view v;
  v.correlation_id = load_be<std::uint32_t>(frame.data() + 4);
  v.st = static_cast<status>(load_be<std::uint16_t>(frame.data() + 8));
  RILL_TRY(parts, split(frame, reply_prefix_bytes));
  v.header = parts.first;
  v.batches = parts.second;
  return v;
}

header_scan scan_header(std::span<const std::byte> header) {
  // A walk over the header's fields, skipping the others: parsing it as a MetadataPosition would keep every other
  // field as unknown bytes, a copy per request.
  using wire = google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(header.data()),
                                            static_cast<int>(header.size()));
  header_scan out;
  while (const std::uint32_t tag = in.ReadTag()) {
    const std::uint32_t field = wire::GetTagFieldNumber(tag);
    const auto type = wire::GetTagWireType(tag);
    if ((field == proto::MetadataPosition::kMetadataOpFieldNumber ||
         field == proto::MetadataPosition::kClusterIdFieldNumber) &&
        type == wire::WIRETYPE_VARINT) {
      std::uint64_t v = 0;
      if (!in.ReadVarint64(&v)) {
        return {};
      }
      (field == proto::MetadataPosition::kMetadataOpFieldNumber ? out.position.op : out.position.cluster_id) = v;
    } else if ((field == 1 || field == 2) && type == wire::WIRETYPE_LENGTH_DELIMITED) {
      std::uint32_t length = 0;
      if (!in.ReadVarint32(&length)) {
        return {};
      }
      const auto at = static_cast<std::size_t>(in.CurrentPosition());
      if (length > header.size() - at || !in.Skip(static_cast<int>(length))) {
        return {};
      }
      (field == 1 ? out.stream : out.topic) = header.subspan(at, length);
    } else if (!wire::SkipField(&in, tag)) {
      return {};
    }
  }
  if (!in.ConsumedEntireMessage()) {
    return {};  // it does not parse (a bad tag or varint)
  }
  return out;
}

void append_request(std::vector<std::byte>& out, std::uint32_t correlation_id, api a,
                    const google::protobuf::MessageLite& header, std::span<const std::byte> batches,
                    metadata_position at) {
  std::byte tail[8];
  request_prefix_tail(tail, correlation_id, a);
  append_message_frame(out, tail, header, batches, at);
}

void append_request_head(std::vector<std::byte>& out, std::uint32_t correlation_id, api a,
                         const google::protobuf::MessageLite& header, std::span<const std::byte> batches,
                         metadata_position at) {
  std::byte tail[8];
  request_prefix_tail(tail, correlation_id, a);
  append_message_frame(out, tail, header, batches, at, false);
}

void append_reply(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                  const google::protobuf::MessageLite& header, std::span<const std::byte> batches,
                  metadata_position at) {
  std::byte tail[6];
  store_be<std::uint32_t>(tail, correlation_id);
  store_be<std::uint16_t>(tail + 4, static_cast<std::uint16_t>(st));
  append_message_frame(out, tail, header, batches, at);
}

void append_reply_raw(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                      std::span<const std::byte> header, std::span<const std::byte> batches, metadata_position at) {
  std::byte tail[6];
  store_be<std::uint32_t>(tail, correlation_id);
  store_be<std::uint16_t>(tail + 4, static_cast<std::uint16_t>(st));
  append_frame(
      out, tail, header.size(),
      [&](std::byte* p) {
        if (!header.empty()) {
          std::memcpy(p, header.data(), header.size());
        }
      },
      at, batches);
}

void append_error_reply(std::vector<std::byte>& out, std::uint32_t correlation_id, status st,
                        const std::string& message, const std::string& primary_address, metadata_position at) {
  proto::ErrorReply e;
  e.set_message(message);
  if (!primary_address.empty()) {
    e.set_primary_address(primary_address);
  }
  append_reply(out, correlation_id, st, e, {}, at);
}

}  // namespace rill::net
