// consensus::group_host: three nodes, each hosting one replica of many groups (every group's journal on its node's
// simulated disk), messages and node heartbeats through a queue. Idle groups are not ticked while heartbeats still
// flow; a request wakes only its group; commits reach backups through the node heartbeat; a node gone silent wakes
// exactly the groups it led, which elect another primary; the heartbeat's wire form refuses damage.
#include <boost/test/unit_test.hpp>

#include <deque>
#include <memory>
#include <set>
#include <variant>
#include <vector>

#include "base/endian.h"
#include "consensus/group_host.h"
#include "simulation/sim_disk.h"
#include "storage/io/run.h"
#include "tests/consensus/counter_machine.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
constexpr std::uint64_t cluster_id = 9;

using counter = rill::consensus::testing::counter_machine;

struct group_message {
  node_t from;
  node_t to;
  group_t group;
  message m;
};
struct heartbeat_message {
  node_t to;
  std::vector<std::byte> bytes;  // through the wire form
};
using frame = std::variant<group_message, heartbeat_message>;

struct replica_slot {  // one group's replica on one node
  std::unique_ptr<journal_storage> storage;
  std::unique_ptr<counter> sm;
  std::unique_ptr<driver> d;
  std::vector<std::uint64_t> replied;
};

struct node;

class queue_net final : public host_transport {
 public:
  queue_net(std::deque<frame>& q, node_t self) : queue_(q), self_(self) {}
  void send(node_t to, group_t g, message m) override { queue_.push_back(group_message{self_, to, g, std::move(m)}); }
  void send(node_t to, const node_heartbeat& beat) override { queue_.push_back(heartbeat_message{to, encode(beat)}); }

 private:
  std::deque<frame>& queue_;
  node_t self_;
};

struct node {
  std::unique_ptr<sim_disk> disk;
  std::unique_ptr<queue_net> net;
  std::unique_ptr<group_host> host;
  std::map<group_t, replica_slot> slots;
  bool up = true;
};

// Group g's members: its primary in view 0 is members[0], so rotating the order spreads the leaders over nodes.
std::vector<node_t> members_of(std::uint64_t g) {
  std::vector<node_t> m;
  for (std::uint32_t i = 0; i < 3; ++i) {
    m.push_back(node_t(static_cast<std::uint32_t>((g + i) % 3)));
  }
  return m;
}

