#include "simulation/network.h"

namespace rill::simulation {

void sim_network::send(node_t from, node_t to, consensus::message m, std::uint64_t now) {
  ++sent_;
  if (is_cut(from, to) || rng_.chance_ppm(options_.loss_ppm)) {
    ++dropped_;
    return;
  }
  if (rng_.chance_ppm(options_.duplicate_ppm)) {
    enqueue(from, to, m, now);
  }
  enqueue(from, to, m, now);
}

void sim_network::enqueue(node_t from, node_t to, const consensus::message& m, std::uint64_t now) {
  if (queue_.size() >= options_.capacity) {
    ++dropped_;
    return;
  }
  const std::uint64_t delay = options_.delay_min_ticks + rng_.below(std::uint64_t{options_.delay_spread_ticks} + 1);
  queue_.push(packet{now + delay, sequence_++, from, to, m});
}

std::vector<packet> sim_network::deliver(std::uint64_t now) {
  std::vector<packet> out;
  while (!queue_.empty() && queue_.top().deliver_at <= now) {
    out.push_back(queue_.top());
    queue_.pop();
  }
  return out;
}

}  // namespace rill::simulation
