// The replica driven by hand: a tiny deterministic network and instant storage, so that single properties can be
// checked step by step (the simulator covers the rest under faults).
#include <boost/test/unit_test.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "base/endian.h"
#include "consensus/replica.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;

namespace {
constexpr std::uint64_t cluster_id = 9;

class counter final : public state_machine {
 public:
  std::vector<std::byte> apply(const header&, std::span<const std::byte> body) override {
    total_ += body.size();
    std::vector<std::byte> out(8);
    store_le<std::uint64_t>(out.data(), total_);
    ++applied;
    return out;
  }
  std::vector<std::byte> snapshot() const override {
    std::vector<std::byte> out(16);
    store_le<std::uint64_t>(out.data(), total_);
    store_le<std::uint64_t>(out.data() + 8, applied);
    return out;
  }
  bool restore(std::span<const std::byte> bytes) override {
    if (bytes.size() != 16) {
      return false;
    }
    total_ = load_le<std::uint64_t>(bytes.data());
    applied = load_le<std::uint64_t>(bytes.data() + 8);
    return true;
  }
  // With `propose` on, the primary's prepare() appends one byte to each body: how many pending ops it was shown.
  proposal prepare(const header& request, const prepare_context& at, std::vector<std::byte> body,
                   std::span<const message* const> pending) override {
    const std::uint64_t op = at.op;
    if (!propose) {
      return {request.operation, std::move(body)};
    }
    std::vector<std::uint64_t> ops;
    for (const message* m : pending) {
      ops.push_back(m->h.op);
    }
    shown[op] = std::move(ops);
    body.push_back(static_cast<std::byte>(pending.size()));
    return {request.operation, std::move(body)};
  }
  std::uint64_t total() const { return total_; }
  std::uint64_t applied = 0;
  bool propose = false;
  std::map<std::uint64_t, std::vector<std::uint64_t>> shown;  // op prepared -> the pending ops shown

 private:
  std::uint64_t total_ = 0;
};

struct node {
  std::unique_ptr<counter> sm;
  std::unique_ptr<replica> r;
  std::map<std::uint64_t, message> journal;  // durable prepares
  vsr_state superblock;
  std::vector<effect> io;  // writes, reads and persists not yet completed
  std::vector<std::uint64_t> applied;
  std::vector<std::uint64_t> installed;  // checkpoints installed by state transfer
  std::vector<std::byte> snapshots[2];   // snapshot.bin's two regions
  bool hold_io = false;                  // keep I/O pending until released
};

struct mini {
  explicit mini(std::uint8_t n, std::uint64_t slots = 0, replica_bugs b = {}) : bugs(b), journal_slots(slots) {
    for (std::uint8_t i = 0; i < n; ++i) {
      auto nd = std::make_unique<node>();
      nd->superblock.cluster = cluster_id;
      nd->superblock.replica = i;
      nd->superblock.replica_count = n;
      nodes.push_back(std::move(nd));
    }
    for (std::uint8_t i = 0; i < n; ++i) {
      start(i, true);
    }
  }
  replica_options options(std::uint8_t i) const {
    replica_options o;
    o.cluster = cluster_id;
    o.replica = i;
    o.replica_count = static_cast<std::uint8_t>(nodes.size());
    o.pipeline_max = 4;
    o.sync_stall_ticks = 20;
    o.sync_chunk_bytes = sync_chunk_bytes;
    o.clients_max = clients_max;
    return o;
  }
  void start(std::uint8_t i, bool formatted) {
    node& n = *nodes[i];
    recovered_state rec;
    rec.state = n.superblock;
    rec.formatted = formatted;
    for (const auto& [op, m] : n.journal) {
      rec.journal.push_back(m.h);
    }
    rec.journal_slots = journal_slots;
    if (n.superblock.checkpoint.op() > 0) {
      rec.snapshot = n.snapshots[n.superblock.checkpoint.slot];
      BOOST_REQUIRE(rec.snapshot.size() == n.superblock.checkpoint.size);
    }
    n.sm = std::make_unique<counter>();
    n.r = std::make_unique<replica>(options(i), *n.sm, rec, bugs);
    n.applied.clear();
    n.installed.clear();
    n.io.clear();
  }
  void crash(std::uint8_t i) { nodes[i]->r.reset(); }