struct cluster {
  explicit cluster(std::uint64_t groups) : group_count(groups) {
    for (std::uint32_t n = 0; n < 3; ++n) {
      auto x = std::make_unique<node>();
      x->disk = std::make_unique<sim_disk>(300 + n);
      nodes.push_back(std::move(x));
    }
    for (std::uint32_t n = 0; n < 3; ++n) {
      start(n);
    }
  }
  ~cluster() {
    for (std::uint32_t n = 0; n < 3; ++n) {
      stop(n);
    }
  }
  void start(std::uint32_t n) {
    node& x = *nodes[n];
    x.net = std::make_unique<queue_net>(queue, node_t(n));
    host_options ho;
    ho.cluster = cluster_id;
    ho.node = node_t(n);
    x.host = std::make_unique<group_host>(ho, *x.net);
    for (std::uint64_t g = 0; g < group_count; ++g) {
      open_group(n, g);
    }
    x.up = true;
  }
  // Node n's replica of group g (members_of(g)), joined and attached to its host.
  void open_group(std::uint32_t n, std::uint64_t g) {
    node& x = *nodes[n];
    {
      const auto members = members_of(g);
      auto t = x.host->join(group_t(g), members);
      BOOST_REQUIRE(t.has_value());
      replica_slot& s = x.slots[group_t(g)];
      const auto self = static_cast<replica_t>(std::find(members.begin(), members.end(), node_t(n)) - members.begin());
      vsr_state initial;
      initial.cluster = cluster_id * 1000 + g;  // a group's own identity: a misrouted message is refused
      initial.replica = self;
      initial.replica_count = 3;
      journal_storage_options o;
      o.journal = journal_options{64, 4096};
      o.snapshot_bytes_max = 64 * 1024;
      recovered_state r;
      auto opened =
          storage::io::run_task(*x.disk, journal_storage::open(*x.disk, "/g" + std::to_string(g), o, initial, r));
      BOOST_REQUIRE(opened.has_value() && opened->has_value());
      s.storage = std::move(**opened);
      s.sm = std::make_unique<counter>();
      replica_options ro;
      ro.cluster = initial.cluster;
      ro.replica = self;
      ro.replica_count = 3;
      ro.heartbeats_by_host = true;
      ro.seed = n * 1000 + g;
      driver_hooks h;
      replica_slot* slot = &s;
      h.reply = [slot](message m) {
        if (m.h.cmd == command::reply) {
          slot->replied.push_back(m.h.request);
        }
      };
      s.d = std::make_unique<driver>(ro, *s.sm, std::move(r), *s.storage, *t, std::move(h));
      x.host->attach(group_t(g), *s.d);
    }
  }
  void stop(std::uint32_t n) {
    node& x = *nodes[n];
    if (!x.host) {
      return;
    }
    x.disk->halt();
    while (x.disk->in_flight() > 0) {
      x.disk->poll(true);
    }
    for (auto& [g, s] : x.slots) {
      x.host->leave(g);
      s.d.reset();
      s.storage.reset();
    }
    x.slots.clear();
    x.host.reset();
    x.disk->crash();
    x.disk->restart_process();
    x.up = false;
  }
  void round() {
    for (auto& x : nodes) {
      if (x->up) {
        x->disk->advance_time(1'000'000);
        while (x->disk->poll(false) > 0) {
        }
      }
    }
    while (!queue.empty()) {
      frame f = std::move(queue.front());
      queue.pop_front();
      if (auto* gm = std::get_if<group_message>(&f)) {
        node& to = *nodes.at(gm->to.value());
        if (to.up && nodes.at(gm->from.value())->up) {
          to.host->on_message(gm->from, gm->group, gm->m);
        }
      } else {
        auto& hb = std::get<heartbeat_message>(f);
        auto beat = decode_node_heartbeat(hb.bytes);
        BOOST_REQUIRE(beat.has_value());
        std::erase_if(beat->entries, [&](const heartbeat_entry& e) { return left_out.contains(e.group); });
        node& to = *nodes.at(hb.to.value());
        if (to.up && nodes.at(beat->from.value())->up) {
          to.host->on_heartbeat(*beat);
        }
      }
    }
    for (auto& x : nodes) {
      if (x->up) {
        x->host->tick();
      }
    }
  }
  void rounds(int k) {
    for (int i = 0; i < k; ++i) {
      round();
    }
  }
  // A client request to group g at node n (where its primary should be).
  void request(std::uint32_t n, std::uint64_t g, std::uint64_t number) {
    message m;
    m.h.cmd = command::request;
    m.h.cluster = cluster_id * 1000 + g;
    m.h.client = 7;
    m.h.request = number;
    m.h.operation = number == 0 ? operation_register : operation_user_min;
    m.body.resize(number == 0 ? 0 : 10);
    seal(m);
    nodes[n]->host->on_request(group_t(g), m);
  }
  const replica& rep(std::uint32_t n, std::uint64_t g) { return nodes[n]->slots.at(group_t(g)).d->replica(); }
  std::uint64_t ticks(std::uint32_t n) { return nodes[n]->host->counters().group_ticks; }

  std::uint64_t group_count;
  std::set<group_t> left_out;  // heartbeat entries for these groups are dropped (as by a sender that lost them)
  std::vector<std::unique_ptr<node>> nodes;
  std::deque<frame> queue;
};

