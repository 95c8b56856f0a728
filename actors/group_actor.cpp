// group_actor: the CAF shell of a consumer group: routes requests to group_handlers, writes the state, sets timers.
#include "actors/group_actor.hpp"

#include <fmt/core.h>

#include "actors/actor_request.hpp"
#include "actors/runtime/shard.h"
#include "net/frame.h"
#include "storage/atomic_file.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {
constexpr std::uint64_t state_bytes_max = 64 << 20;

outcome outcome_of(const rill::error& e) {
  return outcome{status_of_group(e.code()), e.detail().empty() ? e.message() : e.detail()};
}
}  // namespace

group_actor::group_actor(caf::actor_config& cfg, std::size_t home, group_identity id, const group_services* services)
    : metered<group_actor_impl::base>(cfg, "group", home), homed(home), id_(std::move(id)), services_(services) {
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
  auto committed = state_->committed_offsets();
  std::lock_guard<std::mutex> guard(published_->mutex);
  published_->committed = std::move(committed);
}

task<expected<group_state>> group_actor::load() {
  RILL_CO_TRY_VOID(co_await storage::make_dirs(*io_, id_.dir));
  const std::string path = storage::join_path(id_.dir, group_state_file_name);
  RILL_CO_TRY(bytes, co_await storage::read_whole_file(*io_, path, state_bytes_max));
  auto restored = bytes ? decode_state_file(*bytes, id_, services_->clk->monotonic()) : fresh_group_state(id_);
  if (restored) {
    co_return std::move(*restored);
  }
  // Never silently: the group starts over from its members' poll strategies, and says so.
  services_->reporter->corruption(path, 0, "consumer group state does not verify",
                                  "ignored: the group starts without members and committed offsets");
  co_return fresh_group_state(id_);
}

group_actor::behavior_type group_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  ++operations_;
  rill::spawn(load(), [this](expected<group_state> r) {
    --operations_;
    if (r) {
      state_.emplace(std::move(*r));
      changed();  // a restored group writes itself back (a new generation, or fresh sessions) at once
    } else {
      versions_.fence(r.error());
      services_->reporter->notice(fmt::format("group {}: cannot open: {}", id_.dir, r.error().message()));
    }
    set_default_handler(caf::print_and_drop);
    become(serving());
  });
  // Until the state is loaded, only I/O completions are handled; everything else waits in the mailbox. (A
  // typed_behavior in CAF 0.17 must handle the whole interface, so this partial one is built through unsafe_init;
  // serving() is checked as complete.)
  set_default_handler(caf::skip);
  return behavior_type{behavior_type::unsafe_init{}, caf::behavior{io_completion{io_.get()}}};
}

void group_actor::step() {
  if (services_->on_step && state_) {
    services_->on_step(*state_);
  }
}

void group_actor::changed() {
  versions_.changed();
  persist();
  schedule_expiry();
  publish_metrics();
}

void group_actor::when_durable(done_fn then) {
  versions_.wait(std::move(then));
  persist();
}

void group_actor::reply_when_durable(caf::response_promise rp, std::string header) {
  when_durable([rp, header = std::move(header)](const std::optional<rill::error>& e) mutable {
    rp.deliver(e ? group_reply{outcome::of(*e), {}} : group_reply{outcome{}, std::move(header)});
  });
}

