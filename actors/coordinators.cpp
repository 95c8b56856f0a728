// coordinators: this node's replicas of the consumer-group coordinators (see the header).
#include "actors/coordinators.h"

#include <random>

#include <fmt/core.h>

#include "actors/coordinator_requests.h"
#include "base/assert.h"
#include "net/status.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {

// Ticks a submit waits for this node's replica to apply what the primary committed.
constexpr std::uint32_t apply_wait_ticks = 500;

rill::unexpected refused(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

std::uint64_t drawn_seed() {
  std::random_device rd;
  return rd() | (std::uint64_t{rd()} << 32);
}

}  // namespace

task<expected<std::unique_ptr<coordinators>>> coordinators::open(storage::io::engine& e, std::string dir,
                                                                 coordinators_options options,
                                                                 consensus::group_host& host,
                                                                 consensus::host_transport& net) {
  if (options.count == 0 || options.count > coordinators_max) {
    co_return refused(net::status::invalid_config, fmt::format("cluster.coordinators = {}: allowed range is [1, {}]",
                                                               options.count, coordinators_max));
  }
  std::unique_ptr<coordinators> c(new coordinators(std::move(options), host, net));
  const coordinators_options& o = c->options_;
  c->lanes_.resize(o.count);
  for (std::uint32_t i = 0; i < o.count; ++i) {
    lane& l = c->lanes_[i];
    l.machine = std::make_unique<group_machine>(o.machine, o.wall_ms);
    consensus::cluster_group_options go;
    go.cluster = o.cluster;
    go.group = group_of(i);
    go.members = o.members;
    go.self = o.self;
    go.recovering = o.recovering;
    go.incarnation = o.incarnation;
    go.journal.slot_count = o.journal_slots;
    go.journal.message_size_max = o.journal_message_bytes_max;
    go.snapshot_bytes_max = o.snapshot_bytes_max;
    go.snapshot_reserved_bytes = o.snapshot_reserved_bytes;
    go.seed = o.seed ? o.seed() : drawn_seed();
    const std::string at = fmt::format("{}/{}", dir, i);
    // A failure leaves nothing behind: the lanes opened so far leave the host (closed) before the error returns.
    if (auto made = co_await storage::make_dirs(e, at); !made) {
      (void)co_await c->close();
      co_return rill::unexpected(made.error());
    }
    consensus::driver_hooks hooks;
    hooks.fenced = [notice = o.notice, fenced = o.fenced, i](const error& cause) {
      if (notice) {
        notice(fmt::format("coordinator {}: this node's replica stopped at a storage failure (restart the node): {}", i,
                           cause.message()));
      }
      if (fenced) {
        fenced(i, cause);
      }
    };
    auto group = co_await consensus::cluster_group::open(e, at, *l.machine, go, host, net, std::move(hooks));
    if (!group) {
      (void)co_await c->close();
      co_return rill::unexpected(group.error());
    }
    l.group = std::move(*group);
  }
  co_return c;
}

coordinators::~coordinators() {
  for (const lane& l : lanes_) {
    RILL_ASSERT(!l.busy && l.queue.empty(), "coordinators destroyed with a submit in flight");
  }
}

