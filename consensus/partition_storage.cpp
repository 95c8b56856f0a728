// partition_storage: a partition group's journal of headers and its log of batches (see the header).
#include "consensus/partition_storage.h"

#include <algorithm>
#include <utility>

#include <fmt/core.h>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/record_batch_format.h"

namespace rill::consensus {
namespace {
using storage::errc;
using storage::make_unexpected;

// The offsets a stamped batch covers, from its header fields ([base, next)). The replica checked the body's
// checksum against the prepare; the log validates the batch whole when it appends it.
struct batch_span {
  std::int64_t base = -1;
  std::int64_t next = -1;
};
batch_span span_of(std::span<const std::byte> batch) {
  namespace f = storage::batch_format;
  if (batch.size() < f::header_bytes) {
    return {};
  }
  const auto base = load_be<std::int64_t>(batch.data() + f::base_offset_at);
  const auto delta = load_be<std::int32_t>(batch.data() + f::last_offset_delta_at);
  if (base < 0 || delta < 0) {
    return {};
  }
  return {base, base + delta + 1};
}

rill::unexpected superseded(std::uint64_t op, std::string_view why) {
  return make_unexpected(errc::superseded, fmt::format("the write of op {} was given up: {}", op, why));
}
}  // namespace

storage::batch_meta batch_meta_of(const header& h) {
  storage::batch_meta m;
  store_le<std::uint64_t>(m.payload.data(), h.op);
  store_le<std::uint64_t>(m.payload.data() + 8, h.checksum.low);
  store_le<std::uint64_t>(m.payload.data() + 16, h.checksum.high);
  return m;
}

batch_op batch_op_of(const storage::batch_meta& m) {
  return {load_le<std::uint64_t>(m.payload.data()),
          checksum_t{load_le<std::uint64_t>(m.payload.data() + 8), load_le<std::uint64_t>(m.payload.data() + 16)}};
}

struct partition_storage::pending {
  std::uint64_t id = 0;
  header h;
  std::vector<std::byte> body;  // a batch prepare's: kept until the write is answered (a cut may need it again)
  bool batch = false;
  bool journal_started = false;  // its journal half (a batch prepare's: once its batch goes to the log)
  bool journal_done = false;
  bool batch_done = false;  // its batch is in the log (always, for other prepares)
  std::function<void(expected<void>)> done;
};

struct partition_storage::placement {
  enum class kind { done, wait, cut, attach } what = kind::wait;
  std::uint64_t op = 0;  // cut: from this op on; attach: the op the batch follows (the base, or a logged batch)
  std::int64_t end = 0;  // attach: the log end after that op
};

// Counts one of this storage's own operations for close() while it lives, whoever destroys what first.
class partition_storage_own_op {
 public:
  partition_storage_own_op(std::size_t& count, async_event& idle, std::shared_ptr<bool> alive)
      : count_(&count), idle_(&idle), alive_(std::move(alive)) {
    ++*count_;
  }
  ~partition_storage_own_op() {
    if (*alive_) {
      RILL_ASSERT(*count_ > 0);
      if (--*count_ == 0) {
        idle_->set();
      }
    }
  }
  partition_storage_own_op(const partition_storage_own_op&) = delete;
  partition_storage_own_op& operator=(const partition_storage_own_op&) = delete;

 private:
  std::size_t* count_;
  async_event* idle_;
  std::shared_ptr<bool> alive_;
};

partition_storage::partition_storage(std::unique_ptr<journal_storage> files,
                                     std::unique_ptr<storage::partition_log> log, partition_storage_options o)
    : files_(std::move(files)),
      log_(std::move(log)),
      options_(std::move(o)),
      slot_count_(options_.files.journal.slot_count) {
  RILL_ASSERT(slot_count_ > 0);
}

partition_storage::~partition_storage() {
  *alive_ = false;
}

task<expected<std::unique_ptr<partition_storage>>> partition_storage::open(
    storage::io::engine& e, storage::buffer_pool& pool, const clock& clk, storage::log_reporter& reporter,
    std::string dir, std::string log_dir, partition_storage_options o, const vsr_state& initial,
    recovered_state& recovered) {
  if (o.batch_operation < operation_user_min) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("partition_storage batch_operation {}: a user operation ({} or more)",
                                          o.batch_operation, operation_user_min));
  }
  if (o.append_bytes_max == 0 || o.transfer_bytes_max == 0) {
    co_return make_unexpected(errc::invalid_argument,
                              "partition_storage append_bytes_max and transfer_bytes_max: 1 or more");
  }
  o.files.journal.detached_operation = o.batch_operation;
  RILL_CO_TRY(files, co_await journal_storage::open(e, dir, o.files, initial, recovered));
  o.log.auto_commit = false;
  o.log.config.durability = config::durability_mode::sync_before_ack;
  if (o.bug_append_unsynced) {
    // The deliberate bug (test only): appends complete once written, synced in the background, as a relaxed topic's.
    o.log.config.durability = config::durability_mode::every_ms;
  }
  if (auto made = co_await storage::make_dirs(e, log_dir); !made) {
    (void)co_await files->close();
    co_return rill::unexpected(std::move(made).error());
  }
  auto opened = co_await storage::partition_log::open(e, pool, clk, reporter, log_dir, o.log);
  if (!opened) {
    (void)co_await files->close();
    co_return rill::unexpected(std::move(opened).error());
  }
  std::unique_ptr<partition_storage> s(new partition_storage(std::move(files), std::move(*opened), std::move(o)));
  // The log may fence outside this storage's own operations (a roll by age, retention): every write waiting here
  // fails then too, so the driver fences and the owner reopens the replica (it waited for good before; the
  // simulator's failing fdatasyncs found it: a roll's sync failed and two writes never landed).
  s->log_->on_fenced([self = s.get(), alive = s->alive_] {
    if (*alive) {
      self->on_log_fenced();
    }
  });
  if (auto r = co_await s->recover(recovered); !r) {
    (void)co_await s->close();
    co_return rill::unexpected(std::move(r).error());
  }
  co_return s;
}

