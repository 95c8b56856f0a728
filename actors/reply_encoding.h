#pragma once
// reply_encoding: the client-protocol reply frames the connection actor sends, built from what the other actors
// answer (plain values, so they are tested without CAF). Each returns one whole frame (net/frame.h), its header
// carrying `at`: the metadata position the node served it at (read your writes, docs/protocol.md).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/frame.h"
#include "net/status.h"
#include "storage/partition_log.h"

namespace rill::actors {

// The version ping and stats report.
inline constexpr const char* server_version = "rill 0.1.0";

std::vector<std::byte> error_reply_frame(std::uint32_t correlation, net::status st, const std::string& message,
                                         const std::string& primary_address = {}, net::metadata_position at = {});

// What a client is told of an error: nothing that shows the server's files.
// - storage_error, partition_fenced and internal_error: messages from the server's own files and code (errno texts
//   and paths); the client gets a fixed text for the status.
// - any other message: each path that starts with `data_dir` (at the start of a word) up to the next space, quote,
//   comma, semicolon or bracket (a final '.' or ':' kept) is replaced by "<server path>".
// `redacted` says the message changed: the caller logs the original on the server.
struct client_error {
  std::string message;
  bool redacted = false;
};
client_error client_error_of(net::status st, const std::string& message, const std::string& data_dir);
// An ok reply whose header another actor serialized (metadata and group replies).
std::vector<std::byte> serialized_reply_frame(std::uint32_t correlation, const std::string& header,
                                              net::metadata_position at = {});
std::vector<std::byte> ping_reply_frame(std::uint32_t correlation, timestamp_ms_t server_time,
                                        net::metadata_position at = {});
// ProduceReply: the partition chosen, each batch's base offset, the append's timestamp (0 when none).
std::vector<std::byte> produce_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                           const std::vector<std::int64_t>& base_offsets, std::int64_t timestamp_ms,
                                           net::metadata_position at = {});
// PollReply with the read's batches after the header, as read from the log.
std::vector<std::byte> poll_reply_frame(std::uint32_t correlation, std::uint32_t partition_id,
                                        const storage::read_result& data, net::metadata_position at = {});
// OffsetStoreReply (the previous offset) or OffsetGetReply (the stored one); the field is unset without one.
std::vector<std::byte> offset_reply_frame(std::uint32_t correlation, bool store, std::optional<std::int64_t> offset,
                                          net::metadata_position at = {});
// The metadata actor's serialized StatsReply with this server's open connections and version filled in.
std::string stats_reply_header(const std::string& header, std::uint32_t connections);

}  // namespace rill::actors
