// metadata_actor: the CAF shell of the metadata: commits what metadata_handlers decide, runs the reconciler's steps,
// answers.
#include "actors/metadata_actor.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <random>
#include <variant>

#include "actors/coordinated_flows.h"
#include "actors/group_handlers.h"
#include "actors/replica_partition_actor.hpp"
#include "actors/runtime/shard.h"
#include "consensus/node_identity.h"
#include "net/frame.h"
#include "net/proto/metadata.pb.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {
rill::unexpected fail(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}
// A group request's error as the client sees it (group_state's errors get their own statuses).
outcome group_outcome(const rill::error& e) {
  return outcome{status_of_group(e.code()), e.detail().empty() ? e.message() : e.detail()};
}
}  // namespace

metadata_actor::metadata_actor(caf::actor_config& cfg, const metadata_services* services)
    : metered<metadata_actor_impl::base>(cfg, "metadata", 0),
      homed(0),
      services_(services),
      stamps_(std::make_unique<elapsed_clock>(
          *services->partitions->clk,
          services->partitions->stamps_from.value_or(elapsed_clock::anchor_of(*services->partitions->clk)))) {
  set_metrics_name("metadata");
}

metadata_actor::behavior_type metadata_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  rill::spawn(recover(), [this](expected<void> recovered) {
    ready_ = recovered.has_value();
    if (services_->on_ready) {
      services_->on_ready(ready_, recovered ? std::string() : recovered.error().message());
    }
    set_default_handler(caf::print_and_drop);
    become(serving());
    if (ready_ && cluster_) {
      announce();
      sweep();
    }
  });
  // Until recovery finishes, only I/O completions are handled; everything else waits in the mailbox. (A
  // typed_behavior in CAF 0.17 must handle the whole interface, so this partial one is built through unsafe_init;
  // serving() is checked as complete.)
  set_default_handler(caf::skip);
  return behavior_type{behavior_type::unsafe_init{}, caf::behavior{io_completion{io_.get()}}};
}

metadata_actor::behavior_type metadata_actor::serving() {
  return {
      io_completion{io_.get()},
      [this](metadata_atom, metadata_msg& msg) -> caf::result<metadata_reply> {
        auto rp = make_response_promise<metadata_reply>();
        if (!ready_) {
          return metadata_reply{outcome{net::status::unavailable, "metadata recovery failed"}, {}};
        }
        const bool is_read = is_metadata_read(msg.api);
        auto run = [this, rp, is_read, api = msg.api, header = std::move(msg.header)]() mutable {
          auto finished = [this, rp, is_read](expected<metadata_reply> reply) mutable {
            rp.deliver(reply ? std::move(*reply) : metadata_reply{outcome::of(reply.error()), {}});
            if (!is_read) {
              mutating_ = false;
              pump();
            }
          };
          if (is_read) {
            rill::spawn(read(api, std::move(header)), std::move(finished));
          } else {
            rill::spawn(mutate(api, std::move(header)), std::move(finished));
          }
        };
        if (is_read) {
          run();
        } else {
          mutations_.push_back(std::move(run));
          pump();
        }
        return rp;
      },
      [this](reconcile_atom) {
        reconcile_scheduled_ = false;
        enqueue([this] { return reconcile(); });  // a failure was reported and rescheduled
      },
      [this](replica_tick_atom) { on_replica_tick(); },
      [this](sync_atom) -> caf::result<outcome> {
        if (!cluster_ || closing_) {
          return outcome{};
        }
        auto rp = make_response_promise<outcome>();
        request_sync(
            [rp](expected<void> synced) mutable { rp.deliver(synced ? outcome{} : outcome::of(synced.error())); });
        return rp;
      },
      [this](await_op_atom, std::uint64_t op) -> caf::result<outcome> {
        if (op <= published_op_) {
          return outcome{};
        }
        if (closing_ || op_waiting_.size() >= op_waiters_max) {
          return outcome{net::status::unavailable,
                         fmt::format("this node has not reached metadata op {} yet (it is at {}), and {}; retry, or "
                                     "ask another node",
                                     op, published_op_,
                                     closing_ ? "it is shutting down" : "too many requests already wait for it")};
        }
        auto rp = make_response_promise<outcome>();
        const auto deadline = monotonic_now() + op_wait_timeout;
        op_waiting_.push_back(op_waiter{op, deadline, rp});
        auto self = caf::actor_cast<metadata_actor_impl>(this);
        current_shard()->timers().schedule(deadline, [self] { caf::anon_send(self, op_wait_expired_atom::value); });
        return rp;
      },
      [this](op_wait_expired_atom) { release_op_waiters(true); },
      [this](announce_atom) {
        if (!closing_) {
          announce();
        }
      },
      [this](sweep_atom) {
        if (!closing_) {
          sweep();
        }
      },
      [this](cut_atom, std::uint64_t peer, bool on) {
        if (plane_ && !closing_) {
          (void)plane_->cut(peer, on);
        }
      },
      [this](leader_atom, std::uint64_t ns, bool leads) {
        const bool changed = leads ? led_.insert(ns).second : led_.erase(ns) > 0;
        if (changed && !closing_) {
          publish();
        }
      },
      [this](coordinator_atom, coordinator_msg& msg) -> caf::result<group_reply> {
        auto rp = make_response_promise<group_reply>();
        rill::spawn(coordinate(std::move(msg)), [rp](expected<std::string> r) mutable {
          rp.deliver(r ? group_reply{outcome{}, std::move(*r)} : group_reply{group_outcome(r.error()), {}});
        });
        return rp;
      },
      [this](group_poll_atom, coordinated_poll_msg& msg) -> caf::result<poll_reply> {
        auto rp = make_response_promise<poll_reply>();
        rill::spawn(coordinated_poll(std::move(msg)), [rp](poll_reply r) mutable { rp.deliver(std::move(r)); });
        return rp;
      },
      [this](disconnect_atom, std::uint64_t connection) {
        auto it = coordinated_connections_.find(connection);
        if (it == coordinated_connections_.end()) {
          return;
        }
        const std::set<std::uint32_t> reached = std::move(it->second);
        coordinated_connections_.erase(it);
        if (!coordinators_ || closing_) {
          return;  // the members' sessions end on their own
        }
        const std::uint64_t key = connection_key(services_->cluster->node_id, connection);
        for (const std::uint32_t i : reached) {
          proto::CoordinatorCommand c;
          c.mutable_disconnected()->set_conn(key);
          rill::spawn(coordinators_->submit(i, std::move(c)), [](expected<proto::CoordinatorReply>) {
            // Best effort: a member whose disconnect is lost leaves when its session ends.
          });
        }
      },
      [this](replica_atom, replica_frame& f) {
        // A replicated partition's message to a peer: on the plane (a copy; best effort, as VSR allows).
        if (plane_ && !closing_ && f.m != nullptr) {
          plane_->send(consensus::node_t(static_cast<std::uint32_t>(f.node)), consensus::group_t(f.group), *f.m);
        }
      },
      [this](applied_atom) {
        apply_noticed_ = false;
        if (host_ && !closing_) {
          host_->flush_commits();  // a commit made in a storage completion goes to the backups now, not next tick
        }
        // What another node committed (or this one, through another node's request) is carried out here too.
        enqueue([this] { return reconcile(); });
      },
      [this](close_atom) -> caf::result<outcome> {
        auto rp = make_response_promise<outcome>();
        closing_ = true;  // nothing new starts: no announce, no sync, no tick (close() answers what waits)
        for (auto& w : op_waiting_) {
          w.promise.deliver(outcome{net::status::unavailable, "the node is shutting down"});
        }
        op_waiting_.clear();
        auto job = [](metadata_actor* self) -> task<expected<void>> {
          std::vector<std::uint64_t> all;
          for (const auto& [ns, a] : self->partitions_) {
            all.push_back(ns);
          }
          // Close (not destroy) every partition, then the metadata log.
          for (auto ns : all) {
            auto closed = co_await await_request<outcome>(self, self->partitions_.at(ns), close_atom::value);
            (void)closed;
          }
          self->partitions_.clear();
          // Groups after partitions: their members' parked polls have been answered by now.
          std::vector<group_actor_hdl> groups;  // copied: the map may change while we wait
          for (const auto& [ns, g] : self->groups_) {
            groups.push_back(g);
          }
          self->groups_.clear();
          for (const auto& g : groups) {
            (void)co_await await_request<outcome>(self, g, close_atom::value);
          }
          if (self->group_) {
            RILL_CO_TRY_VOID(co_await self->group_->close());
          }
          if (self->coordinators_) {
            (void)co_await self->coordinators_->close();  // each replica's files are synced as it goes; nothing waits
          }
          if (self->plane_) {
            co_await self->plane_->stop();
          }
          if (self->cluster_) {
            RILL_CO_TRY_VOID(co_await self->cluster_->close());
          }
          co_return expected<void>{};
        };
        rill::spawn(job(this), [this, rp](expected<void> closed) mutable {
          rp.deliver(closed ? outcome{} : outcome::of(closed.error()));
          quit();
        });
        return rp;
      },
  };
}

