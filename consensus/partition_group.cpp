// partition_group: one node's replica of a replicated partition, and the sessions it submits through (see the
// header).
#include "consensus/partition_group.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"
#include "storage/meta_entry_format.h"

namespace rill::consensus {

using storage::errc;
using storage::make_unexpected;

namespace {
// segments' body when it carries batches: u32 count (little-endian), count .meta payloads, then the batches. Its
// header's `client` holds flags: 1 reached (nothing further of ops <= the op asked), 2 the log starts past the
// offset asked for, at `commit` (transfer_chunk::starts_at; no batches).
constexpr std::size_t meta_payload_bytes = storage::meta_entry_format::payload_bytes;

std::vector<std::byte> encode_chunk(const transfer_chunk& c) {
  std::vector<std::byte> out(4 + c.metas.size() * meta_payload_bytes + c.batches.size());
  store_le<std::uint32_t>(out.data(), static_cast<std::uint32_t>(c.metas.size()));
  std::byte* at = out.data() + 4;
  for (const auto& m : c.metas) {
    std::copy(m.payload.begin(), m.payload.end(), at);
    at += meta_payload_bytes;
  }
  std::copy(c.batches.begin(), c.batches.end(), at);
  return out;
}

// A segments message that refuses: `request` 1, the reason as its body; sealed.
void refusal_into(message& r, std::string_view why) {
  r.h.request = 1;
  r.body.resize(why.size());
  std::memcpy(r.body.data(), why.data(), why.size());
  seal(r);
}

constexpr std::uint32_t chunk_reached = 1;
constexpr std::uint32_t chunk_starts_later = 2;

expected<transfer_chunk> decode_chunk(std::span<const std::byte> body, const header& h) {
  if (body.size() < 4) {
    return make_unexpected(errc::corrupt_data, "state transfer: a segments message without its count");
  }
  const std::uint64_t count = load_le<std::uint32_t>(body.data());
  if (count * meta_payload_bytes > body.size() - 4) {
    return make_unexpected(errc::corrupt_data,
                           fmt::format("state transfer: {} batches named in {} bytes", count, body.size()));
  }
  transfer_chunk c;
  c.reached = (h.client & chunk_reached) != 0;
  if ((h.client & chunk_starts_later) != 0) {
    if (h.commit > static_cast<std::uint64_t>(INT64_MAX) || count != 0) {
      return make_unexpected(errc::corrupt_data, "state transfer: a log start out of range, or with batches");
    }
    c.starts_at = static_cast<std::int64_t>(h.commit);
  }
  c.metas.resize(count);
  const std::byte* at = body.data() + 4;
  for (auto& m : c.metas) {
    std::copy(at, at + meta_payload_bytes, m.payload.begin());
    at += meta_payload_bytes;
  }
  c.batches.assign(at, body.data() + body.size());
  return c;
}
}  // namespace

// Replica index -> the member's node, tagged with the group id.
class partition_group::replica_transport final : public transport {
 public:
  replica_transport(host_transport& net, group_t group, const std::vector<node_t>& members)
      : net_(net), group_(group), members_(members) {}
  void send(replica_t to, message m) override {
    RILL_ASSERT(to < members_.size(), "a message for replica {} of {}", to, members_.size());
    net_.send(members_[to], group_, std::move(m));
  }

