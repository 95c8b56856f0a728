// group_state: membership, sticky cooperative assignment, generations, sessions and offsets, as a plain state
// machine; then seeded random runs of joins, leaves, heartbeats, releases, expiries and commits with the
// invariants checked after every step.
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include "actors/group_state.h"
#include "base/random.h"

using namespace rill;
using namespace rill::actors;
using namespace std::chrono_literals;

namespace {

using tp = group_state::time_point;

std::vector<std::uint32_t> owned_by(const group_state& g, const std::string& id) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t p = 0; p < g.partitions(); ++p) {
    if (g.owner(p) == id) {
      out.push_back(p);
    }
  }
  return out;
}

// Every member gives back what it is asked to (as a well-behaved consumer does after its heartbeat).
void settle(group_state& g, const std::vector<std::string>& ids, tp now) {
  for (const auto& id : ids) {
    auto v = g.heartbeat(id, now);
    if (v && !v->revoking.empty()) {
      BOOST_REQUIRE(g.release(id, v->generation, v->revoking));
    }
    g.check_invariants();
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(group_state_suite)

BOOST_AUTO_TEST_CASE(three_members_spread_evenly_and_a_fourth_moves_as_little_as_possible) {
  group_state g(12, assignment_strategy::range, 10s);
  const auto a = g.join(std::nullopt, tp(0))->member_id;
  BOOST_TEST(owned_by(g, a).size() == 12u);  // alone: everything, at once
  const auto b = g.join(std::nullopt, tp(0))->member_id;
  // Cooperative: b gets nothing until a gives its half back.
  BOOST_TEST(owned_by(g, b).empty());
  BOOST_TEST(!g.stable());
  auto va = g.heartbeat(a, tp(0));
  BOOST_REQUIRE(va);
  BOOST_TEST(va->revoking.size() == 6u);
  BOOST_REQUIRE(g.release(a, va->generation, va->revoking));
  BOOST_TEST(owned_by(g, b).size() == 6u);
  BOOST_TEST(g.stable());
  const auto c = g.join(std::nullopt, tp(0))->member_id;
  settle(g, {a, b, c}, tp(0));
  BOOST_TEST(g.stable());
  for (const auto& id : {a, b, c}) {
    BOOST_TEST(owned_by(g, id).size() == 4u);
  }
  std::map<std::uint32_t, std::string> before;
  for (std::uint32_t p = 0; p < 12; ++p) {
    before[p] = *g.owner(p);
  }
  const auto d = g.join(std::nullopt, tp(0))->member_id;
  settle(g, {a, b, c, d}, tp(0));
  BOOST_TEST(g.stable());
  int moved = 0;
  for (std::uint32_t p = 0; p < 12; ++p) {
    moved += *g.owner(p) != before[p] ? 1 : 0;
  }
  BOOST_TEST(moved == 3);  // the minimum: each of the three gives one to the newcomer
  for (const auto& id : {a, b, c, d}) {
    BOOST_TEST(owned_by(g, id).size() == 3u);
  }
}

BOOST_AUTO_TEST_CASE(strategies_place_a_fresh_group_as_named) {
  group_state range(7, assignment_strategy::range, 10s);
  group_state rr(7, assignment_strategy::round_robin, 10s);
  for (auto* g : {&range, &rr}) {
    g->join(std::string("a"), tp(0)).value();
    g->join(std::string("b"), tp(0)).value();
    g->join(std::string("c"), tp(0)).value();
    settle(*g, {"a", "b", "c"}, tp(0));
  }
  // The first member took everything; stickiness keeps its ideal share, the rest follows the strategy.
  BOOST_TEST(owned_by(range, "a") == (std::vector<std::uint32_t>{0, 1, 2}));
  BOOST_TEST(owned_by(range, "b") == (std::vector<std::uint32_t>{3, 4}));
  BOOST_TEST(owned_by(range, "c") == (std::vector<std::uint32_t>{5, 6}));
  BOOST_TEST(owned_by(rr, "a") == (std::vector<std::uint32_t>{0, 3, 6}));
  BOOST_TEST(owned_by(rr, "b") == (std::vector<std::uint32_t>{1, 4}));
  BOOST_TEST(owned_by(rr, "c") == (std::vector<std::uint32_t>{2, 5}));
}

BOOST_AUTO_TEST_CASE(a_member_whose_session_ends_loses_its_partitions_to_the_others) {
  group_state g(6, assignment_strategy::round_robin, 3s);
  const auto a = g.join(std::nullopt, tp(0))->member_id;
  const auto b = g.join(std::nullopt, tp(0))->member_id;
  settle(g, {a, b}, tp(0));
  BOOST_REQUIRE(g.stable());
  BOOST_TEST((g.next_deadline() == tp(3s)));
  // a keeps heartbeating, b goes silent.
  BOOST_TEST(g.expire(tp(2s)).empty());
  BOOST_REQUIRE(g.heartbeat(a, tp(2s)));
  const auto gone = g.expire(tp(3s));
  BOOST_TEST(gone == std::vector<std::string>{b});
  BOOST_TEST(g.stable());  // b owned nothing of a's and is gone: its partitions went to a at once
  BOOST_TEST(owned_by(g, a).size() == 6u);
  auto stale = g.heartbeat(b, tp(3s));
  BOOST_REQUIRE(!stale);
  BOOST_TEST(stale.error().code() == make_error_code(group_errc::unknown_member));
  g.check_invariants();
}

BOOST_AUTO_TEST_CASE(stale_generations_unknown_members_and_backward_commits_are_refused) {
  group_state g(2, assignment_strategy::range, 10s);
  const auto a = g.join(std::nullopt, tp(0));
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(g.commit(a->member_id, a->generation, 0, 10));
  BOOST_TEST(*g.committed(0) == 10u);
  auto back = g.commit(a->member_id, a->generation, 0, 5);
  BOOST_REQUIRE(!back);
  BOOST_TEST(back.error().code() == make_error_code(group_errc::offset_regression));
  const auto b = g.join(std::nullopt, tp(0));  // a new generation
  BOOST_REQUIRE(b);
  auto stale = g.commit(a->member_id, a->generation, 0, 20);
  BOOST_REQUIRE(!stale);
  BOOST_TEST(stale.error().code() == make_error_code(group_errc::stale_generation));
  BOOST_TEST(*g.committed(0) == 10u);
  auto unknown = g.commit("nobody", g.generation(), 0, 20);
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(unknown.error().code() == make_error_code(group_errc::unknown_member));
  // b does not own partition 1 until a releases it: neither reads nor commits.
  auto early = g.check_read(b->member_id, b->generation, 1);
  BOOST_REQUIRE(!early);
  BOOST_TEST(early.error().code() == make_error_code(group_errc::not_owner));
  auto va = g.heartbeat(a->member_id, tp(1s));
  BOOST_REQUIRE(va);
  BOOST_TEST(va->revoking == std::vector<std::uint32_t>{1});
  BOOST_REQUIRE(g.release(a->member_id, va->generation, va->revoking));
  BOOST_TEST(g.generation() == va->generation + 1);  // the hand-over starts a generation of its own
  BOOST_TEST(!g.check_read(b->member_id, b->generation, 1));
  BOOST_TEST(static_cast<bool>(g.check_read(b->member_id, g.generation(), 1)));
  BOOST_TEST(!g.check_read(a->member_id, va->generation, 1));
  BOOST_TEST(!g.release(a->member_id, va->generation, std::vector<std::uint32_t>{0}));  // not being revoked
  BOOST_TEST(!g.check_read(b->member_id, b->generation, 2));                            // no such partition
}

BOOST_AUTO_TEST_CASE(heartbeats_release_leniently_and_a_closed_connection_removes_its_members) {
  group_state g(4, assignment_strategy::range, 10s);
  const auto a = g.join(std::nullopt, tp(0), 7)->member_id;
  const auto b = g.join(std::nullopt, tp(0), 8)->member_id;
  auto va = g.heartbeat(a, tp(0));
  BOOST_REQUIRE(va);
  BOOST_TEST(va->revoking.size() == 2u);
  // Released with a partition that is not being revoked (kept) and one out of range (ignored).
  std::vector<std::uint32_t> released = va->revoking;
  released.push_back(0);
  released.push_back(99);
  const auto before = g.generation();
  auto after = g.heartbeat(a, tp(0), released);
  BOOST_REQUIRE(after);
  BOOST_TEST(after->owned.size() == 2u);
  BOOST_TEST(after->revoking.empty());
  BOOST_TEST(after->generation == before + 1);
  BOOST_TEST(owned_by(g, b).size() == 2u);
  BOOST_TEST(g.stable());
  // Connection 8 closes: b goes at once; connection 0 (none) removes nobody.
  BOOST_TEST(g.disconnected(0).empty());
  BOOST_TEST(g.disconnected(8) == std::vector<std::string>{b});
  BOOST_TEST(g.members() == 1u);
  BOOST_TEST(owned_by(g, a).size() == 4u);
  g.check_invariants();
}

BOOST_AUTO_TEST_CASE(an_owner_that_never_releases_loses_the_partition_after_a_session_timeout) {
  group_state g(2, assignment_strategy::range, 10s);
  const auto a = g.join(std::nullopt, tp(0))->member_id;
  const auto b = g.join(std::nullopt, tp(1s))->member_id;  // partition 1 starts revoking from a at 1 s
  BOOST_TEST(!g.stable());
  // a keeps beating but never releases; b beats too.
  for (int s = 2; s <= 10; ++s) {
    BOOST_REQUIRE(g.heartbeat(a, tp(std::chrono::seconds(s))));
    BOOST_REQUIRE(g.heartbeat(b, tp(std::chrono::seconds(s))));
    BOOST_TEST(g.expire(tp(std::chrono::seconds(s))).empty());
    BOOST_TEST((g.owner(1) == a));
  }
  BOOST_TEST((g.next_deadline() == tp(11s)));  // the revocation's deadline comes before the sessions'
  const auto gen = g.generation();
  BOOST_TEST(g.expire(tp(11s)).empty());  // nobody removed...
  BOOST_TEST((g.owner(1) == b));          // ...but the partition moved
  BOOST_TEST(g.generation() == gen + 1);
  BOOST_TEST(g.stable());
  BOOST_TEST(!g.check_read(a, g.generation(), 1));
  BOOST_TEST(static_cast<bool>(g.check_read(b, g.generation(), 1)));
  g.check_invariants();
}

BOOST_AUTO_TEST_CASE(a_partition_that_left_and_came_back_is_a_new_ownership) {
  group_state g(2, assignment_strategy::range, 10s);
  const auto a = g.join(std::string("a"), tp(0))->member_id;
  const auto first = g.generation();
  auto va = g.heartbeat(a, tp(0));
  BOOST_REQUIRE(va);
  BOOST_TEST(va->acquired == (std::vector<std::uint64_t>{first, first}));
  BOOST_TEST(g.still_owns(a, first, 1));
  // b comes, takes partition 1, leaves: partition 1 is a's again, under a later generation.
  const auto b = g.join(std::string("b"), tp(0))->member_id;
  BOOST_REQUIRE(g.heartbeat(a, tp(0), g.heartbeat(a, tp(0))->revoking));
  BOOST_TEST((g.owner(1) == b));
  BOOST_REQUIRE(g.leave(b));
  BOOST_TEST((g.owner(1) == a));
  const auto back = g.heartbeat(a, tp(0));
  BOOST_REQUIRE(back);
  BOOST_TEST(back->acquired[0] == first);           // partition 0 never left
  BOOST_TEST(back->acquired[1] == g.generation());  // partition 1 is a new ownership
  // A read a started in the first generation is not delivered for partition 1 (b may have committed past it).
  BOOST_TEST(g.still_owns(a, first, 0));
  BOOST_TEST(!g.still_owns(a, first, 1));
  BOOST_TEST(g.still_owns(a, g.generation(), 1));
  // And the acquisition survives serialization.
  auto r = group_state::restore(g.serialize(), assignment_strategy::range, 10s, 2, tp(0));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->still_owns(a, first, 0));
  BOOST_TEST(!r->still_owns(a, first, 1));
}

BOOST_AUTO_TEST_CASE(partition_count_changes_and_offset_resets) {
  group_state g(4, assignment_strategy::round_robin, 10s);
  BOOST_REQUIRE(g.reset(3, 40));
  const auto a = g.join(std::nullopt, tp(0));
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(g.commit(a->member_id, a->generation, 1, 10));
  auto refused = g.reset(1, 0);  // a member is reading: no reset
  BOOST_REQUIRE(!refused);
  BOOST_TEST(*g.committed(1) == 10u);
  const auto gen = g.generation();
  g.resize(2);  // partitions 2 and 3 deleted
  BOOST_TEST(g.generation() == gen + 1);
  BOOST_TEST(!g.committed(3));
  BOOST_TEST(*g.committed(1) == 10u);
  BOOST_TEST(owned_by(g, a->member_id).size() == 2u);
  g.resize(6);
  BOOST_TEST(owned_by(g, a->member_id).size() == 6u);
  g.check_invariants();
  BOOST_REQUIRE(g.leave(a->member_id));
  BOOST_REQUIRE(g.reset(1, 3));  // backwards is allowed for a reset
  BOOST_TEST(*g.committed(1) == 3u);
}

BOOST_AUTO_TEST_CASE(state_survives_serialization_with_fresh_sessions) {
  group_state g(6, assignment_strategy::range, 10s);
  const auto a = g.join(std::nullopt, tp(0))->member_id;
  const auto b = g.join(std::nullopt, tp(0))->member_id;
  settle(g, {a, b}, tp(0));
  BOOST_REQUIRE(g.commit(a, g.generation(), 0, 17));
  BOOST_REQUIRE(g.commit(b, g.generation(), 5, 4));
  const auto bytes = g.serialize();
  auto r = group_state::restore(bytes, assignment_strategy::range, 10s, 6, tp(100s));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->generation() == g.generation());  // nothing moved: members go on
  BOOST_TEST(r->members() == 2u);
  BOOST_TEST(*r->committed(0) == 17u);
  BOOST_TEST(*r->committed(5) == 4u);
  for (std::uint32_t p = 0; p < 6; ++p) {
    BOOST_TEST((r->owner(p) == g.owner(p)));
  }
  BOOST_TEST((r->next_deadline() == tp(110s)));    // sessions restart at the restore
  const auto c = r->join(std::nullopt, tp(100s));  // ids are not reused
  BOOST_REQUIRE(c);
  BOOST_TEST(c->member_id != a);
  BOOST_TEST(c->member_id != b);
  // Fewer partitions at restore: a new generation, offsets of the gone partitions dropped.
  auto smaller = group_state::restore(bytes, assignment_strategy::range, 10s, 4, tp(0));
  BOOST_REQUIRE(smaller);
  BOOST_TEST(smaller->generation() > g.generation());
  BOOST_TEST(!smaller->committed(5));
  smaller->check_invariants();
  BOOST_TEST(!group_state::restore("not a protobuf \xff\xff", assignment_strategy::range, 10s, 4, tp(0)));
}

