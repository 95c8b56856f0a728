// reconciler: the steps from what a node runs to what the committed metadata names. A start from nothing spawns
// everything; a pass cut short by a failure leaves exactly the rest to the next one; a node that fell behind (several
// commands, ids reused) destroys and removes the old incarnation before it spawns the new; the steps keep their order;
// a settings change reopens only that topic's partitions and a count change touches only what it adds or removes.
#include <boost/test/unit_test.hpp>

#include <fmt/core.h>

#include "actors/reconciler.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {

// Commands applied straight to a metadata_state (the handlers' checks are metadata_handlers_test's).
struct cluster_view {
  metadata_state state;
  std::uint64_t clock_ms = 1000;

  void run(proto::MetadataCommand cmd) {
    cmd.set_time_ms(clock_ms++);
    RILL_REQUIRE_OK(state.check(cmd));
    (void)state.apply(cmd);
  }
  void create_stream(const std::string& name) {
    proto::MetadataCommand c;
    c.mutable_create_stream()->set_name(name);
    run(c);
  }
  void create_topic(std::uint32_t stream, const std::string& name, std::uint32_t partitions,
                    std::uint64_t retention_ms = 0) {
    proto::MetadataCommand c;
    auto* t = c.mutable_create_topic();
    t->set_stream_id(stream);
    t->set_name(name);
    proto::TopicConfig requested;
    requested.set_partitions(partitions);
    requested.set_retention_ms(retention_ms);
    auto complete = complete_topic_config(requested, config::log_config{});
    RILL_REQUIRE_OK(complete);
    *t->mutable_config() = *complete;
    run(c);
  }
  void delete_topic(std::uint32_t stream, std::uint32_t topic) {
    proto::MetadataCommand c;
    c.mutable_delete_topic()->set_stream_id(stream);
    c.mutable_delete_topic()->set_topic_id(topic);
    run(c);
  }
  void delete_stream(std::uint32_t stream) {
    proto::MetadataCommand c;
    c.mutable_delete_stream()->set_stream_id(stream);
    run(c);
  }
  void create_group(std::uint32_t stream, std::uint32_t topic, const std::string& name) {
    proto::MetadataCommand c;
    auto* g = c.mutable_create_group();
    g->set_stream_id(stream);
    g->set_topic_id(topic);
    g->set_name(name);
    auto complete = complete_group_config(proto::GroupConfig{});
    RILL_REQUIRE_OK(complete);
    *g->mutable_config() = *complete;
    run(c);
  }
  void delete_group(std::uint32_t stream, std::uint32_t topic, std::uint32_t group) {
    proto::MetadataCommand c;
    auto* g = c.mutable_delete_group();
    g->set_stream_id(stream);
    g->set_topic_id(topic);
    g->set_group_id(group);
    run(c);
  }
  void add_partitions(std::uint32_t stream, std::uint32_t topic, std::uint32_t count) {
    proto::MetadataCommand c;
    c.mutable_add_partitions()->set_stream_id(stream);
    c.mutable_add_partitions()->set_topic_id(topic);
    c.mutable_add_partitions()->set_count(count);
    run(c);
  }
  void delete_partitions(std::uint32_t stream, std::uint32_t topic, std::uint32_t count) {
    proto::MetadataCommand c;
    c.mutable_delete_partitions()->set_stream_id(stream);
    c.mutable_delete_partitions()->set_topic_id(topic);
    c.mutable_delete_partitions()->set_count(count);
    run(c);
  }
  void set_retention(std::uint32_t stream, std::uint32_t topic, std::uint64_t retention_ms) {
    proto::MetadataCommand c;
    auto* u = c.mutable_update_topic();
    u->set_stream_id(stream);
    u->set_topic_id(topic);
    u->mutable_config()->set_retention_ms(retention_ms);  // only the fields set change
    run(c);
  }
  // Creates and deletes topics in `stream` until the next topic created there gets id `id` again.
  void bring_topic_id_round(std::uint32_t stream, std::uint32_t id) {
    for (std::uint32_t i = 0; i < topic_ids_max && free_topic_id(state.view()->streams.at(stream)) != id; ++i) {
      const std::uint32_t next = *free_topic_id(state.view()->streams.at(stream));
      create_topic(stream, fmt::format("filler{}", i), 1);
      delete_topic(stream, next);
    }
    BOOST_REQUIRE(free_topic_id(state.view()->streams.at(stream)) == id);
  }
};

const config::log_config defaults{};
const std::string data_dir = "/data";

std::vector<reconcile_step> plan(const cluster_view& v, const node_inventory& running) {
  return plan_reconcile(*v.state.view(), running, defaults, data_dir);
}

// Runs every step, recording each; the plan for the result must be empty.
void carry_out(const cluster_view& v, node_inventory& running) {
  for (const auto& s : plan(v, running)) {
    record(running, s);
  }
  BOOST_TEST(plan(v, running).empty());
}

