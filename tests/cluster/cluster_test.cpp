// Clusters of real rilld processes on loopback: the metadata group spans every node and survives the loss of a
// minority (SIGKILL, SIGSTOP, a wiped disk brought back with `rilld recover`); topics are served by one node each and
// a client pointed at any node is sent there; a node of another cluster, or with another members list, is refused.
#define BOOST_TEST_MODULE rill_cluster
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "net/client.h"
#include "storage/record_batch_builder.h"
#include "tests/cluster/cluster_harness.h"

using namespace rill;
using rill::testing::rilld_process;
using rill::testing::temp_data_dir;

using namespace rill::testing::cluster_harness;

BOOST_AUTO_TEST_CASE(three_nodes_commit_through_each_and_go_on_without_a_killed_primary) {
  cluster c(3);
  c.start_all();
  create_through(c, 0, "a");
  create_through(c, 1, "b");
  create_through(c, 2, "c");
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c"})));
  // Node 1 is the primary of view 0: killed, the other two elect another and go on.
  c.node(0).kill_hard();
  const auto took = create_through(c, 1, "d");
  BOOST_TEST_MESSAGE("first change after SIGKILL of the primary: " << took.count() << " ms");
  create_through(c, 2, "e");
  BOOST_TEST(c.converge({1, 2}, names({"a", "b", "c", "d", "e"})));
  // It comes back and catches up; changes through it work again.
  c.start(0);
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c", "d", "e"})));
  create_through(c, 0, "f");
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c", "d", "e", "f"})));
  // All report the same commit, view and primary once idle, and the primary is one of them.
  bool same = false;
  for (int i = 0; i < 200 && !same; ++i) {
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> seen;
    for (std::size_t n = 0; n < c.size(); ++n) {
      auto st = c.client(n)->cluster_status();
      RILL_REQUIRE_OK(st);
      seen.insert({st->commit(), st->view(), st->primary_node()});
    }
    same = seen.size() == 1;
    if (!same) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  BOOST_TEST(same);
  auto st = c.client(1)->cluster_status();
  RILL_REQUIRE_OK(st);
  BOOST_TEST(st->peers_size() == 2);
  for (const auto& p : st->peers()) {
    BOOST_TEST(p.connected());
    BOOST_TEST(!p.client_address().empty());
  }
}

BOOST_AUTO_TEST_CASE(a_topic_is_served_by_one_node_and_clients_of_any_node_reach_it) {
  cluster c(3);
  c.start_all();
  auto a = c.client(0);
  RILL_REQUIRE_OK(a->create_stream("s"));
  proto::TopicConfig one;
  one.set_partitions(2);
  for (const char* t : {"t0", "t1", "t2", "t3", "t4", "t5"}) {
    RILL_REQUIRE_OK(a->create_topic(net::by_name("s"), t, one));
  }
  // Produce through node 2, read through node 3: each topic's data is on the node that serves it, whichever node the
  // client asked first.
  auto b = c.client(1);
  auto d = c.client(2);
  std::set<std::uint64_t> homes;
  for (const char* t : {"t0", "t1", "t2", "t3", "t4", "t5"}) {
    storage::batch_builder bb;
    bb.add("k", std::string("v-") + t);
    auto produced = b->produce(net::by_name("s"), net::by_name(t), 1, *bb.build());
    RILL_REQUIRE_OK(produced);
    proto::PollRequest p;
    *p.mutable_stream() = net::by_name("s");
    *p.mutable_topic() = net::by_name(t);
    p.set_partition_id(1);
    p.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
    auto got = d->poll(p);
    RILL_REQUIRE_OK(got);
    auto records = net::decode_records(1, got->batches);
    RILL_REQUIRE_OK(records);
    BOOST_REQUIRE(records->size() == 1u);
    BOOST_TEST(*(*records)[0].value == std::string("v-") + t);
    auto info = c.client(0)->get_topic(net::by_name("s"), net::by_name(t));
    RILL_REQUIRE_OK(info);
    homes.insert(info->partitions(0).node_id());
  }
  BOOST_TEST(homes.size() > 1u, "six topics all on one node");
  // A consumer group of a topic is coordinated by the topic's node, and describe names it, through any node.
  {
    auto t0 = c.client(0)->get_topic(net::by_name("s"), net::by_name("t0"));
    RILL_REQUIRE_OK(t0);
    RILL_REQUIRE_OK(d->create_group(net::by_name("s"), net::by_name("t0"), "g", proto::GroupConfig{}));
    auto g = b->get_group(net::by_name("s"), net::by_name("t0"), net::by_name("g"));
    RILL_REQUIRE_OK(g);
    BOOST_TEST(g->coordinator_node() == t0->partitions(0).node_id());
  }
  // Exactly one node holds each topic's data.
  std::size_t dirs = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(c.dir(i) + "/streams/0/topics", ec)) {
      (void)e;
      ++dirs;
    }
  }
  BOOST_TEST(dirs == 6u);
  // One client producing to every topic in turn learns each topic's node from the first redirect and keeps a
  // connection to each node: it connects once per node, not once per redirect.
  auto e = c.client(0);
  for (int round = 0; round < 20; ++round) {
    for (const char* t : {"t0", "t1", "t2", "t3", "t4", "t5"}) {
      storage::batch_builder bb;
      bb.add("k", fmt::format("r{}", round));
      RILL_REQUIRE_OK(e->produce(net::by_name("s"), net::by_name(t), 0, *bb.build()));
    }
  }
  BOOST_TEST(e->connects() <= c.size(),
             e->connects() << " connections for 120 produces to topics on " << homes.size() << " nodes");
  BOOST_TEST(e->redirects() <= 6u, e->redirects() << " redirects for 120 produces to 6 topics");
}