void metadata_actor::enqueue(std::function<task<expected<void>>()> job, std::function<void(expected<void>)> then) {
  mutations_.push_back([this, job = std::move(job), then = std::move(then)]() mutable {
    rill::spawn(job(), [this, then = std::move(then)](expected<void> done_with) mutable {
      mutating_ = false;
      if (then) {
        then(std::move(done_with));
      }
      pump();
    });
  });
  pump();
}

void metadata_actor::pump() {
  if (mutating_ || mutations_.empty()) {
    return;
  }
  mutating_ = true;
  auto next = std::move(mutations_.front());
  mutations_.pop_front();
  next();
}

std::uint64_t metadata_actor::applied_op() const {
  if (cluster_) {
    return cluster_->replica().commit_min().value();
  }
  return group_ ? group_->committed().value() : 0;
}

void metadata_actor::release_op_waiters(bool expire) {
  const auto now = monotonic_now();
  std::erase_if(op_waiting_, [&](op_waiter& w) {
    if (w.op <= published_op_) {
      w.promise.deliver(outcome{});
      return true;
    }
    if (expire && w.deadline <= now) {
      w.promise.deliver(outcome{
          net::status::unavailable,
          fmt::format("this node has not reached metadata op {} within {} ms (it is at {}): it may be cut off from "
                      "the cluster or still catching up; retry, or ask another node",
                      w.op, op_wait_timeout.count(), published_op_)});
      return true;
    }
    return false;
  });
}

void metadata_actor::publish() {
  auto table = std::make_shared<routing_table>();
  table->view = state_.view();
  table->metadata_op = applied_op();  // the op `view` is the state after (read together: nothing runs between)
  table->cluster_id = services_->cluster_id;
  RILL_ASSERT(table->metadata_op >= published_op_, "published op {} after {}", table->metadata_op, published_op_);
  published_op_ = table->metadata_op;
  table->partitions = partitions_;
  table->groups = groups_;
  for (const std::uint64_t ns : led_) {
    table->led[ns & ~std::uint64_t{partitions_max - 1}].push_back(
        static_cast<std::uint32_t>(ns & (partitions_max - 1)));
  }
  if (services_->cluster != nullptr) {
    table->self = services_->cluster->node_id;
    table->members = services_->cluster->members;
  }
  services_->routes->publish(std::move(table));
  release_op_waiters(false);  // after the publish: a request routed again finds the table at its op
  if (services_->board != nullptr) {
    services_->board->publish(std::make_shared<const proto::ClusterStatusReply>(cluster_status_reply()));
  }
}

// The metadata actor as the executor of reconcile steps: actors spawned on their shards, files removed.
class metadata_actor::step_executor final : public reconcile_executor {
 public:
  explicit step_executor(metadata_actor* self) : self_(self) {}
  bool run_now(const reconcile_step& step) override { return self_->run_now(step); }
  task<expected<void>> run(const reconcile_step& step) override { return self_->run_step(step); }
  void before_resize() override { self_->publish(); }  // groups hand out partitions the routing table already names

 private:
  metadata_actor* self_;
};

task<expected<void>> metadata_actor::reconcile() {
  if (cluster_ && !caught_up_once_) {
    // After a start, the applied metadata may be older than what this node carried out before it stopped: a pass on
    // it would start deleted partitions again and take newer ones' directories for leftovers. It waits until the
    // metadata replica has applied its view's head once (replica::applied_view_head(); issue 38).
    if (!cluster_->replica().applied_view_head()) {
      schedule_reconcile();  // (and every applied op asks again): nothing failed, nothing is carried out yet
      co_return expected<void>{};
    }
    caught_up_once_ = true;
  }
  const auto view = state_.view();
  step_executor executor(this);
  auto carried = co_await carry_out(*view, running_, services_->config->storage, services_->config->data_dir,
                                    placement(), executor);
  if (!carried) {
    reconcile_error_ = carried.error().detail();
    services_->partitions->reporter->notice(
        fmt::format("metadata: could not carry out the committed metadata ({}); retrying in {} ms", reconcile_error_,
                    reconcile_retry_.count()));
    publish();
    schedule_reconcile();
    co_return fail(net::status::storage_error, reconcile_error_);
  }
  publish();  // also a change that needs no step (a rename) has a new view
  if (!reconcile_error_.empty()) {
    services_->partitions->reporter->notice("metadata: the committed metadata is carried out on this node again");
  }
  reconcile_error_.clear();
  reconcile_retry_ = reconcile_retry_min;
  co_return expected<void>{};
}