std::vector<std::string> described(const std::vector<reconcile_step>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) {
    out.push_back(s.describe());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_start_from_nothing_spawns_everything_the_view_names_and_then_nothing) {
  cluster_view v;
  v.create_stream("a");
  v.create_topic(0, "x", 3);
  v.create_topic(0, "y", 1);
  v.create_group(0, 0, "g");
  node_inventory running;
  const auto steps = plan(v, running);
  BOOST_TEST(
      described(steps) == (std::vector<std::string>{
                              "open partition 0 of topic 0 of stream 0", "open partition 1 of topic 0 of stream 0",
                              "open partition 2 of topic 0 of stream 0", "open partition 0 of topic 1 of stream 0",
                              "open group 0 of topic 0 of stream 0"}),
      boost::test_tools::per_element());
  BOOST_TEST(steps[4].partitions == 3u);
  carry_out(v, running);
  BOOST_TEST(running.partitions.size() == 4u);
  BOOST_TEST(running.groups.size() == 1u);
  BOOST_TEST(running.topics.size() == 2u);
  BOOST_TEST(running.streams.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_pass_cut_short_leaves_exactly_the_rest_to_the_next) {
  cluster_view v;
  v.create_stream("a");
  v.create_topic(0, "x", 4);
  v.create_group(0, 0, "g");
  node_inventory running;
  carry_out(v, running);
  v.delete_topic(0, 0);
  const auto all = plan(v, running);
  BOOST_REQUIRE(all.size() == 6u);  // four partitions, the group, the topic's data
  // The third step fails: the first two are recorded, and the next pass plans the last four, in the same order.
  record(running, all[0]);
  record(running, all[1]);
  const auto rest = plan(v, running);
  BOOST_TEST(described(rest) == described({all.begin() + 2, all.end()}), boost::test_tools::per_element());
  BOOST_TEST((rest.back().kind == reconcile_kind::remove_topic_data));
  carry_out(v, running);
  BOOST_TEST(running.partitions.empty());
  BOOST_TEST(running.topics.empty());
  BOOST_TEST(running.streams.size() == 1u);  // the stream lives on
}

BOOST_AUTO_TEST_CASE(a_node_behind_destroys_the_old_incarnation_before_it_spawns_the_new) {
  cluster_view v;
  v.create_stream("a");
  v.create_topic(0, "x", 2);
  v.create_group(0, 0, "g");
  node_inventory running;
  carry_out(v, running);
  const std::uint64_t old_topic = running.topics.at({0, 0});
  const std::uint64_t old_group = running.groups.begin()->second.created_ms;
  // Commands this node did not carry out: the topic goes, and after the id cursor came round another topic takes
  // id 0 (the same namespaces and directories), with a group 0 of its own.
  v.delete_topic(0, 0);
  v.bring_topic_id_round(0, 0);
  v.create_topic(0, "x2", 1);
  v.create_group(0, 0, "g2");
  const auto steps = plan(v, running);
  BOOST_TEST(described(steps) ==
                 (std::vector<std::string>{
                     "destroy partition 0 of topic 0 of stream 0", "destroy partition 1 of topic 0 of stream 0",
                     "destroy group 0 of topic 0 of stream 0", "remove the data of topic 0 of stream 0",
                     "open partition 0 of topic 0 of stream 0", "open group 0 of topic 0 of stream 0"}),
             boost::test_tools::per_element());
  BOOST_TEST(steps[3].topic_created_ms == old_topic);
  BOOST_TEST(steps[3].paths == (std::vector<std::string>{"/data/groups/0/0", "/data/streams/0/topics/0"}),
             boost::test_tools::per_element());
  carry_out(v, running);
  const topic_meta& now = v.state.view()->streams.at(0).topics.at(0);
  BOOST_TEST(running.topics.at({0, 0}) == now.created_ms);
  BOOST_TEST(running.topics.at({0, 0}) != old_topic);
  BOOST_TEST(running.groups.begin()->second.created_ms == now.groups.at(0).created_ms);
  BOOST_TEST(running.groups.begin()->second.created_ms != old_group);
  BOOST_TEST(running.partitions.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_partition_deleted_and_added_back_is_another_partition_with_another_group) {
  // Issue 38, finding 1: the same ids and the same topic incarnation, yet not the partition that was deleted.
  cluster_view v;
  v.create_stream("a");
  v.create_topic(0, "x", 2);
  node_inventory running;
  carry_out(v, running);
  const topic_meta before = v.state.view()->streams.at(0).topics.at(0);
  // Commands this node carries out in one pass: partition 1 goes and comes back.
  v.delete_partitions(0, 0, 1);
  v.add_partitions(0, 0, 1);
  const topic_meta& after = v.state.view()->streams.at(0).topics.at(0);
  BOOST_TEST(after.created_ms == before.created_ms);
  BOOST_TEST(after.partition_created(0) == before.partition_created(0));
  BOOST_TEST(after.partition_created(1) != before.partition_created(1));
  const auto steps = plan(v, running);
  BOOST_TEST(described(steps) == (std::vector<std::string>{"destroy partition 1 of topic 0 of stream 0",
                                                           "open partition 1 of topic 0 of stream 0"}),
             boost::test_tools::per_element());
  BOOST_TEST(steps[1].partition_created == after.partition_created(1));
  // Its replication group is another: the old group's messages and directory are not the new one's.
  BOOST_TEST(partition_group_id(0, 0, after.created_ms, 1, after.partition_created(1)) !=
             partition_group_id(0, 0, before.created_ms, 1, before.partition_created(1)));
  BOOST_TEST(partition_group_id(0, 0, after.created_ms, 0, after.partition_created(0)) ==
             partition_group_id(0, 0, before.created_ms, 0, before.partition_created(0)));
  carry_out(v, running);
  BOOST_TEST(running.partitions.at(partition_namespace(0, 0, 1)).created == after.partition_created(1));
  // The identity survives a snapshot; one written before it was recorded names every partition 0 (the old ids).
  auto restored = metadata_state::from_snapshot(v.state.snapshot(0));
  RILL_REQUIRE_OK(restored);
  BOOST_TEST(restored->view()->streams.at(0).topics.at(0).partitions_created == after.partitions_created,
             boost::test_tools::per_element());
  auto old = v.state.snapshot(0);
  old.mutable_streams(0)->mutable_topics(0)->clear_partitions_created();
  auto legacy = metadata_state::from_snapshot(old);
  RILL_REQUIRE_OK(legacy);
  BOOST_TEST(legacy->view()->streams.at(0).topics.at(0).partition_created(1) == 0u);
}

BOOST_AUTO_TEST_CASE(a_deleted_stream_goes_after_everything_that_held_its_data) {
  cluster_view v;
  v.create_stream("a");
  v.create_stream("b");
  v.create_topic(0, "x", 1);
  v.create_topic(0, "y", 1);
  v.create_group(0, 1, "g");
  v.create_topic(1, "z", 1);
  node_inventory running;
  carry_out(v, running);
  v.delete_stream(0);
  const auto steps = plan(v, running);
  BOOST_TEST(described(steps) ==
                 (std::vector<std::string>{
                     "destroy partition 0 of topic 0 of stream 0", "destroy partition 0 of topic 1 of stream 0",
                     "destroy group 0 of topic 1 of stream 0", "remove the data of topic 0 of stream 0",
                     "remove the data of topic 1 of stream 0", "remove the data of stream 0"}),
             boost::test_tools::per_element());
  BOOST_TEST(steps.back().paths == (std::vector<std::string>{"/data/groups/0", "/data/streams/0"}),
             boost::test_tools::per_element());
  carry_out(v, running);
  BOOST_TEST(running.streams.size() == 1u);  // stream 1 and its partition keep running
  BOOST_TEST(running.partitions.size() == 1u);
}

BOOST_AUTO_TEST_CASE(settings_change_only_their_topic_retention_in_place_and_a_count_change_touches_only_what_it_adds) {
  cluster_view v;
  v.create_stream("a");
  v.create_topic(0, "x", 2);
  v.create_topic(0, "y", 2);
  v.create_group(0, 0, "g");
  node_inventory running;
  carry_out(v, running);

  // Retention is taken in place: nothing closes, a replica keeps serving (issue 38, finding 10).
  v.set_retention(0, 1, 60'000);
  auto steps = plan(v, running);
  BOOST_TEST(
      described(steps) == (std::vector<std::string>{"update the settings of partition 0 of topic 1 of stream 0",
                                                    "update the settings of partition 1 of topic 1 of stream 0"}),
      boost::test_tools::per_element());
  BOOST_TEST(steps[1].config.retention_ms == 60'000u);
  carry_out(v, running);
  BOOST_TEST(running.partitions.at(partition_namespace(0, 1, 1)).config.retention_ms == 60'000u);

  // Another setting (the largest batch) reopens.
  {
    proto::MetadataCommand c;
    auto* u = c.mutable_update_topic();
    u->set_stream_id(0);
    u->set_topic_id(1);
    u->mutable_config()->set_max_message_bytes(64 * 1024);
    v.run(c);
  }
  steps = plan(v, running);
  BOOST_TEST(
      described(steps) == (std::vector<std::string>{
                              "close partition 0 of topic 1 of stream 0", "close partition 1 of topic 1 of stream 0",
                              "open partition 0 of topic 1 of stream 0", "open partition 1 of topic 1 of stream 0"}),
      boost::test_tools::per_element());
  BOOST_TEST(steps[2].config.max_message_bytes == 64 * 1024u);
  BOOST_TEST(steps[2].config.retention_ms == 60'000u);
  carry_out(v, running);

  v.add_partitions(0, 0, 2);
  steps = plan(v, running);
  BOOST_TEST(described(steps) == (std::vector<std::string>{"open partition 2 of topic 0 of stream 0",
                                                           "open partition 3 of topic 0 of stream 0",
                                                           "resize group 0 of topic 0 of stream 0"}),
             boost::test_tools::per_element());
  BOOST_TEST(steps[2].partitions == 4u);
  carry_out(v, running);
  BOOST_TEST(running.groups.begin()->second.partitions == 4u);

  v.delete_group(0, 0, 0);
  steps = plan(v, running);
  BOOST_TEST(described(steps) == std::vector<std::string>{"destroy group 0 of topic 0 of stream 0"},
             boost::test_tools::per_element());
  carry_out(v, running);
}