task<expected<void>> partition_storage::recover(recovered_state& recovered) {
  // 1. A tail of batches without .meta entries is an append the crash interrupted (the entries are synced before
  //    the batches): never acknowledged, never committed. Cut it.
  const auto metas = log_->metas(log_->log_start());
  std::int64_t meta_end = log_->log_start().value();
  if (!metas.empty()) {
    storage::read_request rq;
    rq.offset = metas.back().base_offset;
    rq.uncommitted = true;
    rq.max_records = 1;
    rq.max_bytes = 1;
    RILL_CO_TRY(last, co_await log_->read(rq));
    const auto views = last.batch_views();
    if (views.empty() || views.front().base_offset() != metas.back().base_offset) {
      co_return make_unexpected(errc::corrupt_data, fmt::format("{}: the batch of the last .meta entry (at {}) does "
                                                                "not read back",
                                                                log_->dir(), metas.back().base_offset.value()));
    }
    meta_end = views.front().next_offset().value();
  }
  if (meta_end < log_->log_end().value()) {
    if (meta_end < log_->committed().value()) {
      co_return make_unexpected(errc::corrupt_data,
                                fmt::format("{}: committed batch at {} without its op", log_->dir(), meta_end));
    }
    RILL_CO_TRY_VOID(co_await log_->truncate_after(offset_t(meta_end - 1)));
  }
  // 2. The index of the log's batches by op.
  for (std::size_t i = 0; i < metas.size(); ++i) {
    const batch_op b = batch_op_of(metas[i].meta);
    if (!index_.empty() && index_.rbegin()->first >= b.op) {
      co_return make_unexpected(errc::corrupt_data,
                                fmt::format("{}: the batch at {} has op {}, not above op {} before it", log_->dir(),
                                            metas[i].base_offset.value(), b.op, index_.rbegin()->first));
    }
    const std::int64_t end = i + 1 < metas.size() ? metas[i + 1].base_offset.value() : meta_end;
    RILL_ASSERT(end > metas[i].base_offset.value());
    index_[b.op] = logged{b.checksum, metas[i].base_offset.value(), end};
  }
  // 3. The committed base: the checkpoint (every batch up to it is in the log: checkpoints wait for the log), or the
  //    last batch below the log's persisted committed offset (a lower bound), whichever is later.
  const checkpoint_ref& cp = recovered.state.checkpoint;
  base_op_ = cp.op();
  base_checksum_ = cp.op() == 0 ? root_header(recovered.state.cluster).checksum : cp.at.checksum;
  base_end_ = log_->log_start().value();
  for (const auto& [op, b] : index_) {
    if (op <= cp.op() || b.end <= log_->committed().value()) {
      if (op > base_op_) {
        base_op_ = op;
        base_checksum_ = b.checksum;
      }
      base_end_ = b.end;
    }
  }
  if (base_end_ < log_->committed().value()) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: committed offset {} is not the end of a batch",
                                                              log_->dir(), log_->committed().value()));
  }
  log_->commit_to(offset_t(base_end_));
  checkpoint_op_ = cp.op();
  {
    // The index holds every batch of the log here (not yet pruned): the checkpoint's end is that of its last batch
    // at or below the checkpoint's op, or the log start.
    std::int64_t end = log_->log_start().value();
    for (const auto& [op, b] : index_) {
      if (op > cp.op()) {
        break;
      }
      end = b.end;
    }
    checkpoint_ends_.emplace_back(cp.op(), end);
  }
  // 4. A batch prepare's header without its batch is faulty: it may have been acknowledged (both halves were
  //    synced) and the batch lost since; never "never had it".
  std::vector<header> valid;
  valid.reserve(recovered.journal.size());
  for (const header& h : recovered.journal) {
    if (is_batch(h) && h.op > cp.op()) {
      auto it = index_.find(h.op);
      if (it == index_.end() || it->second.checksum != h.checksum) {
        recovered.faulty.push_back(h);
        continue;
      }
    }
    if (h.op > base_op_) {
      known_[h.op] = h;
    }
    valid.push_back(h);
  }
  recovered.journal = std::move(valid);
  prune();
  co_return expected<void>{};
}

// ---------------------------------------------------------------------------------------------------------------
// The replica's storage calls

void partition_storage::write(message prepare, std::function<void(expected<void>)> done) {
  RILL_ASSERT(prepare.h.cmd == command::prepare);
  RILL_ASSERT(prepare.h.op > 0, "op 0 is the root: never written");
  RILL_ASSERT(!closing_, "a write after close()");
  const std::uint64_t op = prepare.h.op;
  if (writes_.contains(op)) {
    answer(op, superseded(op, "the op was written again"));
  }
  if (failed_) {
    // (Only before the driver has taken the answers of the failure: it fences at the first.)
    answers_.push_back(
        [done = std::move(done)] { done(make_unexpected(errc::fenced, "the partition group's log failed earlier")); });
    pump();
    return;
  }
  known_[op] = prepare.h;
  auto p = std::make_unique<pending>();
  p->id = next_id_++;
  p->h = prepare.h;
  p->batch = is_batch(prepare.h);
  p->batch_done = !p->batch;
  p->done = std::move(done);
  message to_journal;
  to_journal.h = prepare.h;
  const bool batch = p->batch;
  if (batch) {
    p->body = std::move(prepare.body);  // the journal keeps the header alone (detached_operation)
  } else {
    to_journal.body = std::move(prepare.body);
  }
  writes_[op] = std::move(p);
  if (!batch) {
    start_journal(op, std::move(to_journal));
  }
  // A batch prepare's header goes to the journal only once its batch is durable in the log (do_append), so a crash
  // never leaves a header without its batch: recovery must count that faulty, and an op faulty on every replica
  // keeps a group in its view for good.
  pump();
}