void metadata_actor::schedule_reconcile() {
  if (reconcile_scheduled_) {
    return;
  }
  reconcile_scheduled_ = true;
  auto self = caf::actor_cast<metadata_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + reconcile_retry_,
                                     [self] { caf::anon_send(self, reconcile_atom::value); });
  reconcile_retry_ = std::min(reconcile_retry_ * 2, reconcile_retry_max);
}

task<expected<void>> metadata_actor::run_step(const reconcile_step& step) {
  const std::string& data_dir = services_->config->data_dir;
  const std::uint64_t delete_step = services_->config->storage.delete_step_bytes;
  switch (step.kind) {
    case reconcile_kind::destroy_partition: {
      auto it = partitions_.find(step.ns);
      if (it == partitions_.end()) {
        // An earlier destroy stopped the actor but could not remove all of its data: remove the rest.
        co_return co_await storage::remove_tree(*io_, partition_dir(data_dir, step.stream_id, step.topic_id, step.id),
                                                delete_step);
      }
      partition_actor_hdl p = it->second;
      partitions_.erase(it);  // the actor stops whatever its destroy answers
      forget_replica(step.ns);
      RILL_CO_TRY(r, co_await await_request<outcome>(this, p, destroy_atom::value));
      if (!r.ok()) {
        co_return fail(r.st, r.message);
      }
      co_return expected<void>{};
    }
    case reconcile_kind::destroy_group: {
      auto it = groups_.find(step.ns);
      if (it == groups_.end()) {
        co_return co_await storage::remove_tree(*io_, group_dir(data_dir, step.stream_id, step.topic_id, step.id),
                                                delete_step);
      }
      group_actor_hdl g = it->second;
      groups_.erase(it);
      RILL_CO_TRY(r, co_await await_request<outcome>(this, g, destroy_atom::value));
      if (!r.ok()) {
        co_return fail(r.st, r.message);
      }
      co_return expected<void>{};
    }
    case reconcile_kind::remove_topic_data:
    case reconcile_kind::remove_stream_data:
      for (const auto& path : step.paths) {
        RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, path, delete_step));
      }
      co_return expected<void>{};
    case reconcile_kind::close_partition: {
      auto it = partitions_.find(step.ns);
      if (it != partitions_.end()) {
        partition_actor_hdl p = it->second;
        partitions_.erase(it);
        forget_replica(step.ns);
        // The actor stops either way; a reopen recovers from what its files hold.
        auto r = co_await await_request<outcome>(this, p, close_atom::value);
        if (!r || !r->ok()) {
          services_->partitions->reporter->notice(
              fmt::format("metadata: {} before it reopens: {}", step.describe(), r ? r->message : r.error().message()));
        }
      }
      co_return expected<void>{};
    }
    case reconcile_kind::spawn_partition:
    case reconcile_kind::spawn_group:
    case reconcile_kind::update_partition:
    case reconcile_kind::resize_group:
      RILL_UNREACHABLE("{} runs at once (run_now)", step.describe());
  }
  RILL_UNREACHABLE("reconcile step {}", static_cast<int>(step.kind));
}

bool metadata_actor::run_now(const reconcile_step& step) {
  // Synchronous steps run here, not as tasks: a pass over thousands of partitions would otherwise chain as many
  // coroutine completions, which grow the stack where the compiler emits no tail call for them (AddressSanitizer).
  const std::string& data_dir = services_->config->data_dir;
  switch (step.kind) {
    case reconcile_kind::spawn_partition: {
      storage::log_options options;
      options.config = step.config;
      options.blocking_writes = services_->config->blocking_writes;
      partition_identity id{step.stream_id, step.topic_id, step.id,
                            partition_dir(data_dir, step.stream_id, step.topic_id, step.id)};
      if (!step.replicas.empty()) {
        // A replicated topic: this node's replica of the partition's VSR group.
        RILL_ASSERT(services_->cluster != nullptr, "{}: replicas outside a cluster", step.describe());
        replica_placement where;
        where.group =
            partition_group_id(step.stream_id, step.topic_id, step.topic_created_ms, step.id, step.partition_created);
        where.members = step.replicas;
        where.self = services_->cluster->node_id;
        where.plane = caf::actor_cast<metadata_actor_hdl>(this);
        const routing* routes = services_->routes;
        where.address_of = [routes](std::uint64_t node) {
          const auto table = routes->current();
          auto it = table->view->nodes.find(node);
          return it == table->view->nodes.end() ? std::string() : it->second;
        };
        where.journal_slots = services_->partition_journal_slots;
        where.recovering = replica_starts_recovering(step.topic_created_ms);
        replica_groups_[where.group] = step.ns;  // (an earlier incarnation's was forgotten when it stopped)
        partitions_[step.ns] = system().spawn<replica_partition_actor>(
            shard_of(step.ns, services_->shards), id, options, std::move(where), services_->partitions);
        return true;
      }
      partitions_[step.ns] =
          system().spawn<partition_actor>(shard_of(step.ns, services_->shards), id, options, services_->partitions);
      return true;
    }
    case reconcile_kind::spawn_group: {
      const auto view = state_.view();
      const topic_meta& topic = view->streams.at(step.stream_id).topics.at(step.topic_id);
      const group_meta& group = topic.groups.at(step.id);
      group_identity id{
          step.stream_id,   topic.id,     group.id,        group.name,
          group.created_ms, group.config, step.partitions, group_dir(data_dir, step.stream_id, topic.id, group.id)};
      groups_[step.ns] =
          system().spawn<group_actor>(shard_of(step.ns, services_->shards), std::move(id), services_->groups);
      return true;
    }
    case reconcile_kind::resize_group:
      if (auto it = groups_.find(step.ns); it != groups_.end()) {
        anon_send(it->second, resize_atom::value, step.partitions);
      }
      return true;
    case reconcile_kind::update_partition:
      if (auto it = partitions_.find(step.ns); it != partitions_.end()) {
        anon_send(it->second, settings_atom::value, step.config);  // (in its mailbox after what was sent before)
      }
      return true;
    default:
      return false;
  }
}

