// The real group actor and partition actors under CAF's test coordinator, one message at a time, with a seeded
// choice of which ready actor runs next, over the simulated disk. Members join, heartbeat (releasing what they are
// asked to, sometimes late), poll (long polls too, parked in the partition), commit, leave, drop their connection or
// go silent until their session ends; time moves on a manual clock. Checked after every message the group handles:
// the group's invariants (at most one owner per partition, every partition owned when the group is stable and has
// members), committed offsets never going back; and at the instant a member's poll is answered with data: that
// member owns the partition then, and no other member was ever answered for that partition in that generation.
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/core.h>

#include "actors/group_actor.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/partition_actor.hpp"
#include "actors/runtime/shard.h"
#include "base/random.h"
#include "net/frame.h"
#include "simulation/sim_disk.h"
#include "storage/record_batch_builder.h"
#include "storage/validated_batches.h"
#include "tests/actors/coordinated.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {

constexpr std::uint32_t partitions = 5;
constexpr int members = 4;
constexpr std::chrono::milliseconds session{1000};

struct member_model {
  std::string id;  // stable ids: "m0".."m3"
  bool joined = false;
  std::uint64_t generation = 0;
  std::vector<std::uint32_t> owned;
  std::vector<std::uint32_t> revoking;
  std::map<std::uint32_t, std::uint64_t> position;  // after what its polls returned
};

struct run_result {
  std::vector<std::string> deliveries;  // "generation/partition/member/offset", in order
  std::uint64_t steps = 0;
  std::uint64_t refused = 0;  // polls and commits refused (stale generation, not owner, unknown member)
  bool settled_stable = false;
};

std::vector<std::byte> batch(int records) {
  storage::batch_builder b;
  for (int i = 0; i < records; ++i) {
    b.add("k", "v" + std::to_string(i));
  }
  return *b.build();
}

template <class Header>
group_msg msg_of(net::api a, const Header& h, std::uint64_t connection) {
  return group_msg{static_cast<std::uint16_t>(a), h.SerializeAsString(), connection};
}

