#pragma once
// metered<Base>: the base of every rill actor. Counts the messages an actor receives (on the sender's thread) and
// processes (on its own), the time it spends processing them, and a latency histogram per message type (the atom a
// message starts with; replies to its own requests count as "reply"). The registry lists every live actor's metrics
// for /metrics and /api (actors/runtime/metrics.h); the mailbox depth is received - processed.
#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/runtime/metrics.h"

namespace rill::actors {

class metrics_registry {
 public:
  static metrics_registry& instance();
  std::shared_ptr<actor_metrics> add(caf::actor_id id, std::string kind, std::size_t shard);
  void remove(caf::actor_id id);
  // A readable name for an actor ("stream/topic/partition", a peer address, ...), shown as a label.
  void name(caf::actor_id id, std::string name);
  // What a partition, connection or group actor publishes beside its actor metrics.
  void attach(caf::actor_id id, std::shared_ptr<const partition_metrics> m);
  void attach(caf::actor_id id, std::shared_ptr<const connection_metrics> m);
  void attach(caf::actor_id id, std::shared_ptr<const group_metrics> m);
  [[nodiscard]] std::vector<actor_sample> snapshot() const;
  // Busy time of the shard's actors that are gone (so that a shard's total never goes down).
  [[nodiscard]] std::uint64_t retired_busy_ns(std::size_t shard) const;

 private:
  struct entry {
    std::shared_ptr<actor_metrics> metrics;
    std::string name;
    std::shared_ptr<const partition_metrics> partition;
    std::shared_ptr<const connection_metrics> connection;
    std::shared_ptr<const group_metrics> group;
  };
  mutable std::mutex mutex_;
  std::map<caf::actor_id, entry> actors_;
  std::map<std::size_t, std::uint64_t> retired_busy_ns_;  // by shard
};

// The type key of a message: its leading atom, or a reply / other.
std::uint64_t message_type_key(const caf::mailbox_element& x) noexcept;

// Whether actors time the messages they handle (runtime.actor_metrics; set once at start).
std::atomic<bool>& timing_enabled() noexcept;

template <class Base = caf::event_based_actor>
class metered : public Base {
 public:
  metered(caf::actor_config& cfg, std::string kind, std::size_t shard)
      : Base(cfg), metrics_(metrics_registry::instance().add(this->id(), std::move(kind), shard)) {}
  ~metered() override { metrics_registry::instance().remove(this->id()); }

  // Gone from the metrics when the actor terminates, not when its object is freed (a timer may hold a handle for a
  // while): a respawned partition or group never shows twice.
  bool cleanup(caf::error&& reason, caf::execution_unit* host) override {
    metrics_registry::instance().remove(this->id());
    return Base::cleanup(std::move(reason), host);
  }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    metrics_->received.fetch_add(1, std::memory_order_relaxed);
    Base::enqueue(std::move(ptr), eu);
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    if (!timing_enabled().load(std::memory_order_relaxed)) {
      auto result = Base::consume(x);
      if (result != caf::invoke_message_result::skipped) {
        bump(metrics_->processed);
      }
      return result;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto key = message_type_key(x);
    auto result = Base::consume(x);
    if (result != caf::invoke_message_result::skipped) {
      metrics_->handled(key, std::chrono::steady_clock::now() - start);
    }
    return result;
  }

  [[nodiscard]] const actor_metrics& metrics() const noexcept { return *metrics_; }

 protected:
  void set_metrics_name(std::string name) { metrics_registry::instance().name(this->id(), std::move(name)); }
  template <class M>
  void attach_metrics(std::shared_ptr<const M> m) {
    metrics_registry::instance().attach(this->id(), std::move(m));
  }

 private:
  std::shared_ptr<actor_metrics> metrics_;
};

}  // namespace rill::actors