task<expected<void>> metadata_actor::recover() {
  const std::string dir = storage::join_path(services_->config->data_dir, "metadata");
  // A data directory of a build before the metadata VSR group kept a partition log here: refuse it, naming it,
  // rather than start empty beside it.
  if (auto old = co_await storage::list_dir(*io_, storage::join_path(dir, "log")); old) {
    co_return fail(net::status::storage_error,
                   dir +
                       "/log holds metadata in the format of an earlier build (a partition log); this build keeps "
                       "metadata in journal.wal. Recreate the data directory, or run the earlier build to export "
                       "its streams");
  }
  if (services_->cluster != nullptr) {
    RILL_CO_TRY_VOID(co_await open_cluster(dir));
  } else {
    consensus::local_group_options options;
    options.journal.slot_count = services_->journal_slots;
    RILL_CO_TRY(group, co_await consensus::local_group::open(*io_, dir, machine_, options));
    group_ = std::move(group);
  }
  // Partitions and groups of every topic, on their shards (nothing runs yet: a reconciler pass only spawns, which
  // cannot fail); then data of anything deleted before a crash could remove it goes.
  RILL_CO_TRY_VOID(co_await reconcile());
  if (!cluster_) {
    RILL_CO_TRY_VOID(co_await remove_orphans());
  }
  publish();
  co_return expected<void>{};
}

task<expected<void>> metadata_actor::remove_orphans() {
  // Group state of deleted streams, topics and groups first, then their partitions' data.
  std::vector<std::string> orphans;
  for (const auto tree : {data_tree::groups, data_tree::streams}) {
    co_await find_orphans(tree, data_tree_root(services_->config->data_dir, tree), {}, &orphans);
  }
  for (const auto& o : orphans) {
    services_->partitions->reporter->notice("removing data of a deleted stream, topic or partition: " + o);
    RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, o, services_->config->storage.delete_step_bytes));
  }
  co_return expected<void>{};
}

task<expected<void>> metadata_actor::sweep_once() {
  RILL_CO_TRY_VOID(co_await barrier());
  RILL_CO_TRY_VOID(co_await settle_recovery());
  co_return co_await remove_orphans();
}

bool metadata_actor::replica_starts_recovering(std::uint64_t topic_created_ms) const {
  const metadata_cluster* c = services_->cluster;
  if (c == nullptr || !c->recovering) {
    return false;
  }
  const auto lost = topics_lost_through_ms_ ? topics_lost_through_ms_ : c->topics_lost_through_ms;
  return !lost || topic_created_ms <= *lost;
}

task<expected<void>> metadata_actor::settle_recovery() {
  const metadata_cluster* c = services_->cluster;
  if (c == nullptr || !c->recovering || c->topics_lost_through_ms || topics_lost_through_ms_) {
    co_return expected<void>{};
  }
  // Every topic that existed when the disk was lost is in this view (the barrier committed after this start, which
  // came after the loss); topics created later are newer than the newest here, or equal (then they count as lost:
  // the safe side).
  std::uint64_t through = 0;
  const auto view = state_.view();
  for (const auto& [sid, s] : view->streams) {
    for (const auto& [tid, t] : s.topics) {
      through = std::max(through, t.created_ms);
    }
  }
  consensus::node_identity id;
  id.cluster_id = c->cluster_id;
  id.node_id = c->node_id;
  id.members = c->members;
  id.recovering = true;
  id.topics_lost_through_ms = through;
  RILL_CO_TRY_VOID(co_await consensus::write_node_identity(*io_, services_->config->data_dir, id));
  topics_lost_through_ms_ = through;
  services_->partitions->reporter->notice(
      fmt::format("recovered node: partition replicas of topics created through {} ms start recovering; newer ones "
                  "start fresh",
                  through));
  co_return expected<void>{};
}

void metadata_actor::sweep() {
  enqueue([this] { return sweep_once(); },
          [this](expected<void> swept) {
            if (!swept && !closing_) {
              // No quorum yet, most likely: try again in a second.
              auto self = caf::actor_cast<metadata_actor_impl>(this);
              current_shard()->timers().schedule(monotonic_now() + std::chrono::seconds(1),
                                                 [self] { caf::anon_send(self, sweep_atom::value); });
            }
          });
}

task<void> metadata_actor::find_orphans(data_tree tree, std::string dir, std::vector<std::uint64_t> parents,
                                        std::vector<std::string>* orphans) {
  const std::string listed = data_tree_children(tree, dir, parents.size());
  auto names = co_await storage::list_dir(*io_, listed);
  if (!names) {
    co_return;
  }
  for (const auto& name : *names) {
    const std::string path = storage::join_path(listed, name);
    const auto id = known_data_entry(*state_.view(), tree, parents, name);
    if (!id) {
      orphans->push_back(path);
    } else if (parents.size() + 1 < data_tree_depth) {
      parents.push_back(*id);
      co_await find_orphans(tree, path, parents, orphans);
      parents.pop_back();
    }
  }
}

task<expected<void>> metadata_actor::commit(proto::MetadataCommand cmd) {
  cmd.set_time_ms(static_cast<std::uint64_t>(stamps_->now_ms()));
  RILL_CO_TRY_VOID(state_.check(cmd));
  const std::string bytes = cmd.SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  std::vector<std::byte> body(p, p + bytes.size());
  if (cluster_) {
    RILL_CO_TRY_VOID(check_quorum_reachable());
    // Through this node's session, to whichever node is primary; then applied here too before the change is
    // carried out and answered (read-your-writes through this node).
    auto made = co_await cluster_->submit(operation_metadata_command, std::move(body));
    if (!made) {
      services_->partitions->reporter->notice("metadata: " + made.error().message());
      co_return rill::unexpected(made.error());
    }
    if (!co_await cluster_->applied_through(made->op, cluster_apply_wait_ticks)) {
      co_return fail(net::status::unavailable,
                     fmt::format("the change was committed at op {} but this node has not applied it yet; it will "
                                 "(retrying finds it made)",
                                 made->op));
    }
    RILL_CO_TRY_VOID(metadata_machine::decode_reply(made->reply));
    co_return expected<void>{};
  }
  auto committed = co_await group_->submit(operation_metadata_command, std::move(body));
  if (!committed) {
    // The group is fenced (a failed write or fsync): metadata refuses changes until a restart recovers it.
    services_->partitions->reporter->notice("metadata: " + committed.error().message());
    co_return fail(net::status::storage_error, committed.error().message());
  }
  RILL_CO_TRY_VOID(metadata_machine::decode_reply(*committed));
  co_return expected<void>{};
}

task<expected<metadata_reply>> metadata_actor::read(std::uint16_t api, std::string header) {
  if (net::api_from_wire(api) == net::api::cluster_status) {
    co_return metadata_reply{outcome{}, cluster_status_reply().SerializeAsString(), applied_op()};
  }
  auto plan = plan_read(*state_.view(), api, header);
  std::uint64_t op = applied_op();  // of the view just read
  if (!plan && cluster_ && is_not_found(plan.error())) {
    // This node may not have applied a change another node made: it catches up, then looks again.
    RILL_CO_TRY_VOID(co_await synced());
    plan = plan_read(*state_.view(), api, header);
    op = applied_op();
  }
  if (!plan) {
    co_return rill::unexpected(plan.error());
  }
  auto reply = co_await answer(std::move(*plan));
  if (reply) {
    reply->op = op;
  }
  co_return reply;
}

