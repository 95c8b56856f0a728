#pragma once
// sim_network: the simulated network between replicas and clients. Every packet gets a delay drawn from the seed
// (so packets reorder), may be lost or duplicated, and is dropped on a link a partition cuts. Delivery order is
// (time, then send order): one seed, one order.
//
// Invariants: packets are delivered no earlier than they were sent plus the minimum delay; a cut link delivers
// nothing sent while it was cut (what was already in flight still arrives, as on a real network); every container
// iterates in a fixed order.
#include <cstdint>
#include <queue>
#include <set>
#include <vector>

#include "base/random.h"
#include "consensus/message.h"

namespace rill::simulation {

// An endpoint: replicas are 0..replica_count-1; clients are numbered from client_base.
using node_t = std::uint32_t;
inline constexpr node_t client_base = 1000;

struct network_options {
  std::uint32_t delay_min_ticks = 1;
  std::uint32_t delay_spread_ticks = 4;  // delay = min + uniform[0, spread]
  std::uint32_t loss_ppm = 0;
  std::uint32_t duplicate_ppm = 0;
  std::uint32_t capacity = 4096;  // packets in flight at most; beyond, new ones are dropped
  // Per packet: held back 1..delay_spike_ticks_max ticks more (a stream stalled behind a reconnect, a middlebox): a
  // message may then arrive after its sender crashed, restarted, even lost its disk. A stream of its own, so the
  // other draws stay as they were.
  std::uint32_t delay_spike_ppm = 0;
  std::uint32_t delay_spike_ticks_max = 600;
};

struct packet {
  std::uint64_t deliver_at;
  std::uint64_t sequence;
  node_t from;
  node_t to;
  consensus::message m;         // a VSR message (to a replica or a client), or empty for
  std::vector<std::byte> beat;  // a node heartbeat in its wire form (group_host.h), replica to replica
  std::uint64_t group = 0;      // the group a message belongs to (consensus::group_t)
};

class sim_network {
 public:
  sim_network(const network_options& options, std::uint64_t seed)
      : options_(options), rng_(seed), spike_rng_(seed ^ 0x5350'494b'4553'0001ULL) {}

  void send(node_t from, node_t to, consensus::message m, std::uint64_t now, std::uint64_t group = 0);
  // A node heartbeat's bytes: the same delays, loss, duplication and cuts as messages.
  void send_beat(node_t from, node_t to, std::vector<std::byte> beat, std::uint64_t now);
  // Packets due at or before `now`, in delivery order.
  std::vector<packet> deliver(std::uint64_t now);

  // Partitions: a directed link from -> to is cut or not.
  void cut(node_t from, node_t to) { cut_.insert({from, to}); }
  // Cuts every link from a node on one side (side[i]) to one off it, and back unless `one_way`.
  void cut_sides(const std::vector<bool>& side, bool one_way = false) {
    for (std::size_t a = 0; a < side.size(); ++a) {
      for (std::size_t b = 0; b < side.size(); ++b) {
        if (side[a] && !side[b]) {
          cut(static_cast<node_t>(a), static_cast<node_t>(b));
          if (!one_way) {
            cut(static_cast<node_t>(b), static_cast<node_t>(a));
          }
        }
      }
    }
  }
  void heal_all() { cut_.clear(); }
  // The liveness phase's network: every cut healed, nothing lost, duplicated or held back any more (delays stay).
  void calm() {
    heal_all();
    options_.loss_ppm = 0;
    options_.duplicate_ppm = 0;
    options_.delay_spike_ppm = 0;
  }
  [[nodiscard]] bool is_cut(node_t from, node_t to) const { return cut_.contains({from, to}); }

  void set_options(const network_options& o) { options_ = o; }
  [[nodiscard]] const network_options& options() const noexcept { return options_; }
  [[nodiscard]] std::uint64_t sent() const noexcept { return sent_; }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }
  [[nodiscard]] std::size_t in_flight() const noexcept { return queue_.size(); }

 private:
  struct later {
    bool operator()(const packet& a, const packet& b) const {
      return a.deliver_at != b.deliver_at ? a.deliver_at > b.deliver_at : a.sequence > b.sequence;
    }
  };
  void post(packet p, std::uint64_t now);
  void enqueue(const packet& p, std::uint64_t now);

  network_options options_;
  prng rng_;
  prng spike_rng_;
  std::priority_queue<packet, std::vector<packet>, later> queue_;
  std::set<std::pair<node_t, node_t>> cut_;
  std::uint64_t sequence_ = 0;
  std::uint64_t sent_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace rill::simulation
