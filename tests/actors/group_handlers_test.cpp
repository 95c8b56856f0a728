// group_handlers: every consumer-group API's decisions without CAF (join, leave, heartbeat, assignment, commit,
// offset get and store, group get and offsets; their errors), what a member's poll asks of the partition and what
// its delivery does, the group's answers to disconnects, expiries and resizes, its description, and the state file.
#include <boost/test/unit_test.hpp>

#include "actors/group_handlers.h"
#include "net/frame.h"
#include "net/status.h"
#include "storage/atomic_file.h"
#include "storage/file_ops.h"
#include "tests/storage/log_fixture.h"
#include "tests/storage/replace_crash.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;
using namespace std::chrono_literals;

namespace {

using tp = group_state::time_point;

group_identity identity(std::uint32_t partitions = 4) {
  group_identity id;
  id.stream_id = 1;
  id.topic_id = 2;
  id.group_id = 3;
  id.name = "audit";
  id.created_ms = 77;
  id.config.set_strategy(proto::ASSIGNMENT_RANGE);
  id.config.set_session_timeout_ms(10'000);
  id.partitions = partitions;
  id.dir = "/data/groups/1/2/3";
  return id;
}

net::status status_of(const group_decision& d) {
  return d.error ? status_of_group(d.error->code()) : net::status::ok;
}

struct harness {
  group_identity id = identity();
  group_state state = fresh_group_state(id);
  tp now{1'000'000'000};

  group_decision request(net::api api, const google::protobuf::MessageLite& req, std::uint64_t conn = 1) {
    auto d = decide_group_request(state, id, static_cast<std::uint16_t>(api), req.SerializeAsString(), now, conn);
    state.check_invariants();
    if (d.error) {
      BOOST_TEST(d.header.empty());
      BOOST_TEST(!d.changed);
      BOOST_TEST(!d.sessions);
    }
    return d;
  }
  proto::GroupJoinReply join(const std::string& member = {}, std::uint64_t conn = 1) {
    proto::GroupJoinRequest req;
    if (!member.empty()) {
      req.set_member_id(member);
    }
    auto d = request(net::api::group_join, req, conn);
    BOOST_REQUIRE(!d.error);
    proto::GroupJoinReply r;
    BOOST_REQUIRE(r.ParseFromString(d.header));
    return r;
  }
  proto::GroupAssignment heartbeat(const std::string& member, std::vector<std::uint32_t> released = {}) {
    proto::GroupHeartbeatRequest req;
    req.set_member_id(member);
    for (auto p : released) {
      req.add_released(p);
    }
    auto d = request(net::api::group_heartbeat, req);
    BOOST_REQUIRE(!d.error);
    proto::GroupAssignment r;
    BOOST_REQUIRE(r.ParseFromString(d.header));
    return r;
  }
  group_decision commit(const std::string& member, std::uint64_t generation,
                        std::vector<std::pair<std::uint32_t, std::uint64_t>> offsets) {
    proto::GroupCommitRequest req;
    req.mutable_member()->set_member_id(member);
    req.mutable_member()->set_generation(generation);
    for (auto [p, o] : offsets) {
      auto* po = req.add_offsets();
      po->set_partition_id(p);
      po->set_offset(o);
    }
    return request(net::api::group_commit, req);
  }
};

proto::PollRequest poll_request(const std::string& member, std::uint64_t generation, std::uint32_t partition,
                                proto::PollStrategy::Kind kind = proto::PollStrategy::NEXT, bool auto_commit = false) {
  proto::PollRequest req;
  req.mutable_member()->set_member_id(member);
  req.mutable_member()->set_generation(generation);
  req.set_partition_id(partition);
  req.mutable_strategy()->set_kind(kind);
  req.set_auto_commit(auto_commit);
  return req;
}

}  // namespace

BOOST_AUTO_TEST_CASE(group_errors_map_to_reply_statuses) {
  BOOST_TEST((status_of_group(make_error_code(group_errc::unknown_member)) == net::status::unknown_member));
  BOOST_TEST((status_of_group(make_error_code(group_errc::stale_generation)) == net::status::stale_generation));
  BOOST_TEST((status_of_group(make_error_code(group_errc::not_owner)) == net::status::not_owner));
  BOOST_TEST((status_of_group(make_error_code(group_errc::bad_partition)) == net::status::partition_not_found));
  BOOST_TEST((status_of_group(make_error_code(group_errc::offset_regression)) == net::status::offset_regression));
  BOOST_TEST((status_of_group(make_error_code(group_errc::group_full)) == net::status::group_full));
  BOOST_TEST((status_of_group(make_error_code(group_errc::not_empty)) == net::status::group_not_empty));
  BOOST_TEST((status_of_group(make_error_code(net::status::bad_header)) == net::status::bad_header));
  BOOST_TEST(group_dir("/data", 1, 2, 3) == "/data/groups/1/2/3");
}

BOOST_AUTO_TEST_CASE(join_changes_the_group_a_rejoin_only_the_session) {
  harness h;
  proto::GroupJoinRequest req;
  auto d = h.request(net::api::group_join, req);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(d.changed);
  BOOST_TEST(!d.sessions);
  BOOST_TEST(!d.describe);
  proto::GroupJoinReply r;
  BOOST_REQUIRE(r.ParseFromString(d.header));
  BOOST_TEST(r.member_id() == "member-1");
  BOOST_TEST(r.generation() == h.state.generation());
  BOOST_TEST(r.session_timeout_ms() == 10'000u);
  BOOST_TEST(r.partitions() == 4u);

  // A live member rejoining as itself: nothing moves, only its session is renewed.
  req.set_member_id("member-1");
  const auto generation = h.state.generation();
  d = h.request(net::api::group_join, req);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(!d.changed);
  BOOST_TEST(d.sessions);
  BOOST_TEST(h.state.generation() == generation);

  // Errors: a member id that is not a name, a header that does not parse.
  req.set_member_id("no spaces");
  BOOST_TEST((status_of(h.request(net::api::group_join, req)) == net::status::invalid_name));
  auto bad = decide_group_request(h.state, h.id, static_cast<std::uint16_t>(net::api::group_join), "\xff\xff", h.now, 1);
  BOOST_TEST((status_of(bad) == net::status::bad_header));
  BOOST_TEST(h.state.members() == 1u);
}

BOOST_AUTO_TEST_CASE(leave_heartbeat_and_assignment) {
  harness h;
  const auto a = h.join("a").member_id();
  const auto b = h.join("b").member_id();
  // b joined while a owned everything: a is revoking half, and its release moves them (a change).
  auto hb = h.heartbeat(a);
  BOOST_TEST(hb.owned_size() == 4);
  BOOST_TEST(hb.revoking_size() == 2);
  BOOST_TEST(hb.partitions() == 4u);
  proto::GroupHeartbeatRequest beat;
  beat.set_member_id(a);
  for (auto p : hb.revoking()) {
    beat.add_released(p);
  }
  auto d = h.request(net::api::group_heartbeat, beat);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(d.changed);
  proto::GroupAssignment after;
  BOOST_REQUIRE(after.ParseFromString(d.header));
  BOOST_TEST(after.owned_size() == 2);
  BOOST_TEST(after.revoking_size() == 0);
  // A plain heartbeat: only the session.
  d = h.request(net::api::group_heartbeat, beat);
  BOOST_TEST(!d.changed);
  BOOST_TEST(d.sessions);

  proto::GroupAssignmentRequest asg;
  asg.set_member_id(b);
  d = h.request(net::api::group_assignment, asg);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(!d.changed);
  BOOST_TEST(!d.sessions);
  proto::GroupAssignment ar;
  BOOST_REQUIRE(ar.ParseFromString(d.header));
  BOOST_TEST(ar.owned_size() == 2);
  BOOST_TEST(ar.generation() == h.state.generation());

  proto::GroupLeaveRequest leave;
  leave.set_member_id(b);
  d = h.request(net::api::group_leave, leave);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(d.changed);
  BOOST_TEST((status_of(h.request(net::api::group_leave, leave)) == net::status::unknown_member));
  beat.set_member_id(b);
  BOOST_TEST((status_of(h.request(net::api::group_heartbeat, beat)) == net::status::unknown_member));
  BOOST_TEST((status_of(h.request(net::api::group_assignment, asg)) == net::status::unknown_member));
}

BOOST_AUTO_TEST_CASE(commits_are_all_or_nothing_and_never_go_back) {
  harness h;
  const auto a = h.join("a").member_id();
  const auto g = h.state.generation();
  auto d = h.commit(a, g, {{0, 10}, {1, 20}});
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(d.changed);
  BOOST_TEST((h.state.committed(0) == std::optional<std::uint64_t>(10)));
  // The same offsets again: nothing moved.
  d = h.commit(a, g, {{0, 10}});
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(!d.changed);
  // One bad offset refuses all of them.
  BOOST_TEST((status_of(h.commit(a, g, {{1, 30}, {0, 5}})) == net::status::offset_regression));
  BOOST_TEST((h.state.committed(1) == std::optional<std::uint64_t>(20)));
  // A partition named twice: its last offset, which may not be below the one before it.
  BOOST_TEST((status_of(h.commit(a, g, {{2, 9}, {2, 8}})) == net::status::offset_regression));
  d = h.commit(a, g, {{2, 8}, {2, 9}});
  BOOST_REQUIRE(!d.error);
  BOOST_TEST((h.state.committed(2) == std::optional<std::uint64_t>(9)));
  BOOST_TEST((status_of(h.commit(a, g + 1, {{0, 11}})) == net::status::stale_generation));
  BOOST_TEST((status_of(h.commit("x", g, {{0, 11}})) == net::status::unknown_member));
  BOOST_TEST((status_of(h.commit(a, g, {{9, 11}})) == net::status::partition_not_found));
  const auto b = h.join("b").member_id();
  h.heartbeat(a, {2, 3});  // a gives two to b
  BOOST_TEST((status_of(h.commit(a, h.state.generation(), {{3, 1}})) == net::status::not_owner));
  (void)b;
}

BOOST_AUTO_TEST_CASE(offsets_are_read_and_reset_only_while_the_group_is_empty) {
  harness h;
  proto::OffsetGetRequest get;
  get.set_partition_id(1);
  auto d = h.request(net::api::offset_get, get);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(!d.changed);
  proto::OffsetGetReply gr;
  BOOST_REQUIRE(gr.ParseFromString(d.header));
  BOOST_TEST(!gr.has_offset());
  get.set_partition_id(4);
  BOOST_TEST((status_of(h.request(net::api::offset_get, get)) == net::status::partition_not_found));

  proto::OffsetStoreRequest store;
  store.set_partition_id(1);
  store.set_offset(42);
  d = h.request(net::api::offset_store, store);
  BOOST_REQUIRE(!d.error);
  BOOST_TEST(d.changed);
  BOOST_REQUIRE(d.notice.has_value());
  BOOST_TEST(*d.notice == "group 'audit' partition 1: offset reset from none to 42");
  proto::OffsetStoreReply sr;
  BOOST_REQUIRE(sr.ParseFromString(d.header));
  BOOST_TEST(!sr.has_previous());
  store.set_offset(7);  // backwards too
  d = h.request(net::api::offset_store, store);
  BOOST_REQUIRE(sr.ParseFromString(d.header));
  BOOST_TEST(sr.previous() == 42u);
  BOOST_TEST(*d.notice == "group 'audit' partition 1: offset reset from 42 to 7");
  get.set_partition_id(1);
  BOOST_REQUIRE(gr.ParseFromString(h.request(net::api::offset_get, get).header));
  BOOST_TEST(gr.offset() == 7u);

  store.set_partition_id(4);
  BOOST_TEST((status_of(h.request(net::api::offset_store, store)) == net::status::partition_not_found));
  h.join("a");
  store.set_partition_id(1);
  d = h.request(net::api::offset_store, store);
  BOOST_TEST((status_of(d) == net::status::group_not_empty));
  BOOST_TEST(!d.notice.has_value());
}

BOOST_AUTO_TEST_CASE(get_and_offsets_describe_the_group_and_other_apis_are_refused) {
  harness h;
  auto d = h.request(net::api::group_get, proto::GroupGetRequest{});
  BOOST_TEST(d.describe);
  BOOST_TEST(!d.offsets_only);
  BOOST_TEST(!d.changed);
  d = h.request(net::api::group_offsets, proto::GroupOffsetsRequest{});
  BOOST_TEST(d.describe);
  BOOST_TEST(d.offsets_only);
  BOOST_TEST((status_of(h.request(net::api::produce, proto::GroupGetRequest{})) == net::status::unknown_api));
  auto unknown = decide_group_request(h.state, h.id, 9999, "", h.now, 1);
  BOOST_TEST((status_of(unknown) == net::status::unknown_api));
}

BOOST_AUTO_TEST_CASE(the_description_shows_members_owners_offsets_and_lag) {
  harness h;
  h.join("a");
  h.commit("a", h.state.generation(), {{0, 5}});
  h.now += 4s;
  auto info = describe_group(h.id, &h.state, h.now);
  BOOST_TEST(info.stream_id() == 1u);
  BOOST_TEST(info.topic_id() == 2u);
  BOOST_TEST(info.id() == 3u);
  BOOST_TEST(info.name() == "audit");
  BOOST_TEST(info.created_ms() == 77u);
  BOOST_TEST(info.session_timeout_ms() == 10'000u);
  BOOST_TEST(info.generation() == h.state.generation());
  BOOST_TEST(info.stable());
  BOOST_REQUIRE(info.members_size() == 1);
  BOOST_TEST(info.members(0).member_id() == "a");
  BOOST_TEST(info.members(0).owned_size() == 4);
  BOOST_TEST(info.members(0).session_left_ms() == 6'000u);
  BOOST_TEST(info.partitions_size() == 0);
  proto::PartitionInfo p0;
  p0.set_log_start(2);
  p0.set_high_watermark(12);
  describe_partition(info, h.state, 0, &p0);
  describe_partition(info, h.state, 1, nullptr);
  BOOST_REQUIRE(info.partitions_size() == 2);
  BOOST_TEST(info.partitions(0).owner() == "a");
  BOOST_TEST(info.partitions(0).target() == "a");
  BOOST_TEST(info.partitions(0).committed() == 5u);
  BOOST_TEST(info.partitions(0).lag() == 7u);
  BOOST_TEST(info.partitions(0).high_watermark() == 12u);
  BOOST_TEST(!info.partitions(1).has_committed());
  BOOST_TEST(info.partitions(1).lag() == 0u);

  proto::GroupOffsetsReply offsets;
  BOOST_REQUIRE(offsets.ParseFromString(describe_reply(true, info)));
  BOOST_TEST(offsets.partitions_size() == 2);
  proto::GroupGetReply got;
  BOOST_REQUIRE(got.ParseFromString(describe_reply(false, info)));
  BOOST_TEST(got.group().name() == "audit");
  BOOST_TEST(got.group().partitions_size() == 2);

  // A group that is not open: its identity only.
  auto closed = describe_group(h.id, nullptr, h.now);
  BOOST_TEST(closed.name() == "audit");
  BOOST_TEST(closed.members_size() == 0);
}

BOOST_AUTO_TEST_CASE(a_poll_resolves_next_and_is_checked_again_at_delivery) {
  harness h;
  h.join("a");
  const auto g = h.state.generation();
  // NEXT without a committed offset: from the partition's first.
  auto p = plan_group_poll(h.state, poll_request("a", g, 0, proto::PollStrategy::NEXT, true));
  RILL_REQUIRE_OK(p);
  BOOST_TEST((p->request.strategy().kind() == proto::PollStrategy::FIRST));
  BOOST_TEST(!p->resume_at.has_value());
  BOOST_TEST(p->auto_commit);
  BOOST_TEST(!p->request.auto_commit());  // the group commits its own
  BOOST_TEST(p->member == "a");
  BOOST_TEST(p->partition == 0u);
  BOOST_TEST(p->generation == g);
  // With one: resume there.
  h.commit("a", g, {{0, 30}});
  p = plan_group_poll(h.state, poll_request("a", g, 0));
  RILL_REQUIRE_OK(p);
  BOOST_TEST((p->request.strategy().kind() == proto::PollStrategy::NEXT));
  BOOST_TEST((p->resume_at == std::optional<std::int64_t>(30)));
  // Other strategies pass as they are.
  p = plan_group_poll(h.state, poll_request("a", g, 0, proto::PollStrategy::FIRST));
  RILL_REQUIRE_OK(p);
  BOOST_TEST(!p->resume_at.has_value());

  BOOST_TEST((status_of_group(plan_group_poll(h.state, poll_request("x", g, 0)).error().code()) ==
              net::status::unknown_member));
  BOOST_TEST((status_of_group(plan_group_poll(h.state, poll_request("a", g + 1, 0)).error().code()) ==
              net::status::stale_generation));
  BOOST_TEST((status_of_group(plan_group_poll(h.state, poll_request("a", g, 7)).error().code()) ==
              net::status::partition_not_found));

  // Auto-commit at delivery: only when ahead of the group.
  auto ac = plan_group_poll(h.state, poll_request("a", g, 0, proto::PollStrategy::NEXT, true));
  RILL_REQUIRE_OK(ac);
  RILL_REQUIRE_OK(check_delivery(h.state, *ac));
  auto c = commit_delivered(h.state, *ac, 30);
  BOOST_TEST(!c.changed);
  BOOST_TEST(!c.wait);
  c = commit_delivered(h.state, *ac, 45);
  BOOST_TEST(c.changed);
  BOOST_TEST(c.wait);
  BOOST_TEST((h.state.committed(0) == std::optional<std::uint64_t>(45)));
  c = commit_delivered(h.state, *p, 50);  // not an auto-commit poll
  BOOST_TEST(!c.changed);
  BOOST_TEST(!c.wait);

  // The partition changed hands while the poll waited: refused at delivery.
  h.join("b");
  h.heartbeat("a", {2, 3});
  auto moved = plan_group_poll(h.state, poll_request("a", h.state.generation(), 1));
  RILL_REQUIRE_OK(moved);
  auto parked = plan_group_poll(h.state, poll_request("a", h.state.generation(), 0));
  RILL_REQUIRE_OK(parked);
  proto::GroupLeaveRequest leave;
  leave.set_member_id("a");
  h.request(net::api::group_leave, leave);
  auto refused = check_delivery(h.state, *parked);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((net::status_of(refused.error().code()) == net::status::not_owner));
}

BOOST_AUTO_TEST_CASE(disconnects_expiries_and_resizes_change_the_group) {
  harness h;
  h.join("a", 7);
  h.join("b", 8);
  BOOST_TEST(!on_disconnect(h.state, h.now, 9));
  BOOST_TEST(on_disconnect(h.state, h.now, 8));
  BOOST_TEST(h.state.members() == 1u);
  BOOST_TEST(!on_expire(h.state, h.now + 1s));
  BOOST_TEST(on_expire(h.state, h.now + 11s));
  BOOST_TEST(h.state.members() == 0u);
  BOOST_TEST(!on_resize(h.state, h.now, 4));
  BOOST_TEST(on_resize(h.state, h.now, 6));
  BOOST_TEST(h.state.partitions() == 6u);
  h.state.check_invariants();
}

BOOST_AUTO_TEST_CASE(the_state_file_round_trips_and_a_damaged_one_does_not_verify) {
  harness h;
  h.join("a");
  h.commit("a", h.state.generation(), {{1, 9}});
  const auto bytes = encode_state_file(h.state);
  auto back = decode_state_file(bytes, h.id, h.now);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->members() == 1u);
  BOOST_TEST((back->committed(1) == std::optional<std::uint64_t>(9)));
  BOOST_TEST(back->generation() == h.state.generation());
  auto damaged = bytes;
  damaged[0] ^= std::byte{1};
  BOOST_TEST(!decode_state_file(damaged, h.id, h.now).has_value());
  BOOST_TEST(!decode_state_file(std::span(bytes).first(3), h.id, h.now).has_value());
  auto fresh = fresh_group_state(h.id);
  BOOST_TEST(fresh.members() == 0u);
  BOOST_TEST(fresh.partitions() == 4u);
}

BOOST_AUTO_TEST_CASE(the_state_file_is_old_or_new_after_a_crash_at_any_step_of_its_replacement) {
  // group_actor::persist replaces <group dir>/state with write_file_atomic at every change (its load reads it back
  // with read_whole_file and decode_state_file): the same calls, on the simulated disk, crashed at every step.
  harness h;
  h.join("a");
  BOOST_REQUIRE(!h.commit("a", h.state.generation(), {{1, 9}}).error);
  const auto old_content = encode_state_file(h.state);
  BOOST_REQUIRE(!h.commit("a", h.state.generation(), {{1, 20}, {2, 4}}).error);
  const auto new_content = encode_state_file(h.state);
  const std::string path = storage::join_path(h.id.dir, group_state_file_name);
  storage::testing::crash_at_every_step_of_a_replacement(
      [&](std::uint64_t seed, const simulation::sim_disk_faults& faults, std::optional<std::uint64_t> stop_after) {
        using storage::testing::run;
        simulation::sim_disk disk(seed, faults);
        RILL_REQUIRE_OK(run(disk, storage::make_dirs(disk, h.id.dir)));
        RILL_REQUIRE_OK(run(disk, storage::write_file_atomic(disk, h.id.dir, group_state_file_name, old_content)));
        storage::testing::replacement_outcome o;
        const auto before = disk.mutating_ops();
        if (stop_after) {
          disk.fail_stop_after(*stop_after);
        }
        o.acknowledged =
            run(disk, storage::write_file_atomic(disk, h.id.dir, group_state_file_name, new_content)).has_value();
        o.mutating_ops = disk.mutating_ops() - before;
        if (!disk.stopped()) {
          disk.halt();
        }
        storage::io::run_until(disk, [] { return false; });
        disk.crash();
        auto bytes = run(disk, storage::read_whole_file(disk, path, 1 << 20));
        RILL_REQUIRE_OK(bytes);
        BOOST_REQUIRE_MESSAGE(bytes->has_value(), "the state file is gone");
        o.is_old = **bytes == old_content;
        o.is_new = **bytes == new_content;
        // What the group's load makes of it: a state that verifies, with the old offsets or the new ones.
        auto restored = decode_state_file(**bytes, h.id, h.now);
        BOOST_REQUIRE_MESSAGE(restored.has_value(), "the state file does not verify");
        BOOST_TEST((restored->committed(1) == std::optional<std::uint64_t>(o.is_new ? 20 : 9)));
        return o;
      });
}