 private:
  host_transport& net_;
  group_t group_;
  const std::vector<node_t>& members_;
};

partition_group::partition_group(partition_group_options o, host_transport& net, partition_machine::wall_clock now_ms,
                                 const clock& clk)
    : options_(std::move(o)),
      net_(net),
      clk_(clk),
      machine_(options_.machine, std::move(now_ms)),
      rng_(options_.seed) {}

task<expected<std::unique_ptr<partition_group>>> partition_group::open(
    storage::io::engine& e, storage::buffer_pool& pool, const clock& clk, storage::log_reporter& reporter,
    std::string dir, std::string log_dir, partition_group_options o, host_transport& net,
    partition_machine::wall_clock now_ms, std::function<void()> committed) {
  RILL_ASSERT(o.group.value() != 0, "group 0 is the metadata group");
  const auto self = std::find(o.members.begin(), o.members.end(), o.self);
  RILL_ASSERT(self != o.members.end(), "node {} is no member of partition group {}", o.self.value(), o.group.value());
  if (o.members.empty() || o.members.size() > replicas_max) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("a partition group of {} members: allowed is 1 "
                                                                  "to {}",
                                                                  o.members.size(), replicas_max));
  }
  if (o.sessions_max == 0 || o.sessions_max > o.replica.clients_max) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("{} sessions per node: allowed is 1 to the client table's {}", o.sessions_max,
                                          o.replica.clients_max));
  }
  const auto index = static_cast<replica_t>(self - o.members.begin());
  std::unique_ptr<partition_group> g(new partition_group(o, net, std::move(now_ms), clk));
  g->committed_ = std::move(committed);
  vsr_state initial;
  initial.cluster = o.group.value();
  initial.replica = index;
  initial.replica_count = static_cast<std::uint8_t>(o.members.size());
  initial.recovering = o.recovering;
  initial.incarnation = std::min(o.incarnation, incarnation_max);
  recovered_state r;
  const std::string where = dir;
  RILL_CO_TRY(storage, co_await partition_storage::open(e, pool, clk, reporter, std::move(dir), std::move(log_dir),
                                                        o.storage, initial, r));
  g->storage_ = std::move(storage);
  // A replica formatted to recover never starts as a new group's replica: its group ran before it.
  r.formatted = r.formatted && !r.state.recovering;
  if (auto checked = check_recovered_checkpoint(r, o.replica.clients_max, g->machine_, where); !checked) {
    co_await g->storage_->close();
    co_return rill::unexpected(checked.error());
  }
  replica_options ro = o.replica;
  ro.cluster = o.group.value();
  ro.replica = index;
  ro.replica_count = static_cast<std::uint8_t>(o.members.size());
  ro.sync_bytes_max = o.storage.files.snapshot_bytes_max;
  ro.seed = o.seed;
  ro.heartbeats_by_host = false;
  ro.apply_durable_only = true;  // what the replica applies is in the log (partition_storage)
  g->transport_ = std::make_unique<replica_transport>(net, o.group, g->options_.members);
  g->acked_.assign(o.members.size(), 0);
  g->hand_over_wait_ = o.hand_over_ticks;
  g->transfer_peer_ = static_cast<replica_t>((index + 1) % o.members.size());
  partition_group* raw = g.get();
  driver_hooks hooks;
  hooks.reply = [raw](message m) { raw->on_reply(std::move(m)); };
  hooks.applied = [raw](const header&) {
    if (raw->committed_) {
      raw->committed_();
    }
  };
  hooks.installed = hooks.applied;
  hooks.fenced = [raw](const error& cause) {
    if (!raw->fenced_) {
      raw->fenced_ = error(make_error_code(errc::fenced),
                           fmt::format("partition group {}: its replica stopped at a storage failure: {}",
                                       raw->options_.group.value(), cause.message()));
    }
    raw->fail_all(*raw->fenced_);
  };
  g->driver_ = std::make_unique<driver>(ro, g->machine_, std::move(r), *g->storage_,
                                        o.members.size() > 1 ? g->transport_.get() : nullptr, std::move(hooks));
  co_return g;
}

partition_group::~partition_group() {
  RILL_ASSERT(waiters_.empty() && queue_.empty(), "a partition group destroyed with submits in flight");
}

std::vector<replica_t> partition_group::lagging() const {
  std::vector<replica_t> out;
  if (!primary_view_ || !primary()) {
    return out;
  }
  const std::uint64_t op = replica().op().value();
  for (replica_t r = 0; r < acked_.size(); ++r) {
    if (r == replica().index() || acked_[r] >= op) {
      continue;
    }
    // Since when op acked_[r] + 1 has been held here (the first entry at or above it), or since leading.
    auto since = op_since_.lower_bound(acked_[r] + 1);
    const std::uint64_t waited_from = std::max(led_since_, since == op_since_.end() ? ticks_ : since->second);
    if (ticks_ - waited_from >= lag_ticks) {
      out.push_back(r);
    }
  }
  return out;
}

bool partition_group::primary() const {
  const auto& r = replica();
  return r.is_primary() && r.status() == status::normal && !r.recovering() && !fenced_ && !closed_;
}

