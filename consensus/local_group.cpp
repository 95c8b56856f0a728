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
  RILL_CO_TRY_VOID(co_await storage::make_dirs(e, dir));
  std::unique_ptr<local_group> g(new local_group(e, o));
  vsr_state initial;
  initial.cluster = o.cluster;
  initial.replica = 0;
  initial.replica_count = 1;
  RILL_CO_TRY(sb, co_await superblock::open(e, dir, true, initial));
  const bool formatted = sb->sequence() == 1 && sb->state() == initial;
  if (sb->state().cluster != o.cluster || sb->state().replica_count != 1) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("{}/superblock belongs to cluster {} of {} replicas, not a local group of "
                                          "cluster {}",
                                          dir, sb->state().cluster, sb->state().replica_count, o.cluster));
  }
  journal_recovery rec;
  RILL_CO_TRY(j, co_await journal::open(e, dir, o.journal, true, rec));
  RILL_CO_TRY(snaps, co_await snapshot_file::open(e, dir, o.snapshot_bytes_max, true, o.snapshot_reserved_bytes));
  recovered_state r;
  r.state = sb->state();
  const checkpoint_ref cp = r.state.checkpoint;
  if (cp.op() > 0) {
    RILL_CO_TRY(bytes, co_await snaps->read(cp.slot, cp.size, cp.checksum));
    r.snapshot = std::move(bytes);
  }
  // Alone, this replica prepares op k + 1 only once op k is durable (and so committed): a readable op above a
  // missing or unreadable one means the lower one was committed and is lost. And the journal writes an op's header
  // only once its prepare is synced, so an op known by its header is durable too, readable or not. Only the highest
  // op, when neither its prepare nor its header reads back, is cut: a write torn by the crash, never acknowledged.
  // (The one case a single copy cannot see: rot of the last op's prepare before its header became durable.)
  const std::uint64_t durable_commit = r.state.commit.value();
  std::uint64_t top_known = 0;
  for (const auto* list : {&rec.valid, &rec.faulty}) {
    for (const header& h : *list) {
      top_known = h.op > cp.op() ? std::max(top_known, h.op) : top_known;
    }
  }
  if (cp.op() > 0) {
    client_table probe(local_clients_max);
    if (!restore_checkpoint(r.snapshot, probe, sm)) {
      co_return make_unexpected(errc::corrupt_data,
                                fmt::format("{}/snapshot.bin: the checkpoint at op {} reads back but does not restore "
                                            "(written by an incompatible build?)",
                                            dir, cp.op()));
    }
  }
  r.journal = std::move(rec.valid);
  r.faulty = std::move(rec.faulty);
  r.faulty_slots = std::move(rec.faulty_slots);
  r.journal_slots = o.journal.slot_count;
  r.formatted = formatted;
  g->journal_ = std::move(j);
  g->superblock_ = std::move(sb);
  g->snapshots_ = std::move(snaps);

  replica_options ro;
  ro.cluster = o.cluster;
  ro.replica = 0;
  ro.replica_count = 1;
  ro.clients_max = local_clients_max;
  ro.pipeline_max = 1;
  ro.checkpoint_interval = o.checkpoint_interval;
  g->replica_ = std::make_unique<replica>(ro, sm, std::move(r));
  if (const std::uint64_t op = g->replica_->op().value(); op < std::max(durable_commit, top_known)) {
    co_return make_unexpected(errc::corrupt_data,
                              fmt::format("{}/journal.wal: op {} was committed and is missing or unreadable (the "
                                          "journal knows op {}, the superblock's commit is {})",
                                          dir, op + 1, top_known, durable_commit));
  }
  // Replay: each tick applies what the journal already returned and reads what comes next.
  const std::uint64_t from = g->replica_->commit_min().value();
  for (std::size_t round = 0; round < replay_rounds_max; ++round) {
    std::vector<effect> out;
    g->replica_->on_tick(out);
    g->run(out);
    co_await g->settle();
    if (g->fenced_) {
      co_return rill::unexpected(*g->fence_cause_);  // (corrupt_data for a committed op that does not read back)
    }
    if (g->replica_->commit_min() == g->replica_->commit_max() && g->in_flight_ == 0 &&
        g->replica_->durable_state().log_view == g->replica_->view()) {
      break;
    }
  }
  RILL_ASSERT(g->replica_->commit_min() == g->replica_->commit_max(), "local group replay did not finish");
  RILL_ASSERT(g->replica_->commit_min().value() >= from);
  RILL_ASSERT(g->in_flight_ == 0);
  RILL_ASSERT(g->replica_->is_primary(), "alone, the replica is the primary of every view");
  g->replayed_ = g->replica_->commit_min().value() - from;
  // This process's session: opened once, then continued across restarts (its request numbers only grow).
  if (const client_session* s = g->replica_->clients().find(g->client_)) {
    g->request_ = s->request;
  } else {
    auto registered = co_await g->request(operation_register, 0, {});
    if (!registered) {
      co_await g->settle();  // nothing of ours may complete after the group is gone
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
  std::vector<effect> out;
  replica_->on_message(m, out);
  run(out);
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

void local_group::run(std::vector<effect>& effects) {
  for (auto& e : effects) {
    if (auto* w = std::get_if<write_effect>(&e)) {
      RILL_ASSERT(w->m.h.cmd == command::prepare);
      auto m = std::make_shared<message>(std::move(w->m));
      ++in_flight_;
      spawn(journal_->write(*m), [this, m](expected<void> r) {
        if (!r) {
          fence(r.error());
        } else if (!fenced_) {
          std::vector<effect> next;
          replica_->on_write_done(m->h.op, m->h.checksum, true, next);
          run(next);
        }
        io_done();
      });
    } else if (auto* rd = std::get_if<read_effect>(&e)) {
      ++in_flight_;
      spawn(journal_->read(rd->op, rd->checksum), [this, op = rd->op, checksum = rd->checksum](expected<message> r) {
        if (!r) {
          // Alone, nobody can repair it: committed state is unreadable.
          fence(error(make_error_code(errc::corrupt_data),
                      fmt::format("reading op {} back from the journal: {}", op, r.error().message())));
        } else if (!fenced_) {
          std::vector<effect> next;
          replica_->on_read_done(op, checksum, &*r, next);
          run(next);
        }
        io_done();
      });
    } else if (auto* p = std::get_if<persist_effect>(&e)) {
      auto state = std::make_shared<vsr_state>(std::move(p->state));
      ++in_flight_;
      spawn(superblock_->write(*state), [this, state](expected<void> r) {
        if (!r) {
          fence(r.error());
        } else if (!fenced_) {
          std::vector<effect> next;
          replica_->on_persist_done(*state, next);
          run(next);
        }
        io_done();
      });
    } else if (auto* c = std::get_if<checkpoint_effect>(&e)) {
      RILL_ASSERT(c->slot <= 1);
      auto cp = std::make_shared<checkpoint_effect>(std::move(*c));
      ++in_flight_;
      spawn(snapshots_->write(cp->slot, cp->bytes), [this, cp](expected<void> r) {
        if (!r) {
          fence(r.error());
        } else if (!fenced_) {
          std::vector<effect> next;
          replica_->on_checkpoint_done(cp->slot, cp->at.op, true, next);
          run(next);
        }
        io_done();
      });
    } else if (auto* rep = std::get_if<reply_effect>(&e)) {
      if (waiting_ != nullptr && rep->m.h.client == client_ && rep->m.h.request == waiting_->request &&
          rep->m.h.cmd == command::reply && !waiting_->reply) {
        waiting_->reply = std::move(rep->m.body);
        waiting_->done.set();
      }
    } else {
      RILL_ASSERT(!std::holds_alternative<send_effect>(e), "a one-replica group has nobody to send to");
    }
  }
  effects.clear();
}

void local_group::fence(const error& e) {
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

void local_group::io_done() {
  RILL_ASSERT(in_flight_ > 0);
  if (--in_flight_ == 0) {
    idle_.set();
  }
}

task<void> local_group::settle() {
  while (in_flight_ > 0) {
    idle_.reset();
    co_await idle_.wait();
  }
}

task<expected<void>> local_group::close() {
  co_await settle();
  RILL_ASSERT(in_flight_ == 0);
  RILL_CO_TRY_VOID(co_await journal_->close());
  RILL_CO_TRY_VOID(co_await superblock_->close());
  RILL_CO_TRY_VOID(co_await snapshots_->close());
  co_return expected<void>{};
}

}  // namespace rill::consensus
