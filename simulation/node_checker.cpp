#include "simulation/node_checker.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"

namespace rill::simulation {

std::string partition_key::describe() const {
  return fmt::format("partition {} of topic {}/{} (created {}, incarnation {})", partition, stream, topic,
                     topic_created_ms, incarnation);
}

std::string partition_key::tag() const {
  return fmt::format("{}.{}.{}.{}.{}", stream, topic, topic_created_ms, partition, incarnation);
}

void node_checker::fail(std::uint64_t tick, std::string what) {
  ++violations_;
  if (!violation_) {
    violation_ = fmt::format("tick {}: {}", tick, what);
  }
}

void node_checker::on_ack(std::uint64_t tick, const partition_key& p, record_id first, std::int64_t base_offset,
                          std::uint32_t records) {
  ++acks_;
  auto& ends = ack_ends_[p];
  const std::int64_t end = std::max(ends.empty() ? 0 : ends.back().second, base_offset + records);
  RILL_ASSERT(ends.empty() || ends.back().first <= tick);
  ends.emplace_back(tick, end);
  auto& offsets = offsets_[p];
  auto& acked = acked_[p];
  for (std::uint32_t i = 0; i < records; ++i) {
    const record_id id{first.producer, first.sequence + i};
    const std::int64_t offset = base_offset + i;
    if (auto it = acked.find(id); it != acked.end() && it->second != offset) {
      fail(tick, fmt::format("{}: producer {} sequence {} acknowledged at offset {} and at offset {}", p.describe(),
                             id.producer, id.sequence, it->second, offset));
    }
    acked[id] = offset;
    auto [at, fresh] = offsets.emplace(offset, id);
    if (!fresh && at->second != id) {
      fail(tick, fmt::format("{}: offset {} acknowledged for producer {} sequence {}, but it names producer {} "
                             "sequence {}",
                             p.describe(), offset, id.producer, id.sequence, at->second.producer, at->second.sequence));
    }
  }
}

void node_checker::on_poll(std::uint64_t tick, std::uint32_t node, const partition_key& p,
                           std::int64_t high_watermark) {
  const auto it = ack_ends_.find(p);
  if (it == ack_ends_.end() || tick < stale_ticks_max) {
    return;
  }
  const auto& ends = it->second;
  const std::uint64_t before = tick - stale_ticks_max;
  auto at =
      std::upper_bound(ends.begin(), ends.end(), before, [](std::uint64_t t, const auto& e) { return t < e.first; });
  if (at == ends.begin()) {
    return;
  }
  --at;
  if (at->second > high_watermark) {
    fail(tick, fmt::format("node {}'s primary of {} served a poll issued at tick {} with high watermark {}, but offset "
                           "{} was acknowledged by tick {}: a stale primary still serving",
                           node, p.describe(), tick, high_watermark, at->second - 1, at->first));
  }
}

void node_checker::on_read(std::uint64_t tick, std::uint32_t node, const partition_key& p, std::int64_t offset,
                           record_id id, const std::string& tag) {
  if (tag != p.tag()) {
    fail(tick, fmt::format("node {} read, at offset {} of {}, a record written to another partition ({}): a "
                           "deleted partition's records, or an old replica's, are readable",
                           node, offset, p.describe(), tag));
    return;
  }
  auto [at, fresh] = offsets_[p].emplace(offset, id);
  if (!fresh && at->second != id) {
    fail(tick,
         fmt::format("node {} read producer {} sequence {} at offset {} of {}, which names producer {} sequence "
                     "{}",
                     node, id.producer, id.sequence, offset, p.describe(), at->second.producer, at->second.sequence));
  }
}

void node_checker::on_offset_stored(std::uint64_t tick, const std::string& consumer, const partition_key& p,
                                    std::int64_t offset, bool reset) {
  (void)tick;
  auto& floor = floor_[{consumer, p}];
  floor = reset ? offset : std::max(floor, offset);
}

void node_checker::on_offset_reset_unknown(const std::string& consumer, const partition_key& p, std::int64_t offset) {
  if (auto it = floor_.find({consumer, p}); it != floor_.end()) {
    it->second = std::min(it->second, offset);
  }
}

void node_checker::on_group_delivery(std::uint64_t issued, std::uint64_t tick, const std::string& group,
                                     const std::string& member, std::uint64_t generation, const partition_key& p,
                                     bool owned, std::int64_t start, std::int64_t end, std::int64_t log_start,
                                     bool others_in_flight) {
  if (!owned) {
    fail(tick, fmt::format("group {}: member {} (generation {}) was delivered offsets [{}, {}) of {} by a poll issued "
                           "at tick {}, when the committed state had already taken that partition from it: two "
                           "readers of one partition",
                           group, member, generation, start, end, p.describe(), issued));
  }
  auto& done = delivered_end_[{group, p}];
  // After a poll whose outcome is unknown, the group may have committed whatever that poll read (how far is not
  // known): the next delivery may start anywhere; the check resumes from its end.
  const bool unknown = uncertain_.erase({group, p}) > 0 || others_in_flight;
  if (!unknown && start > std::max(done, log_start)) {
    fail(tick, fmt::format("group {}: member {} was delivered {} from offset {}, though the group had been delivered "
                           "only up to {} (the log starts at {}): offsets [{}, {}) skipped",
                           group, member, p.describe(), start, done, log_start, std::max(done, log_start), start));
  }
  done = std::max(done, end);
}

void node_checker::on_group_uncertain(const std::string& group, const partition_key& p) {
  uncertain_.insert({group, p});
}

void node_checker::on_group_offsets(std::uint64_t tick, const std::string& group,
                                    const std::vector<std::optional<std::uint64_t>>& offsets) {
  auto& floor = group_floor_[group];
  floor.resize(std::min(floor.size(), offsets.size()));  // partitions removed: their offsets go with them
  for (std::size_t p = 0; p < offsets.size(); ++p) {
    if (p >= floor.size()) {
      floor.push_back(offsets[p]);
      continue;
    }
    if (!offsets[p]) {
      floor[p].reset();  // (removed, and added back, by resizes this observation skipped)
      continue;
    }
    if (floor[p] && *offsets[p] < *floor[p]) {
      fail(tick, fmt::format("group {}: partition {}'s committed offset went back from {} to {}", group, p, *floor[p],
                             *offsets[p]));
    }
    floor[p] = std::max(floor[p].value_or(0), *offsets[p]);
  }
}

void node_checker::on_offset_read(std::uint64_t tick, const std::string& consumer, const partition_key& p,
                                  std::optional<std::int64_t> offset) {
  auto it = floor_.find({consumer, p});
  if (it == floor_.end()) {
    return;
  }
  if (!offset || *offset < it->second) {
    fail(tick,
         fmt::format("consumer '{}' of {}: its stored offset went back to {} (it stored {} and reset nothing)",
                     consumer, p.describe(), offset ? fmt::format("{}", *offset) : std::string("none"), it->second));
  }
}

void node_checker::check_log(std::uint64_t tick, std::uint32_t node, const partition_key& p, std::int64_t start,
                             const std::vector<std::pair<std::int64_t, record_id>>& records) {
  std::map<record_id, std::int64_t> seen;
  std::int64_t expected = start;
  for (const auto& [offset, id] : records) {
    if (offset != expected) {
      fail(tick, fmt::format("node {}'s log of {}: offset {} follows {} (offsets must be dense)", node, p.describe(),
                             offset, expected - 1));
      return;
    }
    ++expected;
    if (!seen.emplace(id, offset).second) {
      fail(tick, fmt::format("node {}'s log of {}: producer {} sequence {} is there twice (offsets {} and {})", node,
                             p.describe(), id.producer, id.sequence, seen[id], offset));
      return;
    }
  }
  if (auto a = acked_.find(p); a != acked_.end()) {
    for (const auto& [id, offset] : a->second) {
      if (offset < start) {
        continue;  // (retention removed it)
      }
      auto s = seen.find(id);
      if (s == seen.end()) {
        fail(tick, fmt::format("node {}'s log of {}: producer {} sequence {}, acknowledged at offset {}, is not there",
                               node, p.describe(), id.producer, id.sequence, offset));
        return;
      }
      if (s->second != offset) {
        fail(tick, fmt::format("node {}'s log of {}: producer {} sequence {}, acknowledged at offset {}, is at {}",
                               node, p.describe(), id.producer, id.sequence, offset, s->second));
        return;
      }
    }
  }
}

}  // namespace rill::simulation
