#include "actors/group_actor.hpp"

#include <fmt/core.h>

#include "actors/actor_request.hpp"
#include "actors/runtime/shard.h"
#include "base/endian.h"
#include "net/frame.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {
using expire_atom = caf::atom_constant<caf::atom("expire")>;

constexpr const char* state_file = "state";
constexpr std::uint64_t state_bytes_max = 64 << 20;

outcome outcome_of(const rill::error& e) {
  return outcome{status_of_group(e.code()), e.detail().empty() ? e.message() : e.detail()};
}

assignment_strategy strategy_of(const proto::GroupConfig& c) {
  return c.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? assignment_strategy::round_robin : assignment_strategy::range;
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
}  // namespace

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

std::string group_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic, std::uint32_t group) {
  return fmt::format("{}/groups/{}/{}/{}", data_dir, stream, topic, group);
}

group_actor::group_actor(caf::actor_config& cfg, std::size_t home, group_identity id, const group_services* services)
    : metered<>(cfg, "group", home), homed(home), id_(std::move(id)), services_(services) {
  set_metrics_name(fmt::format("{}/{}/{}", id_.stream_id, id_.topic_id, id_.name));
  published_->stream_id = id_.stream_id;
  published_->topic_id = id_.topic_id;
  published_->name = id_.name;
  attach_metrics<group_metrics>(published_);
}

void group_actor::publish_metrics() {
  if (!state_) {
    return;
  }
  published_->members.store(state_->members(), std::memory_order_relaxed);
  if (published_->generation.load(std::memory_order_relaxed) != state_->generation()) {
    published_->generation.store(state_->generation(), std::memory_order_relaxed);
    bump(published_->rebalances);
  }
  std::vector<std::optional<std::uint64_t>> committed(state_->partitions());
  for (std::uint32_t p = 0; p < committed.size(); ++p) {
    committed[p] = state_->committed(p);
  }
  std::lock_guard<std::mutex> guard(published_->mutex);
  published_->committed = std::move(committed);
}

task<expected<group_state>> group_actor::load() {
  RILL_CO_TRY_VOID(co_await storage::make_dirs(*io_, id_.dir));
  const auto strategy = strategy_of(id_.config);
  const auto timeout = std::chrono::milliseconds(id_.config.session_timeout_ms());
  const std::string path = storage::join_path(id_.dir, state_file);
  RILL_CO_TRY(bytes, co_await storage::read_whole_file(*io_, path, state_bytes_max));
  const auto now = services_->clk->monotonic();
  if (!bytes) {
    co_return group_state(id_.partitions, strategy, timeout);
  }
  const auto& b = *bytes;
  if (b.size() >= 4) {
    const std::size_t body = b.size() - 4;
    if (load_be<std::uint32_t>(b.data() + body) == storage::crc32c(b.data(), body)) {
      auto restored = group_state::restore(std::string_view(reinterpret_cast<const char*>(b.data()), body), strategy,
                                           timeout, id_.partitions, now);
      if (restored) {
        co_return std::move(*restored);
      }
    }
  }
  // Never silently: the group starts over from its members' poll strategies, and says so.
  services_->reporter->corruption(path, 0, "consumer group state does not verify",
                                  "ignored: the group starts without members and committed offsets");
  co_return group_state(id_.partitions, strategy, timeout);
}

caf::behavior group_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  ++operations_;
  rill::spawn(load(), [this](expected<group_state> r) {
    --operations_;
    if (r) {
      state_.emplace(std::move(*r));
      ++version_;  // a restored group writes itself back (a new generation, or fresh sessions) at once
      changed();
    } else {
      error_ = r.error();
      services_->reporter->notice(fmt::format("group {}: cannot open: {}", id_.dir, r.error().message()));
    }
    set_default_handler(caf::print_and_drop);
    become(serving());
  });
  // Until the state is loaded, only I/O completions are handled; everything else waits in the mailbox.
  set_default_handler(caf::skip);
  return io_completion_handler(*io_);
}

void group_actor::step() {
  if (services_->on_step && state_) {
    services_->on_step(*state_);
  }
}

void group_actor::changed() {
  ++version_;
  persist();
  schedule_expiry();
  publish_metrics();
}

void group_actor::when_durable(done_fn then) {
  if (error_) {
    then(error_);
    return;
  }
  if (durable_ >= version_) {
    then(std::nullopt);
    return;
  }
  waiting_.emplace_back(version_, std::move(then));
  persist();
}