task<expected<metadata_reply>> metadata_actor::mutate(std::uint16_t api, std::string header) {
  // A change is planned against a node that carries out everything committed before it: a step still failing
  // refuses the change (nothing is committed), naming the step.
  if (!reconcile_error_.empty()) {
    if (auto carried = co_await reconcile(); !carried) {
      co_return fail(net::status::unavailable,
                     fmt::format("this node has not yet carried out the metadata committed before ({}); the change "
                                 "was not made, retry it later",
                                 carried.error().message()));
    }
  }
  auto planned =
      plan_change(*state_.view(), api, header, services_->config->storage, services_->config->limits, replication());
  if (!planned && cluster_ && is_not_found(planned.error())) {
    // Not found here may be this node being behind (the stream made through another node a moment ago): catch up
    // first (a barrier, directly: this runs as the mutation the session serves), then plan again.
    RILL_CO_TRY_VOID(co_await barrier());
    planned =
        plan_change(*state_.view(), api, header, services_->config->storage, services_->config->limits, replication());
  }
  if (!planned) {
    co_return rill::unexpected(planned.error());
  }
  auto change = std::move(*planned);
  // What a deleted one with a reused id left goes before the creation is committed: after the commit, recovery
  // would take it for the new one's data.
  for (const auto& dir : leftovers_of(change, services_->config->data_dir)) {
    RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, dir, services_->config->storage.delete_step_bytes));
  }
  // The command first: a crash after it leaves only data, which recovery removes.
  RILL_CO_TRY_VOID(co_await commit(change.command));
  // The change is made once committed, and answered so (a retry would find it made): a step that fails here (only
  // a destroy or a removal can) was reported and is retried on its own, and further changes wait for it.
  (void)co_await reconcile();
  const std::uint64_t op = applied_op();  // of the view the reply describes (at least the change's op)
  auto reply = co_await answer(reply_of(change, *state_.view()));
  if (reply) {
    reply->op = op;
  }
  co_return reply;
}

task<expected<metadata_reply>> metadata_actor::answer(reply_plan plan) {
  for (auto& t : plan.topics) {
    for (auto ns : t.partitions) {
      auto it = partitions_.find(ns);
      const std::uint64_t home =
          services_->cluster == nullptr ? 0 : topic_home(t.info.stream_id(), t.info.id(), services_->cluster->members);
      const std::uint32_t factor = t.info.config().replication_factor();
      const auto pid = static_cast<std::uint32_t>(ns & (partitions_max - 1));
      if (it != partitions_.end()) {
        RILL_CO_TRY(pi, co_await await_request<partition_info>(this, it->second, info_atom::value));
        *t.info.add_partitions() = pi.info;
        if (factor <= 1) {
          t.info.mutable_partitions(t.info.partitions_size() - 1)->set_node_id(home);
        }  // else its replica here said who it is and what it knows
      } else if (factor > 1 && services_->cluster != nullptr) {
        // A replicated partition with no replica here: its members, and its preferred primary to ask.
        auto* other = t.info.add_partitions();
        other->set_id(pid);
        const auto replicas =
            partition_replicas(t.info.stream_id(), t.info.id(), pid, factor, services_->cluster->members);
        for (auto n : replicas) {
          other->add_replicas(n);
        }
        other->set_node_id(replicas.front());
        const auto& nodes = state_.view()->nodes;
        auto known = nodes.find(replicas.front());
        other->set_served_by(known == nodes.end() ? fmt::format("node {}", replicas.front()) : known->second);
      } else if (home != 0 && home != services_->cluster->node_id) {
        auto* other = t.info.add_partitions();  // another node's: its id and node only
        other->set_id(pid);
        other->set_node_id(home);
        const auto& nodes = state_.view()->nodes;
        auto known = nodes.find(home);
        other->set_served_by(known == nodes.end() ? fmt::format("node {}", home) : known->second);
      }
    }
  }
  // Each group as its actor describes it; a group another node coordinates (a cluster: the topic's node) as the
  // metadata knows it, naming that node (its members, generation and offsets are there).
  std::vector<std::variant<group_actor_hdl, std::string>> groups;  // copied: the map may change while we wait
  for (auto ns : plan.groups) {
    if (auto it = groups_.find(ns); it != groups_.end()) {
      groups.emplace_back(it->second);
    } else if (auto coordinated = coordinated_group_reply(ns)) {
      groups.emplace_back(std::move(*coordinated));
    } else if (auto remote = remote_group_reply(ns)) {
      groups.emplace_back(std::move(*remote));
    }
  }
  std::vector<std::string> described;
  for (auto& g : groups) {
    if (auto* header = std::get_if<std::string>(&g)) {
      described.push_back(std::move(*header));
      continue;
    }
    RILL_CO_TRY(d, co_await await_request<group_reply>(this, std::get<group_actor_hdl>(g), describe_atom::value));
    if (!d.result.ok()) {
      co_return fail(d.result.st, d.result.message);
    }
    described.push_back(std::move(d.header));
  }
  if (plan.kind == reply_kind::group && described.empty()) {
    co_return fail(net::status::unavailable, "the group was created, but is not yet known here; describe it again");
  }
  if (plan.kind == reply_kind::stats) {
    plan.stats.set_partitions(static_cast<std::uint32_t>(partitions_.size()));
    plan.stats.set_shards(static_cast<std::uint32_t>(services_->shards));
    std::vector<partition_actor_hdl> parts;  // copied: the map may change while we wait
    for (const auto& [ns, a] : partitions_) {
      parts.push_back(a);
    }
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    for (const auto& a : parts) {
      RILL_CO_TRY(pi, co_await await_request<partition_info>(this, a, info_atom::value));
      messages += pi.info.high_watermark() - pi.info.log_start();
      bytes += pi.info.bytes();
    }
    plan.stats.set_messages(messages);
    plan.stats.set_bytes(bytes);
  }
  co_return metadata_reply{outcome{}, build_reply(std::move(plan), described)};
}

std::optional<std::string> metadata_actor::remote_group_reply(std::uint64_t ns) const {
  if (services_->cluster == nullptr || !state_.view()) {
    return std::nullopt;
  }
  for (const auto& [sid, s] : state_.view()->streams) {
    for (const auto& [tid, t] : s.topics) {
      for (const auto& [gid, g] : t.groups) {
        if (group_namespace(sid, tid, gid) != ns) {
          continue;
        }
        group_identity id;
        id.stream_id = sid;
        id.topic_id = tid;
        id.group_id = gid;
        id.name = g.name;
        id.created_ms = g.created_ms;
        id.config = g.config;
        proto::GroupGetReply out;
        *out.mutable_group() = describe_group(id, nullptr, services_->partitions->clk->monotonic());
        out.mutable_group()->set_coordinator_node(topic_home(sid, tid, services_->cluster->members));
        out.mutable_group()->set_from_metadata(true);
        return out.SerializeAsString();
      }
    }
  }
  return std::nullopt;
}