BOOST_AUTO_TEST_CASE(a_member_rejoining_with_its_id_keeps_its_place) {
  group_state g(4, assignment_strategy::range, 10s);
  g.join(std::string("stable-a"), tp(0)).value();
  g.join(std::string("stable-b"), tp(0)).value();
  settle(g, {"stable-a", "stable-b"}, tp(0));
  const auto gen = g.generation();
  const auto again = g.join(std::string("stable-a"), tp(1s));
  BOOST_REQUIRE(again);
  BOOST_TEST(again->generation == gen);  // no membership change, no rebalance
  BOOST_TEST(g.members() == 2u);
  BOOST_TEST(owned_by(g, "stable-a").size() == 2u);
}

// Seeded random runs: members join, leave, go silent, heartbeat and release what they are asked to (sometimes
// late), commit what they own; time moves on. After every step: the invariants, at most one member that may read
// each partition, committed offsets never lower than before, and a group left alone long enough becomes stable
// with every partition owned.
//
// The run also tracks, apart from group_state, who holds each partition: a member holds it from when the group
// names it the owner until it releases it, leaves, or is expired. A partition may pass to another member while its
// holder still holds it only once its revocation has lasted a session timeout (the holder then loses it: its reads
// are refused from then on). A hand-over before the release (a mutation that did that passed the checks above:
// each generation still has one reader) breaks this.
BOOST_AUTO_TEST_CASE(random_runs_keep_the_invariants) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    prng rng(seed);
    const auto partitions = static_cast<std::uint32_t>(1 + rng.below(24));
    group_state g(partitions, rng.below(2) ? assignment_strategy::range : assignment_strategy::round_robin, 5s);
    tp now(0);
    std::set<std::string> live;  // members that still heartbeat
    std::map<std::uint32_t, std::uint64_t> last_commit;
    std::map<std::pair<std::uint64_t, std::uint32_t>, std::string> reader;  // (generation, partition) -> member
    std::map<std::uint32_t, std::string> holder;  // partition -> the member that holds it (see above)
    std::map<std::uint32_t, tp> revoking_seen;    // partition -> the end of the step where its revocation was seen
    constexpr auto step_max = std::chrono::milliseconds(800);
    auto let_go = [&](const std::string& id) {
      std::erase_if(holder, [&](const auto& kv) { return kv.second == id; });
    };
    for (int step = 0; step < 300; ++step) {
      now += std::chrono::milliseconds(rng.below(step_max.count()));
      const auto op = rng.below(10);
      if (op == 0 && g.members() < 8) {
        auto j = g.join(std::nullopt, now);
        BOOST_REQUIRE(j);
        live.insert(j->member_id);
      } else if (op == 1 && !live.empty()) {
        auto it = std::next(live.begin(), static_cast<long>(rng.below(live.size())));
        BOOST_REQUIRE(g.leave(*it));
        let_go(*it);
        live.erase(it);
      } else if (op == 2 && !live.empty()) {
        live.erase(std::next(live.begin(), static_cast<long>(rng.below(live.size()))));  // goes silent
      } else if (op <= 6) {
        for (const auto& id : live) {
          auto v = g.heartbeat(id, now);
          if (!v) {
            continue;  // expired while silent... or never: live members heartbeat in time below
          }
          if (!v->revoking.empty() && rng.below(3) != 0) {
            BOOST_REQUIRE(g.release(id, v->generation, v->revoking));
            for (const auto p : v->revoking) {
              if (holder.contains(p) && holder[p] == id) {
                holder.erase(p);
              }
            }
          }
        }
      } else if (op == 7) {
        for (const auto& id : g.expire(now)) {
          let_go(id);
          live.erase(id);
        }
      } else {
        for (const auto& id : live) {
          auto v = g.heartbeat(id, now);
          if (!v || v->owned.empty()) {
            continue;
          }
          const auto p = v->owned[rng.below(v->owned.size())];
          const auto next = last_commit[p] + rng.below(100);
          BOOST_REQUIRE(g.commit(id, v->generation, p, next));
          last_commit[p] = next;
        }
      }
      g.check_invariants();
      for (std::uint32_t p = 0; p < partitions; ++p) {
        const auto owner = g.owner(p);
        if (auto h = holder.find(p); h != holder.end() && owner != h->second) {
          // Taken from a holder that did not give it back: only by the revocation's timeout (the revocation began
          // during the step at whose end it was first seen, so no earlier than a step before that), and the holder
          // may read it no more.
          const auto seen = revoking_seen.find(p);
          BOOST_REQUIRE_MESSAGE(seen != revoking_seen.end() && now > seen->second - step_max + 5s,
                                "seed " << seed << " step " << step << ": partition " << p << " went from " << h->second
                                        << " to " << owner.value_or("nobody")
                                        << " before it was released or its revocation timed out");
          BOOST_REQUIRE(!g.check_read(h->second, g.generation(), p));
          holder.erase(h);
        }
        if (owner) {
          holder.try_emplace(p, *owner);
        }
        if (owner && owner != g.target(p)) {
          revoking_seen.try_emplace(p, now);
        } else {
          revoking_seen.erase(p);
        }
        int readers = 0;
        for (const auto& id : live) {
          readers += g.check_read(id, g.generation(), p) ? 1 : 0;
        }
        BOOST_REQUIRE(readers <= 1);
        // Within one generation a partition has one reader at most, ever.
        if (const auto o = g.owner(p)) {
          auto [it, fresh] = reader.emplace(std::make_pair(g.generation(), p), *o);
          BOOST_REQUIRE(it->second == *o);
        }
        if (last_commit.contains(p)) {
          BOOST_REQUIRE((g.committed(p) == last_commit[p]));
        }
      }
      // Live members heartbeat well within their session: expire only removes the silent ones.
      for (const auto& id : live) {
        BOOST_REQUIRE(g.heartbeat(id, now));
      }
    }
    // Left alone: the silent expire, the live give back what they are asked to; then everything is owned.
    now += 10s;
    for (const auto& id : live) {
      BOOST_REQUIRE(g.heartbeat(id, now));
    }
    g.expire(now);
    settle(g, std::vector<std::string>(live.begin(), live.end()), now);
    BOOST_TEST_REQUIRE(g.stable(), "seed " << seed);
    if (!live.empty()) {
      for (std::uint32_t p = 0; p < partitions; ++p) {
        BOOST_REQUIRE(g.owner(p).has_value());
      }
    }
    g.check_invariants();
  }
}

BOOST_AUTO_TEST_SUITE_END()
