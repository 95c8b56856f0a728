// replica_repair.cpp: how a replica fills the holes in its log and keeps its journal bounded: repair of missing
// or unconfirmed headers (request_headers, headers) and prepares (request_prepare), reads back from the journal,
// checkpoints (the state machine and client table as bytes, written to snapshot.bin), and state transfer of a
// peer's checkpoint (request_sync, sync). Normal operation is in replica.cpp, the view change in
// replica_view_change.cpp.
//
// Relies on: a header is taken from a peer only when it is trusted (the current primary's) or chains to a header
// this replica trusts, so nothing unverified is ever applied; the journal never overwrites an op above the durable
// checkpoint (writable()); one checkpoint is written at a time, into the region the superblock does not name.
#include "consensus/replica.h"

#include <algorithm>

#include "base/assert.h"
#include "base/endian.h"

namespace rill::consensus {
namespace {
constexpr std::size_t headers_per_reply_max = 64;
static_assert(headers_per_reply_max >= 1);
static_assert(headers_per_reply_max <= view_headers_max, "a headers reply is no bigger than a suffix may be");
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Repair

void replica::repair(std::vector<effect>& out) {
  if (status_ != status::normal || options_.replica_count == 1) {
    return;
  }
  RILL_ASSERT(commit_min_ <= commit_max_);
  std::size_t budget = repair_requests_per_tick;
  auto peer = [&]() -> replica_t {
    if (!is_primary() && rng_.below(2) == 0) {
      return primary_of_view(view_);  // half the time the primary, else anyone (the primary may lack it too)
    }
    replica_t r = static_cast<replica_t>(rng_.below(options_.replica_count - 1));
    return r >= options_.replica ? static_cast<replica_t>(r + 1) : r;
  };
  // Behind, and repair has not moved the apply for a while: what we need may be gone from the others' journals
  // (overwritten after their checkpoints). Ask a peer for its checkpoint, a chunk at a time.
  if (sync_ && sync_->at.op <= commit_min_) {
    sync_.reset();  // repair got there first
  }
  if (sync_) {
    if (ticks_ - sync_->asked >= options_.resend_ticks) {
      if (sync_->resends >= sync_chunk_resends_max) {
        sync_.reset();  // that peer has stopped answering, or no longer holds this checkpoint: start again
        sync_due_ = ticks_;
      } else {
        ++sync_->resends;
        ask_sync_chunk(out);
      }
    }
  } else if (commit_min_ < commit_max_ && ticks_ - apply_progress_ > options_.sync_stall_ticks && ticks_ >= sync_due_) {
    sync_due_ = ticks_ + options_.resend_ticks;
    message r = make(command::request_sync);
    r.h.op = commit_min_;  // context zero, offset 0: any checkpoint above this op, from its start
    seal(r);
    send(peer(), std::move(r), out);
  }
  // What is in flight: answered, committed past, or old enough to ask again, it goes.
  const auto expired = [&](std::uint64_t asked) { return ticks_ - asked >= repair_timeout_ticks(); };
  auto range_known = [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t op = lo; op <= hi; ++op) {
      auto it = log_.find(op);
      if (it == log_.end() || !it->second.verified) {
        return false;
      }
    }
    return true;
  };
  std::erase_if(headers_asked_, [&](const auto& kv) {
    return kv.second.first <= commit_min_ || expired(kv.second.second) || range_known(kv.first, kv.second.first);
  });
  std::erase_if(prepares_asked_, [&](const auto& kv) {
    auto e = log_.find(kv.first);
    return kv.first <= commit_min_ || expired(kv.second) || e == log_.end() || e->second.durable || e->second.writing;
  });
  // Headers: gaps under op_, and (a backup that missed prepares) ops up to the known commit.
  const std::uint64_t top = std::max(op_, commit_max_);
  std::uint64_t k = commit_min_ + 1;
  auto known = [&](std::uint64_t op) {
    auto it = log_.find(op);
    return it != log_.end() && it->second.verified;
  };
  while (k <= top && budget > 0 && headers_asked_.size() < repair_headers_in_flight_max) {
    if (known(k)) {
      ++k;
      continue;
    }
    if (auto asked = headers_asked_.find(k); asked != headers_asked_.end()) {
      k = asked->second.first + 1;  // on its way
      continue;
    }
    std::uint64_t hi = k;
    while (hi + 1 <= top && !known(hi + 1) && !headers_asked_.contains(hi + 1) && hi - k + 1 < headers_per_reply_max) {
      ++hi;
    }
    RILL_ASSERT(k > commit_min_);
    RILL_ASSERT(hi - k < headers_per_reply_max, "a request for more headers than one reply holds");
    message r = make(command::request_headers);
    r.h.op = k;
    r.h.commit = hi;
    seal(r);
    send(peer(), std::move(r), out);
    headers_asked_[k] = {hi, ticks_};
    --budget;
    k = hi + 1;
  }
  // Bodies: headers we hold without a durable prepare.
  for (auto it = log_.upper_bound(commit_min_);
       it != log_.end() && budget > 0 && prepares_asked_.size() < repair_prepares_in_flight_max; ++it) {
    entry& e = it->second;
    if (e.durable || e.writing || !e.verified || !writable(it->first) || prepares_asked_.contains(it->first)) {
      continue;
    }
    if (const message* body = cached(it->first, e.h.checksum)) {
      RILL_ASSERT(body->h.op == it->first);
      e.writing = true;
      out.push_back(write_effect{*body});
      continue;
    }
    message r = make(command::request_prepare);
    r.h.op = it->first;
    r.h.context = e.h.checksum;
    seal(r);
    send(peer(), std::move(r), out);
    prepares_asked_[it->first] = ticks_;
    --budget;
  }
  RILL_ASSERT(headers_asked_.size() <= repair_headers_in_flight_max);
  RILL_ASSERT(prepares_asked_.size() <= repair_prepares_in_flight_max);
}

void replica::on_request_headers(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::request_headers);
  RILL_ASSERT(m.h.replica != options_.replica);
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
  RILL_ASSERT(hs.size() <= headers_per_reply_max);
  message r = make(command::headers);
  r.body = encode_headers(hs);
  seal(r);
  send(m.h.replica, std::move(r), out);
}

