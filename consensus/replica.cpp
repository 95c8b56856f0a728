// replica.cpp: the replica's construction and recovery from storage, its inputs (message dispatch, ticks, journal
// and superblock completions) and normal operation: client requests, prepare, prepare_ok, commit (heartbeats
// included), apply; then persistence and sending. The view change is in replica_view_change.cpp; repair, state
// transfer and checkpoints in replica_repair.cpp. replica.h states the invariants.
//
// Relies on: a prepare is acknowledged (send_prepare_ok) only once durable here; the primary prepares only in a
// durable view (durable_.log_view == view_) into a writable slot; commit_min_ advances one op at a time, each op
// verified and chained onto the one applied before it.
#include "consensus/replica.h"

#include <algorithm>
#include <bit>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"

namespace rill::consensus {
namespace {
constexpr std::uint64_t commit_persist_every = 64;  // the durable commit lower bound lags at most this many ops
}  // namespace

replica::replica(const replica_options& options, state_machine& sm, recovered_state recovered, replica_bugs bugs)
    : options_(options),
      bugs_(bugs),
      sm_(sm),
      clients_(options.clients_max),
      rng_(options.seed ^ (0x9e3779b97f4a7c15ULL * (options.replica + 1))) {
  RILL_ASSERT(options_.replica_count >= 1, "replica_count {}", options_.replica_count);
  RILL_ASSERT(options_.replica_count <= replicas_max, "replica_count {}", options_.replica_count);
  RILL_ASSERT(options_.replica < options_.replica_count);
  RILL_ASSERT(options_.pipeline_max >= 1);
  RILL_ASSERT(options_.pipeline_max <= pipeline_max_limit, "pipeline_max {}", options_.pipeline_max);
  RILL_ASSERT(options_.request_queue_max >= 1);
  RILL_ASSERT(options_.heartbeat_ticks >= 1);
  RILL_ASSERT(options_.resend_ticks >= 1);
  RILL_ASSERT(options_.primary_timeout_ticks >= 1);
  RILL_ASSERT(options_.view_change_timeout_ticks >= 1);
  RILL_ASSERT(options_.heartbeat_ticks < options_.primary_timeout_ticks);
  RILL_ASSERT(options_.sync_chunk_bytes >= 1);
  RILL_ASSERT(options_.sync_bytes_max >= 16);
  primary_timeout_ = jitter(options_.primary_timeout_ticks);
  view_change_timeout_ = jitter(options_.view_change_timeout_ticks);
  recover(std::move(recovered));
  checkpoint_interval_ = options_.checkpoint_interval != 0 ? options_.checkpoint_interval : journal_slots_ / 4;
  if (journal_slots_ > 0) {
    RILL_ASSERT(checkpoint_interval_ >= 1);
    RILL_ASSERT(checkpoint_interval_ + 2 * options_.pipeline_max <= journal_slots_,
                "checkpoint interval {} with pipeline_max {} does not fit a journal of {} slots", checkpoint_interval_,
                options_.pipeline_max, journal_slots_);
  }
  check_invariants();
}

// ---------------------------------------------------------------------------------------------------------------
// Start

void replica::recover(recovered_state recovered) {
  vsr_state& s = recovered.state;
  RILL_ASSERT(s.cluster == options_.cluster, "journal of cluster {} opened for cluster {}", s.cluster,
              options_.cluster);
  RILL_ASSERT(s.replica == options_.replica);
  RILL_ASSERT(s.replica_count == options_.replica_count);
  RILL_ASSERT(s.log_view <= s.view, "vsr_state log view {} above its view {}", s.log_view.value(), s.view.value());
  RILL_ASSERT(log_.empty(), "recover() runs once, on a new replica");
  durable_ = s;
  recovering_ = s.recovering;
  incarnation_ = s.incarnation;
  if (recovering_) {
    RILL_ASSERT(options_.replica_count > 1, "alone, a replica that lost its disk has nobody to recover from");
    RILL_ASSERT(!recovered.formatted, "a replica formatted to recover is not a new group's replica");
    recovery_nonce_ = rng_.next() | 1;  // this incarnation's (never 0: start_views made for nobody carry 0)
  }
  view_ = s.view;
  log_view_ = s.log_view;
  commit_max_ = s.commit.value();
  commit_persisted_ = commit_max_;
  view_headers_ = s.view_headers;
  checkpoint_ = s.checkpoint;
  // The applied prefix starts at the checkpoint the superblock names (op 0, the root, when none).
  const std::uint64_t base = s.checkpoint.op();
  if (base == 0) {
    log_[0] = entry{root_header(options_.cluster), true, false, false, true};
  } else {
    RILL_ASSERT(restore_checkpoint(recovered.snapshot), "the checkpoint at op {} ({} bytes) does not restore", base,
                recovered.snapshot.size());
    if (options_.replica_count > 1) {
      checkpoint_bytes_ = std::move(recovered.snapshot);  // served to peers in state transfer
    }
    log_[base] = entry{s.checkpoint.at, false, false, false, true};
    commit_min_ = base;
    RILL_ASSERT(commit_max_ >= base, "vsr_state commit {} below its checkpoint {}", commit_max_, base);
  }

  // Which recovered prepares belong to this replica's log: those of the suffix installed at log_view (they must
  // match it), those prepared in log_view above it, and, below it, those that chain down from it (committed ops).
  const std::uint64_t vh_lo = view_headers_.empty() ? 0 : view_headers_.front().op;
  const std::uint64_t vh_hi = view_headers_.empty() ? 0 : view_headers_.back().op;
  auto admit = [&](const header& h, bool readable) {
    if (h.op <= base || h.cluster != options_.cluster || h.cmd != command::prepare) {
      return;
    }
    bool trusted = view_headers_.empty() && log_view_.value() == 0;  // only view 0 ever existed: one primary
    if (!view_headers_.empty() && h.op >= vh_lo && h.op <= vh_hi) {
      if (view_headers_[h.op - vh_lo].checksum != h.checksum) {
        return;  // replaced by the view change that began log_view; the body is repaired from peers
      }
      trusted = true;
    } else if (h.op > vh_hi && h.view < log_view_.value()) {
      return;  // a prepare of an older view above the suffix installed at log_view: that view change cut it
    } else if (h.view > view_.value()) {
      return;  // cannot be ours: we never accepted a prepare from a view we had not persisted
    } else if (h.op > vh_hi) {
      trusted = true;  // prepared in log_view by its primary
    }
    if (readable || !log_.contains(h.op)) {
      log_[h.op] = entry{h, readable, false, !readable, trusted};
    }
  };
  for (const header& h : recovered.faulty) {
    admit(h, false);
  }
  journal_slots_ = recovered.journal_slots;
  if (journal_slots_ > 0) {
    faulty_slots_.insert(recovered.faulty_slots.begin(), recovered.faulty_slots.end());
  }
  for (const header& h : recovered.journal) {
    admit(h, true);
  }
  for (const header& h : view_headers_) {
    if (h.op > base && !log_.contains(h.op)) {
      log_[h.op] = entry{h, false, false, false, true};  // known, body missing
    }
  }
  // Before verification: chaining down from a stale op would take it for the log and drop what lies below it.
  std::uint64_t solo_top = base;
  if (options_.replica_count == 1) {
    // Alone, this replica is the primary of every view, and what it holds durably without a gap is committed: an op
    // above a gap never was (it commits in order, each op once durable here), so it is cut. So is an op that does
    // not chain onto the one below: the journal still holds a prepare an earlier restart cut above a gap (its slot
    // is rewritten only when its op is prepared again), and once the gap is filled by a new prepare, that stale one
    // sits above it without a gap (pipeline > 1: a later op's write can finish before an earlier one's).
    for (;;) {
      const auto next = log_.find(solo_top + 1);
      if (next == log_.end() || !next->second.durable) {
        break;
      }
      RILL_ASSERT(log_.contains(solo_top), "the solo log lost op {} below op {}", solo_top, solo_top + 1);
      if (next->second.h.parent != log_.at(solo_top).h.checksum) {
        break;
      }
      ++solo_top;
    }
    log_.erase(log_.upper_bound(solo_top), log_.end());
  }
  op_ = log_.rbegin()->first;
  RILL_ASSERT(op_ >= base);
  // Below the trusted part, an entry is verified only by chaining down from it; the rest waits for repair (kept,
  // so a body we hold need not be fetched again once its header is confirmed).
  std::vector<std::uint64_t> anchors;
  for (const auto& [k, e] : log_) {
    if (e.verified && k > 0) {
      anchors.push_back(k);
    }
  }
  for (auto k : anchors) {
    verify_down_from(k);
  }
  if (options_.replica_count == 1) {
    // Alone: what it holds is the chain up to solo_top (cut above), all of it committed.
    RILL_ASSERT(op_ == solo_top, "solo op {} after the cut at {}", op_, solo_top);
    if (log_view_ < view_) {
      log_view_ = view_;
    }
    status_ = status::normal;
    commit_max_ = op_;
    view_head_ = op_;
  } else if (log_view_ == view_ && (primary_of_view(view_) != options_.replica || recovered.formatted)) {
    status_ = status::normal;
    view_head_ = op_;  // (its view's primary prepared them all: they commit, unless a view change replaces them)
  } else {
    // Either a view change was under way, or this replica was the primary and lost its pipeline: it will vote for
    // the next view when its view-change timeout fires (or send its do_view_change for view_ once ticking).
    status_ = status::view_change;
    view_change_began_ = 0;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs

void replica::on_message(const message& m, std::vector<effect>& out) {
  const invariants_on_return check{*this};
  // The driver hands over decoded messages: sealed, whatever a peer meant by them (checked below, and ignored when
  // wrong).
  RILL_ASSERT(m.h.size == header::encoded_size + m.body.size(), "an unsealed {}", to_string(m.h.cmd));
  if (m.h.cluster != options_.cluster) {
    return;
  }
  if (m.h.cmd != command::request && m.h.cmd != command::prepare && m.h.replica >= options_.replica_count) {
    return;
  }
  if (m.h.cmd != command::request && m.h.cmd != command::prepare && m.h.replica == options_.replica) {
    return;  // our own message, echoed by the network
  }
  if ((m.h.cmd == command::prepare_ok || m.h.cmd == command::start_view_change || m.h.cmd == command::do_view_change) &&
      ignore_stale_incarnation(m)) {
    return;
  }
  switch (m.h.cmd) {
    case command::request:
      on_request(m, out);
      break;
    case command::prepare:
      on_prepare(m, out);
      break;
    case command::prepare_ok:
      on_prepare_ok(m, out);
      break;
    case command::commit:
      on_commit(m, out);
      break;
    case command::start_view_change:
      on_start_view_change(m, out);
      break;
    case command::do_view_change:
      on_do_view_change(m, out);
      break;
    case command::start_view:
      on_start_view(m, out);
      break;
    case command::request_start_view:
      on_request_start_view(m, out);
      break;
    case command::request_headers:
      on_request_headers(m, out);
      break;
    case command::headers:
      on_headers(m, out);
      break;
    case command::request_prepare:
      on_request_prepare(m, out);
      break;
    case command::request_sync:
      on_request_sync(m, out);
      break;
    case command::sync:
      on_sync(m, out);
      break;
    case command::recovery_response:
      on_recovery_response(m);
      break;
    case command::reply:
    case command::eviction:
    case command::reserved:
      break;  // for clients
    case command::request_segments:
    case command::segments:
      break;  // for the host (a partition group's state transfer of its log)
    case command::commit_ok:
      on_commit_ok(m);
      break;
  }
}

void replica::on_tick(std::vector<effect>& out) {
  const invariants_on_return check{*this};
  ++ticks_;
  const bool solo = options_.replica_count == 1;
  if (status_ == status::normal) {
    if (is_primary()) {
      if (heard_view_ != view_) {  // leading a new view: what was heard in another one counts for nothing
        heard_view_ = view_;
        heartbeats_sent_.clear();
        heartbeat_heard_tick_.assign(options_.replica_count, 0);
      }
      if (pipeline_.empty()) {
        commit_progress_ = ticks_;
      }
      const bool abdicating = ticks_ - commit_progress_ > options_.abdicate_ticks;
      if (abdicating && !solo) {
        vote_view_change(view_ + 1, out);  // and vote to be replaced, so that a minority of backups suffices
      }
      if (!solo && !options_.heartbeats_by_host && ticks_ >= heartbeat_due_ && !abdicating) {
        heartbeat_due_ = ticks_ + options_.heartbeat_ticks;
        message c = make(command::commit);
        c.h.commit = commit_max_;
        c.h.op = commit_max_;
        if (auto it = log_.find(commit_max_); it != log_.end()) {
          c.h.parent = it->second.h.checksum;
        }
        c.h.timestamp = ++heartbeat_sequence_;
        heartbeats_sent_.emplace_back(heartbeat_sequence_, ticks_);
        while (heartbeats_sent_.size() > heartbeats_kept) {
          heartbeats_sent_.pop_front();
        }
        seal(c);
        RILL_ASSERT(heartbeat_due_ > ticks_);
        broadcast(c, out);
      }
      if (!solo && ticks_ >= resend_due_) {
        resend_due_ = ticks_ + options_.resend_ticks;
        for (const auto& p : pipeline_) {
          const std::uint32_t all = (1u << options_.replica_count) - 1;
          const std::uint32_t missing = all & ~p.ok & ~bit(options_.replica);
          if (missing == 0) {
            continue;
          }
          if (const message* body = cached(p.h.op, p.h.checksum)) {
            for (replica_t r = 0; r < options_.replica_count; ++r) {
              if (missing & bit(r)) {
                send(r, *body, out);
              }
            }
          } else if (log_.contains(p.h.op) && log_.at(p.h.op).durable) {
            RILL_ASSERT(log_.at(p.h.op).h.checksum == p.h.checksum, "a pipeline op replaced in the log at {}", p.h.op);
            read_prepare(p.h.op, out);
            reads_.at(p.h.op).for_pipeline = true;
          }
        }
      }
    } else if (ticks_ - primary_seen_ > primary_timeout_) {
      vote_view_change(view_ + 1, out);
    }
  } else {
    if (ticks_ - view_change_began_ > view_change_timeout_) {
      vote_view_change(view_ + 1, out);
    }
    if (ticks_ % options_.resend_ticks == 0) {
      send_do_view_change(out);
      resend_view_change_vote(out);
    }
  }
  if (ticks_ % options_.resend_ticks == 0) {
    repair(out);
  }
  if (recovering_) {
    progress_recovery(out);
  }
  if (!persisting_ && wanted_state() != durable_) {
    persist(out);
  }
  commit_journal(out);
  maybe_checkpoint(out);
}

void replica::on_write_done(std::uint64_t op, checksum_t checksum, bool ok, std::vector<effect>& out) {
  const invariants_on_return check{*this};
  RILL_ASSERT(op > 0, "op 0 (the root) is never written");
  RILL_ASSERT(!checksum.zero());
  auto it = log_.find(op);
  if (it == log_.end() || it->second.h.checksum != checksum) {
    return;  // replaced while the write was in flight
  }
  entry& e = it->second;
  e.writing = false;
  if (!ok) {
    e.durable = false;  // repair() writes it again (from memory) or fetches it
    return;
  }
  e.durable = true;
  e.faulty = false;
  if (journal_slots_ > 0) {
    faulty_slots_.erase(op % journal_slots_);  // the slot holds this op now
    if (op > journal_slots_) {
      // ... and no longer the op a ring's length below (applied and checkpointed: writable() saw to it).
      const std::uint64_t gone = op - journal_slots_;
      if (auto g = log_.find(gone); g != log_.end() && gone < commit_min_) {
        log_.erase(g);
      }
    }
  }
  if (status_ == status::normal && is_primary()) {
    for (auto& p : pipeline_) {
      if (p.h.op == op && p.h.checksum == checksum) {
        p.ok |= bit(options_.replica);
      }
    }
    commit_pipeline(out);
  } else {
    send_prepare_ok(e.h, out);
  }
  commit_journal(out);
}

void replica::on_read_done(std::uint64_t op, checksum_t checksum, const message* prepare, std::vector<effect>& out,
                           bool removed) {
  const invariants_on_return check{*this};
  RILL_ASSERT(op > 0, "op 0 (the root) is never read");
  RILL_ASSERT(!checksum.zero());
  auto it = reads_.find(op);
  if (it == reads_.end() || it->second.checksum != checksum) {
    return;
  }
  pending_read pr = std::move(it->second);
  reads_.erase(it);
  if (removed) {
    RILL_ASSERT(prepare == nullptr);
    RILL_ASSERT(op <= durable_.checkpoint.op(), "op {} removed by storage above the durable checkpoint (op {})", op,
                durable_.checkpoint.op());
    return;
  }
  auto e = log_.find(op);
  if (prepare == nullptr || prepare->h.checksum != checksum) {
    if (e != log_.end() && e->second.h.checksum == checksum) {
      e->second.durable = false;  // the journal lost it: repair fetches it from a peer
      e->second.faulty = true;
    }
    return;
  }
  RILL_ASSERT(prepare->h.op == op, "the journal returned op {} for op {}", prepare->h.op, op);
  for (replica_t r : pr.requesters) {
    send(r, *prepare, out);
  }
  if (e != log_.end() && e->second.h.checksum == checksum && op > commit_min_) {
    bodies_[op] = *prepare;
    if (pr.for_pipeline && status_ == status::normal && is_primary()) {
      resend_due_ = ticks_;  // resend it at the next tick
    }
    commit_journal(out);
  }
}

void replica::on_persist_done(const vsr_state& state, std::vector<effect>& out) {
  const invariants_on_return check{*this};
  RILL_ASSERT(persisting_.has_value(), "persist completion with none in flight");
  RILL_ASSERT(*persisting_ == state, "persist completion for a state not in flight");
  const vsr_state before = durable_;
  durable_ = state;
  persisting_.reset();
  if (persist_again_) {
    persist_again_ = false;
    persist(out);
  }
  flush_deferred(out);
  prepare_next(out);
  if (durable_.checkpoint != before.checkpoint) {
    repair(out);  // the journal's window moved: prepares held back can be written now
    maybe_checkpoint(out);
  }
  const bool view_now_durable = durable_.view != before.view || durable_.log_view != before.log_view;
  if (!view_now_durable || durable_.view != view_) {
    return;
  }
  if (status_ == status::view_change) {
    send_do_view_change(out);
  } else if (!is_primary()) {
    // A start_view installed: acknowledge what we already hold of the uncommitted suffix.
    for (auto it = log_.upper_bound(commit_max_); it != log_.end(); ++it) {
      if (it->second.durable) {
        send_prepare_ok(it->second.h, out);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Normal operation

void replica::on_request(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::request);
  RILL_ASSERT(m.h.cluster == options_.cluster);
  if (status_ != status::normal || !is_primary()) {
    return;  // the client tries the other replicas
  }
  if (commit_min_ < commit_max_) {
    return;  // still applying what is committed: the client table is not current (the client retries)
  }
  const bool reg = m.h.operation == operation_register;
  if (reg ? m.h.request != 0 : (m.h.operation < operation_user_min || m.h.request == 0)) {
    return;
  }
  const client_session* session = bugs_.forget_client_table ? nullptr : clients_.find(m.h.client);
  if (reg) {
    if (session != nullptr) {
      if (session->request == 0) {
        out.push_back(reply_effect{session->reply});
      }
      return;
    }
  } else {
    const std::uint64_t stamped = session_of(m.h);
    if (session != nullptr && stamped != 0 && stamped < session->session) {
      // A request of a session that a later register of this client replaced (sessions only move forward, and the
      // table is a committed prefix): it can never be executed. Answered without an op.
      message ev = make(command::eviction);
      ev.h.client = m.h.client;
      ev.h.request = m.h.request;
      set_session(ev.h, stamped);
      seal(ev);
      out.push_back(reply_effect{std::move(ev)});
      return;
    }
    if (session == nullptr || (stamped != 0 && stamped != session->session)) {
      // Possibly evicted, possibly registered in an op this primary has not applied (or knows not to be committed):
      // only the log can tell. The request is prepared; apply answers it with an eviction if the session is gone
      // then. (A primary never evicts from its own view of the table: it may be stale, or not the primary at all.)
      session = nullptr;
    } else if (m.h.request <= session->request) {
      if (m.h.request == session->request) {
        out.push_back(reply_effect{session->reply});  // a retry of what is done: answered from the table
      }
      return;
    }
    if (session != nullptr && m.h.request > session->request + 1) {
      return;  // the client skipped a number: not ours to fix
    }
  }
  auto same = [&](const header& h) { return h.client == m.h.client && h.request == m.h.request; };
  for (const auto& p : pipeline_) {
    if (same(p.h)) {
      return;  // being prepared
    }
  }
  for (const auto& q : request_queue_) {
    if (same(q.h)) {
      prepare_next(out);  // queued behind ops this primary did not hold yet: perhaps it does now
      return;
    }
  }
  if (request_queue_.size() >= options_.request_queue_max) {
    return;  // overloaded: the client retries
  }
  request_queue_.push_back(m);
  RILL_ASSERT(request_queue_.size() <= options_.request_queue_max);
  prepare_next(out);
}

void replica::prepare_next(std::vector<effect>& out) {
  // Nothing is prepared in a view that is not yet durable (its start_view has not gone out either), nor an op
  // whose journal slot still holds one the durable checkpoint does not cover (clients retry once it moves on).
  while (!request_queue_.empty() && pipeline_.size() < options_.pipeline_max && status_ == status::normal &&
         is_primary() && durable_.log_view == view_ && writable(op_ + 1)) {
    // The state machine decides against everything above what it has applied: those ops must be here with their
    // bodies (a new primary may still be repairing some; requests wait in the queue until it has them).
    std::vector<const message*> pending;
    for (std::uint64_t k = commit_min_ + 1; k <= op_; ++k) {
      auto e = log_.find(k);
      const message* body = e == log_.end() ? nullptr : cached(k, e->second.h.checksum);
      if (body == nullptr) {
        break;
      }
      pending.push_back(body);
    }
    if (pending.size() != op_ - commit_min_) {
      break;
    }
    message req = std::move(request_queue_.front());
    request_queue_.pop_front();
    RILL_ASSERT(req.h.cmd == command::request);
    if (req.h.operation >= operation_user_min) {
      auto proposed =
          sm_.prepare(req.h, state_machine::prepare_context{op_ + 1, view_, ticks_}, std::move(req.body), pending);
      RILL_ASSERT(proposed.operation >= operation_user_min, "a state machine proposed operation {}",
                  proposed.operation);
      req.h.operation = proposed.operation;
      req.body = std::move(proposed.body);
    }
    auto parent = log_.find(op_);
    RILL_ASSERT(parent != log_.end(), "primary without a header at its op {}", op_);
    RILL_ASSERT(!log_.contains(op_ + 1), "primary with a header above its op {}", op_);
    message p;
    p.h.cmd = command::prepare;
    p.h.cluster = options_.cluster;
    p.h.client = req.h.client;
    p.h.request = req.h.request;
    p.h.op = op_ + 1;
    p.h.commit = commit_max_;
    p.h.timestamp = ticks_;
    p.h.view = view_.value();
    p.h.replica = options_.replica;
    p.h.operation = req.h.operation;
    p.h.parent = parent->second.h.checksum;
    set_session(p.h, session_of(req.h));
    p.body = std::move(req.body);
    seal(p);
    op_ = p.h.op;
    log_[op_] = entry{p.h, false, true, false, true};
    bodies_[op_] = p;
    pipeline_.push_back(pipeline_entry{p.h, 0});
    RILL_ASSERT(pipeline_.size() <= options_.pipeline_max);
    out.push_back(write_effect{p});
    broadcast(p, out);
  }
}

void replica::on_prepare(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::prepare);
  RILL_ASSERT(m.h.cluster == options_.cluster);
  if (m.h.op == 0) {
    return;
  }
  auto existing = log_.find(m.h.op);
  // A repair: a prepare we know the header of but do not hold, from any view.
  if (existing != log_.end() && existing->second.h.checksum == m.h.checksum) {
    entry& e = existing->second;
    if (!e.verified && m.h.view == view_.value() && m.h.replica == primary_of_view(view_) &&
        status_ == status::normal) {
      e.verified = true;  // the current primary's own prepare
      verify_down_from(m.h.op);
    }
    if (!e.durable && !e.writing) {
      store_prepare(m, e.verified, out);
    } else if (e.durable && e.verified && status_ == status::normal && !is_primary()) {
      // The primary resent it: our ack was lost. Also a prepare of an earlier view that the new primary carries in
      // its pipeline (it resends it as it was made): held durably on this view's log, it is acknowledged in this view
      // (else an ack lost after a view change left the new primary's pipeline waiting until it abdicated).
      send_prepare_ok(e.h, out);
    }
    if (m.h.view == view_.value() && m.h.replica == primary_of_view(view_)) {
      heard_from_primary();
      advance_commit_max(m.h.commit, out);
    }
    return;
  }
  if (m.h.view > view_.value()) {
    // A newer view exists and we missed its start_view: ask its primary.
    ask_for_start_view(view_t(m.h.view), out);
    return;
  }
  bool from_primary =
      status_ == status::normal && m.h.view == view_.value() && m.h.replica == primary_of_view(view_) && !is_primary();
  if (bugs_.accept_out_of_order && status_ == status::normal && !is_primary() && m.h.view < view_.value()) {
    from_primary = true;  // the deliberate bug: a deposed primary's prepare taken as the current one's
  }
  if (!from_primary) {
    // Not the current primary's: only a prepare that chains to a header we trust is taken (repair of a gap).
    if (m.h.op > commit_min_ && accept_header(m.h, false)) {
      store_prepare(m, true, out);
    }
    return;
  }
  heard_from_primary();
  if (m.h.op <= commit_min_) {
    return;
  }
  RILL_ASSERT(!is_primary());
  RILL_ASSERT(status_ == status::normal);
  if (!bugs_.accept_out_of_order) {
    RILL_ASSERT(m.h.view == view_.value());
  }
  if (existing != log_.end()) {
    bodies_.erase(m.h.op);  // ours is from an older view: the current primary's replaces it
  }
  if (m.h.op > op_) {
    op_ = m.h.op;
  } else {
    // Anything above that does not chain onto this prepare is stale.
    for (auto it = log_.upper_bound(m.h.op); it != log_.end();) {
      if (it->first == m.h.op + 1 && it->second.h.parent != m.h.checksum) {
        bodies_.erase(it->first);
        it = log_.erase(it);
        continue;
      }
      ++it;
    }
  }
  store_prepare(m, true, out);
  verify_down_from(m.h.op);
  advance_commit_max(m.h.commit, out);
}

void replica::store_prepare(const message& m, bool verified, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::prepare);
  RILL_ASSERT(m.h.op > 0, "op 0 (the root) is never stored");
  RILL_ASSERT(m.h.op <= op_, "op {} stored above the op {}", m.h.op, op_);
  // (A partition group's storage appends what it is given to the partition log: only a verified prepare goes.)
  const bool write = writable(m.h.op) && (verified || !options_.apply_durable_only || bugs_.write_unverified);
  log_[m.h.op] = entry{m.h, false, write, false, verified};
  // Held in memory while uncommitted (and, beyond the journal's window, until applied or the window moves: then
  // repair writes it), within a bound: a ring's length above what is applied.
  if (m.h.op > commit_min_ && (journal_slots_ == 0 || m.h.op <= commit_min_ + journal_slots_)) {
    bodies_[m.h.op] = m;
  }
  if (write) {
    out.push_back(write_effect{m});
    if (bugs_.ack_before_durable) {
      send_prepare_ok(m.h, out);  // the deliberate bug: acknowledged while the write is still in flight
    }
  }
  if (prepares_asked_.erase(m.h.op) > 0) {
    repair(out);  // an answer frees a place in the window: the next prepare is asked for now, not at the next tick
  }
}

void replica::send_prepare_ok(const header& h, std::vector<effect>& out) {
  RILL_ASSERT(h.cmd == command::prepare);
  RILL_ASSERT(h.op > 0);
  if (status_ != status::normal || is_primary() || h.op <= commit_max_ || silenced()) {
    return;  // (silenced: a replica that lost its disk acknowledges nothing until it has caught up)
  }
  const auto it = log_.find(h.op);
  RILL_ASSERT(it != log_.end(), "prepare_ok for op {} that is not in the log", h.op);
  RILL_ASSERT(it->second.durable || bugs_.ack_before_durable, "prepare_ok for op {} before it is durable", h.op);
  message ok = make(command::prepare_ok);
  ok.h.op = h.op;
  ok.h.context = h.checksum;
  ok.h.commit = commit_max_;
  ok.h.timestamp = stamp();
  seal(ok);
  send(primary_of_view(view_), std::move(ok), out);
}

void replica::on_prepare_ok(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::prepare_ok);
  RILL_ASSERT(m.h.replica < options_.replica_count);
  if (status_ != status::normal || !is_primary() || m.h.view != view_.value()) {
    return;
  }
  for (auto& p : pipeline_) {
    if (p.h.op == m.h.op && p.h.checksum == m.h.context) {
      p.ok |= bit(m.h.replica);
    }
  }
  commit_pipeline(out);
}

void replica::commit_pipeline(std::vector<effect>& out) {
  RILL_ASSERT(status_ == status::normal);
  RILL_ASSERT(is_primary());
  const std::size_t quorum = quorum_replication(options_.replica_count);
  while (!pipeline_.empty()) {
    const pipeline_entry& head = pipeline_.front();
    const bool own = (head.ok & bit(options_.replica)) != 0;
    const bool enough = bugs_.commit_without_quorum ? own : (own && count(head.ok) >= quorum);
    if (!enough) {
      break;
    }
    RILL_ASSERT(head.h.op <= op_);
    commit_max_ = std::max(commit_max_, head.h.op);
    commit_progress_ = ticks_;
    pipeline_.pop_front();
  }
  commit_journal(out);
  prepare_next(out);
}

void replica::answer_stale_primary(const message& m, std::vector<effect>& out) {
  // The primary of an earlier view still leads it in its own eyes (it was cut off, or it was formatted late for a
  // group that had moved on, and so never heard of the view change): this view's primary tells it, so that it stops
  // leading and serving now rather than at its next timeout, which an idle group never reaches (issue 38).
  if (status_ == status::normal && is_primary() && !silenced() && m.h.replica == primary_of_view(view_t(m.h.view))) {
    send(m.h.replica, make_start_view(), out);
  }
}

void replica::on_commit(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::commit);
  RILL_ASSERT(m.h.replica != options_.replica);
  if (m.h.view > view_.value()) {
    ask_for_start_view(view_t(m.h.view), out);
    return;
  }
  if (m.h.view < view_.value()) {
    answer_stale_primary(m, out);
    return;
  }
  if (status_ != status::normal || m.h.view != view_.value() || is_primary() || m.h.replica != primary_of_view(view_)) {
    return;
  }
  heard_from_primary();
  if (!options_.heartbeats_by_host) {
    // The primary learns that it is still heard (quorum_heard_tick). Late heartbeats too: an older one counts less.
    message ok = make(command::commit_ok);
    ok.h.timestamp = m.h.timestamp;
    seal(ok);
    send(m.h.replica, std::move(ok), out);
  }
  // Sequences count per sender (a replica, or a host), so they are compared only within one view: one primary.
  if (commit_heartbeat_view_ == view_ && m.h.timestamp <= commit_heartbeat_seen_) {
    return;  // an old heartbeat, delivered late
  }
  commit_heartbeat_view_ = view_;
  commit_heartbeat_seen_ = m.h.timestamp;
  if (m.h.commit > commit_min_ && !m.h.parent.zero()) {
    auto it = log_.find(m.h.commit);
    if (it != log_.end() && it->second.h.checksum != m.h.parent) {
      bodies_.erase(it->first);
      log_.erase(it);  // stale: repair fetches the committed one
    }
    commit_checksum_ = {m.h.commit, m.h.parent};
  }
  advance_commit_max(m.h.commit, out);
}

void replica::on_commit_ok(const message& m) {
  RILL_ASSERT(m.h.cmd == command::commit_ok);
  if (status_ != status::normal || !is_primary() || m.h.view != view_.value() || heard_view_ != view_ ||
      m.h.replica >= options_.replica_count || m.h.replica == options_.replica) {
    return;
  }
  const auto it = std::lower_bound(heartbeats_sent_.begin(), heartbeats_sent_.end(),
                                   std::pair<std::uint64_t, std::uint64_t>{m.h.timestamp, 0});
  if (it == heartbeats_sent_.end() || it->first != m.h.timestamp) {
    return;  // older than those kept (or never sent in this view)
  }
  auto& heard = heartbeat_heard_tick_.at(m.h.replica);
  heard = std::max(heard, it->second);
}

std::optional<std::uint64_t> replica::quorum_heard_tick() const {
  if (options_.replica_count == 1) {
    return ticks_;
  }
  if (status_ != status::normal || !is_primary() || options_.heartbeats_by_host || heard_view_ != view_) {
    return std::nullopt;
  }
  std::vector<std::uint64_t> heard;
  for (replica_t r = 0; r < options_.replica_count; ++r) {
    heard.push_back(r == options_.replica ? ticks_ : heartbeat_heard_tick_.at(r));
  }
  std::sort(heard.begin(), heard.end(), std::greater<>());
  const std::size_t quorum = quorum_replication(options_.replica_count);
  RILL_ASSERT(quorum >= 1 && quorum <= heard.size());
  return heard[quorum - 1];
}

void replica::advance_commit_max(std::uint64_t commit, std::vector<effect>& out) {
  if (commit > commit_max_) {
    commit_max_ = commit;
  }
  RILL_ASSERT(commit_max_ >= commit);
  commit_journal(out);
}

void replica::commit_journal(std::vector<effect>& out) {
  const std::uint64_t applied_before = commit_min_;
  while (commit_min_ < commit_max_) {
    const std::uint64_t k = commit_min_ + 1;
    auto it = log_.find(k);
    if (it == log_.end() || !it->second.verified) {
      break;  // repair fetches (or confirms) it
    }
    if (options_.apply_durable_only && !it->second.durable) {
      break;  // on_write_done (or repair, which writes it again) comes back here
    }
    const auto prev = log_.find(commit_min_);
    RILL_ASSERT(prev != log_.end(), "no header at the applied op {}", commit_min_);
    if (it->second.h.parent != prev->second.h.checksum) {
      bodies_.erase(k);
      log_.erase(it);  // does not chain onto what we applied: stale
      break;
    }
    const message* body = cached(k, it->second.h.checksum);
    if (body == nullptr) {
      if (it->second.durable) {
        read_prepare(k, out);
        reads_.at(k).for_commit = true;
      }
      break;
    }
    const message prepare = *body;
    RILL_ASSERT(prepare.h.checksum == it->second.h.checksum);
    apply(prepare, out);
    commit_min_ = k;
    apply_progress_ = ticks_;
    bodies_.erase(k);
    maybe_checkpoint(out);
  }
  if (commit_min_ >= commit_max_) {
    apply_progress_ = ticks_;
  }
  RILL_ASSERT(commit_min_ <= commit_max_, "applied {} beyond the commit {}", commit_min_, commit_max_);
  if (commit_min_ >= commit_persisted_ + commit_persist_every) {
    commit_persisted_ = commit_min_;
    persist(out);
  }
  if (commit_min_ > applied_before && !request_queue_.empty()) {
    prepare_next(out);  // requests may have waited for an op applied now (read back, or repaired)
  }
}

void replica::apply(const message& prepare, std::vector<effect>& out) {
  const header& h = prepare.h;
  RILL_ASSERT(h.cmd == command::prepare);
  RILL_ASSERT(h.op == commit_min_ + 1, "op {} applied after op {}", h.op, commit_min_);
  RILL_ASSERT(h.op <= commit_max_, "op {} applied above the commit {}", h.op, commit_max_);
  RILL_ASSERT(h.parent == log_.at(commit_min_).h.checksum, "op {} does not chain onto the op applied", h.op);
  const bool answer = status_ == status::normal && is_primary();
  message reply;
  reply.h.cmd = command::reply;
  reply.h.cluster = options_.cluster;
  reply.h.client = h.client;
  reply.h.request = h.request;
  reply.h.op = h.op;
  reply.h.commit = h.op;
  reply.h.view = h.view;        // the prepare's, not ours: replies are part of the replicated state
  reply.h.replica = h.replica;  // and must be byte-identical on every replica
  reply.h.operation = h.operation;
  reply.h.context = h.checksum;
  if (h.operation == operation_register) {
    seal(reply);
    if (clients_.find(h.client) == nullptr) {
      clients_.open(h.client, h.op, reply);
    }
    if (answer) {
      out.push_back(reply_effect{reply});
    }
  } else if (h.operation >= operation_user_min) {
    const client_session* session = clients_.find(h.client);
    const std::uint64_t stamped = session_of(h);
    if (session == nullptr || (stamped != 0 && stamped != session->session)) {
      // Gone, or another session of the client id (a register delivered late opened a new one): not executed.
      if (answer) {
        message ev = make(command::eviction);
        ev.h.client = h.client;
        ev.h.request = h.request;
        set_session(ev.h, stamped);
        seal(ev);
        out.push_back(reply_effect{std::move(ev)});
      }
      sm_.skip(h, prepare.body);
    } else if (h.request <= session->request && !bugs_.forget_client_table) {
      sm_.skip(h, prepare.body);
      if (answer && h.request == session->request) {
        out.push_back(reply_effect{session->reply});
      }
    } else {
      reply.body = sm_.apply(h, prepare.body);
      seal(reply);
      if (h.request > session->request) {
        clients_.commit(h.client, h.request, h.op, reply);
      }
      if (answer) {
        out.push_back(reply_effect{reply});
      }
    }
  }
  out.push_back(applied_effect{h});
}

// ---------------------------------------------------------------------------------------------------------------
// Persistence and sending

vsr_state replica::wanted_state() const {
  vsr_state s;
  s.cluster = options_.cluster;
  s.replica = options_.replica;
  s.replica_count = options_.replica_count;
  s.view = view_;
  s.log_view = log_view_;
  s.commit = op_t(std::max({durable_.commit.value(), commit_persisted_, checkpoint_.op()}));
  s.checkpoint = checkpoint_;
  s.recovering = recovering_;
  s.incarnation = incarnation_;
  s.view_headers =
      log_view_ == durable_.log_view && status_ == status::view_change ? durable_.view_headers : view_headers_;
  RILL_ASSERT(s.view_headers.size() <= std::size_t{options_.pipeline_max} + 1, "{} view headers",
              s.view_headers.size());
  return s;
}

void replica::persist(std::vector<effect>& out) {
  if (persisting_) {
    persist_again_ = true;
    return;
  }
  vsr_state s = wanted_state();
  if (s == durable_) {
    return;
  }
  RILL_ASSERT(s.view >= durable_.view, "the persisted view would go back");
  RILL_ASSERT(s.log_view >= durable_.log_view, "the persisted log view would go back");
  RILL_ASSERT(s.log_view <= s.view);
  RILL_ASSERT(s.checkpoint.op() >= durable_.checkpoint.op(), "the persisted checkpoint would go back");
  RILL_ASSERT(s.checkpoint.op() <= s.commit.value());
  RILL_ASSERT(!s.recovering || durable_.recovering, "recovering only ever clears");
  persisting_ = s;
  out.push_back(persist_effect{std::move(s)});
}

void replica::send(replica_t to, message m, std::vector<effect>& out) {
  RILL_ASSERT(to != options_.replica, "{} to itself", to_string(m.h.cmd));
  RILL_ASSERT(to < options_.replica_count);
  RILL_ASSERT(m.h.cluster == options_.cluster);
  RILL_ASSERT(m.h.size == header::encoded_size + m.body.size(), "an unsealed {}", to_string(m.h.cmd));
  const bool view_durable = m.h.view <= durable_.view.value();
  const bool log_view_durable = m.h.cmd != command::start_view || m.h.log_view <= durable_.log_view.value();
  if ((view_durable && log_view_durable) || bugs_.advertise_before_persist || m.h.cmd == command::prepare) {
    out.push_back(send_effect{to, std::move(m)});
  } else {
    deferred_.push_back(send_effect{to, std::move(m)});
  }
}

void replica::broadcast(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.replica == options_.replica, "only our own messages are broadcast");
  RILL_ASSERT(m.h.view == view_.value());
  for (replica_t r = 0; r < options_.replica_count; ++r) {
    if (r != options_.replica) {
      send(r, m, out);
    }
  }
}

void replica::flush_deferred(std::vector<effect>& out) {
  std::vector<send_effect> keep;
  for (auto& s : deferred_) {
    if (s.m.h.view < view_.value()) {
      continue;  // obsolete
    }
    const bool view_durable = s.m.h.view <= durable_.view.value();
    const bool log_view_durable = s.m.h.cmd != command::start_view || s.m.h.log_view <= durable_.log_view.value();
    if (view_durable && log_view_durable) {
      out.push_back(std::move(s));
    } else {
      keep.push_back(std::move(s));
    }
  }
  deferred_ = std::move(keep);
}

message replica::make(command c) const {
  RILL_ASSERT(c != command::reserved);
  RILL_ASSERT(c != command::request, "requests come from clients");
  message m;
  m.h.cmd = c;
  m.h.cluster = options_.cluster;
  m.h.view = view_.value();
  m.h.replica = options_.replica;
  return m;
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers

void replica::resend_view_change_vote(std::vector<effect>& out) {
  // A replica in a view change stays a voter for its view: a peer that once voted for it too but has since gone
  // back to normal in the view before (it completed that one after voting) counts this vote with its own and
  // joins. Without it, a replica that entered the view on such a vote waits for that peer's do_view_change forever
  // (with two replicas, the group stops). Receivers already in this view change echo at most once per resend; those
  // in an older view join it (in_view_mark), even with no vote of their own to count.
  if (options_.replica_count == 1 || silenced() || status_ != status::view_change) {
    return;
  }
  message svc = make(command::start_view_change);
  svc.h.log_view = log_view_.value();
  svc.h.request = in_view_mark;  // (a peer left behind in an older view joins this one: on_start_view_change)
  svc.h.timestamp = stamp();     // (unstamped, peers that know this replica's incarnation drop it as stale)
  seal(svc);
  for (replica_t r = 0; r < options_.replica_count; ++r) {
    if (r != options_.replica) {
      out.push_back(send_effect{r, svc});  // a vote, not an adoption: nothing to persist first
    }
  }
}

bool replica::idle() const {
  return status_ == status::normal && !durable_.recovering && !recovering_ && !persisting_ && !persist_again_ &&
         deferred_.empty() && pipeline_.empty() && request_queue_.empty() && reads_.empty() &&
         commit_min_ == commit_max_ && op_ == commit_max_ && !checkpoint_writing_ && !checkpoint_soon_ &&
         checkpoint_ == durable_.checkpoint && !voted_ && wanted_state() == durable_;
}

std::optional<commit_beat> replica::beat() const {
  if (options_.replica_count == 1 || status_ != status::normal || !is_primary() || silenced()) {
    return std::nullopt;
  }
  if (!pipeline_.empty() && ticks_ - commit_progress_ > options_.abdicate_ticks) {
    return std::nullopt;  // abdicating: the backups must elect another (see on_tick)
  }
  if (durable_.view != view_ || durable_.log_view != view_) {
    return std::nullopt;  // no message carrying a view goes out before the view is durable (send() defers them)
  }
  commit_beat b;
  b.view = view_;
  b.commit = commit_max_;
  if (auto it = log_.find(commit_max_); it != log_.end()) {
    b.checksum = it->second.h.checksum;
  }
  return b;
}

void replica::heard_from_primary() {
  primary_seen_ = ticks_;
  voted_ = false;  // the primary is alive after all: stop voting against it
  vote_view_ = view_t(0);
}

bool replica::is_primary() const noexcept {
  return primary_of_view(view_) == options_.replica;
}

replica_t replica::primary_of_view(view_t v) const noexcept {
  const replica_t primary = primary_of(v, options_.replica_count);
  RILL_ASSERT(primary < options_.replica_count);
  return primary;
}

std::uint32_t replica::jitter(std::uint32_t ticks) {
  RILL_ASSERT(ticks >= 1);
  return ticks + static_cast<std::uint32_t>(rng_.below(ticks / 2 + 1));
}

const message* replica::cached(std::uint64_t op, const checksum_t& checksum) const {
  auto it = bodies_.find(op);
  if (it != bodies_.end()) {
    RILL_ASSERT(it->second.h.op == op, "the body kept at op {} is op {}", op, it->second.h.op);
  }
  return it != bodies_.end() && it->second.h.checksum == checksum ? &it->second : nullptr;
}

std::size_t replica::count(std::uint32_t bits) const noexcept {
  RILL_ASSERT((bits >> options_.replica_count) == 0u, "a bitset {:#x} naming a replica beyond {}", bits,
              options_.replica_count);
  return static_cast<std::size_t>(std::popcount(bits));
}

std::string replica::describe() const {
  std::string out = fmt::format("r{} {} v{} lv{} op{} cmin{} cmax{} durable(v{} lv{}{})", options_.replica,
                                status_ == status::normal ? "normal" : "view_change", view_.value(), log_view_.value(),
                                op_, commit_min_, commit_max_, durable_.view.value(), durable_.log_view.value(),
                                persisting_ ? " persisting" : "");
  if (!request_queue_.empty()) {
    out += fmt::format(" queued{}", request_queue_.size());
  }
  if (is_primary() && status_ == status::normal) {
    out += fmt::format(" pipeline{}", pipeline_.size());
    if (!pipeline_.empty()) {
      out += fmt::format(" head(op{} ok{:#x})", pipeline_.front().h.op, pipeline_.front().ok);
    }
  }
  const std::uint64_t next = commit_min_ + 1;
  if (auto it = log_.find(next); it == log_.end()) {
    out += fmt::format(" next:none");
  } else {
    const entry& e = it->second;
    out += fmt::format(" next:{}{}{}{}{}", e.verified ? "v" : "-", e.durable ? "d" : "-", e.writing ? "w" : "-",
                       e.faulty ? "f" : "-", cached(next, e.h.checksum) != nullptr ? "c" : "-");
  }
  if (voted_) {
    out += fmt::format(" voting{}", vote_view_.value());
  }
  if (durable_.recovering) {
    out += fmt::format(" recovering(answers {}{}{})", recovery_views_.size(),
                       recovery_head_
                           ? fmt::format(" head v{} op{}", recovery_head_->first.value(), recovery_head_->second)
                           : std::string(),
                       recovery_target_ ? fmt::format(" target op{}", *recovery_target_) : std::string());
  }
  return out;
}

const header* replica::header_at(std::uint64_t op) const {
  auto it = log_.find(op);
  return it == log_.end() ? nullptr : &it->second.h;
}

// ---------------------------------------------------------------------------------------------------------------
// Invariants

void replica::check_invariants() const {
  // Views: the log view is the last view this replica was normal in; the durable state lags, never leads.
  RILL_ASSERT(view_ >= log_view_, "view {} below log view {}", view_.value(), log_view_.value());
  if (status_ == status::normal) {
    RILL_ASSERT(log_view_ == view_, "normal in view {} with log view {}", view_.value(), log_view_.value());
  }
  RILL_ASSERT(durable_.view <= view_);
  RILL_ASSERT(durable_.log_view <= log_view_);
  if (persisting_) {
    RILL_ASSERT(persisting_->view >= durable_.view);
    RILL_ASSERT(persisting_->log_view >= durable_.log_view);
  }
  if (persist_again_) {
    RILL_ASSERT(persisting_.has_value());
  }
  // Recovery of a lost disk: wanted cleared before durable cleared, never the other way; never leading a view.
  RILL_ASSERT(!recovering_ || durable_.recovering, "recovering again after it cleared");
  RILL_ASSERT(!(silenced() && status_ == status::normal && is_primary()), "a recovering replica leads a view");

  // Ops: applied <= known committed; applied <= op; nothing held above op; the applied op's header is held.
  RILL_ASSERT(commit_min_ <= commit_max_, "commit min {} above commit max {}", commit_min_, commit_max_);
  RILL_ASSERT(commit_min_ <= op_, "commit min {} above op {}", commit_min_, op_);
  RILL_ASSERT(!log_.empty());
  RILL_ASSERT(log_.rbegin()->first <= op_, "a header at op {} above op {}", log_.rbegin()->first, op_);
  RILL_ASSERT(log_.contains(commit_min_), "no header at the applied op {}", commit_min_);
  if (!bodies_.empty()) {
    RILL_ASSERT(bodies_.begin()->first > commit_min_, "a body kept at applied op {}", bodies_.begin()->first);
    RILL_ASSERT(bodies_.rbegin()->first <= op_);
  }

  // State transfer: one checkpoint at a time, bounded, only its prefix held.
  if (sync_) {
    RILL_ASSERT(sync_->size <= options_.sync_bytes_max);
    RILL_ASSERT(sync_->bytes.size() < sync_->size, "a transfer complete but not installed");
    RILL_ASSERT(sync_->resends <= sync_chunk_resends_max);
  }

  // Checkpoints: of an applied op; the durable one is never ahead of the newest; one written at a time, only once
  // the previous is durable, into the region the superblock does not name.
  RILL_ASSERT(checkpoint_.op() <= commit_min_, "checkpoint {} above commit min {}", checkpoint_.op(), commit_min_);
  RILL_ASSERT(durable_.checkpoint.op() <= checkpoint_.op());
  if (checkpoint_writing_) {
    RILL_ASSERT(checkpoint_ == durable_.checkpoint, "a checkpoint written before the previous is durable");
    RILL_ASSERT(checkpoint_writing_->at.op > checkpoint_.op());
    RILL_ASSERT(checkpoint_writing_->at.op <= commit_min_);
    if (durable_.checkpoint.size != 0) {
      RILL_ASSERT(checkpoint_writing_->slot != durable_.checkpoint.slot, "a checkpoint over the one named durable");
    }
  }
  if (journal_slots_ == 0) {
    RILL_ASSERT(faulty_slots_.empty());
  } else {
    RILL_ASSERT(checkpoint_interval_ >= 1);
    if (!faulty_slots_.empty()) {
      RILL_ASSERT(*faulty_slots_.rbegin() < journal_slots_);
    }
  }

  // The primary: a pipeline within its limit, of consecutive chained ops above the commit (the uncommitted suffix),
  // only while normal and primary.
  RILL_ASSERT(pipeline_.size() <= options_.pipeline_max, "pipeline of {}", pipeline_.size());
  RILL_ASSERT(request_queue_.size() <= options_.request_queue_max);
  if (!pipeline_.empty()) {
    RILL_ASSERT(status_ == status::normal);
    RILL_ASSERT(is_primary());
    RILL_ASSERT(pipeline_.back().h.op <= op_);
    RILL_ASSERT(pipeline_.front().h.op > commit_min_, "pipeline op {} applied", pipeline_.front().h.op);
    RILL_ASSERT(pipeline_.front().h.op > commit_max_, "pipeline op {} committed", pipeline_.front().h.op);
    bool consecutive = true;
    bool chained = true;
    for (std::size_t i = 1; i < pipeline_.size(); ++i) {
      consecutive = consecutive && pipeline_[i].h.op == pipeline_[i - 1].h.op + 1;
      chained = chained && pipeline_[i].h.parent == pipeline_[i - 1].h.checksum;
    }
    RILL_ASSERT(consecutive, "pipeline ops {}..{} not consecutive", pipeline_.front().h.op, pipeline_.back().h.op);
    RILL_ASSERT(chained, "pipeline ops {}..{} not chained", pipeline_.front().h.op, pipeline_.back().h.op);
  }
  if (!request_queue_.empty()) {
    RILL_ASSERT(status_ == status::normal);
    RILL_ASSERT(is_primary());
  }

  // The view change: votes only for views above ours; do_view_changes only at the new primary, during the change.
  if (voted_) {
    RILL_ASSERT(vote_view_ > view_, "voting for view {} in view {}", vote_view_.value(), view_.value());
  }
  if (!svc_votes_.empty()) {
    RILL_ASSERT(svc_votes_.begin()->first > view_.value());
  }
  if (!dvcs_.empty()) {
    RILL_ASSERT(status_ == status::view_change);
    RILL_ASSERT(primary_of_view(view_) == options_.replica);
    RILL_ASSERT(dvcs_.size() <= options_.replica_count);
  }

  // Time.
  RILL_ASSERT(primary_seen_ <= ticks_);
  RILL_ASSERT(view_change_began_ <= ticks_);
  RILL_ASSERT(apply_progress_ <= ticks_);
  RILL_ASSERT(commit_progress_ <= ticks_);
}

void replica::check_log_invariants() const {
  check_invariants();
  const entry* prev = nullptr;
  std::uint64_t prev_op = 0;
  for (const auto& [op, e] : log_) {
    RILL_ASSERT(e.h.op == op, "the header at op {} is op {}", op, e.h.op);
    RILL_ASSERT(e.h.cmd == command::prepare);
    RILL_ASSERT(e.h.cluster == options_.cluster);
    if (e.durable) {
      RILL_ASSERT(!e.writing, "op {} durable with a write in flight", op);
      RILL_ASSERT(!e.faulty, "op {} durable and faulty", op);
    }
    if (op <= commit_min_) {
      RILL_ASSERT(e.verified, "applied op {} unverified", op);
    }
    // The journal's headers are hash-chained where present: below the apply point (applied in order, each onto
    // its parent), and above it between entries this replica trusts.
    if (prev != nullptr && prev_op + 1 == op && e.verified && prev->verified) {
      RILL_ASSERT(e.h.parent == prev->h.checksum, "op {} does not chain onto op {} (both verified)", op, prev_op);
    }
    prev = &e;
    prev_op = op;
  }
  for (const auto& p : pipeline_) {
    const auto it = log_.find(p.h.op);
    RILL_ASSERT(it != log_.end(), "pipeline op {} not in the log", p.h.op);
    RILL_ASSERT(it->second.h.checksum == p.h.checksum, "pipeline op {} replaced in the log", p.h.op);
  }
}

}  // namespace rill::consensus