  void take(std::uint8_t i, std::vector<effect>& out) {
    node& n = *nodes[i];
    if (n.r) {
      n.r->check_log_invariants();  // the O(journal) ones, after every input (the replica checks the rest itself)
    }
    for (auto& e : out) {
      if (auto* s = std::get_if<send_effect>(&e)) {
        sent.push_back(*s);
        if (!blocked.contains(i) && !blocked.contains(s->to) && !(drop_oks && s->m.h.cmd == command::prepare_ok) &&
            (!filter || filter(s->m))) {
          net.push_back({s->to, s->m});
        }
      } else if (auto* rep = std::get_if<reply_effect>(&e)) {
        replies.push_back(rep->m);
      } else if (auto* a = std::get_if<applied_effect>(&e)) {
        n.applied.push_back(a->prepare.op);
      } else if (auto* in = std::get_if<installed_effect>(&e)) {
        n.installed.push_back(in->at.op);
      } else {
        n.io.push_back(std::move(e));
      }
    }
    out.clear();
  }
  // Completes pending I/O of every node that does not hold it.
  bool complete_io() {
    bool any = false;
    for (std::uint8_t i = 0; i < nodes.size(); ++i) {
      node& n = *nodes[i];
      if (!n.r || n.hold_io || n.io.empty()) {
        continue;
      }
      auto io = std::move(n.io);
      n.io.clear();
      std::vector<effect> out;
      for (auto& e : io) {
        if (auto* w = std::get_if<write_effect>(&e)) {
          if (journal_slots > 0) {
            std::erase_if(n.journal,
                          [&](const auto& kv) { return kv.first % journal_slots == w->m.h.op % journal_slots; });
          }
          n.journal[w->m.h.op] = w->m;
          n.r->on_write_done(w->m.h.op, w->m.h.checksum, true, out);
        } else if (auto* rd = std::get_if<read_effect>(&e)) {
          auto it = n.journal.find(rd->op);
          n.r->on_read_done(rd->op, rd->checksum, it == n.journal.end() ? nullptr : &it->second, out);
        } else if (auto* p = std::get_if<persist_effect>(&e)) {
          n.superblock = p->state;
          n.r->on_persist_done(p->state, out);
        } else if (auto* c = std::get_if<checkpoint_effect>(&e)) {
          BOOST_REQUIRE(c->slot != n.superblock.checkpoint.slot || n.superblock.checkpoint.size == 0);
          n.snapshots[c->slot] = c->bytes;
          n.r->on_checkpoint_done(c->slot, c->at.op, true, out);
        }
        take(i, out);
      }
      any = true;
    }
    return any;
  }
  void pump(int rounds = 200) {
    for (int round = 0; round < rounds; ++round) {
      bool any = complete_io();
      auto batch = std::move(net);
      net.clear();
      for (auto& [to, m] : batch) {
        if (nodes[to]->r) {
          std::vector<effect> out;
          nodes[to]->r->on_message(m, out);
          take(to, out);
          any = true;
        }
      }
      if (!any) {
        return;
      }
    }
  }
  void tick(int times) {
    for (int t = 0; t < times; ++t) {
      for (std::uint8_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i]->r && !blocked.contains(i)) {
          std::vector<effect> out;
          nodes[i]->r->on_tick(out);
          take(i, out);
        }
      }
      pump();
    }
  }
  void request(std::uint8_t to, std::uint64_t client, std::uint64_t number, std::size_t bytes,
               std::uint64_t session = 0) {
    message m;
    m.h.cmd = command::request;
    m.h.cluster = cluster_id;
    m.h.client = client;
    m.h.request = number;
    m.h.operation = number == 0 ? operation_register : operation_user_min;
    m.body.resize(number == 0 ? 0 : bytes);
    if (number > 0) {
      set_session(m.h, session);
    }
    seal(m);
    std::vector<effect> out;
    nodes[to]->r->on_message(m, out);
    take(to, out);
    pump();
  }
  std::size_t sent_count(command c) const {
    std::size_t n = 0;
    for (const auto& s : sent) {
      n += s.m.h.cmd == c ? 1 : 0;
    }
    return n;
  }

  std::vector<std::unique_ptr<node>> nodes;
  std::deque<std::pair<replica_t, message>> net;
  std::vector<send_effect> sent;
  std::vector<message> replies;
  std::set<std::uint8_t> blocked;  // cut off both ways
  bool drop_oks = false;
  replica_bugs bugs;                // deliberate bugs of every replica started
  std::uint64_t journal_slots = 0;  // 0: an unbounded journal (no ring, no checkpoints)
  std::uint32_t clients_max = replica_options{}.clients_max;
  std::uint32_t sync_chunk_bytes = replica_options{}.sync_chunk_bytes;
  std::function<bool(message&)> filter;  // false: the message is lost (it may also change it)
};

// Starts every replica again, formatted, with state transfers in chunks of `bytes`.
void restart_with_sync_chunks(mini& c, std::uint32_t bytes) {
  c.sync_chunk_bytes = bytes;
  for (std::uint8_t i = 0; i < c.nodes.size(); ++i) {
    c.start(i, true);
  }
}

