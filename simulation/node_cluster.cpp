#include "simulation/node_cluster.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>

#include "actors/coordinator_requests.h"
#include "actors/coordinators.h"
#include "actors/group_handlers.h"
#include "actors/metadata_handlers.h"
#include "actors/metadata_machine.h"
#include "actors/partition_replica.h"
#include "actors/reconciler.h"
#include "base/assert.h"
#include "base/clock.h"
#include "base/elapsed_clock.h"
#include "consensus/cluster_group.h"
#include "consensus/group_host.h"
#include "simulation/node_checker.h"
#include "simulation/node_workload.h"
#include "simulation/sim_disk.h"
#include "storage/buffer_pool.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/io/run.h"
#include "storage/partition_log.h"

namespace rill::simulation {
namespace {
constexpr std::uint64_t cluster_id = 7;
constexpr std::uint64_t tick_ns = 10'000'000;  // a tick is rilld's replica tick: 10 ms
constexpr const char* data_dir = "/data";
constexpr consensus::group_t metadata_group{0};  // (as rilld's: group 0 is the metadata group)
// The journals' rings here (check_ack_durable finds a prepare's slot by them): the runs' commands are small.
constexpr std::uint64_t metadata_journal_slots = 256;
constexpr std::uint32_t metadata_slot_bytes = 8 * 1024;
constexpr std::uint64_t coordinator_journal_slots = 128;
constexpr std::uint32_t coordinator_slot_bytes = 8 * 1024;
constexpr std::uint32_t partition_journal_slots = 128;  // (partition slots: partition_replica::journal_slot_bytes)

config::log_config log_defaults() {
  config::log_config c;
  c.segment_bytes = 1024 * 1024;  // the least allowed: runs write far less; segments roll by age
  c.segment_ms = 2'000;
  c.preallocate_bytes = 0;
  return c;
}
}  // namespace

// One simulated node: its disk, clock and network endpoint, and what rilld runs on it above the replicas.
struct node_cluster::node {
  std::size_t index = 0;  // its endpoint on the simulated network
  consensus::node_t id;   // index + 1
  bool up = false;
  bool lost = false;  // its disk was lost: formatted anew, its replicas start recovering
  std::uint64_t restart_at = 0;
  std::uint64_t incarnation = 0;                                // process starts
  std::shared_ptr<bool> alive = std::make_shared<bool>(false);  // this process's
  std::unique_ptr<sim_disk> disk;
  manual_clock clk;
  std::unique_ptr<storage::buffer_pool> pool;  // the process's (its remains keep buffers out)
  storage::collecting_reporter reporter;
  std::unique_ptr<node_net> net;
  std::unique_ptr<consensus::group_host> host;
  std::unique_ptr<actors::metadata_machine> sm;
  std::unique_ptr<consensus::cluster_group> meta;  // null until open
  std::unique_ptr<elapsed_clock> stamps;           // the coordinators' time stamps (rilld's metadata actor's)
  std::unique_ptr<actors::coordinators> coords;    // null until open (after meta)
  std::uint64_t group_incarnation = 0;             // the metadata group's and coordinators' options.incarnation
  actors::node_inventory running;
  std::map<std::uint64_t, std::unique_ptr<actors::partition_replica>> partitions;  // by namespace
  std::map<std::uint64_t, std::uint64_t> group_ns;                                 // partition group id -> namespace
  std::vector<std::unique_ptr<actors::partition_replica>> closing;                 // closed by a reconcile step
  std::uint64_t carried_out = 0;  // the metadata op the inventory was last planned from
  bool reconciling = false;
  bool reconcile_again = false;
  // Its metadata replica has applied its view's head once since the process started: before, its applied state may
  // be older than what the node carried out before it crashed, and a pass on it would bring deleted partitions back
  // (and take newer ones' directories for leftovers). As rilld's metadata actor waits.
  bool meta_ready = false;
  std::uint64_t reconcile_due = 0;    // after a failed pass
  bool restart_now = false;           // its process exits at the next step (a failed start, a fence)
  bool fence_restart = false;         // ... because its metadata group fenced
  std::int64_t skew_ms = 0;           // its wall clock's steps since its process started (NTP sets it right at a start)
  elapsed_clock::anchor stamps_from;  // its process's start
  // What its dead processes ran. A process's death frees nothing and resumes nothing: its objects stay where they
  // were, never called again (coroutines suspended in them included), and are leaked at the end of the run (rill-sim
  // runs each seed in a child process). Destroying them instead would free what suspended frames still point at.
  struct remains {
    std::map<std::uint64_t, std::unique_ptr<actors::partition_replica>> partitions;
    std::vector<std::unique_ptr<actors::partition_replica>> closing;
    std::unique_ptr<consensus::cluster_group> meta;
    std::unique_ptr<actors::coordinators> coords;
    std::unique_ptr<elapsed_clock> stamps;
    std::unique_ptr<actors::metadata_machine> sm;
    std::unique_ptr<consensus::group_host> host;
    std::unique_ptr<storage::buffer_pool> pool;
  };
  std::vector<remains> dead;
};

class node_cluster::node_net final : public consensus::host_transport {
 public:
  node_net(node_cluster& c, node& n) : cluster_(c), node_(n) {}
  void send(consensus::node_t to, consensus::group_t group, consensus::message m) override {
    if (!node_.up) {
      return;
    }
    if (m.h.cmd == consensus::command::prepare_ok) {
      cluster_.check_ack_durable(node_, group.value(), m);
    }
    cluster_.trace_.mix((std::uint64_t{node_.index} << 56) ^ (std::uint64_t{to.value()} << 48) ^
                        (static_cast<std::uint64_t>(m.h.cmd) << 40) ^ m.h.op);
    cluster_.network_.send(static_cast<node_t>(node_.index), to.value() - 1, std::move(m), cluster_.now_,
                           group.value());
  }
  void send(consensus::node_t to, const consensus::node_heartbeat& beat) override {
    if (node_.up) {
      cluster_.network_.send_beat(static_cast<node_t>(node_.index), to.value() - 1, consensus::encode(beat),
                                  cluster_.now_);
    }
  }

