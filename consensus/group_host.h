#pragma once
// group_host: the VSR groups one node runs, and the one heartbeat it sends each peer node for all of them.
//
// A node hosts many groups (rilld's metadata group and, later, one per partition). Replica r of group g runs on node
// members[r]; this node runs one replica of each group it hosts. Each group is a driver (driver.h) the owner builds
// with the transport join() returns, then attaches. The host:
// - routes: a group's transport sends each message to the node running the addressed replica, tagged with the group
//   id (host_transport); on_message() hands what arrives to that group's driver.
// - ticks only active groups. Any input makes a group active; after each tick, a group whose replica is idle
//   (replica::idle()) and whose driver has nothing in flight or held becomes idle and is not ticked again until its
//   next input. An idle group costs nothing per tick: no timer, no call; its replica's clock stands still.
// - sends heartbeats for every group at once: every heartbeat_ticks, one node_heartbeat to each peer, listing
//   (group, view, commit, checksum) for every group this node leads (replica::beat()) that the peer is a member of.
//   The replicas send no heartbeats of their own (replica_options::heartbeats_by_host). A receiving host turns each
//   entry into the commit message the primary would have sent: always for an active group (so its primary timeout
//   is reset), and for an idle group only when the entry says something it does not know (another view, a higher
//   commit), which wakes it to catch up.
// - watches its peers: a peer whose heartbeats stop for peer_timeout_ticks, or whose heartbeat leaves out a group
//   this node believes it leads (it abdicates, or lost the group), wakes that group (every such group, for a silent
//   peer). A woken group ticks on, idle or not, until its primary names it again in the replica's own view (an
//   entry for an older view is ignored; one for a newer view is handed over, so the replica asks for that view,
//   but counts as hearing from nobody), so that, hearing nothing from its primary for primary_timeout_ticks of its
//   own clock, it votes to replace it as any backup does. A group whose primary's node is silent never settles
//   idle, whenever it joined or entered that view.
// - says when it must next be called (ticks_until_due()): every tick while a group is active, else at the next
//   heartbeat or peer deadline, so that the shard's deadline heap (or the simulator) holds one entry per node, not
//   one per group.
//
// Invariants (asserted):
// - A group is in the active set iff it is attached and not known idle, or its primary is silent about it; a group
//   with storage in flight or a held checkpoint is active (so no completion reaches a group the host believes
//   idle).
// - A heartbeat entry is sent only to a member of its group, only for a group this node leads in a view that is
//   durable here (replica::beat()); a received entry is taken only from the node that runs the primary of the view
//   it names, and only an entry in the replica's own view counts as hearing from its primary.
// - An inactive group is quiet (checked at every heartbeat sent).
// - At most groups_max groups, so a heartbeat holds at most groups_max entries.
//
// Costs: a tick costs O(active groups + peers), plus O(groups the peer leads) when a peer falls silent, and
// O(groups hosted) when the heartbeats go out; each heartbeat received costs O(its entries + the groups its sender
// leads here) (an index by primary node, led_), so O(groups) per heartbeat interval, never per tick.
//
// Contract: single-threaded, like the drivers. The transport must not call back into the host. Detach a group before
// its driver is destroyed.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "base/expected.h"
#include "base/strong.h"
#include "consensus/driver.h"

namespace rill::consensus {

// A node of the cluster (its index in the cluster's configuration) and a group it hosts (0: the metadata group).
using node_t = strong<std::uint32_t, struct node_tag>;
using group_t = strong<std::uint64_t, struct group_tag>;

// The most groups one host runs (rilld's partitions_max bounds what it asks for; this bounds the heartbeat).
inline constexpr std::size_t groups_per_host_max = 1u << 20;

struct heartbeat_entry {
  group_t group;
  commit_beat beat;
  friend bool operator==(const heartbeat_entry&, const heartbeat_entry&) = default;
};

// One node's heartbeat to one peer: every group it leads that the peer is a member of.
struct node_heartbeat {
  std::uint64_t cluster = 0;
  node_t from;
  std::uint64_t sequence = 0;  // per sending host, increasing (a replica drops an older one it gets late)
  std::vector<heartbeat_entry> entries;
  friend bool operator==(const node_heartbeat&, const node_heartbeat&) = default;
};

// The wire form: a 48-byte head (checksum of the rest, cluster, from, count, sequence, reserved), then 48 bytes per
// entry (group, view, reserved, commit, checksum). Decoding checks the size, the checksum, the count against
// groups_per_host_max, and zero reserved fields; its errors (corrupt_data) say which.
[[nodiscard]] std::vector<std::byte> encode(const node_heartbeat& beat);
// The commit message entry `e` stands for: what the primary (replica index `primary`, cluster identity `cluster`)
// would have sent itself, numbered with the heartbeat's sequence.
[[nodiscard]] message commit_message(const heartbeat_entry& e, std::uint64_t cluster, replica_t primary,
                                     std::uint64_t sequence);
[[nodiscard]] expected<node_heartbeat> decode_node_heartbeat(std::span<const std::byte> bytes);

// Where the host's traffic goes. Best effort, like transport. Neither call may call back into the host.
class host_transport {
 public:
  virtual ~host_transport() = default;
  virtual void send(node_t to, group_t group, message m) = 0;
  virtual void send(node_t to, const node_heartbeat& beat) = 0;
};

struct host_options {
  std::uint64_t cluster = 0;
  node_t node;                            // this node
  std::uint32_t heartbeat_ticks = 5;      // as replica_options::heartbeat_ticks
  std::uint32_t peer_timeout_ticks = 20;  // a peer silent this long wakes the idle groups it leads here
  std::size_t groups_max = groups_per_host_max;
  // Send the heartbeats when a led group's commit moved, not only every heartbeat_ticks: at once after the input
  // that committed, at most this many times per tick (0: never), else at the next tick. Backups learn a commit at
  // once (rilld: a change made through a backup is applied there without waiting for a tick). Each costs O(groups
  // this node leads) per peer: keep it small where a node leads many groups.
  std::uint32_t commit_heartbeats_per_tick_max = 0;
};

// What the host has done (tests and benchmarks read it; rilld exports it).
struct host_counters {
  std::uint64_t group_ticks = 0;        // on_tick calls made on drivers
  std::uint64_t heartbeats_sent = 0;    // node_heartbeats sent
  std::uint64_t entries_sent = 0;       // heartbeat entries in them
  std::uint64_t commits_delivered = 0;  // entries handed to a group as a commit message
  std::uint64_t entries_skipped = 0;    // entries an idle group already knew
  std::uint64_t wakes = 0;              // groups woken because their primary went silent about them
};

class group_host {
 public:
  group_host(const host_options& options, host_transport& net);
  ~group_host();
  group_host(const group_host&) = delete;
  group_host& operator=(const group_host&) = delete;