void partition_storage::start_journal(std::uint64_t op, message m) {
  auto it = writes_.find(op);
  RILL_ASSERT(it != writes_.end());
  RILL_ASSERT(!it->second->journal_started, "op {}'s header written twice", op);
  it->second->journal_started = true;
  const std::uint64_t id = it->second->id;
  auto own = std::make_shared<partition_storage_own_op>(own_in_flight_, own_idle_, alive_);
  files_->write(std::move(m), [this, alive = alive_, own, op, id](expected<void> r) {
    if (!*alive) {
      return;
    }
    auto w = writes_.find(op);
    if (w != writes_.end() && w->second->id == id) {
      if (!r) {
        answer(op, std::move(r));
      } else {
        w->second->journal_done = true;
        maybe_answer(op);
      }
    }
    pump();
  });
}

void partition_storage::start_header(std::uint64_t op) {
  auto it = writes_.find(op);
  if (it == writes_.end() || it->second->journal_started) {
    return;
  }
  message m;
  m.h = it->second->h;
  start_journal(op, std::move(m));
}

void partition_storage::read(std::uint64_t op, checksum_t checksum, std::function<void(expected<message>)> done) {
  auto own = std::make_shared<partition_storage_own_op>(own_in_flight_, own_idle_, alive_);
  files_->read(
      op, checksum, [this, alive = alive_, own, op, checksum, done = std::move(done)](expected<message> r) mutable {
        if (!*alive) {
          return;
        }
        if (!r || !is_batch(r->h)) {
          done(std::move(r));
          return;
        }
        auto it = index_.find(op);
        if (op <= checkpoint_op_ && (it == index_.end() || it->second.base < log_->log_start().value())) {
          // Retention removed it (it removes only batches at or below the durable checkpoint): not lost.
          done(make_unexpected(errc::removed,
                               fmt::format("{}: the batch of op {} was removed by retention", log_->dir(), op)));
          return;
        }
        if (it == index_.end() || it->second.checksum != checksum) {
          done(make_unexpected(errc::corrupt_data, fmt::format("{}: op {} {} has no batch in the partition log",
                                                               log_->dir(), op, to_string(checksum))));
          return;
        }
        start(read_body(std::move(*r), it->second, std::move(done)));
      });
}

task<void> partition_storage::read_body(message m, logged at, std::function<void(expected<message>)> done) {
  auto alive = alive_;
  storage::read_request rq;
  rq.offset = offset_t(at.base);
  rq.uncommitted = true;
  rq.max_records = 1;
  rq.max_bytes = m.h.size > header::encoded_size ? m.h.size - header::encoded_size : 1;
  auto got = co_await log_->read(rq);
  if (!*alive) {
    co_return;
  }
  if (!got && m.h.op <= checkpoint_op_ && at.base < log_->log_start().value()) {
    done(make_unexpected(errc::removed, fmt::format("{}: the batch of op {} was removed by retention", log_->dir(),
                                                    m.h.op)));  // (retention ran while the read waited)
    co_return;
  }
  if (!got) {
    done(rill::unexpected(std::move(got).error()));
    co_return;
  }
  const auto views = got->batch_views();
  if (views.empty() || views.front().base_offset().value() != at.base || !body_matches(m.h, views.front().bytes())) {
    done(make_unexpected(errc::corrupt_data,
                         fmt::format("{}: the batch at {} is not the body of op {}", log_->dir(), at.base, m.h.op)));
    co_return;
  }
  m.body.assign(views.front().bytes().begin(), views.front().bytes().end());
  done(std::move(m));
}

void partition_storage::persist(const vsr_state& state, std::function<void(expected<void>)> done) {
  const std::uint64_t checkpoint = state.checkpoint.op();
  files_->persist(state, [this, alive = alive_, checkpoint, done = std::move(done)](expected<void> r) {
    if (*alive && r) {
      checkpoint_op_ = checkpoint;  // (superblock writes complete in order)
    }
    done(std::move(r));
  });
}

void partition_storage::write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                         std::function<void(expected<void>)> done) {
  RILL_ASSERT(op <= base_op_, "a checkpoint at op {} beyond the batches committed in the log (op {})", op, base_op_);
  note_checkpoint_end(op);
  files_->write_checkpoint(slot, op, std::move(bytes), std::move(done));
}

std::optional<std::int64_t> partition_storage::chain_end(const header& at) const {
  // Down from `at` by hashes, as place() walks a write's chain: to the committed base, or to a batch the log holds
  // (the log's batches below it are that batch's chain: one hash chain, in op order).
  std::uint64_t p = at.op;
  checksum_t want = at.checksum;
  for (;;) {
    if (p == base_op_) {
      return want == base_checksum_ ? std::optional<std::int64_t>(base_end_) : std::nullopt;
    }
    RILL_ASSERT(p > base_op_);
    if (auto it = index_.find(p); it != index_.end()) {
      return it->second.checksum == want ? std::optional<std::int64_t>(it->second.end) : std::nullopt;
    }
    auto k = known_.find(p);
    if (k == known_.end() || k->second.checksum != want || is_batch(k->second)) {
      return std::nullopt;  // a gap, another chain's header, or a batch the log does not hold
    }
    want = k->second.parent;
    --p;
  }
}

