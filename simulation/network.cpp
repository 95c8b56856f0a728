#include "simulation/network.h"

namespace rill::simulation {

void sim_network::send(node_t from, node_t to, consensus::message m, std::uint64_t now, std::uint64_t group) {
  post(packet{0, 0, from, to, std::move(m), {}, group}, now);
}

void sim_network::send_beat(node_t from, node_t to, std::vector<std::byte> beat, std::uint64_t now) {
  post(packet{0, 0, from, to, {}, std::move(beat), 0}, now);
}

void sim_network::post(packet p, std::uint64_t now) {
  ++sent_;
  if (is_cut(p.from, p.to) || rng_.chance_ppm(options_.loss_ppm)) {
    ++dropped_;
    return;
  }
  if (rng_.chance_ppm(options_.duplicate_ppm)) {
    enqueue(p, now);
  }
  enqueue(p, now);
}

void sim_network::enqueue(const packet& p, std::uint64_t now) {
  if (queue_.size() >= options_.capacity) {
    ++dropped_;
    return;
  }
  std::uint64_t delay = options_.delay_min_ticks + rng_.below(std::uint64_t{options_.delay_spread_ticks} + 1);
  if (options_.delay_spike_ppm > 0 && spike_rng_.chance_ppm(options_.delay_spike_ppm)) {
    delay += 1 + spike_rng_.below(options_.delay_spike_ticks_max);
  }
  packet q = p;
  q.deliver_at = now + delay;
  q.sequence = sequence_++;
  queue_.push(std::move(q));
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
