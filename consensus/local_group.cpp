#include "consensus/local_group.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::consensus {

using storage::errc;
using storage::make_unexpected;

namespace {
constexpr std::size_t replay_rounds_max = 1'000'000;  // ticks open() may take to replay (each reads a batch of ops)
constexpr std::size_t local_clients_max = 4;          // sessions (this process uses one)
}  // namespace

task<expected<std::unique_ptr<local_group>>> local_group::open(storage::io::engine& e, std::string dir,
                                                               state_machine& sm, local_group_options o) {
  // One submit at a time: a pipeline of one. The ring must hold a checkpoint interval and the pipeline twice.
  const std::uint64_t interval = o.checkpoint_interval != 0 ? o.checkpoint_interval : o.journal.slot_count / 4;
  if (o.journal.slot_count < 8 || interval < 1 || interval + 2 > o.journal.slot_count) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("local group: journal slot_count {} with checkpoint_interval {}: allowed is "
                                          "slot_count >= 8 and 1 <= interval <= slot_count - 2",
                                          o.journal.slot_count, interval));
  }
  std::unique_ptr<local_group> g(new local_group(e, o));
  vsr_state initial;
  initial.cluster = o.cluster;
  initial.replica = 0;
  initial.replica_count = 1;
  journal_storage_options so;
  so.journal = o.journal;
  so.snapshot_bytes_max = o.snapshot_bytes_max;
  so.snapshot_reserved_bytes = o.snapshot_reserved_bytes;
  recovered_state r;
  RILL_CO_TRY(storage, co_await journal_storage::open(e, dir, so, initial, r));
  g->storage_ = std::move(storage);
  RILL_ASSERT(r.state.cluster == o.cluster && r.state.replica_count == 1, "journal_storage::open checks the group");
  const checkpoint_ref cp = r.state.checkpoint;
  // Alone, this replica prepares op k + 1 only once op k is durable (and so committed): a readable op above a
  // missing or unreadable one means the lower one was committed and is lost. And the journal writes an op's header
  // only once its prepare is synced, so an op known by its header is durable too, readable or not. Only the highest
  // op, when neither its prepare nor its header reads back, is cut: a write torn by the crash, never acknowledged.
  // (The one case a single copy cannot see: rot of the last op's prepare before its header became durable.)
  const std::uint64_t durable_commit = r.state.commit.value();
  std::uint64_t top_known = 0;
  for (const auto* list : {&r.journal, &r.faulty}) {
    for (const header& h : *list) {
      top_known = h.op > cp.op() ? std::max(top_known, h.op) : top_known;
    }
  }
  RILL_CO_TRY_VOID(check_recovered_checkpoint(r, local_clients_max, sm, dir));
  replica_options ro;
  ro.cluster = o.cluster;
  ro.replica = 0;
  ro.replica_count = 1;
  ro.clients_max = local_clients_max;
  ro.pipeline_max = 1;
  ro.checkpoint_interval = o.checkpoint_interval;
  driver_hooks hooks;
  local_group* self = g.get();
  hooks.reply = [self](message m) { self->on_reply(std::move(m)); };
  hooks.fenced = [self](const error& cause) { self->on_fenced(cause); };
  g->driver_ = std::make_unique<driver>(ro, sm, std::move(r), *g->storage_, nullptr, std::move(hooks));
  if (const std::uint64_t op = g->replica().op().value(); op < std::max(durable_commit, top_known)) {
    co_return make_unexpected(errc::corrupt_data,
                              fmt::format("{}/journal.wal: op {} was committed and is missing or unreadable (the "
                                          "journal knows op {}, the superblock's commit is {})",
                                          dir, op + 1, top_known, durable_commit));
  }
  // Replay: each tick applies what the journal already returned and reads what comes next.
  const class replica& rep = g->replica();
  const std::uint64_t from = rep.commit_min().value();
  for (std::size_t round = 0; round < replay_rounds_max; ++round) {
    g->driver_->on_tick();
    co_await g->driver_->settle();
    if (g->fenced_) {
      co_return rill::unexpected(*g->fence_cause_);  // (corrupt_data for a committed op that does not read back)
    }
    if (rep.commit_min() == rep.commit_max() && g->driver_->in_flight() == 0 &&
        rep.durable_state().log_view == rep.view()) {
      break;
    }
  }
  RILL_ASSERT(rep.commit_min() == rep.commit_max(), "local group replay did not finish");
  RILL_ASSERT(rep.commit_min().value() >= from);
  RILL_ASSERT(g->driver_->in_flight() == 0);
  RILL_ASSERT(rep.is_primary(), "alone, the replica is the primary of every view");
  g->replayed_ = rep.commit_min().value() - from;
  // This process's session: opened once, then continued across restarts (its request numbers only grow).
  if (const client_session* s = rep.clients().find(g->client_)) {
    g->request_ = s->request;
  } else {
    auto registered = co_await g->request(operation_register, 0, {});
    if (!registered) {
      co_await g->driver_->settle();  // nothing of ours may complete after the group is gone
      co_return rill::unexpected(registered.error());
    }
  }
  co_return g;
}

