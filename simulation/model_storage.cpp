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

std::uint64_t model_storage::due(std::uint64_t now) {
  return now + options_.latency_min_ticks + rng_.below(std::uint64_t{options_.latency_spread_ticks} + 1);
}

void model_storage::write(const message& prepare, std::uint64_t now) {
  pending_op p{due(now), sequence_++, {}, prepare, {}};
  p.c.what = storage_completion::kind::write;
  p.c.op = prepare.h.op;
  p.c.checksum = prepare.h.checksum;
  pending_.push_back(std::move(p));
}

void model_storage::read(std::uint64_t op, consensus::checksum_t checksum, std::uint64_t now) {
  pending_op p{due(now), sequence_++, {}, std::nullopt, {}};
  p.c.what = storage_completion::kind::read;
  p.c.op = op;
  p.c.checksum = checksum;
  pending_.push_back(std::move(p));
}

void model_storage::persist(const consensus::vsr_state& state, std::uint64_t now) {
  pending_op p{due(now), sequence_++, {}, std::nullopt, {}};
  p.c.what = storage_completion::kind::persist;
  p.c.state = state;
  pending_.push_back(std::move(p));
}

void model_storage::write_checkpoint(std::uint8_t slot, std::uint64_t op, std::vector<std::byte> bytes,
                                     std::uint64_t now) {
  pending_op p{due(now), sequence_++, {}, std::nullopt, std::move(bytes)};
  p.c.what = storage_completion::kind::checkpoint;
  p.c.op = op;
  p.c.slot = slot;
  pending_.push_back(std::move(p));
}

std::vector<storage_completion> model_storage::complete(std::uint64_t now) {
  std::vector<pending_op> ready;
  std::vector<pending_op> later;
  for (auto& p : pending_) {
    (p.due <= now ? ready : later).push_back(std::move(p));
  }
  pending_ = std::move(later);
  std::sort(ready.begin(), ready.end(), [](const pending_op& a, const pending_op& b) {
    return a.due != b.due ? a.due < b.due : a.sequence < b.sequence;
  });
  std::vector<storage_completion> out;
  for (auto& p : ready) {
    storage_completion c = std::move(p.c);
    switch (c.what) {
      case storage_completion::kind::write:
        if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(c.op)) {
          c.ok = false;  // nothing of it landed; what was there before stays
        } else {
          // The ring: this op's slot held the op a ring's length below (or one of another view at this op).
          for (auto it = journal_.begin(); it != journal_.end();) {
            it = it->first % slot_count_ == c.op % slot_count_ ? journal_.erase(it) : std::next(it);
          }
          rotten_.erase(c.op);
          journal_[c.op] = std::move(*p.data);
        }
        break;
      case storage_completion::kind::read: {
        auto it = journal_.find(c.op);
        const bool readable = it != journal_.end() && !rotten_.contains(c.op) && it->second.h.checksum == c.checksum;
        if (readable && !(rng_.chance_ppm(options_.read_fault_ppm) && may_fault_(c.op))) {
          c.prepare = it->second;
        } else {
          c.ok = false;
        }
        break;
      }
      case storage_completion::kind::persist:
        superblock_ = c.state;
        break;
      case storage_completion::kind::checkpoint:
        if (rng_.chance_ppm(options_.write_fault_ppm) && may_fault_(c.op)) {
          c.ok = false;
        } else {
          snapshots_[c.slot] = std::move(p.bytes);
        }
        break;
    }
    out.push_back(std::move(c));
  }
  return out;
}

void model_storage::crash() {
  for (const auto& p : pending_) {
    if (p.c.what == storage_completion::kind::write && rng_.chance_ppm(options_.torn_ppm) && may_fault_(p.c.op)) {
      journal_.erase(p.c.op);  // torn: the slot holds garbage now
    }
  }
  pending_.clear();
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
