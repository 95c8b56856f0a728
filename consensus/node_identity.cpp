// node_identity: <data>/identity and the judgement of a start or a format against the configuration (see header).
#include "consensus/node_identity.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "base/assert.h"
#include "base/endian.h"
#include "config/limits.h"
#include "consensus/types.h"
#include "storage/atomic_file.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::consensus {
namespace {
using storage::errc;
using storage::make_unexpected;

constexpr char magic[8] = {'R', 'I', 'L', 'L', 'N', 'O', 'D', 'E'};
constexpr std::uint32_t version = 1;
constexpr std::uint32_t flag_recovering = 1;
constexpr std::uint32_t flag_topics_lost_through = 2;
constexpr std::uint64_t checksum_domain = 6;  // (1..5 are taken: headers, bodies, superblock, checkpoints, beats)
constexpr std::size_t fixed_bytes = 8 + 4 + 4 + 8 + 8 + 4;
constexpr std::size_t checksum_bytes = 16;
constexpr std::uint64_t file_bytes_max = fixed_bytes + 8 * limits::cluster_members_limit + 8 + checksum_bytes;

bool valid(const node_identity& id) {
  if (id.cluster_id == 0 || id.node_id == 0 || id.members.size() > limits::cluster_members_limit) {
    return false;
  }
  for (std::size_t i = 1; i < id.members.size(); ++i) {
    if (id.members[i - 1] >= id.members[i]) {
      return false;
    }
  }
  return id.members.empty() || std::binary_search(id.members.begin(), id.members.end(), id.node_id);
}

rill::unexpected refused(std::string what) {
  return make_unexpected(errc::invalid_argument, std::move(what));
}

std::string nodes_text(const std::vector<std::uint64_t>& ids) {
  return fmt::format("{}", fmt::join(ids, ", "));
}
}  // namespace

std::vector<std::byte> encode(const node_identity& id) {
  RILL_ASSERT(valid(id), "an identity of cluster {} node {} with {} members", id.cluster_id, id.node_id,
              id.members.size());
  const std::size_t lost_bytes = id.topics_lost_through_ms ? 8 : 0;
  std::vector<std::byte> out(fixed_bytes + 8 * id.members.size() + lost_bytes);
  std::memcpy(out.data(), magic, sizeof magic);
  store_le<std::uint32_t>(out.data() + 8, version);
  store_le<std::uint32_t>(out.data() + 12, (id.recovering ? flag_recovering : 0) |
                                               (id.topics_lost_through_ms ? flag_topics_lost_through : 0));
  store_le<std::uint64_t>(out.data() + 16, id.cluster_id);
  store_le<std::uint64_t>(out.data() + 24, id.node_id);
  store_le<std::uint32_t>(out.data() + 32, static_cast<std::uint32_t>(id.members.size()));
  for (std::size_t i = 0; i < id.members.size(); ++i) {
    store_le<std::uint64_t>(out.data() + fixed_bytes + 8 * i, id.members[i]);
  }
  if (id.topics_lost_through_ms) {
    store_le<std::uint64_t>(out.data() + fixed_bytes + 8 * id.members.size(), *id.topics_lost_through_ms);
  }
  const checksum_t c = checksum_of(out, checksum_domain);
  out.resize(out.size() + checksum_bytes);
  store_le<std::uint64_t>(out.data() + out.size() - 16, c.low);
  store_le<std::uint64_t>(out.data() + out.size() - 8, c.high);
  RILL_ASSERT(out.size() <= file_bytes_max);
  return out;
}

expected<node_identity> decode_node_identity(std::span<const std::byte> bytes) {
  if (bytes.size() < fixed_bytes + checksum_bytes || bytes.size() > file_bytes_max) {
    return make_unexpected(errc::corrupt_data, fmt::format("identity of {} bytes", bytes.size()));
  }
  if (std::memcmp(bytes.data(), magic, sizeof magic) != 0) {
    return make_unexpected(errc::corrupt_data, "identity: not a rill node identity (magic)");
  }
  const auto body = bytes.first(bytes.size() - checksum_bytes);
  const checksum_t c = checksum_of(body, checksum_domain);
  if (c.low != load_le<std::uint64_t>(bytes.data() + body.size()) ||
      c.high != load_le<std::uint64_t>(bytes.data() + body.size() + 8)) {
    return make_unexpected(errc::corrupt_data, "identity: checksum mismatch");
  }
  if (const auto v = load_le<std::uint32_t>(bytes.data() + 8); v != version) {
    return make_unexpected(errc::corrupt_data, fmt::format("identity: version {}, this build reads {}", v, version));
  }
  node_identity id;
  const auto flags = load_le<std::uint32_t>(bytes.data() + 12);
  id.recovering = (flags & flag_recovering) != 0;
  id.cluster_id = load_le<std::uint64_t>(bytes.data() + 16);
  id.node_id = load_le<std::uint64_t>(bytes.data() + 24);
  const auto members = load_le<std::uint32_t>(bytes.data() + 32);
  const std::size_t lost_bytes = (flags & flag_topics_lost_through) != 0 ? 8 : 0;
  if ((flags & ~(flag_recovering | flag_topics_lost_through)) != 0 || members > limits::cluster_members_limit ||
      body.size() != fixed_bytes + 8 * std::size_t{members} + lost_bytes) {
    return make_unexpected(errc::corrupt_data, "identity: unknown flags or a wrong member count");
  }
  for (std::uint32_t i = 0; i < members; ++i) {
    id.members.push_back(load_le<std::uint64_t>(bytes.data() + fixed_bytes + 8 * i));
  }
  if (lost_bytes != 0) {
    id.topics_lost_through_ms = load_le<std::uint64_t>(bytes.data() + fixed_bytes + 8 * std::size_t{members});
  }
  if (!valid(id)) {
    return make_unexpected(errc::corrupt_data, "identity: a cluster id, node id or members list out of range");
  }
  return id;
}

