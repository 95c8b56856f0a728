// replica_view_change.cpp: the replica's view change: votes (start_view_change), the logs sent to the new
// primary (do_view_change) and the new log chosen from them, start_view, and a lagging replica's
// request_start_view. Normal operation is in replica.cpp, repair in replica_repair.cpp.
//
// Relies on: view_ only grows, and a replica enters a view (start_view_change, on_start_view) before anything
// carrying it is sent, which waits for it to be durable (send() defers); the do_view_changes of a quorum hold every
// committed op; the new log is taken from the highest log view, cut at the first op a nack quorum never had
// (it cannot have committed); what this replica applied is never replaced (install_log asserts it).
#include "consensus/replica.h"

#include <algorithm>

#include "base/assert.h"
#include "base/endian.h"

namespace rill::consensus {
namespace {
// do_view_change body: the headers, then one flag byte per header, then a u32 count of headers (at the end, so the
// headers decode with decode_headers after trimming).
// present: the body is durable here; missing: never had it (a nack); faulty: had it, lost it (not a nack);
// unverified: a header this replica cannot yet confirm is on the log (ignored).
enum dvc_flag : std::uint8_t { dvc_present = 0, dvc_missing = 1, dvc_faulty = 2, dvc_unverified = 3 };

// The most headers (and faulty slots) a do_view_change body may list: a suffix is at most pipeline_max + 1 headers.
constexpr std::uint32_t dvc_headers_max = 4096;
static_assert(dvc_headers_max >= pipeline_max_limit + 1, "a suffix always fits");

// The body: headers, one flag per header, the journal's slot count, the faulty slots, then two u32 counts (faulty
// slots, headers) at the very end.
std::vector<std::byte> encode_dvc_body(const std::vector<header>& headers, const std::vector<std::uint8_t>& flags,
                                       std::uint64_t slot_count, const std::set<std::uint64_t>& faulty_slots) {
  RILL_ASSERT(headers.size() == flags.size());
  RILL_ASSERT(headers.size() <= dvc_headers_max, "{} headers", headers.size());
  RILL_ASSERT(faulty_slots.size() <= dvc_headers_max, "{} faulty slots", faulty_slots.size());
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
  RILL_ASSERT(out.size() == headers.size() * (header::encoded_size + 1) + 8 + faulty_slots.size() * 8 + 8,
              "the layout decode_dvc_body expects");
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
  if (n > dvc_headers_max || f > dvc_headers_max ||
      body.size() != std::size_t{n} * (header::encoded_size + 1) + 8 + f * 8 + 8) {
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

// ---------------------------------------------------------------------------------------------------------------
// View change

void replica::vote_view_change(view_t v, std::vector<effect>& out) {
  RILL_ASSERT(v > view_, "a vote for view {} in view {}", v.value(), view_.value());
  if (options_.replica_count == 1 || silenced()) {
    return;  // (silenced: it lost its disk; the others elect without it)
  }
  v = std::max(v, vote_view_);  // keep voting for the highest view we joined
  const bool fresh = !voted_ || v != vote_view_ || (svc_votes_[v.value()] & bit(options_.replica)) == 0;
  vote_view_ = v;
  voted_ = true;
  svc_votes_[v.value()] |= bit(options_.replica);
  RILL_ASSERT(vote_view_ > view_);
  if (fresh || ticks_ % options_.resend_ticks == 0) {
    broadcast_vote(out);
  }
  count_view_change_votes(v, out);
}

void replica::broadcast_vote(std::vector<effect>& out) {
  RILL_ASSERT(voted_);
  message svc = make(command::start_view_change);
  svc.h.view = vote_view_.value();
  svc.h.log_view = log_view_.value();  // the newest view it was normal in (a peer still in an older one joins)
  svc.h.request = hand_over_view_ == vote_view_ ? hand_over_mark : 0;
  svc.h.timestamp = stamp();
  seal(svc);
  for (replica_t r = 0; r < options_.replica_count; ++r) {
    if (r != options_.replica) {
      out.push_back(send_effect{r, svc});  // a vote, not an adoption: nothing to persist first
    }
  }
}

void replica::hand_over(view_t target, std::vector<effect>& out) {
  const invariants_on_return check{*this};
  if (!is_primary() || status_ != status::normal || silenced() || target <= view_ || options_.replica_count == 1) {
    return;
  }
  hand_over_view_ = target;
  const bool cast_before = voted_ && vote_view_ >= target;  // vote_view_change sends a fresh vote only
  vote_view_change(target, out);
  if (cast_before) {
    broadcast_vote(out);  // a hand-over asked again: the earlier vote found no quorum
  }
}

void replica::on_start_view_change(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::start_view_change);
  RILL_ASSERT(m.h.replica < options_.replica_count);
  RILL_ASSERT(m.h.replica != options_.replica);
  const view_t v(m.h.view);
  if (v == view_ && status_ == status::view_change && !silenced()) {
    // The sender is still voting for the view we are changing to: echo our vote so that it can count a quorum. The
    // echo is a start_view_change too, and the sender may be in this view change already (then it echoes back):
    // at most one echo per peer per resend_ticks, or duplicated echoes multiply until they fill the network.
    if (ticks_ < echo_due_[m.h.replica]) {
      return;
    }
    echo_due_[m.h.replica] = ticks_ + options_.resend_ticks;
    message svc = make(command::start_view_change);
    svc.h.log_view = log_view_.value();
    svc.h.request = in_view_mark;
    svc.h.timestamp = stamp();
    seal(svc);
    out.push_back(send_effect{m.h.replica, std::move(svc)});
    return;
  }
  if (v <= view_) {
    return;
  }
  if (m.h.request == in_view_mark) {
    // The sender entered v: it counted a quorum of votes for v, as we would (start_view_change), and leads nobody
    // back to our view (crashed before v was durable, it rejoins from its peers' marks). Join it. Votes are not
    // adoptions: a voter that hears its primary again stops voting, but the vote it sent still counts where it arrived,
    // and so can a vote from a peer that has since restarted (or lost its disk, which forgets it). So a replica can
    // count a quorum, enter v alone and wait there for do_view_changes that never come, while the others stay normal in
    // the view it left, their primary alive: it would never take part again, and a peer recovering its disk, hearing
    // from it that v exists, waited for v's primary for ever (rill-sim --node seed 3954359542024638728). Joining costs
    // that group one view change; a replica cut off one way still forces none, as it enters no view without a quorum of
    // votes.
    start_view_change(v, out);
    return;
  }
  svc_votes_[v.value()] |= bit(m.h.replica);
  if (m.h.request == hand_over_mark && !voted_ && status_ == status::normal && m.h.log_view == view_.value() &&
      m.h.replica == primary_of(view_, options_.replica_count)) {
    // Our own primary hands the group over (hand_over): join its vote at once.
    vote_view_change(v, out);
    return;
  }
  if (!voted_ && m.h.log_view > view_.value()) {
    // The voter was normal in a view newer than ours: a quorum formed it without us, so our view is over (its
    // primary may be a replica that has since lost its disk and can lead nothing). Vote with it.
    vote_view_change(v, out);
    return;
  }
  if (voted_ && v > vote_view_) {
    vote_view_change(v, out);  // we want out of view_ too: join the highest vote rather than split the votes
    return;
  }
  count_view_change_votes(v, out);
}

void replica::count_view_change_votes(view_t v, std::vector<effect>& out) {
  RILL_ASSERT(options_.replica_count > 1);
  if (v > view_ && count(svc_votes_[v.value()]) >= quorum_view_change(options_.replica_count)) {
    start_view_change(v, out);
  }
}

void replica::start_view_change(view_t v, std::vector<effect>& out) {
  RILL_ASSERT(v > view_, "view change to view {} from view {}", v.value(), view_.value());
  RILL_ASSERT(options_.replica_count > 1, "alone, a replica never changes views");
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
  // Tell everyone (our vote for v, so the rest join), then our log to v's primary once v is durable. A replica
  // that lost its disk follows the others into v without a vote of its own.
  if (!silenced()) {
    message svc = make(command::start_view_change);
    svc.h.log_view = log_view_.value();
    svc.h.request = in_view_mark;
    svc.h.timestamp = stamp();
    seal(svc);
    for (replica_t r = 0; r < options_.replica_count; ++r) {
      if (r != options_.replica) {
        out.push_back(send_effect{r, svc});
      }
    }
  }
  RILL_ASSERT(view_ > log_view_);
  RILL_ASSERT(pipeline_.empty());
  persist(out);
  send_do_view_change(out);
}

std::vector<header> replica::suffix_headers(bool verified_only) const {
  std::vector<header> out;
  const std::uint64_t lo = op_ > options_.pipeline_max ? op_ - options_.pipeline_max : 1;
  RILL_ASSERT(lo >= 1, "the root (op 0) is in no suffix");
  for (auto it = log_.lower_bound(lo); it != log_.end(); ++it) {
    if (it->second.verified || !verified_only) {
      out.push_back(it->second.h);
    }
  }
  RILL_ASSERT(out.size() <= std::size_t{options_.pipeline_max} + 1, "a suffix of {} headers", out.size());
  return out;
}

void replica::send_do_view_change(std::vector<effect>& out) {
  if (status_ != status::view_change || log_view_ == view_ || silenced()) {
    return;  // (a restarted primary never leads its old view again: it may have lost prepares it sent; a replica
             // that lost its disk sends no log: its "never had it" may hide an op it acknowledged)
  }
  RILL_ASSERT(log_view_ < view_);
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
  dvc.h.timestamp = stamp();
  seal(dvc);
  if (primary_of_view(view_) == options_.replica) {
    dvcs_[options_.replica] = dvc;
    on_do_view_change(dvc, out);
  } else {
    send(primary_of_view(view_), std::move(dvc), out);
  }
}

void replica::on_do_view_change(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::do_view_change);
  RILL_ASSERT(m.h.replica < options_.replica_count);
  const view_t v(m.h.view);
  if (v < view_ || primary_of_view(v) != options_.replica || silenced()) {
    return;  // (silenced: it never leads a view before it has caught up; the view change times out to the next)
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
  RILL_ASSERT(status_ == status::view_change);
  RILL_ASSERT(v == view_);
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
  RILL_ASSERT(op >= commit_min_, "the new log ({}) cut below what we applied ({})", op, commit_min_);
  commit_max_ = std::max(commit_max_, commit);
  install_log(canonical, op, out);
  become_normal(out);
}

void replica::install_log(const std::map<std::uint64_t, header>& headers, std::uint64_t op, std::vector<effect>&) {
  RILL_ASSERT(op >= commit_min_, "a log of op {} installed over the applied op {}", op, commit_min_);
  RILL_ASSERT(pipeline_.empty(), "a new log under a pipeline");
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
  RILL_ASSERT(op_ >= commit_min_);
  RILL_ASSERT(log_.rbegin()->first <= op_);
  RILL_ASSERT(view_headers_.size() <= std::size_t{options_.pipeline_max} + 1);
  RILL_ASSERT(headers_chained(view_headers_), "the suffix persisted with the log view is not chained");
}

void replica::become_normal(std::vector<effect>& out) {
  RILL_ASSERT(view_ >= log_view_);
  if (!dvcs_.empty()) {
    RILL_ASSERT(is_primary(), "do_view_changes collected by a backup");
  }
  log_view_ = view_;
  status_ = status::normal;
  RILL_ASSERT(!(is_primary() && silenced()), "a replica that lost its disk leads view {}", view_.value());
  voted_ = false;
  vote_view_ = view_t(0);
  primary_seen_ = ticks_;
  dvcs_.clear();
  pipeline_.clear();
  view_head_ = op_;  // (a backup's too: applied_view_head())
  if (is_primary()) {
    for (auto it = log_.upper_bound(commit_max_); it != log_.end(); ++it) {
      pipeline_.push_back(pipeline_entry{it->second.h, it->second.durable ? bit(options_.replica) : 0u});
    }
    heartbeat_due_ = ticks_;
    resend_due_ = ticks_;
    RILL_ASSERT(pipeline_.size() <= options_.pipeline_max, "a new view with {} uncommitted ops", pipeline_.size());
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
  RILL_ASSERT(status_ == status::normal, "start_view for a view not yet begun");
  RILL_ASSERT(is_primary());
  return sv;
}

void replica::on_start_view(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::start_view);
  RILL_ASSERT(m.h.replica != options_.replica);
  const view_t v(m.h.view);
  // The answer to this incarnation's probe: made after the loss, its op is the primary's log head then.
  if (recovering_ && m.h.timestamp == recovery_nonce_ && m.h.replica == primary_of_view(v)) {
    count_recovery_response(m.h.replica, v);
    incarnation_named_ = std::max(incarnation_named_, m.h.request);
    if (!recovery_head_ || recovery_head_->first <= v) {
      recovery_head_ = {v, m.h.op};
    }
  }
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
  RILL_ASSERT(view_ == v);
  RILL_ASSERT(!is_primary());
  install_log(map, m.h.op, out);
  commit_max_ = std::max(commit_max_, std::min(m.h.commit, op_));
  become_normal(out);  // persists; prepare_oks follow once the view is durable (on_persist_done)
}

void replica::ask_for_start_view(view_t v, std::vector<effect>& out) {
  RILL_ASSERT(v > view_);
  if (primary_of_view(v) == options_.replica) {
    // Its own start_view is never missed, unless it led v before its disk was lost: then a later view (which the
    // others form without it) brings it back.
    RILL_ASSERT(durable_.recovering, "replica {} missed its own start_view of view {}", options_.replica, v.value());
    return;
  }
  message r = make(command::request_start_view);
  r.h.view = v.value();
  r.h.timestamp = recovering_ ? recovery_nonce_ : 0;  // echoed: the answer then names a log head after the loss
  seal(r);
  out.push_back(send_effect{primary_of_view(v), std::move(r)});  // a request, not an adoption: nothing to persist
}

void replica::on_request_start_view(const message& m, std::vector<effect>& out) {
  RILL_ASSERT(m.h.cmd == command::request_start_view);
  RILL_ASSERT(m.h.replica != options_.replica);
  if (m.h.timestamp != 0) {
    // A recovering replica's probe (timestamp: its nonce, echoed). A normal primary answers with its start_view,
    // for whatever view was asked; the others with their durable view. A replica recovering itself says nothing:
    // its view is not one the intersection argument may count. Either way the prober lost its disk: nothing it said
    // before counts any more (its votes, do_view_change, acknowledgements), nor will anything stamped with an
    // incarnation of it known here; the answer names the highest such incarnation (request), so that its next one
    // is above it.
    if (!bugs_.stale_after_disk_loss) {
      forget_peer(m.h.replica);
      peer_lost_through_[m.h.replica] = peer_incarnation_[m.h.replica];
    }
    if (silenced()) {
      return;
    }
    if (status_ == status::normal && is_primary()) {
      message sv = make_start_view();
      sv.h.timestamp = m.h.timestamp;
      sv.h.request = peer_incarnation_[m.h.replica];
      seal(sv);
      send(m.h.replica, std::move(sv), out);
    } else {
      message r = make(command::recovery_response);
      r.h.view = durable_.view.value();
      r.h.log_view = durable_.log_view.value();
      r.h.timestamp = m.h.timestamp;
      r.h.request = peer_incarnation_[m.h.replica];
      seal(r);
      out.push_back(send_effect{m.h.replica, std::move(r)});  // carries only durable views: nothing to persist
    }
    return;
  }
  if (status_ == status::normal && is_primary() && m.h.view == view_.value()) {
    send(m.h.replica, make_start_view(), out);
  }
}

}  // namespace rill::consensus

namespace rill::consensus {

bool replica::ignore_stale_incarnation(const message& m) {
  RILL_ASSERT(m.h.replica < options_.replica_count);
  if (bugs_.stale_after_disk_loss) {
    return false;
  }
  const replica_t r = m.h.replica;
  const std::uint64_t i = m.h.timestamp;
  if (peer_lost_through_[r] && i <= *peer_lost_through_[r]) {
    return true;  // said by an incarnation from before the peer lost its disk (or by a build without incarnations)
  }
  if (i < peer_incarnation_[r]) {
    return true;  // an older incarnation's, overtaken by a newer one's
  }
  if (i > peer_incarnation_[r]) {
    if (peer_incarnation_[r] != 0) {
      forget_peer(r);  // what the older incarnation said goes with it
    }
    peer_incarnation_[r] = i;
    peer_lost_through_[r].reset();  // (a newer incarnation than every lost one: it counts)
  }
  return false;
}

void replica::forget_peer(replica_t r) {
  RILL_ASSERT(r < options_.replica_count);
  RILL_ASSERT(r != options_.replica);
  for (auto& [v, bits] : svc_votes_) {
    bits &= ~bit(r);
  }
  dvcs_.erase(r);
  for (auto& p : pipeline_) {
    p.ok &= ~bit(r);
  }
}

}  // namespace rill::consensus