void group_actor::persist() {
  if (writing_ || error_ || !state_ || durable_ >= version_) {
    return;
  }
  writing_ = true;
  const std::uint64_t v = version_;
  const std::string body = state_->serialize();
  std::vector<std::byte> bytes(body.size() + 4);
  std::memcpy(bytes.data(), body.data(), body.size());
  store_be<std::uint32_t>(bytes.data() + body.size(), storage::crc32c(bytes.data(), body.size()));
  ++operations_;
  rill::spawn(storage::write_file_atomic(*io_, id_.dir, state_file, std::move(bytes)), [this, v](expected<void> r) {
    --operations_;
    writing_ = false;
    if (!r) {
      // After a failed write nothing newer can be promised: the group refuses everything until a restart.
      error_ = rill::error(make_error_code(net::status::storage_error),
                           fmt::format("group {}: writing its state failed: {}", id_.name, r.error().message()));
      services_->reporter->notice(error_->detail());
    } else {
      durable_ = v;
    }
    while (!waiting_.empty() && (error_ || waiting_.front().first <= durable_)) {
      auto then = std::move(waiting_.front().second);
      waiting_.pop_front();
      then(error_);
    }
    persist();
    maybe_quit();
  });
}

void group_actor::schedule_expiry() {
  if (!state_ || closing_) {
    return;
  }
  const auto due = state_->next_deadline();
  if (!due || (expiry_at_ && *expiry_at_ <= *due)) {
    return;
  }
  expiry_at_ = due;
  const auto delay = *due - services_->clk->monotonic();
  auto self = caf::actor_cast<caf::actor>(this);
  current_shard()->timers().schedule(monotonic_now() + std::max(delay, std::chrono::nanoseconds(0)),
                                     [self] { caf::anon_send(self, expire_atom::value); });
}

group_reply group_actor::reply_after(const std::optional<rill::error>& e, std::string header) const {
  if (e) {
    return group_reply{outcome::of(*e), {}};
  }
  return group_reply{outcome{}, std::move(header)};
}

task<expected<proto::GroupInfo>> group_actor::describe() {
  proto::GroupInfo info;
  info.set_stream_id(id_.stream_id);
  info.set_topic_id(id_.topic_id);
  info.set_id(id_.group_id);
  info.set_name(id_.name);
  info.set_created_ms(id_.created_ms);
  info.set_strategy(id_.config.strategy());
  info.set_session_timeout_ms(id_.config.session_timeout_ms());
  if (!state_) {
    co_return info;
  }
  info.set_generation(state_->generation());
  info.set_stable(state_->stable());
  const auto now = services_->clk->monotonic();
  for (const auto& m : state_->member_list()) {
    auto* pm = info.add_members();
    pm->set_member_id(m.id);
    const auto v = *state_->assignment(m.id);
    for (auto p : v.owned) {
      pm->add_owned(p);
    }
    for (auto p : v.revoking) {
      pm->add_revoking(p);
    }
    pm->set_session_left_ms(static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(m.expires_at - now).count())));
  }
  const auto table = services_->routes ? services_->routes->current() : nullptr;
  for (std::uint32_t p = 0; p < state_->partitions(); ++p) {
    // Partition offsets first: the state may change while we wait, so what it says is read after.
    std::optional<proto::PartitionInfo> pinfo;
    if (table) {
      if (auto actor = table->partition(id_.stream_id, id_.topic_id, p)) {
        auto r = co_await actor_request<partition_info, info_atom>(this, actor, info_atom::value);
        if (r && r->result.ok()) {
          pinfo = r->info;
        }
      }
    }
    if (!state_ || p >= state_->partitions()) {
      break;
    }
    auto* gp = info.add_partitions();
    gp->set_partition_id(p);
    if (auto o = state_->owner(p)) {
      gp->set_owner(*o);
    }
    if (auto t = state_->target(p)) {
      gp->set_target(*t);
    }
    const auto committed = state_->committed(p);
    if (committed) {
      gp->set_committed(*committed);
    }
    if (pinfo) {
      gp->set_high_watermark(pinfo->high_watermark());
      gp->set_log_start(pinfo->log_start());
      const std::uint64_t from = std::max(committed.value_or(0), pinfo->log_start());
      gp->set_lag(pinfo->high_watermark() > from ? pinfo->high_watermark() - from : 0);
    }
  }
  co_return info;
}

