// group_handlers: the consumer-group API's decisions (see the header).
#include "actors/group_handlers.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

#include <fmt/core.h>

#include "actors/metadata_state.h"
#include "actors/request_header.h"
#include "base/assert.h"
#include "base/endian.h"
#include "net/frame.h"
#include "storage/crc32c.h"

namespace rill::actors {
namespace {

using time_point = group_state::time_point;

assignment_strategy strategy_of(const proto::GroupConfig& c) {
  return c.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? assignment_strategy::round_robin : assignment_strategy::range;
}

std::chrono::milliseconds session_timeout_of(const group_identity& id) {
  return std::chrono::milliseconds(id.config.session_timeout_ms());
}

void fill_assignment(proto::GroupAssignment& out, const group_state::member_view& v, std::uint32_t partitions) {
  out.set_generation(v.generation);
  for (auto p : v.owned) {
    out.add_owned(p);
  }
  for (auto p : v.revoking) {
    out.add_revoking(p);
  }
  out.set_partitions(partitions);
}

group_decision refuse(rill::error e) {
  group_decision d;
  d.error = std::move(e);
  return d;
}

group_decision reply(const google::protobuf::MessageLite& m, bool changed = false) {
  group_decision d;
  d.header = m.SerializeAsString();
  d.changed = changed;
  return d;
}

group_decision join(group_state& state, const group_identity& id, std::string_view header, time_point now,
                    group_state::connection_id conn) {
  auto req = parse_request_header<proto::GroupJoinRequest>(header);
  if (!req) {
    return refuse(req.error());
  }
  std::optional<std::string> wanted;
  if (req->has_member_id()) {
    if (auto ok = check_new_name("member id", req->member_id()); !ok) {
      return refuse(ok.error());
    }
    wanted = req->member_id();
  }
  const auto before = state.generation();
  auto joined = state.join(wanted, now, conn);
  if (!joined) {
    return refuse(joined.error());
  }
  proto::GroupJoinReply out;
  out.set_member_id(joined->member_id);
  out.set_generation(joined->generation);
  out.set_session_timeout_ms(id.config.session_timeout_ms());
  out.set_partitions(state.partitions());
  auto d = reply(out, state.generation() != before);
  d.sessions = !d.changed;
  return d;
}

group_decision heartbeat(group_state& state, std::string_view header, time_point now, group_state::connection_id conn) {
  auto req = parse_request_header<proto::GroupHeartbeatRequest>(header);
  if (!req) {
    return refuse(req.error());
  }
  std::vector<std::uint32_t> released(req->released().begin(), req->released().end());
  const auto before = state.assignment(req->member_id());
  // The member's session lives on the connection it joins and beats through (polls and commits may use others).
  auto v = state.heartbeat(req->member_id(), now, released, conn);
  if (!v) {
    return refuse(v.error());
  }
  proto::GroupAssignment out;
  fill_assignment(out, *v, state.partitions());
  auto d = reply(out, before && before->owned != v->owned);  // a release moved partitions
  d.sessions = !d.changed;
  return d;
}

group_decision commit(group_state& state, std::string_view header) {
  auto req = parse_request_header<proto::GroupCommitRequest>(header);
  if (!req) {
    return refuse(req.error());
  }
  const std::string& member = req->member().member_id();
  const std::uint64_t generation = req->member().generation();
  // All or nothing: every offset is checked before any is taken (a partition named twice counts once, at its last
  // offset, which may not be below the one before it).
  std::map<std::uint32_t, std::uint64_t> offsets;
  for (const auto& o : req->offsets()) {
    if (auto ok = state.check_read(member, generation, o.partition_id()); !ok) {
      return refuse(ok.error());
    }
    auto before = offsets.find(o.partition_id());
    const auto floor = before != offsets.end() ? std::optional(before->second) : state.committed(o.partition_id());
    if (floor && o.offset() < *floor) {
      return refuse(rill::error(
          make_error_code(group_errc::offset_regression),
          fmt::format("partition {}: commit of {} below the committed {}", o.partition_id(), o.offset(), *floor)));
    }
    offsets[o.partition_id()] = o.offset();
  }
  bool moved = false;
  for (const auto& [partition, offset] : offsets) {
    const auto c = state.committed(partition);
    const auto ok = state.commit(member, generation, partition, offset);
    RILL_ASSERT(ok.has_value(), "a commit checked above was refused: {}", ok ? "" : ok.error().message());
    moved = moved || c != offset;
  }
  return reply(proto::GroupCommitReply{}, moved);
}

group_decision offset_store(group_state& state, const group_identity& id, std::string_view header) {
  // An administrator's reset of the group's position (only while it has no members), logged.
  auto req = parse_request_header<proto::OffsetStoreRequest>(header);
  if (!req) {
    return refuse(req.error());
  }
  proto::OffsetStoreReply out;
  std::string was = "none";
  if (req->partition_id() < state.partitions()) {
    if (auto c = state.committed(req->partition_id())) {
      out.set_previous(*c);
      was = std::to_string(*c);
    }
  }
  if (auto ok = state.reset(req->partition_id(), req->offset()); !ok) {
    return refuse(ok.error());
  }
  auto d = reply(out, true);
  d.notice = fmt::format("group '{}' partition {}: offset reset from {} to {}", id.name, req->partition_id(), was,
                         req->offset());
  return d;
}

}  // namespace

std::string group_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic, std::uint32_t group) {
  return fmt::format("{}/groups/{}/{}/{}", data_dir, stream, topic, group);
}