// Replica 2 misses ops 1..50 of a 16-slot ring, so it can catch up only by state transfer.
void leave_behind(mini& c) {
  c.request(0, 5, 0, 0);
  c.blocked.insert(2);
  for (std::uint64_t n = 1; n <= 50; ++n) {
    c.request(0, 5, n, n);
    c.tick(1);
  }
  BOOST_REQUIRE(c.replies.size() == 51u);
  BOOST_REQUIRE(c.nodes[0]->r->checkpoint().op() > 20u);  // ops 2..20 are gone from every ring
  c.blocked.clear();
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_request_of_a_session_a_late_register_replaced_is_evicted_not_executed_again) {
  mini c(1);
  c.clients_max = 2;
  c.crash(0);
  c.start(0, true);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  const std::uint64_t first = c.replies[0].h.op;  // the session: the op that registered it
  c.request(0, 5, 1, 8, first);
  BOOST_TEST(c.nodes[0]->sm->applied == 1u);
  c.request(0, 6, 0, 0);
  c.request(0, 7, 0, 0);  // a third session: client 5's (the oldest last commit) is evicted
  BOOST_REQUIRE(c.nodes[0]->r->clients().find(5) == nullptr);
  c.request(0, 5, 0, 0);  // its register again, delivered late (a duplicate in the network): a new session
  BOOST_REQUIRE(c.nodes[0]->r->clients().find(5) != nullptr);
  const std::uint64_t second = c.nodes[0]->r->clients().find(5)->session;
  BOOST_TEST(second > first);
  c.replies.clear();
  c.request(0, 5, 1, 8, first);  // the old session's request 1, delivered late too
  BOOST_REQUIRE(c.replies.size() == 1u);
  BOOST_TEST((c.replies[0].h.cmd == command::eviction));
  BOOST_TEST(c.nodes[0]->sm->applied == 1u);  // not executed a second time
  c.request(0, 5, 1, 8, second);              // the new session's own request 1 is
  BOOST_TEST(c.nodes[0]->sm->applied == 2u);
  // Unstamped (a client of an earlier build): not checked (client 7 still holds its session).
  c.request(0, 7, 1, 8);
  BOOST_TEST(c.nodes[0]->sm->applied == 3u);
}

BOOST_AUTO_TEST_CASE(a_single_replica_commits_answers_and_replays_after_a_restart) {
  mini c(1);
  c.request(0, 5, 0, 0);
  for (std::uint64_t n = 1; n <= 3; ++n) {
    c.request(0, 5, n, 10 * n);
  }
  BOOST_REQUIRE(c.replies.size() == 4u);
  BOOST_TEST(c.replies[3].h.op == 4u);
  BOOST_TEST(load_le<std::uint64_t>(c.replies[3].body.data()) == 60u);
  BOOST_TEST(c.nodes[0]->applied.size() == 4u);
  // Restart: the journal is replayed (reads), the same ops applied again in order.
  c.crash(0);
  c.start(0, false);
  c.tick(3);
  BOOST_TEST(c.nodes[0]->applied == (std::vector<std::uint64_t>{1, 2, 3, 4}));
  BOOST_TEST(c.nodes[0]->sm->applied == 3u);
  // A retry of the last request is answered from the client table, not executed again.
  c.replies.clear();
  c.request(0, 5, 3, 30);
  BOOST_REQUIRE(c.replies.size() == 1u);
  BOOST_TEST(c.replies[0].h.op == 4u);
  BOOST_TEST(c.nodes[0]->sm->applied == 3u);
}

BOOST_AUTO_TEST_CASE(a_single_replica_cuts_a_stale_prepare_left_above_a_gap_it_filled_again) {
  // Pipelined writes finish out of order: a crash can leave op 3 durable and op 2 lost. The restart cuts op 3 (above
  // a gap: never committed), but journal.wal still holds it; a new op 2 fills the gap, and at the next restart the
  // stale op 3 sits above it without a gap. It does not chain onto the new op 2: it must be cut again, not committed.
  // (rill-sim --seed 1015321011589387514 --replicas 1 --crash-ppm 30000 found it.)
  mini c(1);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  node& n = *c.nodes[0];
  n.hold_io = true;
  c.request(0, 6, 0, 0);  // op 2, its write held
  c.request(0, 7, 0, 0);  // op 3, its write held
  BOOST_REQUIRE(n.r->op() == op_t(3));
  for (auto& e : n.io) {
    if (auto* w = std::get_if<write_effect>(&e); w != nullptr && w->m.h.op == 3) {
      n.journal[3] = w->m;  // op 3's write landed, op 2's did not: then the crash
    }
  }
  BOOST_REQUIRE(n.journal.contains(3));
  c.crash(0);
  n.hold_io = false;
  c.start(0, false);
  c.tick(3);
  BOOST_TEST(n.r->op() == op_t(1));  // op 3 is above the gap: cut (its slot still holds it)
  c.request(0, 8, 0, 0);             // a new op 2
  BOOST_TEST(n.r->op() == op_t(2));
  c.crash(0);
  c.start(0, false);
  c.tick(3);
  BOOST_TEST(n.r->op() == op_t(2));  // the stale op 3 does not chain onto the new op 2
  BOOST_TEST(n.r->commit_min() == op_t(2));
  BOOST_TEST(n.applied == (std::vector<std::uint64_t>{1, 2}));
}