task<expected<void>> metadata_actor::open_cluster(const std::string& dir) {
  const metadata_cluster& c = *services_->cluster;
  auto* reporter = services_->partitions->reporter;
  consensus::replica_plane_options po;
  po.ours.cluster_id = c.cluster_id;
  po.ours.node_id = c.node_id;
  po.ours.members_digest = c.members_digest;
  po.ours.incarnation = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
  po.peers = c.peers;
  po.members = c.members;
  plane_ = std::make_unique<consensus::replica_plane>(
      *io_, std::move(po), c.replica_fd,
      [this](std::uint64_t from, consensus::peer_frame f) { on_frame(from, std::move(f)); },
      [reporter](const std::string& line) { reporter->notice(line); });
  consensus::cluster_group_options go;
  go.cluster = c.cluster_id;
  go.group = metadata_group;
  for (auto id : c.members) {
    go.members.push_back(consensus::node_t(static_cast<std::uint32_t>(id)));
  }
  go.self = consensus::node_t(static_cast<std::uint32_t>(c.node_id));
  go.recovering = c.recovering;
  // (A recovering member's incarnation starts at the wall clock: a floor under the one it takes once caught up.)
  const auto format_ms = std::max<std::int64_t>(0, services_->partitions->clk->wall_ms().value());
  go.incarnation = c.recovering ? static_cast<std::uint64_t>(format_ms) : 0;
  go.journal.slot_count = services_->journal_slots;
  go.seed = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
  consensus::host_options ho;
  ho.cluster = c.cluster_id;
  ho.node = go.self;
  ho.heartbeat_ticks = go.replica.heartbeat_ticks;
  ho.peer_timeout_ticks = go.replica.heartbeat_ticks * 4;
  ho.commit_heartbeats_per_tick_max = 16;  // one group led: a heartbeat is 96 bytes
  host_ = std::make_unique<consensus::group_host>(ho, *plane_);
  consensus::driver_hooks hooks;
  auto self = caf::actor_cast<metadata_actor_impl>(this);
  auto noticed = [this, self](const consensus::header&) {
    if (!apply_noticed_ && !closing_) {
      apply_noticed_ = true;
      caf::anon_send(self, applied_atom::value);
    }
  };
  hooks.applied = noticed;
  hooks.installed = noticed;
  hooks.fenced = [reporter](const error& e) {
    reporter->notice(
        "metadata: this node's replica of the metadata group stopped at a storage failure (restart "
        "the node): " +
        e.message());
  };
  RILL_CO_TRY(group,
              co_await consensus::cluster_group::open(*io_, dir, machine_, go, *host_, *plane_, std::move(hooks)));
  cluster_ = std::move(group);
  coordinators_options co;
  co.cluster = c.cluster_id;
  co.members = go.members;
  co.self = go.self;
  co.recovering = c.recovering;
  co.incarnation = go.incarnation;
  co.count = coordinator_groups;
  co.journal_slots = coordinator_journal_slots;
  co.wall_ms = [stamps = stamps_.get()] { return stamps->now_ms(); };
  co.reconcile = [this](std::uint32_t index, const group_machine& m) {
    return reconcile_commands(*state_.view(), m, index, coordinator_groups, 64);
  };
  co.notice = [reporter](const std::string& line) { reporter->notice(line); };
  RILL_CO_TRY(coords, co_await coordinators::open(*io_, storage::join_path(services_->config->data_dir, "coordinators"),
                                                  std::move(co), *host_, *plane_));
  coordinators_ = std::move(coords);
  plane_->start();
  schedule_tick();
  reporter->notice(fmt::format("metadata: node {} of cluster {} (members {}), replica {} of the metadata group",
                               c.node_id, c.cluster_id, fmt::join(c.members, ", "),
                               cluster_->replica().durable_state().replica));
  co_return expected<void>{};
}

void metadata_actor::schedule_tick() {
  auto self = caf::actor_cast<metadata_actor_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + replica_tick,
                                     [self] { caf::anon_send(self, replica_tick_atom::value); });
}

void metadata_actor::on_replica_tick() {
  if (closing_ || !cluster_) {
    return;
  }
  host_->tick(1);
  cluster_->tick();
  if (coordinators_) {
    coordinators_->tick();
  }
  if (const std::uint64_t view = cluster_->replica().view().value(); view != last_view_) {
    last_view_ = view;
    ++view_changes_;
  }
  if (++ticks_ % board_ticks == 0 && services_->board != nullptr) {
    services_->board->publish(std::make_shared<const proto::ClusterStatusReply>(cluster_status_reply()));
  }
  if (ticks_ % board_ticks == 0 && services_->links != nullptr) {
    std::size_t slot = 0;
    for (const auto& p : plane_->status()) {
      if (p.connected && slot < services_->links->connected.size()) {
        services_->links->connected[slot++].store(p.node_id, std::memory_order_relaxed);
      }
    }
    for (; slot < services_->links->connected.size(); ++slot) {
      services_->links->connected[slot].store(0, std::memory_order_relaxed);
    }
  }
  plane_->tick(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(monotonic_now()).count()));
  const std::size_t reachable = 1 + plane_->connected_peers();  // itself and the peers connected
  if (reachable >= consensus::quorum_replication(services_->cluster->members.size())) {
    quorum_lost_since_.reset();
  } else if (!quorum_lost_since_) {
    quorum_lost_since_ = monotonic_now();
  }
  schedule_tick();
}

expected<void> metadata_actor::check_quorum_reachable() const {
  if (!quorum_lost_since_ || monotonic_now() - *quorum_lost_since_ < quorum_lost_grace) {
    return {};
  }
  const std::size_t members = services_->cluster->members.size();
  const std::size_t reachable = 1 + plane_->connected_peers();
  std::string away;
  for (const auto& p : plane_->status()) {
    if (!p.connected) {
      away += fmt::format("{}node {} ({}{}{})", away.empty() ? "" : ", ", p.node_id, p.address,
                          p.last_error.empty() ? "" : ": ", p.last_error);
    }
  }
  return fail(net::status::unavailable,
              fmt::format("no quorum: this node reaches {} of the {} members (a commit needs {}); out of reach: {}. "
                          "Nothing was sent; retry once a majority is back",
                          reachable, members, consensus::quorum_replication(members), away));
}

