// group_machine: the replicated coordinator's state machine, driven as its replicas would drive it.
#include "actors/group_machine.h"

#include <map>
#include <random>
#include <set>

#include <boost/test/unit_test.hpp>

#include "net/proto/coordinator.pb.h"
#include "net/status.h"

using namespace rill;
using namespace rill::actors;
using proto::CoordinatorCommand;
using proto::CoordinatorReply;

namespace {

consensus::header prepared() {
  consensus::header h;
  h.cmd = consensus::command::prepare;
  h.operation = operation_coordinator_command;
  return h;
}

// Replicas of one coordinator group: the primary stamps each command (prepare), every replica applies it.
struct replicas {
  std::int64_t clock_ms = 1'000;
  std::vector<std::unique_ptr<group_machine>> all;
  group_machine_options options;

  explicit replicas(std::size_t n = 3, group_machine_options o = {}) : options(o) {
    for (std::size_t i = 0; i < n; ++i) {
      all.push_back(fresh());
    }
  }
  std::unique_ptr<group_machine> fresh() {
    return std::make_unique<group_machine>(options, [this] { return clock_ms; });
  }
  CoordinatorReply run(CoordinatorCommand c) {
    const auto p = all[0]->prepare(prepared(), {}, group_machine::encode(c), {});
    BOOST_REQUIRE(p.operation == operation_coordinator_command);
    std::optional<std::vector<std::byte>> first;
    for (auto& m : all) {
      auto reply = m->apply(prepared(), p.body);
      if (!first) {
        first = reply;
      }
      BOOST_REQUIRE_MESSAGE(reply == *first, "every replica answers the same");
      m->check_invariants();
    }
    for (auto& m : all) {
      BOOST_REQUIRE_MESSAGE(m->snapshot() == all[0]->snapshot(), "every replica reaches the same state");
    }
    auto r = group_machine::decode_reply(*first);
    BOOST_REQUIRE(r.has_value());
    return *r;
  }
};

CoordinatorCommand on(const std::string& group) {
  CoordinatorCommand c;
  c.set_stream_id(1);
  c.set_topic_id(2);
  c.set_group(group);
  return c;
}

CoordinatorCommand create(const std::string& group, std::uint32_t partitions, std::uint64_t timeout_ms = 1'000) {
  auto c = on(group);
  c.mutable_create()->set_partitions(partitions);
  c.mutable_create()->set_session_timeout_ms(timeout_ms);
  return c;
}

CoordinatorCommand join(const std::string& group, std::optional<std::string> id = std::nullopt,
                        std::uint64_t conn = 0) {
  auto c = on(group);
  auto* j = c.mutable_join();
  if (id) {
    j->set_member_id(*id);
  }
  j->set_conn(conn);
  return c;
}

CoordinatorCommand heartbeat(const std::string& group, const std::string& id,
                             std::vector<std::uint32_t> released = {}) {
  auto c = on(group);
  c.mutable_heartbeat()->set_member_id(id);
  for (auto p : released) {
    c.mutable_heartbeat()->add_released(p);
  }
  return c;
}

CoordinatorCommand commit(const std::string& group, const std::string& id, std::uint64_t generation,
                          std::vector<std::pair<std::uint32_t, std::uint64_t>> offsets) {
  auto c = on(group);
  c.mutable_commit()->set_member_id(id);
  c.mutable_commit()->set_generation(generation);
  for (auto [p, o] : offsets) {
    auto* po = c.mutable_commit()->add_offsets();
    po->set_partition(p);
    po->set_offset(o);
  }
  return c;
}

CoordinatorCommand every(int which, std::uint64_t conn = 0) {
  CoordinatorCommand c;
  if (which == 0) {
    c.mutable_expire();
  } else if (which == 1) {
    c.mutable_disconnected()->set_conn(conn);
  } else {
    c.mutable_refresh();
  }
  return c;
}

net::status status(const CoordinatorReply& r) {
  return static_cast<net::status>(r.status());
}

std::set<std::uint32_t> owned(const CoordinatorReply& r) {
  return {r.owned().begin(), r.owned().end()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(group_machine_suite)

BOOST_AUTO_TEST_CASE(a_command_carries_the_primarys_time_never_below_an_op_before_it) {
  std::int64_t clock = 5'000;
  group_machine m({}, [&] { return clock; });
  auto stamp = [&](std::span<const consensus::message* const> pending) {
    auto p = m.prepare(prepared(), {}, group_machine::encode(create("g", 1)), pending);
    CoordinatorCommand c;
    BOOST_REQUIRE(c.ParseFromArray(p.body.data(), static_cast<int>(p.body.size())));
    return std::pair{c.time_ms(), p.body};
  };
  auto [t1, body1] = stamp({});
  BOOST_TEST(t1 == 5'000);
  // A new primary whose clock is behind an op still pending: the op's time, not its clock.
  clock = 3'000;
  consensus::message pending{prepared(), body1};
  const consensus::message* p[] = {&pending};
  BOOST_TEST(stamp(p).first == 5'000);
  // Applied, the op's time is the floor too.
  (void)m.apply(prepared(), body1);
  BOOST_TEST(m.time_ms() == 5'000);
  BOOST_TEST(stamp({}).first == 5'000);
  clock = 7'000;
  BOOST_TEST(stamp({}).first == 7'000);
}

BOOST_AUTO_TEST_CASE(a_zombie_member_cannot_commit_over_the_partitions_new_owner) {
  replicas r;
  BOOST_TEST(status(r.run(create("g", 2))) == net::status::ok);
  auto a = r.run(join("g", "a"));
  BOOST_REQUIRE(status(a) == net::status::ok);
  BOOST_TEST((owned(a) == std::set<std::uint32_t>{0, 1}));
  const std::uint64_t a_generation = a.generation();
  BOOST_TEST(status(r.run(commit("g", "a", a_generation, {{0, 10}, {1, 20}}))) == net::status::ok);
  r.clock_ms += 100;
  auto b = r.run(join("g", "b"));
  BOOST_TEST(owned(b).empty());  // a still owns both; one of them is revoking from it
  auto a2 = r.run(heartbeat("g", "a"));
  BOOST_REQUIRE(a2.revoking_size() == 1);
  const std::uint32_t moving = a2.revoking(0);
  // a stops talking to the coordinator (cut off, paused) without releasing. Its session ends; the next expire the
  // primary submits removes it, and the partitions go to b under a new generation.
  r.clock_ms += 600;
  BOOST_TEST(status(r.run(heartbeat("g", "b"))) == net::status::ok);
  r.clock_ms += 401;
  auto expired = r.run(every(0));
  BOOST_TEST(expired.removed_size() == 1);
  auto b2 = r.run(heartbeat("g", "b"));
  BOOST_TEST((owned(b2) == std::set<std::uint32_t>{0, 1}));
  // The zombie's commit, whichever generation it names, never lands.
  BOOST_TEST(status(r.run(commit("g", "a", a2.generation(), {{moving, 99}}))) == net::status::unknown_member);
  // b commits; a zombie that rejoins under its old id is a new member of the current generation and owns nothing
  // until the group gives it something: its commit of b's partition is refused.
  BOOST_TEST(status(r.run(commit("g", "b", b2.generation(), {{moving, 30}}))) == net::status::ok);
  auto back = r.run(join("g", "a"));
  BOOST_TEST(status(r.run(commit("g", "a", back.generation(), {{moving, 5}}))) != net::status::ok);
  const auto* g = r.all[1]->find(group_key{1, 2, "g"});
  BOOST_REQUIRE(g != nullptr);
  BOOST_TEST(g->committed(moving).value() == 30u);
}

BOOST_AUTO_TEST_CASE(a_commit_of_several_partitions_applies_all_or_none) {
  replicas r;
  r.run(create("g", 3));
  auto a = r.run(join("g", "a"));
  BOOST_TEST(status(r.run(commit("g", "a", a.generation(), {{0, 5}, {1, 5}}))) == net::status::ok);
  // Partition 1 below its committed offset: partition 0's new offset does not land either.
  BOOST_TEST(status(r.run(commit("g", "a", a.generation(), {{0, 9}, {1, 4}}))) == net::status::offset_regression);
  BOOST_TEST(status(r.run(commit("g", "a", a.generation(), {{2, 7}, {2, 6}}))) == net::status::offset_regression);
  BOOST_TEST(status(r.run(commit("g", "a", a.generation(), {{3, 1}}))) == net::status::partition_not_found);
  BOOST_TEST(status(r.run(commit("g", "a", a.generation() + 1, {{0, 9}}))) == net::status::stale_generation);
  const auto* g = r.all[0]->find(group_key{1, 2, "g"});
  BOOST_TEST(g->committed(0).value() == 5u);
  BOOST_TEST(!g->committed(2).has_value());
}

BOOST_AUTO_TEST_CASE(a_new_primarys_refresh_gives_every_member_a_whole_session_to_find_it) {
  replicas r;
  r.run(create("g", 2, 1'000));
  r.run(join("g", "a"));
  r.clock_ms += 900;  // a's session ends at 1,000 ms after its join
  r.run(every(2));    // a new primary took over
  r.clock_ms += 900;
  BOOST_TEST(r.run(every(0)).removed_size() == 0);
  r.clock_ms += 101;
  BOOST_TEST(r.run(every(0)).removed_size() == 1);
}

BOOST_AUTO_TEST_CASE(a_sync_is_applied_and_changes_nothing) {
  replicas r;
  r.run(create("g", 2));
  r.run(join("g", "a"));
  const auto before = r.all[0]->snapshot();
  CoordinatorCommand sync;
  sync.mutable_sync();
  BOOST_TEST((status(r.run(sync)) == net::status::ok));
  BOOST_TEST((r.all[0]->snapshot() == before));
}

BOOST_AUTO_TEST_CASE(a_closed_connection_removes_its_members_in_every_group) {
  replicas r;
  r.run(create("g", 2));
  r.run(create("h", 2));
  r.run(join("g", "a", 7));
  r.run(join("h", "a", 7));
  r.run(join("h", "b", 8));
  auto gone = r.run(every(1, 7));
  BOOST_TEST(gone.removed_size() == 2);
  BOOST_TEST(r.all[0]->members() == 1u);
}

BOOST_AUTO_TEST_CASE(group_names_are_any_bytes_and_every_resource_has_a_limit) {
  group_machine_options o;
  o.groups_max = 2;
  o.members_max = 3;
  replicas r(2, o);
  const std::string binary("\0\xff group \x01", 10);
  BOOST_TEST(status(r.run(create(binary, 1))) == net::status::ok);
  BOOST_TEST(status(r.run(create(binary, 1))) == net::status::already_exists);
  BOOST_TEST(status(r.run(create("", 1))) == net::status::invalid_name);
  BOOST_TEST(status(r.run(create(std::string(256, 'x'), 1))) == net::status::invalid_name);
  BOOST_TEST(status(r.run(create("t", 1, 99))) == net::status::invalid_config);
  BOOST_TEST(status(r.run(create("t", 1, 3'600'001))) == net::status::invalid_config);
  BOOST_TEST(status(r.run(create("t", 0))) == net::status::invalid_config);
  BOOST_TEST(status(r.run(create("t", 1))) == net::status::ok);
  BOOST_TEST(status(r.run(create("u", 1))) == net::status::limit_exceeded);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(status(r.run(join(binary))) == net::status::ok);
  }
  auto full = r.run(join("t"));
  BOOST_TEST(status(full) == net::status::limit_exceeded);
  BOOST_TEST(full.detail().find("members_max") != std::string::npos);
  BOOST_TEST(status(r.run(join("t", std::string(256, 'm')))) == net::status::invalid_name);
  BOOST_TEST(status(r.run(join("nope"))) == net::status::group_not_found);
  // A body that does not parse is answered, the same on every replica, and changes nothing.
  const std::vector<std::byte> junk{std::byte{0xff}, std::byte{0xff}, std::byte{0x01}};
  for (auto& m : r.all) {
    auto reply = group_machine::decode_reply(m->apply(prepared(), junk));
    BOOST_REQUIRE(reply.has_value());
    BOOST_TEST(status(*reply) == net::status::bad_header);
  }
}

BOOST_AUTO_TEST_CASE(groups_spread_over_the_coordinators) {
  std::map<std::uint32_t, int> per;
  for (int i = 0; i < 4'000; ++i) {
    per[coordinator_for(group_key{1, static_cast<std::uint32_t>(i % 3), "group-" + std::to_string(i)}, 8)]++;
  }
  BOOST_TEST(per.size() == 8u);
  for (const auto& [c, n] : per) {
    BOOST_TEST(n > 350, "coordinator " << c << " has " << n);
  }
  BOOST_TEST(coordinator_for(group_key{1, 2, "g"}, 8) == coordinator_for(group_key{1, 2, "g"}, 8));
}

// Replicas applying random commands (one of them restored from another's checkpoint at random points) answer and
// end the same; after every op each group's invariants hold, committed offsets go back only by a reset, and no two
// members are told they own one partition in one generation.
BOOST_AUTO_TEST_CASE(randomized_replicas_agree_and_a_checkpoint_restores_exactly) {
  for (std::uint32_t seed = 1; seed <= 150; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      std::mt19937_64 rng(seed);
      auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
      replicas r;
      const std::vector<std::string> names{"g", std::string("\0b", 2), "c"};
      const std::vector<std::string> ids{"m1", "m2", "m3", "m4"};
      std::map<std::tuple<std::string, std::uint64_t, std::uint32_t>, std::string> owner_in;  // (group, gen, p)
      std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> committed;
      std::map<std::string, std::uint64_t> generation_seen;
      for (int step = 0; step < 400; ++step) {
        r.clock_ms += static_cast<std::int64_t>(pick(400));
        const std::string& g = names[pick(names.size())];
        const std::string& id = ids[pick(ids.size())];
        CoordinatorCommand c;
        const auto what = pick(100);
        if (what < 4) {
          c = create(g, 1 + static_cast<std::uint32_t>(pick(6)), 300 + pick(1'500));
        } else if (what < 20) {
          c = join(g, pick(4) == 0 ? std::nullopt : std::optional(id), 1 + pick(3));
        } else if (what < 50) {
          std::vector<std::uint32_t> released;
          for (std::uint32_t p = 0; p < 6; ++p) {
            if (pick(3) == 0) {
              released.push_back(p);
            }
          }
          c = heartbeat(g, id, released);
        } else if (what < 72) {
          const auto* st = r.all[0]->find(group_key{1, 2, g});
          const std::uint64_t gen = st ? st->generation() - pick(2) : 0;
          c = commit(g, id, gen, {{static_cast<std::uint32_t>(pick(6)), pick(1'000)}});
        } else if (what < 78) {
          c = on(g);
          c.mutable_leave()->set_member_id(id);
        } else if (what < 86) {
          c = every(0);
        } else if (what < 89) {
          c = every(1, 1 + pick(3));
        } else if (what < 91) {
          c = every(2);
        } else if (what < 94) {
          c = on(g);
          auto* po = c.mutable_reset()->add_offsets();
          po->set_partition(static_cast<std::uint32_t>(pick(6)));
          po->set_offset(pick(1'000));
        } else if (what < 97) {
          c = on(g);
          c.mutable_resize()->set_partitions(1 + static_cast<std::uint32_t>(pick(6)));
        } else {
          c = on(g);
          c.mutable_remove();
        }
        const auto reply = r.run(c);
        if (status(reply) == net::status::ok && (c.has_remove() || c.has_reset() || c.has_resize())) {
          std::erase_if(committed, [&](const auto& kv) { return kv.first.first == g; });
          std::erase_if(owner_in, [&](const auto& kv) { return std::get<0>(kv.first) == g; });
        }
        if (status(reply) == net::status::ok && (c.has_join() || c.has_heartbeat())) {
          for (const auto p : reply.owned()) {
            auto [it, fresh] = owner_in.emplace(std::tuple{g, reply.generation(), p}, reply.member_id());
            BOOST_REQUIRE_MESSAGE(fresh || it->second == reply.member_id(),
                                  "partition " << p << " of generation " << reply.generation() << " told to "
                                               << it->second << " and " << reply.member_id());
          }
        }
        // Offsets never go back but by a reset.
        for (const auto& [key, st] : r.all[0]->groups()) {
          for (std::uint32_t p = 0; p < st.partitions(); ++p) {
            if (auto now = st.committed(p)) {
              auto& seen = committed[{key.name, p}];
              BOOST_REQUIRE(*now >= seen);
              seen = *now;
            }
          }
          auto& gen = generation_seen[key.name];
          BOOST_REQUIRE(st.generation() >= gen);
          gen = st.generation();
        }
        if (c.has_remove() && status(reply) == net::status::ok) {
          generation_seen.erase(g);
        }
        // A replica restarts from another's checkpoint and goes on with the others.
        if (pick(40) == 0) {
          auto restored = r.fresh();
          BOOST_REQUIRE(restored->restore(r.all[0]->snapshot()));
          BOOST_REQUIRE(restored->snapshot() == r.all[0]->snapshot());
          r.all[2] = std::move(restored);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_checkpoint_that_does_not_check_is_refused_and_changes_nothing) {
  replicas r(1);
  r.run(create("g", 2));
  r.run(join("g", "a"));
  const auto before = r.all[0]->snapshot();
  proto::CoordinatorSnapshot s;
  BOOST_REQUIRE(s.ParseFromArray(before.data(), static_cast<int>(before.size())));
  s.mutable_groups(0)->mutable_state()->mutable_slots(0)->set_owner("nobody");
  std::vector<std::byte> bad(s.ByteSizeLong());
  BOOST_REQUIRE(s.SerializeToArray(bad.data(), static_cast<int>(bad.size())));
  BOOST_TEST(!r.all[0]->restore(bad));
  const std::vector<std::byte> junk{std::byte{0xff}};
  BOOST_TEST(!r.all[0]->restore(junk));
  BOOST_TEST((r.all[0]->snapshot() == before));
}

BOOST_AUTO_TEST_SUITE_END()