net::status status_of_group(const std::error_code& code) noexcept {
  if (code.category() != group_category()) {
    return net::status_of(code);
  }
  switch (static_cast<group_errc>(code.value())) {
    case group_errc::unknown_member:
      return net::status::unknown_member;
    case group_errc::stale_generation:
      return net::status::stale_generation;
    case group_errc::not_owner:
      return net::status::not_owner;
    case group_errc::bad_partition:
      return net::status::partition_not_found;
    case group_errc::offset_regression:
      return net::status::offset_regression;
    case group_errc::group_full:
      return net::status::group_full;
    case group_errc::not_empty:
      return net::status::group_not_empty;
  }
  return net::status::internal_error;
}

group_decision decide_group_request(group_state& state, const group_identity& id, std::uint16_t api,
                                    std::string_view header, time_point now, group_state::connection_id conn) {
  const auto a = net::api_from_wire(api);
  state.advance(now);
  switch (a.value_or(net::api::ping)) {
    case net::api::group_join:
      return join(state, id, header, now, conn);
    case net::api::group_leave: {
      auto req = parse_request_header<proto::GroupLeaveRequest>(header);
      if (!req) {
        return refuse(req.error());
      }
      if (auto left = state.leave(req->member_id()); !left) {
        return refuse(left.error());
      }
      return reply(proto::GroupLeaveReply{}, true);
    }
    case net::api::group_heartbeat:
      return heartbeat(state, header, now, conn);
    case net::api::group_assignment: {
      auto req = parse_request_header<proto::GroupAssignmentRequest>(header);
      if (!req) {
        return refuse(req.error());
      }
      auto v = state.assignment(req->member_id());
      if (!v) {
        return refuse(v.error());
      }
      proto::GroupAssignment out;
      fill_assignment(out, *v, state.partitions());
      return reply(out);
    }
    case net::api::group_commit:
      return commit(state, header);
    case net::api::offset_get: {
      auto req = parse_request_header<proto::OffsetGetRequest>(header);
      if (!req) {
        return refuse(req.error());
      }
      if (req->partition_id() >= state.partitions()) {
        return refuse(rill::error(make_error_code(net::status::partition_not_found),
                                  fmt::format("partition {} of {}", req->partition_id(), state.partitions())));
      }
      proto::OffsetGetReply out;
      if (auto c = state.committed(req->partition_id())) {
        out.set_offset(*c);
      }
      return reply(out);
    }
    case net::api::offset_store:
      return offset_store(state, id, header);
    case net::api::group_get:
    case net::api::group_offsets: {
      // What it shows (generation, owners, offsets) is told only once it is on disk, like every reply.
      group_decision d;
      d.describe = true;
      d.offsets_only = *a == net::api::group_offsets;
      return d;
    }
    default:
      return refuse(
          rill::error(make_error_code(net::status::unknown_api), fmt::format("api {} is not a group request", api)));
  }
}

expected<group_poll> plan_group_poll(const group_state& state, proto::PollRequest req) {
  group_poll poll;
  poll.member = req.member().member_id();
  poll.partition = req.partition_id();
  poll.generation = req.member().generation();
  RILL_TRY_VOID(state.check_read(poll.member, poll.generation, poll.partition));
  if (req.strategy().kind() == proto::PollStrategy::NEXT) {
    // The group's position (the partition keeps it within the log: retention may have removed what it points at);
    // where it has none, the partition's first offset.
    if (auto c = state.committed(poll.partition)) {
      poll.resume_at = static_cast<std::int64_t>(std::min<std::uint64_t>(*c, INT64_MAX));
    } else {
      req.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
    }
  }
  poll.auto_commit = req.auto_commit();
  req.set_auto_commit(false);  // the partition stores named consumers' offsets only; the group commits its own
  poll.request = std::move(req);
  return poll;
}