 private:
  node_cluster& cluster_;
  node& node_;
};

// The node as the executor of reconcile steps: partition replicas on its disk (rilld: actors on their shards).
class node_cluster::executor final : public actors::reconcile_executor {
 public:
  // `alive`: the process the pass runs in (the node may have restarted since: then nothing more runs).
  executor(node_cluster& c, node& n, std::shared_ptr<bool> alive) : cluster_(c), node_(n), alive_(std::move(alive)) {}

  bool run_now(const actors::reconcile_step& step) override {
    using actors::reconcile_kind;
    if (!*alive_) {
      return false;  // (its process died under the pass: run() refuses, and the pass ends)
    }
    if (step.kind == reconcile_kind::spawn_group || step.kind == reconcile_kind::resize_group) {
      return true;  // groups of replicated topics are the coordinators' (no group actor runs)
    }
    if (step.kind == reconcile_kind::update_partition) {
      if (auto it = node_.partitions.find(step.ns); it != node_.partitions.end()) {
        it->second->update_config(step.config);
        ++cluster_.result_.settings_updates;
      }
      return true;
    }
    if (step.kind != reconcile_kind::spawn_partition) {
      return false;
    }
    RILL_ASSERT(!step.replicas.empty(), "{}: the simulated nodes run replicated topics only", step.describe());
    ++cluster_.result_.reconcile_steps;
    ++cluster_.result_.partitions_hosted;
    actors::partition_replica_options o;
    o.dir = actors::partition_dir(data_dir, step.stream_id, step.topic_id, step.id);
    o.stream_id = step.stream_id;
    o.topic_id = step.topic_id;
    o.partition_id = step.id;
    o.log.config = step.config;
    const std::uint64_t group =
        cluster_.options_.bugs.partition_id_reused
            ? actors::partition_group_id(step.stream_id, step.topic_id, step.topic_created_ms, step.id, 0)
            : actors::partition_group_id(step.stream_id, step.topic_id, step.topic_created_ms, step.id,
                                         step.partition_created);
    o.group = consensus::group_t(group);
    for (auto m : step.replicas) {
      o.members.push_back(consensus::node_t(static_cast<std::uint32_t>(m)));
    }
    o.self = node_.id;
    o.journal_slots = partition_journal_slots;
    o.recovering = node_.lost;
    o.settings.consumers_max = 64;
    o.settings.producers_max = 1'000;
    o.checkpoint_region_bytes = 2 * 1024 * 1024;  // (the sim disk keeps files whole: see the option)
    o.retention_ticks = 300;
    o.reopen_ticks = 20;
    o.tick_ms = tick_ns / 1'000'000;
    o.bug_stamps_follow_wall = cluster_.options_.bugs.stamps_follow_wall;
    o.bug_primary_never_silenced = cluster_.options_.bugs.primary_never_silenced;
    o.bug_reads_while_copying = cluster_.options_.bugs.reads_while_copying;
    o.seed = [&c = cluster_] { return c.rng_.next(); };
    actors::partition_replica_callbacks cb;
    if (cluster_.debug_) {
      cb.notice = [&c = cluster_, id = node_.id](const std::string& line) {
        fmt::print("{} node {}: {}\n", c.now_, id.value(), line);
      };
    }
    auto r = std::make_unique<actors::partition_replica>(
        std::move(o),
        actors::partition_replica_env{*node_.disk, *node_.pool, node_.clk, node_.reporter, *node_.net,
                                      node_.stamps_from},
        std::move(cb));
    r->start();
    RILL_ASSERT(!node_.partitions.contains(step.ns), "{}: node {} runs a replica of it already", step.describe(),
                node_.id.value());
    node_.group_ns[group] = step.ns;
    node_.partitions[step.ns] = std::move(r);
    return true;
  }

  task<expected<void>> run(const actors::reconcile_step& step) override {
    using actors::reconcile_kind;
    auto alive = alive_;
    if (!*alive) {
      co_return rill::unexpected(make_error_code(storage::errc::closed), "the node crashed");
    }
    ++cluster_.result_.reconcile_steps;
    if (cluster_.debug_) {
      fmt::print("{} node {}: {}\n", cluster_.now_, node_.id.value(), step.describe());
    }
    switch (step.kind) {
      case reconcile_kind::destroy_partition:
      case reconcile_kind::close_partition: {
        const bool destroy = step.kind == reconcile_kind::destroy_partition;
        auto it = node_.partitions.find(step.ns);
        if (it == node_.partitions.end()) {
          if (!destroy) {
            co_return expected<void>{};
          }
          co_return co_await storage::remove_tree(
              *node_.disk, actors::partition_dir(data_dir, step.stream_id, step.topic_id, step.id), 1 << 20);
        }
        // Kept by the node while it closes (a dead process's closing replicas stay with its remains).
        actors::partition_replica* r = it->second.get();
        node_.closing.push_back(std::move(it->second));
        node_.partitions.erase(it);
        std::erase_if(node_.group_ns, [&](const auto& kv) { return kv.second == step.ns; });
        auto closed = co_await r->close(destroy);
        if (!*alive) {
          co_return rill::unexpected(make_error_code(storage::errc::closed), "the node crashed");
        }
        cluster_.count_reopens(*r);
        std::erase_if(node_.closing, [r](const auto& p) { return p.get() == r; });
        co_return closed;
      }
      case reconcile_kind::destroy_group:
        co_return co_await storage::remove_tree(
            *node_.disk, actors::group_dir(data_dir, step.stream_id, step.topic_id, step.id), 1 << 20);
      case reconcile_kind::remove_topic_data:
      case reconcile_kind::remove_stream_data:
        for (const auto& path : step.paths) {
          RILL_CO_TRY_VOID(co_await storage::remove_tree(*node_.disk, path, 1 << 20));
        }
        co_return expected<void>{};
      default:
        RILL_UNREACHABLE("{}: not a step that waits", step.describe());
    }
  }

