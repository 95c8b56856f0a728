// reconciler: the steps from what a node runs to what the committed metadata names (see the header).
#include "actors/reconciler.h"

#include <fmt/core.h>

#include "base/assert.h"

namespace rill::actors {
namespace {

const stream_meta* stream_in(const metadata_view& v, std::uint32_t sid, std::uint64_t created_ms) {
  auto s = v.streams.find(sid);
  return s != v.streams.end() && s->second.created_ms == created_ms ? &s->second : nullptr;
}

const topic_meta* topic_in(const metadata_view& v, std::uint32_t sid, std::uint32_t tid, std::uint64_t created_ms) {
  auto s = v.streams.find(sid);
  if (s == v.streams.end()) {
    return nullptr;
  }
  auto t = s->second.topics.find(tid);
  return t != s->second.topics.end() && t->second.created_ms == created_ms ? &t->second : nullptr;
}

reconcile_step step_of(reconcile_kind kind, std::uint64_t ns, std::uint32_t sid, std::uint32_t tid, std::uint32_t id) {
  reconcile_step s;
  s.kind = kind;
  s.ns = ns;
  s.stream_id = sid;
  s.topic_id = tid;
  s.id = id;
  return s;
}

}  // namespace

const char* to_string(reconcile_kind k) noexcept {
  switch (k) {
    case reconcile_kind::destroy_partition:
      return "destroy partition";
    case reconcile_kind::destroy_group:
      return "destroy group";
    case reconcile_kind::remove_topic_data:
      return "remove the data of topic";
    case reconcile_kind::remove_stream_data:
      return "remove the data of stream";
    case reconcile_kind::close_partition:
      return "close partition";
    case reconcile_kind::update_partition:
      return "update the settings of partition";
    case reconcile_kind::spawn_partition:
      return "open partition";
    case reconcile_kind::spawn_group:
      return "open group";
    case reconcile_kind::resize_group:
      return "resize group";
  }
  return "?";
}

std::string reconcile_step::describe() const {
  switch (kind) {
    case reconcile_kind::remove_stream_data:
      return fmt::format("{} {}", to_string(kind), stream_id);
    case reconcile_kind::remove_topic_data:
      return fmt::format("{} {} of stream {}", to_string(kind), topic_id, stream_id);
    default:
      return fmt::format("{} {} of topic {} of stream {}", to_string(kind), id, topic_id, stream_id);
  }
}

std::vector<reconcile_step> plan_reconcile(const metadata_view& desired, const node_inventory& running,
                                           const config::log_config& defaults, const std::string& data_dir,
                                           const node_placement& here) {
  std::vector<reconcile_step> destroys;
  std::vector<reconcile_step> removals;
  std::vector<reconcile_step> closes;
  std::vector<reconcile_step> updates;
  std::vector<reconcile_step> spawns;
  std::vector<reconcile_step> groups;
  std::vector<reconcile_step> resizes;

  // What runs and should not: another incarnation, a partition past its topic's count, a deleted group.
  for (const auto& [ns, p] : running.partitions) {
    const topic_meta* t = topic_in(desired, p.stream_id, p.topic_id, p.topic_created_ms);
    // (A partition deleted and added back is another partition: its old incarnation goes with its data.)
    if (t == nullptr || p.partition_id >= t->config.partitions() || t->partition_created(p.partition_id) != p.created ||
        !here.serves_partition(p.stream_id, p.topic_id, p.partition_id, t->config.replication_factor())) {
      destroys.push_back(step_of(reconcile_kind::destroy_partition, ns, p.stream_id, p.topic_id, p.partition_id));
    } else if (const config::log_config wanted = log_config_for(t->config, defaults); !(p.config == wanted)) {
      if (config::changes_in_place(p.config, wanted)) {
        // Retention or segment rolling: taken by the running partition (a replica keeps serving: issue 38, 10).
        auto u = step_of(reconcile_kind::update_partition, ns, p.stream_id, p.topic_id, p.partition_id);
        u.config = wanted;
        updates.push_back(std::move(u));
      } else {
        closes.push_back(step_of(reconcile_kind::close_partition, ns, p.stream_id, p.topic_id, p.partition_id));
      }
    }
  }
  for (const auto& [ns, g] : running.groups) {
    auto s = desired.streams.find(g.stream_id);
    const topic_meta* t = nullptr;
    if (s != desired.streams.end()) {
      auto ti = s->second.topics.find(g.topic_id);
      t = ti == s->second.topics.end() ? nullptr : &ti->second;
    }
    auto gi = t == nullptr ? decltype(t->groups.end()){} : t->groups.find(g.group_id);
    if (t == nullptr || gi == t->groups.end() || gi->second.created_ms != g.created_ms ||
        !here.serves(g.stream_id, g.topic_id)) {
      destroys.push_back(step_of(reconcile_kind::destroy_group, ns, g.stream_id, g.topic_id, g.group_id));
    } else if (g.partitions != t->config.partitions()) {
      auto r = step_of(reconcile_kind::resize_group, ns, g.stream_id, g.topic_id, g.group_id);
      r.partitions = t->config.partitions();
      resizes.push_back(std::move(r));
    }
  }
  // The data of streams and topics gone (after every actor that held it: destroys run first).
  for (const auto& [key, created_ms] : running.topics) {
    const auto [sid, tid] = key;
    const topic_meta* t = topic_in(desired, sid, tid, created_ms);
    if (t == nullptr || !here.holds(sid, tid, t->config)) {
      auto r = step_of(reconcile_kind::remove_topic_data, 0, sid, tid, 0);
      r.topic_created_ms = created_ms;
      r.paths = {fmt::format("{}/groups/{}/{}", data_dir, sid, tid),
                 fmt::format("{}/streams/{}/topics/{}", data_dir, sid, tid)};
      removals.push_back(std::move(r));
    }
  }
  for (const auto& [sid, created_ms] : running.streams) {
    if (stream_in(desired, sid, created_ms) == nullptr) {
      auto r = step_of(reconcile_kind::remove_stream_data, 0, sid, 0, 0);
      r.stream_created_ms = created_ms;
      r.paths = {fmt::format("{}/groups/{}", data_dir, sid), fmt::format("{}/streams/{}", data_dir, sid)};
      removals.push_back(std::move(r));
    }
  }

  // What should run and does not (or runs with other settings and is reopened).
  for (const auto& [sid, s] : desired.streams) {
    for (const auto& [tid, t] : s.topics) {
      const config::log_config config = log_config_for(t.config, defaults);
      for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
        if (!here.serves_partition(sid, tid, p, t.config.replication_factor())) {
          continue;
        }
        const std::uint64_t ns = partition_namespace(sid, tid, p);
        auto r = running.partitions.find(ns);
        if (r != running.partitions.end() && r->second.topic_created_ms == t.created_ms &&
            r->second.created == t.partition_created(p) &&
            (r->second.config == config || config::changes_in_place(r->second.config, config))) {
          continue;  // (running as it should, or updated in place above)
        }
        auto step = step_of(reconcile_kind::spawn_partition, ns, sid, tid, p);
        step.stream_created_ms = s.created_ms;
        step.topic_created_ms = t.created_ms;
        step.partition_created = t.partition_created(p);
        step.config = config;
        step.replicas = here.replicas(sid, tid, p, t.config.replication_factor());
        spawns.push_back(std::move(step));
      }
      if (!here.serves(sid, tid)) {
        continue;  // its groups are another node's
      }
      if (!here.members.empty() && t.config.replication_factor() > 1) {
        continue;  // a replicated topic's groups have no actor: the coordinators hold them (coordinators.h)
      }
      for (const auto& [gid, g] : t.groups) {
        const std::uint64_t ns = group_namespace(sid, tid, gid);
        auto r = running.groups.find(ns);
        if (r != running.groups.end() && r->second.created_ms == g.created_ms) {
          continue;
        }
        auto step = step_of(reconcile_kind::spawn_group, ns, sid, tid, gid);
        step.stream_created_ms = s.created_ms;
        step.topic_created_ms = t.created_ms;
        step.group_created_ms = g.created_ms;
        step.partitions = t.config.partitions();
        groups.push_back(std::move(step));
      }
    }
  }