run_result run(std::uint64_t seed, int rounds) {
  testing::coordinated world(seed);
  auto& sys = world.sys;
  auto& clk = world.clk;
  auto& rng = world.rng;
  partition_services psvc;
  psvc.clk = &clk;
  psvc.reporter = &world.reporter;
  storage::log_options options;
  options.config.segment_bytes = 1 << 20;
  options.config.preallocate_bytes = 0;

  run_result out;
  std::map<std::uint32_t, std::uint64_t> committed_seen;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::string> reader;  // (generation, partition) -> member
  group_services gsvc;
  gsvc.clk = &clk;
  gsvc.reporter = &world.reporter;
  gsvc.on_step = [&](const group_state& g) {
    ++out.steps;
    g.check_invariants();  // aborts, loudly, on a violation
    for (std::uint32_t p = 0; p < g.partitions(); ++p) {
      if (auto c = g.committed(p)) {
        BOOST_TEST(*c >= committed_seen[p]);
        committed_seen[p] = *c;
      }
    }
  };
  gsvc.on_delivered = [&](const group_state& g, const std::string& member, std::uint32_t p) {
    BOOST_TEST((g.owner(p) == member));
    auto [it, fresh] = reader.emplace(std::make_pair(g.generation(), p), member);
    BOOST_CHECK_MESSAGE(it->second == member, "partition " << p << " read by " << it->second << " and " << member
                                                           << " in generation " << g.generation());
  };

  auto drive = [&] { world.drive(); };
  // Fires every timer set so far (long-poll deadlines, session ends): the manual clock says who is really late.
  auto fire_timers = [&] { world.test_shard.timers().fire_due(std::chrono::nanoseconds::max()); };
  auto act = [&](auto f) { world.act(std::move(f)); };

  std::vector<partition_actor_hdl> parts;
  for (std::uint32_t p = 0; p < partitions; ++p) {
    parts.push_back(sys.spawn<partition_actor>(std::size_t{0}, partition_identity{0, 0, p, "/p" + std::to_string(p)},
                                               options, &psvc));
  }
  // Some data in every partition: three batches of four records.
  for (std::uint32_t p = 0; p < partitions; ++p) {
    for (int b = 0; b < 3; ++b) {
      act([&, p](caf::event_based_actor* self) {
        self->request(parts[p], caf::infinite, produce_atom::value,
                      produce_msg{std::make_shared<storage::validated_batches>(
                          storage::validated_batches::validate(batch(4), limits::batch_bytes_limit).value())})
            .then([](produce_reply& r) { BOOST_TEST(r.result.ok()); });
      });
    }
  }
  drive();

  group_identity gid;
  gid.name = "g";
  gid.config.set_strategy(rng.below(2) ? proto::ASSIGNMENT_ROUND_ROBIN : proto::ASSIGNMENT_RANGE);
  gid.config.set_session_timeout_ms(static_cast<std::uint32_t>(session.count()));
  gid.partitions = partitions;
  gid.dir = "/groups/0/0/0";
  group_actor_hdl group = sys.spawn<group_actor>(std::size_t{0}, gid, &gsvc);
  drive();

  std::vector<member_model> model(members);
  for (int i = 0; i < members; ++i) {
    model[i].id = "m" + std::to_string(i);
  }
  auto ident = [](auto& h) {
    h.mutable_stream()->set_id(0);
    h.mutable_topic()->set_id(0);
    h.mutable_group()->set_name("g");
  };
  auto apply_assignment = [&](member_model& m, const std::string& header) {
    proto::GroupAssignment a;
    BOOST_TEST(a.ParseFromString(header));
    m.generation = a.generation();
    m.owned.assign(a.owned().begin(), a.owned().end());
    m.revoking.assign(a.revoking().begin(), a.revoking().end());
    std::erase_if(m.position,
                  [&](const auto& kv) { return std::find(m.owned.begin(), m.owned.end(), kv.first) == m.owned.end(); });
  };
  auto refused = [&](const outcome& r) {
    BOOST_CHECK_MESSAGE(
        r.st == net::status::unknown_member || r.st == net::status::stale_generation || r.st == net::status::not_owner,
        "unexpected " << net::to_string(r.st) << ": " << r.message);
    ++out.refused;
  };
  std::function<void(member_model&, bool)> heartbeat;
  heartbeat = [&](member_model& m, bool release) {
    proto::GroupHeartbeatRequest h;
    ident(h);
    h.set_member_id(m.id);
    if (release) {
      for (auto p : m.revoking) {
        h.add_released(p);
        m.position.erase(p);
      }
    }
    act([&, h](caf::event_based_actor* self) {
      self->request(group, caf::infinite, group_atom::value, msg_of(net::api::group_heartbeat, h, 0))
          .then([&](group_reply& r) {
            if (r.result.ok()) {
              apply_assignment(m, r.header);
            } else {
              refused(r.result);
              m.joined = false;
            }
          });
    });
  };

  for (int round = 0; round < rounds; ++round) {
    const int ops = 1 + static_cast<int>(rng.below(6));
    for (int k = 0; k < ops; ++k) {
      member_model& m = model[rng.below(members)];
      const auto op = rng.below(12);
      if (!m.joined || op == 0) {
        proto::GroupJoinRequest h;
        ident(h);
        h.set_member_id(m.id);
        m.joined = true;
        const std::uint64_t conn = 100 + static_cast<std::uint64_t>(m.id[1] - '0');
        act([&, h, conn](caf::event_based_actor* self) {
          self->request(group, caf::infinite, group_atom::value, msg_of(net::api::group_join, h, conn))
              .then([&](group_reply& r) {
                BOOST_CHECK_MESSAGE(r.result.ok(), r.result.message);
                proto::GroupJoinReply j;
                BOOST_TEST(j.ParseFromString(r.header));
                m.generation = j.generation();
              });
        });
      } else if (op <= 3) {
        heartbeat(m, rng.below(4) != 0);  // usually gives back what it is asked to
      } else if (op <= 7 && !m.owned.empty()) {
        const auto p = m.owned[rng.below(m.owned.size())];
        proto::PollRequest req;
        req.mutable_stream()->set_id(0);
        req.mutable_topic()->set_id(0);
        req.set_partition_id(p);
        if (auto pos = m.position.find(p); pos != m.position.end()) {
          req.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
          req.mutable_strategy()->set_value(pos->second);
        } else {
          req.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
        }
        req.mutable_consumer()->set_group("g");
        req.mutable_member()->set_member_id(m.id);
        req.mutable_member()->set_generation(m.generation);
        req.set_max_records(2 + static_cast<std::uint32_t>(rng.below(6)));
        req.set_max_wait_ms(rng.below(3) == 0 ? 50 : 0);  // some park in the partition
        req.set_auto_commit(rng.below(4) == 0);
        act([&, req, p](caf::event_based_actor* self) {
          self->request(group, caf::infinite, group_poll_atom::value, group_poll_msg{req, parts[p]})
              .then([&, p](poll_reply& r) {
                if (!r.result.ok()) {
                  refused(r.result);
                  heartbeat(m, false);  // as a client does: learn the current generation and assignment
                  return;
                }
                if (r.data->batches > 0) {
                  m.position[p] = static_cast<std::uint64_t>(r.data->next_offset.value());
                  out.deliveries.push_back(fmt::format("{}/{}/{}", p, m.id, r.data->first_offset.value()));
                }
              });
        });
      } else if (op <= 9 && !m.position.empty()) {
        proto::GroupCommitRequest h;
        ident(h);
        h.mutable_member()->set_member_id(m.id);
        h.mutable_member()->set_generation(m.generation);
        for (const auto& [p, pos] : m.position) {
          auto* o = h.add_offsets();
          o->set_partition_id(p);
          o->set_offset(pos);
        }
        act([&, h](caf::event_based_actor* self) {
          self->request(group, caf::infinite, group_atom::value, msg_of(net::api::group_commit, h, 0))
              .then([&](group_reply& r) {
                if (!r.result.ok() && r.result.st != net::status::offset_regression) {
                  refused(r.result);
                  heartbeat(m, false);
                }
              });
        });
      } else if (op == 10) {
        proto::GroupLeaveRequest h;
        ident(h);
        h.set_member_id(m.id);
        m.joined = false;
        m.position.clear();
        act([&, h](caf::event_based_actor* self) {
          self->request(group, caf::infinite, group_atom::value, msg_of(net::api::group_leave, h, 0))
              .then([](group_reply&) {});  // may be unknown already (expired, disconnected)
        });
      } else if (op == 11) {
        // The member's connection closes, or it goes silent: removed now, or when its session ends.
        m.joined = false;
        m.position.clear();
        if (rng.below(2) == 0) {
          const std::uint64_t conn = 100 + static_cast<std::uint64_t>(m.id[1] - '0');
          caf::anon_send(group, disconnect_atom::value, conn);
        }
      }
    }
    drive();
    clk.advance(std::chrono::milliseconds(rng.below(400)));
    if (rng.below(3) == 0) {
      fire_timers();  // long polls time out; sessions past their end are expired
      drive();
    }
  }
  // Left alone: joined members beat and give back what they are asked to; the silent ones expire.
  for (int settle = 0; settle < 6; ++settle) {
    for (auto& m : model) {
      if (m.joined) {
        heartbeat(m, true);
      }
    }
    drive();
    clk.advance(std::chrono::milliseconds(300));
    fire_timers();
    drive();
  }
  // One last look, through the actor: stable, and every partition owned when someone is left.
  act([&](caf::event_based_actor* self) {
    self->request(group, caf::infinite, describe_atom::value).then([&](group_reply& r) {
      BOOST_TEST(r.result.ok());
      proto::GroupGetReply got;
      BOOST_TEST(got.ParseFromString(r.header));
      out.settled_stable = got.group().stable();
      if (got.group().members_size() > 0) {
        for (const auto& p : got.group().partitions()) {
          BOOST_TEST(p.has_owner());
        }
      }
    });
  });
  drive();
  for (auto& p : parts) {
    act([&, p](caf::event_based_actor* self) {
      self->request(p, caf::infinite, close_atom::value).then([](outcome&) {});
    });
  }
  act([&](caf::event_based_actor* self) {
    self->request(group, caf::infinite, close_atom::value).then([](outcome&) {});
  });
  drive();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(seeded_orderings_of_group_messages_keep_one_owner_per_partition) {
  std::uint64_t deliveries = 0;
  std::uint64_t refusals = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const auto r = run(seed, 150);
      BOOST_TEST(r.settled_stable);
      BOOST_TEST_MESSAGE("seed " << seed << ": " << r.steps << " group steps, " << r.deliveries.size()
                                 << " deliveries, " << r.refused << " refused");
      deliveries += r.deliveries.size();
      refusals += r.refused;
    }
  }
  BOOST_TEST_MESSAGE(deliveries << " deliveries, " << refusals << " refusals");
  // The runs did exercise reads and refusals (stale generations, revoked partitions, expired members).
  BOOST_TEST(deliveries > 100u);
  BOOST_TEST(refusals > 10u);
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_group_history) {
  const auto a = run(11, 40);
  const auto b = run(11, 40);
  BOOST_TEST(a.deliveries == b.deliveries);
  BOOST_TEST(a.steps == b.steps);
  const auto c = run(12, 40);
  BOOST_TEST((a.deliveries != c.deliveries));
}