caf::result<group_reply> group_actor::handle(group_msg& msg) {
  if (error_ || !state_) {
    return group_reply{error_ ? outcome::of(*error_) : outcome{net::status::unavailable, "the group is not open"}, {}};
  }
  if (closing_) {
    return group_reply{outcome{net::status::unavailable, "the group is closing"}, {}};
  }
  const auto a = net::api_from_wire(msg.api);
  const auto now = services_->clk->monotonic();
  state_->advance(now);
  auto error_reply = [](const rill::error& e) { return group_reply{outcome_of(e), {}}; };
  auto durable_reply = [this](std::string header) -> caf::result<group_reply> {
    auto rp = make_response_promise<group_reply>();
    when_durable([this, rp, header = std::move(header)](const std::optional<rill::error>& e) mutable {
      rp.deliver(reply_after(e, std::move(header)));
    });
    return rp;
  };
  switch (a.value_or(net::api::ping)) {
    case net::api::group_join: {
      auto req = parse_header<proto::GroupJoinRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      std::optional<std::string> wanted;
      if (req->has_member_id()) {
        if (auto ok = check_name("member id", req->member_id()); !ok) {
          return error_reply(ok.error());
        }
        wanted = req->member_id();
      }
      const auto before = state_->generation();
      auto joined = state_->join(wanted, now, msg.connection);
      if (!joined) {
        return error_reply(joined.error());
      }
      if (state_->generation() != before) {
        changed();
      } else {
        schedule_expiry();
      }
      proto::GroupJoinReply out;
      out.set_member_id(joined->member_id);
      out.set_generation(joined->generation);
      out.set_session_timeout_ms(id_.config.session_timeout_ms());
      out.set_partitions(state_->partitions());
      return durable_reply(out.SerializeAsString());
    }
    case net::api::group_leave: {
      auto req = parse_header<proto::GroupLeaveRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      if (auto left = state_->leave(req->member_id()); !left) {
        return error_reply(left.error());
      }
      changed();
      return durable_reply(proto::GroupLeaveReply{}.SerializeAsString());
    }
    case net::api::group_heartbeat: {
      auto req = parse_header<proto::GroupHeartbeatRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      std::vector<std::uint32_t> released(req->released().begin(), req->released().end());
      const auto before = state_->assignment(req->member_id());
      // The member's session lives on the connection it joins and beats through (polls and commits may use others).
      auto v = state_->heartbeat(req->member_id(), now, released, msg.connection);
      if (!v) {
        return error_reply(v.error());
      }
      if (before && before->owned != v->owned) {
        changed();  // a release moved partitions
      } else {
        schedule_expiry();
      }
      proto::GroupAssignment out;
      fill_assignment(out, *v, state_->partitions());
      return durable_reply(out.SerializeAsString());
    }
    case net::api::group_assignment: {
      auto req = parse_header<proto::GroupAssignmentRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      auto v = state_->assignment(req->member_id());
      if (!v) {
        return error_reply(v.error());
      }
      proto::GroupAssignment out;
      fill_assignment(out, *v, state_->partitions());
      return durable_reply(out.SerializeAsString());
    }
    case net::api::group_commit: {
      auto req = parse_header<proto::GroupCommitRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      // All or nothing: every offset is checked before any is taken (a partition named twice counts once, at its
      // last offset, which may not be below the one before it).
      std::map<std::uint32_t, std::uint64_t> offsets;
      for (const auto& o : req->offsets()) {
        if (auto ok = state_->check_read(req->member().member_id(), req->member().generation(), o.partition_id());
            !ok) {
          return error_reply(ok.error());
        }
        auto before = offsets.find(o.partition_id());
        const auto floor =
            before != offsets.end() ? std::optional(before->second) : state_->committed(o.partition_id());
        if (floor && o.offset() < *floor) {
          return error_reply(rill::error(
              make_error_code(group_errc::offset_regression),
              fmt::format("partition {}: commit of {} below the committed {}", o.partition_id(), o.offset(), *floor)));
        }
        offsets[o.partition_id()] = o.offset();
      }
      bool moved = false;
      for (const auto& [partition, offset] : offsets) {
        const auto c = state_->committed(partition);
        if (auto ok = state_->commit(req->member().member_id(), req->member().generation(), partition, offset); !ok) {
          return error_reply(ok.error());  // not reached: checked above
        }
        moved = moved || c != offset;
      }
      if (moved) {
        changed();
      }
      return durable_reply(proto::GroupCommitReply{}.SerializeAsString());
    }
    case net::api::offset_get: {
      auto req = parse_header<proto::OffsetGetRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      if (req->partition_id() >= state_->partitions()) {
        return group_reply{outcome{net::status::partition_not_found,
                                   fmt::format("partition {} of {}", req->partition_id(), state_->partitions())},
                           {}};
      }
      proto::OffsetGetReply out;
      if (auto c = state_->committed(req->partition_id())) {
        out.set_offset(*c);
      }
      return durable_reply(out.SerializeAsString());
    }
    case net::api::offset_store: {
      // An administrator's reset of the group's position (only while it has no members), logged.
      auto req = parse_header<proto::OffsetStoreRequest>(msg.header);
      if (!req) {
        return error_reply(req.error());
      }
      proto::OffsetStoreReply out;
      std::string was = "none";
      if (req->partition_id() < state_->partitions()) {
        if (auto c = state_->committed(req->partition_id())) {
          out.set_previous(*c);
          was = std::to_string(*c);
        }
      }
      if (auto ok = state_->reset(req->partition_id(), req->offset()); !ok) {
        return error_reply(ok.error());
      }
      services_->reporter->notice(fmt::format("group '{}' partition {}: offset reset from {} to {}", id_.name,
                                              req->partition_id(), was, req->offset()));
      changed();
      return durable_reply(out.SerializeAsString());
    }
    case net::api::group_get:
    case net::api::group_offsets: {
      const bool offsets_only = *a == net::api::group_offsets;
      auto rp = make_response_promise<group_reply>();
      ++operations_;
      rill::spawn(describe(), [this, rp, offsets_only](expected<proto::GroupInfo> info) mutable {
        --operations_;
        if (!info) {
          rp.deliver(group_reply{outcome::of(info.error()), {}});
          maybe_quit();
          return;
        }
        std::string header;
        if (offsets_only) {
          proto::GroupOffsetsReply out;
          *out.mutable_partitions() = std::move(*info->mutable_partitions());
          header = out.SerializeAsString();
        } else {
          proto::GroupGetReply out;
          *out.mutable_group() = std::move(*info);
          header = out.SerializeAsString();
        }
        // What it shows (generation, owners, offsets) is told only once it is on disk.
        when_durable([this, rp, header = std::move(header)](const std::optional<rill::error>& e) mutable {
          rp.deliver(reply_after(e, std::move(header)));
        });
        maybe_quit();
      });
      return rp;
    }
    default:
      return group_reply{outcome{net::status::unknown_api, fmt::format("api {} is not a group request", msg.api)}, {}};
  }
}