void replica::on_headers(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::headers);
  RILL_ASSERT(m.h.replica != options_.replica);
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
  RILL_ASSERT(h.op > 0);
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
  RILL_ASSERT(log_.at(h.op).verified);
  verify_down_from(h.op);
  return true;
}

void replica::verify_down_from(std::uint64_t op) {
  // The entry at op is on the log: its parent checksum confirms the entry below it, and so on down, until a gap,
  // an entry already confirmed, or the applied prefix. An entry that is not the parent named is stale: dropped.
  RILL_ASSERT(op >= commit_min_, "verifying down from op {} below the applied op {}", op, commit_min_);
  auto it = log_.find(op);
  if (it != log_.end()) {
    RILL_ASSERT(it->second.verified, "verifying down from op {}, which is not verified itself", op);
  }
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
  RILL_ASSERT(m.h.cmd == command::request_prepare);
  RILL_ASSERT(m.h.replica != options_.replica);
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
  RILL_ASSERT(op > 0, "op 0 (the root) is never read");
  RILL_ASSERT(log_.contains(op), "a read of op {}, which is not held", op);
  RILL_ASSERT(log_.at(op).durable, "a read of op {}, which is not durable", op);
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
  RILL_ASSERT(out.size() >= 16);
  RILL_ASSERT(load_le<std::uint64_t>(out.data() + 8) <= out.size() - 16);
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
  RILL_ASSERT(op > 0);
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
  RILL_ASSERT(commit_min_ > checkpoint_.op());
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
  RILL_ASSERT(c.slot <= 1);
  if (durable_.checkpoint.size != 0) {
    RILL_ASSERT(c.slot != durable_.checkpoint.slot, "a checkpoint written over the one the superblock names");
  }
  out.push_back(std::move(c));
}

void replica::on_checkpoint_done(std::uint8_t slot, std::uint64_t op, bool ok, std::vector<effect>& out) {
  const invariants_on_return check{*this};
  RILL_ASSERT(slot <= 1, "snapshot.bin has two regions; slot {}", slot);
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
  RILL_ASSERT(checkpoint_.op() <= commit_min_);
  RILL_ASSERT(checkpoint_.op() > durable_.checkpoint.op());
  persist(out);  // the superblock names it; the journal's window moves once that is durable
}