  // Registers group g, whose replica r runs on members[r] (this node among them, once), and returns the transport
  // its driver must be built with (replica_options::heartbeats_by_host set, replica = this node's index). Refuses a
  // group already hosted, a membership without this node or with a node twice, or one group past groups_max.
  [[nodiscard]] expected<transport*> join(group_t g, std::vector<node_t> members);
  // The driver of a joined group; it becomes active.
  void attach(group_t g, driver& d);
  // Forgets g (its driver may be destroyed next). Messages for it are dropped from then on.
  void leave(group_t g);

  // Inputs.
  void on_message(node_t from, group_t g, const message& m);
  void on_heartbeat(const node_heartbeat& beat);
  // A client's request (command::request) for group g, from wherever the node's clients are served.
  void on_request(group_t g, const message& m);
  // `elapsed` ticks have passed (at least 1; ticks_until_due() says when the host needs the next call): ticks every
  // active group once, sends the heartbeats when due, and wakes the groups of peers gone silent.
  void tick(std::uint64_t elapsed = 1);
  // The group's checkpoint gate moved (driver::poke()), which wakes it.
  void poke(group_t g);
  // commit_heartbeats_per_tick_max: a group may have committed outside an input the host saw (a storage completion):
  // send the heartbeats now if a group this node leads did (at most once per tick). Never from inside a driver's hook.
  void flush_commits();

  [[nodiscard]] std::uint64_t ticks_until_due() const;
  [[nodiscard]] std::size_t groups() const noexcept { return groups_.size(); }
  [[nodiscard]] std::size_t active() const noexcept { return active_.size(); }
  [[nodiscard]] bool is_active(group_t g) const { return active_.contains(g); }
  [[nodiscard]] const host_counters& counters() const noexcept { return counters_; }
  [[nodiscard]] std::uint64_t now() const noexcept { return now_; }

 private:
  class link;
  struct hosted {
    std::vector<node_t> members;
    replica_t self = 0;
    std::unique_ptr<link> net;
    driver* d = nullptr;
    // Its primary (as this node knows it) has gone silent about it: its node's heartbeats stopped, or left it out.
    // It stays active, whether idle or not, until an entry for it arrives or it is primary here.
    bool unheard = false;
    std::optional<node_t> led_by;     // where led_ files it: the node of its primary, as of the last refresh
    std::uint64_t commit_beaten = 0;  // the commit its last heartbeat entry carried
  };
  struct peer {
    std::uint64_t heard = 0;  // host tick of its last heartbeat (or of the first group it shares)
    bool woken = false;       // this silence has woken its groups already
  };
  void activate(group_t g);
  // Files the group in led_ under the node of its replica's current primary.
  void index_primary(group_t g, hosted& h);
  void settle_idle(group_t g, const hosted& h);
  void send_heartbeats();
  // commit_heartbeats_per_tick_max: after an input, the heartbeats go at once when a group this node leads committed.
  void heartbeat_if_committed(hosted& h);
  void wake_silent_peers();
  // Wakes (marks unheard) the groups whose primary is n here, except those `named` lists.
  void wake_led_by(node_t n, const std::set<group_t>* named);
  [[nodiscard]] static bool quiet(const driver& d);
  [[nodiscard]] bool silent(node_t n) const;  // no heartbeat from n for more than peer_timeout_ticks

  host_options options_;
  host_transport& net_;
  std::map<group_t, hosted> groups_;
  std::set<group_t> active_;
  std::map<node_t, peer> peers_;
  // The groups each node leads, as this node's replicas believe (refreshed after every input a group gets, and
  // for every group at each heartbeat this node sends): a heartbeat's check for groups left out, and a silent
  // peer's wake, look only at the sender's groups, not at every group hosted. A group's entry may be a tick
  // stale (an I/O completion between ticks changed its view); the checks confirm the primary before they act.
  std::map<node_t, std::set<group_t>> led_;
  std::uint64_t now_ = 0;
  std::uint64_t heartbeat_due_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint32_t early_heartbeats_ = 0;  // sent this tick because a commit moved
  host_counters counters_;
};

}  // namespace rill::consensus