caf::result<poll_reply> group_actor::handle_poll(group_poll_msg& msg) {
  if (error_ || !state_ || closing_) {
    return poll_reply{error_ ? outcome::of(*error_) : outcome{net::status::unavailable, "the group is not open"},
                      nullptr};
  }
  proto::PollRequest req = std::move(msg.request);
  const std::string member = req.member().member_id();
  const std::uint32_t partition = req.partition_id();
  if (auto ok = state_->check_read(member, req.member().generation(), partition); !ok) {
    return poll_reply{outcome_of(ok.error()), nullptr};
  }
  std::optional<std::int64_t> resume_at;
  if (req.strategy().kind() == proto::PollStrategy::NEXT) {
    // The group's position (the partition keeps it within the log: retention may have removed what it points at);
    // where it has none, the partition's first offset.
    if (auto c = state_->committed(partition)) {
      resume_at = static_cast<std::int64_t>(std::min<std::uint64_t>(*c, INT64_MAX));
    } else {
      req.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
    }
  }
  const std::uint64_t generation = req.member().generation();
  const bool auto_commit = req.auto_commit();
  req.set_auto_commit(false);  // the partition stores named consumers' offsets only; the group commits its own
  auto rp = make_response_promise<poll_reply>();
  const std::uint64_t poll_id = next_poll_++;
  polls_.emplace(poll_id, rp);
  request(msg.partition, caf::infinite, poll_atom::value, poll_msg{std::move(req), resume_at})
      .then(
          [this, poll_id, member, partition, generation, auto_commit](poll_reply& r) mutable {
            auto it = polls_.find(poll_id);
            if (it == polls_.end()) {
              return;  // answered when the group closed
            }
            auto promise = it->second;
            polls_.erase(it);
            if (!r.result.ok() || !state_) {
              promise.deliver(std::move(r));
              return;
            }
            // The instant of delivery: the member must own the partition now, whatever happened while it waited.
            if (!state_->still_owns(member, generation, partition)) {
              promise.deliver(poll_reply{
                  outcome{net::status::not_owner,
                          fmt::format("partition {} changed hands while the poll of {} waited", partition, member)},
                  nullptr});
              step();
              return;
            }
            if (r.data && r.data->batches > 0) {
              if (services_->on_delivered) {
                services_->on_delivered(*state_, member, partition);
              }
              if (auto_commit) {
                const auto next = static_cast<std::uint64_t>(r.data->next_offset.value());
                const auto c = state_->committed(partition);
                if (!c || *c < next) {
                  if (state_->commit(member, state_->generation(), partition, next)) {
                    changed();
                  }
                  when_durable([promise, r = std::move(r)](const std::optional<rill::error>& e) mutable {
                    promise.deliver(e ? poll_reply{outcome::of(*e), nullptr} : std::move(r));
                  });
                  step();
                  return;
                }
              }
            }
            promise.deliver(std::move(r));
            step();
          },
          [this, poll_id](caf::error& e) mutable {
            auto it = polls_.find(poll_id);
            if (it != polls_.end()) {
              it->second.deliver(poll_reply{outcome{net::status::unavailable, system().render(e)}, nullptr});
              polls_.erase(it);
            }
          });
  return rp;
}