void replica::on_request_sync(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::request_sync);
  RILL_ASSERT(m.h.replica != options_.replica);
  if (checkpoint_.op() <= m.h.op || checkpoint_bytes_.empty()) {
    return;  // nothing newer than what it has
  }
  RILL_ASSERT(checkpoint_bytes_.size() == checkpoint_.size);
  // A chunk of the checkpoint it is fetching; from the start of ours when that is not the one we hold (we wrote a
  // newer one since: it starts again on that).
  const bool same = m.h.context == checkpoint_.checksum;
  const std::uint64_t offset = same ? m.h.timestamp : 0;
  if (offset >= checkpoint_bytes_.size()) {
    return;  // (a request past the end is malformed: the receiver asks only for what it lacks)
  }
  const std::uint64_t chunk = std::min<std::uint64_t>(options_.sync_chunk_bytes, checkpoint_bytes_.size() - offset);
  message r = make(command::sync);
  r.h.op = checkpoint_.op();
  r.h.commit = commit_max_;
  r.h.context = checkpoint_.checksum;
  r.h.request = checkpoint_bytes_.size();
  r.h.timestamp = offset;
  r.body.resize(header::encoded_size + chunk);
  encode_header(checkpoint_.at, r.body.data());
  std::copy_n(checkpoint_bytes_.begin() + static_cast<std::ptrdiff_t>(offset), chunk,
              r.body.begin() + header::encoded_size);
  seal(r);
  send(m.h.replica, std::move(r), out);
}

void replica::ask_sync_chunk(std::vector<effect>& out) {
  RILL_ASSERT(sync_);
  RILL_ASSERT(sync_->bytes.size() < sync_->size);
  sync_->asked = ticks_;
  message r = make(command::request_sync);
  r.h.op = commit_min_;
  r.h.context = sync_->checksum;
  r.h.timestamp = sync_->bytes.size();
  seal(r);
  send(sync_->from, std::move(r), out);
}

void replica::on_sync(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::sync);
  RILL_ASSERT(m.h.replica != options_.replica);
  // Only in normal status (a view change settles the log first), and only a checkpoint ahead of what we applied.
  if (status_ != status::normal || m.h.op <= commit_min_ || m.body.size() <= header::encoded_size) {
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
  const std::uint64_t size = m.h.request;
  const std::uint64_t offset = m.h.timestamp;
  const auto chunk = body.subspan(header::encoded_size);
  if (size < 16 || size > options_.sync_bytes_max || offset > size || chunk.size() > size - offset) {
    return;  // malformed, or bigger than this replica takes
  }
  if (offset == 0) {
    // The start of a checkpoint: taken unless one at least as new is already coming.
    if (sync_ && sync_->at.op >= at->op) {
      return;
    }
    sync_ = sync_transfer{*at, m.h.context, size, m.h.replica, {}, ticks_, 0};
    sync_->bytes.reserve(size);
  } else if (!sync_ || sync_->at != *at || sync_->checksum != m.h.context || sync_->size != size ||
             sync_->from != m.h.replica || sync_->bytes.size() != offset) {
    return;  // a chunk of another transfer, a duplicate, or out of order
  }
  sync_->bytes.insert(sync_->bytes.end(), chunk.begin(), chunk.end());
  sync_->resends = 0;
  apply_progress_ = ticks_;  // the transfer is progress: repair does not start another
  if (sync_->bytes.size() < sync_->size) {
    ask_sync_chunk(out);
    return;
  }
  sync_transfer t = std::move(*sync_);
  sync_.reset();
  sync_due_ = ticks_;
  if (checksum_of(t.bytes, checkpoint_checksum_domain) != t.checksum) {
    return;  // damaged on the way, or the sender's bytes changed under the same name: ask again
  }
  install_sync(t, m, out);
}

void replica::install_sync(const sync_transfer& t, const message& last, std::vector<effect>& out) {
  RILL_ASSERT(t.bytes.size() == t.size);
  RILL_ASSERT(t.at.op > commit_min_);
  if (!restore_checkpoint(t.bytes)) {
    return;
  }
  // The checkpoint replaces everything up to its op: the applied prefix jumps to it.
  const header& at = t.at;
  const std::uint64_t c = at.op;
  commit_min_ = c;
  // The sender's commit number names ops of its log. A peer in our view or an older one can only have committed
  // ops that every later view's log holds, so it applies to ours; a peer in a newer view may have committed ops
  // that replaced our uncommitted suffix, so from it only the checkpoint itself counts.
  const std::uint64_t peer_commit = last.h.view <= view_.value() ? last.h.commit : c;
  commit_max_ = std::max({commit_max_, c, std::min(peer_commit, std::max(op_, c))});
  op_ = std::max(op_, c);
  log_.erase(log_.begin(), log_.lower_bound(c));
  log_[c] = entry{at, false, false, false, true};
  if (auto next = log_.find(c + 1); next != log_.end() && next->second.h.parent != at.checksum) {
    bodies_.erase(c + 1);
    log_.erase(next);  // does not chain onto the checkpoint: stale (repair fetches the right one)
  }
  bodies_.erase(bodies_.begin(), bodies_.upper_bound(c));
  reads_.erase(reads_.begin(), reads_.upper_bound(c));
  // A primary that fell behind its own backups (it was elected with a log above a checkpoint it had not applied):
  // what the checkpoint covers, and what the peer says is committed, leaves the pipeline; commit_journal applies
  // and answers it.
  while (!pipeline_.empty() && pipeline_.front().h.op <= commit_max_) {
    pipeline_.pop_front();
    commit_progress_ = ticks_;
  }
  RILL_ASSERT(commit_min_ <= commit_max_);
  RILL_ASSERT(commit_min_ <= op_);
  apply_progress_ = ticks_;
  checkpoint_soon_ = true;  // make it ours: a restart then starts from it, and the journal's window moves
  out.push_back(installed_effect{at});
  maybe_checkpoint(out);
  commit_journal(out);
}