task<expected<std::optional<node_identity>>> read_node_identity(storage::io::engine& e, std::string data_dir) {
  const std::string path = storage::join_path(data_dir, identity_file_name);
  RILL_CO_TRY(bytes, co_await storage::read_whole_file(e, path, file_bytes_max));
  if (!bytes) {
    co_return std::optional<node_identity>{};
  }
  auto id = decode_node_identity(*bytes);
  if (!id) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: {}", path, id.error().detail()));
  }
  co_return std::optional<node_identity>{std::move(*id)};
}

task<expected<void>> write_node_identity(storage::io::engine& e, std::string data_dir, node_identity id) {
  co_return co_await storage::write_file_atomic(e, std::move(data_dir), identity_file_name, encode(id));
}

expected<identity_verdict> judge_identity(const std::optional<node_identity>& found, const wanted_identity& wanted,
                                          bool directory_has_data, std::uint64_t new_cluster_id) {
  std::vector<std::uint64_t> members = wanted.members;
  std::sort(members.begin(), members.end());
  identity_verdict v;
  if (!found) {
    if (!members.empty()) {
      return refused(fmt::format(
          "this data directory {} no identity: a member of a cluster starts only from a directory formatted for "
          "it. Run `rilld format` with this configuration for a node of a new cluster, or `rilld recover` for a "
          "member whose data was lost",
          directory_has_data ? "holds data but" : "has"));
    }
    RILL_ASSERT(new_cluster_id != 0);
    v.use = node_identity{
        wanted.cluster_id != 0 ? wanted.cluster_id : new_cluster_id, wanted.node_id, {}, false, std::nullopt};
    v.format_alone = true;
    return v;
  }
  if (wanted.cluster_id != 0 && wanted.cluster_id != found->cluster_id) {
    return refused(fmt::format("cluster.id = {}: this data directory belongs to cluster {}", wanted.cluster_id,
                               found->cluster_id));
  }
  if (members.empty() && !found->members.empty()) {
    return refused(
        fmt::format("cluster.members is empty (a node alone), but this data directory is node {} of the "
                    "cluster of nodes {}: configure its members",
                    found->node_id, nodes_text(found->members)));
  }
  if (!members.empty() && members != found->members) {
    return refused(
        fmt::format("cluster.members names nodes {}; this data directory was formatted for a cluster of "
                    "nodes {}",
                    nodes_text(members), found->members.empty() ? "(none: a node alone)" : nodes_text(found->members)));
  }
  if (!members.empty() && wanted.node_id != found->node_id) {
    return refused(
        fmt::format("cluster.node_id = {}: this data directory is node {}'s", wanted.node_id, found->node_id));
  }
  v.use = *found;
  return v;
}

expected<node_identity> identity_to_format(const std::optional<node_identity>& found, const wanted_identity& wanted,
                                           bool directory_has_data, bool recover, std::uint64_t new_cluster_id) {
  const char* command = recover ? "rilld recover" : "rilld format";
  if (found) {
    return refused(
        fmt::format("{}: this data directory is already node {} of cluster {}; a formatted directory is "
                    "never formatted again (to replace a node that lost its data, start from an empty "
                    "directory with rilld recover)",
                    command, found->node_id, found->cluster_id));
  }
  if (directory_has_data) {
    return refused(
        fmt::format("{}: this data directory holds data but no identity (a node alone's, from a build "
                    "before identities): start it as a node alone, or use an empty directory",
                    command));
  }
  std::vector<std::uint64_t> members = wanted.members;
  std::sort(members.begin(), members.end());
  if (recover && members.empty()) {
    return refused("rilld recover: cluster.members is empty; a node alone has no peers to recover its data from");
  }
  if (recover && wanted.cluster_id == 0) {
    return refused("rilld recover: cluster.id = 0; name the cluster the node rejoins");
  }
  RILL_ASSERT(new_cluster_id != 0);
  node_identity id{wanted.cluster_id != 0 ? wanted.cluster_id : new_cluster_id, wanted.node_id, members, recover,
                   std::nullopt};
  RILL_ASSERT(members.empty() || std::binary_search(members.begin(), members.end(), id.node_id),
              "the config builder checks that the members list this node");
  return id;
}

}  // namespace rill::consensus