std::optional<std::chrono::milliseconds> partition_group::silenced() const {
  if (options_.silence_ms == 0 || !primary()) {
    return std::nullopt;
  }
  const auto heard = replica().quorum_heard_tick();
  if (!heard || tick_times_.empty()) {
    return std::nullopt;  // (a leadership not yet a tick old)
  }
  if (*heard == 0) {
    // Nothing heard from a quorum in this view yet (a new primary, for the first heartbeat's round trip): serves
    // nothing. How long it has led unheard, at most as far back as the ticks kept.
    return std::chrono::duration_cast<std::chrono::milliseconds>(clk_.monotonic() - tick_times_.front().second);
  }
  // When that tick was: the time of the first kept tick at or after it (a tick older than every kept one was at
  // least as long ago as the oldest kept), so the silence is never overstated.
  const auto now = clk_.monotonic();
  const auto it = std::lower_bound(tick_times_.begin(), tick_times_.end(), *heard,
                                   [](const auto& kept, std::uint64_t tick) { return kept.first < tick; });
  const std::chrono::nanoseconds at = it == tick_times_.end() ? now : it->second;
  const auto unheard = std::chrono::duration_cast<std::chrono::milliseconds>(now - at);
  if (unheard.count() <= static_cast<std::int64_t>(options_.silence_ms)) {
    return std::nullopt;
  }
  return unheard;
}

node_t partition_group::primary_node() const {
  return options_.members[primary_of(replica().view(), options_.members.size())];
}

void partition_group::on_message(const message& m) {
  if (fenced_ || closed_) {
    return;  // (the driver may not know of a fence the log's state transfer caused)
  }
  // Requests come from this node's sessions only; replies and evictions go to them only.
  if (m.h.cmd == command::request || m.h.cmd == command::reply || m.h.cmd == command::eviction) {
    return;
  }
  if (m.h.cmd == command::request_segments || m.h.cmd == command::segments) {
    if (m.h.cluster != options_.group.value() || m.h.replica >= options_.members.size() ||
        m.h.replica == replica().index()) {
      return;
    }
    if (m.h.cmd == command::request_segments) {
      serve_segments(m);
    } else {
      on_segments(m);
    }
    return;
  }
  if ((m.h.cmd == command::prepare_ok || m.h.cmd == command::do_view_change) && m.h.replica < acked_.size() &&
      m.h.view == replica().view().value()) {
    acked_[m.h.replica] = std::max(acked_[m.h.replica], m.h.op);
    if (m.h.cmd == command::prepare_ok && m.h.replica == 0) {
      preferred_ok_ = true;  // live evidence, not only a do_view_change's (which may count ops it cannot vouch for)
    }
  }
  driver_->on_message(m);
}

void partition_group::tick() {
  ++ticks_;
  if (fenced_ || closed_) {
    return;
  }
  driver_->on_tick();
  if (fenced_ || closed_) {
    return;
  }
  if (options_.silence_ms > 0) {
    tick_times_.emplace_back(replica().ticks(), clk_.monotonic());
    const auto kept = std::max<std::uint64_t>(64, 2 * std::uint64_t{options_.replica.primary_timeout_ticks});
    while (tick_times_.size() > kept) {
      tick_times_.pop_front();
    }
  }
  if (const rill::error* why = storage_->log().fencing_error(); why != nullptr) {
    // Fenced outside a write (a roll by age, retention) while none waited: the replica stops like at any storage
    // failure (the writes that waited failed with it: partition_storage), and the owner reopens it from its files.
    fenced_ = error(make_error_code(errc::fenced),
                    fmt::format("partition group {}: its log stopped: {}", options_.group.value(), why->message()));
    fail_all(*fenced_);
    return;
  }
  follow_view();
  maybe_probe();
  maybe_settle_settings();
  maybe_hand_over();
  const auto waiters = waiters_;  // a failed waiter resumes at once and leaves the list
  for (waiter* w : waiters) {
    if (!w->answer && !w->failed && ticks_ - w->started_at >= options_.submit_timeout_ticks) {
      w->failed = error(make_error_code(errc::unavailable),
                        fmt::format("the partition group committed nothing within {} ticks (no quorum of its "
                                    "replicas reachable?); the write may still be made",
                                    options_.submit_timeout_ticks));
      w->done.set();
    }
  }
  // State transfer: a peer silent too long is given up (the transfer asks the next one); a target starts one.
  if (asking_ != nullptr && !asking_->got && ticks_ - asking_->started_at >= options_.transfer_timeout_ticks) {
    asking_->got = make_unexpected(
        errc::unavailable, fmt::format("state transfer: node {} did not answer within {} ticks",
                                       options_.members[asking_->peer].value(), options_.transfer_timeout_ticks));
    asking_->done.set();
  }
  if (!transferring_ && ticks_ >= transfer_due_ && storage_->transfer_target() && options_.members.size() > 1) {
    start_transfer();
  }
  maybe_sync_idle();
}

