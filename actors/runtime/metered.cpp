#include "actors/runtime/metered.hpp"

namespace rill::actors {

std::atomic<bool>& timing_enabled() noexcept {
  static std::atomic<bool> enabled{true};
  return enabled;
}

metrics_registry& metrics_registry::instance() {
  static metrics_registry registry;
  return registry;
}

std::shared_ptr<actor_metrics> metrics_registry::add(caf::actor_id id, std::string kind, std::size_t shard) {
  auto m = std::make_shared<actor_metrics>();
  m->kind = std::move(kind);
  m->shard = shard;
  std::lock_guard<std::mutex> guard(mutex_);
  actors_[id] = entry{m, {}, nullptr, nullptr, nullptr};
  return m;
}

void metrics_registry::remove(caf::actor_id id) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = actors_.find(id);
  if (it == actors_.end()) {
    return;  // removed at cleanup already
  }
  const auto& m = *it->second.metrics;
  retired_busy_ns_[m.shard] += m.busy_ns.load(std::memory_order_relaxed);
  actors_.erase(it);
}

std::uint64_t metrics_registry::retired_busy_ns(std::size_t shard) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = retired_busy_ns_.find(shard);
  return it == retired_busy_ns_.end() ? 0 : it->second;
}

void metrics_registry::name(caf::actor_id id, std::string name) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto it = actors_.find(id); it != actors_.end()) {
    it->second.name = std::move(name);
  }
}

void metrics_registry::attach(caf::actor_id id, std::shared_ptr<const partition_metrics> m) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto it = actors_.find(id); it != actors_.end()) {
    it->second.partition = std::move(m);
  }
}

void metrics_registry::attach(caf::actor_id id, std::shared_ptr<const connection_metrics> m) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto it = actors_.find(id); it != actors_.end()) {
    it->second.connection = std::move(m);
  }
}

void metrics_registry::attach(caf::actor_id id, std::shared_ptr<const group_metrics> m) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto it = actors_.find(id); it != actors_.end()) {
    it->second.group = std::move(m);
  }
}

std::uint64_t message_type_key(const caf::mailbox_element& x) noexcept {
  if (x.mid.is_response()) {
    return actor_metrics::key_reply;
  }
  const auto& content = x.content();
  if (!content.empty() && content.match_element<caf::atom_value>(0)) {
    return static_cast<std::uint64_t>(content.get_as<caf::atom_value>(0));
  }
  return actor_metrics::key_other;
}

std::vector<actor_sample> metrics_registry::snapshot() const {
  std::vector<std::pair<caf::actor_id, entry>> live;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    live.assign(actors_.begin(), actors_.end());
  }
  std::vector<actor_sample> out;
  out.reserve(live.size());
  for (const auto& [id, e] : live) {
    const auto& m = *e.metrics;
    actor_sample s;
    s.id = id;
    s.kind = m.kind;
    s.name = e.name;
    s.shard = m.shard;
    s.received = m.received.load(std::memory_order_relaxed);
    s.processed = m.processed.load(std::memory_order_relaxed);
    s.busy_ns = m.busy_ns.load(std::memory_order_relaxed);
    for (const auto& slot : m.types) {
      const auto key = slot.key.load(std::memory_order_acquire);
      if (key == 0) {
        break;
      }
      std::string type = key == actor_metrics::key_reply      ? "reply"
                         : key == actor_metrics::key_other    ? "other"
                         : key == actor_metrics::key_overflow ? "overflow"
                                                              : caf::to_string(static_cast<caf::atom_value>(key));
      s.types.push_back(message_type_sample{std::move(type), slot.latency.read()});
    }
    auto load = [](const auto& a) { return a.load(std::memory_order_relaxed); };
    if (const auto* p = e.partition.get()) {
      s.partition = partition_sample{p->stream_id,
                                     p->topic_id,
                                     p->partition_id,
                                     load(p->log_start),
                                     load(p->high_watermark),
                                     load(p->log_end),
                                     load(p->segments),
                                     load(p->bytes),
                                     load(p->produce_errors),
                                     load(p->retention_runs),
                                     p->produce.read(),
                                     p->write.read(),
                                     p->sync.read(),
                                     load(p->fenced),
                                     load(p->recoveries),
                                     load(p->under_replicated),
                                     load(p->records_read),
                                     load(p->bytes_read),
                                     {},
                                     {}};
    }
    if (const auto* c = e.connection.get()) {
      s.connection = connection_sample{load(c->requests),
                                       load(c->errors),
                                       load(c->bytes_in),
                                       load(c->bytes_out),
                                       load(c->recv_buffer_bytes),
                                       load(c->produce_bytes),
                                       load(c->produce_copied_bytes),
                                       load(c->recv_copied_bytes)};
    }
    if (const auto* g = e.group.get()) {
      group_sample gs{g->stream_id, g->topic_id, g->name, load(g->members), load(g->generation), load(g->rebalances),
                      {},           {},          {}};
      std::lock_guard<std::mutex> guard(g->mutex);
      gs.committed = g->committed;
      s.group = std::move(gs);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rill::actors