 private:
  node_cluster& cluster_;
  node& node_;
  std::shared_ptr<bool> alive_;
};

node_cluster::node_cluster(const node_cluster_options& options, trace& t)
    : options_(options),
      trace_(t),
      rng_(options.seed),
      network_(options.network, rng_.next()),
      checker_(std::make_unique<node_checker>()),
      debug_(std::getenv("RILL_SIM_DEBUG") != nullptr) {
  RILL_ASSERT(options_.nodes >= 3 && options_.nodes <= 5, "{} nodes: the node simulator runs 3 to 5", options_.nodes);
  storage::set_bug_dirs_trust_existing(options_.bugs.dirs_trust_existing);  // (process-wide: undone by the destructor)
  for (std::size_t i = 0; i < options_.nodes; ++i) {
    auto n = std::make_unique<node>();
    n->index = i;
    n->id = consensus::node_t(static_cast<std::uint32_t>(i + 1));
    sim_disk_faults f;
    f.latency_ns_min = 20'000;
    f.latency_ns_max = 2'000'000;
    f.sync_error_ppm = options_.sync_error_ppm;
    n->disk = std::make_unique<sim_disk>(rng_.next(), f, &n->clk);
    n->net = std::make_unique<node_net>(*this, *n);
    nodes_.push_back(std::move(n));
  }
  workload_ = std::make_unique<node_workload>(*this, rng_.next());
  for (auto& n : nodes_) {
    start(*n);
  }
}

node_cluster::~node_cluster() {
  storage::set_bug_dirs_trust_existing(false);
  for (auto& n : nodes_) {
    if (n->up) {
      crash(*n, true);  // (halts and drains the disk; what ran joins the remains)
    }
    for (auto& r : n->dead) {
      for (auto& [ns, p] : r.partitions) {
        (void)p.release();
      }
      for (auto& p : r.closing) {
        (void)p.release();
      }
      (void)r.meta.release();
      (void)r.coords.release();
      (void)r.stamps.release();
      (void)r.sm.release();
      (void)r.host.release();
      (void)r.pool.release();
    }
  }
}

std::vector<std::uint64_t> node_cluster::member_ids() const {
  std::vector<std::uint64_t> out;
  for (const auto& m : nodes_) {
    out.push_back(m->id.value());
  }
  return out;
}

bool node_cluster::serving(std::size_t i) const {
  const node& n = *nodes_.at(i);
  return n.up && n.meta != nullptr;
}

actors::partition_replica* node_cluster::replica_at(std::size_t i, std::uint64_t ns) const {
  const node& n = *nodes_.at(i);
  if (!n.up) {
    return nullptr;
  }
  auto it = n.partitions.find(ns);
  return it == n.partitions.end() ? nullptr : it->second.get();
}

std::uint64_t node_cluster::process_at(std::size_t i) const {
  const node& n = *nodes_.at(i);
  return n.up ? n.incarnation : 0;
}

actors::coordinators* node_cluster::coordinators_at(std::size_t i) const {
  const node& n = *nodes_.at(i);
  return n.up ? n.coords.get() : nullptr;
}

std::shared_ptr<const actors::metadata_view> node_cluster::view_at(std::size_t i) const {
  const node& n = *nodes_.at(i);
  if (!n.up || n.meta == nullptr) {
    return nullptr;
  }
  return n.sm->state().view();
}

std::uint64_t node_cluster::applied_at(std::size_t i) const {
  const node& n = *nodes_.at(i);
  return n.up && n.meta != nullptr ? n.meta->replica().commit_min().value() : 0;
}

void node_cluster::submit_metadata(std::size_t i, std::vector<std::byte> command,
                                   std::function<void(bool applied)> done) {
  node& n = *nodes_.at(i);
  RILL_ASSERT(n.up && n.meta != nullptr);
  auto job = [](consensus::cluster_group* meta, std::vector<std::byte> body) -> task<bool> {
    auto r = co_await meta->submit(actors::operation_metadata_command, std::move(body));
    if (!r) {
      co_return false;
    }
    co_return actors::metadata_machine::decode_reply(r->reply).has_value();
  };
  spawn(job(n.meta.get(), std::move(command)), std::move(done));
}

void node_cluster::start(node& n) {
  RILL_ASSERT(!n.up);
  ++n.incarnation;
  n.alive = std::make_shared<bool>(true);
  n.up = true;
  n.carried_out = 0;
  n.meta_ready = false;
  n.reconciling = false;
  n.reconcile_again = false;
  n.reconcile_due = 0;
  n.pool = std::make_unique<storage::buffer_pool>();
  n.clk.skew_wall_ms(-n.skew_ms);  // (the machine boots with its clock set right)
  n.skew_ms = 0;
  n.stamps_from = elapsed_clock::anchor_of(n.clk);
  consensus::host_options ho;
  ho.cluster = cluster_id;
  ho.node = n.id;
  ho.heartbeat_ticks = 5;
  ho.peer_timeout_ticks = 20;
  n.host = std::make_unique<consensus::group_host>(ho, *n.net);
  n.sm = std::make_unique<actors::metadata_machine>();
  consensus::cluster_group_options go;
  go.cluster = cluster_id;
  go.group = metadata_group;
  for (const auto& m : nodes_) {
    go.members.push_back(m->id);
  }
  go.self = n.id;
  go.recovering = n.lost;
  go.incarnation = n.lost ? now_ + 1 : 0;
  n.group_incarnation = go.incarnation;
  go.journal = consensus::journal_options{metadata_journal_slots, metadata_slot_bytes};
  go.snapshot_bytes_max = 4 * 1024 * 1024;
  go.snapshot_reserved_bytes = 0;
  go.seed = rng_.next();
  consensus::driver_hooks hooks;  // (reconciling follows the applied op: tick_node)
  auto alive = n.alive;
  node* np = &n;
  hooks.fenced = [this, np, alive](const error& e) {
    // rilld's metadata actor stops the group and tells the operator to restart the node: the supervisor does.
    if (*alive) {
      if (debug_) {
        fmt::print("{} node {}: metadata fenced: {}\n", now_, np->id.value(), e.message());
      }
      np->restart_now = true;  // (not here: inside the disk's poll)
      np->fence_restart = true;
    }
  };
  spawn(consensus::cluster_group::open(*n.disk, storage::join_path(data_dir, "metadata"), *n.sm, std::move(go), *n.host,
                                       *n.net, std::move(hooks)),
        [this, np, alive](expected<std::unique_ptr<consensus::cluster_group>> r) {
          if (!*alive) {
            if (r) {
              // Its process died while it opened: kept with the remains, never called again (the old code closed it
              // here, running the dead process on, and moved it away before the close in argument order GCC chose).
              np->dead.push_back({});
              np->dead.back().meta = std::move(*r);
            }
            return;
          }
          if (!r) {
            // A disk that fails under it (a failed sync at recovery): the process starts again later.
            if (debug_) {
              fmt::print("{} node {}: metadata open failed: {}\n", now_, np->id.value(), r.error().message());
            }
            np->restart_now = true;  // (not here: inside the disk's poll)
            return;
          }
          np->meta = std::move(*r);
          open_coordinators(*np);
        });
  if (n.incarnation > 1) {
    trace_.event(now_, "fault", {{"node", n.id.value()}}, "restart");
  }
}

void node_cluster::open_coordinators(node& n) {
  // As rilld's metadata actor: its coordinators' replicas beside the metadata group's, on the same host and plane.
  n.stamps = std::make_unique<elapsed_clock>(n.clk, n.stamps_from);
  actors::coordinators_options co;
  co.cluster = cluster_id;
  co.members.clear();
  for (const auto& m : nodes_) {
    co.members.push_back(m->id);
  }
  co.self = n.id;
  co.recovering = n.lost;
  co.incarnation = n.group_incarnation;
  co.count = coordinator_count;
  co.journal_slots = coordinator_journal_slots;
  co.journal_message_bytes_max = coordinator_slot_bytes;
  co.snapshot_bytes_max = 4 * 1024 * 1024;  // (the sim disk keeps files whole: region 1 is that many zeros)
  co.snapshot_reserved_bytes = 0;
  co.seed = [this] { return rng_.next(); };
  co.machine.bug_offsets_survive_partition = options_.bugs.group_offsets_survive;
  co.wall_ms = [stamps = n.stamps.get()] { return static_cast<std::uint64_t>(stamps->now_ms()); };
  node* np = &n;
  co.reconcile = [np](std::uint32_t index, const actors::group_machine& m) {
    return actors::reconcile_commands(*np->sm->state().view(), m, index, coordinator_count, 64);
  };
  if (debug_) {
    co.notice = [this, id = n.id](const std::string& line) { fmt::print("{} node {}: {}\n", now_, id.value(), line); };
  }
  auto alive = n.alive;
  co.fenced = [np, alive](std::uint32_t, const error&) {
    if (*alive) {
      np->restart_now = true;  // (rilld asks its operator to restart the node; the supervisor does)
      np->fence_restart = true;
    }
  };
  spawn(
      actors::coordinators::open(*n.disk, storage::join_path(data_dir, "coordinators"), std::move(co), *n.host, *n.net),
      [this, np, alive](expected<std::unique_ptr<actors::coordinators>> r) {
        if (!*alive) {
          if (r) {
            np->dead.push_back({});
            np->dead.back().coords = std::move(*r);  // (its process died: kept, never called again)
          }
          return;
        }
        if (!r) {
          if (debug_) {
            fmt::print("{} node {}: coordinators open failed: {}\n", now_, np->id.value(), r.error().message());
          }
          np->restart_now = true;
          return;
        }
        np->coords = std::move(*r);
      });
}

void node_cluster::crash(node& n, bool power_loss) {
  RILL_ASSERT(n.up);
  n.up = false;
  *n.alive = false;
  // Everything in flight fails (the disk is halted: nothing the process does now reaches it), then what ran stays
  // behind, never called again (node::dead).
  n.disk->halt();
  while (n.disk->in_flight() > 0) {
    n.disk->poll(true);
  }
  for (const auto& [ns, p] : n.partitions) {
    count_reopens(*p);
  }
  for (const auto& p : n.closing) {
    count_reopens(*p);
  }
  node::remains r;
  r.partitions = std::move(n.partitions);
  r.closing = std::move(n.closing);
  n.closing.clear();
  r.meta = std::move(n.meta);
  r.coords = std::move(n.coords);
  r.stamps = std::move(n.stamps);
  r.sm = std::move(n.sm);
  r.host = std::move(n.host);
  r.pool = std::move(n.pool);
  n.dead.push_back(std::move(r));
  n.partitions.clear();
  n.group_ns.clear();
  n.running = actors::node_inventory{};
  if (power_loss) {
    n.disk->crash();
  } else {
    n.disk->restart_process();
  }
  n.restart_at = now_ + 1 + rng_.below(options_.restart_ticks_max);
  ++result_.crashes;
  result_.process_crashes += power_loss ? 0 : 1;
  trace_.event(now_, "fault", {{"node", n.id.value()}}, power_loss ? "crash" : "process_crash");
  if (debug_) {
    fmt::print("{} node {}: {}\n", now_, n.id.value(), power_loss ? "crash" : "process crash");
  }
}

void node_cluster::lose_disk(node& n) {
  crash(n, true);
  n.disk->wipe();
  n.lost = true;
  ++result_.disks_lost;
  trace_.event(now_, "fault", {{"node", n.id.value()}}, "disk_lost");
}

void node_cluster::inject_faults() {
  const std::size_t count = nodes_.size();
  const std::size_t down_max = count - consensus::quorum_replication(count);
  // Disks lost at once: what the smallest group tolerates (topics have 3 replicas: one), not the metadata group's
  // bound; two lost disks among one partition's three replicas lose its data, which no protocol survives.
  const std::size_t group_min = std::min<std::size_t>(3, count);
  const std::size_t lost_max = group_min - consensus::quorum_replication(group_min);
  std::size_t down = 0;
  std::size_t lost = 0;
  for (const auto& n : nodes_) {
    down += n->up ? 0 : 1;
    lost += n->lost ? 1 : 0;
  }
  for (auto& n : nodes_) {
    if (!n->up) {
      continue;
    }
    if (down < down_max && rng_.chance_ppm(options_.crash_ppm)) {
      crash(*n, !rng_.chance_ppm(options_.process_crash_ppm));
      ++down;
    } else if (down < down_max && lost < lost_max && options_.disk_lost_ppm > 0 &&
               rng_.chance_ppm(options_.disk_lost_ppm)) {
      lose_disk(*n);
      ++down;
      ++lost;
    }
  }
  for (auto& n : nodes_) {
    if (options_.clock_jump_ppm > 0 && rng_.chance_ppm(options_.clock_jump_ppm)) {
      auto step = static_cast<std::int64_t>(1'000 + rng_.below(3'600'000));
      step = rng_.below(2) == 0 ? step : -step;
      n->clk.skew_wall_ms(step);  // (the machine's clock: what runs on it sees the step)
      n->skew_ms += step;
      ++result_.clock_jumps;
      trace_.event(now_, "fault", {{"node", n->id.value()}, {"ms", step}}, "clock_jump");
    }
  }
  if (partition_until_ != 0 && now_ >= partition_until_) {
    network_.heal_all();
    partition_until_ = 0;
    trace_.event(now_, "fault", {}, "heal");
  } else if (partition_until_ == 0 && rng_.chance_ppm(options_.partition_ppm)) {
    std::vector<bool> side(count, false);
    if (rng_.below(2) == 0) {
      side[rng_.below(count)] = true;
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        side[i] = rng_.below(2) == 1;
      }
    }
    network_.cut_sides(side);
    partition_until_ = now_ + 1 + rng_.below(options_.partition_ticks_max);
    trace_.event(now_, "fault", {{"until", static_cast<std::int64_t>(partition_until_)}}, "partition");
  }
}

void node_cluster::deliver() {
  for (auto& p : network_.deliver(now_)) {
    node& n = *nodes_.at(p.to);
    if (!n.up || n.host == nullptr) {
      continue;
    }
    if (!p.beat.empty()) {
      auto beat = consensus::decode_node_heartbeat(p.beat);
      RILL_ASSERT(beat.has_value(), "a heartbeat damaged in the simulated network");
      n.host->on_heartbeat(*beat);
      continue;
    }
    const consensus::group_t g(p.group);
    if (g == metadata_group) {
      if (n.meta == nullptr) {
        continue;
      }
      const auto cmd = p.m.h.cmd;
      if (cmd == consensus::command::reply || cmd == consensus::command::eviction) {
        n.meta->on_client_message(p.m);
      } else if (cmd == consensus::command::request) {
        n.host->on_request(g, p.m);
      } else {
        n.host->on_message(consensus::node_t(static_cast<std::uint32_t>(p.from + 1)), g, p.m);
      }
      continue;
    }
    if (n.coords && n.coords->index_of(g)) {
      n.coords->on_message(consensus::node_t(static_cast<std::uint32_t>(p.from + 1)), g, p.m);
      continue;
    }
    auto ns = n.group_ns.find(p.group);
    if (ns != n.group_ns.end()) {
      if (auto r = n.partitions.find(ns->second); r != n.partitions.end()) {
        r->second->on_message(p.m);  // (dropped when this node runs no replica of it now)
      }
    }
  }
}

void node_cluster::reconcile(node& n) {
  if (n.reconciling) {
    n.reconcile_again = true;
    return;
  }
  n.reconciling = true;
  auto job = [](node_cluster* c, node* np, std::shared_ptr<bool> alive) -> task<void> {
    do {
      np->reconcile_again = false;
      const auto view = np->sm->state().view();
      const std::uint64_t at = np->meta->replica().commit_min().value();
      actors::node_placement here{np->id.value(), c->member_ids()};
      executor ex(*c, *np, alive);
      auto done = co_await actors::carry_out(*view, np->running, log_defaults(), data_dir, here, ex);
      if (!*alive) {
        co_return;
      }
      if (!done) {
        if (c->debug_) {
          fmt::print("{} node {}: reconcile: {}\n", c->now_, np->id.value(), done.error().message());
        }
        np->reconcile_due = c->now_ + 20;  // retried (a failed step holds the rest back, as in rilld)
        break;
      }
      np->carried_out = at;
    } while (np->reconcile_again);
    np->reconciling = false;
  };
  spawn(job(this, &n, n.alive), [] {});
}

void node_cluster::tick_node(node& n) {
  n.disk->advance_time(tick_ns);  // (and the node's clock, attached to its disk)
  while (n.disk->poll(false) > 0) {
  }
  if (!n.up) {
    return;
  }
  n.host->tick(1);
  if (n.meta) {
    n.meta->tick();
  }
  if (n.coords) {
    n.coords->tick();
  }
  // (Replicas may be created or destroyed by what a tick starts: iterate over a copy of the namespaces.)
  std::vector<std::uint64_t> ns;
  for (const auto& [k, r] : n.partitions) {
    ns.push_back(k);
  }
  for (auto k : ns) {
    if (auto it = n.partitions.find(k); it != n.partitions.end()) {
      it->second->tick();
    }
  }
  if (n.meta && n.up && !n.meta_ready && n.meta->replica().applied_view_head()) {
    n.meta_ready = true;
  }
  if (n.meta && n.up && n.meta_ready) {
    const std::uint64_t applied = n.meta->replica().commit_min().value();
    if ((applied != n.carried_out && !n.reconciling && (n.reconcile_due == 0 || now_ >= n.reconcile_due)) ||
        (applied != n.carried_out && n.reconciling)) {
      n.reconcile_due = 0;
      reconcile(n);
    }
    if (n.lost && !n.meta->replica().recovering() && n.coords && n.carried_out == applied && !n.reconciling) {
      bool caught_up = true;
      for (std::uint32_t i = 0; i < n.coords->count(); ++i) {
        caught_up = caught_up && !n.coords->replica(i).recovering();
      }
      for (const auto& [k, r] : n.partitions) {
        const auto* g = r->group();
        caught_up = caught_up && g != nullptr && !g->replica().recovering();
      }
      if (caught_up) {
        n.lost = false;  // every replica on it caught up: the bound on lost disks counts it no more
      }
    }
  }
}

void node_cluster::step() {
  ++now_;
  if (!liveness_) {
    inject_faults();
  }
  for (auto& n : nodes_) {
    if (n->up && n->restart_now) {
      n->restart_now = false;
      result_.fence_restarts += n->fence_restart ? 1 : 0;
      n->fence_restart = false;
      crash(*n, false);
    }
    if (!n->up && now_ >= n->restart_at) {
      start(*n);
    }
  }
  deliver();
  for (auto& n : nodes_) {
    tick_node(*n);
  }
  workload_->step();
}

void node_cluster::count_reopens(const actors::partition_replica& r) {
  result_.partition_reopens += r.reopens();
}

void node_cluster::enter_liveness() {
  liveness_ = true;
  for (auto& n : nodes_) {
    n->disk->faults().sync_error_ppm = 0;
  }
  network_.calm();
  partition_until_ = 0;
  for (auto& n : nodes_) {
    if (!n->up) {
      n->restart_at = now_;
    }
  }
  trace_.event(now_, "liveness", {});
}

bool node_cluster::converged(std::string* why) const {
  auto no = [&](std::string s) {
    if (why != nullptr) {
      *why = std::move(s);
    }
    return false;
  };
  std::uint64_t commit = 0;
  for (const auto& n : nodes_) {
    if (!n->up || n->meta == nullptr) {
      return no(fmt::format("node {} is not serving", n->id.value()));
    }
    commit = std::max(commit, n->meta->replica().commit_max().value());
  }
  for (const auto& n : nodes_) {
    const auto& r = n->meta->replica();
    if (r.commit_min().value() != commit || n->reconciling || n->carried_out != commit) {
      std::string closing;
      for (const auto& c : n->closing) {
        closing += "; closing " + c->describe();
      }
      return no(fmt::format("node {}: metadata applied {} of {}, carried out {}{}{}", n->id.value(),
                            r.commit_min().value(), commit, n->carried_out, n->reconciling ? " (reconciling)" : "",
                            closing));
    }
  }
  // Every coordinator: open on every node, none recovering, one commit.
  for (std::uint32_t i = 0; i < coordinator_count; ++i) {
    std::optional<std::uint64_t> at;
    for (const auto& n : nodes_) {
      if (!n->coords) {
        return no(fmt::format("node {}: its coordinators are not open", n->id.value()));
      }
      const auto& r = n->coords->replica(i);
      if (r.recovering() || (at && *at != r.commit_min().value())) {
        return no(fmt::format("coordinator {}: node {}'s replica {} (applied {})", i, n->id.value(),
                              r.recovering() ? "is recovering" : "lags", r.commit_min().value()));
      }
      at = r.commit_min().value();
    }
  }
  // Every partition of the view: its replicas open, a primary, one committed end.
  const auto view = nodes_.front()->sm->state().view();
  const std::vector<std::uint64_t> members = member_ids();
  for (const auto& [sid, s] : view->streams) {
    for (const auto& [tid, t] : s.topics) {
      for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
        const std::uint64_t ns = actors::partition_namespace(sid, tid, p);
        std::optional<std::int64_t> end;
        bool primary = false;
        for (auto m : actors::partition_replicas(sid, tid, p, t.config.replication_factor(), members)) {
          const node& n = *nodes_.at(m - 1);
          auto it = n.partitions.find(ns);
          const consensus::partition_group* g = it == n.partitions.end() ? nullptr : it->second->group();
          if (g == nullptr || g->fenced() || g->transferring() || g->replica().recovering()) {
            return no(fmt::format(
                "partition {} of topic {}/{}: node {}'s replica is not serving ({})", p, sid, tid, m,
                it == n.partitions.end() ? std::string("none runs")
                : g == nullptr
                    ? it->second->describe()
                    : fmt::format("{}{}{}: {}", g->fenced() ? "fenced " : "", g->transferring() ? "transferring " : "",
                                  g->replica().recovering() ? "recovering" : "", it->second->describe())));
          }
          primary = primary || g->primary();
          const std::int64_t committed = const_cast<consensus::partition_group*>(g)->log().committed().value();
          if (end && *end != committed) {
            return no(fmt::format("partition {} of topic {}/{}: replicas committed through {} and {}", p, sid, tid,
                                  *end, committed));
          }
          end = committed;
        }
        if (!primary) {
          return no(fmt::format("partition {} of topic {}/{}: no primary", p, sid, tid));
        }
      }
    }
  }
  if (!workload_->done()) {
    return no("the workload is not done: " + workload_->pending());
  }
  if (std::string lag; !workload_->groups_caught_up(&lag)) {
    return no(lag);
  }
  return true;
}