std::optional<std::int64_t> partition_storage::end_through(std::uint64_t op) const {
  RILL_ASSERT(op <= base_op_);
  if (op == base_op_) {
    return base_end_;
  }
  // The index holds the log's batches from some op on, contiguous: the last entry at or below `op` ends there.
  auto above = index_.upper_bound(op);
  if (above == index_.begin()) {
    return std::nullopt;  // pruned below: not known here
  }
  return std::prev(above)->second.end;
}

void partition_storage::note_checkpoint_end(std::uint64_t op) {
  const auto end = end_through(op);
  if (!end || (!checkpoint_ends_.empty() && checkpoint_ends_.back().first >= op)) {
    return;
  }
  RILL_ASSERT(checkpoint_ends_.empty() || checkpoint_ends_.back().second <= *end);
  checkpoint_ends_.emplace_back(op, *end);
  constexpr std::size_t kept_max = 64;  // a ring holds 4 checkpoints (every quarter ring): far more than needed
  while (checkpoint_ends_.size() > kept_max) {
    checkpoint_ends_.pop_front();
  }
}

std::int64_t partition_storage::retention_ceiling() const {
  std::int64_t ceiling = log_->log_start().value();
  for (const auto& [op, end] : checkpoint_ends_) {
    if (op > checkpoint_op_) {
      break;
    }
    ceiling = std::max(ceiling, end);
  }
  return std::min(ceiling, base_end_);
}

task<expected<storage::retention_result>> partition_storage::enforce_retention() {
  if (closing_ || target_) {
    co_return storage::retention_result{.log_start = log_->log_start()};
  }
  auto alive = alive_;
  partition_storage_own_op own(own_in_flight_, own_idle_, alive_);
  const std::int64_t ceiling = retention_ceiling();
  auto r = co_await log_->enforce_retention(offset_t(ceiling));
  if (!*alive || !r) {
    co_return r;
  }
  const std::int64_t start = log_->log_start().value();
  std::erase_if(index_, [start](const auto& kv) { return kv.second.base < start; });
  while (!checkpoint_ends_.empty() && checkpoint_ends_.front().second < start) {
    checkpoint_ends_.pop_front();
  }
  co_return r;
}

void partition_storage::applied(const header& prepare) {
  if (prepare.op <= base_op_ || (target_ && prepare.op <= target_->op)) {
    return;  // committed in the log already (a replay at a restart), or below a transfer's target
  }
  RILL_ASSERT(applied_waiting_.empty() || applied_waiting_.back().op + 1 == prepare.op, "op {} applied after op {}",
              prepare.op, applied_waiting_.empty() ? 0 : applied_waiting_.back().op);
  applied_waiting_.push_back(prepare);
  settle_applied();  // (pump() runs at replica_changed(), once the replica's input is done)
}

void partition_storage::installed(const header& at) {
  if (at.op <= base_op_) {
    return;
  }
  if (!target_ || target_->op < at.op) {
    target_ = at;
  }
  while (!applied_waiting_.empty() && applied_waiting_.front().op <= at.op) {
    applied_waiting_.pop_front();
  }
}

void partition_storage::replica_changed(const replica& r) {
  for (auto it = writes_.begin(); it != writes_.end();) {
    const std::uint64_t op = it->first;
    const checksum_t checksum = it->second->h.checksum;
    ++it;
    const header* h = r.header_at(op);
    if (h == nullptr || h->checksum != checksum) {
      answer(op, superseded(op, "the replica no longer holds it"));
    }
  }
  pump();
}

// ---------------------------------------------------------------------------------------------------------------
// Placing batches

partition_storage::placement partition_storage::place(const header& h) const {
  using kind = placement::kind;
  RILL_ASSERT(is_batch(h));
  if (h.op <= base_op_) {
    return {kind::done};  // committed: the base moves only over batches the log holds
  }
  if (auto it = index_.find(h.op); it != index_.end() && it->second.checksum == h.checksum) {
    return {kind::done};  // the log holds it already (a rewrite, or a batch whose header a crash lost)
  }
  // Down the chain, by hashes, to where the log (or the committed base) has the op below.
  std::uint64_t p = h.op - 1;
  checksum_t want = h.parent;
  for (;;) {
    if (p == base_op_) {
      return want == base_checksum_ ? placement{kind::attach, p, base_end_} : placement{kind::wait};
    }
    RILL_ASSERT(p > base_op_);
    if (auto it = index_.find(p); it != index_.end()) {
      if (it->second.checksum == want) {
        return {kind::attach, p, it->second.end};
      }
      return {kind::cut, p};  // the log holds another op p than the chain: it diverges there
    }
    auto k = known_.find(p);
    if (k == known_.end() || k->second.checksum != want || is_batch(k->second)) {
      return {kind::wait};  // a gap, a stale header not yet replaced, or a batch still on its way
    }
    want = k->second.parent;
    --p;
  }
}

void partition_storage::pump() {
  if (pumping_) {
    pump_again_ = true;
    return;
  }
  auto alive = alive_;
  pumping_ = true;
  do {
    pump_again_ = false;
    step();
    auto due = std::exchange(answers_, {});
    for (auto& a : due) {
      a();  // the driver's completion: it may write again (pump() then only asks for another round)
      if (!*alive) {
        return;
      }
    }
  } while (pump_again_ || !answers_.empty());
  pumping_ = false;
}

