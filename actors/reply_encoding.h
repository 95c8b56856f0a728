#pragma once
// reply_encoding: the client-protocol reply frames the connection actor sends, built from what the other actors
// answer (plain values, so they are tested without CAF). Each returns one whole frame (net/frame.h).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/status.h"
#include "storage/partition_log.h"

namespace rill::actors {

// The version ping and stats report.
inline constexpr const char* server_version = "rill 0.1.0";

std::vector<std::byte> error_reply_frame(std::uint32_t correlation, net::status st, const std::string& message);
// An ok reply whose header another actor serialized (metadata and group replies).
std::vector<std::byte> serialized_reply_frame(std::uint32_t correlation, const std::string& header);
std::vector<std::byte> ping_reply_frame(std::uint32_t correlation, timestamp_ms_t server_time);
// ProduceReply: the partition chosen, each batch's base offset, the append's timestamp (0 when none).
std::vector<std::byte> produce_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                           const std::vector<std::int64_t>& base_offsets, std::int64_t timestamp_ms);
// PollReply with the read's batches after the header, as read from the log.
std::vector<std::byte> poll_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                        const storage::read_result& data);
// OffsetStoreReply (the previous offset) or OffsetGetReply (the stored one); the field is unset without one.
std::vector<std::byte> offset_reply_frame(std::uint32_t correlation, bool store, std::optional<std::int64_t> offset);
// The metadata actor's serialized StatsReply with this server's open connections and version filled in.
std::string stats_reply_header(const std::string& header, std::uint32_t connections);

}  // namespace rill::actors
