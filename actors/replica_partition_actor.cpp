// replica_partition_actor: a replicated partition's replica on this node (see the header): the CAF shell of
// partition_replica.
#include "actors/replica_partition_actor.hpp"

#include <fmt/core.h>

#include <random>

#include "actors/metadata_state.h"
#include "actors/runtime/shard.h"
#include "config/resource_limits.h"
#include "consensus/partition_machine.h"
#include "storage/errc.h"

// The configuration keys' ranges are the replicated settings' (a value the machine would ignore is refused at load).
static_assert(rill::config::consumers_per_partition_limit == rill::consensus::partition_consumers_limit);
static_assert(rill::config::producers_per_partition_limit == rill::consensus::partition_producers_limit);
static_assert(rill::config::producer_expiry_ms_min == rill::consensus::producer_expiry_ms_min);
static_assert(rill::config::producer_expiry_ms_limit == rill::consensus::producer_expiry_ms_limit);
static_assert(rill::config::partition_checkpoint_head_bytes >= rill::consensus::partition_snapshot_head_bytes);
static_assert(rill::config::partition_checkpoint_producer_bytes == rill::consensus::partition_snapshot_producer_bytes);
static_assert(rill::config::partition_checkpoint_consumer_bytes == rill::consensus::partition_snapshot_consumer_bytes);
static_assert(rill::config::partition_checkpoint_budget_bytes == rill::consensus::partition_snapshot_bytes_budget);

namespace rill::actors {

// The group's messages to peers go to the metadata actor, which owns the replica plane.
class replica_partition_actor::plane_transport final : public consensus::host_transport {
 public:
  explicit plane_transport(metadata_actor_hdl plane) : plane_(std::move(plane)) {}
  void send(consensus::node_t to, consensus::group_t group, consensus::message m) override {
    caf::anon_send(plane_, replica_atom::value,
                   replica_frame{to.value(), group.value(), std::make_shared<const consensus::message>(std::move(m))});
  }
  void send(consensus::node_t, const consensus::node_heartbeat&) override {
    // The replica sends its own commit heartbeats (partition_group: heartbeats_by_host off).
  }

 private:
  metadata_actor_hdl plane_;
};

replica_partition_actor::replica_partition_actor(caf::actor_config& cfg, std::size_t home, partition_identity id,
                                                 storage::log_options options, replica_placement placement,
                                                 const partition_services* services)
    : metered<replica_partition_impl::base>(cfg, "partition", home),
      homed(home),
      id_(std::move(id)),
      options_(options),
      placement_(std::move(placement)),
      services_(services),
      polls_(std::chrono::milliseconds(services->long_poll_wait_ms_max)) {
  RILL_ASSERT(placement_.members.size() >= 2, "a replicated partition of {} members", placement_.members.size());
  set_metrics_name(fmt::format("{}/{}/{}", id_.stream_id, id_.topic_id, id_.partition_id));
  published_->stream_id = id_.stream_id;
  published_->topic_id = id_.topic_id;
  published_->partition_id = id_.partition_id;
  options_.observer = &timing_;
  attach_metrics<partition_metrics>(published_);
  transport_ = std::make_unique<plane_transport>(placement_.plane);
}

replica_partition_actor::~replica_partition_actor() = default;

replica_partition_actor::behavior_type replica_partition_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  options_.files = &current_shard()->files();
  partition_replica_options o;
  o.dir = id_.dir;
  o.stream_id = id_.stream_id;
  o.topic_id = id_.topic_id;
  o.partition_id = id_.partition_id;
  o.log = options_;
  o.group = consensus::group_t(placement_.group);
  for (auto n : placement_.members) {
    o.members.push_back(consensus::node_t(static_cast<std::uint32_t>(n)));
  }
  o.self = consensus::node_t(static_cast<std::uint32_t>(placement_.self));
  o.journal_slots = placement_.journal_slots;
  o.recovering = placement_.recovering;
  o.settings.consumers_max = services_->consumers_per_partition_max;
  o.settings.producers_max = services_->producers_per_partition_max;
  o.settings.producer_expiry_ms = services_->producer_expiry_ms;
  if (const replica_links* links = services_->links; links != nullptr) {
    o.reachable = [links](consensus::node_t n) { return links->reaches(n.value()); };
  }
  o.retention_ticks =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(services_->retention_interval / tick_period));
  o.reopen_ticks = 50;  // 500 ms
  o.tick_ms = static_cast<std::uint64_t>(tick_period.count());
  o.seed = [] { return std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32); };
  partition_replica_callbacks cb;
  cb.notice = [reporter = services_->reporter](const std::string& line) { reporter->notice(line); };
  cb.leading = [this](bool leads) {
    caf::anon_send(placement_.plane, leader_atom::value,
                   partition_namespace(id_.stream_id, id_.topic_id, id_.partition_id), leads);
    if (!leads) {
      // Parked polls: this replica no longer serves them; their clients find the primary.
      run_polls(polls_.woken(offset_t(INT64_MAX)));
    }
  };
  cb.committed = [this] { on_committed(); };
  cb.changed = [this] { publish_gauges(); };
  replica_ = std::make_unique<partition_replica>(
      std::move(o),
      partition_replica_env{*io_, current_shard()->pool(), *services_->clk, *services_->reporter, *transport_,
                            services_->stamps_from},
      std::move(cb));
  replica_->start();
  schedule_tick();
  return serving();
}