void metadata_actor::on_frame(std::uint64_t from, consensus::peer_frame frame) {
  if (closing_ || !cluster_) {
    return;
  }
  if (frame.kind == consensus::peer_frame_kind::heartbeat) {
    host_->on_heartbeat(frame.beat);
    return;
  }
  if (coordinators_ && coordinators_->index_of(frame.group)) {
    coordinators_->on_message(consensus::node_t(static_cast<std::uint32_t>(from)), frame.group, frame.m);
    return;
  }
  if (frame.group != metadata_group) {
    // A replicated partition's group: to this node's replica of it, on its shard (dropped when it runs none here:
    // the partition was deleted, or is not placed here yet).
    auto g = replica_groups_.find(frame.group.value());
    if (g == replica_groups_.end()) {
      return;
    }
    auto p = partitions_.find(g->second);
    if (p != partitions_.end()) {
      caf::anon_send(
          p->second, replica_atom::value,
          replica_frame{from, frame.group.value(), std::make_shared<const consensus::message>(std::move(frame.m))});
    }
    return;
  }
  const auto cmd = frame.m.h.cmd;
  if (cmd == consensus::command::reply || cmd == consensus::command::eviction) {
    cluster_->on_client_message(frame.m);
  } else if (cmd == consensus::command::request) {
    host_->on_request(metadata_group, frame.m);
  } else {
    host_->on_message(consensus::node_t(static_cast<std::uint32_t>(from)), metadata_group, frame.m);
  }
}

void metadata_actor::forget_replica(std::uint64_t ns) {
  // Its running entry names the incarnation, hence the group id (a partition not replicated has none to forget).
  if (auto r = running_.partitions.find(ns); r != running_.partitions.end()) {
    const running_partition& p = r->second;
    replica_groups_.erase(partition_group_id(p.stream_id, p.topic_id, p.topic_created_ms, p.partition_id, p.created));
  }
  led_.erase(ns);
}

replication_limits metadata_actor::replication() const {
  replication_limits r;
  r.members = services_->cluster == nullptr ? 1 : static_cast<std::uint32_t>(services_->cluster->members.size());
  r.factor_default =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(services_->config->replication_factor_default, r.members));
  return r;
}

node_placement metadata_actor::placement() const {
  node_placement here;
  if (services_->cluster != nullptr) {
    here.self = services_->cluster->node_id;
    here.members = services_->cluster->members;
  }
  return here;
}

void metadata_actor::announce() {
  enqueue([this] { return announce_once(); },
          [this](expected<void> announced) {
            if (!announced && !closing_) {
              // No quorum yet, most likely: try again in a second.
              auto self = caf::actor_cast<metadata_actor_impl>(this);
              current_shard()->timers().schedule(monotonic_now() + std::chrono::seconds(1),
                                                 [self] { caf::anon_send(self, announce_atom::value); });
            }
          });
}

task<expected<void>> metadata_actor::announce_once() {
  const std::string address = services_->advertised_address;
  const std::uint64_t self = services_->cluster->node_id;
  if (auto known = state_.view()->nodes.find(self); known != state_.view()->nodes.end() && known->second == address) {
    co_return expected<void>{};
  }
  proto::MetadataCommand cmd;
  cmd.mutable_set_node()->set_node_id(self);
  cmd.mutable_set_node()->set_client_address(address);
  RILL_CO_TRY_VOID(co_await commit(std::move(cmd)));
  services_->partitions->reporter->notice(
      fmt::format("metadata: node {} announced its client address {}", self, address));
  co_return expected<void>{};
}

proto::ClusterStatusReply metadata_actor::cluster_status_reply() const {
  proto::ClusterStatusReply out;
  out.set_client_address(services_->advertised_address);
  if (services_->cluster == nullptr) {
    out.set_role("alone");
    out.set_node_id(services_->config->node_id);
    out.set_cluster_id(services_->cluster_id);
    if (group_) {
      out.set_op(group_->committed().value());
      out.set_commit(group_->committed().value());
      out.set_commit_max(group_->committed().value());
      out.set_checkpoint(group_->checkpoint().value());
    }
    return out;
  }
  const metadata_cluster& c = *services_->cluster;
  out.set_cluster_id(c.cluster_id);
  out.set_node_id(c.node_id);
  if (cluster_) {
    const auto& r = cluster_->replica();
    const bool recovering = r.durable_state().recovering;
    out.set_role(recovering                                      ? "recovering"
                 : r.status() == consensus::status::view_change  ? "view_change"
                 : cluster_->primary_node().value() == c.node_id ? "primary"
                                                                 : "backup");
    out.set_view(r.view().value());
    out.set_log_view(r.log_view().value());
    out.set_op(r.op().value());
    out.set_commit(r.commit_min().value());
    out.set_commit_max(r.commit_max().value());
    out.set_checkpoint(r.durable_state().checkpoint.op());
    out.set_primary_node(cluster_->primary_node().value());
    out.set_view_changes(view_changes_);
  }
  out.set_partitions_led(led_.size());
  if (services_->links != nullptr) {
    out.set_under_replicated(static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, services_->links->under_replicated.load(std::memory_order_relaxed))));
  }
  const auto& nodes = state_.view()->nodes;
  if (plane_) {
    for (const auto& p : plane_->status()) {
      auto* peer = out.add_peers();
      peer->set_node_id(p.node_id);
      peer->set_replica_address(p.address);
      if (auto known = nodes.find(p.node_id); known != nodes.end()) {
        peer->set_client_address(known->second);
      }
      peer->set_connected(p.connected);
      peer->set_last_error(p.last_error);
      peer->set_bytes_sent(p.stats.bytes_sent);
      peer->set_bytes_received(p.stats.bytes_received);
      peer->set_messages_sent(p.stats.frames_sent);
      peer->set_messages_received(p.stats.frames_received);
      peer->set_connects(p.stats.connects);
      peer->set_refused(p.stats.refused);
      peer->set_heartbeats_dropped(p.stats.heartbeats_dropped);
      peer->set_queued_bytes(p.queued_bytes);
    }
  }
  return out;
}

bool is_not_found(const error& e) {
  const auto st = net::status_of(e.code());
  return st == net::status::stream_not_found || st == net::status::topic_not_found ||
         st == net::status::group_not_found || st == net::status::partition_not_found;
}

void metadata_actor::request_sync(std::function<void(expected<void>)> then) {
  sync_waiting_.push_back(std::move(then));
  if (sync_queued_) {
    return;
  }
  sync_queued_ = true;
  // One barrier for every sync that arrived before it starts (those that arrive meanwhile wait for the next). It runs
  // as a mutation does: the session takes one request at a time.
  auto round = std::make_shared<std::vector<std::function<void(expected<void>)>>>();
  enqueue(
      [this, round] {
        sync_queued_ = false;
        *round = std::move(sync_waiting_);
        sync_waiting_.clear();
        return barrier();
      },
      [round](expected<void> synced) {
        for (auto& w : *round) {
          w(synced);
        }
      });
}