local_group::~local_group() = default;

task<expected<std::vector<std::byte>>> local_group::submit(std::uint8_t operation, std::vector<std::byte> body) {
  if (operation < operation_user_min) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("operation {} is reserved (user operations start "
                                                                  "at {})",
                                                                  operation, operation_user_min));
  }
  if (body.size() > body_bytes_max()) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("an operation of {} bytes; the journal holds at "
                                                                  "most {}",
                                                                  body.size(), body_bytes_max()));
  }
  co_return co_await request(operation, request_ + 1, std::move(body));
}

task<expected<std::vector<std::byte>>> local_group::request(std::uint8_t operation, std::uint64_t number,
                                                            std::vector<std::byte> body) {
  RILL_ASSERT((operation == operation_register) == (number == 0), "operation {} with request number {}", operation,
              number);
  RILL_ASSERT(number == 0 || number == request_ + 1, "request {} after {}", number, request_);
  if (fenced_) {
    co_return rill::unexpected(*fenced_);
  }
  if (waiting_ != nullptr) {
    co_return make_unexpected(errc::overloaded, "a local group commits one operation at a time");
  }
  message m;
  m.h.cmd = command::request;
  m.h.cluster = options_.cluster;
  m.h.client = client_;
  m.h.request = number;
  m.h.operation = operation;
  m.body = std::move(body);
  seal(m);
  waiter w;
  w.request = number;
  waiting_ = &w;
  driver_->on_message(m);
  co_await w.done.wait();
  RILL_ASSERT(waiting_ == &w);
  waiting_ = nullptr;
  if (!w.reply) {
    RILL_ASSERT(fenced_.has_value(), "a request ends without a reply only when the group is fenced");
    co_return rill::unexpected(*fenced_);
  }
  request_ = number;
  co_return std::move(*w.reply);
}

void local_group::on_reply(message m) {
  if (waiting_ != nullptr && m.h.client == client_ && m.h.request == waiting_->request && m.h.cmd == command::reply &&
      !waiting_->reply) {
    waiting_->reply = std::move(m.body);
    waiting_->done.set();
  }
}

void local_group::on_fenced(const error& e) {
  if (!fenced_) {
    fence_cause_ = e;
    fenced_ = error(make_error_code(errc::fenced), "the local group stopped at a storage failure: " + e.message());
  }
  RILL_ASSERT(fenced_.has_value());
  RILL_ASSERT(fence_cause_.has_value());
  if (waiting_ != nullptr) {
    waiting_->done.set();
  }
}

task<expected<void>> local_group::close() {
  co_await driver_->settle();
  RILL_ASSERT(driver_->in_flight() == 0);
  co_return co_await storage_->close();
}

}  // namespace rill::consensus