BOOST_AUTO_TEST_CASE(the_state_machine_decides_each_prepare_seeing_every_uncommitted_op_before_it) {
  mini c(3);
  c.nodes[0]->sm->propose = true;
  c.request(0, 5, 0, 0);
  c.request(0, 6, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 2u);
  c.drop_oks = true;  // nothing commits: each new prepare has the earlier ones pending
  c.request(0, 5, 1, 8);
  c.request(0, 6, 1, 8);
  const auto& shown = c.nodes[0]->sm->shown;
  BOOST_REQUIRE(shown.size() == 2u);
  BOOST_TEST(shown.at(3).empty());
  BOOST_TEST((shown.at(4) == std::vector<std::uint64_t>{3}));
  // What the backups journal is what the state machine proposed (the body with its extra byte).
  c.pump();
  BOOST_REQUIRE(c.nodes[1]->journal.count(4) == 1u);
  BOOST_TEST(c.nodes[1]->journal.at(4).body.size() == 9u);
  BOOST_TEST(static_cast<int>(c.nodes[1]->journal.at(4).body.back()) == 1);
  c.drop_oks = false;
  c.tick(12);
  BOOST_REQUIRE(c.replies.size() == 4u);
  c.request(0, 5, 2, 8);  // everything before it applied: nothing pending
  BOOST_TEST(shown.at(5).empty());
  BOOST_TEST(c.nodes[1]->sm->total() == 9u + 9u);  // (the backup has applied ops 3 and 4 once committed)
}

BOOST_AUTO_TEST_CASE(the_primary_answers_only_once_a_quorum_holds_the_prepare_durably) {
  mini c(3);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  c.drop_oks = true;
  c.request(0, 5, 1, 8);
  BOOST_TEST(c.replies.size() == 1u);  // written on the primary, no prepare_ok arrived: not committed
  BOOST_TEST(c.nodes[0]->r->commit_max() == op_t(1));
  c.drop_oks = false;
  c.tick(12);  // the primary resends the prepare; the backups acknowledge again
  BOOST_REQUIRE(c.replies.size() == 2u);
  BOOST_TEST(c.replies[1].h.op == 2u);
  // A backup with its writes held does not acknowledge: one backup is still enough.
  c.nodes[2]->hold_io = true;
  c.request(0, 5, 2, 8);
  BOOST_TEST(c.replies.size() == 3u);
  BOOST_TEST(c.nodes[2]->r->commit_min() < op_t(3));
}

namespace {
// Three replicas; the primary prepares while both backups' journal writes are held (submitted, never completed).
// Returns whether the client was answered (or anything committed) while the writes were held.
bool answered_with_both_backups_writes_held(const replica_bugs& bugs) {
  mini c(3, 0, bugs);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  const op_t committed = c.nodes[0]->r->commit_max();
  c.nodes[1]->hold_io = true;
  c.nodes[2]->hold_io = true;
  c.sent.clear();
  c.request(0, 5, 1, 8);
  c.tick(40);  // the primary resends its prepare: the backups still hold nothing durably
  BOOST_TEST(c.nodes[0]->r->op() == committed + 1);  // the primary prepared it (and its own write is durable)
  return c.replies.size() > 1u || c.nodes[0]->r->commit_max() > committed || c.sent_count(command::prepare_ok) > 0;
}
}  // namespace

BOOST_AUTO_TEST_CASE(no_reply_comes_while_both_backups_writes_are_held) {
  // VSR's core rule: a backup acknowledges a prepare only once it is durable, so with both backups' writes held no
  // quorum holds the op and nothing may commit or be answered.
  BOOST_TEST(!answered_with_both_backups_writes_held({}));
  // The test bites: with the deliberate bug (prepare_ok sent when the write is submitted) a reply comes.
  replica_bugs bug;
  bug.ack_before_durable = true;
  BOOST_TEST(answered_with_both_backups_writes_held(bug));
}