void partition_group::maybe_sync_idle() {
  if (storage_->writes_waiting() > 0 || in_flight_ > 0) {
    last_write_tick_ = ticks_;
    return;
  }
  if (idle_syncing_ || ticks_ - last_write_tick_ < idle_sync_ticks || !storage_->headers_unsynced()) {
    return;
  }
  idle_syncing_ = true;
  task_started();
  storage_->sync_headers([this](expected<void> r) {
    idle_syncing_ = false;
    if (!r && !fenced_ && !closed_) {
      // A failed fdatasync: what the journal wrote may be lost, as at any write's failure. The driver stops at once
      // (a write whose own sync a concurrent failure hid must not be acknowledged; the journal fails every later
      // one too), and the owner reopens the replica from its files.
      driver_->halt();
      fenced_ = error(make_error_code(errc::fenced), fmt::format("partition group {}: syncing its journal failed: {}",
                                                                 options_.group.value(), r.error().message()));
      fail_all(*fenced_);
    }
    task_ended();
  });
}

void partition_group::maybe_probe() {
  if (!primary() || probing_ || in_flight_ > 0 || ticks_ - probed_at_ < lag_ticks || ticks_ - led_since_ < lag_ticks) {
    return;
  }
  const std::uint64_t op = replica().op().value();
  bool wanted = false;
  for (replica_t r = 0; r < acked_.size(); ++r) {
    // Behind the newest op; or, for the preferred replica, silent in this leadership (a hand-over needs a
    // prepare_ok of its own, which a group that has committed nothing yet never got).
    const bool behind = acked_[r] < op || (r == 0 && !preferred_ok_ && options_.hand_over_ticks > 0);
    if (r != replica().index() && behind && (!options_.reachable || options_.reachable(options_.members[r]))) {
      wanted = true;
    }
  }
  if (!wanted) {
    return;
  }
  probed_at_ = ticks_;
  probing_ = true;
  ++probes_;
  task_started();
  spawn(submit(operation_probe, {}), [this](expected<partition_submitted>) {
    probing_ = false;
    task_ended();
  });
}

void partition_group::maybe_settle_settings() {
  const bool settled = machine_.settled() && machine_.settings() == options_.settings;
  if (!primary() || settling_ || settled || ticks_ - led_since_ < lag_ticks || ticks_ - settled_at_ < lag_ticks ||
      replica().commit_min() != replica().op() || !machine_.accepts(options_.settings)) {
    return;
  }
  settled_at_ = ticks_;
  settling_ = true;
  task_started();
  spawn(submit(operation_partition_settings, partition_machine::settings_request(options_.settings)),
        [this](expected<partition_submitted>) {
          settling_ = false;
          task_ended();
        });
}

void partition_group::maybe_hand_over() {
  const auto n = options_.members.size();
  if (options_.hand_over_ticks == 0 || !primary() || replica().index() == 0 || n < 2) {
    preferred_current_since_.reset();
    return;
  }
  // Kept up: it acknowledged everything committed (prepare_ok or do_view_change in this view), and a prepare_ok
  // of its own came in this leadership (a probe gets one from an idle partition). One that acknowledged nothing
  // (recovering after a lost disk: silent until caught up) is never handed the group.
  if (!preferred_ok_ || acked_[0] == 0 || acked_[0] < replica().commit_max().value()) {
    preferred_current_since_.reset();
    return;
  }
  if (!preferred_current_since_) {
    preferred_current_since_ = ticks_;
  }
  if (ticks_ - *preferred_current_since_ < hand_over_wait_ || ticks_ - led_since_ < hand_over_wait_) {
    return;
  }
  const std::uint64_t v = replica().view().value();
  const view_t target(static_cast<std::uint32_t>(v + (n - v % n)));  // the next view replica 0 leads
  RILL_ASSERT(primary_of(target, n) == 0);
  ++hand_overs_;
  preferred_current_since_.reset();
  // Until replica 0 is seen leading, each further hand-over waits twice as long (one whose view change failed, to a
  // replica that died meanwhile or cannot hear its peers, is not repeated at the same pace).
  hand_over_wait_ = std::min<std::uint64_t>(hand_over_wait_ * 2, std::uint64_t{options_.hand_over_ticks} * 64);
  driver_->hand_over(target);
}