void node_cluster::fail(std::string what) {
  checker_->fail(now_, std::move(what));
}

void node_cluster::check_ack_durable(const node& n, std::uint64_t group, const consensus::message& ok) {
  const consensus::group_t g(group);
  // Where the group's journal is, its ring's slot count and slot size (as this file opens them), and whether its
  // batch prepares keep their header alone in the slot (a partition group's: the batch is in the log, synced first).
  std::string dir;
  std::uint64_t slots = 0;
  std::uint64_t slot_bytes = 0;
  bool detached = false;
  if (g == metadata_group) {
    dir = storage::join_path(data_dir, "metadata");
    slots = metadata_journal_slots;
    slot_bytes = metadata_slot_bytes;
  } else if (auto c = n.group_ns.find(g.value()); c != n.group_ns.end()) {
    auto r = n.partitions.find(c->second);
    if (r == n.partitions.end()) {
      return;
    }
    dir = storage::join_path(r->second->options().dir, actors::partition_replica::vsr_dir);
    slots = partition_journal_slots;
    slot_bytes = actors::partition_replica::journal_slot_bytes;
    detached = true;
  } else if (g.value() % 2 == 0 && g.value() / 2 >= 1 && g.value() / 2 <= coordinator_count) {
    dir = fmt::format("{}/coordinators/{}", data_dir, g.value() / 2 - 1);
    slots = coordinator_journal_slots;
    slot_bytes = coordinator_slot_bytes;
  } else {
    return;
  }
  const std::string path = storage::join_path(dir, "journal.wal");
  const std::uint64_t at =
      (slots * consensus::header::encoded_size + 4095) / 4096 * 4096 + (ok.h.op % slots) * slot_bytes;
  const auto bytes = n.disk->read_range(path, at, consensus::header::encoded_size);
  const consensus::header h = bytes ? consensus::decode_header_unchecked(bytes->data()) : consensus::header{};
  if (!bytes || h.op != ok.h.op || h.checksum != ok.h.context) {
    return;  // (its slot holds another op: not this check's to judge; the replica asserts what it acknowledges)
  }
  const bool whole = !(detached && h.operation == consensus::operation_produce_batch);
  const std::uint64_t length =
      whole ? std::max<std::uint64_t>(h.size, consensus::header::encoded_size) : consensus::header::encoded_size;
  if (!n.disk->durable_matches(path, at, length)) {
    fail(
        fmt::format("node {} acknowledged op {} of group {:#x} (view {}) that its disk does not hold durably "
                    "(slot at {} of {}): a power loss takes it",
                    n.id.value(), ok.h.op, g.value(), ok.h.view, at, path));
  }
}