BOOST_AUTO_TEST_CASE(a_silent_primary_is_replaced_and_the_new_view_is_persisted_before_it_is_advertised) {
  mini c(3);
  c.request(0, 5, 0, 0);
  c.request(0, 5, 1, 8);
  BOOST_REQUIRE(c.replies.size() == 2u);
  c.blocked.insert(0);  // the primary is cut off
  // Hold replica 1's persists: it may vote, but not send its do_view_change or start_view.
  c.nodes[1]->hold_io = true;
  c.nodes[2]->hold_io = true;
  c.tick(200);
  for (const auto& s : c.sent) {
    if (s.m.h.cmd == command::do_view_change || s.m.h.cmd == command::start_view) {
      BOOST_TEST(s.m.h.view <= c.nodes[s.m.h.replica]->superblock.view.value(),
                 "sent " << to_string(s.m.h.cmd) << " for an undurable view");
    }
  }
  BOOST_TEST(c.sent_count(command::start_view) == 0u);
  c.nodes[1]->hold_io = false;
  c.nodes[2]->hold_io = false;
  c.tick(200);
  BOOST_TEST((c.nodes[1]->r->status() == status::normal));
  BOOST_TEST(c.nodes[1]->r->view() > view_t(0));
  BOOST_TEST(c.nodes[1]->r->view() == c.nodes[2]->r->view());
  BOOST_TEST(c.nodes[1]->superblock.view == c.nodes[1]->r->view());
  // The new primary serves; what was committed is kept.
  const replica_t primary = primary_of(c.nodes[1]->r->view(), 3);
  BOOST_REQUIRE(primary != 0);
  c.replies.clear();
  c.request(primary, 5, 2, 8);
  BOOST_REQUIRE(c.replies.size() == 1u);
  BOOST_TEST(c.replies.back().h.op == 3u);
  // The old primary comes back, learns the view and catches up.
  c.blocked.clear();
  c.tick(100);
  BOOST_TEST(c.nodes[0]->r->view() == c.nodes[1]->r->view());
  BOOST_TEST(c.nodes[0]->r->commit_min() == op_t(3));
}

// Issue 38, finding 9: a new primary's state machine may be behind what earlier views committed until it has
// committed the ops its log held when its view began; reads that must never go back (a consumer's stored offset) wait
// for caught_up_in_view().
BOOST_AUTO_TEST_CASE(a_new_primary_is_caught_up_only_once_it_applied_what_its_log_held_when_its_view_began) {
  mini c(3);
  c.request(0, 5, 0, 0);
  c.request(0, 5, 1, 8);
  BOOST_REQUIRE(c.replies.size() == 2u);
  BOOST_TEST(c.nodes[0]->r->caught_up_in_view());
  BOOST_TEST(!c.nodes[1]->r->caught_up_in_view());  // a backup never is
  c.drop_oks = true;      // op 3 reaches the backups' journals, never a quorum's acknowledgement
  c.request(0, 5, 2, 8);  // (not answered)
  c.blocked.insert(0);
  // Until a new primary is normal (not longer: its own pipeline cannot commit while acknowledgements are dropped).
  auto new_primary = [&]() -> std::optional<replica_t> {
    for (replica_t i = 1; i < 3; ++i) {
      const auto& r = *c.nodes[i]->r;
      if (r.status() == status::normal && r.view() > view_t(0) && r.is_primary()) {
        return i;
      }
    }
    return std::nullopt;
  };
  for (int i = 0; i < 300 && !new_primary(); ++i) {
    c.tick(1);
  }
  BOOST_REQUIRE(new_primary().has_value());
  const replica_t primary = *new_primary();
  BOOST_TEST(c.nodes[primary]->r->op() == op_t(3));
  BOOST_TEST(!c.nodes[primary]->r->caught_up_in_view());  // op 3, from the view before, is not applied
  // The pipeline's prepares go out again; the backup acknowledges op 3 in this view (made in the view before, it holds
  // it durably on this view's log), and the primary applies it.
  c.drop_oks = false;
  for (int i = 0; i < 100 && !c.nodes[primary]->r->caught_up_in_view(); ++i) {
    c.tick(1);
  }
  BOOST_TEST(c.nodes[primary]->r->commit_min() >= op_t(3));
  BOOST_TEST(c.nodes[primary]->r->caught_up_in_view());
}