task<expected<void>> metadata_actor::synced() {
  struct wait {
    async_event done;
    expected<void> result;
  } w;
  request_sync([&w](expected<void> r) {
    w.result = std::move(r);
    w.done.set();
  });
  co_await w.done.wait();
  co_return w.result;
}

task<expected<void>> metadata_actor::barrier() {
  proto::MetadataCommand cmd;
  cmd.mutable_barrier();
  RILL_CO_TRY_VOID(co_await commit(std::move(cmd)));
  // Carried out and published too: a request routed again after the sync finds the partitions the table names.
  (void)co_await reconcile();
  co_return expected<void>{};
}

task<expected<coordinated_group>> metadata_actor::find_coordinated(std::uint32_t stream_id, std::uint32_t topic_id,
                                                                   std::uint32_t group_id) {
  if (!coordinators_) {
    co_return fail(net::status::unavailable, "this node runs no group coordinators (it is not a cluster member)");
  }
  auto g = find_coordinated_group(*state_.view(), stream_id, topic_id, group_id);
  if (!g) {
    // This node may not have applied the group's creation yet: it catches up, then looks again.
    RILL_CO_TRY_VOID(co_await synced());
    g = find_coordinated_group(*state_.view(), stream_id, topic_id, group_id);
  }
  if (!g) {
    co_return fail(
        net::status::group_not_found,
        fmt::format("group {} of topic {} of stream {} is not found (deleted?)", group_id, topic_id, stream_id));
  }
  co_return std::move(*g);
}

task<expected<std::string>> metadata_actor::coordinate(coordinator_msg msg) {
  RILL_CO_TRY(g, co_await find_coordinated(msg.stream_id, msg.topic_id, msg.group_id));
  const std::uint32_t index = coordinators_->index_for(g.key());
  const std::uint64_t conn = connection_key(services_->cluster->node_id, msg.connection);
  const std::uint64_t connection = msg.connection;
  RILL_CO_TRY(answer, co_await actors::coordinate(*coordinators_, g, msg.api, std::move(msg.header), conn, [=, this] {
                coordinated_connections_[connection].insert(index);  // told when the connection closes
              }));
  if (answer.describe) {
    co_return co_await describe_coordinated_with_offsets(std::move(g), index, answer.offsets_only);
  }
  co_return std::move(answer.header);
}

task<poll_reply> metadata_actor::coordinated_poll(coordinated_poll_msg msg) {
  auto g = co_await find_coordinated(msg.stream_id, msg.topic_id, msg.group_id);
  if (!g) {
    co_return poll_reply{group_outcome(g.error()), nullptr};
  }
  auto planned = co_await plan_member_poll(*coordinators_, *g, std::move(msg.request), coordinated_poll_catch_up_ticks);
  if (!planned) {
    co_return poll_reply{group_outcome(planned.error()), nullptr};
  }
  // (Named, not a temporary in the co_await: GCC 12 destroys such a temporary twice.)
  poll_msg ask{planned->request, planned->resume_at};
  partition_actor_hdl partition = msg.partition;
  auto r = co_await await_request<poll_reply>(this, partition, poll_atom::value, std::move(ask));
  if (!r) {
    co_return poll_reply{group_outcome(r.error()), nullptr};
  }
  if (!r->result.ok()) {
    co_return std::move(*r);
  }
  // Nothing goes out before the member's ownership is confirmed against the committed state (coordinated_flows.h).
  const bool data = r->data && r->data->batches > 0;
  auto confirmed = co_await confirm_member_poll(
      *coordinators_, *g, *planned, data ? std::optional<std::int64_t>(r->data->next_offset.value()) : std::nullopt);
  if (!confirmed) {
    co_return poll_reply{group_outcome(confirmed.error()), nullptr};
  }
  co_return std::move(*r);
}

proto::GroupInfo metadata_actor::describe_coordinated(
    const coordinated_group& g, std::uint32_t index,
    const std::vector<std::optional<proto::PartitionInfo>>& offsets) const {
  const group_machine& m = coordinators_->machine(index);
  const group_state* state = coordinated_state(m, g);
  std::optional<group_state> empty;
  if (state == nullptr) {
    empty.emplace(g.id.partitions,
                  g.id.config.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? assignment_strategy::round_robin
                                                                          : assignment_strategy::range,
                  std::chrono::milliseconds(g.id.config.session_timeout_ms()));
    state = &*empty;
  }
  const auto now = std::chrono::duration_cast<group_state::time_point>(
      std::chrono::milliseconds(services_->partitions->clk->wall_ms().value()));
  proto::GroupInfo info = describe_group(g.id, state, now);
  for (std::uint32_t p = 0; p < state->partitions(); ++p) {
    describe_partition(info, *state, p, p < offsets.size() && offsets[p] ? &*offsets[p] : nullptr);
  }
  info.set_coordinator_node(coordinators_->primary_node(index).value());
  info.set_coordinator(index);
  return info;
}

task<expected<std::string>> metadata_actor::describe_coordinated_with_offsets(coordinated_group g, std::uint32_t index,
                                                                              bool offsets_only) {
  // Each partition's line, with its offsets where this node holds a replica of it (else without the lag).
  std::vector<std::optional<proto::PartitionInfo>> offsets(g.id.partitions);
  for (std::uint32_t p = 0; p < g.id.partitions; ++p) {
    auto it = partitions_.find(partition_namespace(g.id.stream_id, g.id.topic_id, p));
    if (it == partitions_.end()) {
      continue;
    }
    partition_actor_hdl a = it->second;  // copied: the map may change while we wait
    auto pi = co_await await_request<partition_info>(this, a, info_atom::value);
    if (pi && pi->result.ok()) {
      offsets[p] = std::move(pi->info);
    }
  }
  co_return describe_reply(offsets_only, describe_coordinated(g, index, offsets));
}

std::optional<std::string> metadata_actor::coordinated_group_reply(std::uint64_t ns) const {
  if (!coordinators_) {
    return std::nullopt;
  }
  for (const auto& [sid, s] : state_.view()->streams) {
    for (const auto& [tid, t] : s.topics) {
      for (const auto& [gid, gm] : t.groups) {
        if (group_namespace(sid, tid, gid) != ns) {
          continue;
        }
        auto g = find_coordinated_group(*state_.view(), sid, tid, gid);
        if (!g) {
          return std::nullopt;
        }
        proto::GroupGetReply out;
        *out.mutable_group() = describe_coordinated(*g, coordinators_->index_for(g->key()));
        return out.SerializeAsString();
      }
    }
  }
  return std::nullopt;
}

}  // namespace rill::actors
