#include "actors/partition_actor.hpp"

#include <fmt/core.h>

#include "actors/runtime/shard.h"
#include "storage/file_ops.h"

namespace rill::actors {
// The opening and stalled behaviors handle a part of the interface on purpose and let the rest wait in the mailbox
// (the skip default handler). A typed_behavior in CAF 0.17 must handle every message of the interface, or it does
// not compile, so those two are built through typed_behavior's unsafe_init; serving() is checked as complete, and
// every sender is checked against the interface all the same.

partition_actor::partition_actor(caf::actor_config& cfg, std::size_t home, partition_identity id,
                                 storage::log_options options, const partition_services* services)
    : metered<partition_actor_impl::base>(cfg, "partition", home),
      homed(home),
      id_(std::move(id)),
      options_(options),
      services_(services),
      polls_(std::chrono::milliseconds(services->long_poll_wait_ms_max)) {
  set_metrics_name(fmt::format("{}/{}/{}", id_.stream_id, id_.topic_id, id_.partition_id));
  published_->stream_id = id_.stream_id;
  published_->topic_id = id_.topic_id;
  published_->partition_id = id_.partition_id;
  options_.observer = &timing_;
  attach_metrics<partition_metrics>(published_);
}

void partition_actor::publish_gauges() {
  if (!state_) {
    return;
  }
  publish_log_gauges(state_->log(), *published_);
  const bool fenced = state_->fencing().has_value();
  published_->fenced.store(fenced ? 1 : 0, std::memory_order_relaxed);
  published_->recoveries.store(state_->recoveries(), std::memory_order_relaxed);
  if (fenced) {
    schedule_recovery();
  }
}

void partition_actor::schedule_recovery() {
  if (recovery_scheduled_ || recovering_ || closing_) {
    return;
  }
  recovery_scheduled_ = true;
  auto self = caf::actor_cast<partition_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + recovery_delay_,
                                     [self] { caf::anon_send(self, recover_atom::value); });
}

void partition_actor::answer_recovering(waiter_id id) {
  auto answered = polls_.take(id);
  current_shard()->timers().cancel(answered.timer);
  answered.promise.deliver(poll_reply{refusal(), nullptr});
}

void partition_actor::watch_log() {
  // Parked long polls look again whenever more becomes visible (after a produce's sync, or a periodic one); a fence
  // (from a produce, or from a sync nobody waits for) schedules the recovery.
  state_->log().on_committed([this] { after_append(); });
  state_->log().on_fenced([this] { publish_gauges(); });
}

void partition_actor::install(std::unique_ptr<partition_state> state) {
  state_ = std::move(state);
  open_error_.reset();
  state_->set_consumers_max(services_->consumers_per_partition_max);
  state_->set_producer_limits(static_cast<std::int64_t>(services_->producer_expiry_ms),
                              services_->producers_per_partition_max);
  watch_log();
  publish_gauges();
  schedule_tick();
  schedule_retention();
}

void partition_actor::recovery_done() {
  --operations_;
  recovery_running_ = false;
  recovering_ = false;
  if (finish_deferred_) {
    auto [rp, destroy] = *finish_deferred_;
    finish_deferred_.reset();
    run_finish(rp, destroy);
  }
}

void partition_actor::reopen() {
  // The partition could not open (its files could not be created or recovered: a full disk, a failing device): try
  // again, backing off like a recovery.
  recovery_running_ = true;
  ++operations_;
  rill::spawn(
      partition_state::open(*io_, current_shard()->pool(), *services_->clk, *services_->reporter, id_.dir, options_),
      [this](expected<std::unique_ptr<partition_state>> r) {
        if (r) {
          if (closing_) {
            state_ = std::move(*r);  // the deferred close closes it
          } else {
            install(std::move(*r));
            services_->reporter->notice(fmt::format("partition {}: opened", id_.dir));
          }
        } else {
          open_error_ = r.error();
          services_->reporter->notice(fmt::format("partition {}: cannot open (next try in {} ms): {}", id_.dir,
                                                  recovery_delay_.count(), r.error().message()));
          recovery_delay_ = std::min(recovery_delay_ * 2, recovery_delay_max);
        }
        const bool closing = closing_;
        recovery_done();
        if (!closing && !state_) {
          schedule_recovery();
        }
      });
}