void group_actor::finish(bool destroy, caf::response_promise rp) {
  closing_ = true;
  for (auto& [id, poll] : polls_) {
    poll.deliver(poll_reply{outcome{net::status::unavailable, "the group is closing"}, nullptr});
  }
  polls_.clear();
  finished_ = rp;
  when_durable([this, destroy](const std::optional<rill::error>&) mutable {
    if (!destroy) {
      finish_result_ = outcome{};
      maybe_quit();
      return;
    }
    ++operations_;
    rill::spawn(storage::remove_tree(*io_, id_.dir, 64 << 20), [this](expected<void> r) mutable {
      --operations_;
      finish_result_ = r ? outcome{} : outcome::of(r.error());
      maybe_quit();
    });
  });
}

void group_actor::maybe_quit() {
  // Not before every coroutine of this actor has finished (a describe waiting for a partition's answer): each
  // promise it holds is then delivered.
  if (!finish_result_ || operations_ > 0) {
    return;
  }
  finished_.deliver(*finish_result_);
  finish_result_.reset();
  quit();
}

caf::behavior group_actor::serving() {
  caf::message_handler handlers{
      [this](group_atom, group_msg& msg) -> caf::result<group_reply> {
        auto r = handle(msg);
        step();
        return r;
      },
      [this](group_poll_atom, group_poll_msg& msg) -> caf::result<poll_reply> {
        auto r = handle_poll(msg);
        step();
        return r;
      },
      [this](describe_atom) -> caf::result<group_reply> {
        group_msg msg{static_cast<std::uint16_t>(net::api::group_get), {}, 0};
        return handle(msg);
      },
      [this](disconnect_atom, std::uint64_t connection) {
        if (state_ && !closing_) {
          state_->advance(services_->clk->monotonic());
          if (!state_->disconnected(connection).empty()) {
            changed();
          }
        }
        step();
      },
      [this](expire_atom) {
        expiry_at_.reset();
        if (state_ && !closing_) {
          const auto before = state_->generation();
          (void)state_->expire(services_->clk->monotonic());
          if (state_->generation() != before) {
            changed();  // members removed, or revoked partitions taken from owners that kept them too long
          }
        }
        schedule_expiry();
        step();
      },
      [this](resize_atom, std::uint32_t partitions) {
        id_.partitions = partitions;
        if (state_ && !closing_ && partitions != state_->partitions()) {
          state_->advance(services_->clk->monotonic());
          state_->resize(partitions);
          changed();
        }
        step();
      },
      [this](close_atom) -> caf::result<outcome> {
        auto rp = make_response_promise<outcome>();
        finish(false, rp);
        return rp;
      },
      [this](destroy_atom) -> caf::result<outcome> {
        auto rp = make_response_promise<outcome>();
        finish(true, rp);
        return rp;
      },
  };
  return caf::behavior{io_completion_handler(*io_).or_else(handlers)};
}

}  // namespace rill::actors
