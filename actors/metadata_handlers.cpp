// metadata_handlers: the metadata API's decisions (see the header).
#include "actors/metadata_handlers.h"

#include <cstdlib>

#include <fmt/core.h>

#include "actors/request_header.h"
#include "base/assert.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {

rill::unexpected fail(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

std::string streams_root(const std::string& data_dir) {
  return storage::join_path(data_dir, "streams");
}

void fill_stream(proto::StreamInfo& out, const stream_meta& s) {
  out.set_id(s.id);
  out.set_name(s.name);
  out.set_topics(static_cast<std::uint32_t>(s.topics.size()));
  out.set_created_ms(s.created_ms);
}

topic_fill topic_of(const stream_meta& s, const topic_meta& t) {
  topic_fill f;
  f.info.set_stream_id(s.id);
  f.info.set_id(t.id);
  f.info.set_name(t.name);
  f.info.set_created_ms(t.created_ms);
  *f.info.mutable_config() = t.config;
  for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
    f.partitions.push_back(partition_namespace(s.id, t.id, p));
  }
  return f;
}

reply_plan ready(net::api api, const google::protobuf::MessageLite& m) {
  reply_plan plan;
  plan.api = api;
  plan.header = m.SerializeAsString();
  return plan;
}

reply_plan one_topic(net::api api, const stream_meta& s, const topic_meta& t) {
  reply_plan plan;
  plan.api = api;
  plan.kind = reply_kind::topic;
  plan.topics.push_back(topic_of(s, t));
  return plan;
}

// The refusal of a change that would pass limit `key` (its value `max`).
rill::unexpected over_limit(std::string_view key, std::uint64_t max, std::string what) {
  return fail(net::status::limit_exceeded, fmt::format("limits.{} = {}: {}", key, max, what));
}

expected<void> check_partition_limits(const metadata_view& view, const config::resource_limits& limits,
                                      std::uint64_t topic_partitions, std::uint64_t adding) {
  if (topic_partitions + adding > limits.partitions_per_topic_max) {
    return over_limit("partitions_per_topic_max", limits.partitions_per_topic_max,
                      fmt::format("a topic of {} partitions is refused", topic_partitions + adding));
  }
  const std::uint64_t node = view.partition_count();
  if (node + adding > limits.partitions_max) {
    return over_limit("partitions_max", limits.partitions_max,
                      fmt::format("this node serves {} partitions; {} more are refused", node, adding));
  }
  return {};
}

// A directory name as a number the way recovery always read them (strtoul: the whole name, base 10).
std::optional<std::uint64_t> dir_id(const std::string& name) {
  char* end = nullptr;
  const unsigned long id = std::strtoul(name.c_str(), &end, 10);
  if (*end != '\0') {
    return std::nullopt;
  }
  return id;
}

}  // namespace

std::string partition_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic,
                          std::uint32_t partition) {
  return fmt::format("{}/{}/topics/{}/partitions/{}", streams_root(data_dir), stream, topic, partition);
}

bool is_metadata_read(std::uint16_t api) noexcept {
  const auto a = net::api_from_wire(api);
  return a == net::api::stream_get || a == net::api::stream_list || a == net::api::topic_get ||
         a == net::api::topic_list || a == net::api::stats || a == net::api::group_list ||
         a == net::api::cluster_status;
}

std::string build_reply(reply_plan plan, std::span<const std::string> described) {
  switch (plan.kind) {
    case reply_kind::ready:
      return std::move(plan.header);
    case reply_kind::stream: {
      proto::StreamGetReply out;
      *out.mutable_stream() = std::move(plan.stream);
      for (auto& t : plan.topics) {
        *out.add_topics() = std::move(t.info);
      }
      return out.SerializeAsString();
    }
    case reply_kind::topic: {
      RILL_ASSERT(plan.topics.size() == 1, "{} topics in a one-topic reply", plan.topics.size());
      // TopicGetReply, TopicCreateReply, TopicUpdateReply and PartitionsAddReply: the same one field.
      proto::TopicGetReply out;
      *out.mutable_topic() = std::move(plan.topics.front().info);
      return out.SerializeAsString();
    }
    case reply_kind::topics: {
      proto::TopicListReply out;
      for (auto& t : plan.topics) {
        *out.add_topics() = std::move(t.info);
      }
      return out.SerializeAsString();
    }
    case reply_kind::group: {
      RILL_ASSERT(described.size() == 1, "{} groups described for a one-group reply", described.size());
      proto::GroupGetReply got;
      got.ParseFromString(described.front());
      proto::GroupCreateReply out;
      *out.mutable_group() = std::move(*got.mutable_group());
      return out.SerializeAsString();
    }
    case reply_kind::groups: {
      proto::GroupListReply out;
      for (const auto& d : described) {
        proto::GroupGetReply got;
        got.ParseFromString(d);
        *out.add_groups() = std::move(*got.mutable_group());
      }
      return out.SerializeAsString();
    }
    case reply_kind::stats:
      return plan.stats.SerializeAsString();
  }
  RILL_UNREACHABLE("reply kind {}", static_cast<int>(plan.kind));
}