void partition_actor::recover() {
  recovery_scheduled_ = false;
  if (closing_ || recovery_running_) {
    return;
  }
  if (!state_) {
    if (open_error_) {
      reopen();
    }
    return;
  }
  if (!state_->fencing()) {
    return;
  }
  if (operations_ > 0) {
    // A read or write of the log is still running: recover once it is done (new ones are refused meanwhile).
    recovering_ = true;
    auto self = caf::actor_cast<partition_actor_impl>(this);
    current_shard()->timers().schedule(monotonic_now() + std::chrono::milliseconds(5),
                                       [self] { caf::anon_send(self, recover_atom::value); });
    recovery_scheduled_ = true;
    return;
  }
  recovering_ = true;
  for (auto id : polls_.woken(offset_t(INT64_MAX))) {
    answer_recovering(id);  // parked polls: the log they wait on closes; their clients retry
  }
  recovery_running_ = true;
  ++operations_;
  rill::spawn(state_->recover_log(), [this](expected<void> r) {
    if (r) {
      watch_log();
    } else {
      services_->reporter->notice(
          fmt::format("partition {}: recovery from a storage failure failed (next try in {} "
                      "ms): {}",
                      id_.dir, recovery_delay_.count(), r.error().message()));
    }
    // The delay grows with every recovery, and falls back only once a produce succeeds: a disk that fences the
    // partition again at once (delayed allocation on a full disk) is not recovered in a tight loop.
    recovery_delay_ = std::min(recovery_delay_ * 2, recovery_delay_max);
    const bool closing = closing_;
    recovery_done();
    if (closing) {
      return;
    }
    publish_gauges();  // schedules the next try while still fenced
    schedule_tick();
  });
}

partition_actor::behavior_type partition_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  options_.files = &current_shard()->files();  // the home shard's descriptors, shared by its partitions
  ++operations_;
  rill::spawn(
      partition_state::open(*io_, current_shard()->pool(), *services_->clk, *services_->reporter, id_.dir, options_),
      [this](expected<std::unique_ptr<partition_state>> r) {
        --operations_;
        opened(std::move(r));
      });
  // Until the log is open, only I/O completions are handled; everything else waits in the mailbox.
  set_default_handler(caf::skip);
  return behavior_type{behavior_type::unsafe_init{}, caf::behavior{io_completion{io_.get()}}};
}

void partition_actor::opened(expected<std::unique_ptr<partition_state>> r) {
  if (!r) {
    open_error_ = r.error();
    services_->reporter->notice(fmt::format("partition {}: cannot open (next try in {} ms): {}", id_.dir,
                                            recovery_delay_.count(), r.error().message()));
    schedule_recovery();
  } else {
    install(std::move(*r));
  }
  set_default_handler(caf::print_and_drop);
  become(serving());
}

void partition_actor::run_poll(waiter_id id) {
  RILL_ASSERT(state_);  // waiters are idle only while the log is open (closing answers them)
  if (recovering_) {
    const poll_waiter* w = polls_.find(id);
    if (w != nullptr && polls_.start_read(id)) {
      (void)polls_.read_done(id, false, std::nullopt);  // (idle again, so it can be taken)
      answer_recovering(id);
    }
    return;
  }
  if (!polls_.start_read(id)) {
    return;
  }
  const poll_waiter& w = *polls_.find(id);
  ++operations_;
  rill::spawn(state_->poll(w.request, w.resume_at, services_->default_max_bytes),
              [this, id](expected<storage::read_result> r) {
                --operations_;
                answer_poll_read(polls_, id, std::move(r), current_shard()->timers(), *published_);
              });
}

void partition_actor::run_polls(const std::vector<waiter_id>& ids) {
  // Ids first: a read that completes without suspending removes its waiter while we would be iterating.
  for (auto id : ids) {
    run_poll(id);
  }
}

void partition_actor::after_append() {
  if (!state_) {
    return;  // closed meanwhile
  }
  publish_gauges();
  run_polls(polls_.woken(state_->log().committed()));
  schedule_tick();
}

void partition_actor::schedule_poll_deadline(waiter_id id) {
  const auto due = polls_.deadline_of(id);
  if (!due) {
    return;
  }
  // The heap fires it at `due`; the poll expires with every other one due by then.
  auto self = caf::actor_cast<partition_actor_impl>(this);
  const std::int64_t at = due->count();
  polls_.find(id)->timer =
      current_shard()->timers().schedule(*due, [self, at] { caf::anon_send(self, poll_timeout_atom::value, at); });
}

