#include "consensus/replica.h"

#include <algorithm>
#include <bit>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"

namespace rill::consensus {
namespace {
constexpr std::uint32_t bit(replica_t r) noexcept {
  return 1u << r;
}
constexpr std::size_t headers_per_reply_max = 64;
constexpr std::uint64_t commit_persist_every = 64;  // the durable commit lower bound lags at most this many ops

// do_view_change body: the headers, then one flag byte per header, then a u32 count of headers (at the end, so the
// headers decode with decode_headers after trimming).
// present: the body is durable here; missing: never had it (a nack); faulty: had it, lost it (not a nack);
// unverified: a header this replica cannot yet confirm is on the log (ignored).
enum dvc_flag : std::uint8_t { dvc_present = 0, dvc_missing = 1, dvc_faulty = 2, dvc_unverified = 3 };

// The body: headers, one flag per header, the journal's slot count, the faulty slots, then two u32 counts (faulty
// slots, headers) at the very end.
std::vector<std::byte> encode_dvc_body(const std::vector<header>& headers, const std::vector<std::uint8_t>& flags,
                                       std::uint64_t slot_count, const std::set<std::uint64_t>& faulty_slots) {
  RILL_ASSERT(headers.size() == flags.size());
  auto out = encode_headers(headers);
  for (auto f : flags) {
    out.push_back(static_cast<std::byte>(f));
  }
  auto put64 = [&](std::uint64_t v) { append_le<std::uint64_t>(out, v); };
  auto put32 = [&](std::uint32_t v) { append_le<std::uint32_t>(out, v); };
  put64(slot_count);
  for (auto slot : faulty_slots) {
    put64(slot);
  }
  put32(static_cast<std::uint32_t>(faulty_slots.size()));
  put32(static_cast<std::uint32_t>(headers.size()));
  return out;
}

struct dvc_body {
  std::vector<header> headers;
  std::vector<std::uint8_t> flags;
  std::uint64_t slot_count = 0;
  std::set<std::uint64_t> faulty_slots;
};

bool decode_dvc_body(std::span<const std::byte> body, dvc_body& out) {
  if (body.size() < 16) {
    return false;
  }
  const std::uint32_t n = load_le<std::uint32_t>(body.data() + body.size() - 4);
  const std::uint32_t f = load_le<std::uint32_t>(body.data() + body.size() - 8);
  if (n > 4096 || f > 4096 || body.size() != std::size_t{n} * (header::encoded_size + 1) + 8 + f * 8 + 8) {
    return false;
  }
  auto decoded = decode_headers(body.subspan(0, n * header::encoded_size));
  if (!decoded) {
    return false;
  }
  out.headers = std::move(*decoded);
  out.flags.clear();
  const std::byte* p = body.data() + n * header::encoded_size;
  for (std::uint32_t i = 0; i < n; ++i) {
    out.flags.push_back(static_cast<std::uint8_t>(p[i]));
  }
  p += n;
  out.slot_count = load_le<std::uint64_t>(p);
  p += 8;
  out.faulty_slots.clear();
  for (std::uint32_t i = 0; i < f; ++i) {
    out.faulty_slots.insert(load_le<std::uint64_t>(p + std::size_t{i} * 8));
  }
  return true;
}
}  // namespace

replica::replica(const replica_options& options, state_machine& sm, recovered_state recovered, replica_bugs bugs)
    : options_(options),
      bugs_(bugs),
      sm_(sm),
      clients_(options.clients_max),
      rng_(options.seed ^ (0x9e3779b97f4a7c15ULL * (options.replica + 1))) {
  RILL_ASSERT(options_.replica_count >= 1 && options_.replica_count <= replicas_max, "replica_count {}",
              options_.replica_count);
  RILL_ASSERT(options_.replica < options_.replica_count);
  RILL_ASSERT(options_.pipeline_max >= 1 && options_.pipeline_max <= pipeline_max_limit);
  RILL_ASSERT(options_.heartbeat_ticks >= 1 && options_.resend_ticks >= 1);
  RILL_ASSERT(options_.heartbeat_ticks < options_.primary_timeout_ticks);
  primary_timeout_ = jitter(options_.primary_timeout_ticks);
  view_change_timeout_ = jitter(options_.view_change_timeout_ticks);
  recover(std::move(recovered));
  checkpoint_interval_ = options_.checkpoint_interval != 0 ? options_.checkpoint_interval : journal_slots_ / 4;
  if (journal_slots_ > 0) {
    RILL_ASSERT(checkpoint_interval_ >= 1 && checkpoint_interval_ + 2 * options_.pipeline_max <= journal_slots_,
                "checkpoint interval {} with pipeline_max {} does not fit a journal of {} slots", checkpoint_interval_,
                options_.pipeline_max, journal_slots_);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Start

void replica::recover(recovered_state recovered) {
  vsr_state& s = recovered.state;
  RILL_ASSERT(s.cluster == options_.cluster, "journal of cluster {} opened for cluster {}", s.cluster,
              options_.cluster);
  RILL_ASSERT(s.replica == options_.replica && s.replica_count == options_.replica_count);
  durable_ = s;
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
  op_ = log_.rbegin()->first;
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
    // Alone, this replica is the primary of every view, and what it holds durably without a gap is committed: an op
    // above a gap never was (it commits in order, each op once durable here), so it is cut.
    std::uint64_t top = base;
    while (log_.contains(top + 1) && log_.at(top + 1).durable) {
      ++top;
    }
    log_.erase(log_.upper_bound(top), log_.end());
    op_ = top;
    if (log_view_ < view_) {
      log_view_ = view_;
    }
    status_ = status::normal;
    commit_max_ = op_;
  } else if (log_view_ == view_ && (primary_of_view(view_) != options_.replica || recovered.formatted)) {
    status_ = status::normal;
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
  if (m.h.cluster != options_.cluster) {
    return;
  }
  if (m.h.cmd != command::request && m.h.cmd != command::prepare && m.h.replica >= options_.replica_count) {
    return;
  }
  if (m.h.cmd != command::request && m.h.cmd != command::prepare && m.h.replica == options_.replica) {
    return;  // our own message, echoed by the network
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
    case command::reply:
    case command::eviction:
    case command::reserved:
      break;  // for clients
  }
}

void replica::on_tick(std::vector<effect>& out) {
  ++ticks_;
  const bool solo = options_.replica_count == 1;
  if (status_ == status::normal) {
    if (is_primary()) {
      if (pipeline_.empty()) {
        commit_progress_ = ticks_;
      }
      const bool abdicating = ticks_ - commit_progress_ > options_.abdicate_ticks;
      if (abdicating && !solo) {
        vote_view_change(view_ + 1, out);  // and vote to be replaced, so that a minority of backups suffices
      }
      if (!solo && ticks_ >= heartbeat_due_ && !abdicating) {
        heartbeat_due_ = ticks_ + options_.heartbeat_ticks;
        message c = make(command::commit);
        c.h.commit = commit_max_;
        c.h.op = commit_max_;
        if (auto it = log_.find(commit_max_); it != log_.end()) {
          c.h.parent = it->second.h.checksum;
        }
        c.h.timestamp = ++heartbeat_sequence_;
        seal(c);
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
    }
  }
  if (ticks_ % options_.resend_ticks == 0) {
    repair(out);
  }
  if (!persisting_ && wanted_state() != durable_) {
    persist(out);
  }
  commit_journal(out);
  maybe_checkpoint(out);
}

void replica::on_write_done(std::uint64_t op, checksum_t checksum, bool ok, std::vector<effect>& out) {
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

void replica::on_read_done(std::uint64_t op, checksum_t checksum, const message* prepare, std::vector<effect>& out) {
  auto it = reads_.find(op);
  if (it == reads_.end() || it->second.checksum != checksum) {
    return;
  }
  pending_read pr = std::move(it->second);
  reads_.erase(it);
  auto e = log_.find(op);
  if (prepare == nullptr || prepare->h.checksum != checksum) {
    if (e != log_.end() && e->second.h.checksum == checksum) {
      e->second.durable = false;  // the journal lost it: repair fetches it from a peer
      e->second.faulty = true;
    }
    return;
  }
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
  RILL_ASSERT(persisting_.has_value() && *persisting_ == state, "persist completion for a state not in flight");
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
    if (session == nullptr) {
      // Possibly evicted, possibly registered in an op this primary has not applied (or knows not to be committed):
      // only the log can tell. The request is prepared; apply answers it with an eviction if the session is gone
      // then. (A primary never evicts from its own view of the table: it may be stale, or not the primary at all.)
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
      return;
    }
  }
  if (request_queue_.size() >= options_.request_queue_max) {
    return;  // overloaded: the client retries
  }
  request_queue_.push_back(m);
  prepare_next(out);
}

void replica::prepare_next(std::vector<effect>& out) {
  // Nothing is prepared in a view that is not yet durable (its start_view has not gone out either), nor an op
  // whose journal slot still holds one the durable checkpoint does not cover (clients retry once it moves on).
  while (!request_queue_.empty() && pipeline_.size() < options_.pipeline_max && status_ == status::normal &&
         is_primary() && durable_.log_view == view_ && writable(op_ + 1)) {
    message req = std::move(request_queue_.front());
    request_queue_.pop_front();
    auto parent = log_.find(op_);
    RILL_ASSERT(parent != log_.end(), "primary without a header at its op {}", op_);
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
    p.body = std::move(req.body);
    seal(p);
    op_ = p.h.op;
    log_[op_] = entry{p.h, false, true, false, true};
    bodies_[op_] = p;
    pipeline_.push_back(pipeline_entry{p.h, 0});
    out.push_back(write_effect{p});
    broadcast(p, out);
  }
}

void replica::on_prepare(const message& m, std::vector<effect>& out) {
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
    } else if (e.durable && status_ == status::normal && m.h.view == view_.value() && !is_primary()) {
      send_prepare_ok(e.h, out);  // the primary resent it: our ack was lost
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
  const bool write = writable(m.h.op);
  log_[m.h.op] = entry{m.h, false, write, false, verified};
  // Held in memory while uncommitted (and, beyond the journal's window, until applied or the window moves: then
  // repair writes it), within a bound: a ring's length above what is applied.
  if (m.h.op > commit_min_ && (journal_slots_ == 0 || m.h.op <= commit_min_ + journal_slots_)) {
    bodies_[m.h.op] = m;
  }
  if (write) {
    out.push_back(write_effect{m});
  }
}

void replica::send_prepare_ok(const header& h, std::vector<effect>& out) {
  if (status_ != status::normal || is_primary() || h.op <= commit_max_) {
    return;
  }
  message ok = make(command::prepare_ok);
  ok.h.op = h.op;
  ok.h.context = h.checksum;
  ok.h.commit = commit_max_;
  seal(ok);
  send(primary_of_view(view_), std::move(ok), out);
}

void replica::on_prepare_ok(const message& m, std::vector<effect>& out) {
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
  const std::size_t quorum = quorum_replication(options_.replica_count);
  while (!pipeline_.empty()) {
    const pipeline_entry& head = pipeline_.front();
    const bool own = (head.ok & bit(options_.replica)) != 0;
    const bool enough = bugs_.commit_without_quorum ? own : (own && count(head.ok) >= quorum);
    if (!enough) {
      break;
    }
    commit_max_ = std::max(commit_max_, head.h.op);
    commit_progress_ = ticks_;
    pipeline_.pop_front();
  }
  commit_journal(out);
  prepare_next(out);
}

void replica::on_commit(const message& m, std::vector<effect>& out) {
  if (m.h.view > view_.value()) {
    ask_for_start_view(view_t(m.h.view), out);
    return;
  }
  if (status_ != status::normal || m.h.view != view_.value() || is_primary() || m.h.replica != primary_of_view(view_)) {
    return;
  }
  heard_from_primary();
  if (m.h.timestamp <= commit_heartbeat_seen_) {
    return;  // an old heartbeat, delivered late
  }
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

void replica::advance_commit_max(std::uint64_t commit, std::vector<effect>& out) {
  if (commit > commit_max_) {
    commit_max_ = commit;
  }
  commit_journal(out);
}

void replica::commit_journal(std::vector<effect>& out) {
  while (commit_min_ < commit_max_) {
    const std::uint64_t k = commit_min_ + 1;
    auto it = log_.find(k);
    if (it == log_.end() || !it->second.verified) {
      break;  // repair fetches (or confirms) it
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
    apply(prepare, out);
    commit_min_ = k;
    apply_progress_ = ticks_;
    bodies_.erase(k);
    maybe_checkpoint(out);
  }
  if (commit_min_ >= commit_max_) {
    apply_progress_ = ticks_;
  }
  if (commit_min_ >= commit_persisted_ + commit_persist_every) {
    commit_persisted_ = commit_min_;
    persist(out);
  }
}

void replica::apply(const message& prepare, std::vector<effect>& out) {
  const header& h = prepare.h;
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
    if (session == nullptr) {
      if (answer) {
        message ev = make(command::eviction);
        ev.h.client = h.client;
        ev.h.request = h.request;
        seal(ev);
        out.push_back(reply_effect{std::move(ev)});
      }
    } else if (h.request <= session->request && !bugs_.forget_client_table) {
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
// View change

void replica::vote_view_change(view_t v, std::vector<effect>& out) {
  if (options_.replica_count == 1) {
    return;
  }
  v = std::max(v, vote_view_);  // keep voting for the highest view we joined
  const bool fresh = !voted_ || v != vote_view_ || (svc_votes_[v.value()] & bit(options_.replica)) == 0;
  vote_view_ = v;
  voted_ = true;
  svc_votes_[v.value()] |= bit(options_.replica);
  if (fresh || ticks_ % options_.resend_ticks == 0) {
    message svc = make(command::start_view_change);
    svc.h.view = v.value();
    seal(svc);
    for (replica_t r = 0; r < options_.replica_count; ++r) {
      if (r != options_.replica) {
        out.push_back(send_effect{r, svc});  // a vote, not an adoption: nothing to persist first
      }
    }
  }
  count_view_change_votes(v, out);
}

void replica::on_start_view_change(const message& m, std::vector<effect>& out) {
  const view_t v(m.h.view);
  if (v == view_ && status_ == status::view_change) {
    // The sender is still voting for the view we are changing to: echo our vote so that it can count a quorum.
    message svc = make(command::start_view_change);
    seal(svc);
    out.push_back(send_effect{m.h.replica, std::move(svc)});
    return;
  }
  if (v <= view_) {
    return;
  }
  svc_votes_[v.value()] |= bit(m.h.replica);
  if (voted_ && v > vote_view_) {
    vote_view_change(v, out);  // we want out of view_ too: join the highest vote rather than split the votes
    return;
  }
  count_view_change_votes(v, out);
}

void replica::count_view_change_votes(view_t v, std::vector<effect>& out) {
  if (v > view_ && count(svc_votes_[v.value()]) >= quorum_view_change(options_.replica_count)) {
    start_view_change(v, out);
  }
}

void replica::start_view_change(view_t v, std::vector<effect>& out) {
  RILL_ASSERT(v > view_);
  view_ = v;
  status_ = status::view_change;
  view_change_began_ = ticks_;
  view_change_timeout_ = jitter(options_.view_change_timeout_ticks);
  pipeline_.clear();
  request_queue_.clear();
  dvcs_.clear();
  voted_ = false;
  vote_view_ = view_t(0);
  svc_votes_.erase(svc_votes_.begin(), svc_votes_.upper_bound(v.value()));
  deferred_.erase(
      std::remove_if(deferred_.begin(), deferred_.end(), [&](const send_effect& s) { return s.m.h.view < v.value(); }),
      deferred_.end());
  // Tell everyone (our vote for v, so the rest join), then our log to v's primary once v is durable.
  message svc = make(command::start_view_change);
  seal(svc);
  for (replica_t r = 0; r < options_.replica_count; ++r) {
    if (r != options_.replica) {
      out.push_back(send_effect{r, svc});
    }
  }
  persist(out);
  send_do_view_change(out);
}

std::vector<header> replica::suffix_headers(bool verified_only) const {
  std::vector<header> out;
  const std::uint64_t lo = op_ > options_.pipeline_max ? op_ - options_.pipeline_max : 1;
  for (auto it = log_.lower_bound(lo); it != log_.end(); ++it) {
    if (it->second.verified || !verified_only) {
      out.push_back(it->second.h);
    }
  }
  return out;
}

void replica::send_do_view_change(std::vector<effect>& out) {
  if (status_ != status::view_change || log_view_ == view_) {
    return;  // (a restarted primary never leads its old view again: it may have lost prepares it sent)
  }
  message dvc = make(command::do_view_change);
  dvc.h.log_view = log_view_.value();
  dvc.h.op = op_;
  dvc.h.commit = commit_max_;
  const auto headers = suffix_headers(false);
  std::vector<std::uint8_t> flags;
  for (const header& h : headers) {
    const entry& e = log_.at(h.op);
    flags.push_back(!e.verified ? dvc_unverified : e.durable ? dvc_present : e.faulty ? dvc_faulty : dvc_missing);
  }
  dvc.body = encode_dvc_body(headers, flags, journal_slots_, faulty_slots_);
  seal(dvc);
  if (primary_of_view(view_) == options_.replica) {
    dvcs_[options_.replica] = dvc;
    on_do_view_change(dvc, out);
  } else {
    send(primary_of_view(view_), std::move(dvc), out);
  }
}

void replica::on_do_view_change(const message& m, std::vector<effect>& out) {
  const view_t v(m.h.view);
  if (v < view_ || primary_of_view(v) != options_.replica) {
    return;
  }
  if (v > view_) {
    start_view_change(v, out);  // a quorum voted for v without us hearing it: join (records our own do_view_change)
  }
  if (status_ == status::normal) {
    if (m.h.replica != options_.replica) {
      send(m.h.replica, make_start_view(), out);  // it missed our start_view
    }
    return;
  }
  dvcs_[m.h.replica] = m;
  if (!dvcs_.contains(options_.replica) || dvcs_.size() < quorum_view_change(options_.replica_count)) {
    return;
  }
  // The new log: the union of the suffixes of the do_view_changes with the highest last normal view, cut at the
  // first op nobody in the quorum holds (it cannot have committed, nor anything after it).
  std::uint32_t log_view_max = 0;
  std::uint64_t commit = 0;
  for (const auto& [r, d] : dvcs_) {
    log_view_max = std::max(log_view_max, d.h.log_view);
    commit = std::max(commit, d.h.commit);
  }
  struct suffix {
    std::uint64_t lo = 0;
    std::uint64_t op = 0;
    std::map<std::uint64_t, std::pair<checksum_t, std::uint8_t>> held;  // op -> (checksum, flag)
    std::uint64_t slot_count = 0;
    std::set<std::uint64_t> faulty_slots;  // slots that lost something unknown: no nack for their ops
  };
  std::vector<suffix> suffixes;
  std::map<std::uint64_t, header> canonical;
  std::uint64_t op = 0;
  for (const auto& [r, d] : dvcs_) {
    dvc_body body;
    if (!decode_dvc_body(d.body, body)) {
      continue;
    }
    const auto& hs = body.headers;
    const auto& flags = body.flags;
    suffix sfx;
    sfx.op = d.h.op;
    sfx.slot_count = body.slot_count;
    sfx.faulty_slots = body.faulty_slots;
    sfx.lo = d.h.op > options_.pipeline_max ? d.h.op - options_.pipeline_max : 1;
    for (std::size_t i = 0; i < hs.size(); ++i) {
      sfx.held[hs[i].op] = {hs[i].checksum, flags[i]};
    }
    suffixes.push_back(std::move(sfx));
    if (d.h.log_view != log_view_max) {
      continue;
    }
    op = std::max(op, d.h.op);
    for (std::size_t i = 0; i < hs.size(); ++i) {
      if (flags[i] == dvc_unverified) {
        continue;
      }
      const header& h = hs[i];
      auto [it, inserted] = canonical.emplace(h.op, h);
      RILL_ASSERT(inserted || it->second.checksum == h.checksum,
                  "two headers at op {} in log view {}: the do_view_change logs diverge", h.op, log_view_max);
    }
  }
  // Whoever prepared op had op - pipeline_max committed (a primary keeps at most pipeline_max - 1 ops uncommitted
  // when it prepares another): only the window above that can be cut.
  if (op > options_.pipeline_max) {
    commit = std::max(commit, op - options_.pipeline_max);
  }
  RILL_ASSERT(op >= commit_min_, "the new log ({}) is shorter than what we applied ({})", op, commit_min_);
  // Truncate at the first op above the commit point that is not chained, or that enough members never had (a nack
  // quorum: then no replication quorum can have held it, so it did not commit, nor anything after it). A member
  // whose copy was corrupted is not a nack: it may have acknowledged it.
  const std::size_t nack_quorum = options_.replica_count - quorum_replication(options_.replica_count) + 1;
  const std::uint64_t lowest = canonical.empty() ? op + 1 : canonical.begin()->first;
  auto nacks_for = [&](std::uint64_t k) {
    std::size_t nacks = 0;
    for (const suffix& sfx : suffixes) {
      if (!sfx.held.contains(k)) {
        const bool lost_slot = sfx.slot_count > 0 && sfx.faulty_slots.contains(k % sfx.slot_count);
        nacks += !lost_slot && (k > sfx.op || k >= sfx.lo) ? 1 : 0;
      }
    }
    return nacks;
  };
  // Below the lowest header of the new log and above the commit point: an op no member of the highest log view
  // reported. If a nack quorum never had it, it did not commit, nor anything after it (the simulator found a
  // primary's crash leaving op 2 on one backup and op 1 nowhere: without this, the new log kept op 2 above a hole
  // nobody could fill).
  for (std::uint64_t k = commit + 1; k < std::min(lowest, op + 1); ++k) {
    if (nacks_for(k) >= nack_quorum) {
      op = k - 1;
      break;
    }
  }
  for (std::uint64_t k = std::max(commit + 1, lowest); k <= op; ++k) {
    auto it = canonical.find(k);
    const bool chained = it != canonical.end() && (k == lowest || !canonical.contains(k - 1) ||
                                                   canonical.at(k - 1).checksum == it->second.parent);
    std::size_t holders = 0;
    std::size_t nacks = 0;
    if (chained) {
      nacks = nacks_for(k);  // the members that do not hold k at all
      for (const suffix& sfx : suffixes) {
        auto h = sfx.held.find(k);
        if (h == sfx.held.end()) {
          // counted above
        } else if (h->second.second == dvc_unverified) {
          // cannot tell: neither
        } else if (h->second.first != it->second.checksum) {
          ++nacks;  // a different op k: it never held this one
        } else if (h->second.second == dvc_present) {
          ++holders;
        } else if (h->second.second == dvc_missing) {
          ++nacks;
        }
      }
    }
    if (!chained || (holders == 0 && nacks >= nack_quorum)) {
      op = k - 1;
      break;
    }
  }
  canonical.erase(canonical.upper_bound(op), canonical.end());
  commit = std::min(commit, op);
  commit_max_ = std::max(commit_max_, commit);
  install_log(canonical, op, out);
  become_normal(out);
}

void replica::install_log(const std::map<std::uint64_t, header>& headers, std::uint64_t op, std::vector<effect>&) {
  // What we hold above the commit point is suspect now, unless the new log confirms it (by header, or by chaining
  // down from a header it has).
  for (auto it = log_.upper_bound(commit_min_); it != log_.end(); ++it) {
    it->second.verified = false;
  }
  for (const auto& [k, h] : headers) {
    if (k > op) {
      break;
    }
    auto it = log_.find(k);
    if (k <= commit_min_) {
      RILL_ASSERT(it == log_.end() || it->second.h.checksum == h.checksum,
                  "the new view's log differs at op {}, which this replica applied", k);
      continue;
    }
    if (it != log_.end() && it->second.h.checksum == h.checksum) {
      it->second.verified = true;
    } else {
      log_[k] = entry{h, false, false, false, true};
      bodies_.erase(k);
    }
  }
  log_.erase(log_.upper_bound(std::max(op, commit_min_)), log_.end());
  bodies_.erase(bodies_.upper_bound(op), bodies_.end());
  reads_.erase(reads_.upper_bound(op), reads_.end());
  op_ = std::max(op, commit_min_);
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->first <= op_ && it->first > commit_min_) {
      verify_down_from(it->first);
    }
  }
  // The suffix that persists with the log view: the chained run ending at op.
  view_headers_.clear();
  for (auto it = log_.find(op_); it != log_.end() && it->first > 0;) {
    view_headers_.insert(view_headers_.begin(), it->second.h);
    if (view_headers_.size() > options_.pipeline_max) {
      break;
    }
    auto prev = log_.find(it->first - 1);
    if (prev == log_.end() || prev->second.h.checksum != it->second.h.parent) {
      break;
    }
    it = prev;
  }
}

void replica::become_normal(std::vector<effect>& out) {
  log_view_ = view_;
  status_ = status::normal;
  voted_ = false;
  vote_view_ = view_t(0);
  primary_seen_ = ticks_;
  dvcs_.clear();
  pipeline_.clear();
  if (is_primary()) {
    for (auto it = log_.upper_bound(commit_max_); it != log_.end(); ++it) {
      pipeline_.push_back(pipeline_entry{it->second.h, it->second.durable ? bit(options_.replica) : 0u});
    }
    heartbeat_due_ = ticks_;
    resend_due_ = ticks_;
    broadcast(make_start_view(), out);
  }
  persist(out);
  commit_journal(out);
  if (is_primary()) {
    commit_pipeline(out);
  }
}

message replica::make_start_view() const {
  message sv = make(command::start_view);
  sv.h.log_view = view_.value();
  sv.h.op = op_;
  sv.h.commit = commit_max_;
  sv.body = encode_headers(suffix_headers(true));
  seal(sv);
  return sv;
}

void replica::on_start_view(const message& m, std::vector<effect>& out) {
  const view_t v(m.h.view);
  if (m.h.replica != primary_of_view(v) || v < view_ || (v == view_ && status_ == status::normal)) {
    return;
  }
  auto headers = decode_headers(m.body);
  if (!headers) {
    return;
  }
  std::map<std::uint64_t, header> map;
  for (const header& h : *headers) {
    map.emplace(h.op, h);
  }
  if (m.h.op < commit_min_) {
    return;  // cannot be: the new view's log holds everything committed
  }
  if (v > view_) {
    view_ = v;
    svc_votes_.erase(svc_votes_.begin(), svc_votes_.upper_bound(v.value()));
  }
  pipeline_.clear();
  request_queue_.clear();
  dvcs_.clear();
  install_log(map, m.h.op, out);
  commit_max_ = std::max(commit_max_, std::min(m.h.commit, op_));
  become_normal(out);  // persists; prepare_oks follow once the view is durable (on_persist_done)
}

void replica::ask_for_start_view(view_t v, std::vector<effect>& out) {
  message r = make(command::request_start_view);
  r.h.view = v.value();
  seal(r);
  out.push_back(send_effect{primary_of_view(v), std::move(r)});  // a request, not an adoption: nothing to persist
}

void replica::on_request_start_view(const message& m, std::vector<effect>& out) {
  if (status_ == status::normal && is_primary() && m.h.view == view_.value()) {
    send(m.h.replica, make_start_view(), out);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Repair

void replica::repair(std::vector<effect>& out) {
  if (status_ != status::normal || options_.replica_count == 1) {
    return;
  }
  std::size_t budget = repair_requests_per_tick;
  auto peer = [&]() -> replica_t {
    if (!is_primary() && rng_.below(2) == 0) {
      return primary_of_view(view_);  // half the time the primary, else anyone (the primary may lack it too)
    }
    replica_t r = static_cast<replica_t>(rng_.below(options_.replica_count - 1));
    return r >= options_.replica ? static_cast<replica_t>(r + 1) : r;
  };
  // Behind, and repair has not moved the apply for a while: what we need may be gone from the others' journals
  // (overwritten after their checkpoints). Ask a peer for its checkpoint.
  if (commit_min_ < commit_max_ && ticks_ - apply_progress_ > options_.sync_stall_ticks && ticks_ >= sync_due_) {
    sync_due_ = ticks_ + options_.resend_ticks;
    message r = make(command::request_sync);
    r.h.op = commit_min_;
    seal(r);
    send(peer(), std::move(r), out);
  }
  // Headers: gaps under op_, and (a backup that missed prepares) ops up to the known commit.
  const std::uint64_t top = std::max(op_, commit_max_);
  std::uint64_t k = commit_min_ + 1;
  auto known = [&](std::uint64_t op) {
    auto it = log_.find(op);
    return it != log_.end() && it->second.verified;
  };
  while (k <= top && budget > 0) {
    if (known(k)) {
      ++k;
      continue;
    }
    std::uint64_t hi = k;
    while (hi + 1 <= top && !known(hi + 1) && hi - k + 1 < headers_per_reply_max) {
      ++hi;
    }
    message r = make(command::request_headers);
    r.h.op = k;
    r.h.commit = hi;
    seal(r);
    send(peer(), std::move(r), out);
    --budget;
    k = hi + 1;
  }
  // Bodies: headers we hold without a durable prepare.
  for (auto it = log_.upper_bound(commit_min_); it != log_.end() && budget > 0; ++it) {
    entry& e = it->second;
    if (e.durable || e.writing || !e.verified || !writable(it->first)) {
      continue;
    }
    if (const message* body = cached(it->first, e.h.checksum)) {
      e.writing = true;
      out.push_back(write_effect{*body});
      continue;
    }
    message r = make(command::request_prepare);
    r.h.op = it->first;
    r.h.context = e.h.checksum;
    seal(r);
    send(peer(), std::move(r), out);
    --budget;
  }
}

void replica::on_request_headers(const message& m, std::vector<effect>& out) {
  if (status_ != status::normal || m.h.commit < m.h.op) {
    return;
  }
  std::vector<header> hs;
  for (auto it = log_.lower_bound(m.h.op); it != log_.end() && it->first <= m.h.commit; ++it) {
    if (hs.size() >= headers_per_reply_max) {
      break;
    }
    if (it->second.verified) {
      hs.push_back(it->second.h);
    }
  }
  if (hs.empty()) {
    return;
  }
  message r = make(command::headers);
  r.body = encode_headers(hs);
  seal(r);
  send(m.h.replica, std::move(r), out);
}

void replica::on_headers(const message& m, std::vector<effect>& out) {
  auto hs = decode_headers(m.body);
  if (!hs) {
    return;
  }
  // Headers from the current primary are the current view's log; anyone else's must chain to what we trust.
  const bool trusted =
      status_ == status::normal && m.h.view == view_.value() && m.h.replica == primary_of_view(view_) && !is_primary();
  std::sort(hs->begin(), hs->end(), [](const header& a, const header& b) { return a.op > b.op; });
  for (const header& h : *hs) {
    accept_header(h, trusted);
  }
  repair(out);
}

bool replica::accept_header(const header& h, bool trusted) {
  if (h.op <= commit_min_ || h.cmd != command::prepare || h.cluster != options_.cluster) {
    return false;
  }
  auto it = log_.find(h.op);
  if (it != log_.end() && it->second.verified && it->second.h.checksum == h.checksum) {
    return true;
  }
  bool verified = trusted;
  if (auto next = log_.find(h.op + 1);
      next != log_.end() && next->second.verified && next->second.h.parent == h.checksum) {
    verified = true;
  }
  if (commit_checksum_.first == h.op && commit_checksum_.second == h.checksum) {
    verified = true;
  }
  if (!verified) {
    return false;
  }
  if (it != log_.end() && it->second.h.checksum == h.checksum) {
    it->second.verified = true;  // what we held is confirmed: its body need not be fetched
  } else {
    bodies_.erase(h.op);
    reads_.erase(h.op);
    log_[h.op] = entry{h, false, false, false, true};
  }
  op_ = std::max(op_, h.op);
  verify_down_from(h.op);
  return true;
}

void replica::verify_down_from(std::uint64_t op) {
  // The entry at op is on the log: its parent checksum confirms the entry below it, and so on down, until a gap,
  // an entry already confirmed, or the applied prefix. An entry that is not the parent named is stale: dropped.
  auto it = log_.find(op);
  while (it != log_.end() && it->first > 0) {
    const std::uint64_t below = it->first - 1;
    auto prev = log_.find(below);
    if (prev == log_.end()) {
      return;
    }
    if (prev->second.h.checksum != it->second.h.parent) {
      RILL_ASSERT(below > commit_min_, "applied op {} is not the parent of op {} on the log", below, it->first);
      bodies_.erase(below);
      reads_.erase(below);
      log_.erase(prev);
      return;
    }
    if (below <= commit_min_ || prev->second.verified) {
      return;
    }
    prev->second.verified = true;
    it = prev;
  }
}

void replica::on_request_prepare(const message& m, std::vector<effect>& out) {
  auto it = log_.find(m.h.op);
  if (it == log_.end() || it->second.h.checksum != m.h.context || m.h.op == 0) {
    return;
  }
  if (const message* body = cached(m.h.op, m.h.context)) {
    send(m.h.replica, *body, out);
    return;
  }
  if (it->second.durable) {
    read_prepare(m.h.op, out);
    reads_.at(m.h.op).requesters.insert(m.h.replica);
  }
}

void replica::read_prepare(std::uint64_t op, std::vector<effect>& out) {
  const header& h = log_.at(op).h;
  auto [it, inserted] = reads_.try_emplace(op);
  if (inserted || it->second.checksum != h.checksum) {
    it->second = pending_read{};
    it->second.checksum = h.checksum;
    out.push_back(read_effect{op, h.checksum});
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Checkpoints and state transfer

namespace {
constexpr std::uint32_t checkpoint_magic = 0x43505352;  // "RSPC"
}  // namespace

// The bytes of a checkpoint: magic, u32 zero, u64 length of the client table, the client table, then the state
// machine's snapshot (the rest).
std::vector<std::byte> replica::encode_checkpoint() const {
  std::vector<std::byte> out(16);
  store_le<std::uint32_t>(out.data(), checkpoint_magic);
  clients_.encode(out);
  store_le<std::uint64_t>(out.data() + 8, out.size() - 16);
  const auto sm = sm_.snapshot();
  out.insert(out.end(), sm.begin(), sm.end());
  return out;
}

bool replica::restore_checkpoint(std::span<const std::byte> bytes) {
  return consensus::restore_checkpoint(bytes, clients_, sm_);
}

bool restore_checkpoint(std::span<const std::byte> bytes, client_table& clients, state_machine& sm) {
  if (bytes.size() < 16 || load_le<std::uint32_t>(bytes.data()) != checkpoint_magic) {
    return false;
  }
  const std::uint64_t table = load_le<std::uint64_t>(bytes.data() + 8);
  if (table > bytes.size() - 16) {
    return false;
  }
  client_table restored = clients;  // (its limit; the sessions are replaced)
  if (!restored.restore(bytes.subspan(16, table)) || !sm.restore(bytes.subspan(16 + table))) {
    return false;  // (sm.restore leaves the state machine as it was when it fails)
  }
  clients = std::move(restored);
  return true;
}

bool replica::writable(std::uint64_t op) const noexcept {
  return journal_slots_ == 0 || op <= durable_.checkpoint.op() + journal_slots_;
}

void replica::maybe_checkpoint(std::vector<effect>& out) {
  if (checkpoint_interval_ == 0 || checkpoint_writing_ || checkpoint_ != durable_.checkpoint) {
    return;  // one at a time, and only once the previous one is named by the superblock (its region is then free)
  }
  const std::uint64_t base = checkpoint_.op();
  if (commit_min_ <= base || (commit_min_ < base + checkpoint_interval_ && !checkpoint_soon_)) {
    return;
  }
  auto it = log_.find(commit_min_);
  RILL_ASSERT(it != log_.end(), "no header at the applied op {}", commit_min_);
  checkpoint_effect c;
  c.slot = static_cast<std::uint8_t>(base == 0 && durable_.checkpoint.size == 0 ? 1 : 1 - durable_.checkpoint.slot);
  c.at = it->second.h;
  c.bytes = encode_checkpoint();
  checkpoint_writing_ = checkpoint_effect{c.slot, c.at, {}};
  checkpoint_writing_size_ = c.bytes.size();
  checkpoint_writing_checksum_ = checksum_of(c.bytes, checkpoint_checksum_domain);
  if (options_.replica_count > 1) {
    checkpoint_writing_->bytes = c.bytes;  // kept to serve state transfer once durable (alone, nobody asks)
  }
  checkpoint_soon_ = false;
  out.push_back(std::move(c));
}

void replica::on_checkpoint_done(std::uint8_t slot, std::uint64_t op, bool ok, std::vector<effect>& out) {
  if (!checkpoint_writing_ || checkpoint_writing_->slot != slot || checkpoint_writing_->at.op != op) {
    return;
  }
  checkpoint_effect c = std::move(*checkpoint_writing_);
  checkpoint_writing_.reset();
  if (!ok) {
    checkpoint_soon_ = true;  // the next tick tries again (at the op applied by then)
    return;
  }
  checkpoint_.at = c.at;
  checkpoint_.slot = c.slot;
  checkpoint_.size = checkpoint_writing_size_;
  checkpoint_.checksum = checkpoint_writing_checksum_;
  checkpoint_bytes_ = std::move(c.bytes);
  persist(out);  // the superblock names it; the journal's window moves once that is durable
}

void replica::on_request_sync(const message& m, std::vector<effect>& out) {
  if (checkpoint_.op() <= m.h.op || checkpoint_bytes_.empty()) {
    return;  // nothing newer than what it has
  }
  message r = make(command::sync);
  r.h.op = checkpoint_.op();
  r.h.commit = commit_max_;
  r.body.resize(header::encoded_size);
  encode_header(checkpoint_.at, r.body.data());
  r.body.insert(r.body.end(), checkpoint_bytes_.begin(), checkpoint_bytes_.end());
  seal(r);
  send(m.h.replica, std::move(r), out);
}

void replica::on_sync(const message& m, std::vector<effect>& out) {
  // Only in normal status (a view change settles the log first), and only a checkpoint ahead of what we applied.
  if (status_ != status::normal || m.h.op <= commit_min_ || m.body.size() < header::encoded_size) {
    return;
  }
  const auto body = std::span<const std::byte>(m.body);
  auto at = decode_header(body.first(header::encoded_size));
  if (!at || at->cmd != command::prepare || at->op != m.h.op || at->cluster != options_.cluster) {
    return;
  }
  if (auto it = log_.find(at->op); it != log_.end() && it->second.verified && it->second.h.checksum != at->checksum) {
    return;  // not the op we know to be on the log: a peer's checkpoint is always of a committed op
  }
  if (!restore_checkpoint(body.subspan(header::encoded_size))) {
    return;
  }
  // The checkpoint replaces everything up to its op: the applied prefix jumps to it.
  const std::uint64_t c = at->op;
  commit_min_ = c;
  commit_max_ = std::max({commit_max_, c, std::min(m.h.commit, std::max(op_, c))});
  op_ = std::max(op_, c);
  log_.erase(log_.begin(), log_.lower_bound(c));
  log_[c] = entry{*at, false, false, false, true};
  if (auto next = log_.find(c + 1); next != log_.end() && next->second.h.parent != at->checksum) {
    bodies_.erase(c + 1);
    log_.erase(next);  // does not chain onto the checkpoint: stale (repair fetches the right one)
  }
  bodies_.erase(bodies_.begin(), bodies_.upper_bound(c));
  reads_.erase(reads_.begin(), reads_.upper_bound(c));
  while (!pipeline_.empty() && pipeline_.front().h.op <= c) {
    pipeline_.pop_front();  // committed: the checkpoint is of an applied op
  }
  apply_progress_ = ticks_;
  checkpoint_soon_ = true;  // make it ours: a restart then starts from it, and the journal's window moves
  out.push_back(installed_effect{*at});
  maybe_checkpoint(out);
  commit_journal(out);
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
  s.view_headers =
      log_view_ == durable_.log_view && status_ == status::view_change ? durable_.view_headers : view_headers_;
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
  RILL_ASSERT(s.view >= durable_.view && s.log_view >= durable_.log_view, "the persisted view would go back");
  RILL_ASSERT(s.checkpoint.op() >= durable_.checkpoint.op(), "the persisted checkpoint would go back");
  persisting_ = s;
  out.push_back(persist_effect{std::move(s)});
}

void replica::send(replica_t to, message m, std::vector<effect>& out) {
  RILL_ASSERT(to != options_.replica && to < options_.replica_count);
  const bool view_durable = m.h.view <= durable_.view.value();
  const bool log_view_durable = m.h.cmd != command::start_view || m.h.log_view <= durable_.log_view.value();
  if ((view_durable && log_view_durable) || bugs_.advertise_before_persist || m.h.cmd == command::prepare) {
    out.push_back(send_effect{to, std::move(m)});
  } else {
    deferred_.push_back(send_effect{to, std::move(m)});
  }
}

void replica::broadcast(const message& m, std::vector<effect>& out) {
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
  message m;
  m.h.cmd = c;
  m.h.cluster = options_.cluster;
  m.h.view = view_.value();
  m.h.replica = options_.replica;
  return m;
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers

void replica::heard_from_primary() {
  primary_seen_ = ticks_;
  voted_ = false;  // the primary is alive after all: stop voting against it
  vote_view_ = view_t(0);
}

bool replica::is_primary() const noexcept {
  return primary_of_view(view_) == options_.replica;
}

replica_t replica::primary_of_view(view_t v) const noexcept {
  return primary_of(v, options_.replica_count);
}

std::uint32_t replica::jitter(std::uint32_t ticks) {
  return ticks + static_cast<std::uint32_t>(rng_.below(ticks / 2 + 1));
}

const message* replica::cached(std::uint64_t op, const checksum_t& checksum) const {
  auto it = bodies_.find(op);
  return it != bodies_.end() && it->second.h.checksum == checksum ? &it->second : nullptr;
}

std::size_t replica::count(std::uint32_t bits) const noexcept {
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
  return out;
}

const header* replica::header_at(std::uint64_t op) const {
  auto it = log_.find(op);
  return it == log_.end() ? nullptr : &it->second.h;
}

}  // namespace rill::consensus
