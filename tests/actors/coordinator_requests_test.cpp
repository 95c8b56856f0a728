// coordinator_requests: the group API of replicated topics over a group_machine, as rilld runs it (metadata view ->
// plan -> command committed -> API reply), without the cluster.
#include "actors/coordinator_requests.h"

#include <boost/test/unit_test.hpp>

#include "net/frame.h"
#include "net/status.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {

std::uint16_t wire(net::api a) {
  return static_cast<std::uint16_t>(a);
}

consensus::header prepared() {
  consensus::header h;
  h.cmd = consensus::command::prepare;
  h.operation = operation_coordinator_command;
  return h;
}

// A view with stream 0, topic 0 (6 partitions, replication factor 3) and group 0 "g".
metadata_view view_with_group(std::uint32_t partitions = 6, bool replicated = true) {
  metadata_view v;
  stream_meta s;
  s.name = "s";
  topic_meta t;
  t.name = "t";
  t.config.set_partitions(partitions);
  t.config.set_replication_factor(replicated ? 3 : 1);
  group_meta g;
  g.name = "g";
  g.config.set_session_timeout_ms(10'000);
  t.groups.emplace(0, g);
  s.topics.emplace(0, t);
  v.streams.emplace(0, s);
  return v;
}

struct coordinator {
  explicit coordinator(group_machine_options o = {}) : m(o, [this] { return clock_ms; }) {}
  std::int64_t clock_ms = 1'000;
  group_machine m;
  proto::CoordinatorReply run(const proto::CoordinatorCommand& c) {
    const auto p = m.prepare(prepared(), {}, group_machine::encode(c), {});
    auto r = group_machine::decode_reply(m.apply(prepared(), p.body));
    BOOST_REQUIRE(r.has_value());
    return *r;
  }
  // A request as a node takes it: planned, committed, answered (or refused, with the status the client sees).
  expected<std::string> request(const coordinated_group& g, net::api api, const google::protobuf::MessageLite& h,
                                std::uint64_t conn = connection_key(1, 7)) {
    RILL_TRY(plan, plan_coordinator_request(g, m.find(g.key()), wire(api), h.SerializeAsString(), conn));
    if (!plan.command) {
      return plan.header;
    }
    return coordinator_reply(g, wire(api), run(*plan.command));
  }
  // Member `id` joins through the API; its reply.
  proto::GroupJoinReply join(const coordinated_group& g, const std::string& id) {
    proto::GroupJoinRequest req;
    req.set_member_id(id);
    auto joined = request(g, net::api::group_join, req);
    RILL_REQUIRE_OK(joined);
    proto::GroupJoinReply out;
    BOOST_REQUIRE(out.ParseFromString(*joined));
    return out;
  }
};

net::status status_of(const rill::error& e) {
  return static_cast<net::status>(e.code().value());
}

}  // namespace

BOOST_AUTO_TEST_CASE(reconcile_creates_resizes_and_removes_to_match_the_metadata) {
  coordinator c;
  auto v = view_with_group();
  auto g = find_coordinated_group(v, 0, 0, 0);
  BOOST_REQUIRE(g.has_value());
  const std::uint32_t index = coordinator_for(g->key(), 4);
  // Another coordinator is asked for nothing; this one creates the group.
  BOOST_TEST(reconcile_commands(v, c.m, (index + 1) % 4, 4, 64).empty());
  auto todo = reconcile_commands(v, c.m, index, 4, 64);
  BOOST_REQUIRE(todo.size() == 1u);
  BOOST_TEST(todo[0].has_create());
  BOOST_TEST(c.run(todo[0]).status() == 0u);
  BOOST_TEST(c.m.find(g->key())->partitions() == 6u);
  BOOST_TEST(reconcile_commands(v, c.m, index, 4, 64).empty(), "nothing left to do");
  // The topic grows: resize.
  auto grown = view_with_group(9);
  todo = reconcile_commands(grown, c.m, index, 4, 64);
  BOOST_REQUIRE(todo.size() == 1u);
  BOOST_TEST(todo[0].has_resize());
  (void)c.run(todo[0]);
  BOOST_TEST(c.m.find(g->key())->partitions() == 9u);
  // The group is deleted: remove.
  metadata_view gone = grown;
  gone.streams[0].topics[0].groups.clear();
  todo = reconcile_commands(gone, c.m, index, 4, 64);
  BOOST_REQUIRE(todo.size() == 1u);
  BOOST_TEST(todo[0].has_remove());
  (void)c.run(todo[0]);
  BOOST_TEST(c.m.find(g->key()) == nullptr);
  // A topic that is not replicated has no coordinated groups.
  BOOST_TEST(!find_coordinated_group(view_with_group(6, false), 0, 0, 0).has_value());
}

