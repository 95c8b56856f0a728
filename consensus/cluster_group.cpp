// cluster_group: one node's replica of a group spanning several nodes, and its session (see the header).
#include "consensus/cluster_group.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"

namespace rill::consensus {

using storage::errc;
using storage::make_unexpected;

task<expected<std::unique_ptr<cluster_group>>> cluster_group::open(storage::io::engine& e, std::string dir,
                                                                   state_machine& sm, cluster_group_options o,
                                                                   group_host& host, host_transport& net,
                                                                   driver_hooks hooks) {
  RILL_ASSERT(std::is_sorted(o.members.begin(), o.members.end()));
  const auto self = std::find(o.members.begin(), o.members.end(), o.self);
  RILL_ASSERT(self != o.members.end(), "node {} is no member of its group", o.self.value());
  if (o.members.size() < 2 || o.members.size() > replicas_max) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("a cluster group of {} members: allowed is 2 to {}",
                                                                  o.members.size(), replicas_max));
  }
  const auto index = static_cast<replica_t>(self - o.members.begin());
  std::unique_ptr<cluster_group> g(new cluster_group(o, host, net));
  vsr_state initial;
  initial.cluster = o.cluster;
  initial.replica = index;
  initial.replica_count = static_cast<std::uint8_t>(o.members.size());
  initial.recovering = o.recovering;
  initial.incarnation = std::min(o.incarnation, incarnation_max);
  journal_storage_options so;
  so.journal = o.journal;
  so.snapshot_bytes_max = o.snapshot_bytes_max;
  so.snapshot_reserved_bytes = o.snapshot_reserved_bytes;
  recovered_state r;
  RILL_CO_TRY(storage, co_await journal_storage::open(e, dir, so, initial, r));
  g->storage_ = std::move(storage);
  // A replica formatted to recover (a member whose data was lost) never starts as a new group's replica: its group
  // ran before it, and it catches up before it takes part.
  r.formatted = r.formatted && !r.state.recovering;
  RILL_CO_TRY_VOID(check_recovered_checkpoint(r, o.clients_max, sm, dir));
  replica_options ro = o.replica;
  ro.cluster = o.cluster;
  ro.replica = index;
  ro.replica_count = static_cast<std::uint8_t>(o.members.size());
  ro.clients_max = o.clients_max;
  ro.checkpoint_interval = o.checkpoint_interval;
  ro.sync_bytes_max = o.snapshot_bytes_max;  // a peer's checkpoint is no bigger than ours may be
  ro.seed = o.seed;
  ro.heartbeats_by_host = true;
  RILL_CO_TRY(link, host.join(o.group, o.members));
  cluster_group* raw = g.get();
  hooks.reply = [raw](message m) { raw->on_reply(std::move(m)); };
  // The owner's hook first, then the waits for an op this reached (an applied op, or a checkpoint installed).
  for (auto* hook : {&hooks.applied, &hooks.installed}) {
    *hook = [raw, user = std::move(*hook)](const header& h) {
      if (user) {
        user(h);
      }
      raw->wake_applied(h.op);
    };
  }
  auto user_fenced = std::move(hooks.fenced);
  hooks.fenced = [raw, user_fenced = std::move(user_fenced)](const error& cause) {
    if (!raw->fenced_) {
      raw->fenced_ = error(
          make_error_code(errc::fenced),
          fmt::format("this node's replica of group {} stopped at a storage failure: ", raw->options_.group.value()) +
              cause.message());
    }
    if (user_fenced) {
      user_fenced(cause);
    }
    raw->wake_all();
  };
  g->driver_ = std::make_unique<driver>(ro, sm, std::move(r), *g->storage_, link, std::move(hooks));
  host.attach(o.group, *g->driver_);
  g->new_session();
  co_return g;
}

cluster_group::~cluster_group() {
  RILL_ASSERT(waiting_ == nullptr, "a cluster group destroyed with a submit in flight");
}

void cluster_group::new_session() {
  // 48 bits drawn at each start (and each eviction); never 0.
  const std::uint64_t drawn = (rng_.next() & ((std::uint64_t{1} << cluster_session_node_shift) - 1)) | 1u;
  client_ = (std::uint64_t{options_.self.value()} << cluster_session_node_shift) | drawn;
  request_ = 0;
  registered_ = false;
}

node_t cluster_group::primary_node() const {
  const auto& r = replica();
  return options_.members[primary_of(r.view(), options_.members.size())];
}

void cluster_group::send_request(bool everyone) {
  RILL_ASSERT(waiting_ != nullptr);
  waiting_->sent_at = ticks_;
  ++waiting_->sends;
  const node_t primary = primary_node();
  bool to_self = false;
  for (const node_t n : options_.members) {
    if (!everyone && n != primary) {
      continue;
    }
    if (n == options_.self) {
      to_self = true;  // last: see below
    } else {
      net_.send(n, options_.group, waiting_->m);
    }
  }
  if (!to_self) {
    return;
  }
  // The replica here can answer inside on_request(): a retried request it finds committed in its client table (it
  // became primary after the one that committed it failed) is answered from the table at once, which resumes the
  // submit; that clears waiting_ and destroys the waiter (and may begin the next request) before on_request()
  // returns. So the replica here gets the request last, as a copy that outlives the call, and nothing below reads
  // the waiter.
  host_.on_request(options_.group, message(waiting_->m));
}