// ---------------------------------------------------------------------------------------------------------------
// Recovery of a lost disk

bool replica::durable_through(std::uint64_t op) const {
  for (std::uint64_t k = checkpoint_.op() + 1; k <= op; ++k) {
    const auto it = log_.find(k);
    if (it == log_.end() || !it->second.durable || !it->second.verified) {
      return false;
    }
  }
  return true;
}

void replica::count_recovery_response(replica_t from, view_t v) {
  RILL_ASSERT(from != options_.replica);
  auto [it, fresh] = recovery_views_.emplace(from, v);
  if (!fresh) {
    it->second = std::max(it->second, v);
  }
}

void replica::on_recovery_response(const message& m) {
  RILL_ASSERT(m.h.cmd == command::recovery_response);
  if (recovering_ && m.h.timestamp == recovery_nonce_) {
    count_recovery_response(m.h.replica, view_t(m.h.view));
    incarnation_named_ = std::max(incarnation_named_, m.h.request);
  }
}

void replica::progress_recovery(std::vector<effect>& out) {
  RILL_ASSERT(recovering_);
  RILL_ASSERT(options_.replica_count > 1);
  if (recovery_target_ && view_ != recovery_view_) {
    recovery_target_.reset();  // a newer view: its log may differ from the head named; ask again
  }
  if (recovery_head_ && recovery_head_->first < view_) {
    recovery_head_.reset();  // a primary of a view we have left
  }
  if (!recovery_target_) {
    // Answers from more peers than can be outside a view-change quorum: one of them was in every quorum that formed
    // a view, so the highest view answered is at least every view in which something may have committed.
    const std::size_t needed = options_.replica_count - quorum_view_change(options_.replica_count) + 1;
    view_t highest{0};
    for (const auto& [r, v] : recovery_views_) {
      highest = std::max(highest, v);
    }
    if (recovery_views_.size() >= needed && recovery_head_ && recovery_head_->first >= highest &&
        recovery_head_->first == view_ && status_ == status::normal) {
      recovery_target_ = recovery_head_->second;
      recovery_view_ = view_;
    } else if (ticks_ % options_.resend_ticks == 0) {
      message probe = make(command::request_start_view);
      probe.h.view = view_.value();
      probe.h.timestamp = recovery_nonce_;
      seal(probe);
      for (replica_t r = 0; r < options_.replica_count; ++r) {
        if (r != options_.replica) {
          out.push_back(send_effect{r, probe});  // a request: nothing to persist first
        }
      }
    }
  }
  // Durable, not applied: the ops up to the head may wait for this replica's own acknowledgement to commit (the
  // others of a quorum may be down or behind), so waiting for their commit could wait forever.
  if (recovery_target_ && status_ == status::normal &&
      (durable_through(*recovery_target_) || bugs_.recovering_cleared_early)) {
    // Everything it could have acknowledged before the loss, and that may have committed, is durable here again.
    recovering_ = false;
    // An incarnation above every one its peers named for it (they drop what those said): persisted with the flag, so
    // its first vote carries it.
    if (!bugs_.stale_after_disk_loss) {
      incarnation_ = std::max(incarnation_, incarnation_named_ + 1);
      RILL_ASSERT(incarnation_ <= incarnation_max, "incarnation {} beyond the six bytes it is kept in", incarnation_);
    }
    persist(out);  // it votes once this is durable (silenced() reads the durable state)
  }
}

}  // namespace rill::consensus