BOOST_AUTO_TEST_CASE(a_restarted_primary_does_not_lead_its_old_view_again) {
  mini c(3);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  c.crash(0);
  c.start(0, false);
  BOOST_TEST((c.nodes[0]->r->status() == status::view_change));
  c.tick(300);
  BOOST_TEST(c.nodes[0]->r->view() > view_t(0));
  BOOST_TEST((c.nodes[0]->r->status() == status::normal));
  BOOST_TEST(c.nodes[0]->r->commit_min() == op_t(1));
}

// A vote is withdrawn where it was cast (the voter heard its primary again) but still counts where it arrived, and a
// voter that restarts forgets its own. So a replica can count a quorum of such votes and enter a view alone while
// the others stay normal in the view before, their primary alive. It can never go back; the others join it once it
// says it is in that view (rill-sim --node seed 3954359542024638728: without that, it waited there for ever).
BOOST_AUTO_TEST_CASE(a_replica_that_entered_a_view_alone_on_withdrawn_votes_is_joined_by_the_others) {
  mini c(5);
  c.request(0, 5, 0, 0);
  BOOST_REQUIRE(c.replies.size() == 1u);
  // Replica 1 receives old votes for view 1 from three peers (since withdrawn, or their voters restarted): none of
  // them votes now, and the primary of view 0 is alive.
  for (replica_t from : {2, 3, 4}) {
    message m;
    m.h.cmd = command::start_view_change;
    m.h.cluster = cluster_id;
    m.h.view = 1;
    m.h.log_view = 0;
    m.h.replica = from;
    seal(m);
    std::vector<effect> out;
    c.nodes[1]->r->on_message(m, out);
    c.take(1, out);
  }
  BOOST_REQUIRE((c.nodes[1]->r->status() == status::view_change));
  BOOST_REQUIRE(c.nodes[1]->r->view() == view_t(1));
  c.tick(500);
  for (std::uint8_t i = 0; i < 5; ++i) {
    BOOST_TEST((c.nodes[i]->r->status() == status::normal), "replica " << int{i} << ": " << c.nodes[i]->r->describe());
    BOOST_TEST(c.nodes[i]->r->view() == c.nodes[1]->r->view(),
               "replica " << int{i} << ": " << c.nodes[i]->r->describe());
  }
  const replica_t primary = primary_of(c.nodes[1]->r->view(), 5);
  c.replies.clear();
  c.request(primary, 5, 1, 8, 1);
  BOOST_REQUIRE(c.replies.size() == 1u);
  c.tick(20);
  for (std::uint8_t i = 0; i < 5; ++i) {
    BOOST_TEST(c.nodes[i]->r->commit_min() == op_t(c.replies[0].h.op),
               "replica " << int{i} << ": " << c.nodes[i]->r->describe());
  }
}

BOOST_AUTO_TEST_CASE(a_single_replica_checkpoints_so_its_journal_can_wrap_and_restarts_from_the_checkpoint) {
  mini c(1, 16);  // a ring of 16 slots: checkpoints every 4 ops
  c.request(0, 5, 0, 0);
  for (std::uint64_t n = 1; n <= 60; ++n) {
    c.request(0, 5, n, n);
    c.tick(1);
  }
  BOOST_REQUIRE(c.replies.size() == 61u);
  BOOST_TEST(c.replies.back().h.op == 61u);
  const std::uint64_t total = c.nodes[0]->sm->total();
  BOOST_TEST(total == 60u * 61u / 2);
  const checkpoint_ref cp = c.nodes[0]->superblock.checkpoint;
  BOOST_TEST(cp.op() >= 61u - 16u);  // the ring holds 16 ops: the checkpoint keeps up
  BOOST_TEST(cp.size == c.nodes[0]->snapshots[cp.slot].size());
  // Restart: the state machine comes from the checkpoint; only the ops after it are replayed from the journal.
  c.crash(0);
  c.start(0, false);
  c.tick(5);
  BOOST_TEST(c.nodes[0]->r->commit_min() == op_t(61));
  BOOST_TEST(c.nodes[0]->sm->total() == total);
  BOOST_REQUIRE(!c.nodes[0]->applied.empty());
  BOOST_TEST(c.nodes[0]->applied.front() == cp.op() + 1);
  BOOST_TEST(c.nodes[0]->applied.size() == 61u - cp.op());
  // And it goes on serving, the session table restored with it: a retry of the last request is answered, not run.
  c.replies.clear();
  c.request(0, 5, 60, 60);
  BOOST_REQUIRE(c.replies.size() == 1u);
  BOOST_TEST(c.replies[0].h.op == 61u);
  BOOST_TEST(c.nodes[0]->sm->total() == total);
}

