// reply_encoding: the reply frames, field by field as the connection actor built them inline before.
#include "actors/reply_encoding.h"

#include <algorithm>

#include "base/assert.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"

namespace rill::actors {
namespace {
template <class M>
std::vector<std::byte> ok_frame(std::uint32_t correlation, const M& m, net::metadata_position at,
                                std::span<const std::byte> batches = {}) {
  std::vector<std::byte> out;
  net::append_reply(out, correlation, net::status::ok, m, batches, at);
  return out;
}

std::uint64_t not_negative(std::int64_t v) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0));
}
}  // namespace

std::vector<std::byte> error_reply_frame(std::uint32_t correlation, net::status st, const std::string& message,
                                         const std::string& primary_address, net::metadata_position at) {
  std::vector<std::byte> out;
  net::append_error_reply(out, correlation, st, message, primary_address, at);
  return out;
}

client_error client_error_of(net::status st, const std::string& message, const std::string& data_dir) {
  switch (st) {
    case net::status::storage_error:
      return {"the server's storage failed (the server's log has the detail)", true};
    case net::status::partition_fenced:
      return {
          "a storage failure (a failed fsync, or a write that could not be undone) fences the partition: it refuses "
          "writes until it has recovered, which it does by itself once the cause is gone (the server's log has the "
          "detail)",
          true};
    case net::status::disk_full:
      return {
          "the server's disk is full: the request was not written; retry once space is freed (a delete frees it "
          "at once; the server's log names the file)",
          true};
    case net::status::internal_error:
      return {"internal error (the server's log has the detail)", true};
    default:
      break;
  }
  client_error out{message, false};
  if (data_dir.empty()) {
    return out;
  }
  constexpr std::string_view shown = "<server path>";
  constexpr std::string_view separators = " \t\n,;'\"()";
  for (auto at = out.message.find(data_dir); at != std::string::npos; at = out.message.find(data_dir, at)) {
    if (at > 0 && separators.find(out.message[at - 1]) == std::string_view::npos) {
      at += 1;  // inside a word ("metadata" for a data_dir "data"): not a path
      continue;
    }
    auto end = out.message.find_first_of(separators, at + data_dir.size());
    end = end == std::string::npos ? out.message.size() : end;
    // A path that ends a sentence or a clause keeps its full stop or colon.
    while (end > at + data_dir.size() && (out.message[end - 1] == '.' || out.message[end - 1] == ':')) {
      --end;
    }
    out.message.replace(at, end - at, shown);
    at += shown.size();
    out.redacted = true;
  }
  return out;
}

std::vector<std::byte> serialized_reply_frame(std::uint32_t correlation, const std::string& header,
                                              net::metadata_position at) {
  std::vector<std::byte> out;
  net::append_reply_raw(out, correlation, net::status::ok,
                        std::span<const std::byte>(reinterpret_cast<const std::byte*>(header.data()), header.size()),
                        {}, at);
  return out;
}

std::vector<std::byte> ping_reply_frame(std::uint32_t correlation, timestamp_ms_t server_time,
                                        net::metadata_position at) {
  proto::PingReply r;
  r.set_server_time_ms(static_cast<std::uint64_t>(server_time.value()));
  r.set_version(server_version);
  return ok_frame(correlation, r, at);
}

std::vector<std::byte> produce_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                           const std::vector<std::int64_t>& base_offsets, std::int64_t timestamp_ms,
                                           net::metadata_position at) {
  proto::ProduceReply out;
  out.set_partition_id(partition_id);
  for (auto o : base_offsets) {
    out.add_base_offsets(static_cast<std::uint64_t>(o));
  }
  out.set_timestamp_ms(not_negative(timestamp_ms));
  return ok_frame(correlation, out, at);
}

std::vector<std::byte> poll_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                        const storage::read_result& data, net::metadata_position at) {
  proto::PollReply out;
  out.set_partition_id(partition_id);
  out.set_first_offset(not_negative(data.first_offset.value()));
  out.set_next_offset(static_cast<std::uint64_t>(data.next_offset.value()));
  out.set_high_watermark(static_cast<std::uint64_t>(data.high_watermark.value()));
  out.set_log_start(static_cast<std::uint64_t>(data.log_start.value()));
  out.set_batches(data.batches);
  out.set_records(data.records);
  out.set_start_offset(not_negative(data.requested.value()));
  const auto bytes = data.bytes ? data.bytes.span() : std::span<const std::byte>{};
  return ok_frame(correlation, out, at, bytes);
}

std::vector<std::byte> offset_reply_frame(std::uint32_t correlation, bool store, std::optional<std::int64_t> offset,
                                          net::metadata_position at) {
  if (store) {
    proto::OffsetStoreReply out;
    if (offset) {
      out.set_previous(static_cast<std::uint64_t>(*offset));
    }
    return ok_frame(correlation, out, at);
  }
  proto::OffsetGetReply out;
  if (offset) {
    out.set_offset(static_cast<std::uint64_t>(*offset));
  }
  return ok_frame(correlation, out, at);
}

std::string stats_reply_header(const std::string& header, std::uint32_t connections) {
  proto::StatsReply s;
  s.ParseFromString(header);
  s.set_connections(connections);
  s.set_version(server_version);
  return s.SerializeAsString();
}

}  // namespace rill::actors
