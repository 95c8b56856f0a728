#pragma once
// peer_wire: the replica plane's bytes (docs/protocol.md, The replica plane). Nodes of a cluster talk over one TCP
// connection per node pair (network.replica_address). Each side first sends a hello, then frames; a host_transport
// (group_host.h) is what writes them, the peer's reader what takes them apart. Plain code: no socket here.
//
// hello, 64 bytes, integers little-endian:
//    0 magic "RILLPEER"        8
//    8 version u32 = 2          4
//   12 reserved (zero)          4
//   16 cluster id u64           8   every member's cluster.id
//   24 node id u64              8   the sender's cluster.node_id
//   32 members digest u64       8   members_digest(cluster.members): a node configured with another list is refused
//   40 incarnation u64          8   drawn at each start of the sender: the peer can tell a restart from a reconnect
//   48 reserved (zero)          8
//   56 checksum u64             8   XXH3-64 of bytes 0..55
//
// frame: a 16-byte head, then `length` payload bytes:
//    0 kind u8                  1   1: a VSR message of group `group`; 2: a node heartbeat (group 0)
//    1 reserved (zero)          3
//    4 length u32               4   payload bytes, at most the reader's payload_bytes_max
//    8 group u64                8
//   kind 1: the message exactly as encode(message) writes it: its header's checksum is checked before its size
//   field is believed, then size == length and the body's checksum. kind 2: node_heartbeat's own wire form. The
//   head itself has no checksum (TCP's covers the stream): a group damaged in it hands the message to another group,
//   whose replica refuses it (every group has its own cluster identity in its headers, group_host.h).
//
// Invariants: the reader never allocates more than payload_bytes_max + 16 bytes for one frame, whatever a length
// says; after the first bad byte it refuses everything (the connection is closed); frames come out in the order
// they were written.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "consensus/group_host.h"
#include "consensus/message.h"

namespace rill::consensus {

struct peer_hello {
  std::uint64_t cluster_id = 0;
  std::uint64_t node_id = 0;
  std::uint64_t members_digest = 0;
  std::uint64_t incarnation = 0;
  friend bool operator==(const peer_hello&, const peer_hello&) = default;
};

inline constexpr std::size_t peer_hello_bytes = 64;
inline constexpr std::size_t peer_frame_head_bytes = 16;

// A digest of a members list (node id and replica address of each, in node id order): two nodes with the same
// digest were configured with the same cluster.
struct peer_member {
  std::uint64_t node_id = 0;
  std::string address;  // HOST:PORT
};
[[nodiscard]] std::uint64_t members_digest(std::vector<peer_member> members);

[[nodiscard]] std::vector<std::byte> encode(const peer_hello& h);
// Errors (corrupt_data): short, magic, version, checksum, reserved bytes.
[[nodiscard]] expected<peer_hello> decode_peer_hello(std::span<const std::byte> bytes);
// What this node makes of a peer's hello, connecting to `expected_node` (0: an incoming connection, any member).
// Errors (invalid_argument) name the key that differs: cluster.id, cluster.members, or a node that is not a member
// (`members`: the configured members' ids).
[[nodiscard]] expected<void> check_peer_hello(const peer_hello& theirs, const peer_hello& ours,
                                              std::uint64_t expected_node, std::span<const std::uint64_t> members);

enum class peer_frame_kind : std::uint8_t { message = 1, heartbeat = 2 };

struct peer_frame {
  peer_frame_kind kind = peer_frame_kind::message;
  group_t group{0};
  message m;            // kind message
  node_heartbeat beat;  // kind heartbeat
};

[[nodiscard]] std::vector<std::byte> encode_frame(group_t group, const message& m);
[[nodiscard]] std::vector<std::byte> encode_frame(const node_heartbeat& beat);

// Takes a peer's byte stream (after its hello) apart into frames.
class peer_frame_reader {
 public:
  explicit peer_frame_reader(std::uint32_t payload_bytes_max);
  // Appends received bytes; the frames they complete, in order. An error (corrupt_data: a bad head, a length over
  // the maximum, a payload that does not decode) means the connection must be closed: every later call fails too.
  expected<std::vector<peer_frame>> feed(std::span<const std::byte> bytes);
  // Bytes held of a frame not yet complete (at most payload_bytes_max + the head).
  [[nodiscard]] std::size_t buffered() const noexcept { return buffer_.size(); }

 private:
  std::uint32_t payload_bytes_max_;
  std::vector<std::byte> buffer_;
  bool failed_ = false;
};

}  // namespace rill::consensus