expected<reply_plan> plan_read(const metadata_view& view, std::uint16_t api, std::string_view header) {
  const auto a = net::api_from_wire(api);
  switch (a.value_or(net::api::ping)) {
    case net::api::stream_list: {
      proto::StreamListReply out;
      for (const auto& [id, s] : view.streams) {
        fill_stream(*out.add_streams(), s);
      }
      return ready(*a, out);
    }
    case net::api::stream_get: {
      RILL_TRY(req, parse_request_header<proto::StreamGetRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      reply_plan plan;
      plan.api = *a;
      plan.kind = reply_kind::stream;
      fill_stream(plan.stream, *s);
      for (const auto& [tid, t] : s->topics) {
        plan.topics.push_back(topic_of(*s, t));
      }
      return plan;
    }
    case net::api::topic_get: {
      RILL_TRY(req, parse_request_header<proto::TopicGetRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      return one_topic(*a, *s, *t);
    }
    case net::api::topic_list: {
      RILL_TRY(req, parse_request_header<proto::TopicListRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      reply_plan plan;
      plan.api = *a;
      plan.kind = reply_kind::topics;
      for (const auto& [tid, t] : s->topics) {
        plan.topics.push_back(topic_of(*s, t));
      }
      return plan;
    }
    case net::api::stats: {
      reply_plan plan;
      plan.api = *a;
      plan.kind = reply_kind::stats;
      plan.stats.set_streams(static_cast<std::uint32_t>(view.streams.size()));
      std::uint32_t topics = 0;
      for (const auto& [sid, s] : view.streams) {
        topics += static_cast<std::uint32_t>(s.topics.size());
      }
      plan.stats.set_topics(topics);
      return plan;
    }
    case net::api::group_list: {
      RILL_TRY(req, parse_request_header<proto::GroupListRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      reply_plan plan;
      plan.api = *a;
      plan.kind = reply_kind::groups;
      for (const auto& [gid, g] : t->groups) {
        plan.groups.push_back(group_namespace(s->id, t->id, gid));
      }
      return plan;
    }
    default:
      return fail(net::status::unknown_api, fmt::format("api {} is not a metadata read", api));
  }
}

expected<metadata_change> plan_change(const metadata_view& view, std::uint16_t api, std::string_view header,
                                      const config::log_config& defaults, const config::resource_limits& limits,
                                      replication_limits replication) {
  const auto a = net::api_from_wire(api);
  metadata_change c;
  c.api = a.value_or(net::api::ping);
  switch (c.api) {
    case net::api::stream_create: {
      RILL_TRY(req, parse_request_header<proto::StreamCreateRequest>(header));
      RILL_TRY_VOID(check_new_name("stream", req.name()));
      if (view.streams.size() >= limits.streams_max) {
        return over_limit(
            "streams_max", limits.streams_max,
            fmt::format("this node has {} streams; stream '{}' is refused", view.streams.size(), req.name()));
      }
      c.created_id = free_stream_id(view);
      c.name = req.name();
      c.command.mutable_create_stream()->set_name(req.name());
      return c;
    }
    case net::api::stream_update: {
      RILL_TRY(req, parse_request_header<proto::StreamUpdateRequest>(header));
      RILL_TRY_VOID(check_new_name("stream", req.name()));
      RILL_TRY(s, view.find_stream(req.stream()));
      c.stream_id = s->id;
      c.command.mutable_update_stream()->set_stream_id(s->id);
      c.command.mutable_update_stream()->set_name(req.name());
      return c;
    }
    case net::api::stream_delete: {
      RILL_TRY(req, parse_request_header<proto::StreamDeleteRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      c.stream_id = s->id;
      c.command.mutable_delete_stream()->set_stream_id(s->id);
      return c;
    }
    case net::api::topic_create: {
      RILL_TRY(req, parse_request_header<proto::TopicCreateRequest>(header));
      RILL_TRY_VOID(check_new_name("topic", req.name()));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(config, complete_topic_config(req.config(), defaults, replication));
      if (s->topics.size() >= limits.topics_per_stream_max) {
        return over_limit(
            "topics_per_stream_max", limits.topics_per_stream_max,
            fmt::format("stream '{}' has {} topics; topic '{}' is refused", s->name, s->topics.size(), req.name()));
      }
      RILL_TRY_VOID(check_partition_limits(view, limits, 0, config.partitions()));
      c.created_id = free_topic_id(*s);
      c.stream_id = s->id;
      c.name = req.name();
      auto* cmd = c.command.mutable_create_topic();
      cmd->set_stream_id(s->id);
      cmd->set_name(req.name());
      *cmd->mutable_config() = config;
      return c;
    }
    case net::api::topic_update: {
      RILL_TRY(req, parse_request_header<proto::TopicUpdateRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      c.stream_id = s->id;
      c.topic_id = t->id;
      auto* cmd = c.command.mutable_update_topic();
      cmd->set_stream_id(s->id);
      cmd->set_topic_id(t->id);
      if (req.has_name()) {
        RILL_TRY_VOID(check_new_name("topic", req.name()));
        cmd->set_name(req.name());
      }
      *cmd->mutable_config() = req.config();
      return c;
    }
    case net::api::topic_delete: {
      RILL_TRY(req, parse_request_header<proto::TopicDeleteRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      c.stream_id = s->id;
      c.topic_id = t->id;
      c.command.mutable_delete_topic()->set_stream_id(s->id);
      c.command.mutable_delete_topic()->set_topic_id(t->id);
      return c;
    }
    case net::api::partitions_add:
    case net::api::partitions_delete: {
      RILL_TRY(req, parse_request_header<proto::PartitionsAddRequest>(header));  // same fields as the delete's
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      c.stream_id = s->id;
      c.topic_id = t->id;
      c.partitions_from = t->config.partitions();
      c.count = req.count();
      if (c.api == net::api::partitions_add) {
        RILL_TRY_VOID(check_partition_limits(view, limits, t->config.partitions(), req.count()));
        c.command.mutable_add_partitions()->set_stream_id(s->id);
        c.command.mutable_add_partitions()->set_topic_id(t->id);
        c.command.mutable_add_partitions()->set_count(req.count());
      } else {
        c.command.mutable_delete_partitions()->set_stream_id(s->id);
        c.command.mutable_delete_partitions()->set_topic_id(t->id);
        c.command.mutable_delete_partitions()->set_count(req.count());
      }
      return c;
    }
    case net::api::group_create: {
      RILL_TRY(req, parse_request_header<proto::GroupCreateRequest>(header));
      RILL_TRY_VOID(check_new_name("group", req.name()));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      RILL_TRY(config, complete_group_config(req.config()));
      if (t->groups.size() >= limits.groups_per_topic_max) {
        return over_limit(
            "groups_per_topic_max", limits.groups_per_topic_max,
            fmt::format("topic '{}' has {} groups; group '{}' is refused", t->name, t->groups.size(), req.name()));
      }
      if (const std::uint64_t groups = view.group_count(); groups >= limits.groups_max) {
        return over_limit("groups_max", limits.groups_max,
                          fmt::format("this node has {} consumer groups; group '{}' is refused", groups, req.name()));
      }
      c.created_id = free_group_id(*t);
      c.stream_id = s->id;
      c.topic_id = t->id;
      c.name = req.name();
      auto* cmd = c.command.mutable_create_group();
      cmd->set_stream_id(s->id);
      cmd->set_topic_id(t->id);
      cmd->set_name(req.name());
      *cmd->mutable_config() = config;
      return c;
    }
    case net::api::group_delete: {
      RILL_TRY(req, parse_request_header<proto::GroupDeleteRequest>(header));
      RILL_TRY(s, view.find_stream(req.stream()));
      RILL_TRY(t, view.find_topic(*s, req.topic()));
      RILL_TRY(g, metadata_view::find_group(*t, req.group()));
      c.stream_id = s->id;
      c.topic_id = t->id;
      auto* cmd = c.command.mutable_delete_group();
      cmd->set_stream_id(s->id);
      cmd->set_topic_id(t->id);
      cmd->set_group_id(g->id);
      return c;
    }
    default:
      return fail(net::status::unknown_api, fmt::format("api {} is not a metadata change", api));
  }
}

std::vector<std::string> leftovers_of(const metadata_change& change, const std::string& data_dir) {
  std::vector<std::string> out;
  const std::uint32_t sid = change.stream_id;
  const std::uint32_t tid = change.topic_id;
  switch (change.api) {
    case net::api::stream_create:
      if (change.created_id) {  // none: the commit refuses it (every id live)
        out.push_back(fmt::format("{}/groups/{}", data_dir, *change.created_id));
        out.push_back(fmt::format("{}/{}", streams_root(data_dir), *change.created_id));
      }
      break;
    case net::api::topic_create:
      if (change.created_id) {
        out.push_back(fmt::format("{}/groups/{}/{}", data_dir, sid, *change.created_id));
        out.push_back(fmt::format("{}/{}/topics/{}", streams_root(data_dir), sid, *change.created_id));
      }
      break;
    case net::api::group_create:
      if (change.created_id) {
        out.push_back(fmt::format("{}/groups/{}/{}/{}", data_dir, sid, tid, *change.created_id));
      }
      break;
    case net::api::partitions_add:
      for (std::uint64_t p = change.partitions_from;
           p < std::uint64_t{change.partitions_from} + change.count && p < partitions_max; ++p) {
        out.push_back(partition_dir(data_dir, sid, tid, static_cast<std::uint32_t>(p)));
      }
      break;
    default:
      break;
  }
  return out;
}

reply_plan reply_of(const metadata_change& change, const metadata_view& after) {
  const std::uint32_t sid = change.stream_id;
  const std::uint32_t tid = change.topic_id;
  switch (change.api) {
    case net::api::stream_create: {
      proto::StreamCreateReply out;
      for (const auto& [id, s] : after.streams) {
        if (s.name == change.name) {
          fill_stream(*out.mutable_stream(), s);
        }
      }
      return ready(change.api, out);
    }
    case net::api::stream_update: {
      proto::StreamUpdateReply out;
      fill_stream(*out.mutable_stream(), after.streams.at(sid));
      return ready(change.api, out);
    }
    case net::api::stream_delete:
      return ready(change.api, proto::StreamDeleteReply{});
    case net::api::topic_delete:
      return ready(change.api, proto::TopicDeleteReply{});
    case net::api::topic_create: {
      const stream_meta& s = after.streams.at(sid);
      const topic_meta* created = nullptr;
      for (const auto& [id, t] : s.topics) {
        if (t.name == change.name) {
          created = &t;
        }
      }
      RILL_ASSERT(created != nullptr, "topic '{}' not in stream {} after its creation", change.name, sid);
      return one_topic(change.api, s, *created);
    }
    case net::api::topic_update:
    case net::api::partitions_add:
    case net::api::partitions_delete:
      return one_topic(change.api, after.streams.at(sid), after.streams.at(sid).topics.at(tid));
    case net::api::group_create: {
      const topic_meta& t = after.streams.at(sid).topics.at(tid);
      const group_meta* created = nullptr;
      for (const auto& [id, g] : t.groups) {
        if (g.name == change.name) {
          created = &g;
        }
      }
      RILL_ASSERT(created != nullptr, "group '{}' not in topic {} after its creation", change.name, tid);
      reply_plan plan;
      plan.api = change.api;
      plan.kind = reply_kind::group;
      plan.groups.push_back(group_namespace(sid, tid, created->id));
      return plan;
    }
    case net::api::group_delete:
      return ready(change.api, proto::GroupDeleteReply{});
    default:
      RILL_UNREACHABLE("reply of api {}, not a change", static_cast<int>(change.api));
  }
}

std::string data_tree_root(const std::string& data_dir, data_tree tree) {
  return storage::join_path(data_dir, tree == data_tree::groups ? "groups" : "streams");
}

std::string data_tree_children(data_tree tree, const std::string& dir, std::size_t depth) {
  RILL_ASSERT(depth < data_tree_depth);
  if (tree == data_tree::groups || depth == 0) {
    return dir;
  }
  return storage::join_path(dir, depth == 1 ? "topics" : "partitions");
}

std::optional<std::uint64_t> known_data_entry(const metadata_view& view, data_tree tree,
                                              std::span<const std::uint64_t> parents, const std::string& name) {
  RILL_ASSERT(parents.size() < data_tree_depth);
  const auto id = dir_id(name);
  if (!id) {
    return std::nullopt;
  }
  auto s = view.streams.find(static_cast<std::uint32_t>(parents.empty() ? *id : parents[0]));
  if (s == view.streams.end()) {
    return std::nullopt;
  }
  if (parents.empty()) {
    return id;
  }
  auto t = s->second.topics.find(static_cast<std::uint32_t>(parents.size() == 1 ? *id : parents[1]));
  if (t == s->second.topics.end()) {
    return std::nullopt;
  }
  if (parents.size() == 1) {
    return id;
  }
  if (tree == data_tree::groups) {
    return t->second.groups.contains(static_cast<std::uint32_t>(*id)) ? id : std::nullopt;
  }
  return *id < t->second.config.partitions() ? id : std::nullopt;
}

}  // namespace rill::actors
