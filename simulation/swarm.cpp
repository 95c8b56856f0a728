#include "simulation/swarm.h"

#include <algorithm>
#include <iterator>

#include "base/assert.h"
#include "base/random.h"

namespace rill::simulation {

const std::vector<knob_range>& swarm_knobs() {
  static const std::vector<knob_range> knobs = {
      {"replicas", 1, 6, "replicas in the group"},
      {"clients", 1, 8, "clients"},
      {"requests", 10, 60, "requests per client"},
      {"delay-min", 1, 3, "minimum network delay, ticks"},
      {"delay-spread", 0, 10, "extra network delay, uniform in [0, this] ticks"},
      {"loss-ppm", 0, 100'000, "packet loss, parts per million"},
      {"duplicate-ppm", 0, 100'000, "packet duplication, ppm"},
      {"crash-ppm", 0, 600, "replica crash chance per tick, ppm"},
      {"partition-ppm", 0, 400, "chance per tick that a partition begins, ppm"},
      {"write-fault-ppm", 0, 20'000, "failed journal writes, ppm (within the fault atlas)"},
      {"read-fault-ppm", 0, 20'000, "failed journal reads, ppm (within the fault atlas)"},
      {"rot-ppm", 0, 300, "chance per replica per tick that a stored prepare rots, ppm (within the fault atlas)"},
      {"pipeline", 1, 8, "prepares in flight at the primary"},
      {"journal-slots-log2", 6, 10, "the journal ring holds 2^this ops (checkpoints every quarter of it)"},
      {"crash-after-ack-ppm", 0, 20'000, "chance that a replica crashes right after it sends a prepare_ok, ppm"},
      {"faults-off", 0, (1U << fault_class_count) - 1,
       "fault classes turned off, a bit mask (loss, duplicate, crash, partition, write-fault, read-fault, rot, "
       "crash-after-ack: bit 0..7)",
       true},
      {"faults-up", 0, (1U << fault_class_count) - 1,
       "fault classes whose rate is multiplied by 4, a bit mask (bits as faults-off)", true},
      {"disk-lost-ppm", 0, 400,
       "chance per replica per tick that its disk is lost, ppm; drawn, only above 200 (then rot and read faults are "
       "off)"},
      // Last, so that adding it left every other knob's draw as it was.
      {"groups", 1, 3,
       "groups per node: the partition, and side groups (a ledger each, 2 clients, on the journal model) through "
       "the node's one group_host"},
      // After groups, for the same reason.
      {"clients-max", 8, 64,
       "client sessions each replica keeps (at least twice the clients plus one: a client's current and spare "
       "sessions are never evicted by the others'); fewer than the sessions opened makes evictions"},
      // After clients-max, for the same reason.
      {"sync-chunk-bytes", 32, 4096,
       "state transfer moves a checkpoint in chunks of this many bytes (small: a transfer takes many rounds)"},
      // After sync-chunk-bytes, for the same reason.
      {"retention-ppm", 0, 20'000,
       "chance per replica per tick that its partition logs apply retention (retention.bytes 1: every sealed segment "
       "no replica needs goes), ppm; drawn, only above 10000"},
      // After retention-ppm, for the same reason.
      {"process-crash-ppm", 0, 1'000'000,
       "of the crashes, this many per million are process crashes (the page cache survives: unsynced writes stay "
       "readable until a power loss)"},
      {"power-loss-ppm", 0, 200,
       "chance per tick that a majority of the nodes (sometimes all) lose power at once, ppm; drawn, only above 100"},
      {"sync-fault-ppm", 0, 2'000,
       "failed fdatasyncs (EIO: what they covered never becomes durable, yet stays readable in the cache), ppm; the "
       "replica fences and its process restarts; drawn, only above 1000"},
      {"delay-spike-ppm", 0, 20'000,
       "packets held back up to 600 ticks more (arriving after their sender crashed or lost its disk), ppm; drawn, "
       "only above 10000"},
  };
  return knobs;
}

const std::vector<planted_bug>& planted_bugs() {
  static const std::vector<planted_bug> bugs = {
      {"commit_without_quorum", "the primary commits on its own write: a committed op a view change forgets"},
      {"advertise_before_persist", "messages carry a view before it is durable: a restart forgets a view it voted in"},
      {"accept_out_of_order", "a backup takes an older view's prepare as the current primary's: logs diverge"},
      {"forget_client_table", "retried requests prepare and execute again: a request runs twice"},
      {"vote_while_recovering", "a replica that lost its disk votes at once: its empty log forms a view"},
      {"ack_before_durable", "a backup acknowledges a journal write when it submits it: a crash loses a quorum's copy"},
      {"partition_trusts_own_suffix",
       "a partition log keeps what a view change replaced, unchecked: consumers read another op's records"},
      {"idempotence_committed_only",
       "a produce is checked against committed producers only: a retry under another session is stored twice"},
      {"coordinator_commit_unowned", "a commit of a partition its member does not own is stored: a zombie commits"},
      {"append_unsynced",
       "a replicated append completes before its fdatasync: a replica acknowledges a batch a power loss takes"},
      {"trust_page_cache",
       "recovery reads its files through the page cache: a restart after a crash or a failed fdatasync trusts, and "
       "acknowledges, writes the disk does not hold"},
      {"checkpoint_ungated",
       "a checkpoint may cover ops whose batches are not yet durable in the partition log: a restart from it finds "
       "offsets missing"},
      {"recovering_cleared_early",
       "a replica that lost its disk stops recovering once it knows its target, before it holds it: it votes with a "
       "log missing what it acknowledged"},
      {"transfer_uncommitted",
       "a state transfer commits the log through its end: its uncommitted batches above the checkpoint, maybe of a "
       "replaced branch, become visible"},
      {"write_unverified",
       "a partition group writes a prepare it has not verified on its log, and the log's cuts are not reported: the "
       "replica waits for good for a batch the log cut",
       true, true},
      {"stale_after_disk_loss",
       "incarnations are neither stamped nor checked: a vote, do_view_change or prepare_ok from before a replica lost "
       "its disk counts after it",
       false, true},
      {"restart_drops_acked",
       "a state transfer starts the log over at a peer's log start though it held the checkpoint's batches: the "
       "acknowledged batches above the checkpoint go",
       false, true},
  };
  return bugs;
}

const std::vector<std::string>& bug_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& b : planted_bugs()) {
      out.emplace_back(b.name);
    }
    return out;
  }();
  return names;
}

cluster_options options_for(std::uint64_t seed, const knobs& k) {
  prng r(seed ^ 0x5357'4152'4d21'0001ULL);  // the swarm's own stream: independent of the run's
  std::map<std::string, std::uint64_t> v;
  for (const auto& knob : swarm_knobs()) {
    std::uint64_t drawn = r.between(knob.lo, knob.hi);
    if (knob.mask) {
      drawn &= r.between(knob.lo, knob.hi);
    }
    auto it = k.given.find(knob.name);
    v[knob.name] = it != k.given.end() ? it->second : drawn;
  }
  cluster_options o;
  o.seed = seed;
  o.replica.cluster = 1;
  o.replicas = static_cast<std::uint8_t>(v["replicas"]);
  o.clients = static_cast<std::uint32_t>(v["clients"]);
  o.client.requests = v["requests"];
  o.network.delay_min_ticks = static_cast<std::uint32_t>(v["delay-min"]);
  o.network.delay_spread_ticks = static_cast<std::uint32_t>(v["delay-spread"]);
  o.network.loss_ppm = static_cast<std::uint32_t>(v["loss-ppm"]);
  o.network.duplicate_ppm = static_cast<std::uint32_t>(v["duplicate-ppm"]);
  o.crash_ppm = static_cast<std::uint32_t>(v["crash-ppm"]);
  o.partition_ppm = static_cast<std::uint32_t>(v["partition-ppm"]);
  o.storage.write_fault_ppm = static_cast<std::uint32_t>(v["write-fault-ppm"]);
  o.storage.read_fault_ppm = static_cast<std::uint32_t>(v["read-fault-ppm"]);
  o.rot_ppm = static_cast<std::uint32_t>(v["rot-ppm"]);
  o.crash_after_ack_ppm = static_cast<std::uint32_t>(v["crash-after-ack-ppm"]);
  // Swarm masks: some fault classes off, some rates up (a seed with no loss finds what loss hides, and one with
  // crashes four times as often finds what needs two crashes close together). A rate given on the command line is
  // taken as is.
  struct fault_rate {
    fault_class what;
    const char* knob;
    std::uint32_t* ppm;
    std::uint32_t ppm_max;  // with faults-up
  };
  const fault_rate rates[] = {
      {fault_class::loss, "loss-ppm", &o.network.loss_ppm, 300'000},
      {fault_class::duplicate, "duplicate-ppm", &o.network.duplicate_ppm, 300'000},
      {fault_class::crash, "crash-ppm", &o.crash_ppm, 2'400},
      {fault_class::partition, "partition-ppm", &o.partition_ppm, 1'600},
      {fault_class::write_fault, "write-fault-ppm", &o.storage.write_fault_ppm, 80'000},
      {fault_class::read_fault, "read-fault-ppm", &o.storage.read_fault_ppm, 80'000},
      {fault_class::rot, "rot-ppm", &o.rot_ppm, 1'200},
      {fault_class::crash_after_ack, "crash-after-ack-ppm", &o.crash_after_ack_ppm, 80'000},
  };
  static_assert(std::size(rates) == fault_class_count);
  const std::uint64_t off = v["faults-off"];
  const std::uint64_t up = v["faults-up"];
  for (const auto& f : rates) {
    const std::uint64_t b = std::uint64_t{1} << static_cast<std::uint32_t>(f.what);
    if (k.given.contains(f.knob)) {
      continue;
    }
    if ((off & b) != 0) {
      *f.ppm = 0;
    } else if ((up & b) != 0) {
      *f.ppm = std::max(*f.ppm, std::min(f.ppm_max, *f.ppm * fault_up_factor));
    }
  }
  // A seed either loses disks or loses copies within the fault atlas (rot, and failed reads, which the replica
  // counts as a lost copy), never both: together they can destroy every copy of an op (data loss, not a bug).
  // Drawn, half the seeds lose disks; given, the value is the rate.
  const bool lose_disks = k.given.contains("disk-lost-ppm") ? v["disk-lost-ppm"] > 0 : v["disk-lost-ppm"] > 200;
  if (lose_disks) {
    o.disk_lost_ppm = static_cast<std::uint32_t>(v["disk-lost-ppm"]);
    if (!k.given.contains("rot-ppm")) {
      o.rot_ppm = 0;
    }
    if (!k.given.contains("read-fault-ppm")) {
      o.storage.read_fault_ppm = 0;
    }
  }
  // Drawn, half the seeds run retention; given, the value is the rate.
  const bool retention = k.given.contains("retention-ppm") ? v["retention-ppm"] > 0 : v["retention-ppm"] > 10'000;
  if (retention) {
    o.retention_ppm = static_cast<std::uint32_t>(v["retention-ppm"]);
  }
  o.process_crash_ppm = static_cast<std::uint32_t>(v["process-crash-ppm"]);
  // Drawn, half the seeds lose power on a majority at once, and half have failing fdatasyncs; given, as is.
  const bool power_losses = k.given.contains("power-loss-ppm") ? v["power-loss-ppm"] > 0 : v["power-loss-ppm"] > 100;
  if (power_losses) {
    o.power_loss_ppm = static_cast<std::uint32_t>(v["power-loss-ppm"]);
  }
  const bool sync_faults = k.given.contains("sync-fault-ppm") ? v["sync-fault-ppm"] > 0 : v["sync-fault-ppm"] > 1'000;
  if (sync_faults) {
    o.storage.sync_fault_ppm = static_cast<std::uint32_t>(v["sync-fault-ppm"]);
  }
  const bool spikes = k.given.contains("delay-spike-ppm") ? v["delay-spike-ppm"] > 0 : v["delay-spike-ppm"] > 10'000;
  if (spikes) {
    o.network.delay_spike_ppm = static_cast<std::uint32_t>(v["delay-spike-ppm"]) / 10;  // (0.1%..0.2% of packets)
  }
  o.groups = static_cast<std::uint32_t>(v["groups"]);
  o.replica.clients_max =
      static_cast<std::uint32_t>(std::max<std::uint64_t>(v["clients-max"], 2 * std::uint64_t{o.clients} + 1));
  o.replica.pipeline_max = static_cast<std::uint32_t>(v["pipeline"]);
  o.replica.sync_chunk_bytes = static_cast<std::uint32_t>(v["sync-chunk-bytes"]);
  // A small ring wraps many times in a run: checkpoints, and state transfers for replicas left behind.
  o.journal.slot_count = std::uint64_t{1} << v["journal-slots-log2"];
  o.disk = !k.model_storage;
  o.check_ack_durable = k.check_ack_durable;
  o.safety_ticks = k.ticks;
  o.liveness_ticks = k.liveness_ticks;
  for (const auto& b : k.bugs) {
    if (b == "commit_without_quorum") {
      o.bugs.commit_without_quorum = true;
    } else if (b == "advertise_before_persist") {
      o.bugs.advertise_before_persist = true;
    } else if (b == "accept_out_of_order") {
      o.bugs.accept_out_of_order = true;
    } else if (b == "forget_client_table") {
      o.bugs.forget_client_table = true;
    } else if (b == "vote_while_recovering") {
      o.bugs.vote_while_recovering = true;
    } else if (b == "ack_before_durable") {
      o.bugs.ack_before_durable = true;
    } else if (b == "partition_trusts_own_suffix") {
      o.bug_partition_trusts_own_suffix = true;
    } else if (b == "idempotence_committed_only") {
      o.bug_idempotence_committed_only = true;
    } else if (b == "coordinator_commit_unowned") {
      o.bug_coordinator_commit_unowned = true;
    } else if (b == "append_unsynced") {
      o.bug_append_unsynced = true;
    } else if (b == "trust_page_cache") {
      o.bug_trust_page_cache = true;
    } else if (b == "checkpoint_ungated") {
      o.bug_checkpoint_ungated = true;
    } else if (b == "recovering_cleared_early") {
      o.bugs.recovering_cleared_early = true;
    } else if (b == "transfer_uncommitted") {
      o.bug_transfer_uncommitted = true;
    } else if (b == "stale_after_disk_loss") {
      o.bugs.stale_after_disk_loss = true;
    } else if (b == "write_unverified") {
      o.bugs.write_unverified = true;
    } else if (b == "restart_drops_acked") {
      o.bug_restart_drops_acked = true;
    } else {
      RILL_UNREACHABLE("unknown bug {}", b);
    }
  }
  return o;
}

}  // namespace rill::simulation