BOOST_AUTO_TEST_CASE(a_replica_behind_the_others_journals_catches_up_by_state_transfer) {
  mini c(3, 16);
  leave_behind(c);
  c.tick(200);
  node& lagging = *c.nodes[2];
  BOOST_REQUIRE(!lagging.installed.empty());
  BOOST_TEST(lagging.r->commit_min() == op_t(51));
  BOOST_TEST(lagging.sm->total() == c.nodes[0]->sm->total());
  BOOST_TEST(lagging.superblock.checkpoint.op() >= lagging.installed.front());  // made its own, durably
  // After the transfer it applied only what followed the checkpoint, each op once, in order.
  std::uint64_t expect = lagging.installed.back() + 1;
  for (auto op : lagging.applied) {
    if (op > lagging.installed.front()) {
      BOOST_TEST(op == expect);
      expect = op + 1;
    }
  }
  BOOST_TEST(expect == 52u);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_moves_in_chunks_asked_for_one_at_a_time_and_installs_whole) {
  mini c(3, 16);
  restart_with_sync_chunks(c, 7);      // the checkpoint (header, client table, state) is many chunks
  std::vector<std::uint64_t> offsets;  // of the chunks replica 2 received
  std::uint64_t size = 0;
  c.filter = [&](message& m) {
    if (m.h.cmd == command::sync) {
      BOOST_TEST(m.body.size() <= header::encoded_size + 7u);
      offsets.push_back(m.h.timestamp);
      size = m.h.request;
    }
    return true;
  };
  leave_behind(c);
  c.tick(300);
  node& lagging = *c.nodes[2];
  BOOST_REQUIRE(!lagging.installed.empty());
  BOOST_TEST(lagging.r->commit_min() == op_t(51));
  BOOST_TEST(lagging.sm->total() == c.nodes[0]->sm->total());
  BOOST_REQUIRE(size > 7u);
  BOOST_TEST(offsets.size() >= (size + 6) / 7);
  BOOST_TEST(offsets.front() == 0u);
  BOOST_TEST(offsets[1] == 7u);  // the next chunk is asked for once one arrives
}

BOOST_AUTO_TEST_CASE(a_lost_chunk_is_asked_for_again_and_a_damaged_transfer_is_never_installed) {
  mini c(3, 16);
  restart_with_sync_chunks(c, 16);
  // First the last chunk of every transfer has a byte of the state changed on the way (sealed again, and the state
  // still restores: only the checkpoint's own checksum can tell), and every third chunk is lost.
  bool damage = true;
  std::size_t chunks = 0;
  std::size_t asked_again = 0;  // a chunk asked for again right after the same request (a resend)
  std::pair<std::uint64_t, std::uint64_t> last_asked{0, 0};  // (checksum low bits, offset)
  c.filter = [&](message& m) {
    if (m.h.cmd == command::request_sync && m.h.timestamp > 0) {
      const std::pair<std::uint64_t, std::uint64_t> now{m.h.context.low, m.h.timestamp};
      asked_again += now == last_asked ? 1 : 0;
      last_asked = now;
    }
    if (m.h.cmd != command::sync) {
      return true;
    }
    ++chunks;
    if (chunks % 3 == 0) {
      return false;
    }
    if (damage && m.h.timestamp + (m.body.size() - header::encoded_size) == m.h.request) {
      m.body.back() ^= std::byte{0x5a};
      seal(m);
    }
    return true;
  };
  leave_behind(c);
  c.tick(300);
  node& lagging = *c.nodes[2];
  BOOST_TEST(lagging.installed.empty());  // every transfer assembled was refused
  BOOST_TEST(lagging.r->commit_min() < op_t(51));
  BOOST_TEST(chunks > 6u);
  BOOST_TEST(asked_again > 0u);  // lost chunks were asked for again
  damage = false;
  c.tick(300);
  BOOST_REQUIRE(!lagging.installed.empty());
  BOOST_TEST(lagging.r->commit_min() == op_t(51));
  BOOST_TEST(lagging.sm->total() == c.nodes[0]->sm->total());
}

