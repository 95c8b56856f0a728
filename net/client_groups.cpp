// The consumer-group calls of the client library: one request each (see client.h).
#include <fmt/core.h>

#include "net/client.h"
#include "net/errc.h"

namespace rill::net {
namespace {

template <class M>
expected<M> parse_reply(const reply& r) {
  M m;
  if (!m.ParseFromString(r.header)) {
    return rill::unexpected(make_error_code(errc::bad_header), "the reply header does not parse");
  }
  return m;
}

template <class Req>
Req addressed(const proto::Identifier& stream, const proto::Identifier& topic, const proto::Identifier& group) {
  Req req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  *req.mutable_group() = group;
  return req;
}

}  // namespace

expected<proto::GroupInfo> client::create_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                                const std::string& name, const proto::GroupConfig& config) {
  proto::GroupCreateRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  req.set_name(name);
  *req.mutable_config() = config;
  RILL_TRY(r, call(api::group_create, req));
  RILL_TRY(out, parse_reply<proto::GroupCreateReply>(r));
  return out.group();
}

expected<proto::GroupInfo> client::get_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                             const proto::Identifier& group) {
  RILL_TRY(r, call(api::group_get, addressed<proto::GroupGetRequest>(stream, topic, group)));
  RILL_TRY(out, parse_reply<proto::GroupGetReply>(r));
  return out.group();
}

expected<std::vector<proto::GroupInfo>> client::list_groups(const proto::Identifier& stream,
                                                            const proto::Identifier& topic) {
  proto::GroupListRequest req;
  *req.mutable_stream() = stream;
  *req.mutable_topic() = topic;
  RILL_TRY(r, call(api::group_list, req));
  RILL_TRY(out, parse_reply<proto::GroupListReply>(r));
  return std::vector<proto::GroupInfo>(out.groups().begin(), out.groups().end());
}

expected<void> client::delete_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                    const proto::Identifier& group) {
  RILL_TRY_VOID(call(api::group_delete, addressed<proto::GroupDeleteRequest>(stream, topic, group)));
  return {};
}

expected<proto::GroupJoinReply> client::join_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                                   const proto::Identifier& group,
                                                   const std::optional<std::string>& member_id) {
  auto req = addressed<proto::GroupJoinRequest>(stream, topic, group);
  if (member_id) {
    req.set_member_id(*member_id);
  }
  RILL_TRY(r, call(api::group_join, req));
  return parse_reply<proto::GroupJoinReply>(r);
}

expected<void> client::leave_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                   const proto::Identifier& group, const std::string& member_id) {
  auto req = addressed<proto::GroupLeaveRequest>(stream, topic, group);
  req.set_member_id(member_id);
  RILL_TRY_VOID(call(api::group_leave, req));
  return {};
}

expected<proto::GroupAssignment> client::heartbeat_group(const proto::Identifier& stream,
                                                         const proto::Identifier& topic, const proto::Identifier& group,
                                                         const std::string& member_id,
                                                         std::span<const std::uint32_t> released) {
  auto req = addressed<proto::GroupHeartbeatRequest>(stream, topic, group);
  req.set_member_id(member_id);
  for (auto p : released) {
    req.add_released(p);
  }
  RILL_TRY(r, call(api::group_heartbeat, req));
  return parse_reply<proto::GroupAssignment>(r);
}

expected<proto::GroupAssignment> client::group_assignment(const proto::Identifier& stream,
                                                          const proto::Identifier& topic,
                                                          const proto::Identifier& group,
                                                          const std::string& member_id) {
  auto req = addressed<proto::GroupAssignmentRequest>(stream, topic, group);
  req.set_member_id(member_id);
  RILL_TRY(r, call(api::group_assignment, req));
  return parse_reply<proto::GroupAssignment>(r);
}

expected<void> client::commit_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                    const proto::Identifier& group, const proto::GroupMember& member,
                                    const std::vector<std::pair<std::uint32_t, std::uint64_t>>& offsets) {
  auto req = addressed<proto::GroupCommitRequest>(stream, topic, group);
  *req.mutable_member() = member;
  for (const auto& [p, o] : offsets) {
    auto* po = req.add_offsets();
    po->set_partition_id(p);
    po->set_offset(o);
  }
  RILL_TRY_VOID(call(api::group_commit, req));
  return {};
}

expected<std::vector<proto::GroupPartition>> client::group_offsets(const proto::Identifier& stream,
                                                                   const proto::Identifier& topic,
                                                                   const proto::Identifier& group) {
  RILL_TRY(r, call(api::group_offsets, addressed<proto::GroupOffsetsRequest>(stream, topic, group)));
  RILL_TRY(out, parse_reply<proto::GroupOffsetsReply>(r));
  return std::vector<proto::GroupPartition>(out.partitions().begin(), out.partitions().end());
}

}  // namespace rill::net