void partition_storage::step() {
  if (busy_ || closing_ || failed_ || log_->fenced() || target_) {
    return;  // one log operation at a time; nothing is appended while a state transfer is due, or after a failure
  }
  if (cut_due_) {
    const std::uint64_t from = *cut_due_;
    cut_due_.reset();
    // A state transfer that ran meanwhile may have moved the committed base past it: the log was started over or
    // verified there, and a stale batch above the base is found again when its op is applied (rill-sim seed
    // 15008133749293104382 asserted here).
    if (from > base_op_) {
      busy_ = true;
      start(do_cut(from));
      return;
    }
  }
  for (auto it = writes_.begin(); it != writes_.end();) {
    pending& w = *it->second;
    const std::uint64_t op = it->first;
    if (!w.batch || w.batch_done) {
      ++it;
      continue;
    }
    placement pl;
    if (bug_trust_own_suffix_) {
      const batch_span s = span_of(w.body);
      if (index_.contains(op) || (s.base >= 0 && s.base < log_->log_end().value())) {
        pl.what = placement::kind::done;  // the deliberate bug: what the log holds there is taken for this batch
      } else if (s.base == log_->log_end().value()) {
        pl = {placement::kind::attach, index_.empty() ? base_op_ : index_.rbegin()->first, s.base};
      }
    } else {
      pl = place(w.h);
    }
    switch (pl.what) {
      case placement::kind::wait:
        ++it;
        continue;
      case placement::kind::done:
        w.batch_done = true;
        it = writes_.upper_bound(op);  // (maybe_answer and start_header's answer may erase it)
        start_header(op);
        maybe_answer(op);
        continue;
      case placement::kind::cut:
        busy_ = true;
        start(do_cut(pl.op));
        return;
      case placement::kind::attach:
        break;
    }
    const batch_span first = span_of(w.body);
    if (first.base < log_->log_start().value() && pl.op == base_op_) {
      // This log started over at a peer's log start (a state transfer a crash interrupted before its checkpoint was
      // durable): the batches between the checkpoint and that start cannot be placed here, and what was copied
      // above the start is kept. The write waits; the replica, behind every peer's ring, installs a later checkpoint
      // and the transfer resumes.
      ++it;
      continue;
    }
    if (auto above = index_.upper_bound(pl.op); above != index_.end() && !bug_trust_own_suffix_) {
      busy_ = true;  // batches above where the chain attaches are not on it: they go first
      start(do_cut(above->first));
      return;
    }
    RILL_ASSERT(pl.end == log_->log_end().value(), "op {} attaches at offset {}, but the log ends at {}", op, pl.end,
                log_->log_end().value());
    RILL_ASSERT(first.base == pl.end, "op {}'s batch was stamped at offset {}; its chain puts it at {}", op, first.base,
                pl.end);
    // This batch, and those after it on the chain that wait too (one append, one fdatasync).
    std::vector<std::uint64_t> ops{op};
    std::vector<std::byte> bytes(w.body.begin(), w.body.end());
    std::vector<storage::batch_meta> metas{batch_meta_of(w.h)};
    std::uint64_t tip_op = op;
    checksum_t tip_checksum = w.h.checksum;
    std::int64_t tip_end = first.next;
    for (auto nx = std::next(it); nx != writes_.end(); ++nx) {
      const pending& n = *nx->second;
      if (!n.batch || n.batch_done) {
        continue;
      }
      if (bytes.size() + n.body.size() > options_.append_bytes_max) {
        break;
      }
      std::uint64_t p = n.h.op - 1;
      checksum_t want = n.h.parent;
      bool chained = true;
      while (p > tip_op) {
        auto k = known_.find(p);
        if (k == known_.end() || k->second.checksum != want || is_batch(k->second)) {
          chained = false;
          break;
        }
        want = k->second.parent;
        --p;
      }
      const batch_span s = span_of(n.body);
      if (!chained || p != tip_op || want != tip_checksum || s.base != tip_end) {
        break;
      }
      ops.push_back(n.h.op);
      bytes.insert(bytes.end(), n.body.begin(), n.body.end());
      metas.push_back(batch_meta_of(n.h));
      tip_op = n.h.op;
      tip_checksum = n.h.checksum;
      tip_end = s.next;
    }
    busy_ = true;
    appending_ = ops;
    start(do_append(std::move(ops), std::move(bytes), std::move(metas)));
    return;
  }
}

void partition_storage::start(task<void> t) {
  auto own = std::make_shared<partition_storage_own_op>(own_in_flight_, own_idle_, alive_);
  spawn(std::move(t), [own] {});
}

task<void> partition_storage::do_append(std::vector<std::uint64_t> ops, std::vector<std::byte> bytes,
                                        std::vector<storage::batch_meta> metas) {
  auto alive = alive_;
  // The index entries, from the batches' own fields, before the bytes go.
  std::vector<logged> entries;
  std::size_t at = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const batch_span s = span_of(std::span<const std::byte>(bytes).subspan(at));
    const std::size_t size = 12 + load_be<std::uint32_t>(bytes.data() + at + storage::batch_format::batch_length_at);
    entries.push_back(logged{batch_op_of(metas[i]).checksum, s.base, s.next});
    at += size;
  }
  auto r = co_await log_->append_replicated(std::move(bytes), std::move(metas));
  if (!*alive) {
    co_return;
  }
  busy_ = false;
  appending_.clear();
  if (!r) {
    // The log cut the failed write off, or it is fenced; the replica's driver fences either way (the host restarts
    // it from what is on disk).
    fail_all(r.error());
    pump();
    co_return;
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    index_[ops[i]] = entries[i];
    auto w = writes_.find(ops[i]);
    if (w != writes_.end() && w->second->batch && w->second->h.checksum == entries[i].checksum) {
      w->second->batch_done = true;
      start_header(ops[i]);  // the header once its batch is durable
      maybe_answer(ops[i]);
    }
  }
  settle_applied();
  pump();
}

