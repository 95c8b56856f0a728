#include "simulation/cluster.h"

#include <fmt/core.h>

#include <cstdlib>
#include <map>

#include "base/assert.h"
#include "consensus/driver.h"
#include "simulation/disk_storage.h"
#include "simulation/model_storage.h"
#include "storage/file_ops.h"

namespace rill::simulation {

using consensus::replica_t;

// A replica's messages to its peers: counted, traced, checked, then handed to the simulated network.
// Replica i runs on node i: the group's messages and the node heartbeats go through the simulated network.
class cluster::node_transport final : public consensus::host_transport {
 public:
  node_transport(cluster& c, node& n) : cluster_(c), node_(n) {}
  void send(consensus::node_t to, consensus::group_t g, consensus::message m) override {
    cluster_.send(node_, static_cast<replica_t>(to.value()), std::move(m), g);
  }
  void send(consensus::node_t to, const consensus::node_heartbeat& beat) override {
    cluster_.send_beat(node_, static_cast<replica_t>(to.value()), beat);
  }

 private:
  cluster& cluster_;
  node& node_;
};

// Node n's replica of a side group.
struct cluster::side_replica {
  std::unique_ptr<replica_storage> storage;  // on a simulated disk of its own (or the in-memory journal model)
  disk_storage* disk = nullptr;              // storage, when it is a disk
  std::unique_ptr<ledger> sm;
  std::unique_ptr<consensus::driver> d;  // null while its node is down
  bool transferring = false;             // its partition storage is copying a peer's batches
};

struct cluster::side_group {
  consensus::group_t id;
  std::uint64_t identity = 0;  // the cluster field of its headers
  bool metadata = false;       // the metadata group: metadata commands only, prepares whole in journal_storage
  std::unique_ptr<checker> chk;
  std::vector<std::unique_ptr<sim_client>> clients;
};

struct cluster::node {
  replica_t index = 0;
  std::vector<side_replica> sides;  // one per side group
  std::unique_ptr<replica_storage> storage;
  std::unique_ptr<ledger> sm;
  std::unique_ptr<node_transport> net;
  std::unique_ptr<consensus::group_host> host;  // production's host of the node's groups (one per incarnation)
  std::uint64_t host_ticked_at = 0;             // the tick of its last host->tick()
  std::uint64_t host_due_at = 0;                // when it must be called next (ticks_until_due())
  std::unique_ptr<consensus::driver> d;         // production's driver of the replica, over `storage` and `net`
  const consensus::replica* r = nullptr;        // d's replica (null while down)
  disk_storage* disk = nullptr;                 // storage, when it is the simulated disk
  bool transferring = false;                    // its partition storage is copying a peer's batches (a state transfer)
  std::uint64_t truncations = 0;  // its partition logs' cuts and transfers (every group's), over the incarnations
                                  // before this one
  std::uint64_t transfers = 0;
  std::uint64_t restarts = 0;  // its partition logs started over at a peer's log start (over the incarnations)
  bool lost = false;           // its disk was lost and it has not caught up since (down, or up and recovering)
  // Crashed once the input under way returns (the driver is on the stack): its driver fenced at a storage failure,
  // or the crash-after-ack fault halted it.
  bool crash_now = false;
  bool crash_power_loss = true;  // what crash_now does: a power loss, or a process restart (a fence)
  bool up = false;
  std::uint64_t restart_at = 0;
  std::uint32_t incarnation = 0;
  std::uint64_t seed = 0;
  consensus::status last_status = consensus::status::normal;
  std::uint32_t last_view = 0;
  // For replica_sample: cumulative over the run, across restarts.
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t crashes = 0;
  std::uint64_t checkpoints = 0;
};

cluster::cluster(const cluster_options& options, trace& t)
    : options_(options),
      trace_(t),
      rng_(options.seed),
      fault_rng_(options.seed ^ 0x504f'5745'524c'4f53ULL),
      network_(options.network, rng_.next()),
      checker_(options.replicas, options.check_ack_durable),
      debug_(std::getenv("RILL_SIM_DEBUG") != nullptr) {
  RILL_ASSERT(options_.replicas >= 1 && options_.replicas <= consensus::replicas_max);
  storage::set_bug_trust_page_cache(options_.bug_trust_page_cache);  // (process-wide: undone by the destructor)
  for (replica_t i = 0; i < options_.replicas; ++i) {
    auto n = std::make_unique<node>();
    n->index = i;
    n->net = std::make_unique<node_transport>(*this, *n);
    n->seed = rng_.next();
    consensus::vsr_state initial;
    initial.cluster = options_.replica.cluster;
    initial.replica = i;
    initial.replica_count = options_.replicas;
    auto atlas = [this, i](std::uint64_t op) { return may_fault(i, op); };
    if (options_.disk) {
      std::optional<partition_config> partition;
      if (options_.partition) {
        partition = partition_config_for();
        if (options_.check_ack_durable) {
          partition->violation = [this, i](const std::string& what) {
            checker_.fail_partition(now_, fmt::format("replica {}: {}", i, what));
          };
        }
      }
      auto d =
          std::make_unique<disk_storage>(options_.storage, rng_.next(), initial, options_.journal, atlas, partition);
      n->disk = d.get();
      n->storage = std::move(d);
    } else {
      n->storage =
          std::make_unique<model_storage>(options_.storage, rng_.next(), initial, options_.journal.slot_count, atlas);
    }
    nodes_.push_back(std::move(n));
  }
  // Side groups draw from a stream of their own: a run with one group is the run it was before they existed.
  RILL_ASSERT(options_.groups >= 1 && options_.groups <= groups_max_sim);
  RILL_ASSERT(options_.side_clients >= 1 && options_.side_clients < side_client_stride);
  prng side_rng(options_.seed ^ 0x5349'4445'0000'0001ULL);
  for (std::uint32_t k = 1; k < options_.groups; ++k) {
    side_group g;
    g.id = consensus::group_t(k);
    g.identity = options_.replica.cluster + 1000 * k;
    g.metadata = k == 1;
    g.chk = std::make_unique<checker>(options_.replicas, options_.check_ack_durable);
    client_options co = options_.client;
    co.metadata_only = g.metadata;
    for (std::uint32_t c = 0; c < options_.side_clients; ++c) {
      g.clients.push_back(std::make_unique<sim_client>(g.identity, c + 1, options_.replicas, co, side_rng.next()));
    }
    for (auto& n : nodes_) {
      consensus::vsr_state initial;
      initial.cluster = g.identity;
      initial.replica = n->index;
      initial.replica_count = options_.replicas;
      const replica_t i = n->index;
      auto atlas = [this, i](std::uint64_t op) { return may_fault(i, op); };
      side_replica r;
      if (options_.disk) {
        // On disk: the metadata group on journal_storage, the others partition groups on partition_storage (each
        // on a simulated disk of its own: a fault stream of its own; the node's crashes and disk losses take all).
        std::optional<partition_config> partition;
        if (!g.metadata && options_.partition) {
          partition = partition_config_for();
          if (options_.check_ack_durable) {
            partition->violation = [chk = g.chk.get(), this, i](const std::string& what) {
              chk->fail_partition(now_, fmt::format("replica {}: {}", i, what));
            };
          }
        }
        auto d = std::make_unique<disk_storage>(options_.storage, side_rng.next(), initial, options_.journal, atlas,
                                                partition);
        r.disk = d.get();
        r.storage = std::move(d);
      } else {
        r.storage = std::make_unique<model_storage>(options_.storage, side_rng.next(), initial,
                                                    options_.journal.slot_count, atlas);
      }
      n->sides.push_back(std::move(r));
    }
    sides_.push_back(std::move(g));
  }
  for (auto& n : nodes_) {
    restart(*n);
  }
  for (std::uint32_t c = 0; c < options_.clients; ++c) {
    clients_.push_back(
        std::make_unique<sim_client>(options_.replica.cluster, c + 1, options_.replicas, options_.client, rng_.next()));
  }
  consumer_position_.assign(options_.clients, 0);
  consumer_reading_.assign(options_.clients, false);
}

cluster::~cluster() {
  storage::set_bug_trust_page_cache(false);
  *alive_ = false;  // reads still in flight finish (failing) while the disks power off below: they must not look
  for (auto& n : nodes_) {
    if (n->up) {
      n->storage->crash();  // halts and drains the disk, closes the partition log
      for (auto& sr : n->sides) {
        sr.storage->crash();
      }
    }
  }
}

partition_config cluster::partition_config_for() {
  partition_config c;
  c.pool = &pool_;
  c.clk = &clock_;
  c.reporter = &reporter_;
  c.batch_operation = operation_produce;
  c.bug_trust_own_suffix = options_.bug_partition_trusts_own_suffix;
  c.retention_bytes = options_.retention_ppm > 0 ? 1u : 0u;
  c.bug_append_unsynced = options_.bug_append_unsynced;
  c.bug_checkpoint_ungated = options_.bug_checkpoint_ungated;
  c.bug_transfer_uncommitted = options_.bug_transfer_uncommitted;
  c.bug_restart_drops_acked = options_.bug_restart_drops_acked;
  c.bug_cuts_unreported = options_.bugs.write_unverified;  // (finding 6 as it was: both halves)
  return c;  // (the caller adds `violation` when the checker checks what is acknowledged: check_ack_durable)
}

bool cluster::may_fault(replica_t r, std::uint64_t op) const {
  if (liveness_) {
    return false;
  }
  const std::size_t n = options_.replicas;
  const std::size_t allowed = consensus::quorum_replication(n) - 1;
  for (std::size_t i = 0; i < allowed; ++i) {
    if ((op + i) % n == r) {
      return true;
    }
  }
  return false;
}

void cluster::restart(node& n) {
  ++n.incarnation;
  consensus::replica_options o = options_.replica;
  o.replica = n.index;
  o.replica_count = options_.replicas;
  o.seed = n.seed ^ (0x9e3779b97f4a7c15ULL * n.incarnation);
  o.heartbeats_by_host = true;
  // A partition group's replica applies only what its storage holds (the batch is then in the log it serves from).
  o.apply_durable_only = options_.disk && options_.partition;
  consensus::host_options ho;
  ho.cluster = options_.replica.cluster;
  ho.node = consensus::node_t(n.index);
  ho.heartbeat_ticks = o.heartbeat_ticks;
  ho.peer_timeout_ticks = std::max<std::uint32_t>(o.heartbeat_ticks * 4, o.heartbeat_ticks + 1);
  n.host = std::make_unique<consensus::group_host>(ho, *n.net);
  auto link = n.host->join(group, members());
  RILL_ASSERT(link.has_value(), "{}", link ? "" : link.error().detail());
  n.sm = std::make_unique<ledger>(options_.bug_idempotence_committed_only, options_.bug_coordinator_commit_unowned);
  auto recovered = n.storage->recover();
  // What the disk holds is durable, whether or not the replica saw its completion before the crash. (Of the journal,
  // only what a power loss would leave: a process crash leaves unsynced writes readable, and the replica must not
  // acknowledge them as if they were durable.)
  checker_.on_persisted(now_, n.index, recovered.state);
  checker_.on_recovered(n.index, n.storage->durable_of(recovered.journal));
  if (debug_) {
    std::string ops;
    std::uint64_t prev = 0;
    for (const auto& h : recovered.journal) {
      if (h.op != prev + 1) {
        ops += fmt::format(" gap{}-{}", prev + 1, h.op - 1);
      }
      prev = h.op;
    }
    fmt::print("{} restart r{}: journal {} entries up to {}{}, faulty {}, view {} log_view {} commit {}\n", now_,
               n.index, recovered.journal.size(), prev, ops, recovered.faulty.size(), recovered.state.view.value(),
               recovered.state.log_view.value(), recovered.state.commit.value());
  }
  const consensus::header checkpoint = recovered.state.checkpoint.at;
  n.d = std::make_unique<consensus::driver>(o, *n.sm, std::move(recovered), *n.storage, *link, hooks(n), options_.bugs);
  n.host->attach(group, *n.d);
  n.host_ticked_at = now_ == 0 ? 0 : now_ - 1;  // its first call, in this step or the first, passes one tick
  n.host_due_at = now_;
  n.r = &n.d->replica();
  n.crash_now = false;
  n.up = true;
  n.last_status = n.r->status();
  n.last_view = n.r->view().value();
  checker_.on_restart(n.index);
  if (checkpoint.op > 0) {
    checker_.on_installed(now_, n.index, checkpoint, n.sm->digest_at(checkpoint.op));
  }
  for (std::size_t k = 0; k < sides_.size(); ++k) {
    restart_side(n, k);
  }
  if (n.incarnation > 1) {
    trace_.event(now_, "fault", {{"replica", n.index}, {"view", n.r->view().value()}}, "restart");
  }
}

void cluster::restart_side(node& n, std::size_t k) {
  side_group& g = sides_[k];
  side_replica& sr = n.sides[k];
  consensus::replica_options o = options_.replica;
  o.cluster = g.identity;
  o.replica = n.index;
  o.replica_count = options_.replicas;
  o.seed = n.seed ^ (0x9e3779b97f4a7c15ULL * n.incarnation) ^ (0xc2b2ae3d27d4eb4fULL * (k + 1));
  o.heartbeats_by_host = true;
  o.apply_durable_only = sr.disk != nullptr && !g.metadata && options_.partition;
  sr.transferring = false;
  sr.sm = std::make_unique<ledger>(options_.bug_idempotence_committed_only, options_.bug_coordinator_commit_unowned);
  auto recovered = sr.storage->recover();
  g.chk->on_persisted(now_, n.index, recovered.state);
  g.chk->on_recovered(n.index, sr.storage->durable_of(recovered.journal));
  const consensus::header checkpoint = recovered.state.checkpoint.at;
  auto link = n.host->join(g.id, members());
  RILL_ASSERT(link.has_value(), "{}", link ? "" : link.error().detail());
  sr.d = std::make_unique<consensus::driver>(o, *sr.sm, std::move(recovered), *sr.storage, *link, side_hooks(n, k),
                                             options_.bugs);
  n.host->attach(g.id, *sr.d);
  g.chk->on_restart(n.index);
  if (checkpoint.op > 0) {
    g.chk->on_installed(now_, n.index, checkpoint, sr.sm->digest_at(checkpoint.op));
  }
}

consensus::driver_hooks cluster::side_hooks(node& np, std::size_t k) {
  node* n = &np;
  checker* chk = sides_[k].chk.get();
  const consensus::group_t id = sides_[k].id;
  const std::size_t clients = sides_[k].clients.size();
  consensus::driver_hooks h;
  h.reply = [this, n, id, clients](consensus::message m) {
    const std::uint64_t client = client_of_session(m.h.client);
    if (client >= 1 && client <= clients) {
      network_.send(
          n->index,
          client_base + side_client_stride * static_cast<node_t>(id.value()) + static_cast<node_t>(client - 1),
          std::move(m), now_, id.value());
    }
  };
  h.persisted = [this, n, chk](const consensus::vsr_state& st) { chk->on_persisted(now_, n->index, st); };
  h.writing = [n, chk](std::uint64_t op) { chk->on_write_submitted(n->index, op); };
  h.written = [n, chk](std::uint64_t op, consensus::checksum_t checksum) {
    chk->on_write_done(n->index, op, checksum, true);
  };
  h.checkpointed = [this, n](std::uint8_t, std::uint64_t) {
    ++result_.checkpoints;
    ++n->checkpoints;
  };
  h.installed = [this, n, chk, k](const consensus::header& at) {
    chk->on_installed(now_, n->index, at, n->sides[k].sm->digest_at(at.op));
    ++result_.state_transfers;
  };
  h.applied = [this, n, chk, k](const consensus::header& prepare) {
    ledger& sm = *n->sides[k].sm;
    chk->on_applied(now_, n->index, prepare, sm.payload_at(prepare.op), sm.digest_at(prepare.op));
    if (const auto [base, records] = sm.offsets_at(prepare.op); records > 0) {
      chk->on_offsets(now_, n->index, prepare.op, sm.payload_at(prepare.op), base, records);
    }
    if (sm.duplicates() > 0) {
      chk->on_duplicate(now_, n->index);
    }
  };
  h.fenced = [this, n, id](const error& e) {
    n->crash_now = true;
    n->crash_power_loss = false;  // rilld exits at a fence and its supervisor restarts it: the machine stays up
    trace_.event(now_, "fault", {{"replica", n->index}, {"group", static_cast<std::int64_t>(id.value())}}, "fenced");
    if (debug_) {
      fmt::print("{} fenced r{} group {}: {}\n", now_, n->index, id.value(), e.message());
    }
  };
  return h;
}

std::vector<consensus::node_t> cluster::members() const {
  std::vector<consensus::node_t> m;
  for (replica_t i = 0; i < options_.replicas; ++i) {
    m.push_back(consensus::node_t(i));
  }
  return m;
}

checker& cluster::checker_of(consensus::group_t g) {
  return g.value() == 0 ? checker_ : *sides_.at(g.value() - 1).chk;
}

consensus::driver* cluster::driver_of(node& n, consensus::group_t g) {
  return g.value() == 0 ? n.d.get() : n.sides.at(g.value() - 1).d.get();
}

bool cluster::all_ok() const {
  if (!checker_.ok()) {
    return false;
  }
  for (const auto& g : sides_) {
    if (!g.chk->ok()) {
      return false;
    }
  }
  return true;
}

bool cluster::clients_done() const {
  for (const auto& c : clients_) {
    if (!c->done()) {
      return false;
    }
  }
  for (const auto& g : sides_) {
    for (const auto& c : g.clients) {
      if (!c->done()) {
        return false;
      }
    }
  }
  return true;
}

bool cluster::may_lose_disk() const {
  const std::size_t n = options_.replicas;
  if (options_.rot_ppm > 0 || options_.storage.read_fault_ppm > 0 || n < 3) {
    return false;  // (a failed read counts as a lost copy, as rot does: with a lost disk, every copy may go)
  }
  std::size_t lost = 0;  // lost and not yet caught up (up or down)
  for (const auto& nd : nodes_) {
    lost += nd->lost ? 1 : 0;
  }
  return lost < n - consensus::quorum_replication(n);
}

void cluster::lose_disk(node& n) {
  crash(n);
  n.storage->wipe(now_);
  for (std::size_t k = 0; k < sides_.size(); ++k) {
    n.sides[k].storage->wipe(now_);
    sides_[k].chk->on_wiped(n.index);
  }
  n.lost = true;
  ++result_.disks_lost;
  checker_.on_wiped(n.index);
  trace_.event(now_, "fault", {{"replica", n.index}}, "disk_lost");
  if (debug_) {
    fmt::print("{} disk lost r{}\n", now_, n.index);
  }
}

void cluster::crash(node& n, bool power_loss) {
  for (std::size_t g = 0; g < options_.groups; ++g) {
    if (const consensus::partition_storage* p = partition_of(n, g)) {
      n.truncations += p->truncations();  // (the storage goes with the crash; its counts stay with the node)
      n.transfers += p->transfers();
      n.restarts += p->restarts();
    }
  }
  n.transferring = false;
  n.storage->crash(power_loss);  // drops every callback in flight: the driver may go
  n.r = nullptr;
  n.host.reset();
  n.d.reset();
  n.sm.reset();
  for (auto& sr : n.sides) {
    sr.storage->crash(power_loss);
    sr.d.reset();
    sr.sm.reset();
  }
  n.up = false;
  n.crash_now = false;
  n.crash_power_loss = true;
  n.restart_at = now_ + 1 + rng_.below(options_.restart_ticks_max);
  ++result_.crashes;
  result_.process_crashes += power_loss ? 0 : 1;
  ++n.crashes;
  trace_.event(now_, "fault", {{"replica", n.index}}, power_loss ? "crash" : "process_crash");
  if (debug_) {
    fmt::print("{} {} r{}\n", now_, power_loss ? "crash" : "process crash", n.index);
  }
}

void cluster::lose_power_of_majority() {
  // Every node, or a random majority of them, at once (whichever are up).
  const std::size_t n = options_.replicas;
  std::vector<bool> hit(n, true);
  if (fault_rng_.chance_ppm(500'000)) {
    std::size_t spared = n - (n / 2 + 1);
    while (spared > 0) {
      const std::size_t i = fault_rng_.below(n);
      if (hit[i]) {
        hit[i] = false;
        --spared;
      }
    }
  }
  std::int64_t mask = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (hit[i] && nodes_[i]->up) {
      crash(*nodes_[i], true);
      mask |= std::int64_t{1} << i;
    }
  }
  ++result_.power_losses;
  trace_.event(now_, "fault", {{"side", mask}}, "power_loss");
  if (debug_) {
    fmt::print("{} power loss of nodes {:#x}\n", now_, mask);
  }
}

bool cluster::may_crash() const {
  // At most max(1, n - quorum) replicas down at once: a replication quorum (with f = 0, the one replica after its
  // restart) can always form again.
  const std::size_t n = options_.replicas;
  std::size_t down = 0;
  for (const auto& nd : nodes_) {
    down += nd->up ? 0 : 1;
  }
  return down < std::max<std::size_t>(1, n - consensus::quorum_replication(n));
}

void cluster::send_beat(node& n, replica_t to, const consensus::node_heartbeat& beat) {
  for (const auto& e : beat.entries) {
    // Each entry is the commit heartbeat its replica would have sent: the checker sees it as one (a view
    // advertised before it is durable, say).
    checker_of(e.group).on_sent(now_, n.index, consensus::commit_message(e, 0, n.index, beat.sequence));
    trace_.mix((std::uint64_t{n.index} << 56) ^ (std::uint64_t{to} << 48) ^ (std::uint64_t{0xbe} << 40) ^
               e.beat.commit);
  }
  network_.send_beat(n.index, to, consensus::encode(beat), now_);
}

void cluster::send(node& n, replica_t to, consensus::message m, consensus::group_t g) {
  checker_of(g).on_sent(now_, n.index, m);
  trace_.mix((std::uint64_t{n.index} << 56) ^ (std::uint64_t{to} << 48) ^ (static_cast<std::uint64_t>(m.h.cmd) << 40) ^
             m.h.op);
  ++result_.messages;
  ++n.sent;
  const bool ack = m.h.cmd == consensus::command::prepare_ok;
  network_.send(n.index, to, std::move(m), now_, g.value());
  if (ack && !liveness_ && options_.crash_after_ack_ppm > 0 && rng_.chance_ppm(options_.crash_after_ack_ppm) &&
      may_crash()) {
    // Right after the acknowledgement: the driver executes nothing more, and the replica crashes once the input
    // returns (it is on the stack now), so the effects after the send are lost with it.
    driver_of(n, g)->halt();
    n.crash_now = true;
    n.crash_power_loss = true;
  }
}

consensus::driver_hooks cluster::hooks(node& np) {
  node* n = &np;
  consensus::driver_hooks h;
  h.reply = [this, n](consensus::message m) {
    const std::uint64_t client = client_of_session(m.h.client);
    if (client >= 1 && client <= clients_.size()) {
      network_.send(n->index, client_base + static_cast<node_t>(client - 1), std::move(m), now_);
    }
  };
  h.persisted = [this, n](const consensus::vsr_state& s) { checker_.on_persisted(now_, n->index, s); };
  h.writing = [this, n](std::uint64_t op) { checker_.on_write_submitted(n->index, op); };
  h.written = [this, n](std::uint64_t op, consensus::checksum_t checksum) {
    checker_.on_write_done(n->index, op, checksum, true);
  };
  h.checkpointed = [this, n](std::uint8_t, std::uint64_t) {
    ++result_.checkpoints;
    ++n->checkpoints;
  };
  // (The partition log must hold every batch a checkpoint covers before the checkpoint is written: partition_storage
  // is the driver's checkpoint gate, durable_through().)
  h.installed = [this, n](const consensus::header& at) {
    checker_.on_installed(now_, n->index, at, n->sm->digest_at(at.op));
    ++result_.state_transfers;
    trace_.event(now_, "sync", {{"replica", n->index}, {"op", static_cast<std::int64_t>(at.op)}});
  };
  h.applied = [this, n](const consensus::header& prepare) {
    const bool first = prepare.op > checker_.committed();
    checker_.on_applied(now_, n->index, prepare, n->sm->payload_at(prepare.op), n->sm->digest_at(prepare.op));
    if (const auto [base, records] = n->sm->offsets_at(prepare.op); records > 0) {
      checker_.on_offsets(now_, n->index, prepare.op, n->sm->payload_at(prepare.op), base, records);
    }
    if (first && checker_.committed() == prepare.op) {
      trace_.event(now_, "commit",
                   {{"op", static_cast<std::int64_t>(prepare.op)}, {"view", prepare.view}, {"replica", n->index}});
    }
    if (n->sm->duplicates() > 0) {
      checker_.on_duplicate(now_, n->index);
    }
  };
  h.fenced = [this, n](const error& e) {
    n->crash_now = true;
    n->crash_power_loss = false;  // rilld exits at a fence and its supervisor restarts it: the machine stays up
    trace_.event(now_, "fault", {{"replica", n->index}}, "fenced");
    if (debug_) {
      fmt::print("{} fenced r{}: {}\n", now_, n->index, e.message());
    }
  };
  return h;
}

void cluster::crash_if_due(node& n) {
  if (n.up && n.crash_now) {
    // A fence: as rilld exits at a failed fsync and its supervisor restarts it, it recovers from what is on disk
    // (the page cache too: the machine stayed up). Or the crash-after-ack fault (a power loss).
    crash(n, n.crash_power_loss);
  }
}

void cluster::observe(node& n) {
  checker_.on_state(now_, *n.r);
  // Lost until every group on it has caught up (the bound on disks lost at once is per node: all its groups).
  const bool sides_recovering =
      std::any_of(n.sides.begin(), n.sides.end(), [](const side_replica& sr) { return sr.d->replica().recovering(); });
  if (n.lost && !n.r->recovering() && !sides_recovering) {
    n.lost = false;
    trace_.event(now_, "recovered", {{"replica", n.index}, {"op", static_cast<std::int64_t>(n.r->op().value())}});
  }
  if (n.r->status() != n.last_status || n.r->view().value() != n.last_view) {
    n.last_status = n.r->status();
    n.last_view = n.r->view().value();
    ++result_.view_changes;
    if (debug_) {
      fmt::print("{} state {}\n", now_, n.r->describe());
    }
    trace_.event(now_, "view",
                 {{"replica", n.index},
                  {"view", n.last_view},
                  {"log_view", n.r->log_view().value()},
                  {"op", static_cast<std::int64_t>(n.r->op().value())},
                  {"commit", static_cast<std::int64_t>(n.r->commit_max().value())}},
                 n.last_status == consensus::status::normal ? "normal" : "view_change");
  }
}

void cluster::inject_faults() {
  const std::size_t n = options_.replicas;
  if (options_.power_loss_ppm > 0 && fault_rng_.chance_ppm(options_.power_loss_ppm)) {
    lose_power_of_majority();
  }
  for (auto& nd : nodes_) {
    if (nd->up && may_crash() && rng_.chance_ppm(options_.crash_ppm)) {
      crash(*nd, !fault_rng_.chance_ppm(options_.process_crash_ppm));
    }
    if (nd->up && may_crash() && options_.disk_lost_ppm > 0 && rng_.chance_ppm(options_.disk_lost_ppm) &&
        may_lose_disk()) {
      lose_disk(*nd);
      continue;
    }
    if (nd->up && options_.rot_ppm > 0 && rng_.chance_ppm(options_.rot_ppm)) {
      if (auto op = nd->storage->rot_one(rng_)) {
        trace_.event(now_, "fault", {{"replica", nd->index}, {"op", static_cast<std::int64_t>(*op)}}, "rot");
      }
    }
    for (auto& sr : nd->sides) {
      if (nd->up && options_.rot_ppm > 0 && rng_.chance_ppm(options_.rot_ppm)) {
        (void)sr.storage->rot_one(rng_);
      }
    }
  }
  if (partition_until_ != 0 && now_ >= partition_until_) {
    network_.heal_all();
    partition_until_ = 0;
    trace_.event(now_, "fault", {}, "heal");
  } else if (partition_until_ == 0 && n > 1 && rng_.chance_ppm(options_.partition_ppm)) {
    // One of: a single replica cut off both ways; a random split both ways; a random split one way only.
    const std::uint64_t kind = rng_.below(3);
    std::vector<bool> side(n, false);
    if (kind == 0) {
      side[rng_.below(n)] = true;
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        side[i] = rng_.below(2) == 1;
      }
    }
    network_.cut_sides(side, kind == 2);  // (kind 2: one way)
    partition_until_ = now_ + 1 + rng_.below(options_.partition_ticks_max);
    ++result_.partitions;
    std::int64_t mask = 0;
    for (std::size_t i = 0; i < n; ++i) {
      mask |= side[i] ? (1 << i) : 0;
    }
    trace_.event(now_, "fault", {{"side", mask}, {"until", static_cast<std::int64_t>(partition_until_)}},
                 kind == 2 ? "partition_one_way" : "partition");
  }
}

void cluster::step() {
  ++now_;
  if (!liveness_) {
    inject_faults();
  }
  for (auto& n : nodes_) {
    if (!n->up && now_ >= n->restart_at) {
      restart(*n);
    }
  }
  for (auto& p : network_.deliver(now_)) {
    if (p.to < client_base) {
      node& n = *nodes_.at(p.to);
      if (!n.up) {
        continue;
      }
      if (debug_) {
        fmt::print("{} deliver {}->{} g{} {} v{} lv{} op{} commit{} | {}\n", now_, p.from, p.to, p.group,
                   p.beat.empty() ? consensus::to_string(p.m.h.cmd) : "node_heartbeat", p.m.h.view, p.m.h.log_view,
                   p.m.h.op, p.m.h.commit,
                   p.group == 0 ? n.r->describe() : n.sides.at(p.group - 1).d->replica().describe());
      }
      ++n.received;
      if (!p.beat.empty()) {
        auto beat = consensus::decode_node_heartbeat(p.beat);
        RILL_ASSERT(beat.has_value(), "a heartbeat damaged in the simulated network: {}", beat.error().detail());
        n.host->on_heartbeat(*beat);
      } else if (p.from >= client_base) {
        n.host->on_request(consensus::group_t(p.group), p.m);
      } else {
        // (A prepare of group 0 reaches the partition log through the driver's hook.)
        n.host->on_message(consensus::node_t(p.from), consensus::group_t(p.group), p.m);
      }
      crash_if_due(n);
      if (n.up) {
        observe(n);
      }
    } else if (const node_t endpoint = p.to - client_base; endpoint >= side_client_stride) {
      side_group& g = sides_.at(endpoint / side_client_stride - 1);
      sim_client& c = *g.clients.at(endpoint % side_client_stride);
      if (auto ack = c.on_message(p.m, now_, {})) {
        g.chk->on_ack(now_, c.id(), *ack);
        result_.retries_answered += ack->verdict == storage::producer_verdict::duplicate ? 1 : 0;
      }
    } else {
      sim_client& c = *clients_.at(endpoint);
      if (debug_) {
        fmt::print("{} deliver {}->{} {} v{} op{} request{} prepare {}\n", now_, p.from, p.to,
                   consensus::to_string(p.m.h.cmd), p.m.h.view, p.m.h.op, p.m.h.request,
                   consensus::to_string(p.m.h.context));
      }
      auto ack = c.on_message(p.m, now_, {});
      if (ack) {
        checker_.on_ack(now_, c.id(), *ack);
        result_.retries_answered += ack->verdict == storage::producer_verdict::duplicate ? 1 : 0;
        trace_.event(now_, "ack",
                     {{"client", static_cast<std::int64_t>(c.id())},
                      {"op", static_cast<std::int64_t>(ack->op)},
                      {"latency", static_cast<std::int64_t>(ack->latency_ticks)}});
      }
    }
  }
  for (auto& n : nodes_) {
    if (!n->up) {
      continue;
    }
    n->storage->complete(now_);  // completions run through the driver, which executes what they cause
    for (auto& sr : n->sides) {
      if (n->up) {
        sr.storage->complete(now_);
        crash_if_due(*n);
      }
    }
    crash_if_due(*n);
    if (!n->up) {
      continue;
    }
    // As a shard's deadline heap would: the host is called when it says it is due (every tick while its group is
    // active, else at its next heartbeat or peer deadline), with the ticks that passed since.
    if (n->host->active() > 0 || now_ >= n->host_due_at) {
      n->host->tick(now_ - n->host_ticked_at);  // ticks the group unless it is idle; sends heartbeats when due
      n->host_ticked_at = now_;
      n->host_due_at = now_ + n->host->ticks_until_due();
    }
    crash_if_due(*n);
    if (!n->up) {
      continue;
    }
    // The whole log's invariants (hash chain, pipeline within the log) every 8th tick: O(journal) each, so the
    // simulator checks them (about 1.1x the time of a seed, against 1.7x after every input) and production
    // (check_invariants() after every input) does not.
    if (now_ % 8 == 0) {
      n->r->check_log_invariants();
      for (auto& sr : n->sides) {
        sr.d->replica().check_log_invariants();
      }
    }
    observe(*n);
    for (std::size_t k = 0; k < sides_.size(); ++k) {
      sides_[k].chk->on_state(now_, n->sides[k].d->replica());
    }
    step_partition(*n);
  }
  clock_.advance(std::chrono::milliseconds(1));
  if (options_.disk && options_.partition) {
    for (std::size_t c = 0; c < clients_.size(); ++c) {
      if (!consumer_reading_[c] && rng_.below(options_.consume_every_ticks) == 0) {
        consume(c);
      }
    }
  }
  for (auto& c : clients_) {
    c->tick(now_,
            [&](node_t to, consensus::message m) { network_.send(client_base + c->id() - 1, to, std::move(m), now_); });
  }
  for (auto& g : sides_) {
    const node_t base = client_base + side_client_stride * static_cast<node_t>(g.id.value());
    for (auto& c : g.clients) {
      c->tick(now_, [&](node_t to, consensus::message m) {
        network_.send(base + static_cast<node_t>(c->id() - 1), to, std::move(m), now_, g.id.value());
      });
    }
  }
  if (options_.sample_every_ticks > 0 && options_.on_sample && now_ % options_.sample_every_ticks == 0) {
    for (const auto& n : nodes_) {
      replica_sample s;
      s.tick = now_;
      s.replica = n->index;
      s.up = n->up && n->r != nullptr;
      if (s.up) {
        s.normal = n->r->status() == consensus::status::normal;
        s.view = n->r->view().value();
        s.log_view = n->r->log_view().value();
        s.op = n->r->op().value();
        s.commit = n->r->commit_max().value();
      }
      s.messages_sent = n->sent;
      s.messages_received = n->received;
      s.crashes = n->crashes;
      s.checkpoints = n->checkpoints;
      options_.on_sample(s);
    }
  }
}

consensus::partition_storage* cluster::partition_of(node& n, std::size_t g) const {
  if (!n.up) {
    return nullptr;
  }
  disk_storage* d = g == 0 ? n.disk : n.sides.at(g - 1).disk;
  return d != nullptr ? d->partition() : nullptr;
}

void cluster::step_partition(node& n) {
  for (std::size_t g = 0; g < options_.groups && n.up; ++g) {
    step_partition(n, g);
  }
}

void cluster::step_partition(node& n, std::size_t g) {
  consensus::partition_storage* part = partition_of(n, g);
  if (part == nullptr) {
    return;
  }
  storage::partition_log& log = part->log();
  if (auto due = log.next_deadline(); due && *due <= clock_.monotonic()) {
    log.tick();  // rolls by age
  }
  // A state transfer: the batches up to the installed checkpoint, from a peer whose log has committed them (the
  // harness carries the chunks; in a cluster, the replica plane does).
  bool& transferring = g == 0 ? n.transferring : n.sides.at(g - 1).transferring;
  if (const auto target = part->transfer_target(); target && !transferring) {
    for (auto& peer : nodes_) {
      consensus::partition_storage* from = peer.get() == &n ? nullptr : partition_of(*peer, g);
      if (from == nullptr || from->committed_op() < target->op) {
        continue;
      }
      transferring = true;
      const replica_t source_index = peer->index;
      const std::uint32_t source_incarnation = peer->incarnation;
      auto source = [this, source_index, source_incarnation, g](
                        offset_t at, std::uint64_t through) -> task<expected<consensus::transfer_chunk>> {
        node& s = *nodes_.at(source_index);
        consensus::partition_storage* p = partition_of(s, g);
        if (p == nullptr || s.incarnation != source_incarnation) {
          co_return rill::unexpected(error(make_error_code(storage::errc::closed), "the peer went down"));
        }
        auto chunk = co_await p->read_for_transfer(at, through, 64 * 1024);
        if (!*alive_ || partition_of(s, g) != p || s.incarnation != source_incarnation) {
          co_return rill::unexpected(error(make_error_code(storage::errc::closed), "the peer went down"));
        }
        co_return chunk;
      };
      const std::uint32_t incarnation = n.incarnation;
      spawn(part->transfer(std::move(source)),
            [this, alive = alive_, index = n.index, incarnation, g](expected<bool> r) {
              if (!*alive) {
                return;
              }
              node& m = *nodes_.at(index);
              if (m.incarnation != incarnation) {
                return;  // it crashed meanwhile
              }
              (g == 0 ? m.transferring : m.sides.at(g - 1).transferring) = false;
              if (r && *r) {
                m.host->poke(consensus::group_t(static_cast<std::uint32_t>(g)));  // a held checkpoint may go now
              }
            });
      break;
    }
  }
  if (options_.retention_ppm > 0 && rng_.chance_ppm(options_.retention_ppm)) {
    // Retention (of what no replica may need: partition_storage::enforce_retention); a crash may stop it anywhere.
    spawn(part->enforce_retention(), [this, alive = alive_](expected<storage::retention_result> r) {
      if (*alive && r) {
        result_.segments_retained += r->segments_removed;
      }
    });
  }
  crash_if_due(n);
  if (!n.up) {
    return;
  }
  // Visible <= committed: what consumers can read was committed (the checker knows every committed offset).
  checker_of(consensus::group_t(static_cast<std::uint32_t>(g)))
      .on_visible(now_, n.index, static_cast<std::uint64_t>(log.committed().value()));
}

void cluster::consume(std::size_t c) {
  // A consumer reads from whichever replica it picks (committed records only), from its position on.
  std::vector<node*> up;
  for (auto& n : nodes_) {
    if (partition_of(*n, 0) != nullptr) {
      up.push_back(n.get());
    }
  }
  if (up.empty()) {
    return;
  }
  node* from = up[rng_.below(up.size())];
  storage::read_request rq;
  rq.offset = offset_t(static_cast<std::int64_t>(consumer_position_[c]));
  rq.max_bytes = 4096;
  consumer_reading_[c] = true;
  const replica_t index = from->index;
  auto read = [](storage::partition_log* log, storage::read_request r) -> task<expected<storage::read_result>> {
    co_return co_await log->read(r);
  };
  spawn(read(&partition_of(*from, 0)->log(), rq), [this, c, index, alive = alive_](expected<storage::read_result> r) {
    if (!*alive) {
      return;
    }
    consumer_reading_[c] = false;
    if (!r) {
      // The replica crashed under the read (try elsewhere), or retention removed the position there: the consumer
      // moves to that log's start (what a consumer of a topic with retention does).
      const consensus::partition_storage* p = partition_of(*nodes_.at(index), 0);
      if (r.error().code() == make_error_code(storage::errc::offset_out_of_range) && p != nullptr &&
          p->log().log_start().value() > static_cast<std::int64_t>(consumer_position_[c])) {
        consumer_position_[c] = static_cast<std::uint64_t>(p->log().log_start().value());
      }
      return;
    }
    std::uint64_t next = consumer_position_[c];
    for (const auto& v : r->batch_views()) {
      const auto records = records_of_batch(v.bytes());
      const auto base = static_cast<std::uint64_t>(v.base_offset().value());
      for (std::size_t i = 0; i < records.size(); ++i) {
        const std::uint64_t offset = base + i;
        if (offset < next) {
          continue;  // the batch holding the position starts before it
        }
        if (offset != next) {
          checker_.fail_partition(now_, fmt::format("consumer {} read offset {} from replica {} after {}: a gap", c + 1,
                                                    offset, index, next));
        }
        checker_.on_consumed(now_, index, offset, records[i].first, records[i].second);
        next = offset + 1;
        ++result_.records_consumed;
      }
    }
    if (next > consumer_position_[c]) {
      consumer_position_[c] = next;
      if (rng_.below(4) == 0) {
        clients_[c]->commit_position(next);
      }
    }
  });
}

void cluster::check_partitions_at_end(const std::vector<const consensus::replica*>& core, std::size_t g) {
  // Every core replica's partition log holds exactly the canonical records, from its log start (offset 0 without
  // retention) to its committed end, in order, without gaps; and everything acknowledged is visible there.
  checker& chk = checker_of(consensus::group_t(static_cast<std::uint32_t>(g)));
  for (const consensus::replica* r : core) {
    node& n = *nodes_.at(r->index());
    consensus::partition_storage* part = partition_of(n, g);
    if (part == nullptr) {
      continue;
    }
    storage::partition_log& log = part->log();
    disk_storage& disk = g == 0 ? *n.disk : *n.sides.at(g - 1).disk;
    std::uint64_t next = static_cast<std::uint64_t>(log.log_start().value());  // (retention removed what is below)
    while (next < static_cast<std::uint64_t>(log.committed().value())) {
      storage::read_request rq;
      rq.offset = offset_t(static_cast<std::int64_t>(next));
      rq.max_bytes = 64 * 1024;
      std::optional<expected<storage::read_result>> got;
      spawn(log.read(rq), [&](expected<storage::read_result> v) { got.emplace(std::move(v)); });
      storage::io::run_until(disk.disk(), [&] { return got.has_value(); });
      if (got && !*got && (*got).error().code() == make_error_code(storage::errc::offset_out_of_range) &&
          log.log_start().value() > static_cast<std::int64_t>(next)) {
        next = static_cast<std::uint64_t>(log.log_start().value());  // a retention in flight removed them
        continue;
      }
      if (!got || !*got || (*got)->batches == 0) {
        chk.fail_partition(
            now_, fmt::format("replica {} partition log: reading committed offset {} failed: {}", r->index(), next,
                              got && !*got ? (*got).error().message() : "nothing returned"));
        return;
      }
      for (const auto& v : (*got)->batch_views()) {
        const auto records = records_of_batch(v.bytes());
        if (static_cast<std::uint64_t>(v.base_offset().value()) != next || records.empty()) {
          chk.fail_partition(now_, fmt::format("replica {} partition log: batch at {} where {} was next", r->index(),
                                               v.base_offset().value(), next));
          return;
        }
        for (std::size_t i = 0; i < records.size(); ++i) {
          chk.on_consumed(now_, r->index(), next + i, records[i].first, records[i].second);
        }
        next += records.size();
      }
    }
    chk.check_acks_visible(now_, r->index(), next);
  }
}

void cluster::enter_liveness() {
  liveness_ = true;
  network_.calm();
  partition_until_ = 0;
  storage_options calm = options_.storage;
  calm.write_fault_ppm = 0;
  calm.read_fault_ppm = 0;
  calm.sync_fault_ppm = 0;
  for (auto& n : nodes_) {
    n->storage->set_options(calm);
    for (auto& sr : n->sides) {
      sr.storage->set_options(calm);
    }
    if (!n->up) {
      restart(*n);
    }
  }
  trace_.event(now_, "liveness", {});
}

std::vector<const consensus::replica*> cluster::core_of(
    const std::function<const consensus::replica&(const node&)>& pick,
    const std::function<bool(const node&)>& caught_up) const {
  // The replicas normal in the highest normal view, caught up (everything committed applied) at the same op.
  std::uint32_t view = 0;
  for (const auto& n : nodes_) {
    if (n->up && pick(*n).status() == consensus::status::normal) {
      view = std::max(view, pick(*n).view().value());
    }
  }
  std::map<std::uint64_t, std::vector<const consensus::replica*>> by_op;
  for (const auto& n : nodes_) {
    if (!n->up) {
      continue;
    }
    const auto& r = pick(*n);
    if (r.status() == consensus::status::normal && r.view().value() == view && r.commit_min() == r.commit_max() &&
        r.commit_max() == r.op() && caught_up(*n)) {
      by_op[r.op().value()].push_back(&r);
    }
  }
  return by_op.empty() ? std::vector<const consensus::replica*>{} : by_op.rbegin()->second;
}

namespace {
// A partition group's replica has caught up in its log too: no transfer due, its batches committed as far as it
// applied, no checkpoint held for them.
bool log_caught_up(const consensus::partition_storage* p, const consensus::driver& d) {
  return p == nullptr ||
         (!p->transfer_target() && p->committed_op() >= d.replica().commit_min().value() && !d.checkpoint_held());
}
}  // namespace

std::vector<const consensus::replica*> cluster::core() const {
  return core_of([](const node& n) -> const consensus::replica& { return *n.r; },
                 [](const node& n) { return log_caught_up(n.disk != nullptr ? n.disk->partition() : nullptr, *n.d); });
}

bool cluster::converged() const {
  // A replication quorum must converge; a replica left in a view change of its own (it counted votes that were
  // later withdrawn) rejoins at the next view change, as in TigerBeetle, and is reported, not failed.
  if (core().size() < consensus::quorum_replication(options_.replicas)) {
    return false;
  }
  return sides_converged() && clients_done();
}

std::vector<const consensus::replica*> cluster::side_core(std::size_t k) const {
  return core_of([k](const node& n) -> const consensus::replica& { return n.sides[k].d->replica(); },
                 [k](const node& n) {
                   const side_replica& sr = n.sides[k];
                   return log_caught_up(sr.disk != nullptr ? sr.disk->partition() : nullptr, *sr.d);
                 });
}

bool cluster::sides_converged() const {
  for (std::size_t k = 0; k < sides_.size(); ++k) {
    if (side_core(k).size() < consensus::quorum_replication(options_.replicas)) {
      return false;
    }
  }
  return true;
}

run_result cluster::run() {
  while (now_ < options_.safety_ticks && all_ok() && !clients_done()) {
    step();
  }
  bool done = false;  // converged (decided once: the final checks below drive the disks, and reads finishing then
                      // may hand clients more work)
  if (all_ok()) {
    enter_liveness();
    const std::uint64_t bound = now_ + options_.liveness_ticks;
    while (now_ < bound && all_ok() && !converged()) {
      step();
    }
    done = converged();
    if (all_ok() && done) {
      const auto converged_core = core();
      result_.lagging = options_.replicas - converged_core.size();
      checker_.check_acks_applied(now_, converged_core);
      check_partitions_at_end(converged_core, 0);
      for (std::size_t k = 0; k < sides_.size(); ++k) {
        const auto side = side_core(k);
        sides_[k].chk->check_acks_applied(now_, side);
        check_partitions_at_end(side, k + 1);
      }
    }
  }
  result_.ticks = now_;
  for (const auto& m : nodes_) {
    result_.partition_truncations += m->truncations;
    result_.partition_transfers += m->transfers;
    result_.partition_restarts += m->restarts;
    for (std::size_t g = 0; g < options_.groups; ++g) {
      if (const consensus::partition_storage* p = partition_of(*m, g)) {
        result_.partition_truncations += p->truncations();
        result_.partition_transfers += p->transfers();
        result_.partition_restarts += p->restarts();
      }
    }
  }
  result_.committed = checker_.committed();
  result_.acks = checker_.acks();
  for (const auto& c : clients_) {
    result_.evictions += c->evictions();
  }
  for (const auto& g : sides_) {
    result_.side_committed += g.chk->committed();
    result_.group_commits += g.chk->group_commits();
  }
  if (!checker_.ok()) {
    result_.result = outcome::safety_failure;
    result_.detail = checker_.violation();
  } else if (!all_ok()) {
    result_.result = outcome::safety_failure;
    for (const auto& g : sides_) {
      if (!g.chk->ok()) {
        result_.detail = fmt::format("group {}: {}", g.id.value(), g.chk->violation());
        break;
      }
    }
  } else if (!done) {
    result_.result = outcome::liveness_failure;
    std::string state;
    for (const auto& n : nodes_) {
      state += " [" + n->r->describe() + "]";
    }
    std::uint64_t finished = 0;
    for (const auto& c : clients_) {
      finished += c->done() ? 1 : 0;
    }
    for (const auto& n : nodes_) {
      if (const consensus::partition_storage* p = n->up && n->disk != nullptr ? n->disk->partition() : nullptr) {
        state += fmt::format(" [r{} partition: {}{}]", n->index, p->describe(),
                             n->d->checkpoint_held() ? ", checkpoint held" : "");
      }
    }
    for (std::size_t k = 0; k < sides_.size(); ++k) {
      state += fmt::format(" [group {}:", sides_[k].id.value());
      for (const auto& n : nodes_) {
        if (n->up) {
          state += " [" + n->sides[k].d->replica().describe() + "]";
          if (const consensus::partition_storage* p = partition_of(*n, k + 1)) {
            state += fmt::format(" [r{} partition: {}{}]", n->index, p->describe(),
                                 n->sides[k].d->checkpoint_held() ? ", checkpoint held" : "");
          }
        }
      }
      std::uint64_t side_finished = 0;
      for (const auto& c : sides_[k].clients) {
        side_finished += c->done() ? 1 : 0;
      }
      state += fmt::format(" clients done {}/{}]", side_finished, sides_[k].clients.size());
    }
    result_.detail = fmt::format("not converged {} ticks after healing:{}; clients done {}/{}", options_.liveness_ticks,
                                 state, finished, clients_.size());
  }
  for (const auto& n : nodes_) {
    if (n->up) {
      result_.final_view = std::max(result_.final_view, n->r->view().value());
    }
  }
  trace_.event(now_, "result",
               {{"outcome", static_cast<std::int64_t>(result_.result)},
                {"committed", static_cast<std::int64_t>(result_.committed)},
                {"acks", static_cast<std::int64_t>(result_.acks)}});
  result_.hash = trace_.hash();
  return result_;
}

}  // namespace rill::simulation