node_run_result node_cluster::run() {
  while (now_ < options_.safety_ticks && checker_->ok() && !workload_->done()) {
    step();
  }
  if (checker_->ok()) {
    enter_liveness();
    const std::uint64_t bound = now_ + options_.liveness_ticks;
    std::string why;
    while (now_ < bound && checker_->ok() && !converged(&why)) {
      step();
    }
    if (checker_->ok() && converged(&why)) {
      final_check();
    } else if (checker_->ok()) {
      result_.result = node_outcome::liveness_failure;
      result_.detail = fmt::format("not converged {} ticks after healing: {}", options_.liveness_ticks, why);
    }
  }
  if (!checker_->ok()) {
    result_.result = node_outcome::safety_failure;
    result_.detail = checker_->violation();
  }
  for (const auto& n : nodes_) {
    result_.sync_errors += n->disk->sync_errors();
    for (const auto& [ns, p] : n->partitions) {
      count_reopens(*p);  // (those still running)
    }
  }
  result_.ticks = now_;
  result_.hash = trace_.hash();
  result_.metadata_changes = workload_->changes();
  result_.produced = workload_->produced();
  result_.produce_retries = workload_->retries();
  result_.records_read = workload_->records_read();
  result_.group_records = workload_->group_records();
  result_.zombie_refusals = workload_->zombie_refusals();
  result_.pauses = workload_->pauses();
  trace_.event(now_, "result", {{"outcome", static_cast<std::int64_t>(result_.result)}});
  return result_;
}