task<void> partition_storage::do_cut(std::uint64_t from_op) {
  auto alive = alive_;
  auto r = co_await cut_from(from_op);
  if (!*alive) {
    co_return;
  }
  busy_ = false;
  if (!r) {
    fail_all(r.error());
  }
  settle_applied();
  pump();
}

task<expected<void>> partition_storage::cut_from(std::uint64_t from_op) {
  // Every batch of op from_op and above (a cut found due earlier may find another one ran first).
  auto it = index_.lower_bound(from_op);
  if (it == index_.end()) {
    co_return expected<void>{};
  }
  RILL_ASSERT(from_op > base_op_, "a cut from op {}, committed (the committed base is op {})", from_op, base_op_);
  co_return co_await cut_at(it->second.base);
}

task<expected<void>> partition_storage::cut_at(std::int64_t offset) {
  auto alive = alive_;
  RILL_ASSERT(offset >= base_end_, "a cut at offset {} below the committed end {}", offset, base_end_);
  RILL_ASSERT(offset >= log_->committed().value());
  if (log_->log_end().value() <= offset) {
    co_return expected<void>{};
  }
  RILL_CO_TRY_VOID(co_await log_->truncate_after(offset_t(offset - 1)));
  if (!*alive) {
    co_return expected<void>{};
  }
  for (const auto& [op, l] : index_) {
    if (l.base >= offset && !writes_.contains(op) && !options_.bug_cuts_unreported) {
      cut_durable_.emplace_back(op, l.checksum);  // its write completed: the replica counts it durable (take_cut)
    }
  }
  std::erase_if(index_, [&](const auto& kv) { return kv.second.base >= offset; });
  ++truncations_;
  // A write whose batch was cut is placed again (if the replica still holds it; otherwise it is superseded).
  for (auto& [op, w] : writes_) {
    if (w->batch && w->batch_done && !index_.contains(op) && op > base_op_) {
      w->batch_done = false;
    }
  }
  co_return expected<void>{};
}

void partition_storage::settle_applied() {
  while (!applied_waiting_.empty() && !target_) {
    const header h = applied_waiting_.front();
    if (h.op <= base_op_) {
      applied_waiting_.pop_front();
      continue;
    }
    RILL_ASSERT(h.op == base_op_ + 1, "op {} applied, the committed base is op {}", h.op, base_op_);
    if (std::find(appending_.begin(), appending_.end(), h.op) != appending_.end()) {
      break;  // a batch at this op is being appended: once it is in the log, this decides whether it stays
    }
    auto it = index_.find(h.op);
    if (!is_batch(h)) {
      if (it != index_.end() && !bug_trust_own_suffix_) {
        cut_due_ = h.op;  // the log holds a batch where the committed chain has none: stale
        break;
      }
    } else {
      if (it == index_.end()) {
        break;  // its batch is on its way
      }
      if (it->second.checksum != h.checksum && !bug_trust_own_suffix_) {
        cut_due_ = h.op;  // a stale batch where the committed one goes
        break;
      }
      RILL_ASSERT(bug_trust_own_suffix_ || it->second.base == base_end_,
                  "op {}'s batch starts at {}, the committed end is {}", h.op, it->second.base, base_end_);
      base_end_ = it->second.end;
    }
    base_op_ = h.op;
    base_checksum_ = h.checksum;
    applied_waiting_.pop_front();
  }
  if (base_end_ > log_->committed().value()) {
    log_->commit_to(offset_t(base_end_));
  }
  prune();
}

// ---------------------------------------------------------------------------------------------------------------
// Answers

