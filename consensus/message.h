#pragma once
// VSR messages: a fixed 128-byte header, then a body whose meaning depends on the command. The same encoding goes
// over the network and into the journal (a prepare is stored exactly as it was sent).
//
// Header layout (little-endian, offsets in bytes):
//     0 checksum        16  XXH3-128 of bytes 16..127 (domain 1)
//    16 checksum_body   16  XXH3-128 of the body (domain 2)
//    32 parent          16  prepare: the previous op's header checksum (the hash chain);
//                           commit: the checksum of the committed op's header
//    48 context         16  prepare_ok: the checksum of the prepare acknowledged; request_prepare: the one wanted;
//                           reply: the checksum of the prepare that produced it; request/prepare: the session
//                           (session_of: the op that registered it, low 8 bytes; 0: not stamped);
//                           sync: the checkpoint's checksum; request_sync: the one being fetched (zero: any)
//    64 cluster          8
//    72 client           8  request/prepare/reply: the client id
//    80 request          8  request/prepare/reply: the client's request number; sync: the checkpoint's size;
//                           start_view, recovery_response answering a probe: the highest incarnation of the prober
//                           the sender knew; start_view_change: a mark (replica::hand_over_mark, in_view_mark)
//    88 op               8  prepare/prepare_ok/reply: the op; do_view_change/start_view: the highest op;
//                           request_headers: the lowest op wanted; commit: the commit number;
//                           request_sync: the sender's applied op; sync: the checkpoint's op
//    96 commit           8  the sender's commit number (prepare, do_view_change, start_view, commit);
//                           request_headers: the highest op wanted
//   104 timestamp        8  prepare: the primary's tick count; commit: a heartbeat sequence (dedupe);
//                           request_start_view, start_view, recovery_response: a recovering replica's nonce (or 0);
//                           prepare_ok, start_view_change, do_view_change: the sender's incarnation (vsr_state);
//                           request_sync: the byte offset wanted; sync: the chunk's byte offset
//   112 view             4
//   116 log_view         4  do_view_change, start_view_change: the sender's last normal view
//   120 size             4  header + body bytes
//   124 command          1
//   125 replica          1  the sender (for prepares: the primary that created it)
//   126 operation        1  request/prepare: what the state machine does with the body (operation_*)
//   127 reserved         1  zero
//
// Invariants: size == 128 + body size; a decoded message has both checksums verified; reserved is zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "consensus/types.h"

namespace rill::consensus {

enum class command : std::uint8_t {
  reserved = 0,
  request = 1,             // client -> primary
  prepare = 2,             // primary -> backups (and what the journal stores)
  prepare_ok = 3,          // backup -> primary, once the prepare is durable
  reply = 4,               // primary -> client
  commit = 5,              // primary -> backups: heartbeat with the commit number
  start_view_change = 6,   // a vote to leave the current view
  do_view_change = 7,      // replica -> new primary: its log suffix
  start_view = 8,          // new primary -> all: the log of the new view
  request_start_view = 9,  // a replica that missed start_view asks the primary for it
  request_headers = 10,    // repair: headers for ops [op, commit]
  headers = 11,            // repair: the headers asked for (body: packed headers)
  request_prepare = 12,    // repair: the prepare at op with checksum context
  eviction = 13,           // primary -> client: its session was evicted (or never existed)
  request_sync = 14,       // state transfer: a replica that cannot repair its way forward asks for a checkpoint
  sync = 15,               // state transfer: a chunk of a checkpoint (body: its op's 128-byte header, then the bytes)
  recovery_response = 16,  // to a replica recovering a lost disk: the responder's durable view (timestamp: the nonce)
  // A partition group's state transfer of its log (partition_group.h), between the hosts; the replica ignores them.
  request_segments = 17,  // committed batches from offset `commit` on, of ops <= `op` (timestamp: the nonce)
  segments = 18,          // the batches asked for (body: their .meta payloads, then the batches) or why not
  // backup -> primary: a commit heartbeat heard (timestamp: its sequence), for the primary's reads (issue 38, finding
  // 5: replica::quorum_heard_tick). Sent only by replicas that send their own heartbeats.
  commit_ok = 19,
};
inline constexpr std::uint8_t command_max = 19;

// Operations the replica itself interprets; the state machine's own start at operation_user_min.
inline constexpr std::uint8_t operation_root = 0;      // op 0 only
inline constexpr std::uint8_t operation_register = 1;  // opens a client session (request number 0)
inline constexpr std::uint8_t operation_user_min = 8;

[[nodiscard]] std::string_view to_string(command c) noexcept;

struct header;
// A request's (and its prepare's) session: the op whose register opened it, as the register's reply names it (its
// op). 0: not stamped (a client or a journal of an earlier build): the replica does not check it.
[[nodiscard]] std::uint64_t session_of(const header& h) noexcept;
void set_session(header& h, std::uint64_t session) noexcept;

struct header {
  checksum_t checksum;
  checksum_t checksum_body;
  checksum_t parent;
  checksum_t context;
  std::uint64_t cluster = 0;
  std::uint64_t client = 0;
  std::uint64_t request = 0;
  std::uint64_t op = 0;
  std::uint64_t commit = 0;
  std::uint64_t timestamp = 0;
  std::uint32_t view = 0;
  std::uint32_t log_view = 0;
  std::uint32_t size = 0;
  command cmd = command::reserved;
  replica_t replica = 0;
  std::uint8_t operation = 0;

  static constexpr std::size_t encoded_size = 128;
  friend bool operator==(const header&, const header&) = default;
};

// A header plus its body. Bodies are shared: the journal, the pipeline and the network hold the same bytes.
struct message {
  header h;
  std::vector<std::byte> body;
};

// Sets size, checksum_body and checksum from the fields and the body. Call after the last field changes.
void seal(message& m);
// The checksum a header has once sealed (for headers that travel without a body, e.g. in start_view).
[[nodiscard]] checksum_t header_checksum(const header& h) noexcept;
// Whether `body` is the body `h` was sealed with (its size and checksum_body): for a body stored apart from its
// header (a partition group's batch).
[[nodiscard]] bool body_matches(const header& h, std::span<const std::byte> body) noexcept;

// Encoding. encode_header writes exactly 128 bytes.
void encode_header(const header& h, std::byte* out) noexcept;
[[nodiscard]] header decode_header_unchecked(const std::byte* in) noexcept;
[[nodiscard]] std::vector<std::byte> encode(const message& m);

// Decoding checks, in order: at least 128 bytes, the header checksum, a known command, reserved zero, size equal to
// the bytes given, then the body checksum. Errors (invalid_argument) say which check failed.
[[nodiscard]] expected<header> decode_header(std::span<const std::byte> bytes);
[[nodiscard]] expected<message> decode(std::span<const std::byte> bytes);

// Bodies made of headers (do_view_change, start_view, headers): each 128 bytes, each with its own checksum checked.
[[nodiscard]] std::vector<std::byte> encode_headers(std::span<const header> headers);
[[nodiscard]] expected<std::vector<header>> decode_headers(std::span<const std::byte> body);

// The header of op 0 for a cluster: the root of every hash chain.
[[nodiscard]] header root_header(std::uint64_t cluster);

}  // namespace rill::consensus