// A lost disk: replica 2 is formatted anew, recovering. Until it has caught up it acknowledges nothing and votes for
// nothing (so a quorum of 0 and 2 cannot form without 0's log); once it holds everything up to the primary's head
// it clears recovering (durably) and takes part again.
namespace {
// Replica 2 loses its disk, recovers, and takes part again; then a vote it sent before the loss arrives at replica 1.
// Returns whether that stale vote counted.
bool stale_vote_counts_after_disk_loss(const replica_bugs& bugs) {
  mini c(3, 0, bugs);
  c.request(0, 5, 0, 0);
  for (std::uint64_t n = 1; n <= 4; ++n) {
    c.request(0, 5, n, 8);
  }
  BOOST_REQUIRE(c.replies.size() == 5u);
  // Replica 2's disk is lost: an empty journal, a superblock formatted to recover.
  c.crash(2);
  node& lost = *c.nodes[2];
  lost.journal.clear();
  lost.snapshots[0].clear();
  lost.snapshots[1].clear();
  vsr_state fresh;
  fresh.cluster = cluster_id;
  fresh.replica = 2;
  fresh.replica_count = 3;
  fresh.recovering = true;
  lost.superblock = fresh;
  c.start(2, false);
  BOOST_REQUIRE(c.nodes[2]->r->recovering());
  // The primary is cut off before it can answer: replica 1 votes to leave view 0; 2 must not join it.
  c.blocked.insert(0);
  c.sent.clear();
  c.tick(300);
  auto sent_by = [&](replica_t r, command cmd) {
    std::size_t n = 0;
    for (const auto& s : c.sent) {
      n += s.m.h.replica == r && s.m.h.cmd == cmd ? 1 : 0;
    }
    return n;
  };
  BOOST_TEST(sent_by(2, command::start_view_change) == 0u);
  BOOST_TEST(sent_by(2, command::do_view_change) == 0u);
  BOOST_TEST(sent_by(2, command::prepare_ok) == 0u);
  BOOST_TEST(sent_by(2, command::request_start_view) > 0u, "it probes its peers");
  BOOST_TEST(c.nodes[1]->r->view() == view_t(0), "replica 1's vote alone is no quorum: 2 does not vote");
  BOOST_TEST(c.nodes[2]->r->recovering());
  // The primary comes back: a view forms from 0 and 1, replica 2 catches up and stops recovering.
  c.blocked.clear();
  c.tick(400);
  BOOST_TEST(!c.nodes[2]->r->recovering());
  BOOST_TEST(!c.nodes[2]->superblock.recovering, "cleared durably");
  // With a new incarnation, above every one its peers named (none: 0), taken in the same persist (issue 38, 3).
  BOOST_TEST(c.nodes[2]->superblock.incarnation == (bugs.stale_after_disk_loss ? 0u : 1u));
  for (const auto& s : c.sent) {
    if (!bugs.stale_after_disk_loss && s.m.h.replica == 2 &&
        (s.m.h.cmd == command::prepare_ok || s.m.h.cmd == command::start_view_change ||
         s.m.h.cmd == command::do_view_change)) {
      BOOST_TEST(s.m.h.timestamp == 1u, "stamped with its incarnation");
    }
  }
  BOOST_TEST(c.nodes[2]->r->commit_min() == op_t(5));
  BOOST_TEST(c.nodes[2]->sm->total() == 32u);
  // It takes part again: with replica 0 cut off, 1 and 2 form a view and serve.
  c.blocked.insert(0);
  c.tick(400);
  const view_t v = c.nodes[1]->r->view();
  BOOST_TEST((c.nodes[1]->r->status() == status::normal));
  BOOST_TEST(c.nodes[2]->r->view() == v);
  const replica_t primary = primary_of(v, 3);
  BOOST_REQUIRE(primary != 0);
  c.replies.clear();
  c.request(primary, 5, 5, 8);
  BOOST_TEST(c.replies.size() == 1u);
  // A vote replica 2 sent before it lost its disk (incarnation 0), arriving now: it counts for nothing (it would have
  // drawn replica 1 into a view change: the voter says it was normal in a newer view).
  message stale;
  stale.h.cmd = command::start_view_change;
  stale.h.cluster = cluster_id;
  stale.h.replica = 2;
  stale.h.view = v.value() + 5;
  stale.h.log_view = v.value() + 1;
  stale.h.timestamp = 0;
  seal(stale);
  const replica_t other = 1;  // (a peer of 2)
  std::vector<effect> out;
  c.nodes[other]->r->on_message(stale, out);
  c.take(other, out);
  c.pump();
  if (c.nodes[other]->r->view() != v) {
    return true;
  }
  // The same vote stamped with its incarnation counts.
  stale.h.timestamp = 1;
  seal(stale);
  out.clear();
  c.nodes[other]->r->on_message(stale, out);
  BOOST_TEST(c.nodes[other]->r->view() > v);
  return false;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_replica_that_lost_its_disk_votes_for_nothing_until_it_has_caught_up) {
  BOOST_TEST(!stale_vote_counts_after_disk_loss({}), "a vote of an incarnation that lost its disk was counted");
  // The test bites: with incarnations neither stamped nor checked (issue 38, finding 3 as it was), the vote counts.
  replica_bugs bug;
  bug.stale_after_disk_loss = true;
  BOOST_TEST(stale_vote_counts_after_disk_loss(bug));
}
