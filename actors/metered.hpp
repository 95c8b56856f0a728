#pragma once
// metered<Base>: the base of every rill actor. Counts the messages an actor receives (on the sender's thread) and
// processes (on its own), and the time it spends processing them. The monitoring issue exposes the registry at
// /metrics and /api; the mailbox depth is received - processed.
#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rill::actors {

struct actor_metrics {
  std::string kind;  // "partition", "connection", ...
  std::size_t shard = 0;
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> processed{0};
  std::atomic<std::uint64_t> busy_ns{0};
};

class metrics_registry {
 public:
  static metrics_registry& instance();
  std::shared_ptr<actor_metrics> add(caf::actor_id id, std::string kind, std::size_t shard);
  void remove(caf::actor_id id);
  struct sample {
    caf::actor_id id;
    std::string kind;
    std::size_t shard;
    std::uint64_t received;
    std::uint64_t processed;
    std::uint64_t busy_ns;
  };
  [[nodiscard]] std::vector<sample> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<caf::actor_id, std::shared_ptr<actor_metrics>> actors_;
};

template <class Base = caf::event_based_actor>
class metered : public Base {
 public:
  metered(caf::actor_config& cfg, std::string kind, std::size_t shard)
      : Base(cfg), metrics_(metrics_registry::instance().add(this->id(), std::move(kind), shard)) {}
  ~metered() override { metrics_registry::instance().remove(this->id()); }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    metrics_->received.fetch_add(1, std::memory_order_relaxed);
    Base::enqueue(std::move(ptr), eu);
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    const auto start = std::chrono::steady_clock::now();
    auto result = Base::consume(x);
    if (result != caf::invoke_message_result::skipped) {
      metrics_->processed.fetch_add(1, std::memory_order_relaxed);
    }
    metrics_->busy_ns.fetch_add(
        static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
        std::memory_order_relaxed);
    return result;
  }

  [[nodiscard]] const actor_metrics& metrics() const noexcept { return *metrics_; }

 private:
  std::shared_ptr<actor_metrics> metrics_;
};

}  // namespace rill::actors