void partition_actor::schedule_tick() {
  if (!state_) {
    return;
  }
  const auto due = state_->log().next_deadline();
  if (!due || (tick_at_ && *tick_at_ <= *due)) {
    return;
  }
  tick_at_ = due;
  // The log's deadlines are in its clock's monotonic time; the shard's heap uses steady time: convert the delay.
  const auto delay = *due - services_->clk->monotonic();
  auto self = caf::actor_cast<partition_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + std::max(delay, std::chrono::nanoseconds(0)),
                                     [self] { caf::anon_send(self, tick_atom::value); });
}

void partition_actor::schedule_retention() {
  auto self = caf::actor_cast<partition_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + services_->retention_interval,
                                     [self] { caf::anon_send(self, retention_atom::value); });
}

outcome partition_actor::refusal() const {
  if (open_error_) {
    return outcome::of(*open_error_);
  }
  if (recovering_ && !closing_) {
    return outcome{net::status::unavailable, "the partition is recovering from a storage failure; retry"};
  }
  return outcome{net::status::unavailable, "the partition is closing"};
}

caf::result<outcome> partition_actor::finish(bool destroy) {
  auto rp = make_response_promise<outcome>();
  closing_ = true;
  for (auto& w : polls_.close()) {
    current_shard()->timers().cancel(w.timer);
    w.promise.deliver(poll_reply{outcome{net::status::unavailable, "the partition is closing"}, nullptr});
  }
  polls_.check_invariants();
  if (recovery_running_) {
    // A recovery or reopen is inside the partition's files: the close waits for it (recovery_done runs it).
    RILL_ASSERT(!finish_deferred_, "partition {}: a second close while one waits", id_.dir);
    finish_deferred_.emplace(rp, destroy);
    return rp;
  }
  run_finish(rp, destroy);
  return rp;
}

void partition_actor::run_finish(caf::typed_response_promise<outcome> rp, bool destroy) {
  ++operations_;
  auto job = [](partition_actor* self, bool remove) -> task<expected<void>> {
    if (self->state_) {
      RILL_CO_TRY_VOID(co_await self->state_->close());
    }
    if (remove) {
      RILL_CO_TRY_VOID(
          co_await storage::remove_tree(*self->io_, self->id_.dir, self->options_.config.delete_step_bytes));
    }
    co_return expected<void>{};
  };
  rill::spawn(job(this, destroy), [this, rp](expected<void> r) mutable {
    --operations_;
    state_.reset();
    rp.deliver(r ? outcome{} : outcome::of(r.error()));
    quit();
  });
}