std::optional<std::uint32_t> coordinators::index_of(consensus::group_t g) const {
  const std::uint64_t v = g.value();
  if (v == 0 || v % 2 != 0 || v / 2 > lanes_.size()) {
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(v / 2 - 1);
}

const group_machine& coordinators::machine(std::uint32_t index) const {
  RILL_ASSERT(index < lanes_.size());
  return *lanes_[index].machine;
}

consensus::node_t coordinators::primary_node(std::uint32_t index) const {
  RILL_ASSERT(index < lanes_.size());
  return lanes_[index].group->primary_node();
}

const consensus::replica& coordinators::replica(std::uint32_t index) const {
  RILL_ASSERT(index < lanes_.size());
  return lanes_[index].group->replica();
}

void coordinators::hand_on(lane& l) {
  RILL_ASSERT(l.busy);
  if (l.queue.empty()) {
    l.busy = false;
    return;
  }
  async_event* next = l.queue.front();
  l.queue.pop_front();
  next->set();  // it runs now, up to its submit (busy stays set: the turn is its)
}

task<expected<proto::CoordinatorReply>> coordinators::submit(std::uint32_t index, proto::CoordinatorCommand command) {
  return submit_at_turn(index, std::move(command), {});
}

task<expected<proto::CoordinatorReply>> coordinators::submit_at_turn(std::uint32_t index,
                                                                     proto::CoordinatorCommand command,
                                                                     std::function<void()> on_turn) {
  RILL_ASSERT(index < lanes_.size());
  lane& l = lanes_[index];
  if (closed_) {
    ++counters_.refused;
    co_return refused(net::status::unavailable, "the node is shutting down");
  }
  if (l.busy) {
    if (l.queue.size() >= options_.queue_max) {
      ++counters_.refused;
      co_return refused(net::status::overloaded,
                        fmt::format("coordinator {} has {} commands waiting on this node, the most it queues; retry",
                                    index, l.queue.size()));
    }
    async_event turn;
    l.queue.push_back(&turn);
    co_await turn.wait();
    if (closed_) {  // woken by close(), which emptied the queue: the turn is not this waiter's
      ++counters_.refused;
      co_return refused(net::status::unavailable, "the node is shutting down");
    }
  }
  l.busy = true;
  if (on_turn) {
    on_turn();
  }
  std::vector<std::byte> body = group_machine::encode(command);
  auto made = co_await l.group->submit(options_.machine.operation, std::move(body));
  if (!made) {
    hand_on(l);
    ++counters_.refused;
    co_return rill::unexpected(made.error());
  }
  const bool applied = co_await l.group->applied_through(made->op, apply_wait_ticks);
  hand_on(l);
  if (!applied) {
    ++counters_.refused;
    co_return refused(net::status::unavailable,
                      fmt::format("coordinator {} committed the command at op {}, but this node has not applied it "
                                  "yet; retry",
                                  index, made->op));
  }
  ++counters_.submitted;
  co_return group_machine::decode_reply(made->reply);
}

struct coordinators::barrier {
  async_event done;
  expected<void> result;
};

task<expected<void>> coordinators::read_barrier(std::uint32_t index) {
  RILL_ASSERT(index < lanes_.size());
  lane& l = lanes_[index];
  if (auto shared = l.barrier_waiting) {
    // A barrier not yet sent: it is sent after this read began, so its commit covers this read too.
    co_await shared->done.wait();
    co_return shared->result;
  }
  auto mine = std::make_shared<barrier>();
  l.barrier_waiting = mine;
  proto::CoordinatorCommand sync;
  sync.mutable_sync();
  // (Named, not a temporary in the co_await: GCC 12 destroys such a temporary twice. It holds a plain pointer:
  // `mine` keeps the barrier alive.)
  std::function<void()> on_turn = [&l, self = mine.get()] {
    if (l.barrier_waiting.get() == self) {
      l.barrier_waiting.reset();  // sent now: a read from here on needs a barrier of its own
    }
  };
  auto r = co_await submit_at_turn(index, std::move(sync), std::move(on_turn));
  if (l.barrier_waiting == mine) {
    l.barrier_waiting.reset();  // (refused before its turn)
  }
  mine->result = r ? coordinator_status(*r) : expected<void>(rill::unexpected(r.error()));
  mine->done.set();
  co_return mine->result;
}

task<bool> coordinators::caught_up(std::uint32_t index, std::uint32_t timeout_ticks) {
  RILL_ASSERT(index < lanes_.size());
  lane& l = lanes_[index];
  const std::uint64_t target = l.group->replica().commit_max().value();
  co_return co_await l.group->applied_through(target, timeout_ticks);
}

void coordinators::on_message(consensus::node_t from, consensus::group_t g, const consensus::message& m) {
  const auto index = index_of(g);
  if (!index || closed_) {
    return;
  }
  const auto cmd = m.h.cmd;
  if (cmd == consensus::command::reply || cmd == consensus::command::eviction) {
    lanes_[*index].group->on_client_message(m);
  } else if (cmd == consensus::command::request) {
    host_.on_request(g, m);
  } else {
    host_.on_message(from, g, m);
  }
}

void coordinators::tick() {
  if (closed_) {
    return;
  }
  ++ticks_;
  for (std::uint32_t i = 0; i < lanes_.size(); ++i) {
    lane& l = lanes_[i];
    l.group->tick();
    if (l.duty || !l.group->replica().is_primary()) {
      continue;
    }
    auto todo = due(i);
    if (!todo.empty()) {
      l.duty = true;
      rill::spawn(duty(i, l.group->replica().view().value(), std::move(todo)), [] {});
    }
  }
}

std::vector<proto::CoordinatorCommand> coordinators::due(std::uint32_t index) {
  lane& l = lanes_[index];
  std::vector<proto::CoordinatorCommand> todo;
  if (l.refreshed_view != l.group->replica().view().value()) {
    // A new primary: the members could not reach it while the view changed, so their sessions start again first.
    todo.emplace_back().mutable_refresh();
  } else if (auto at = l.machine->next_deadline_ms(); at && *at <= options_.wall_ms()) {
    todo.emplace_back().mutable_expire();
  } else if (options_.reconcile && ticks_ - l.reconciled_at >= options_.reconcile_ticks) {
    l.reconciled_at = ticks_;
    todo = options_.reconcile(index, *l.machine);
  }
  return todo;
}

task<void> coordinators::duty(std::uint32_t index, std::uint64_t view, std::vector<proto::CoordinatorCommand> todo) {
  lane& l = lanes_[index];
  RILL_ASSERT(l.duty);
  for (auto& command : todo) {
    if (closed_ || !l.group->replica().is_primary() || l.group->replica().view().value() != view) {
      break;
    }
    const bool refresh = command.has_refresh();
    const bool expire = command.has_expire();
    auto r = co_await submit(index, std::move(command));
    if (!r) {
      if (options_.notice) {
        options_.notice(fmt::format("coordinator {}: a primary's duty failed: {}", index, r.error().message()));
      }
      break;
    }
    if (refresh) {
      l.refreshed_view = view;
      ++counters_.refreshes;
    } else if (expire) {
      ++counters_.expires;
      for (const auto& gone : r->removed()) {
        if (options_.notice) {
          options_.notice(fmt::format("coordinator {}: member {} removed (its session ended)", index, gone));
        }
      }
    }
  }
  l.duty = false;
}

task<expected<void>> coordinators::close() {
  closed_ = true;
  for (lane& l : lanes_) {
    auto waiting = std::move(l.queue);
    l.queue.clear();
    for (async_event* w : waiting) {
      w->set();  // it sees closed_ and answers its caller
    }
  }
  std::optional<error> first;
  for (lane& l : lanes_) {
    if (l.group) {
      if (auto closed = co_await l.group->close(); !closed && !first) {
        first = closed.error();
      }
    }
  }
  if (first) {
    co_return rill::unexpected(*first);
  }
  co_return expected<void>{};
}

}  // namespace rill::actors