void partition_group::next_transfer_peer() {
  do {
    transfer_peer_ = static_cast<replica_t>((transfer_peer_ + 1) % options_.members.size());
  } while (transfer_peer_ == replica().index() && options_.members.size() > 1);
}

void partition_group::task_started() {
  ++tasks_;
  tasks_idle_.reset();
}

void partition_group::task_ended() {
  RILL_ASSERT(tasks_ > 0);
  if (--tasks_ == 0) {
    tasks_idle_.set();
  }
}

void partition_group::start_transfer() {
  RILL_ASSERT(!transferring_);
  transferring_ = true;
  task_started();
  // The primary of this replica's view first: it has committed at least what it sent (unless it is this one). After
  // a failure, the next member (next_transfer_peer), until a copy succeeds.
  if (const auto p = primary_of(replica().view(), options_.members.size());
      transfer_failures_ == 0 && p != replica().index()) {
    transfer_peer_ = p;
  }
  auto source = [this](offset_t from, std::uint64_t through_op) { return ask_segments(from, through_op); };
  spawn(storage_->transfer(std::move(source)), [this](expected<bool> r) {
    transferring_ = false;
    if (!r && storage_->log().fenced() && !fenced_ && !closed_) {
      // The copy failed in this log (not at the peer): the partition is fenced like at any storage failure, and
      // the owner reopens it from its files.
      fenced_ = error(make_error_code(errc::fenced),
                      fmt::format("partition group {}: its state transfer stopped at a storage failure: {}",
                                  options_.group.value(), r.error().message()));
      fail_all(*fenced_);
    } else if (!r) {
      ++transfer_failures_;
      next_transfer_peer();
      transfer_due_ = ticks_ + transfer_retry_ticks;  // (every peer may refuse for now: not one request a tick)
    } else if (*r && !closed_ && !fenced_) {
      transfer_failures_ = 0;
      driver_->poke();  // a checkpoint held for the log may go now
      if (committed_) {
        committed_();  // the log's committed offset moved over the copied batches
      }
    }
    task_ended();
  });
}

task<expected<transfer_chunk>> partition_group::ask_segments(offset_t from, std::uint64_t through_op) {
  if (closed_ || fenced_) {
    co_return make_unexpected(errc::closed, "the partition is closing");
  }
  RILL_ASSERT(asking_ == nullptr, "a second state transfer request at once");
  segments_ask a;
  a.nonce = rng_.next() | 1u;
  a.peer = transfer_peer_;
  a.started_at = ticks_;
  message m;
  m.h.cmd = command::request_segments;
  m.h.cluster = options_.group.value();
  m.h.replica = replica().index();
  m.h.view = replica().view().value();
  m.h.op = through_op;
  m.h.commit = static_cast<std::uint64_t>(from.value());
  m.h.timestamp = a.nonce;
  seal(m);
  asking_ = &a;
  transport_->send(a.peer, std::move(m));
  if (!a.got) {
    co_await a.done.wait();
  }
  asking_ = nullptr;
  co_return std::move(*a.got);
}

void partition_group::on_segments(const message& m) {
  if (asking_ == nullptr || asking_->got || m.h.timestamp != asking_->nonce || m.h.replica != asking_->peer) {
    return;  // late, or not ours
  }
  if (m.h.request != 0) {
    asking_->got = make_unexpected(
        errc::unavailable, fmt::format("state transfer: node {} refused: {}", options_.members[m.h.replica].value(),
                                       std::string_view(reinterpret_cast<const char*>(m.body.data()), m.body.size())));
  } else {
    asking_->got = decode_chunk(m.body, m.h);
  }
  asking_->done.set();
}