BOOST_AUTO_TEST_CASE(a_group_deleted_and_created_again_starts_without_the_old_ones_offsets) {
  coordinator c;
  auto v = view_with_group();
  auto old = find_coordinated_group(v, 0, 0, 0);
  BOOST_REQUIRE(old.has_value());
  const std::uint32_t index = coordinator_for(old->key(), 4);
  for (const auto& cmd : reconcile_commands(v, c.m, index, 4, 64)) {
    BOOST_TEST(c.run(cmd).status() == 0u);
  }
  proto::CoordinatorCommand reset;  // (an administrator's reset: the group has no members yet)
  reset.set_group("g");
  auto* po = reset.mutable_reset()->add_offsets();
  po->set_partition(2);
  po->set_offset(40);
  BOOST_TEST(c.run(reset).status() == 0u);
  BOOST_TEST((c.m.find(old->key())->committed(2) == std::optional<std::uint64_t>(40)));
  (void)c.join(*old, "a");
  BOOST_TEST(c.m.find(old->key())->incarnation() == 0u);
  // Deleted and created again under its name: the metadata gives it another id (group 1), before the coordinator
  // removed the old one.
  metadata_view again = v;
  auto& groups = again.streams[0].topics[0].groups;
  groups.emplace(1, groups.at(0));
  groups.erase(0);
  auto fresh = find_coordinated_group(again, 0, 0, 1);
  BOOST_REQUIRE(fresh.has_value());
  BOOST_TEST((fresh->key() == old->key()), "one name, one key");
  BOOST_TEST(coordinated_state(c.m, *fresh) == nullptr, "the old incarnation is not the new group's state");
  BOOST_TEST(coordinated_state(c.m, *old) != nullptr);
  // A remove of another incarnation removes nothing (a node late with the old one's removal).
  BOOST_TEST((static_cast<net::status>(c.run(remove_command(old->key(), 1)).status()) == net::status::group_not_found));
  BOOST_TEST(c.m.find(old->key()) != nullptr);
  // The reconcile replaces it: remove the old incarnation, create the new one, with nothing committed.
  auto todo = reconcile_commands(again, c.m, index, 4, 64);
  BOOST_REQUIRE(todo.size() == 2u);
  BOOST_TEST(todo[0].has_remove());
  BOOST_TEST(todo[1].has_create());
  for (const auto& cmd : todo) {
    BOOST_TEST(c.run(cmd).status() == 0u);
  }
  const group_state* now = coordinated_state(c.m, *fresh);
  BOOST_REQUIRE(now != nullptr);
  BOOST_TEST(now->incarnation() == 1u);
  BOOST_TEST(!now->committed(2).has_value());
  BOOST_TEST(now->members() == 0u);
  BOOST_TEST(reconcile_commands(again, c.m, index, 4, 64).empty());
  // The incarnation survives a checkpoint.
  coordinator restored;
  BOOST_REQUIRE(restored.m.restore(c.m.snapshot()));
  BOOST_TEST(restored.m.find(fresh->key())->incarnation() == 1u);
}