void replica_partition_actor::schedule_tick() {
  auto self = caf::actor_cast<replica_partition_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + tick_period,
                                     [self] { caf::anon_send(self, replica_tick_msg_atom::value); });
}

void replica_partition_actor::on_tick() {
  if (closing_) {
    return;
  }
  schedule_tick();
  replica_->tick();
  if (++ticks_ % 100 == 0) {
    publish_gauges();
  }
}

void replica_partition_actor::on_committed() {
  const auto* g = replica_->group();
  if (g == nullptr || closing_) {
    return;
  }
  run_polls(polls_.woken(const_cast<consensus::partition_group*>(g)->log().committed()));
}

void replica_partition_actor::publish_gauges() {
  auto* g = replica_->group();
  if (g == nullptr) {
    count_under_replicated(false);
    return;
  }
  publish_log_gauges(g->log(), *published_);
  published_->fenced.store(g->fenced() ? 1 : 0, std::memory_order_relaxed);
  published_->retention_runs.store(replica_->retention_runs(), std::memory_order_relaxed);
  const bool under = under_replicated();
  published_->under_replicated.store(under ? 1 : 0, std::memory_order_relaxed);
  count_under_replicated(under);
}

void replica_partition_actor::count_under_replicated(bool under) {
  if (under != counted_under_ && services_->links != nullptr) {
    services_->links->under_replicated.fetch_add(under ? 1 : -1, std::memory_order_relaxed);
    counted_under_ = under;
  }
}

bool replica_partition_actor::under_replicated() const {
  const auto* g = replica_->group();
  if (g == nullptr || !g->primary()) {
    return false;  // the primary counts its partition; a backup does not
  }
  if (!g->lagging().empty()) {
    return true;
  }
  for (const auto node : placement_.members) {
    if (node != placement_.self && services_->links != nullptr && !services_->links->reaches(node)) {
      return true;
    }
  }
  return false;
}

outcome replica_partition_actor::outcome_of(const replica_refusal& r) const {
  outcome o{r.status, r.message};
  if (r.primary_node) {
    o.redirect = placement_.address_of(*r.primary_node);
    if (!o.redirect.empty()) {
      o.message += " at " + o.redirect;
    }
  }
  return o;
}

caf::result<produce_reply> replica_partition_actor::produce(produce_msg& msg) {
  if (closing_) {
    return produce_reply{outcome{net::status::unavailable, "the partition is closing"}, {}, -1};
  }
  if (auto refused = replica_->refusal()) {
    return produce_reply{outcome_of(*refused), {}, -1};
  }
  RILL_ASSERT(msg.batches != nullptr);
  auto rp = make_response_promise<produce_reply>();
  ++operations_;
  const auto arrived = std::chrono::steady_clock::now();
  rill::spawn(replica_->produce(std::move(msg.batches)),
              [this, rp, arrived](expected<partition_replica::produced> r) mutable {
                --operations_;
                published_->produce.record(std::chrono::steady_clock::now() - arrived);
                if (!r) {
                  bump(published_->produce_errors);
                  rp.deliver(produce_reply{outcome::of(r.error()), {}, -1});
                  return;
                }
                rp.deliver(produce_reply{outcome{}, std::move(r->base_offsets), r->timestamp_ms});
              });
  return rp;
}

