#include "storage/producer_table.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/producer_sequence.h"

namespace rill::storage {

const char* to_string(producer_verdict v) noexcept {
  switch (v) {
    case producer_verdict::fresh:
      return "fresh";
    case producer_verdict::duplicate:
      return "duplicate";
    case producer_verdict::duplicate_sequence:
      return "duplicate_sequence";
    case producer_verdict::sequence_gap:
      return "sequence_gap";
    case producer_verdict::producer_fenced:
      return "producer_fenced";
    case producer_verdict::unknown_producer_id:
      return "unknown_producer_id";
  }
  return "?";
}

producer_check producer_table::check(const std::optional<producer_state>& p, std::int64_t producer_id,
                                     std::int16_t epoch, std::int32_t base_sequence, std::int64_t records) {
  RILL_ASSERT(producer_id >= 0, "producer id {}", producer_id);
  RILL_ASSERT(epoch >= 0, "producer {} epoch {}", producer_id, epoch);
  RILL_ASSERT(base_sequence >= 0, "producer {} sequence {}", producer_id, base_sequence);
  const std::int32_t last = last_sequence_of(base_sequence, records);
  if (!p) {
    if (base_sequence == 0) {
      return {};
    }
    return {producer_verdict::unknown_producer_id, std::nullopt,
            fmt::format("producer {} epoch {}: the partition knows no batch of this producer, and its first batch "
                        "starts at sequence {}, not 0 (its earlier batches are gone: start a new producer id at "
                        "sequence 0)",
                        producer_id, epoch, base_sequence)};
  }
  RILL_ASSERT(p->last_sequence >= 0 && !p->recent.empty(), "producer {}: a held producer has stored a batch",
              producer_id);
  if (epoch < p->epoch) {
    return {producer_verdict::producer_fenced, std::nullopt,
            fmt::format("producer {} epoch {} is older than the current epoch {}", producer_id, epoch, p->epoch)};
  }
  if (epoch > p->epoch) {
    if (base_sequence == 0) {
      return {};
    }
    return {
        producer_verdict::sequence_gap, std::nullopt,
        fmt::format("producer {}: a new epoch {} must start at sequence 0, not {}", producer_id, epoch, base_sequence)};
  }
  const auto dup = std::find_if(p->recent.begin(), p->recent.end(), [&](const producer_batch& b) {
    return b.first_sequence == base_sequence && b.last_sequence == last;
  });
  if (dup != p->recent.end()) {
    return {producer_verdict::duplicate, *dup, {}};
  }
  // At or up to 2^30 before the last sequence, counting across the wrap (INT32_MAX, then 0): stored before.
  if (sequence_distance(base_sequence, p->last_sequence) < (std::int64_t{1} << 30)) {
    return {producer_verdict::duplicate_sequence, std::nullopt,
            fmt::format("producer {} epoch {}: sequences {}..{} were written before (the partition remembers the last "
                        "{} batches only)",
                        producer_id, epoch, base_sequence, last, batches_kept)};
  }
  if (base_sequence != next_sequence(p->last_sequence)) {
    return {producer_verdict::sequence_gap, std::nullopt,
            fmt::format("producer {} epoch {}: sequence {} after {} (expected {})", producer_id, epoch, base_sequence,
                        p->last_sequence, next_sequence(p->last_sequence))};
  }
  return {};
}

void producer_table::record(producer_state& p, std::int16_t epoch, const producer_batch& batch,
                            std::int64_t timestamp_ms) {
  RILL_ASSERT(epoch >= 0 && batch.first_sequence >= 0 && batch.last_sequence >= 0);
  if (epoch != p.epoch) {
    p = producer_state{};
    p.epoch = epoch;
  }
  p.last_sequence = batch.last_sequence;
  p.last_timestamp_ms = std::max(p.last_timestamp_ms, timestamp_ms);
  p.recent.push_back(batch);
  while (p.recent.size() > batches_kept) {
    p.recent.pop_front();
  }
}

void producer_table::record(std::int64_t producer_id, std::int16_t epoch, const producer_batch& batch,
                            std::int64_t timestamp_ms) {
  auto [it, added] = producers_.try_emplace(producer_id);
  if (!added) {
    by_time_.erase({it->second.last_timestamp_ms, producer_id});
  }
  record(it->second, epoch, batch, timestamp_ms);
  by_time_.emplace(it->second.last_timestamp_ms, producer_id);
}

std::vector<producer_table::forgotten> producer_table::trim(std::int64_t expire_before_ms, std::size_t producers_max,
                                                            std::int64_t keep) {
  std::vector<forgotten> out;
  auto forget = [&](std::set<std::pair<std::int64_t, std::int64_t>>::iterator at) {
    auto it = producers_.find(at->second);
    RILL_ASSERT(it != producers_.end(), "producer {} indexed by time but not held", at->second);
    out.push_back({it->first, std::move(it->second)});
    producers_.erase(it);
    return by_time_.erase(at);
  };
  for (auto at = by_time_.begin(); at != by_time_.end() && at->first < expire_before_ms;) {
    at = at->second == keep ? std::next(at) : forget(at);
  }
  for (auto at = by_time_.begin(); producers_.size() > producers_max && at != by_time_.end();) {
    at = at->second == keep ? std::next(at) : forget(at);
  }
  RILL_ASSERT(by_time_.size() == producers_.size());
  return out;
}

void producer_table::stamp_all(std::int64_t timestamp_ms) {
  by_time_.clear();
  for (auto& [id, p] : producers_) {
    p.last_timestamp_ms = timestamp_ms;
    by_time_.emplace(timestamp_ms, id);
  }
}

std::optional<producer_state> producer_table::find(std::int64_t producer_id) const {
  auto it = producers_.find(producer_id);
  return it == producers_.end() ? std::nullopt : std::optional<producer_state>(it->second);
}

void producer_table::set_offset(std::int64_t producer_id, std::int32_t first_sequence, std::int32_t last_sequence,
                                std::int64_t base_offset) {
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) {
    return;
  }
  for (auto& b : it->second.recent) {
    if (b.first_sequence == first_sequence && b.last_sequence == last_sequence) {
      b.base_offset = base_offset;
    }
  }
}

void producer_table::put(std::int64_t producer_id, const std::optional<producer_state>& p) {
  if (auto it = producers_.find(producer_id); it != producers_.end()) {
    by_time_.erase({it->second.last_timestamp_ms, producer_id});
    producers_.erase(it);
  }
  if (p) {
    producers_.emplace(producer_id, *p);
    by_time_.emplace(p->last_timestamp_ms, producer_id);
  }
}

}  // namespace rill::storage