BOOST_AUTO_TEST_CASE(what_one_node_made_is_found_at_once_through_another) {
  cluster c(3);
  c.start_all();
  std::vector<std::unique_ptr<net::client>> clients;
  for (std::size_t i = 0; i < c.size(); ++i) {
    clients.push_back(c.client(i));
  }
  proto::TopicConfig one;
  one.set_partitions(1);
  // Made through one node, then at once asked of the next one: a node that has not applied the change yet catches up
  // before it says "not found".
  for (int round = 0; round < 20; ++round) {
    const std::size_t maker = static_cast<std::size_t>(round) % 3;
    const std::size_t asker = (maker + 1) % 3;
    const std::string name = fmt::format("s{}", round);
    RILL_REQUIRE_OK(clients[maker]->create_stream(name));
    RILL_REQUIRE_OK(clients[asker]->get_stream(net::by_name(name)));
    RILL_REQUIRE_OK(clients[maker]->create_topic(net::by_name(name), "t", one));
    storage::batch_builder bb;
    bb.add("k", "v");
    RILL_REQUIRE_OK(clients[asker]->produce(net::by_name(name), net::by_name("t"), 0, *bb.build()));
  }
  // A name nobody made is still not found, after the check.
  auto missing = clients[1]->get_stream(net::by_name("nobody"));
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST((status_of(missing.error()) == net::status::stream_not_found));
}