BOOST_AUTO_TEST_CASE(join_heartbeat_commit_and_reads_through_the_coordinator) {
  coordinator c;
  auto v = view_with_group();
  auto g = *find_coordinated_group(v, 0, 0, 0);
  (void)c.run(create_command(g));
  const auto jr = c.join(g, "m1");
  BOOST_TEST(jr.member_id() == "m1");
  BOOST_TEST(jr.partitions() == 6u);
  BOOST_TEST(jr.session_timeout_ms() == 10'000u);
  proto::GroupHeartbeatRequest beat;
  beat.set_member_id("m1");
  auto beaten = c.request(g, net::api::group_heartbeat, beat);
  RILL_REQUIRE_OK(beaten);
  proto::GroupAssignment a;
  BOOST_REQUIRE(a.ParseFromString(*beaten));
  BOOST_TEST(a.owned_size() == 6);
  // A commit by the owner lands; the read sees it; a commit below it is refused with its own status.
  proto::GroupCommitRequest commit;
  commit.mutable_member()->set_member_id("m1");
  commit.mutable_member()->set_generation(a.generation());
  auto* o = commit.add_offsets();
  o->set_partition_id(2);
  o->set_offset(40);
  RILL_REQUIRE_OK(c.request(g, net::api::group_commit, commit));
  proto::OffsetGetRequest get;
  get.set_partition_id(2);
  auto got = c.request(g, net::api::offset_get, get);
  RILL_REQUIRE_OK(got);
  proto::OffsetGetReply gr;
  BOOST_REQUIRE(gr.ParseFromString(*got));
  BOOST_TEST(gr.offset() == 40u);
  o->set_offset(10);
  auto back = c.request(g, net::api::group_commit, commit);
  BOOST_REQUIRE(!back.has_value());
  BOOST_TEST(status_of(back.error()) == net::status::offset_regression);
  // A second member joins: a stale generation's commit (a zombie's) is refused, and nothing moves.
  (void)c.join(g, "m2");
  o->set_offset(50);
  auto zombie = c.request(g, net::api::group_commit, commit);
  BOOST_REQUIRE(!zombie.has_value());
  BOOST_TEST(status_of(zombie.error()) == net::status::stale_generation);
  BOOST_TEST(*c.m.find(g.key())->committed(2) == 40u);
  // An empty commit is refused before it reaches the coordinator; an unknown API too.
  proto::GroupCommitRequest empty;
  empty.mutable_member()->set_member_id("m1");
  auto none =
      plan_coordinator_request(g, c.m.find(g.key()), wire(net::api::group_commit), empty.SerializeAsString(), 1);
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST(status_of(none.error()) == net::status::bad_header);
  BOOST_TEST(!plan_coordinator_request(g, nullptr, wire(net::api::produce), "", 1).has_value());
  // The connection of m1 and m2 closes on node 1: both leave; the same connection number on node 2 removes nobody.
  proto::CoordinatorCommand other;
  other.mutable_disconnected()->set_conn(connection_key(2, 7));
  BOOST_TEST(c.run(other).removed_size() == 0);
  proto::CoordinatorCommand closed;
  closed.mutable_disconnected()->set_conn(connection_key(1, 7));
  BOOST_TEST(c.run(closed).removed_size() == 2);
}

BOOST_AUTO_TEST_CASE(reads_are_named_for_their_barrier_and_commands_are_not) {
  for (auto a : {net::api::group_assignment, net::api::offset_get, net::api::group_get, net::api::group_offsets}) {
    BOOST_TEST(is_coordinator_read(static_cast<std::uint16_t>(a)));
  }
  for (auto a : {net::api::group_join, net::api::group_heartbeat, net::api::group_leave, net::api::group_commit,
                 net::api::offset_store, net::api::produce}) {
    BOOST_TEST(!is_coordinator_read(static_cast<std::uint16_t>(a)));
  }
}

BOOST_AUTO_TEST_CASE(a_poll_is_checked_against_the_replica) {
  coordinator c;
  auto g = *find_coordinated_group(view_with_group(), 0, 0, 0);
  proto::PollRequest poll;
  poll.set_partition_id(1);
  poll.mutable_member()->set_member_id("m1");
  poll.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  // No group here yet (its creation committed through another node, not yet applied): refused, to be retried.
  auto early = plan_coordinated_poll(c.m.find(g.key()), poll);
  BOOST_REQUIRE(!early.has_value());
  BOOST_TEST(status_of(early.error()) == net::status::unknown_member);
  (void)c.run(create_command(g));
  poll.mutable_member()->set_generation(c.join(g, "m1").generation());
  auto planned = plan_coordinated_poll(c.m.find(g.key()), poll);
  RILL_REQUIRE_OK(planned);
  BOOST_TEST(planned->request.strategy().kind() == proto::PollStrategy::FIRST, "no committed offset: from the start");
}

// Issue 38 (found by rill-sim --node, planted as group_offsets_survive): a partition deleted and added back keeps
// its id and the topic its count, so a coordinator that knew partitions by count kept the old partition's committed
// offset and owner, and the group skipped the new partition's records up to it.
BOOST_AUTO_TEST_CASE(a_partition_deleted_and_added_back_starts_without_the_old_ones_offset) {
  for (const bool planted : {false, true}) {
    group_machine_options o;
    o.bug_offsets_survive_partition = planted;
    coordinator c(o);
    auto v = view_with_group(3);
    v.streams[0].topics[0].partitions_created = {5, 5, 5};
    auto g = find_coordinated_group(v, 0, 0, 0);
    BOOST_REQUIRE(g.has_value());
    BOOST_TEST((g->partitions_created == std::vector<std::uint64_t>{5, 5, 5}));
    const std::uint32_t index = coordinator_for(g->key(), 4);
    for (const auto& cmd : reconcile_commands(v, c.m, index, 4, 64)) {
      BOOST_TEST(c.run(cmd).status() == 0u);
    }
    const auto joined = c.join(*g, "a");
    proto::GroupHeartbeatRequest beat;
    beat.set_member_id("a");
    RILL_REQUIRE_OK(c.request(*g, net::api::group_heartbeat, beat));
    const std::uint64_t generation = c.m.find(g->key())->generation();
    BOOST_TEST(c.run(commit_command(*g, "a", generation, 2, 13)).status() == 0u);
    BOOST_TEST(c.run(commit_command(*g, "a", generation, 1, 7)).status() == 0u);
    // Partition 2 deleted and added back (op 9) before the coordinator saw the topic shrink: the count is the same.
    auto back = v;
    back.streams[0].topics[0].partitions_created = {5, 5, 9};
    auto again = find_coordinated_group(back, 0, 0, 0);
    BOOST_REQUIRE(again.has_value());
    BOOST_TEST(!partitions_match(*c.m.find(g->key()), *again));
    auto todo = reconcile_commands(back, c.m, index, 4, 64);
    BOOST_REQUIRE(todo.size() == 1u);
    BOOST_REQUIRE(todo[0].has_resize());
    BOOST_TEST(c.run(todo[0]).status() == 0u);
    const group_state* now = coordinated_state(c.m, *again);
    BOOST_REQUIRE(now != nullptr);
    BOOST_TEST(partitions_match(*now, *again));
    BOOST_TEST(reconcile_commands(back, c.m, index, 4, 64).empty());
    BOOST_TEST((now->committed(1) == std::optional<std::uint64_t>(7)), "partition 1 is the same partition");
    if (planted) {
      BOOST_TEST((now->committed(2) == std::optional<std::uint64_t>(13)), "the planted bug keeps the old offset");
      continue;
    }
    BOOST_TEST(!now->committed(2).has_value(), "the new partition 2 starts without the old one's offset");
    BOOST_TEST(now->generation() > generation, "a new generation: no read of the old partition 2 goes on");
    BOOST_TEST(!now->still_owns("a", generation, 2));
    BOOST_TEST(now->still_owns("a", generation, 1));
    now->check_invariants();
    // Kept through a checkpoint; a state from before incarnations were kept (none) adopts them without a loss.
    coordinator restored;
    BOOST_REQUIRE(restored.m.restore(c.m.snapshot()));
    BOOST_TEST((restored.m.find(g->key())->partitions_created() == std::vector<std::uint64_t>{5, 5, 9}));
    (void)joined;
  }
}

BOOST_AUTO_TEST_CASE(a_group_state_without_partition_incarnations_adopts_them_keeping_its_offsets) {
  group_state s(2, assignment_strategy::range, std::chrono::milliseconds(10'000));
  BOOST_TEST((s.partitions_created() == std::vector<std::uint64_t>{0, 0}));
  auto joined = s.join(std::nullopt, group_state::time_point(std::chrono::seconds(1)));
  BOOST_REQUIRE(joined.has_value());
  BOOST_REQUIRE(s.commit(joined->member_id, s.generation(), 0, 11).has_value());
  const std::uint64_t created[] = {4, 4};
  s.resize(2, created);
  BOOST_TEST((s.committed(0) == std::optional<std::uint64_t>(11)), "unknown (0) is adopted, not a replacement");
  BOOST_TEST((s.partitions_created() == std::vector<std::uint64_t>{4, 4}));
  s.check_invariants();
}