caf::result<offset_reply> replica_partition_actor::store_offset(offset_msg& msg) {
  if (closing_) {
    return offset_reply{outcome{net::status::unavailable, "the partition is closing"}, std::nullopt};
  }
  if (auto refused = replica_->refusal()) {
    return offset_reply{outcome_of(*refused), std::nullopt};
  }
  auto rp = make_response_promise<offset_reply>();
  ++operations_;
  rill::spawn(replica_->store_offset(std::move(msg.consumer), msg.offset),
              [this, rp](expected<std::optional<std::int64_t>> r) mutable {
                --operations_;
                rp.deliver(r ? offset_reply{outcome{}, *r} : offset_reply{outcome::of(r.error()), std::nullopt});
              });
  return rp;
}

void replica_partition_actor::run_poll(waiter_id id) {
  const poll_waiter* w = polls_.find(id);
  if (w == nullptr || !polls_.start_read(id)) {
    return;
  }
  std::optional<replica_refusal> refused;
  if (closing_) {
    refused = replica_refusal{net::status::unavailable, "the partition is closing", std::nullopt};
  } else {
    refused = replica_->poll_refusal(w->request);
  }
  if (refused) {
    (void)polls_.read_done(id, false, std::nullopt);
    auto answered = polls_.take(id);
    current_shard()->timers().cancel(answered.timer);
    answered.promise.deliver(poll_reply{outcome_of(*refused), nullptr});
    return;
  }
  consensus::partition_group* g = replica_->group();
  auto& log = g->log();
  const bool named = w->request.consumer().kind_case() == proto::Consumer::kName;
  const auto stored = named ? g->machine().consumer_offset(w->request.consumer().name()) : std::nullopt;
  const auto query = read_request_for(w->request, w->resume_at, stored, log.log_start(), log.committed(),
                                      services_->default_max_bytes);
  ++operations_;
  auto job = [](partition_replica* r, storage::read_request q, proto::PollRequest request,
                bool by_name) -> task<expected<storage::read_result>> {
    consensus::partition_group* group = r->group();
    if (group == nullptr) {
      co_return rill::unexpected(make_error_code(net::status::unavailable), "the partition's replica is reopening");
    }
    RILL_CO_TRY(result, co_await group->log().read(q));
    if (request.auto_commit() && result.batches > 0 && by_name && r->group() != nullptr && r->group()->primary()) {
      RILL_CO_TRY_VOID(co_await r->commit_offset(request.consumer().name(), result.next_offset.value()));
    }
    co_return result;
  };
  rill::spawn(job(replica_.get(), query, w->request, named), [this, id](expected<storage::read_result> r) {
    --operations_;
    answer_poll_read(polls_, id, std::move(r), current_shard()->timers(), *published_);
  });
}

void replica_partition_actor::run_polls(const std::vector<waiter_id>& ids) {
  for (auto id : ids) {
    run_poll(id);
  }
}

void replica_partition_actor::schedule_poll_deadline(waiter_id id) {
  const auto due = polls_.deadline_of(id);
  if (!due) {
    return;
  }
  auto self = caf::actor_cast<replica_partition_impl>(this);
  const std::int64_t at = due->count();
  polls_.find(id)->timer =
      current_shard()->timers().schedule(*due, [self, at] { caf::anon_send(self, poll_timeout_atom::value, at); });
}