  std::vector<reconcile_step> out;
  out.reserve(destroys.size() + removals.size() + closes.size() + updates.size() + spawns.size() + groups.size() +
              resizes.size());
  for (auto* part : {&destroys, &removals, &closes, &updates, &spawns, &groups, &resizes}) {
    for (auto& s : *part) {
      out.push_back(std::move(s));
    }
  }
  return out;
}

void record(node_inventory& running, const reconcile_step& step) {
  switch (step.kind) {
    case reconcile_kind::destroy_partition:
    case reconcile_kind::close_partition:
      running.partitions.erase(step.ns);
      return;
    case reconcile_kind::destroy_group:
      running.groups.erase(step.ns);
      return;
    case reconcile_kind::remove_topic_data:
      running.topics.erase({step.stream_id, step.topic_id});
      return;
    case reconcile_kind::remove_stream_data:
      running.streams.erase(step.stream_id);
      return;
    case reconcile_kind::spawn_partition:
      RILL_ASSERT(!running.partitions.contains(step.ns), "{} while it runs", step.describe());
      running.partitions[step.ns] = running_partition{step.stream_id,        step.topic_id,          step.id,
                                                      step.topic_created_ms, step.partition_created, step.config};
      // Its directories may now hold data of this stream's and topic's incarnation.
      running.streams[step.stream_id] = step.stream_created_ms;
      running.topics[{step.stream_id, step.topic_id}] = step.topic_created_ms;
      return;
    case reconcile_kind::spawn_group:
      RILL_ASSERT(!running.groups.contains(step.ns), "{} while it runs", step.describe());
      running.groups[step.ns] =
          running_group{step.stream_id, step.topic_id, step.id, step.group_created_ms, step.partitions};
      running.streams[step.stream_id] = step.stream_created_ms;
      running.topics[{step.stream_id, step.topic_id}] = step.topic_created_ms;
      return;
    case reconcile_kind::update_partition: {
      auto p = running.partitions.find(step.ns);
      RILL_ASSERT(p != running.partitions.end(), "{} that does not run", step.describe());
      p->second.config = step.config;
      return;
    }
    case reconcile_kind::resize_group: {
      auto g = running.groups.find(step.ns);
      RILL_ASSERT(g != running.groups.end(), "{} that does not run", step.describe());
      g->second.partitions = step.partitions;
      return;
    }
  }
}

task<expected<void>> carry_out(const metadata_view& desired, node_inventory& running,
                               const config::log_config& defaults, const std::string& data_dir,
                               const node_placement& here, reconcile_executor& executor) {
  const auto steps = plan_reconcile(desired, running, defaults, data_dir, here);
  bool resized = false;
  for (const auto& step : steps) {
    if (step.kind == reconcile_kind::resize_group && !resized) {
      executor.before_resize();
      resized = true;
    }
    if (executor.run_now(step)) {
      record(running, step);  // a spawn or a resize: done at once, and it cannot fail
      continue;
    }
    if (auto ran = co_await executor.run(step); !ran) {
      co_return rill::unexpected(ran.error().code(), fmt::format("{}: {}", step.describe(), ran.error().message()));
    }
    record(running, step);
  }
  co_return expected<void>{};
}

}  // namespace rill::actors
