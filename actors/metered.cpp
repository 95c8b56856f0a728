#include "actors/metered.hpp"

namespace rill::actors {

metrics_registry& metrics_registry::instance() {
  static metrics_registry registry;
  return registry;
}

std::shared_ptr<actor_metrics> metrics_registry::add(caf::actor_id id, std::string kind, std::size_t shard) {
  auto m = std::make_shared<actor_metrics>();
  m->kind = std::move(kind);
  m->shard = shard;
  std::lock_guard<std::mutex> guard(mutex_);
  actors_[id] = m;
  return m;
}

void metrics_registry::remove(caf::actor_id id) {
  std::lock_guard<std::mutex> guard(mutex_);
  actors_.erase(id);
}

std::vector<metrics_registry::sample> metrics_registry::snapshot() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<sample> out;
  out.reserve(actors_.size());
  for (const auto& [id, m] : actors_) {
    out.push_back(sample{id, m->kind, m->shard, m->received.load(), m->processed.load(), m->busy_ns.load()});
  }
  return out;
}

}  // namespace rill::actors
