#pragma once
// node_identity: which cluster a data directory belongs to and which node it is, kept in <data>/identity. An empty
// directory cannot tell a new node from one that lost its disk, so a member of a cluster is formatted explicitly:
// `rilld format` (a node of a new cluster) or `rilld recover` (a member whose data was lost: it votes for nothing
// until it has caught up, docs/consensus.md, Recovery of a lost disk). A node alone formats itself at its first start.
// Every later start compares the configuration with the identity and refuses another cluster, another node id or
// another members list, naming the key.
//
// File format (integers little-endian), replaced atomically (storage::write_file_atomic):
//   magic "RILLNODE" (8) | version u32 = 1 | flags u32 (bit 0: formatted to recover; bit 1: topics_lost_through_ms
//   follows the members) | cluster id u64 | node id u64 | members u32 | member node ids, u64 each, ascending |
//   [topics_lost_through_ms u64] | XXH3-128 of everything before it (16, checksum domain 6)
//
// Invariants: a decoded identity has a non-zero cluster id and node id, at most limits::cluster_members_limit
// members in ascending order without repeats, and names itself among them when it has any; decode() refuses
// everything else, and encode() asserts it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "storage/io/engine.h"

namespace rill::consensus {

struct node_identity {
  std::uint64_t cluster_id = 0;
  std::uint64_t node_id = 0;
  std::vector<std::uint64_t> members;  // ascending; empty: a node alone
  bool recovering = false;             // formatted by `rilld recover`
  // A node formatted by `rilld recover`: the partition replicas of topics created at or before this time (the
  // metadata's clock, ms) may have held data on the lost disk, so each starts recovering when its files are created
  // here (docs/replication.md). Unset until the node has seen the whole committed metadata once (a barrier): until
  // then every replica it creates starts recovering. Written by the node itself, never by a format.
  std::optional<std::uint64_t> topics_lost_through_ms;

  friend bool operator==(const node_identity&, const node_identity&) = default;
};

inline constexpr const char* identity_file_name = "identity";

[[nodiscard]] std::vector<std::byte> encode(const node_identity& id);
// Errors: corrupt_data naming what is wrong (size, magic, version, checksum, a field out of range).
[[nodiscard]] expected<node_identity> decode_node_identity(std::span<const std::byte> bytes);

// <data_dir>/identity, or nullopt when there is none. Errors: the file's (corrupt_data, io_error).
task<expected<std::optional<node_identity>>> read_node_identity(storage::io::engine& e, std::string data_dir);
// Writes it atomically and durably (the directory must exist).
task<expected<void>> write_node_identity(storage::io::engine& e, std::string data_dir, node_identity id);

// What a configuration asks of a data directory.
struct wanted_identity {
  std::uint64_t cluster_id = 0;  // 0: not given
  std::uint64_t node_id = 0;
  std::vector<std::uint64_t> members;  // the configured members' ids, any order; empty: a node alone
};

// A start's verdict on what it found. An identity that matches (or a node alone with none yet: `format_alone`) is
// fine; everything else is an error (invalid_argument) that names the key, the value and what to do.
struct identity_verdict {
  node_identity use;          // the identity to start with
  bool format_alone = false;  // none yet, and the node is alone: write `use` before anything else
};
[[nodiscard]] expected<identity_verdict> judge_identity(const std::optional<node_identity>& found,
                                                        const wanted_identity& wanted, bool directory_has_data,
                                                        std::uint64_t new_cluster_id);

// What `rilld format` (recover = false) or `rilld recover` (recover = true) writes into a directory, or why it may
// not: a directory with an identity is never formatted again, and one holding data without an identity is not
// taken over; `rilld recover` needs members (a node alone has nobody to recover from).
[[nodiscard]] expected<node_identity> identity_to_format(const std::optional<node_identity>& found,
                                                         const wanted_identity& wanted, bool directory_has_data,
                                                         bool recover, std::uint64_t new_cluster_id);

}  // namespace rill::consensus