// Read your writes with a list, which has no "not found" to confirm: a backup cut off from the others cannot have the
// stream made after the cut. A client that saw the change (its position carried to a client of the cut-off node)
// is not answered from the stale view: the request waits, and fails as unavailable when the node stays cut off; once
// healed, the node catches up and answers with the stream. A client that saw nothing is answered from what the node
// has (the stale list: what positions are for).
BOOST_AUTO_TEST_CASE(a_client_that_saw_a_change_is_never_answered_from_a_node_behind_it) {
  cluster c(3, 42, {"--set", "debug.failure_injection=true"});
  c.start_all();
  create_through(c, 0, "before");
  auto st = c.client(0)->cluster_status();
  RILL_REQUIRE_OK(st);
  const std::size_t primary = st->primary_node() - 1;
  const std::size_t behind = (primary + 1) % 3;  // a backup: the other two go on without it
  const std::size_t maker = (primary + 2) % 3;
  BOOST_REQUIRE(c.converge({0, 1, 2}, names({"before"})));
  set_cut_off(c, behind, true);
  auto writer = c.client(maker);
  RILL_REQUIRE_OK(writer->create_stream("after"));
  const net::metadata_position seen = writer->seen();
  BOOST_TEST(seen.cluster_id == 42u);
  BOOST_TEST(seen.op > 0u);

  net::client_options o;
  o.server = c.node(behind).address();
  o.retries = 0;
  o.request_timeout = std::chrono::seconds(20);
  auto fresh = net::client::connect(o);
  RILL_REQUIRE_OK(fresh);
  auto stale = (*fresh)->list_streams();
  RILL_REQUIRE_OK(stale);
  BOOST_TEST(stale->size() == 1u);  // no position: the node answers from what it has
  BOOST_TEST((*fresh)->seen().op < seen.op);

  auto reader = net::client::connect(o);
  RILL_REQUIRE_OK(reader);
  (*reader)->observe(seen);
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = (*reader)->list_streams();
  const auto waited = std::chrono::steady_clock::now() - t0;
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((status_of(refused.error()) == net::status::unavailable));
  BOOST_TEST(refused.error().message().find("has not reached metadata op") != std::string::npos,
             refused.error().message());
  // It waited out its deadline for the node to catch up before it said so (the refusal names the wait).
  BOOST_TEST(refused.error().message().find("within 5000 ms") != std::string::npos, refused.error().message());
  BOOST_TEST_MESSAGE("refused after " << std::chrono::duration<double>(waited).count() << " s");

  set_cut_off(c, behind, false);
  // Healed: the same request is answered once the node has caught up (its reconnects back off, so this client
  // retries), with the stream.
  o.retries = 20;
  auto patient = net::client::connect(o);
  RILL_REQUIRE_OK(patient);
  (*patient)->observe(seen);
  auto listed = (*patient)->list_streams();
  RILL_REQUIRE_OK(listed);
  std::vector<std::string> got;
  for (const auto& s : *listed) {
    got.push_back(s.name());
  }
  std::sort(got.begin(), got.end());
  BOOST_TEST(got == names({"after", "before"}));
  BOOST_TEST((*patient)->seen().op >= seen.op);
}

BOOST_AUTO_TEST_CASE(a_paused_primary_is_replaced_and_catches_up_when_it_returns) {
  cluster c(3);
  c.start_all();
  create_through(c, 1, "a");
  ::kill(c.node(0).pid(), SIGSTOP);
  create_through(c, 1, "b");
  create_through(c, 2, "c");
  ::kill(c.node(0).pid(), SIGCONT);
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c"})));
  create_through(c, 0, "d");
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c", "d"})));
}

BOOST_AUTO_TEST_CASE(a_wiped_node_recovered_with_rilld_recover_rejoins) {
  cluster c(3);
  c.start_all();
  create_through(c, 0, "a");
  create_through(c, 1, "b");
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b"})));
  c.node(2).kill_hard();
  std::filesystem::remove_all(c.dir(2));
  // An empty directory is refused; rilld recover formats it as a member that lost its data.
  c.format(2, "recover");
  c.start(2);
  create_through(c, 0, "c");
  BOOST_TEST(c.converge({0, 1, 2}, names({"a", "b", "c"})));
  // It takes part again: with node 1 gone, nodes 2 and 3 make a quorum.
  c.node(0).kill_hard();
  create_through(c, 2, "d");
  BOOST_TEST(c.converge({1, 2}, names({"a", "b", "c", "d"})));
}

BOOST_AUTO_TEST_CASE(a_node_of_another_cluster_or_members_list_is_refused) {
  cluster c(3);
  c.start(0);
  c.start(1);
  create_through(c, 0, "a");
  // Node 3 formatted and started with another cluster id: its hello is refused, loudly, and it joins nothing.
  std::filesystem::remove_all(c.dir(2));
  std::vector<std::string> a = {"format", "--data-dir", c.dir(2)};
  const auto other = c.args(2, 99);
  a.insert(a.end(), other.begin(), other.end());
  BOOST_REQUIRE_EQUAL(run(a, c.dir(2) + ".format.log"), 0);
  rilld_process stranger(c.dir(2), other);
  BOOST_REQUIRE(stranger.start().has_value());
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    refused = c.node(0).log().find("refused a peer's hello") != std::string::npos ||
              c.node(1).log().find("refused a peer's hello") != std::string::npos ||
              stranger.log().find("cluster.id") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST(refused, c.node(0).log() << c.node(1).log() << stranger.log());
  auto theirs = stranger.log();
  BOOST_TEST(theirs.find("cluster.id") != std::string::npos, theirs);
}