bool replied(cluster& c, std::uint32_t n, std::uint64_t g, std::uint64_t request) {
  const auto& r = c.nodes[n]->slots.at(group_t(g)).replied;
  return std::find(r.begin(), r.end(), request) != r.end();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(group_host_suite)

BOOST_AUTO_TEST_CASE(idle_groups_are_not_ticked_while_node_heartbeats_flow) {
  cluster c(30);
  c.rounds(30);
  std::uint64_t due_max = 0;
  for (int k = 0; k < 5; ++k) {  // a heartbeat interval: the host is due only at its heartbeat
    c.round();
    for (std::uint32_t n = 0; n < 3; ++n) {
      BOOST_TEST(c.nodes[n]->host->active() == 0u, "node " << n << ": every group settles idle");
      BOOST_TEST(c.nodes[n]->host->ticks_until_due() <= 5u);
      due_max = std::max(due_max, c.nodes[n]->host->ticks_until_due());
    }
  }
  BOOST_TEST(due_max == 5u);
  const std::uint64_t ticks_before = c.ticks(0) + c.ticks(1) + c.ticks(2);
  const std::uint64_t beats_before = c.nodes[0]->host->counters().heartbeats_sent;
  c.rounds(500);
  BOOST_TEST(c.ticks(0) + c.ticks(1) + c.ticks(2) == ticks_before, "500 rounds of 90 idle replicas: no tick");
  BOOST_TEST(c.nodes[0]->host->counters().heartbeats_sent >= beats_before + 2 * (500 / 5),
             "one heartbeat per peer per heartbeat interval, for all its groups");
  for (std::uint64_t g = 0; g < 30; ++g) {
    for (std::uint32_t n = 0; n < 3; ++n) {
      BOOST_TEST(c.rep(n, g).view().value() == 0u, "no view change in group " << g);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_request_wakes_only_its_group_and_its_commit_reaches_the_backups) {
  cluster c(30);
  c.rounds(30);
  // Group 4's primary is node 1 (members 1, 2, 0).
  BOOST_REQUIRE(c.rep(1, 4).is_primary());
  c.request(1, 4, 0);
  for (std::uint64_t k = 1; k <= 3; ++k) {
    c.rounds(10);  // one request in flight per client
    BOOST_REQUIRE(replied(c, 1, 4, k - 1));
    c.request(1, 4, k);
  }
  c.rounds(40);
  BOOST_TEST(replied(c, 1, 4, 3));
  for (std::uint32_t n = 0; n < 3; ++n) {
    // The last op's commit reaches the backups only through a heartbeat (no prepare follows it).
    BOOST_TEST(c.rep(n, 4).commit_min().value() == 4u, "node " << n);
    BOOST_TEST(c.nodes[n]->slots.at(group_t(4)).sm->total == 30u);
    BOOST_TEST(c.nodes[n]->host->active() == 0u, "group 4 settled idle again on node " << n);
  }
  for (std::uint64_t g = 0; g < 30; ++g) {
    if (g != 4) {
      BOOST_TEST(c.rep(1, g).commit_min().value() == 0u);
    }
  }
  BOOST_TEST(c.nodes[0]->host->counters().commits_delivered > 0u);
}

BOOST_AUTO_TEST_CASE(a_silent_node_wakes_the_groups_it_led_and_they_elect_another) {
  cluster c(30);
  c.rounds(30);
  for (std::uint64_t g = 0; g < 30; ++g) {
    c.request(static_cast<std::uint32_t>(g % 3), g, 0);
  }
  c.rounds(40);
  const std::uint64_t wakes_before = c.nodes[1]->host->counters().wakes;
  c.stop(0);  // leads groups 0, 3, 6, ... (members_of rotates the order)
  c.rounds(400);
  BOOST_TEST(c.nodes[1]->host->counters().wakes - wakes_before == 10u, "node 1 woke node 0's ten groups");
  for (std::uint64_t g = 0; g < 30; ++g) {
    for (std::uint32_t n = 1; n < 3; ++n) {
      const replica& r = c.rep(n, g);
      if (g % 3 == 0) {
        BOOST_TEST(r.view().value() >= 1u, "group " << g << " left node 0's view");
        BOOST_TEST((r.status() == status::normal));
      } else {
        BOOST_TEST(r.view().value() == 0u, "group " << g << " kept its live primary");
      }
    }
  }
  // A group node 0 led commits under its new primary.
  const std::uint32_t primary = c.rep(1, 0).is_primary() ? 1 : 2;
  BOOST_REQUIRE(c.rep(primary, 0).is_primary());
  c.request(primary, 0, 1);
  c.rounds(40);
  BOOST_TEST(replied(c, primary, 0, 1));
  // Node 0 restarts from its disk and catches up; then everything settles idle.
  c.start(0);
  c.rounds(400);
  BOOST_TEST(c.rep(0, 0).commit_min().value() == 2u);
  for (std::uint32_t n = 0; n < 3; ++n) {
    BOOST_TEST(c.nodes[n]->host->active() == 0u, "node " << n);
  }
}

BOOST_AUTO_TEST_CASE(an_entry_for_a_view_the_replica_has_left_is_ignored) {
  cluster c(6);
  c.rounds(30);
  c.stop(0);
  c.rounds(400);
  BOOST_REQUIRE(c.rep(2, 0).view().value() >= 1u);
  BOOST_REQUIRE(c.nodes[2]->host->active() == 0u);
  const std::uint64_t skipped = c.nodes[2]->host->counters().entries_skipped;
  // Node 0's heartbeat from before its crash, delivered late: group 0 in view 0, where node 0 led it.
  node_heartbeat old;
  old.cluster = cluster_id;
  old.from = node_t(0);
  old.sequence = 1;
  old.entries.push_back({group_t(0), commit_beat{view_t(0), 0, {}}});
  c.nodes[2]->host->on_heartbeat(old);
  BOOST_TEST(c.nodes[2]->host->counters().entries_skipped == skipped + 1);
  BOOST_TEST(!c.nodes[2]->host->is_active(group_t(0)), "an old view's primary does not wake the group");
}

BOOST_AUTO_TEST_CASE(a_heartbeat_leaving_a_group_out_wakes_it_and_it_elects_another) {
  cluster c(6);
  c.rounds(30);
  // Node 1 leads groups 1 and 4 (members_of rotates); its heartbeats stop naming group 4, as a node that lost it.
  c.left_out.insert(group_t(4));
  c.rounds(400);
  BOOST_TEST(c.rep(2, 4).view().value() >= 1u, "the backups of group 4 left node 1's view");
  BOOST_TEST(c.rep(0, 4).view().value() >= 1u);
  BOOST_TEST(c.rep(2, 1).view().value() == 0u, "group 1, still named, keeps its primary");
  BOOST_TEST(c.nodes[2]->host->counters().wakes >= 1u);
}

BOOST_AUTO_TEST_CASE(a_group_joined_after_its_primary_fell_silent_still_elects) {
  cluster c(3);
  c.rounds(30);
  c.stop(0);
  c.rounds(100);  // node 0 is silent on nodes 1 and 2 (their one wake per silence is spent)
  // Group 3's view-0 primary is node 0 (members 0, 1, 2): it joins on the two live nodes now.
  c.open_group(1, 3);
  c.open_group(2, 3);
  c.rounds(400);
  BOOST_TEST(c.rep(1, 3).view().value() >= 1u);
  BOOST_TEST((c.rep(1, 3).status() == status::normal));
  BOOST_TEST(c.rep(2, 3).view().value() == c.rep(1, 3).view().value());
}

BOOST_AUTO_TEST_CASE(join_refuses_bad_memberships) {
  struct null_net final : host_transport {
    void send(node_t, group_t, message) override {}
    void send(node_t, const node_heartbeat&) override {}
  } net;
  host_options o;
  o.node = node_t(1);
  o.groups_max = 2;
  group_host h(o, net);
  BOOST_TEST(!h.join(group_t(1), {node_t(0), node_t(2)}).has_value(), "this node is not a member");
  BOOST_TEST(!h.join(group_t(1), {node_t(1), node_t(1)}).has_value(), "a node twice");
  BOOST_TEST(!h.join(group_t(1), {}).has_value());
  BOOST_TEST(h.join(group_t(1), {node_t(0), node_t(1)}).has_value());
  BOOST_TEST(!h.join(group_t(1), {node_t(0), node_t(1)}).has_value(), "hosted already");
  BOOST_TEST(h.join(group_t(2), {node_t(1)}).has_value());
  auto third = h.join(group_t(3), {node_t(1)});
  BOOST_REQUIRE(!third.has_value());
  BOOST_TEST(third.error().detail().find("groups_max (2)") != std::string::npos, third.error().detail());
}

BOOST_AUTO_TEST_CASE(the_heartbeat_wire_form_round_trips_and_refuses_damage) {
  node_heartbeat b;
  b.cluster = 42;
  b.from = node_t(3);
  b.sequence = 17;
  for (std::uint64_t g = 0; g < 5; ++g) {
    b.entries.push_back({group_t(g * 11), commit_beat{view_t(static_cast<std::uint32_t>(g)), g * 100, {g, ~g}}});
  }
  auto bytes = encode(b);
  BOOST_TEST(bytes.size() == 48u + 5 * 48u);
  auto back = decode_node_heartbeat(bytes);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST((*back == b));
  for (std::size_t i = 0; i < bytes.size(); i += 7) {
    auto damaged = bytes;
    damaged[i] ^= std::byte{0x10};
    BOOST_TEST(!decode_node_heartbeat(damaged).has_value(), "byte " << i);
  }
  auto shorter = bytes;
  shorter.resize(bytes.size() - 48);
  BOOST_TEST(!decode_node_heartbeat(shorter).has_value());
  BOOST_TEST(!decode_node_heartbeat(std::span(bytes).first(20)).has_value());
  node_heartbeat empty;
  auto e = decode_node_heartbeat(encode(empty));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->entries.empty());
}

BOOST_AUTO_TEST_SUITE_END()
