// coordinator_requests: the group API of replicated topics over a coordinator (see the header).
#include "actors/coordinator_requests.h"

#include <fmt/core.h>

#include "actors/request_header.h"
#include "base/assert.h"
#include "net/frame.h"
#include "net/status.h"

namespace rill::actors {
namespace {

constexpr unsigned connection_node_shift = 48;

rill::unexpected refuse(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

proto::CoordinatorCommand command_for(const group_key& key) {
  proto::CoordinatorCommand c;
  c.set_stream_id(key.stream);
  c.set_topic_id(key.topic);
  c.set_group(key.name);
  return c;
}

std::uint32_t strategy_number(const proto::GroupConfig& config) {
  return config.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? 1 : 0;
}

void fill_assignment(proto::GroupAssignment& out, std::uint64_t generation, const auto& owned, const auto& revoking,
                     std::uint32_t partitions) {
  out.set_generation(generation);
  for (auto p : owned) {
    out.add_owned(p);
  }
  for (auto p : revoking) {
    out.add_revoking(p);
  }
  out.set_partitions(partitions);
}

template <class M>
expected<M> parse(std::string_view header) {
  return parse_request_header<M>(header);
}

}  // namespace

std::uint64_t connection_key(std::uint64_t node, std::uint64_t connection) {
  RILL_ASSERT(connection < (std::uint64_t{1} << connection_node_shift), "connection id {}", connection);
  return (node << connection_node_shift) | connection;
}

expected<void> coordinator_status(const proto::CoordinatorReply& r) {
  if (r.status() == 0) {
    return {};
  }
  return refuse(static_cast<net::status>(r.status()), r.detail());
}

expected<coordinator_plan> plan_coordinator_request(const coordinated_group& g, const group_state* state,
                                                    std::uint16_t api, std::string_view header, std::uint64_t conn) {
  const auto a = net::api_from_wire(api);
  coordinator_plan plan;
  auto command = command_for(g.key());
  switch (a.value_or(net::api::ping)) {
    case net::api::group_join: {
      RILL_TRY(req, parse<proto::GroupJoinRequest>(header));
      auto* j = command.mutable_join();
      if (req.has_member_id()) {
        RILL_TRY_VOID(check_new_name("member id", req.member_id()));
        j->set_member_id(req.member_id());
      }
      j->set_conn(conn);
      plan.command = std::move(command);
      return plan;
    }
    case net::api::group_heartbeat: {
      RILL_TRY(req, parse<proto::GroupHeartbeatRequest>(header));
      auto* h = command.mutable_heartbeat();
      h->set_member_id(req.member_id());
      for (auto p : req.released()) {
        h->add_released(p);
      }
      h->set_conn(conn);
      plan.command = std::move(command);
      return plan;
    }
    case net::api::group_leave: {
      RILL_TRY(req, parse<proto::GroupLeaveRequest>(header));
      command.mutable_leave()->set_member_id(req.member_id());
      plan.command = std::move(command);
      return plan;
    }
    case net::api::group_commit: {
      RILL_TRY(req, parse<proto::GroupCommitRequest>(header));
      if (req.offsets().empty()) {
        return refuse(net::status::bad_header, "a group commit names at least one partition's offset");
      }
      auto* k = command.mutable_commit();
      k->set_member_id(req.member().member_id());
      k->set_generation(req.member().generation());
      for (const auto& o : req.offsets()) {
        auto* po = k->add_offsets();
        po->set_partition(o.partition_id());
        po->set_offset(o.offset());
      }
      plan.command = std::move(command);
      return plan;
    }
    case net::api::offset_store: {
      // An administrator's reset of the group's position (only while it has no members: the coordinator checks).
      RILL_TRY(req, parse<proto::OffsetStoreRequest>(header));
      auto* po = command.mutable_reset()->add_offsets();
      po->set_partition(req.partition_id());
      po->set_offset(req.offset());
      plan.command = std::move(command);
      return plan;
    }
    case net::api::group_assignment: {
      RILL_TRY(req, parse<proto::GroupAssignmentRequest>(header));
      if (state == nullptr) {
        return refuse(
            net::status::unknown_member,
            fmt::format("member '{}' is not in group '{}' (it has no members yet)", req.member_id(), g.id.name));
      }
      RILL_TRY(v, state->assignment(req.member_id()));
      proto::GroupAssignment out;
      fill_assignment(out, v.generation, v.owned, v.revoking, state->partitions());
      plan.header = out.SerializeAsString();
      return plan;
    }
    case net::api::offset_get: {
      RILL_TRY(req, parse<proto::OffsetGetRequest>(header));
      const std::uint32_t partitions = state != nullptr ? state->partitions() : g.id.partitions;
      if (req.partition_id() >= partitions) {
        return refuse(net::status::partition_not_found,
                      fmt::format("partition {} of {}", req.partition_id(), partitions));
      }
      proto::OffsetGetReply out;
      if (state != nullptr) {
        if (auto c = state->committed(req.partition_id())) {
          out.set_offset(*c);
        }
      }
      plan.header = out.SerializeAsString();
      return plan;
    }
    case net::api::group_get:
    case net::api::group_offsets:
      plan.describe = true;
      plan.offsets_only = *a == net::api::group_offsets;
      return plan;
    default:
      return refuse(net::status::unknown_api, fmt::format("api {} is not a group request", api));
  }
}

bool is_coordinator_read(std::uint16_t api) {
  switch (net::api_from_wire(api).value_or(net::api::ping)) {
    case net::api::group_assignment:
    case net::api::offset_get:
    case net::api::group_get:
    case net::api::group_offsets:
      return true;
    default:
      return false;
  }
}

expected<std::string> coordinator_reply(const coordinated_group& g, std::uint16_t api,
                                        const proto::CoordinatorReply& r) {
  RILL_TRY_VOID(coordinator_status(r));
  switch (net::api_from_wire(api).value_or(net::api::ping)) {
    case net::api::group_join: {
      proto::GroupJoinReply out;
      out.set_member_id(r.member_id());
      out.set_generation(r.generation());
      out.set_session_timeout_ms(g.id.config.session_timeout_ms());
      out.set_partitions(g.id.partitions);
      return out.SerializeAsString();
    }
    case net::api::group_heartbeat: {
      proto::GroupAssignment out;
      fill_assignment(out, r.generation(), r.owned(), r.revoking(), g.id.partitions);
      return out.SerializeAsString();
    }
    case net::api::group_leave:
      return proto::GroupLeaveReply{}.SerializeAsString();
    case net::api::group_commit:
      return proto::GroupCommitReply{}.SerializeAsString();
    case net::api::offset_store:
      return proto::OffsetStoreReply{}.SerializeAsString();
    default:
      return refuse(net::status::internal_error, fmt::format("api {} commits no coordinator command", api));
  }
}

proto::CoordinatorCommand create_command(const coordinated_group& g) {
  auto c = command_for(g.key());
  auto* k = c.mutable_create();
  k->set_partitions(g.id.partitions);
  k->set_strategy(strategy_number(g.id.config));
  k->set_session_timeout_ms(g.id.config.session_timeout_ms());
  k->set_incarnation(g.id.group_id);
  for (const std::uint64_t created : g.partitions_created) {
    k->add_partitions_created(created);
  }
  return c;
}

proto::CoordinatorCommand remove_command(const group_key& key, std::uint32_t incarnation) {
  auto c = command_for(key);
  c.mutable_remove()->set_incarnation(incarnation);
  return c;
}

const group_state* coordinated_state(const group_machine& machine, const coordinated_group& g) {
  const group_state* s = machine.find(g.key());
  return s != nullptr && s->incarnation() == g.id.group_id ? s : nullptr;
}

proto::CoordinatorCommand resize_command(const coordinated_group& g) {
  auto c = command_for(g.key());
  c.mutable_resize()->set_partitions(g.id.partitions);
  for (const std::uint64_t created : g.partitions_created) {
    c.mutable_resize()->add_partitions_created(created);
  }
  return c;
}

bool partitions_match(const group_state& state, const coordinated_group& g) {
  return state.partitions() == g.id.partitions && state.partitions_created() == g.partitions_created;
}

proto::CoordinatorCommand commit_command(const coordinated_group& g, const std::string& member,
                                         std::uint64_t generation, std::uint32_t partition, std::uint64_t offset) {
  auto c = command_for(g.key());
  auto* k = c.mutable_commit();
  k->set_member_id(member);
  k->set_generation(generation);
  auto* po = k->add_offsets();
  po->set_partition(partition);
  po->set_offset(offset);
  return c;
}

std::optional<coordinated_group> find_coordinated_group(const metadata_view& view, std::uint32_t stream_id,
                                                        std::uint32_t topic_id, std::uint32_t group_id) {
  auto s = view.streams.find(stream_id);
  if (s == view.streams.end()) {
    return std::nullopt;
  }
  auto t = s->second.topics.find(topic_id);
  if (t == s->second.topics.end() || t->second.config.replication_factor() <= 1) {
    return std::nullopt;
  }
  auto gi = t->second.groups.find(group_id);
  if (gi == t->second.groups.end()) {
    return std::nullopt;
  }
  coordinated_group out;
  out.id.stream_id = stream_id;
  out.id.topic_id = topic_id;
  out.id.group_id = group_id;
  out.id.name = gi->second.name;
  out.id.created_ms = gi->second.created_ms;
  out.id.config = gi->second.config;
  out.id.partitions = t->second.config.partitions();
  for (std::uint32_t p = 0; p < out.id.partitions; ++p) {
    out.partitions_created.push_back(t->second.partition_created(p));
  }
  return out;
}

std::vector<proto::CoordinatorCommand> reconcile_commands(const metadata_view& view, const group_machine& machine,
                                                          std::uint32_t index, std::uint32_t count,
                                                          std::size_t commands_max) {
  std::vector<proto::CoordinatorCommand> out;
  std::map<group_key, coordinated_group> named;  // the metadata's groups of this coordinator
  for (const auto& [sid, s] : view.streams) {
    for (const auto& [tid, t] : s.topics) {
      if (t.config.replication_factor() <= 1) {
        continue;
      }
      for (const auto& [gid, gm] : t.groups) {
        auto g = find_coordinated_group(view, sid, tid, gid);
        RILL_ASSERT(g.has_value());
        if (coordinator_for(g->key(), count) == index) {
          named.emplace(g->key(), std::move(*g));
        }
      }
    }
  }
  for (const auto& [key, state] : machine.groups()) {
    if (out.size() >= commands_max) {
      return out;
    }
    auto n = named.find(key);
    if (n == named.end()) {
      out.push_back(remove_command(key, state.incarnation()));
    } else if (state.incarnation() != n->second.id.group_id) {
      out.push_back(remove_command(key, state.incarnation()));  // deleted and created again: a new incarnation
      out.push_back(create_command(n->second));
    } else if (!partitions_match(state, n->second)) {
      out.push_back(resize_command(n->second));
    }
  }
  for (const auto& [key, g] : named) {
    if (out.size() >= commands_max) {
      break;
    }
    if (machine.find(key) == nullptr) {
      out.push_back(create_command(g));
    }
  }
  return out;
}

expected<group_poll> plan_coordinated_poll(const group_state* state, proto::PollRequest request) {
  if (state == nullptr) {
    return refuse(
        net::status::unknown_member,
        fmt::format("member '{}' is not in the group (it has no members here yet)", request.member().member_id()));
  }
  return plan_group_poll(*state, std::move(request));
}

}  // namespace rill::actors