caf::result<outcome> replica_partition_actor::finish(bool destroy) {
  auto rp = make_response_promise<outcome>();
  closing_ = true;
  for (auto& w : polls_.close()) {
    current_shard()->timers().cancel(w.timer);
    w.promise.deliver(poll_reply{outcome{net::status::unavailable, "the partition is closing"}, nullptr});
  }
  rill::spawn(replica_->close(destroy), [this, rp](expected<void> r) mutable {
    count_under_replicated(false);
    rp.deliver(r ? outcome{} : outcome::of(r.error()));
    quit();
  });
  return rp;
}

replica_partition_actor::behavior_type replica_partition_actor::serving() {
  return {
      io_completion{io_.get()},
      [this](produce_atom, produce_msg& msg) { return produce(msg); },
      [this](poll_atom, poll_msg& msg) -> caf::result<poll_reply> {
        if (closing_) {
          return poll_reply{outcome{net::status::unavailable, "the partition is closing"}, nullptr};
        }
        if (auto refused = replica_->poll_refusal(msg.request)) {
          return poll_reply{outcome_of(*refused), nullptr};
        }
        auto rp = make_response_promise<poll_reply>();
        const std::uint64_t wait_ms = msg.request.max_wait_ms();
        const auto id = polls_.add(poll_waiter{std::move(msg.request), msg.resume_at, rp, 0}, wait_ms, monotonic_now());
        schedule_poll_deadline(id);
        run_poll(id);
        return rp;
      },
      [this](drain_atom) { run_polls(polls_.drain()); },
      [this](poll_timeout_atom, std::int64_t at) { run_polls(polls_.expire(std::chrono::nanoseconds(at))); },
      [this](offset_get_atom, offset_msg& msg) -> offset_reply {
        if (closing_) {
          return offset_reply{outcome{net::status::unavailable, "the partition is closing"}, std::nullopt};
        }
        if (auto refused = replica_->refusal()) {
          return offset_reply{outcome_of(*refused), std::nullopt};
        }
        if (auto stale = replica_->stale_offset_refusal()) {
          return offset_reply{outcome_of(*stale), std::nullopt};
        }
        return offset_reply{outcome{}, replica_->group()->machine().consumer_offset(msg.consumer)};
      },
      [this](offset_store_atom, offset_msg& msg) { return store_offset(msg); },
      [this](info_atom) -> partition_info {
        partition_info out;
        out.info.set_id(id_.partition_id);
        out.info.set_node_id(placement_.self);
        for (auto n : placement_.members) {
          out.info.add_replicas(n);
        }
        consensus::partition_group* g = replica_->group();
        if (g == nullptr) {
          out.info.set_role("opening");
          const auto& e = replica_->open_error();
          out.result = e ? outcome::of(*e) : outcome{net::status::unavailable, "not open"};
          return out;
        }
        describe_log(g->log(), out.info);
        const auto& r = g->replica();
        out.info.set_primary_node(g->primary_node().value());
        out.info.set_view(r.view().value());
        out.info.set_role(r.recovering()                                 ? "recovering"
                          : g->transferring()                            ? "transferring"
                          : r.status() == consensus::status::view_change ? "view_change"
                          : r.is_primary()                               ? "primary"
                                                                         : "backup");
        out.info.set_commit_op(r.commit_min().value());
        out.info.set_op(r.op().value());
        if (g->fenced()) {
          out.info.set_fenced("a storage failure: see the server's log");
        }
        return out;
      },
      [this](replica_tick_msg_atom) { on_tick(); },
      [this](replica_atom, replica_frame& f) {
        if (!closing_ && f.m != nullptr) {
          replica_->on_message(*f.m);
        }
      },
      [this](stall_atom, std::uint32_t) {
        services_->reporter->notice(
            fmt::format("partition {}: stall is not supported on a replicated partition "
                        "(pause the node instead)",
                        id_.dir));
      },
      [](unstall_atom) {},
      [this](fail_syncs_atom, std::uint32_t n) {
        if (auto* g = replica_->group()) {
          g->log().inject_sync_failures(n);
        }
      },
      [this](settings_atom, const config::log_config& c) {
        options_.config = c;
        replica_->update_config(c);
      },
      [this](close_atom) { return finish(false); },
      [this](destroy_atom) { return finish(true); },
  };
}

}  // namespace rill::actors