task<expected<submitted>> cluster_group::request(std::uint8_t operation, std::vector<std::byte> body) {
  message m;
  m.h.cmd = command::request;
  m.h.cluster = options_.cluster;
  m.h.client = client_;
  m.h.request = operation == operation_register ? 0 : request_ + 1;
  m.h.operation = operation;
  m.body = std::move(body);
  seal(m);
  waiter w;
  w.m = std::move(m);
  w.started_at = ticks_;
  waiting_ = &w;
  send_request(false);
  co_await w.done.wait();
  RILL_ASSERT(waiting_ == &w);
  waiting_ = nullptr;
  if (fenced_) {
    co_return rill::unexpected(*fenced_);
  }
  if (closed_) {
    co_return make_unexpected(errc::closed, "the node is stopping; the change may still be made");
  }
  if (!w.answer) {
    // Its request number may yet commit with another change's reply in the table: never reuse it.
    new_session();
    co_return make_unexpected(errc::unavailable,
                              fmt::format("the metadata group answered nothing within {} ticks (no primary with a "
                                          "quorum of members reachable?); the change may still be made",
                                          options_.submit_timeout_ticks));
  }
  if (w.answer->h.cmd == command::eviction) {
    co_return submitted{{}, 0, true};
  }
  request_ = w.m.h.request;
  co_return submitted{std::move(w.answer->body), w.answer->h.op};
}

task<expected<submitted>> cluster_group::submit(std::uint8_t operation, std::vector<std::byte> body) {
  if (operation < operation_user_min) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("operation {} is reserved", operation));
  }
  if (body.size() > body_bytes_max()) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("an operation of {} bytes; the journal holds at "
                                                                  "most {}",
                                                                  body.size(), body_bytes_max()));
  }
  if (fenced_) {
    co_return rill::unexpected(*fenced_);
  }
  if (closed_) {
    co_return make_unexpected(errc::closed, "the node is stopping");
  }
  if (waiting_ != nullptr) {
    co_return make_unexpected(errc::overloaded, "the metadata group takes one change at a time from a node");
  }
  // At most two sessions per submit: an eviction between the register and the request opens one more, once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!registered_) {
      auto reg = co_await request(operation_register, {});
      if (!reg) {
        co_return rill::unexpected(reg.error());
      }
      if (reg->evicted) {
        new_session();
        continue;
      }
      registered_ = true;
    }
    auto done = co_await request(operation, body);
    if (done && done->evicted) {
      // The table forgot the session: whether this request ran before (a reply lost, then the eviction) cannot be
      // told, so it is not sent again under a new session (it could run twice); the caller retries the change, which
      // finds it made or makes it.
      new_session();
      co_return make_unexpected(errc::unavailable,
                                "this node's session was evicted (the client table was full); "
                                "the change may have been made: retry it");
    }
    co_return done;
  }
  co_return make_unexpected(errc::unavailable, "this node's session was evicted twice in a row; retry the change");
}

void cluster_group::on_reply(message m) {
  if (node_of_client(m.h.client) == options_.self.value()) {
    on_client_message(m);
  } else {
    net_.send(node_t(static_cast<std::uint32_t>(node_of_client(m.h.client))), options_.group, std::move(m));
  }
}

void cluster_group::on_client_message(const message& m) {
  if (waiting_ == nullptr || waiting_->answer || m.h.client != client_ || m.h.request != waiting_->m.h.request) {
    return;  // late, duplicate, or for an earlier session
  }
  if (m.h.cmd != command::reply && m.h.cmd != command::eviction) {
    return;
  }
  if (m.h.cmd == command::reply && m.h.operation != waiting_->m.h.operation) {
    return;
  }
  waiting_->answer = m;
  waiting_->done.set();
}

void cluster_group::tick() {
  ++ticks_;
  if (waiting_ != nullptr && !waiting_->answer && !fenced_) {
    if (ticks_ - waiting_->started_at >= options_.submit_timeout_ticks) {
      waiting_->done.set();  // unanswered: unavailable
    } else if (ticks_ - waiting_->sent_at >= options_.request_timeout_ticks) {
      send_request(waiting_->sends >= 1);  // may answer the submit at once: waiting_ is not read after it
    }
  }
  const auto waiters = apply_waiters_;  // a waiter woken here resumes at once and leaves the list
  for (auto* w : waiters) {
    if (!w->reached && ticks_ >= w->deadline) {
      w->done.set();
    }
  }
}

void cluster_group::wake_all() {
  if (waiting_ != nullptr) {
    waiting_->done.set();
  }
  const auto waiters = apply_waiters_;  // a waiter woken here resumes at once and leaves the list
  for (auto* w : waiters) {
    w->done.set();
  }
}

void cluster_group::wake_applied(std::uint64_t op) {
  const auto waiters = apply_waiters_;  // a waiter woken here resumes at once and leaves the list
  for (auto* w : waiters) {
    if (!w->reached && op >= w->op) {
      w->reached = true;
      w->done.set();
    }
  }
}

task<bool> cluster_group::applied_through(std::uint64_t op, std::uint32_t timeout_ticks) {
  if (replica().commit_min().value() >= op) {
    co_return true;
  }
  apply_waiter w;
  w.op = op;
  w.deadline = ticks_ + timeout_ticks;
  apply_waiters_.push_back(&w);
  co_await w.done.wait();
  std::erase(apply_waiters_, &w);
  co_return w.reached || replica().commit_min().value() >= op;
}

task<expected<void>> cluster_group::close() {
  // Every waiter is answered first (a submit: closed; an apply wait: false), so nothing waits on a group that is
  // gone. The driver settles before the group leaves the host: a completion in flight may still send through the
  // transport the host owns (the plane is stopped by then: what it sends goes nowhere).
  closed_ = true;
  wake_all();
  co_await driver_->settle();
  host_.leave(options_.group);
  co_return co_await storage_->close();
}

}  // namespace rill::consensus