void partition_group::serve_segments(const message& m) {
  message r;
  r.h.cmd = command::segments;
  r.h.cluster = options_.group.value();
  r.h.replica = replica().index();
  r.h.view = replica().view().value();
  r.h.op = m.h.op;
  r.h.commit = m.h.commit;
  r.h.timestamp = m.h.timestamp;
  const replica_t to = m.h.replica;
  auto refuse = [&](std::string_view why) {
    refusal_into(r, why);
    transport_->send(to, std::move(r));
  };
  if (serving_ >= options_.transfer_serves_max) {
    refuse(fmt::format("already serving {} state transfers", serving_));
    return;
  }
  if (m.h.commit > static_cast<std::uint64_t>(INT64_MAX)) {
    refuse(fmt::format("offset {} is out of range", m.h.commit));
    return;
  }
  ++serving_;
  task_started();
  spawn(storage_->read_for_transfer(offset_t(static_cast<std::int64_t>(m.h.commit)), m.h.op,
                                    options_.storage.transfer_bytes_max),
        [this, r = std::move(r), to](expected<transfer_chunk> chunk) mutable {
          --serving_;
          if (!closed_ && !fenced_) {
            if (chunk) {
              r.h.client = (chunk->reached ? chunk_reached : 0) | (chunk->starts_at ? chunk_starts_later : 0);
              if (chunk->starts_at) {
                r.h.commit = static_cast<std::uint64_t>(*chunk->starts_at);
              }
              r.body = encode_chunk(*chunk);
              seal(r);
            } else {
              refusal_into(r, chunk.error().message());
            }
            transport_->send(to, std::move(r));
          }
          task_ended();
        });
}

void partition_group::follow_view() {
  // A view this replica no longer leads: nothing sent in it will be answered here.
  const bool leads = primary();
  if (primary_view_ && (!leads || replica().view() != *primary_view_)) {
    primary_view_.reset();
    fail_all(error(make_error_code(errc::unavailable),
                   fmt::format("the partition's primary changed (now node {} in view {}); retry there",
                               primary_node().value(), replica().view().value())));
  }
  if (!leads) {
    std::fill(acked_.begin(), acked_.end(), 0);
    preferred_ok_ = false;
    if (replica().status() == status::normal && primary_of(replica().view(), options_.members.size()) == 0) {
      hand_over_wait_ = options_.hand_over_ticks;  // the preferred replica leads: hand-overs start afresh
    }
    return;
  }
  if (!primary_view_) {
    // Leading anew: what the backups hold is learnt again (their do_view_change votes already counted).
    led_since_ = ticks_;
    op_since_.clear();
    preferred_ok_ = false;
  }
  primary_view_ = replica().view();
  const std::uint64_t op = replica().op().value();
  acked_[replica().index()] = op;
  if (op_since_.empty() || op_since_.rbegin()->first < op) {
    op_since_.emplace(op, ticks_);
  }
  const std::uint64_t floor = *std::min_element(acked_.begin(), acked_.end());
  // Keep the entry at or below the lowest acknowledgement + 1: it says since when that op has waited.
  while (op_since_.size() > 1 && std::next(op_since_.begin())->first <= floor + 1) {
    op_since_.erase(op_since_.begin());
  }
}

void partition_group::fail_all(const error& e) {
  const auto waiters = waiters_;
  for (waiter* w : waiters) {
    if (!w->answer && !w->failed) {
      w->failed = e;
      w->done.set();
    }
  }
  // Their request numbers may still commit: a session is never used again after a request it gave up on.
  sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(), [](const auto& s) { return !s->busy; }),
                  sessions_.end());
  for (auto& s : sessions_) {
    s->registered = false;  // busy ones are dropped as their submits end (release())
  }
  const auto queued = queue_;
  for (async_event* q : queued) {
    q->set();  // each rechecks primary() and fails
  }
}

void partition_group::on_reply(message m) {
  for (waiter* w : waiters_) {
    if (w->client != m.h.client || w->request != m.h.request || w->answer || w->failed) {
      continue;
    }
    // A produce may come back as the answered op prepare() made of it.
    if (m.h.cmd == command::reply && m.h.operation != w->operation &&
        !(w->operation == operation_produce_batch && m.h.operation == operation_produce_answered)) {
      continue;
    }
    w->answer = std::move(m);
    w->done.set();
    return;
  }
}

task<expected<message>> partition_group::request(session& s, std::uint8_t operation, std::vector<std::byte> body) {
  message m;
  m.h.cmd = command::request;
  m.h.cluster = options_.group.value();
  m.h.client = s.client;
  m.h.request = operation == operation_register ? 0 : s.request + 1;
  m.h.operation = operation;
  m.body = std::move(body);
  seal(m);
  waiter w;
  w.client = s.client;
  w.request = m.h.request;
  w.operation = operation;
  w.started_at = ticks_;
  follow_view();  // a view changed since the last tick fails what was sent in it, not this request
  waiters_.push_back(&w);
  driver_->on_message(m);
  if (!w.answer && !w.failed) {
    co_await w.done.wait();
  }
  std::erase(waiters_, &w);
  if (w.failed) {
    co_return rill::unexpected(*w.failed);
  }
  RILL_ASSERT(w.answer.has_value());
  if (w.answer->h.cmd == command::eviction) {
    co_return make_unexpected(errc::unavailable, "this node's session with the partition group was evicted; retry");
  }
  s.request = w.request;
  co_return std::move(*w.answer);
}