void group_actor::persist() {
  const auto v = state_ ? versions_.start_write() : std::nullopt;
  if (!v) {
    return;
  }
  ++operations_;
  rill::spawn(storage::write_file_atomic(*io_, id_.dir, group_state_file_name, encode_state_file(*state_)),
              [this, written = *v](expected<void> r) {
                --operations_;
                std::optional<rill::error> failure;
                if (!r && r.error().code() == storage::errc::no_space) {
                  // The temp file could not be written (or renamed): the state file holds what it held. Refused,
                  // not fenced: the group goes on once there is room.
                  services_->reporter->notice(fmt::format("group {}: the disk is full, its state was not written: {}",
                                                          id_.name, r.error().message()));
                  versions_.write_refused(written, r.error());
                  persist();  // only for a waiter that wants a change made meanwhile: one attempt, no loop
                  maybe_quit();
                  return;
                }
                if (!r) {
                  // After a failed write nothing newer can be promised: the group refuses everything until a restart.
                  failure =
                      rill::error(make_error_code(net::status::storage_error),
                                  fmt::format("group {}: writing its state failed: {}", id_.name, r.error().message()));
                  services_->reporter->notice(failure->detail());
                }
                versions_.write_done(written, std::move(failure));
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
  auto self = caf::actor_cast<group_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + std::max(delay, std::chrono::nanoseconds(0)),
                                     [self] { caf::anon_send(self, expire_atom::value); });
}

task<proto::GroupInfo> group_actor::describe() {
  proto::GroupInfo info = describe_group(id_, state_ ? &*state_ : nullptr, services_->clk->monotonic());
  info.set_coordinator_node(services_->node_id);
  const auto table = services_->routes ? services_->routes->current() : nullptr;
  for (std::uint32_t p = 0; state_ && p < state_->partitions(); ++p) {
    // Partition offsets first: the state may change while we wait, so what it says is read after.
    std::optional<proto::PartitionInfo> pinfo;
    if (table) {
      if (auto actor = table->partition(id_.stream_id, id_.topic_id, p)) {
        auto r = co_await await_request<partition_info>(this, actor, info_atom::value);
        if (r && r->result.ok()) {
          pinfo = r->info;
        }
      }
    }
    if (!state_ || p >= state_->partitions()) {
      break;
    }
    describe_partition(info, *state_, p, pinfo ? &*pinfo : nullptr);
  }
  co_return info;
}

std::optional<outcome> group_actor::refusal(const char* closing) const {
  if (versions_.fenced()) {
    return outcome::of(*versions_.fenced());
  }
  if (!state_ || closing_) {
    return outcome{net::status::unavailable, state_ ? closing : "the group is not open"};
  }
  return std::nullopt;
}

caf::result<group_reply> group_actor::handle(group_msg& msg) {
  if (auto refused = refusal("the group is closing")) {
    return group_reply{std::move(*refused), {}};
  }
  auto d = decide_group_request(*state_, id_, msg.api, msg.header, services_->clk->monotonic(), msg.connection);
  if (d.error) {
    return group_reply{outcome_of(*d.error), {}};
  }
  if (d.notice) {
    services_->reporter->notice(*d.notice);
  }
  if (d.changed) {
    changed();
  } else if (d.sessions) {
    schedule_expiry();
  }
  auto rp = make_response_promise<group_reply>();
  if (!d.describe) {
    reply_when_durable(rp, std::move(d.header));
    return rp;
  }
  ++operations_;
  rill::spawn(describe(), [this, rp, offsets_only = d.offsets_only](proto::GroupInfo info) mutable {
    --operations_;
    reply_when_durable(rp, describe_reply(offsets_only, std::move(info)));
    maybe_quit();
  });
  return rp;
}

caf::result<poll_reply> group_actor::handle_poll(group_poll_msg& msg) {
  if (auto refused = refusal("the group is not open")) {
    return poll_reply{std::move(*refused), nullptr};
  }
  auto planned = plan_group_poll(*state_, std::move(msg.request));
  if (!planned) {
    return poll_reply{outcome_of(planned.error()), nullptr};
  }
  auto rp = make_response_promise<poll_reply>();
  const std::uint64_t poll_id = next_poll_++;
  polls_.emplace(poll_id, rp);
  poll_msg ask{std::move(planned->request), planned->resume_at};
  request(msg.partition, caf::infinite, poll_atom::value, std::move(ask))
      .then([this, poll_id, poll = std::move(*planned)](poll_reply& r) { polled(poll_id, poll, r); },
            [this, poll_id](caf::error& e) {
              auto it = polls_.find(poll_id);
              if (it != polls_.end()) {
                it->second.deliver(poll_reply{outcome{net::status::unavailable, system().render(e)}, nullptr});
                polls_.erase(it);
              }
            });
  return rp;
}

void group_actor::polled(std::uint64_t poll_id, const group_poll& poll, poll_reply& r) {
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
  if (auto owned = check_delivery(*state_, poll); !owned) {
    promise.deliver(poll_reply{outcome::of(owned.error()), nullptr});
    step();
    return;
  }
  if (r.data && r.data->batches > 0) {
    if (services_->on_delivered) {
      services_->on_delivered(*state_, poll.member, poll.partition);
    }
    const auto committed = commit_delivered(*state_, poll, r.data->next_offset.value());
    if (committed.changed) {
      changed();
    }
    if (committed.wait) {
      when_durable([promise, r = std::move(r)](const std::optional<rill::error>& e) mutable {
        promise.deliver(e ? poll_reply{outcome::of(*e), nullptr} : std::move(r));
      });
      step();
      return;
    }
  }
  promise.deliver(std::move(r));
  step();
}

caf::result<outcome> group_actor::finish(bool destroy) {
  auto rp = make_response_promise<outcome>();
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
  return rp;
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

group_actor::behavior_type group_actor::serving() {
  return {
      io_completion{io_.get()},
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
        if (state_ && !closing_ && on_disconnect(*state_, services_->clk->monotonic(), connection)) {
          changed();
        }
        step();
      },
      [this](expire_atom) {
        expiry_at_.reset();
        if (state_ && !closing_ && on_expire(*state_, services_->clk->monotonic())) {
          changed();
        }
        schedule_expiry();
        step();
      },
      [this](resize_atom, std::uint32_t partitions) {
        id_.partitions = partitions;
        if (state_ && !closing_ && on_resize(*state_, services_->clk->monotonic(), partitions)) {
          changed();
        }
        step();
      },
      [this](close_atom) { return finish(false); },
      [this](destroy_atom) { return finish(true); },
  };
}

}  // namespace rill::actors