BOOST_AUTO_TEST_CASE(five_nodes_lose_two_and_go_on) {
  cluster c(5);
  c.start_all();
  create_through(c, 4, "a");
  c.node(0).kill_hard();
  c.node(1).kill_hard();
  create_through(c, 2, "b");
  create_through(c, 3, "c");
  BOOST_TEST(c.converge({2, 3, 4}, names({"a", "b", "c"})));
}

// Without a majority a change cannot commit: the node says so at once, naming who it cannot reach, rather than
// letting the change wait out its timeout (and the client's retries). With a majority back it commits again.
BOOST_AUTO_TEST_CASE(a_node_without_a_majority_refuses_a_change_at_once_and_says_why) {
  cluster c(3);
  c.start_all();
  create_through(c, 0, "a");
  c.node(1).kill_hard();
  c.node(2).kill_hard();
  net::client_options o;
  o.server = c.node(0).address();
  o.retries = 0;
  o.request_timeout = std::chrono::seconds(30);
  auto lone = net::client::connect(o);
  RILL_REQUIRE_OK(lone);
  // Once the loss is older than the grace (1 s), the node refuses without sending anything. Asked until it does (a
  // try made before that waits out the submit timeout instead).
  auto refused = (*lone)->create_stream("b");
  for (int i = 0; i < 20 && !refused && refused.error().message().find("no quorum") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    refused = (*lone)->create_stream("b");
  }
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((status_of(refused.error()) == net::status::unavailable));
  const std::string why = refused.error().message();
  BOOST_TEST(why.find("no quorum: this node reaches 1 of the 3 members (a commit needs 2)") != std::string::npos, why);
  BOOST_TEST(why.find("node 2") != std::string::npos, why);
  BOOST_TEST(why.find("node 3") != std::string::npos, why);
  BOOST_TEST(why.find("Nothing was sent") != std::string::npos, why);
  // Reads of what the node has go on.
  RILL_REQUIRE_OK((*lone)->get_stream(net::by_name("a")));
  c.start(1);
  create_through(c, 0, "b");
  BOOST_TEST(c.converge({0, 1}, names({"a", "b"})));
}

BOOST_AUTO_TEST_CASE(a_primary_cut_off_by_the_network_is_replaced_and_catches_up_when_healed) {
  cluster c(3, 42, {"--set", "debug.failure_injection=true"});
  c.start_all();
  create_through(c, 1, "a");
  auto st = c.client(1)->cluster_status();
  RILL_REQUIRE_OK(st);
  const std::uint64_t primary = st->primary_node();
  BOOST_REQUIRE(primary >= 1 && primary <= 3);
  const std::size_t p = primary - 1;
  // Cut the primary off from both others, on both sides (the transport fault switch).
  set_cut_off(c, p, true);
  const std::size_t q = (p + 1) % 3;
  const std::size_t r = (p + 2) % 3;
  const auto took = create_through(c, q, "b");
  BOOST_TEST_MESSAGE("first change after the primary was cut off: " << took.count() << " ms");
  create_through(c, r, "c");
  BOOST_TEST(c.converge({q, r}, names({"a", "b", "c"})));
  // The cut-off node makes no change on its own: a minority of one.
  {
    net::client_options o;
    o.server = c.node(p).address();
    o.retries = 0;
    o.request_timeout = std::chrono::seconds(2);
    auto lone = net::client::connect(o);
    RILL_REQUIRE_OK(lone);
    BOOST_TEST(!(*lone)->create_stream("lonely").has_value());
  }
  // Healed, it follows the new primary and catches up; changes through it work again.
  set_cut_off(c, p, false);
  create_through(c, p, "d");
  // "lonely" may have been made after all, once the cut-off node's session reached the new primary: either way it
  // is the same on every node.
  bool same = false;
  const auto made = names({"a", "b", "c", "d"});
  for (int i = 0; i < 200 && !same; ++i) {
    auto x = c.streams(0);
    same = x && x == c.streams(1) && x == c.streams(2) && std::includes(x->begin(), x->end(), made.begin(), made.end());
    if (!same) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  BOOST_TEST(same);
  BOOST_TEST(c.node(p).log().find("cut off (debug.failure_injection)") != std::string::npos);
}