void node_cluster::final_check() {
  const auto view = nodes_.front()->sm->state().view();
  const std::vector<std::uint64_t> members = member_ids();
  for (const auto& [sid, s] : view->streams) {
    for (const auto& [tid, t] : s.topics) {
      for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
        const auto key = workload_->current(sid, tid, t.created_ms, p);
        if (!key) {
          fail(fmt::format("partition {} of topic {}/{} exists but the workload never learned it", p, sid, tid));
          return;
        }
        const std::uint64_t ns = actors::partition_namespace(sid, tid, p);
        for (auto m : actors::partition_replicas(sid, tid, p, t.config.replication_factor(), members)) {
          node& n = *nodes_.at(m - 1);
          consensus::partition_group* g = n.partitions.at(ns)->group();
          std::vector<std::pair<std::int64_t, record_id>> records;
          auto& log = g->log();
          const std::int64_t start = log.log_start().value();
          std::int64_t at = start;
          while (at < log.committed().value()) {
            storage::read_request rq;
            rq.offset = offset_t(at);
            rq.max_bytes = 1 << 20;
            auto got = storage::io::run_task(*n.disk, log.read(rq));
            if (!got || !got->has_value() || (*got)->batches == 0) {
              fail(fmt::format("node {}: reading {} at offset {} failed{}", m, key->describe(), at,
                               got && !got->has_value() ? ": " + got->error().message() : std::string()));
              return;
            }
            for (const auto& v : (*got)->batch_views()) {
              // A batch's stamp is the primary's time when it prepared it: never ahead of the true time by more than
              // a clock's followed correction (elapsed_clock::jump_min), whatever its wall clock jumped to.
              const std::int64_t true_ms = 1'700'000'000'000 + static_cast<std::int64_t>(now_) * 10;
              if (v.max_timestamp().value() > true_ms + 3'000) {
                fail(fmt::format("node {}: {} offset {}: stamped {} ms ahead of the true time", m, key->describe(),
                                 v.base_offset().value(), v.max_timestamp().value() - true_ms));
                return;
              }
              std::int64_t offset = v.base_offset().value();
              for (const auto& [id, tag] : records_in(v.bytes())) {
                checker_->on_read(now_, static_cast<std::uint32_t>(m), *key, offset, id, tag);
                if (offset >= at) {
                  records.emplace_back(offset, id);
                }
                ++offset;
              }
            }
            at = (*got)->next_offset.value();
          }
          checker_->check_log(now_, static_cast<std::uint32_t>(m), *key, start, records);
          result_.records_read += records.size();
        }
      }
    }
  }
}

