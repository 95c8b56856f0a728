#include "actors/metadata_state.h"

#include <murmurhash.h>

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "config/limits.h"
#include "net/status.h"

namespace rill::actors {
namespace {

rill::unexpected fail(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

std::string describe(const proto::Identifier& id) {
  return id.kind_case() == proto::Identifier::kName ? "'" + id.name() + "'" : "#" + std::to_string(id.id());
}

// A range check on an optional TopicConfig field; `name` is what the error calls it.
template <class T>
expected<void> in_range(const char* name, T value, T lo, T hi) {
  if (value < lo || value > hi) {
    return fail(net::status::invalid_config, fmt::format("{} = {}: allowed range is [{}, {}]", name, value, lo, hi));
  }
  return {};
}

expected<void> check_config(const proto::TopicConfig& c) {
  constexpr std::uint64_t year_ms = 365ull * 24 * 3600 * 1000;
  if (c.has_partitions()) {
    RILL_TRY_VOID(in_range<std::uint32_t>("partitions", c.partitions(), 1, 100'000));
  }
  if (c.has_replication_factor()) {
    RILL_TRY_VOID(in_range<std::uint32_t>("replication_factor", c.replication_factor(), 1,
                                          static_cast<std::uint32_t>(limits::cluster_members_limit)));
  }
  if (c.has_retention_ms()) {
    RILL_TRY_VOID(in_range<std::uint64_t>("retention_ms", c.retention_ms(), 0, 100 * year_ms));
  }
  if (c.has_segment_bytes()) {
    RILL_TRY_VOID(in_range<std::uint64_t>("segment_bytes", c.segment_bytes(), limits::segment_bytes_min,
                                          limits::segment_bytes_limit));
  }
  if (c.has_max_message_bytes()) {
    RILL_TRY_VOID(in_range<std::uint64_t>("max_message_bytes", c.max_message_bytes(), limits::batch_bytes_min,
                                          limits::batch_bytes_limit));
  }
  if (c.has_sync_every_records()) {
    RILL_TRY_VOID(in_range<std::uint64_t>("sync_every_records", c.sync_every_records(), 1, 1'000'000'000));
  }
  if (c.has_sync_every_ms()) {
    RILL_TRY_VOID(in_range<std::uint64_t>("sync_every_ms", c.sync_every_ms(), 1, 3'600'000));
  }
  if (c.has_cleanup_policy() && c.cleanup_policy() == proto::CLEANUP_COMPACT) {
    return fail(net::status::invalid_config,
                "cleanup_policy = compact: key compaction arrives with its own issue; use delete");
  }
  if (c.has_compression() && !proto::Compression_IsValid(c.compression())) {
    return fail(net::status::invalid_config, "compression: allowed are none and zstd");
  }
  if (c.has_durability() && !proto::Durability_IsValid(c.durability())) {
    return fail(net::status::invalid_config, "durability: allowed are sync_before_ack, every_records and every_ms");
  }
  return {};
}

// The first id at or after `cursor` (wrapping at `ids_max`) that `live` does not hold.
template <class Map>
std::optional<std::uint32_t> first_free(const Map& live, std::uint32_t cursor, std::uint32_t ids_max) {
  RILL_ASSERT(ids_max > 0);
  RILL_ASSERT(cursor <= ids_max, "cursor {} beyond the id space {}", cursor, ids_max);
  if (live.size() >= ids_max) {
    return std::nullopt;
  }
  std::uint32_t id = cursor % ids_max;
  while (live.contains(id)) {  // ends: fewer than ids_max are live
    id = (id + 1) % ids_max;
  }
  return id;
}

const stream_meta* stream_by_id(const metadata_view& v, std::uint32_t id) {
  auto it = v.streams.find(id);
  return it == v.streams.end() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::uint32_t> free_stream_id(const metadata_view& view) {
  return first_free(view.streams, view.next_stream_id, stream_ids_max);
}
std::optional<std::uint32_t> free_topic_id(const stream_meta& stream) {
  return first_free(stream.topics, stream.next_topic_id, topic_ids_max);
}
std::optional<std::uint32_t> free_group_id(const topic_meta& topic) {
  return first_free(topic.groups, topic.next_group_id, group_ids_max);
}

std::uint64_t metadata_view::partition_count() const {
  std::uint64_t n = 0;
  for (const auto& [sid, s] : streams) {
    for (const auto& [tid, t] : s.topics) {
      n += t.config.partitions();
    }
  }
  return n;
}

std::uint64_t metadata_view::group_count() const {
  std::uint64_t n = 0;
  for (const auto& [sid, s] : streams) {
    for (const auto& [tid, t] : s.topics) {
      n += t.groups.size();
    }
  }
  return n;
}

expected<const stream_meta*> metadata_view::find_stream(const proto::Identifier& id) const {
  if (id.kind_case() == proto::Identifier::kId) {
    if (const auto* s = stream_by_id(*this, id.id())) {
      return s;
    }
  } else if (id.kind_case() == proto::Identifier::kName) {
    for (const auto& [sid, s] : streams) {
      if (s.name == id.name()) {
        return &s;
      }
    }
  } else {
    return fail(net::status::bad_header, "no stream given");
  }
  return fail(net::status::stream_not_found, fmt::format("stream {} not found", describe(id)));
}

expected<const topic_meta*> metadata_view::find_topic(const stream_meta& stream, const proto::Identifier& id) const {
  if (id.kind_case() == proto::Identifier::kId) {
    auto it = stream.topics.find(id.id());
    if (it != stream.topics.end()) {
      return &it->second;
    }
  } else if (id.kind_case() == proto::Identifier::kName) {
    for (const auto& [tid, t] : stream.topics) {
      if (t.name == id.name()) {
        return &t;
      }
    }
  } else {
    return fail(net::status::bad_header, "no topic given");
  }
  return fail(net::status::topic_not_found,
              fmt::format("topic {} not found in stream '{}'", describe(id), stream.name));
}

expected<const group_meta*> metadata_view::find_group(const topic_meta& topic, const proto::Identifier& id) {
  if (id.kind_case() == proto::Identifier::kId) {
    auto it = topic.groups.find(id.id());
    if (it != topic.groups.end()) {
      return &it->second;
    }
  } else if (id.kind_case() == proto::Identifier::kName) {
    for (const auto& [gid, g] : topic.groups) {
      if (g.name == id.name()) {
        return &g;
      }
    }
  } else {
    return fail(net::status::bad_header, "no group given");
  }
  return fail(net::status::group_not_found, fmt::format("group {} not found in topic '{}'", describe(id), topic.name));
}

std::uint64_t group_namespace(std::uint32_t stream_id, std::uint32_t topic_id, std::uint32_t group_id) {
  RILL_ASSERT(group_id < group_ids_max);
  return partition_namespace(stream_id, topic_id, group_id) | (std::uint64_t{1} << 63);
}

expected<proto::GroupConfig> complete_group_config(const proto::GroupConfig& requested) {
  proto::GroupConfig out;
  if (requested.has_strategy() && !proto::AssignmentStrategy_IsValid(requested.strategy())) {
    return fail(net::status::invalid_config, "strategy: allowed are range and round_robin");
  }
  out.set_strategy(requested.has_strategy() ? requested.strategy() : proto::ASSIGNMENT_RANGE);
  if (requested.has_session_timeout_ms()) {
    RILL_TRY_VOID(in_range<std::uint32_t>("session_timeout_ms", requested.session_timeout_ms(), session_timeout_ms_min,
                                          session_timeout_ms_max));
  }
  out.set_session_timeout_ms(requested.has_session_timeout_ms() ? requested.session_timeout_ms()
                                                                : session_timeout_ms_default);
  return out;
}

std::uint64_t partition_namespace(std::uint32_t stream_id, std::uint32_t topic_id, std::uint32_t partition_id) {
  RILL_ASSERT(stream_id < stream_ids_max);
  RILL_ASSERT(topic_id < topic_ids_max);
  RILL_ASSERT(partition_id < partitions_max);
  return (std::uint64_t{stream_id} << 32) | (std::uint64_t{topic_id} << 20) | partition_id;
}

std::vector<std::uint64_t> partition_replicas(std::uint32_t stream_id, std::uint32_t topic_id,
                                              std::uint32_t partition_id, std::uint32_t factor,
                                              std::span<const std::uint64_t> members) {
  std::vector<std::uint64_t> out;
  if (members.empty()) {
    return out;
  }
  const std::uint64_t home = topic_home(stream_id, topic_id, members);
  const auto at = static_cast<std::size_t>(std::find(members.begin(), members.end(), home) - members.begin());
  const std::size_t n = std::min<std::size_t>(std::max<std::uint32_t>(factor, 1), members.size());
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(members[(at + partition_id + i) % members.size()]);
  }
  return out;
}

std::uint64_t partition_group_id(std::uint32_t stream_id, std::uint32_t topic_id, std::uint64_t topic_created_ms,
                                 std::uint32_t partition_id, std::uint64_t partition_created) {
  std::byte bytes[24];
  store_le<std::uint64_t>(bytes, partition_namespace(stream_id, topic_id, partition_id));
  store_le<std::uint64_t>(bytes + 8, topic_created_ms);
  store_le<std::uint64_t>(bytes + 16, partition_created);
  std::uint64_t out[2];
  // (Without a creation version, the 16 bytes partitions of older snapshots were always named by.)
  lmmh_x64_128(bytes, partition_created == 0 ? 16 : sizeof bytes, 2, out);
  return out[0] | 1u;  // never 0
}

std::uint64_t topic_home(std::uint32_t stream_id, std::uint32_t topic_id, std::span<const std::uint64_t> members) {
  if (members.empty()) {
    return 0;
  }
  std::byte bytes[8];
  store_le<std::uint64_t>(bytes, partition_namespace(stream_id, topic_id, 0));
  std::uint64_t out[2];
  lmmh_x64_128(bytes, sizeof bytes, 1, out);  // seed 1: not the shard's choice, so a node's topics use every shard
  return members[static_cast<std::size_t>((out[0] >> 32) % members.size())];
}

std::size_t shard_of(std::uint64_t ns, std::size_t shards) {
  RILL_ASSERT(shards > 0);
  std::byte bytes[8];
  store_le<std::uint64_t>(bytes, ns);
  std::uint64_t out[2];
  lmmh_x64_128(bytes, sizeof bytes, 0, out);
  return static_cast<std::size_t>((out[0] >> 48) % shards);
}

expected<void> check_new_name(std::string_view what, std::string_view name) {
  RILL_TRY_VOID(check_name(what, name));
  if (name == "." || name == "..") {
    return fail(
        net::status::invalid_name,
        fmt::format("{} name '{}': '.' and '..' are not names (they mean directories on every system)", what, name));
  }
  return {};
}

expected<void> check_name(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > name_bytes_max) {
    return fail(net::status::invalid_name,
                fmt::format("{} name of {} bytes: a name has 1 to {} bytes", what, name.size(), name_bytes_max));
  }
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return fail(net::status::invalid_name,
                  fmt::format("{} name '{}': only letters, digits, '.', '_' and '-' are allowed", what, name));
    }
  }
  return {};
}

expected<proto::TopicConfig> complete_topic_config(const proto::TopicConfig& requested,
                                                   const config::log_config& defaults, replication_limits r) {
  RILL_TRY_VOID(check_config(requested));
  proto::TopicConfig c = requested;
  if (!c.has_partitions()) {
    c.set_partitions(1);
  }
  if (!c.has_replication_factor()) {
    c.set_replication_factor(std::min(r.factor_default, r.members));
  }
  if (c.replication_factor() > r.members) {
    return fail(net::status::invalid_config,
                fmt::format("replication_factor = {}: allowed range is [1, {}] (the cluster's members: a partition "
                            "has at most one replica per node)",
                            c.replication_factor(), r.members));
  }
  if (c.replication_factor() == 2) {
    return fail(net::status::invalid_config, std::string(limits::replication_factor_two_refused));
  }
  if (!c.has_retention_ms()) {
    c.set_retention_ms(defaults.retention_ms);
  }
  if (!c.has_retention_bytes()) {
    c.set_retention_bytes(defaults.retention_bytes);
  }
  if (!c.has_segment_bytes()) {
    c.set_segment_bytes(defaults.segment_bytes);
  }
  if (!c.has_compression()) {
    c.set_compression(proto::COMPRESSION_NONE);
  }
  if (!c.has_cleanup_policy()) {
    c.set_cleanup_policy(proto::CLEANUP_DELETE);
  }
  if (!c.has_durability()) {
    c.set_durability(proto::DURABILITY_DEFAULT);
  }
  if (!c.has_max_message_bytes()) {
    c.set_max_message_bytes(defaults.max_message_bytes);
  }
  if (!c.has_sync_every_records()) {
    c.set_sync_every_records(defaults.sync_every_records);
  }
  if (!c.has_sync_every_ms()) {
    c.set_sync_every_ms(defaults.sync_every_ms);
  }
  if (c.max_message_bytes() > c.segment_bytes()) {
    // Allowed (such a batch gets its own segment), but almost certainly a mistake in a topic's settings.
    return fail(net::status::invalid_config, fmt::format("max_message_bytes = {} exceeds segment_bytes = {}",
                                                         c.max_message_bytes(), c.segment_bytes()));
  }
  return c;
}

expected<proto::TopicConfig> patch_topic_config(const proto::TopicConfig& current, const proto::TopicConfig& patch) {
  RILL_TRY_VOID(check_config(patch));
  if (patch.has_partitions() && patch.partitions() != current.partitions()) {
    return fail(net::status::invalid_config, "partitions: change them with partitions add / delete");
  }
  if (patch.has_replication_factor() && patch.replication_factor() != current.replication_factor()) {
    return fail(net::status::invalid_config,
                fmt::format("replication_factor = {}: a topic keeps the replication factor it was created with ({})",
                            patch.replication_factor(), current.replication_factor()));
  }
  proto::TopicConfig c = current;
  c.MergeFrom(patch);  // proto3 optional: only fields set in patch are copied
  return c;
}

config::log_config log_config_for(const proto::TopicConfig& topic, const config::log_config& defaults) {
  config::log_config c = defaults;
  c.retention_ms = topic.retention_ms();
  c.retention_bytes = topic.retention_bytes();
  c.segment_bytes = topic.segment_bytes();
  c.max_message_bytes = topic.max_message_bytes();
  c.sync_every_records = topic.sync_every_records();
  c.sync_every_ms = topic.sync_every_ms();
  switch (topic.durability()) {
    case proto::DURABILITY_SYNC_BEFORE_ACK:
      c.durability = config::durability_mode::sync_before_ack;
      break;
    case proto::DURABILITY_EVERY_RECORDS:
      c.durability = config::durability_mode::every_records;
      break;
    case proto::DURABILITY_EVERY_MS:
      c.durability = config::durability_mode::every_ms;
      break;
    default:
      break;  // the server's default
  }
  return c;
}

metadata_state::metadata_state() : view_(std::make_shared<const metadata_view>()) {}

expected<void> metadata_state::check(const proto::MetadataCommand& cmd) const {
  const metadata_view& v = *view_;
  auto stream_named = [&](const std::string& name) -> const stream_meta* {
    for (const auto& [id, s] : v.streams) {
      if (s.name == name) {
        return &s;
      }
    }
    return nullptr;
  };
  auto need_stream = [&](std::uint32_t id) -> expected<const stream_meta*> {
    if (const auto* s = stream_by_id(v, id)) {
      return s;
    }
    return fail(net::status::stream_not_found, fmt::format("stream #{} not found", id));
  };
  auto need_topic = [&](const stream_meta& s, std::uint32_t id) -> expected<const topic_meta*> {
    auto it = s.topics.find(id);
    if (it == s.topics.end()) {
      return fail(net::status::topic_not_found, fmt::format("topic #{} not found in stream '{}'", id, s.name));
    }
    return &it->second;
  };
  auto topic_named = [](const stream_meta& s, const std::string& name) -> const topic_meta* {
    for (const auto& [id, t] : s.topics) {
      if (t.name == name) {
        return &t;
      }
    }
    return nullptr;
  };
  switch (cmd.kind_case()) {
    case proto::MetadataCommand::kCreateStream: {
      const auto& c = cmd.create_stream();
      RILL_TRY_VOID(check_name("stream", c.name()));
      if (stream_named(c.name()) != nullptr) {
        return fail(net::status::already_exists, fmt::format("stream '{}' already exists", c.name()));
      }
      if (!free_stream_id(v)) {
        return fail(net::status::limit_exceeded, fmt::format("all {} stream ids are in use", stream_ids_max));
      }
      return {};
    }
    case proto::MetadataCommand::kUpdateStream: {
      const auto& c = cmd.update_stream();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY_VOID(check_name("stream", c.name()));
      if (const auto* other = stream_named(c.name()); other != nullptr && other != s) {
        return fail(net::status::already_exists, fmt::format("stream '{}' already exists", c.name()));
      }
      return {};
    }
    case proto::MetadataCommand::kDeleteStream:
      return need_stream(cmd.delete_stream().stream_id()).has_value()
                 ? expected<void>{}
                 : expected<void>(fail(net::status::stream_not_found,
                                       fmt::format("stream #{} not found", cmd.delete_stream().stream_id())));
    case proto::MetadataCommand::kCreateTopic: {
      const auto& c = cmd.create_topic();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY_VOID(check_name("topic", c.name()));
      if (topic_named(*s, c.name()) != nullptr) {
        return fail(net::status::already_exists,
                    fmt::format("topic '{}' already exists in stream '{}'", c.name(), s->name));
      }
      if (!free_topic_id(*s)) {
        return fail(net::status::limit_exceeded,
                    fmt::format("all {} topic ids of stream '{}' are in use", topic_ids_max, s->name));
      }
      return check_config(c.config());
    }
    case proto::MetadataCommand::kUpdateTopic: {
      const auto& c = cmd.update_topic();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY(t, need_topic(*s, c.topic_id()));
      if (c.has_name()) {
        RILL_TRY_VOID(check_name("topic", c.name()));
        if (const auto* other = topic_named(*s, c.name()); other != nullptr && other != t) {
          return fail(net::status::already_exists,
                      fmt::format("topic '{}' already exists in stream '{}'", c.name(), s->name));
        }
      }
      RILL_TRY_VOID(patch_topic_config(t->config, c.config()));
      return {};
    }
    case proto::MetadataCommand::kDeleteTopic: {
      const auto& c = cmd.delete_topic();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY_VOID(need_topic(*s, c.topic_id()));
      return {};
    }
    case proto::MetadataCommand::kAddPartitions: {
      const auto& c = cmd.add_partitions();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY(t, need_topic(*s, c.topic_id()));
      if (c.count() == 0 || std::uint64_t{t->config.partitions()} + c.count() > 100'000) {
        return fail(net::status::invalid_config, fmt::format("adding {} partitions to {}: a topic has 1 to 100000",
                                                             c.count(), t->config.partitions()));
      }
      return {};
    }
    case proto::MetadataCommand::kDeletePartitions: {
      const auto& c = cmd.delete_partitions();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY(t, need_topic(*s, c.topic_id()));
      if (c.count() == 0 || c.count() >= t->config.partitions()) {
        return fail(net::status::invalid_config, fmt::format("deleting {} of {} partitions: a topic keeps at least one",
                                                             c.count(), t->config.partitions()));
      }
      return {};
    }
    case proto::MetadataCommand::kCreateGroup: {
      const auto& c = cmd.create_group();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY(t, need_topic(*s, c.topic_id()));
      RILL_TRY_VOID(check_name("group", c.name()));
      for (const auto& [gid, g] : t->groups) {
        if (g.name == c.name()) {
          return fail(net::status::already_exists,
                      fmt::format("group '{}' already exists in topic '{}'", c.name(), t->name));
        }
      }
      if (t->groups.size() >= groups_per_topic_max || !free_group_id(*t)) {
        return fail(net::status::limit_exceeded,
                    fmt::format("topic '{}' has {} groups, the most it takes", t->name, t->groups.size()));
      }
      RILL_TRY_VOID(complete_group_config(c.config()));
      return {};
    }
    case proto::MetadataCommand::kDeleteGroup: {
      const auto& c = cmd.delete_group();
      RILL_TRY(s, need_stream(c.stream_id()));
      RILL_TRY(t, need_topic(*s, c.topic_id()));
      if (!t->groups.contains(c.group_id())) {
        return fail(net::status::group_not_found,
                    fmt::format("group #{} not found in topic '{}'", c.group_id(), t->name));
      }
      return {};
    }
    case proto::MetadataCommand::kBarrier:
      return {};
    case proto::MetadataCommand::kSetNode: {
      const auto& c = cmd.set_node();
      if (c.node_id() == 0 || c.node_id() > limits::node_id_limit) {
        return fail(net::status::bad_header,
                    fmt::format("node id {} out of range [1, {}]", c.node_id(), limits::node_id_limit));
      }
      if (c.client_address().empty() || c.client_address().size() > 300) {
        return fail(net::status::bad_header, "a node's client address must be 1 to 300 bytes");
      }
      return {};
    }
    case proto::MetadataCommand::KIND_NOT_SET:
      break;
  }
  return fail(net::status::bad_header, "empty metadata command");
}

metadata_state::applied metadata_state::apply(const proto::MetadataCommand& cmd, std::uint64_t op) {
  {
    auto ok = check(cmd);
    RILL_ASSERT(ok.has_value(), "applying a command that does not check: {}", ok ? "" : ok.error().message());
  }
  auto next = std::make_shared<metadata_view>(*view_);
  ++next->version;
  const std::uint64_t created = op != 0 ? op : next->version;  // (names the partitions it creates)
  applied out;
  switch (cmd.kind_case()) {
    case proto::MetadataCommand::kCreateStream: {
      stream_meta s;
      s.id = *free_stream_id(*next);  // check() found one
      next->next_stream_id = s.id + 1;
      s.name = cmd.create_stream().name();
      s.created_ms = cmd.time_ms();
      out.stream_id = s.id;
      next->streams.emplace(s.id, std::move(s));
      break;
    }
    case proto::MetadataCommand::kUpdateStream:
      next->streams.at(cmd.update_stream().stream_id()).name = cmd.update_stream().name();
      out.stream_id = cmd.update_stream().stream_id();
      break;
    case proto::MetadataCommand::kDeleteStream:
      next->streams.erase(cmd.delete_stream().stream_id());
      out.stream_id = cmd.delete_stream().stream_id();
      break;
    case proto::MetadataCommand::kCreateTopic: {
      const auto& c = cmd.create_topic();
      stream_meta& s = next->streams.at(c.stream_id());
      topic_meta t;
      t.id = *free_topic_id(s);  // check() found one
      s.next_topic_id = t.id + 1;
      t.name = c.name();
      t.created_ms = cmd.time_ms();
      t.config = c.config();
      t.partitions_created.assign(t.config.partitions(), created);
      out.stream_id = s.id;
      out.topic_id = t.id;
      s.topics.emplace(t.id, std::move(t));
      break;
    }
    case proto::MetadataCommand::kUpdateTopic: {
      const auto& c = cmd.update_topic();
      topic_meta& t = next->streams.at(c.stream_id()).topics.at(c.topic_id());
      if (c.has_name()) {
        t.name = c.name();
      }
      t.config = *patch_topic_config(t.config, c.config());
      t.partitions_created.resize(t.config.partitions(), created);  // (should a patch ever change the count)
      out.stream_id = c.stream_id();
      out.topic_id = c.topic_id();
      break;
    }
    case proto::MetadataCommand::kDeleteTopic:
      next->streams.at(cmd.delete_topic().stream_id()).topics.erase(cmd.delete_topic().topic_id());
      out.stream_id = cmd.delete_topic().stream_id();
      out.topic_id = cmd.delete_topic().topic_id();
      break;
    case proto::MetadataCommand::kAddPartitions: {
      const auto& c = cmd.add_partitions();
      topic_meta& t = next->streams.at(c.stream_id()).topics.at(c.topic_id());
      auto& cfg = t.config;
      t.partitions_created.resize(cfg.partitions(), 0);  // (0: a partition of an older snapshot)
      cfg.set_partitions(cfg.partitions() + c.count());
      t.partitions_created.resize(cfg.partitions(), created);
      out.stream_id = c.stream_id();
      out.topic_id = c.topic_id();
      break;
    }
    case proto::MetadataCommand::kDeletePartitions: {
      const auto& c = cmd.delete_partitions();
      topic_meta& t = next->streams.at(c.stream_id()).topics.at(c.topic_id());
      auto& cfg = t.config;
      cfg.set_partitions(cfg.partitions() - c.count());
      t.partitions_created.resize(cfg.partitions(), 0);
      out.stream_id = c.stream_id();
      out.topic_id = c.topic_id();
      break;
    }
    case proto::MetadataCommand::kCreateGroup: {
      const auto& c = cmd.create_group();
      topic_meta& t = next->streams.at(c.stream_id()).topics.at(c.topic_id());
      group_meta g;
      g.id = *free_group_id(t);  // check() found one
      t.next_group_id = g.id + 1;
      g.name = c.name();
      g.created_ms = cmd.time_ms();
      g.config = *complete_group_config(c.config());
      t.groups.emplace(g.id, std::move(g));
      out.stream_id = c.stream_id();
      out.topic_id = c.topic_id();
      break;
    }
    case proto::MetadataCommand::kDeleteGroup: {
      const auto& c = cmd.delete_group();
      next->streams.at(c.stream_id()).topics.at(c.topic_id()).groups.erase(c.group_id());
      out.stream_id = c.stream_id();
      out.topic_id = c.topic_id();
      break;
    }
    case proto::MetadataCommand::kSetNode:
      next->nodes[cmd.set_node().node_id()] = cmd.set_node().client_address();
      break;
    case proto::MetadataCommand::kBarrier:
      break;
    case proto::MetadataCommand::KIND_NOT_SET:
      RILL_UNREACHABLE();
  }
  view_ = std::move(next);
  return out;
}

proto::MetadataSnapshot metadata_state::snapshot(std::uint64_t applied_offset) const {
  proto::MetadataSnapshot out;
  out.set_applied_offset(applied_offset);
  out.set_next_stream_id(view_->next_stream_id);
  for (const auto& [id, s] : view_->streams) {
    auto* ps = out.add_streams();
    ps->set_id(s.id);
    ps->set_name(s.name);
    ps->set_created_ms(s.created_ms);
    ps->set_next_topic_id(s.next_topic_id);
    for (const auto& [tid, t] : s.topics) {
      auto* pt = ps->add_topics();
      pt->set_id(t.id);
      pt->set_name(t.name);
      pt->set_created_ms(t.created_ms);
      *pt->mutable_config() = t.config;
      pt->set_next_group_id(t.next_group_id);
      for (auto v : t.partitions_created) {
        pt->add_partitions_created(v);
      }
      for (const auto& [gid, g] : t.groups) {
        auto* pg = pt->add_groups();
        pg->set_id(g.id);
        pg->set_name(g.name);
        pg->set_created_ms(g.created_ms);
        *pg->mutable_config() = g.config;
      }
    }
  }
  for (const auto& [id, address] : view_->nodes) {
    auto* pn = out.add_nodes();
    pn->set_node_id(id);
    pn->set_client_address(address);
  }
  return out;
}

expected<metadata_state> metadata_state::from_snapshot(const proto::MetadataSnapshot& snap) {
  auto view = std::make_shared<metadata_view>();
  // Cursors may sit anywhere in their id space, and live ids on either side of them (ids wrap).
  view->next_stream_id = snap.next_stream_id();
  if (view->next_stream_id > stream_ids_max) {
    return fail(net::status::internal_error,
                fmt::format("metadata snapshot: stream cursor {} beyond {}", view->next_stream_id, stream_ids_max));
  }
  for (const auto& ps : snap.streams()) {
    if (ps.id() >= stream_ids_max || view->streams.count(ps.id())) {
      return fail(net::status::internal_error, fmt::format("metadata snapshot: stream id {} out of order", ps.id()));
    }
    stream_meta s;
    s.id = ps.id();
    s.name = ps.name();
    s.created_ms = ps.created_ms();
    s.next_topic_id = ps.next_topic_id();
    if (s.next_topic_id > topic_ids_max) {
      return fail(net::status::internal_error,
                  fmt::format("metadata snapshot: topic cursor {} beyond {}", s.next_topic_id, topic_ids_max));
    }
    for (const auto& pt : ps.topics()) {
      if (pt.id() >= topic_ids_max || s.topics.count(pt.id())) {
        return fail(net::status::internal_error, fmt::format("metadata snapshot: topic id {} out of order", pt.id()));
      }
      topic_meta t;
      t.id = pt.id();
      t.name = pt.name();
      t.created_ms = pt.created_ms();
      t.config = pt.config();
      t.next_group_id = pt.next_group_id();
      t.partitions_created.assign(pt.partitions_created().begin(), pt.partitions_created().end());
      if (!t.partitions_created.empty() && t.partitions_created.size() != t.config.partitions()) {
        return fail(net::status::internal_error,
                    fmt::format("metadata snapshot: topic {} has {} partitions and {} creation versions", pt.id(),
                                t.config.partitions(), t.partitions_created.size()));
      }
      t.partitions_created.resize(t.config.partitions(), 0);  // (a snapshot written before they were recorded)
      if (t.next_group_id > group_ids_max) {
        return fail(net::status::internal_error,
                    fmt::format("metadata snapshot: group cursor {} beyond {}", t.next_group_id, group_ids_max));
      }
      for (const auto& pg : pt.groups()) {
        if (pg.id() >= group_ids_max || t.groups.count(pg.id())) {
          return fail(net::status::internal_error, fmt::format("metadata snapshot: group id {} out of order", pg.id()));
        }
        group_meta g;
        g.id = pg.id();
        g.name = pg.name();
        g.created_ms = pg.created_ms();
        g.config = pg.config();
        t.groups.emplace(g.id, std::move(g));
      }
      s.topics.emplace(t.id, std::move(t));
    }
    view->streams.emplace(s.id, std::move(s));
  }
  for (const auto& pn : snap.nodes()) {
    if (pn.node_id() == 0 || view->nodes.contains(pn.node_id())) {
      return fail(net::status::internal_error, fmt::format("metadata snapshot: node id {} twice or 0", pn.node_id()));
    }
    view->nodes.emplace(pn.node_id(), pn.client_address());
  }
  metadata_state state;
  state.view_ = std::move(view);
  return state;
}

}  // namespace rill::actors