void partition_storage::answer(std::uint64_t op, expected<void> r) {
  auto it = writes_.find(op);
  RILL_ASSERT(it != writes_.end(), "op {} answered twice", op);
  auto done = std::move(it->second->done);
  writes_.erase(it);
  answers_.push_back([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
}

void partition_storage::maybe_answer(std::uint64_t op) {
  auto it = writes_.find(op);
  if (it != writes_.end() && it->second->journal_done && it->second->batch_done) {
    answer(op, expected<void>{});
  }
}

void partition_storage::on_log_fenced() {
  if (closing_ || failed_) {
    return;
  }
  const rill::error* why = log_->fencing_error();
  RILL_ASSERT(why != nullptr, "on_fenced of a log that is not fenced");
  fail_all(error(make_error_code(errc::fenced),
                 fmt::format("the partition log stopped at a storage failure: {}", why->message())));
  pump();
}

void partition_storage::fail_all(const error& e) {
  failed_ = true;  // a log operation failed: the driver fences at these answers, and nothing more is started
  while (!writes_.empty()) {
    answer(writes_.begin()->first, rill::unexpected(e));
  }
}

void partition_storage::prune() {
  known_.erase(known_.begin(), known_.upper_bound(base_op_));
  // The index keeps the journal's window (the ops a replica may still read back) and everything uncommitted.
  std::uint64_t newest = base_op_;
  if (!known_.empty()) {
    newest = std::max(newest, known_.rbegin()->first);
  }
  if (!index_.empty()) {
    newest = std::max(newest, index_.rbegin()->first);
  }
  if (newest > slot_count_) {
    index_.erase(index_.begin(), index_.lower_bound(std::min(newest - slot_count_, base_op_)));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// State transfer

task<expected<bool>> partition_storage::transfer(transfer_source source) {
  if (!target_ || busy_ || closing_ || failed_ || log_->fenced()) {
    co_return false;
  }
  auto alive = alive_;
  partition_storage_own_op own(own_in_flight_, own_idle_, alive_);
  busy_ = true;
  const header at = *target_;
  auto give_up = [&](const error& e, bool fence) -> expected<bool> {
    busy_ = false;
    if (fence) {
      fail_all(e);
    }
    pump();
    return rill::unexpected(e);
  };
  auto corrupt = [&](std::string what) {
    return give_up(error(make_error_code(errc::corrupt_data), "state transfer: " + std::move(what)), false);
  };
  // The peer's committed batches from our committed end on. Where our log holds the same batch (op and checksum at
  // that offset) it is kept: the replica may have written it and count it durable. From the first difference on,
  // ours is cut and the peer's appended.
  std::int64_t next = base_end_;
  std::uint64_t tip_op = base_op_;
  // This log may hold the checkpoint's batches already (the replica wrote them, but committed none before it took
  // the checkpoint): then nothing is copied. Asking the peer could even cost them: a peer whose retention removed
  // them would have this log start over, and with it go batches above the checkpoint this replica acknowledged.
  const auto own_end = options_.bug_restart_drops_acked ? std::nullopt : chain_end(at);
  if (own_end) {
    next = *own_end;
  }
  while (!own_end) {
    auto chunk = co_await source(offset_t(next), at.op);
    if (!*alive) {
      co_return false;
    }
    if (!chunk) {
      co_return give_up(chunk.error(), false);
    }
    if (chunk->starts_at) {
      // The peer's retention removed the batches from `next` on: this log starts over at the peer's start (all it
      // holds lies below it, and the checkpoint covers what is skipped).
      const std::int64_t start = *chunk->starts_at;
      if (start <= next || !chunk->batches.empty() || !chunk->metas.empty()) {
        co_return corrupt(fmt::format("the peer's log starts at {}, asked for {}", start, next));
      }
      if (auto cut = co_await cut_at(base_end_); !*alive) {
        co_return false;
      } else if (!cut) {
        co_return give_up(cut.error(), true);
      }
      auto restarted = co_await log_->restart_at(offset_t(start));
      if (!*alive) {
        co_return false;
      }
      if (!restarted) {
        co_return give_up(restarted.error(), true);
      }
      ++restarts_;
      index_.clear();
      checkpoint_ends_.clear();
      base_end_ = start;  // (the committed base's op moves with the transfer's end)
      next = start;
      continue;
    }
    std::vector<std::pair<std::uint64_t, logged>> entries;
    std::size_t pos = 0;
    std::size_t copy_from = SIZE_MAX;  // the byte of the chunk where ours first differs
    std::size_t copy_meta = 0;
    for (std::size_t i = 0; i < chunk->metas.size(); ++i) {
      const batch_op b = batch_op_of(chunk->metas[i]);
      if (pos >= chunk->batches.size() || b.op <= tip_op || b.op > at.op) {
        co_return corrupt(fmt::format("the peer sent op {} after op {} (target op {})", b.op, tip_op, at.op));
      }
      const batch_span sp = span_of(std::span<const std::byte>(chunk->batches).subspan(pos));
      if (sp.base != next) {
        co_return corrupt(fmt::format("the peer's batch of op {} starts at {}, not at {}", b.op, sp.base, next));
      }
      if (copy_from == SIZE_MAX) {
        auto ours = index_.find(b.op);
        if (ours == index_.end() || ours->second.base != sp.base || ours->second.checksum != b.checksum) {
          copy_from = pos;
          copy_meta = i;
        }
      }
      entries.emplace_back(b.op, logged{b.checksum, sp.base, sp.next});
      tip_op = b.op;
      next = sp.next;
      pos += 12 + load_be<std::uint32_t>(chunk->batches.data() + pos + storage::batch_format::batch_length_at);
    }
    if (pos != chunk->batches.size()) {
      co_return corrupt("the peer's batches and their entries do not match");
    }
    if (copy_from != SIZE_MAX) {
      auto cut = co_await cut_at(entries[copy_meta].second.base);
      if (!*alive) {
        co_return false;
      }
      if (!cut) {
        co_return give_up(cut.error(), true);
      }
      std::vector<std::byte> bytes(chunk->batches.begin() + static_cast<std::ptrdiff_t>(copy_from),
                                   chunk->batches.end());
      std::vector<storage::batch_meta> metas(chunk->metas.begin() + static_cast<std::ptrdiff_t>(copy_meta),
                                             chunk->metas.end());
      auto appended = co_await log_->append_replicated(std::move(bytes), std::move(metas));
      if (!*alive) {
        co_return false;
      }
      if (!appended) {
        co_return give_up(appended.error(), true);
      }
      for (std::size_t i = copy_meta; i < entries.size(); ++i) {
        index_[entries[i].first] = entries[i].second;
      }
    }
    if (chunk->reached) {
      break;
    }
    if (entries.empty()) {
      co_return give_up(error(make_error_code(errc::not_found), "state transfer: the peer sent nothing"), false);
    }
  }
  // Our batches above the target may stay, uncommitted, for the chain to confirm or cut; but one of an op at or below
  // the target that the peer did not send (its op there has no batch) is stale, and so is all that follows it.
  if (auto first = std::find_if(index_.begin(), index_.end(), [&](const auto& kv) { return kv.second.base >= next; });
      first != index_.end() && first->first <= at.op) {
    auto cut = co_await cut_at(next);
    if (!*alive) {
      co_return false;
    }
    if (!cut) {
      co_return give_up(cut.error(), true);
    }
  }
  base_op_ = at.op;
  base_checksum_ = at.checksum;
  // (The deliberate bug: everything the log holds counts as copied and committed, its own uncommitted batches above
  // the checkpoint too.)
  base_end_ = options_.bug_transfer_uncommitted ? log_->log_end().value() : next;
  RILL_ASSERT(base_end_ <= log_->log_end().value());
  log_->commit_to(offset_t(base_end_));
  if (target_ && target_->op <= at.op) {
    target_.reset();  // (a later checkpoint installed during the copy stays the target: the next transfer copies it)
  }
  ++transfers_;
  busy_ = false;
  settle_applied();
  pump();
  co_return true;
}

task<expected<transfer_chunk>> partition_storage::read_for_transfer(offset_t from, std::uint64_t through_op,
                                                                    std::uint64_t bytes_max) {
  if (through_op > base_op_) {
    co_return make_unexpected(
        errc::offset_out_of_range,
        fmt::format("op {} is not committed in this log (committed through op {})", through_op, base_op_));
  }
  if (from.value() > base_end_) {
    co_return make_unexpected(errc::offset_out_of_range,
                              fmt::format("offset {} is beyond the committed end {}", from.value(), base_end_));
  }
  const std::int64_t end = base_end_;  // (what is committed now; more may commit while the read runs)
  transfer_chunk out;
  if (from < log_->log_start()) {
    // Retention removed what was asked for: the asker starts over at this log's start, if that does not skip
    // batches of ops above the one it copies through (it could never place them); else it needs a newer checkpoint.
    // (Where the index no longer knows the end through that op, a checkpoint at or below it recorded an end at or
    // past the log start: retention keeps those entries, and the log's batches go up in op.)
    const auto through_end = end_through(through_op);
    const bool covered = through_end ? *through_end >= log_->log_start().value()
                                     : !checkpoint_ends_.empty() && checkpoint_ends_.front().first <= through_op &&
                                           checkpoint_ends_.front().second >= log_->log_start().value();
    if (!covered) {
      co_return make_unexpected(errc::unavailable,
                                fmt::format("this log starts at {}, past the batches through op {}: a newer "
                                            "checkpoint is needed",
                                            log_->log_start().value(), through_op));
    }
    out.starts_at = log_->log_start().value();
    co_return out;
  }
  if (from.value() == end) {
    out.reached = true;
    co_return out;
  }
  storage::read_request rq;
  rq.offset = from;
  rq.max_bytes = bytes_max;
  RILL_CO_TRY(r, co_await log_->read(rq));
  std::int64_t next = from.value();
  for (const auto& v : r.batch_views()) {
    if (v.base_offset().value() != next || next >= end) {
      break;  // (from must be a batch boundary: a batch starting below it is not sent)
    }
    auto meta = log_->meta_for(v.base_offset());
    if (!meta) {
      co_return make_unexpected(errc::corrupt_data, fmt::format("{}: the committed batch at {} has no op", log_->dir(),
                                                                v.base_offset().value()));
    }
    if (batch_op_of(*meta).op > through_op) {
      out.reached = true;
      break;
    }
    out.batches.insert(out.batches.end(), v.bytes().begin(), v.bytes().end());
    out.metas.push_back(*meta);
    next = v.next_offset().value();
  }
  if (next >= end) {
    out.reached = true;  // everything committed is of ops <= base_op_: nothing further of ops <= through_op
  }
  if (out.batches.empty() && !out.reached) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("offset {} is not the start of a committed batch", from.value()));
  }
  co_return out;
}

// ---------------------------------------------------------------------------------------------------------------

void partition_storage::sync_headers(std::function<void(expected<void>)> done) {
  auto own = std::make_shared<partition_storage_own_op>(own_in_flight_, own_idle_, alive_);
  files_->sync_headers([alive = alive_, own, done = std::move(done)](expected<void> r) {
    if (*alive) {
      done(std::move(r));
    }
  });
}

void partition_storage::stop_writes() {
  closing_ = true;
  fail_all(error(make_error_code(errc::closed), "the partition group's storage is closing"));
  pump();
}

task<expected<void>> partition_storage::close() {
  stop_writes();
  while (own_in_flight_ > 0) {
    own_idle_.reset();
    co_await own_idle_.wait();
  }
  auto l = co_await log_->close();
  auto f = co_await files_->close();
  if (!l) {
    co_return l;
  }
  co_return f;
}

task<expected<void>> partition_storage::abandon() {
  closing_ = true;
  writes_.clear();
  answers_.clear();
  auto l = co_await log_->close();
  auto f = co_await files_->close();
  co_return !l ? l : f;  // (the disk is gone: what failed does not matter, the descriptors are closed)
}

std::string partition_storage::describe() const {
  std::size_t batch_writes = 0;
  std::size_t logged_writes = 0;
  for (const auto& [op, w] : writes_) {
    batch_writes += w->batch ? 1 : 0;
    logged_writes += w->batch && w->batch_done ? 1 : 0;
  }
  return fmt::format(
      "base op {} end {}, log end {} committed {}, index {} (ops {}..{}), known {}, writes {} ({} "
      "batches, {} in the log), applied waiting {}{}{}{}",
      base_op_, base_end_, log_->log_end().value(), log_->committed().value(), index_.size(),
      index_.empty() ? 0 : index_.begin()->first, index_.empty() ? 0 : index_.rbegin()->first, known_.size(),
      writes_.size(), batch_writes, logged_writes, applied_waiting_.size(), busy_ ? ", busy" : "",
      target_ ? fmt::format(", transfer to op {}", target_->op) : "",
      cut_due_ ? fmt::format(", cut due at op {}", *cut_due_) : "");
}

}  // namespace rill::consensus
