#include "simulation/model_storage.h"

#include <algorithm>

#include "base/assert.h"

namespace rill::simulation {

using consensus::message;

model_storage::model_storage(const storage_options& options, std::uint64_t seed, consensus::vsr_state initial,
                             std::uint64_t slot_count, std::function<bool(std::uint64_t)> may_fault)
    : options_(options),
      rng_(seed),
      slot_count_(slot_count),
      may_fault_(std::move(may_fault)),
      superblock_(std::move(initial)) {
  RILL_ASSERT(slot_count_ >= 1);
}

std::uint64_t model_storage::due() {
  return now_ + options_.latency_min_ticks + rng_.below(std::uint64_t{options_.latency_spread_ticks} + 1);
}

model_storage::pending_op& model_storage::enqueue(kind what) {
  pending_op& p = pending_.emplace_back();
  p.due = due();
  p.sequence = sequence_++;
  p.what = what;
  return p;
}

void model_storage::write(message prepare, std::function<void(expected<void>)> done) {
  pending_op& p = enqueue(kind::write);
  p.op = prepare.h.op;
  p.data = std::move(prepare);
  p.done = std::move(done);
}

void model_storage::read(std::uint64_t op, consensus::checksum_t checksum,
                         std::function<void(expected<message>)> done) {
  pending_op& p = enqueue(kind::read);
  p.op = op;
  p.checksum = checksum;
  p.read_done = std::move(done);
}

void model_storage::persist(const consensus::vsr_state& state, std::function<void(expected<void>)> done) {
  pending_op& p = enqueue(kind::persist);
  p.state = state;
  p.done = std::move(done);
}

void model_storage::write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                     std::function<void(expected<void>)> done) {
  pending_op& p = enqueue(kind::checkpoint);
  p.op = op;
  p.slot = slot;
  p.bytes = std::move(bytes);
  p.done = std::move(done);
}

void model_storage::complete(std::uint64_t now) {
  now_ = now;
  std::vector<pending_op> ready;
  std::vector<pending_op> later;
  for (auto& p : pending_) {
    (p.due <= now ? ready : later).push_back(std::move(p));
  }
  pending_ = std::move(later);
  std::sort(ready.begin(), ready.end(), [](const pending_op& a, const pending_op& b) {
    return a.due != b.due ? a.due < b.due : a.sequence < b.sequence;
  });
  for (auto& p : ready) {
    run(p);  // may start more operations (into pending_, due from now on)
  }
}

void model_storage::run(pending_op& p) {
  switch (p.what) {
    case kind::write:
      if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(p.op)) {
        p.done(rill::unexpected(injected_fault("journal write", p.op)));  // nothing of it landed
        return;
      }
      // The ring: this op's slot held the op a ring's length below (or one of another view at this op).
      for (auto it = journal_.begin(); it != journal_.end();) {
        it = it->first % slot_count_ == p.op % slot_count_ ? journal_.erase(it) : std::next(it);
      }
      rotten_.erase(p.op);
      journal_[p.op] = std::move(*p.data);
      p.done(expected<void>{});
      return;
    case kind::read: {
      auto it = journal_.find(p.op);
      const bool readable = it != journal_.end() && !rotten_.contains(p.op) && it->second.h.checksum == p.checksum;
      if (readable && !(rng_.chance_ppm(options_.read_fault_ppm) && may_fault_(p.op))) {
        p.read_done(it->second);
      } else {
        p.read_done(rill::unexpected(injected_fault("journal read", p.op)));
      }
      return;
    }
    case kind::persist:
      superblock_ = p.state;
      p.done(expected<void>{});
      return;
    case kind::checkpoint:
      if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(p.op)) {
        p.done(rill::unexpected(injected_fault("checkpoint write", p.op)));
        return;
      }
      snapshots_[p.slot] = std::move(p.bytes);
      p.done(expected<void>{});
      return;
  }
}

void model_storage::crash(bool power_loss) {
  (void)power_loss;  // an in-memory model: no page cache, every crash is a power loss
  for (const auto& p : pending_) {
    if (p.what == kind::write && rng_.chance_ppm(options_.torn_ppm) && may_fault_(p.op)) {
      journal_.erase(p.op);  // torn: the slot holds garbage now
    }
  }
  pending_.clear();
}

void model_storage::wipe(std::uint64_t format_tick) {
  RILL_ASSERT(pending_.empty(), "wipe() after crash()");
  journal_.clear();
  rotten_.clear();
  snapshots_[0].clear();
  snapshots_[1].clear();
  consensus::vsr_state fresh;
  fresh.cluster = superblock_.cluster;
  fresh.replica = superblock_.replica;
  fresh.replica_count = superblock_.replica_count;
  fresh.recovering = true;  // formatted anew as a member of a running group
  fresh.incarnation = std::min(format_tick, consensus::incarnation_max);
  superblock_ = fresh;
  formatted_ = false;
}

consensus::recovered_state model_storage::recover() {
  consensus::recovered_state r;
  r.state = superblock_;
  r.formatted = std::exchange(formatted_, false);
  r.journal_slots = slot_count_;
  if (superblock_.checkpoint.op() > 0) {
    r.snapshot = snapshots_[superblock_.checkpoint.slot];
    RILL_ASSERT(r.snapshot.size() == superblock_.checkpoint.size, "the checkpoint the superblock names is gone");
  }
  for (const auto& [op, m] : journal_) {
    (rotten_.contains(op) ? r.faulty : r.journal).push_back(m.h);
  }
  return r;
}

std::optional<std::uint64_t> model_storage::rot_one(prng& rng) {
  if (journal_.empty()) {
    return std::nullopt;
  }
  auto it = journal_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(rng.below(journal_.size())));
  if (!may_fault_(it->first)) {
    return std::nullopt;
  }
  rotten_[it->first] = true;
  return it->first;
}

}  // namespace rill::simulation