task<expected<partition_group::session*>> partition_group::acquire() {
  for (;;) {
    if (fenced_) {
      co_return rill::unexpected(*fenced_);
    }
    if (closed_) {
      co_return make_unexpected(errc::closed, "the partition is closing");
    }
    if (!primary()) {
      co_return make_unexpected(errc::unavailable,
                                fmt::format("not the partition's primary: node {} is", primary_node().value()));
    }
    for (auto& s : sessions_) {
      if (!s->busy && s->registered) {
        s->busy = true;
        co_return s.get();
      }
    }
    if (sessions_.size() < options_.sessions_max) {
      auto s = std::make_unique<session>();
      // 48 bits drawn at each session, the node's id above them: never 0, never an earlier session's.
      s->client = (std::uint64_t{options_.self.value()} << 48) | ((rng_.next() & ((std::uint64_t{1} << 48) - 1)) | 1u);
      s->busy = true;
      session* raw = s.get();
      sessions_.push_back(std::move(s));
      auto registered = co_await request(*raw, operation_register, {});
      if (!registered) {
        release(raw);
        co_return rill::unexpected(registered.error());
      }
      raw->registered = true;
      co_return raw;
    }
    if (queue_.size() >= options_.submits_waiting_max) {
      co_return make_unexpected(
          errc::overloaded, fmt::format("{} writes already wait for this partition's {} sessions; retry", queue_.size(),
                                        options_.sessions_max));
    }
    async_event turn;
    queue_.push_back(&turn);
    co_await turn.wait();
    std::erase(queue_, &turn);
  }
}

void partition_group::release(session* s) {
  s->busy = false;
  if (!s->registered) {
    std::erase_if(sessions_, [s](const auto& x) { return x.get() == s; });
  }
  if (!queue_.empty()) {
    queue_.front()->set();
  }
}

task<expected<partition_submitted>> partition_group::submit(std::uint8_t operation, std::vector<std::byte> body) {
  if (operation < operation_user_min) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("operation {} is reserved", operation));
  }
  // A batch's bytes go to the partition log (its journal slot holds the header alone): the topic's
  // max_message_bytes, checked where the batch was validated, bounds it; any other operation is kept whole.
  if (operation != operation_produce_batch && body.size() > body_bytes_max()) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("a write of {} bytes; the partition group's journal takes at most {}",
                                          body.size(), body_bytes_max()));
  }
  ++in_flight_;
  auto s = co_await acquire();
  if (!s) {
    --in_flight_;
    co_return rill::unexpected(s.error());
  }
  auto done = co_await request(**s, operation, std::move(body));
  if (!done) {
    (*s)->registered = false;  // its request number may still commit: never reused
  }
  release(*s);
  --in_flight_;
  if (!done) {
    co_return rill::unexpected(done.error());
  }
  co_return partition_submitted{std::move(done->body), done->h.op};
}

task<expected<storage::retention_result>> partition_group::enforce_retention() {
  if (closed_) {
    co_return make_unexpected(errc::closed, "the partition is closing");
  }
  if (fenced_) {
    co_return rill::unexpected(*fenced_);
  }
  task_started();
  auto r = co_await storage_->enforce_retention();
  task_ended();
  co_return r;
}

task<expected<void>> partition_group::close() {
  closed_ = true;
  fail_all(error(make_error_code(errc::closed), "the partition is closing; the write may still be made"));
  if (asking_ != nullptr && !asking_->got) {
    asking_->got = make_unexpected(errc::closed, "the partition is closing");
    asking_->done.set();
  }
  if (tasks_ > 0) {
    co_await tasks_idle_.wait();
  }
  // Writes waiting in storage (for a gap below them that repair would have filled) are answered now: the driver's
  // completions for them come only from here, and settle() waits for them.
  storage_->stop_writes();
  co_await driver_->settle();
  RILL_ASSERT(driver_->in_flight() == 0);
  co_return co_await storage_->close();
}

}  // namespace rill::consensus