node_cluster_options node_options_for(std::uint64_t seed, const std::vector<std::string>& bugs) {
  prng r(seed ^ 0x4e4f'4445'5357'0001ULL);  // the swarm's own stream
  node_cluster_options o;
  o.seed = seed;
  o.nodes = static_cast<std::uint8_t>(r.between(3, 5));
  o.network.delay_min_ticks = static_cast<std::uint32_t>(r.between(1, 3));
  o.network.delay_spread_ticks = static_cast<std::uint32_t>(r.between(0, 8));
  o.network.loss_ppm = static_cast<std::uint32_t>(r.below(2) == 0 ? 0 : r.below(50'000));
  o.network.duplicate_ppm = static_cast<std::uint32_t>(r.below(2) == 0 ? 0 : r.below(50'000));
  o.crash_ppm = static_cast<std::uint32_t>(r.below(400));
  o.process_crash_ppm = static_cast<std::uint32_t>(r.below(1'000'001));
  o.partition_ppm = static_cast<std::uint32_t>(r.below(150));
  const auto lost = r.below(400);
  o.disk_lost_ppm = lost > 200 ? static_cast<std::uint32_t>(lost - 200) : 0;  // half the seeds lose disks
  o.producers = static_cast<std::uint32_t>(r.between(2, 4));
  o.produces = static_cast<std::uint32_t>(r.between(20, 60));
  o.operator_changes = static_cast<std::uint32_t>(r.between(4, 12));
  o.consumers = static_cast<std::uint32_t>(r.between(1, 3));
  o.clock_jump_ppm = r.below(2) == 0 ? 0 : static_cast<std::uint32_t>(r.between(50, 400));  // half the seeds
  // Drawn from a stream of their own, so that the draws above (and the seeds kept for CI) stay what they were.
  prng later(seed ^ 0x4e4f'4445'5357'0002ULL);
  o.sync_error_ppm = later.below(3) == 0 ? static_cast<std::uint32_t>(later.between(500, 20'000)) : 0;  // a third
  o.members = static_cast<std::uint32_t>(later.between(1, 3));
  o.member_pause_ppm = static_cast<std::uint32_t>(later.between(100, 2'000));
  for (const auto& b : bugs) {
    for (const auto& known : node_bug_list()) {
      if (b == known.name) {
        o.bugs.*known.flag = true;
      }
    }
  }
  return o;
}

}  // namespace rill::simulation