expected<void> check_delivery(const group_state& state, const group_poll& poll) {
  if (!state.still_owns(poll.member, poll.generation, poll.partition)) {
    return rill::unexpected(
        make_error_code(net::status::not_owner),
        fmt::format("partition {} changed hands while the poll of {} waited", poll.partition, poll.member));
  }
  return {};
}

delivery_commit commit_delivered(group_state& state, const group_poll& poll, std::int64_t next_offset) {
  delivery_commit d;
  if (!poll.auto_commit) {
    return d;
  }
  RILL_ASSERT(next_offset >= 0, "next offset {}", next_offset);
  const auto next = static_cast<std::uint64_t>(next_offset);
  const auto c = state.committed(poll.partition);
  if (!c || *c < next) {
    d.changed = state.commit(poll.member, state.generation(), poll.partition, next).has_value();
    d.wait = true;
  }
  return d;
}

bool on_disconnect(group_state& state, time_point now, group_state::connection_id conn) {
  state.advance(now);
  return !state.disconnected(conn).empty();
}

bool on_expire(group_state& state, time_point now) {
  const auto before = state.generation();
  (void)state.expire(now);
  // Members removed, or revoked partitions taken from owners that kept them too long.
  return state.generation() != before;
}

bool on_resize(group_state& state, time_point now, std::uint32_t partitions) {
  if (partitions == state.partitions()) {
    return false;
  }
  state.advance(now);
  state.resize(partitions);
  return true;
}

proto::GroupInfo describe_group(const group_identity& id, const group_state* state, time_point now) {
  proto::GroupInfo info;
  info.set_stream_id(id.stream_id);
  info.set_topic_id(id.topic_id);
  info.set_id(id.group_id);
  info.set_name(id.name);
  info.set_created_ms(id.created_ms);
  info.set_strategy(id.config.strategy());
  info.set_session_timeout_ms(id.config.session_timeout_ms());
  if (state == nullptr) {
    return info;
  }
  info.set_generation(state->generation());
  info.set_stable(state->stable());
  for (const auto& m : state->member_list()) {
    auto* pm = info.add_members();
    pm->set_member_id(m.id);
    const auto v = *state->assignment(m.id);
    for (auto p : v.owned) {
      pm->add_owned(p);
    }
    for (auto p : v.revoking) {
      pm->add_revoking(p);
    }
    pm->set_session_left_ms(static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(m.expires_at - now).count())));
  }
  return info;
}

void describe_partition(proto::GroupInfo& info, const group_state& state, std::uint32_t p,
                        const proto::PartitionInfo* partition) {
  RILL_ASSERT(p < state.partitions(), "partition {} of {}", p, state.partitions());
  auto* gp = info.add_partitions();
  gp->set_partition_id(p);
  if (auto o = state.owner(p)) {
    gp->set_owner(*o);
  }
  if (auto t = state.target(p)) {
    gp->set_target(*t);
  }
  const auto committed = state.committed(p);
  if (committed) {
    gp->set_committed(*committed);
  }
  if (partition != nullptr) {
    gp->set_high_watermark(partition->high_watermark());
    gp->set_log_start(partition->log_start());
    const std::uint64_t from = std::max(committed.value_or(0), partition->log_start());
    gp->set_lag(partition->high_watermark() > from ? partition->high_watermark() - from : 0);
  }
}

std::string describe_reply(bool offsets_only, proto::GroupInfo info) {
  if (offsets_only) {
    proto::GroupOffsetsReply out;
    *out.mutable_partitions() = std::move(*info.mutable_partitions());
    return out.SerializeAsString();
  }
  proto::GroupGetReply out;
  *out.mutable_group() = std::move(info);
  return out.SerializeAsString();
}

std::vector<std::byte> encode_state_file(const group_state& state) {
  const std::string body = state.serialize();
  std::vector<std::byte> bytes(body.size() + 4);
  std::memcpy(bytes.data(), body.data(), body.size());
  store_be<std::uint32_t>(bytes.data() + body.size(), storage::crc32c(bytes.data(), body.size()));
  return bytes;
}

std::optional<group_state> decode_state_file(std::span<const std::byte> b, const group_identity& id, time_point now) {
  if (b.size() < 4) {
    return std::nullopt;
  }
  const std::size_t body = b.size() - 4;
  if (load_be<std::uint32_t>(b.data() + body) != storage::crc32c(b.data(), body)) {
    return std::nullopt;
  }
  auto restored = group_state::restore(std::string_view(reinterpret_cast<const char*>(b.data()), body),
                                       strategy_of(id.config), session_timeout_of(id), id.partitions, now);
  if (!restored) {
    return std::nullopt;
  }
  return std::move(*restored);
}

group_state fresh_group_state(const group_identity& id) {
  return group_state(id.partitions, strategy_of(id.config), session_timeout_of(id));
}

}  // namespace rill::actors
