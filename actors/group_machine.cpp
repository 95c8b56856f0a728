// group_machine: a coordinator's consumer groups as a replicated state machine (see the header).
#include "actors/group_machine.h"

#include <algorithm>

#include <fmt/core.h>

#include "actors/group_handlers.h"
#include "base/assert.h"
#include "base/endian.h"
#include "net/murmur2.h"
#include "net/proto/coordinator.pb.h"
#include "net/status.h"

namespace rill::actors {
namespace {

using time_point = group_state::time_point;

time_point at_ms(std::int64_t ms) {
  return std::chrono::duration_cast<time_point>(std::chrono::milliseconds(ms));
}

void refuse(proto::CoordinatorReply& reply, net::status s, std::string detail) {
  reply.set_status(static_cast<std::uint32_t>(s));
  reply.set_detail(std::move(detail));
}

void refuse(proto::CoordinatorReply& reply, const error& e) {
  refuse(reply, status_of_group(e.code()), e.message());
}

void put_view(proto::CoordinatorReply& reply, const group_state::member_view& v) {
  reply.set_generation(v.generation);
  for (const auto p : v.owned) {
    reply.add_owned(p);
  }
  for (const auto g : v.acquired) {
    reply.add_acquired(g);
  }
  for (const auto p : v.revoking) {
    reply.add_revoking(p);
  }
}

std::vector<std::byte> bytes_of(const google::protobuf::MessageLite& m) {
  std::vector<std::byte> out(m.ByteSizeLong());
  if (!out.empty()) {
    RILL_ASSERT(m.SerializeToArray(out.data(), static_cast<int>(out.size())));
  }
  return out;
}

template <typename M>
bool parse(M& m, std::span<const std::byte> bytes) {
  return bytes.size() <= static_cast<std::size_t>(INT32_MAX) &&
         m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

std::uint32_t coordinator_for(const group_key& key, std::uint32_t coordinators) {
  RILL_ASSERT(coordinators > 0);
  std::vector<std::byte> bytes(8 + key.name.size());
  store_be<std::uint32_t>(bytes.data(), key.stream);
  store_be<std::uint32_t>(bytes.data() + 4, key.topic);
  std::transform(key.name.begin(), key.name.end(), bytes.begin() + 8, [](char c) { return std::byte(c); });
  return static_cast<std::uint32_t>(net::murmur2(bytes) & 0x7fffffff) % coordinators;
}

group_machine::group_machine(group_machine_options options, wall_clock now_ms)
    : options_(options), now_ms_(std::move(now_ms)) {}

std::vector<std::byte> group_machine::encode(const proto::CoordinatorCommand& command) {
  return bytes_of(command);
}

expected<proto::CoordinatorReply> group_machine::decode_reply(std::span<const std::byte> bytes) {
  proto::CoordinatorReply r;
  if (!parse(r, bytes)) {
    return rill::unexpected(make_error_code(net::status::internal_error), "a coordinator reply that does not parse");
  }
  return r;
}

group_machine::proposal group_machine::prepare(const consensus::header& request, const prepare_context& at,
                                               std::vector<std::byte> body,
                                               std::span<const consensus::message* const> pending) {
  (void)at;
  proto::CoordinatorCommand c;
  if (request.operation != options_.operation || !parse(c, body)) {
    return {request.operation, std::move(body)};  // apply() answers it (bad_header), the same everywhere
  }
  // The primary's time, never below an op before it: applied, or pending (stamped by this primary or an earlier one).
  std::int64_t floor = time_ms_;
  for (const consensus::message* m : pending) {
    proto::CoordinatorCommand p;
    if (m->h.operation == options_.operation && parse(p, m->body)) {
      floor = std::max(floor, p.time_ms());
    }
  }
  c.set_time_ms(std::max(floor, now_ms_()));
  return {options_.operation, encode(c)};
}

std::vector<std::byte> group_machine::apply(const consensus::header& prepare, std::span<const std::byte> body) {
  proto::CoordinatorReply reply;
  proto::CoordinatorCommand c;
  if (prepare.operation != options_.operation || !parse(c, body)) {
    refuse(reply, net::status::bad_header, "a coordinator command that does not parse");
    return bytes_of(reply);
  }
  time_ms_ = std::max(time_ms_, c.time_ms());
  run(c, reply);
  return bytes_of(reply);
}

void group_machine::run(const proto::CoordinatorCommand& c, proto::CoordinatorReply& reply) {
  const time_point now = at_ms(time_ms_);
  using cmd = proto::CoordinatorCommand;
  // Commands over every group.
  switch (c.command_case()) {
    case cmd::kExpire:
    case cmd::kDisconnected:
    case cmd::kRefresh:
      for (auto& [key, g] : groups_) {
        std::vector<std::string> gone;
        if (c.has_expire()) {
          gone = g.expire(now);
        } else if (c.has_disconnected()) {
          g.advance(now);
          gone = g.disconnected(c.disconnected().conn());
        } else {
          g.refresh(now);
        }
        for (const auto& id : gone) {
          reply.add_removed(key.name + "/" + id);
        }
      }
      return;
    case cmd::kSync:
      return;  // a read barrier: nothing changes
    case cmd::COMMAND_NOT_SET:
      refuse(reply, net::status::bad_header, "a coordinator command without a command");
      return;
    default:
      break;
  }
  const group_key key{c.stream_id(), c.topic_id(), c.group()};
  if (key.name.empty() || key.name.size() > options_.group_name_bytes_max) {
    refuse(reply, net::status::invalid_name,
           fmt::format("a group name is 1 to {} bytes, not {}", options_.group_name_bytes_max, key.name.size()));
    return;
  }
  if (c.has_create()) {
    const auto& k = c.create();
    if (groups_.contains(key)) {
      refuse(reply, net::status::already_exists, "the group exists");
    } else if (groups_.size() >= options_.groups_max) {
      refuse(reply, net::status::limit_exceeded,
             fmt::format("this coordinator serves {} groups, the most it takes (groups_max)", options_.groups_max));
    } else if (k.partitions() == 0 || k.partitions() > options_.partitions_max) {
      refuse(reply, net::status::invalid_config,
             fmt::format("partitions = {}: allowed range is [1, {}]", k.partitions(), options_.partitions_max));
    } else if (k.session_timeout_ms() < options_.session_timeout_ms_min ||
               k.session_timeout_ms() > options_.session_timeout_ms_max) {
      refuse(reply, net::status::invalid_config,
             fmt::format("session_timeout_ms = {}: allowed range is [{}, {}]", k.session_timeout_ms(),
                         options_.session_timeout_ms_min, options_.session_timeout_ms_max));
    } else if (k.partitions_created_size() != 0 && k.partitions_created_size() != static_cast<int>(k.partitions())) {
      refuse(reply, net::status::invalid_config,
             fmt::format("{} partition incarnations for {} partitions", k.partitions_created_size(), k.partitions()));
    } else if (k.strategy() > 1) {
      refuse(reply, net::status::invalid_config,
             fmt::format("strategy = {}: 0 (range) or 1 (round robin)", k.strategy()));
    } else {
      group_state g(k.partitions(), k.strategy() == 1 ? assignment_strategy::round_robin : assignment_strategy::range,
                    std::chrono::milliseconds(k.session_timeout_ms()));
      g.advance(now);
      g.set_incarnation(k.incarnation());
      if (k.partitions_created_size() != 0) {
        g.set_partitions_created(std::span(k.partitions_created().data(), k.partitions_created().size()));
      }
      groups_.emplace(key, std::move(g));
    }
    return;
  }
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    refuse(reply, net::status::group_not_found, "no such group at this coordinator");
    return;
  }
  group_state& g = it->second;
  g.advance(now);
  auto member_id_ok = [&](const std::string& id) {
    if (id.empty() || id.size() > options_.member_id_bytes_max) {
      refuse(reply, net::status::invalid_name,
             fmt::format("a member id is 1 to {} bytes, not {}", options_.member_id_bytes_max, id.size()));
      return false;
    }
    return true;
  };
  switch (c.command_case()) {
    case cmd::kRemove:
      if (c.remove().has_incarnation() && c.remove().incarnation() != g.incarnation()) {
        refuse(reply, net::status::group_not_found,
               fmt::format("incarnation {} of the group is gone (this one is {})", c.remove().incarnation(),
                           g.incarnation()));
        return;
      }
      groups_.erase(it);
      return;
    case cmd::kJoin: {
      const auto& j = c.join();
      std::optional<std::string> id;
      if (j.has_member_id()) {
        if (!member_id_ok(j.member_id())) {
          return;
        }
        id = j.member_id();
      }
      const bool rejoin = id && g.has_member(*id);
      if (!rejoin && members() >= options_.members_max) {
        refuse(reply, net::status::limit_exceeded,
               fmt::format("this coordinator's groups have {} members, the most it takes (members_max)",
                           options_.members_max));
        return;
      }
      auto r = g.join(id, now, j.conn());
      if (!r) {
        refuse(reply, r.error());
        return;
      }
      reply.set_member_id(r->member_id);
      put_view(reply, *g.assignment(r->member_id));
      return;
    }
    case cmd::kHeartbeat: {
      const auto& h = c.heartbeat();
      std::vector<std::uint32_t> released(h.released().begin(), h.released().end());
      auto r = g.heartbeat(h.member_id(), now, released, h.conn());
      if (!r) {
        refuse(reply, r.error());
        return;
      }
      reply.set_member_id(h.member_id());
      put_view(reply, *r);
      return;
    }
    case cmd::kLeave: {
      auto r = g.leave(c.leave().member_id());
      if (!r) {
        refuse(reply, r.error());
      }
      return;
    }
    case cmd::kCommit: {
      // All or none: every offset is checked before any is stored.
      const auto& k = c.commit();
      std::map<std::uint32_t, std::uint64_t> above;  // an offset named earlier in this request
      for (const auto& po : k.offsets()) {
        if (auto ok = g.check_read(k.member_id(), k.generation(), po.partition());
            !ok && !(options_.bug_commit_unowned && ok.error().code() == make_error_code(group_errc::not_owner))) {
          refuse(reply, ok.error());
          return;
        }
        const auto before =
            above.contains(po.partition()) ? std::optional(above[po.partition()]) : g.committed(po.partition());
        if (before && po.offset() < *before) {
          refuse(
              reply, net::status::offset_regression,
              fmt::format("partition {}: commit of {} below the committed {}", po.partition(), po.offset(), *before));
          return;
        }
        above[po.partition()] = po.offset();
      }
      for (const auto& [p, offset] : above) {
        if (options_.bug_commit_unowned) {
          g.bug_store_committed(p, offset);
          continue;
        }
        RILL_ASSERT(g.commit(k.member_id(), k.generation(), p, offset).has_value(), "a checked commit failed");
      }
      reply.set_generation(g.generation());
      return;
    }
    case cmd::kReset: {
      if (g.members() > 0) {
        refuse(reply, net::status::group_not_empty,
               fmt::format("the group has {} members: offsets are reset only while it has none", g.members()));
        return;
      }
      for (const auto& po : c.reset().offsets()) {
        if (po.partition() >= g.partitions()) {
          refuse(reply, net::status::partition_not_found,
                 fmt::format("partition {} of {}", po.partition(), g.partitions()));
          return;
        }
      }
      for (const auto& po : c.reset().offsets()) {
        RILL_ASSERT(g.reset(po.partition(), po.offset()).has_value());
      }
      return;
    }
    case cmd::kResize:
      if (c.resize().partitions() == 0 || c.resize().partitions() > options_.partitions_max) {
        refuse(
            reply, net::status::invalid_config,
            fmt::format("partitions = {}: allowed range is [1, {}]", c.resize().partitions(), options_.partitions_max));
        return;
      }
      if (c.resize().partitions_created_size() != 0 &&
          c.resize().partitions_created_size() != static_cast<int>(c.resize().partitions())) {
        refuse(reply, net::status::invalid_config,
               fmt::format("{} partition incarnations for {} partitions", c.resize().partitions_created_size(),
                           c.resize().partitions()));
        return;
      }
      g.resize(c.resize().partitions(),
               std::span(c.resize().partitions_created().data(), c.resize().partitions_created().size()),
               options_.bug_offsets_survive_partition);
      reply.set_generation(g.generation());
      return;
    default:
      refuse(reply, net::status::bad_header, "an unknown coordinator command");
      return;
  }
}

std::vector<std::byte> group_machine::snapshot() const {
  proto::CoordinatorSnapshot s;
  s.set_time_ms(time_ms_);
  for (const auto& [key, g] : groups_) {
    auto* pg = s.add_groups();
    pg->set_stream_id(key.stream);
    pg->set_topic_id(key.topic);
    pg->set_name(key.name);
    g.save_whole(*pg->mutable_state());
  }
  return bytes_of(s);
}

bool group_machine::restore(std::span<const std::byte> bytes) {
  proto::CoordinatorSnapshot s;
  if (!parse(s, bytes)) {
    return false;
  }
  std::map<group_key, group_state> groups;
  for (const auto& pg : s.groups()) {
    auto g = group_state::load_whole(pg.state());
    if (!g || !groups.emplace(group_key{pg.stream_id(), pg.topic_id(), pg.name()}, std::move(*g)).second) {
      return false;
    }
  }
  groups_ = std::move(groups);
  time_ms_ = s.time_ms();
  return true;
}

const group_state* group_machine::find(const group_key& key) const {
  auto it = groups_.find(key);
  return it == groups_.end() ? nullptr : &it->second;
}

std::size_t group_machine::members() const noexcept {
  std::size_t n = 0;
  for (const auto& [key, g] : groups_) {
    n += g.members();
  }
  return n;
}

std::optional<std::int64_t> group_machine::next_deadline_ms() const {
  std::optional<std::int64_t> out;
  for (const auto& [key, g] : groups_) {
    if (auto d = g.next_deadline()) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*d).count();
      out = out ? std::min(*out, ms) : ms;
    }
  }
  return out;
}

void group_machine::check_invariants() const {
  RILL_ASSERT(groups_.size() <= options_.groups_max);
  RILL_ASSERT(members() <= options_.members_max);
  for (const auto& [key, g] : groups_) {
    RILL_ASSERT(!key.name.empty() && key.name.size() <= options_.group_name_bytes_max);
    g.check_invariants();
  }
}

}  // namespace rill::actors