partition_actor::behavior_type partition_actor::serving() {
  return {
      io_completion{io_.get()},
      [this](produce_atom, produce_msg& msg) -> caf::result<produce_reply> {
        if (!state_ || closing_ || recovering_) {
          return produce_reply{refusal(), {}, -1};
        }
        auto rp = make_response_promise<produce_reply>();
        ++operations_;
        const auto arrived = std::chrono::steady_clock::now();
        RILL_ASSERT(msg.batches != nullptr);
        rill::spawn(state_->produce(std::move(*msg.batches)), [this, rp, arrived](expected<produce_result> r) mutable {
          --operations_;
          published_->produce.record(std::chrono::steady_clock::now() - arrived);
          if (!r) {
            bump(published_->produce_errors);
          } else {
            recovery_delay_ = recovery_delay_min;  // the partition works: a later fence is recovered quickly again
          }
          rp.deliver(r ? produce_reply{outcome{}, std::move(r->base_offsets), r->timestamp.value()}
                       : produce_reply{outcome::of(r.error()), {}, -1});
          after_append();
        });
        return rp;
      },
      [this](poll_atom, poll_msg& msg) -> caf::result<poll_reply> {
        if (!state_ || closing_ || recovering_) {
          return poll_reply{refusal(), nullptr};
        }
        auto rp = make_response_promise<poll_reply>();
        const std::uint64_t wait_ms = msg.request.max_wait_ms();
        const auto id = polls_.add(poll_waiter{std::move(msg.request), msg.resume_at, rp, 0}, wait_ms, monotonic_now());
        schedule_poll_deadline(id);
        run_poll(id);
        return rp;
      },
      [this](drain_atom) {
        // The server is stopping: no poll parks any more, and those parked are answered now with what there is.
        run_polls(polls_.drain());
      },
      [this](poll_timeout_atom, std::int64_t at) {
        // Expired: the next read answers, empty or not.
        run_polls(polls_.expire(std::chrono::nanoseconds(at)));
      },
      [this](offset_get_atom, offset_msg& msg) -> offset_reply {
        if (!state_) {
          return offset_reply{outcome{net::status::unavailable, "the partition is not open"}, std::nullopt};
        }
        return offset_reply{outcome{}, state_->consumer_offset(msg.consumer)};
      },
      [this](offset_store_atom, offset_msg& msg) -> caf::result<offset_reply> {
        if (!state_ || closing_ || recovering_) {
          return offset_reply{outcome{net::status::unavailable, "the partition is not open"}, std::nullopt};
        }
        auto rp = make_response_promise<offset_reply>();
        ++operations_;
        rill::spawn(state_->store_consumer_offset(msg.consumer, msg.offset),
                    [this, rp](expected<std::optional<std::int64_t>> r) mutable {
                      --operations_;
                      rp.deliver(r ? offset_reply{outcome{}, *r} : offset_reply{outcome::of(r.error()), std::nullopt});
                    });
        return rp;
      },
      [this](info_atom) -> partition_info {
        partition_info out;
        if (!state_) {
          out.info.set_id(id_.partition_id);
          out.result = open_error_ ? outcome::of(*open_error_) : outcome{net::status::unavailable, "not open"};
          return out;
        }
        out.info = state_->info(id_.partition_id);
        return out;
      },
      [this](tick_atom) {
        tick_at_.reset();
        if (state_ && !closing_) {
          state_->log().tick();
        }
        schedule_tick();
      },
      [this](retention_atom) {
        if (!state_ || closing_) {
          return;
        }
        ++operations_;
        rill::spawn(state_->log().enforce_retention(), [this](expected<storage::retention_result> r) {
          --operations_;
          bump(published_->retention_runs);
          publish_gauges();
          if (!r) {
            services_->reporter->notice(fmt::format("{}: retention: {}", id_.dir, r.error().message()));
          }
          if (!closing_) {
            schedule_retention();
          }
        });
      },
      [this](stall_atom, std::uint32_t ms) {
        // Failure injection (debug.failure_injection): every other message waits in the mailbox until the stall
        // ends, as if the actor were stuck; then they are handled in order.
        // A stall ends when its time is over or when asked to (unstall_atom), whichever comes first.
        auto self = caf::actor_cast<partition_actor_impl>(this);
        const std::uint64_t stall = ++stalls_;
        current_shard()->timers().schedule(monotonic_now() + std::chrono::milliseconds(ms),
                                           [self, stall] { caf::anon_send(self, unstall_atom::value, stall); });
        set_default_handler(caf::skip);
        auto end_stall = [this] {
          set_default_handler(caf::print_and_drop);
          become(serving());
        };
        become(behavior_type{behavior_type::unsafe_init{},
                             caf::behavior{[end_stall](unstall_atom) { end_stall(); },
                                           [this, end_stall](unstall_atom, std::uint64_t timed_out) {
                                             if (timed_out == stalls_) {
                                               end_stall();
                                             }  // else an earlier stall's timer, which was ended when asked to
                                           }}});
      },
      [this](recover_atom) { recover(); },
      [this](fail_syncs_atom, std::uint32_t n) {
        if (state_) {
          state_->log().inject_sync_failures(n);
        }
      },
      [this](settings_atom, const config::log_config& c) {
        options_.config = c;  // (a later open or recovery opens with them)
        if (state_) {
          state_->update_config(c);
        }
      },
      [](unstall_atom) {
        // Nothing is stalled: nothing to end.
      },
      [](unstall_atom, std::uint64_t) {
        // The timer of a stall that was ended when asked to.
      },
      [](replica_atom, replica_frame&) {
        // A VSR message for a replicated partition's group: this partition is served by this node alone (a topic
        // created again under the same ids is another group: partition_group_id).
      },
      [this](close_atom) { return finish(false); },
      [this](destroy_atom) { return finish(true); },
  };
}

}  // namespace rill::actors
