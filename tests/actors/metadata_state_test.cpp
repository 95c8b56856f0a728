#define BOOST_TEST_MODULE rill_actor_state
#include <boost/test/unit_test.hpp>

#include <set>

#include "actors/metadata_state.h"
#include "net/status.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {
proto::MetadataCommand create_stream(const std::string& name) {
  proto::MetadataCommand c;
  c.set_time_ms(1000);
  c.mutable_create_stream()->set_name(name);
  return c;
}
proto::MetadataCommand create_topic(std::uint32_t stream, const std::string& name, std::uint32_t partitions = 3) {
  proto::MetadataCommand c;
  c.set_time_ms(2000);
  auto* t = c.mutable_create_topic();
  t->set_stream_id(stream);
  t->set_name(name);
  proto::TopicConfig requested;
  requested.set_partitions(partitions);
  *t->mutable_config() = *complete_topic_config(requested, config::log_config{});
  return c;
}
proto::MetadataCommand create_group(std::uint32_t stream, std::uint32_t topic, const std::string& name,
                                    std::optional<std::uint32_t> session_timeout_ms = std::nullopt) {
  proto::MetadataCommand c;
  c.set_time_ms(3000);
  auto* g = c.mutable_create_group();
  g->set_stream_id(stream);
  g->set_topic_id(topic);
  g->set_name(name);
  if (session_timeout_ms) {
    g->mutable_config()->set_session_timeout_ms(*session_timeout_ms);
  }
  return c;
}
net::status status_of(const expected<void>& r) {
  return r ? net::status::ok : net::status_of(r.error().code());
}
}  // namespace

BOOST_AUTO_TEST_CASE(streams_and_topics_are_created_named_found_and_deleted) {
  metadata_state m;
  RILL_REQUIRE_OK(m.check(create_stream("orders")));
  auto a = m.apply(create_stream("orders"));
  BOOST_TEST(a.stream_id == 0u);
  BOOST_TEST((status_of(m.check(create_stream("orders"))) == net::status::already_exists));
  BOOST_TEST(m.apply(create_stream("payments")).stream_id == 1u);
  auto t = m.apply(create_topic(0, "eu"));
  BOOST_TEST(t.topic_id == 0u);
  BOOST_TEST((status_of(m.check(create_topic(0, "eu"))) == net::status::already_exists));
  BOOST_TEST(m.check(create_topic(1, "eu")).has_value());  // names are unique per parent only
  BOOST_TEST((status_of(m.check(create_topic(9, "x"))) == net::status::stream_not_found));

  auto view = m.view();
  proto::Identifier by_name;
  by_name.set_name("orders");
  auto s = view->find_stream(by_name);
  RILL_REQUIRE_OK(s);
  BOOST_TEST((*s)->id == 0u);
  proto::Identifier topic;
  topic.set_id(0);
  auto found = view->find_topic(**s, topic);
  RILL_REQUIRE_OK(found);
  BOOST_TEST((*found)->config.partitions() == 3u);
  proto::Identifier missing;
  missing.set_name("nope");
  auto gone = view->find_stream(missing);
  BOOST_REQUIRE(!gone.has_value());
  BOOST_TEST(gone.error().detail() == "stream 'nope' not found");

  // A deleted stream's id comes back only once the cursor went round the id space (metadata_state_test's wrap
  // cases, metadata_handlers_test's 5,000 topics).
  proto::MetadataCommand del;
  del.mutable_delete_stream()->set_stream_id(0);
  m.apply(del);
  BOOST_TEST(m.apply(create_stream("orders")).stream_id == 2u);
  BOOST_TEST(view->streams.size() == 2u);  // the old view did not change
  BOOST_TEST(m.view()->streams.size() == 2u);
  BOOST_TEST(m.view()->version == 5u);
}

BOOST_AUTO_TEST_CASE(names_are_checked) {
  metadata_state m;
  for (const char* bad : {"", "has space", "slash/", "ümlaut", "semi;colon"}) {
    BOOST_TEST((status_of(m.check(create_stream(bad))) == net::status::invalid_name), "'" << bad << "'");
  }
  BOOST_TEST((status_of(m.check(create_stream(std::string(256, 'a')))) == net::status::invalid_name));
  BOOST_TEST(m.check(create_stream(std::string(255, 'a'))).has_value());
  BOOST_TEST(m.check(create_stream("A-z_0.9")).has_value());
}

BOOST_AUTO_TEST_CASE(topic_configs_are_completed_patched_and_range_checked) {
  config::log_config defaults;
  defaults.retention_ms = 12345;
  proto::TopicConfig req;
  auto c = complete_topic_config(req, defaults);
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->partitions() == 1u);
  BOOST_TEST(c->retention_ms() == 12345u);
  BOOST_TEST(c->segment_bytes() == defaults.segment_bytes);

  proto::TopicConfig rf;
  rf.set_replication_factor(3);
  auto refused = complete_topic_config(rf, defaults);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().detail().find("replication_factor = 3") != std::string::npos);
  // A factor of 2 is refused whatever the cluster (issue 38, finding 7), and says why.
  proto::TopicConfig two;
  two.set_replication_factor(2);
  auto pair = complete_topic_config(two, defaults, replication_limits{3, 1});
  BOOST_REQUIRE(!pair.has_value());
  BOOST_TEST(pair.error().detail().find("replication_factor = 2 is refused: a group of two needs both replicas") !=
             std::string::npos);
  two.set_replication_factor(3);
  RILL_REQUIRE_OK(complete_topic_config(two, defaults, replication_limits{3, 1}));
  proto::TopicConfig seg;
  seg.set_segment_bytes(10);
  auto small = complete_topic_config(seg, defaults);
  BOOST_REQUIRE(!small.has_value());
  BOOST_TEST(small.error().detail().find("segment_bytes = 10: allowed range is [1048576,") != std::string::npos);
  proto::TopicConfig compact;
  compact.set_cleanup_policy(proto::CLEANUP_COMPACT);
  BOOST_TEST(!complete_topic_config(compact, defaults).has_value());

  proto::TopicConfig patch;
  patch.set_retention_ms(99);
  auto p = patch_topic_config(*c, patch);
  RILL_REQUIRE_OK(p);
  BOOST_TEST(p->retention_ms() == 99u);
  BOOST_TEST(p->segment_bytes() == c->segment_bytes());
  proto::TopicConfig parts;
  parts.set_partitions(7);
  BOOST_TEST(!patch_topic_config(*c, parts).has_value());

  auto lc = log_config_for(*p, defaults);
  BOOST_TEST(lc.retention_ms == 99u);
}

BOOST_AUTO_TEST_CASE(partitions_are_added_and_deleted_within_bounds) {
  metadata_state m;
  m.apply(create_stream("s"));
  m.apply(create_topic(0, "t", 2));
  proto::MetadataCommand add;
  add.mutable_add_partitions()->set_stream_id(0);
  add.mutable_add_partitions()->set_topic_id(0);
  add.mutable_add_partitions()->set_count(3);
  m.apply(add);
  BOOST_TEST(m.view()->streams.at(0).topics.at(0).config.partitions() == 5u);
  proto::MetadataCommand del;
  del.mutable_delete_partitions()->set_stream_id(0);
  del.mutable_delete_partitions()->set_topic_id(0);
  del.mutable_delete_partitions()->set_count(5);
  BOOST_TEST((status_of(m.check(del)) == net::status::invalid_config));  // at least one stays
  del.mutable_delete_partitions()->set_count(4);
  m.apply(del);
  BOOST_TEST(m.view()->streams.at(0).topics.at(0).config.partitions() == 1u);
}

BOOST_AUTO_TEST_CASE(snapshot_round_trip_and_replay_give_the_same_state) {
  std::vector<proto::MetadataCommand> log = {create_stream("a"), create_stream("b"), create_topic(0, "x"),
                                             create_topic(1, "y", 5)};
  proto::MetadataCommand rename;
  rename.mutable_update_stream()->set_stream_id(1);
  rename.mutable_update_stream()->set_name("bee");
  log.push_back(rename);
  // Each command applied at its op, as the metadata group applies it: the op names the partitions it creates, so a
  // replica restored from a snapshot names them as one that replayed everything (a version count would not).
  metadata_state full;
  for (std::size_t i = 0; i < log.size(); ++i) {
    full.apply(log[i], i + 1);
  }
  // Snapshot after 3 commands, replay the rest.
  metadata_state prefix;
  for (std::size_t i = 0; i < 3; ++i) {
    prefix.apply(log[i], i + 1);
  }
  auto snap = prefix.snapshot(2);
  std::string bytes;
  BOOST_REQUIRE(snap.SerializeToString(&bytes));
  proto::MetadataSnapshot parsed;
  BOOST_REQUIRE(parsed.ParseFromString(bytes));
  BOOST_TEST(parsed.applied_offset() == 2u);
  auto restored = metadata_state::from_snapshot(parsed);
  RILL_REQUIRE_OK(restored);
  for (std::size_t i = 3; i < log.size(); ++i) {
    restored->apply(log[i], i + 1);
  }
  BOOST_TEST(restored->view()->streams.at(1).topics.at(0).partitions_created == (std::vector<std::uint64_t>(5, 4)),
             boost::test_tools::per_element());
  BOOST_TEST(restored->snapshot(0).SerializeAsString() == full.snapshot(0).SerializeAsString());
}

BOOST_AUTO_TEST_CASE(groups_are_created_checked_snapshotted_and_deleted) {
  metadata_state m;
  m.apply(create_stream("s"));
  m.apply(create_topic(0, "t"));
  BOOST_TEST(status_of(m.check(create_group(0, 0, "bad name"))) == net::status::invalid_name);
  BOOST_TEST(status_of(m.check(create_group(0, 9, "g"))) == net::status::topic_not_found);
  const auto too_short = m.check(create_group(0, 0, "g", 5));
  BOOST_TEST(status_of(too_short) == net::status::invalid_config);
  BOOST_TEST(too_short.error().detail().find("session_timeout_ms = 5: allowed range is [100, 3600000]") !=
             std::string::npos);
  m.apply(create_group(0, 0, "g"));
  m.apply(create_group(0, 0, "h", 2000));
  BOOST_TEST(status_of(m.check(create_group(0, 0, "g"))) == net::status::already_exists);
  const auto& t = m.view()->streams.at(0).topics.at(0);
  BOOST_TEST(t.groups.size() == 2u);
  BOOST_TEST(t.groups.at(0).config.session_timeout_ms() == session_timeout_ms_default);
  BOOST_TEST(t.groups.at(0).config.strategy() == proto::ASSIGNMENT_RANGE);
  BOOST_TEST(t.groups.at(1).config.session_timeout_ms() == 2000u);
  proto::Identifier h;
  h.set_name("h");
  BOOST_TEST((*metadata_view::find_group(t, h))->id == 1u);
  h.set_name("nope");
  BOOST_TEST(net::status_of(metadata_view::find_group(t, h).error().code()) == net::status::group_not_found);
  // Snapshot and back.
  auto restored = metadata_state::from_snapshot(m.snapshot(0));
  RILL_REQUIRE_OK(restored);
  BOOST_TEST(restored->snapshot(0).SerializeAsString() == m.snapshot(0).SerializeAsString());
  proto::MetadataCommand del;
  del.mutable_delete_group()->set_stream_id(0);
  del.mutable_delete_group()->set_topic_id(0);
  del.mutable_delete_group()->set_group_id(0);
  m.apply(del);
  BOOST_TEST(status_of(m.check(del)) == net::status::group_not_found);
  m.apply(create_group(0, 0, "g"));  // the name is free again; the id is not reused
  BOOST_TEST(m.view()->streams.at(0).topics.at(0).groups.rbegin()->first == 2u);
  BOOST_TEST(group_namespace(0, 0, 2) != partition_namespace(0, 0, 2));
}

BOOST_AUTO_TEST_CASE(namespaces_pack_and_spread_over_shards) {
  BOOST_TEST(partition_namespace(1, 2, 3) == ((1ull << 32) | (2ull << 20) | 3ull));
  std::set<std::size_t> used;
  for (std::uint32_t p = 0; p < 64; ++p) {
    const auto s = shard_of(partition_namespace(0, 0, p), 4);
    BOOST_TEST(s < 4u);
    used.insert(s);
  }
  BOOST_TEST(used.size() == 4u);  // 64 partitions reach every one of 4 shards
  BOOST_TEST(shard_of(partition_namespace(5, 6, 7), 8) == shard_of(partition_namespace(5, 6, 7), 8));
}

// Ids wrap: the cursor goes round its id space, skipping the ids still live, and a command log of an earlier build
// (cursors below every live id) keeps its ids.
BOOST_AUTO_TEST_CASE(ids_wrap_round_skipping_live_ones) {
  proto::MetadataSnapshot snap;
  snap.set_next_stream_id(stream_ids_max - 1);
  auto* s0 = snap.add_streams();
  s0->set_id(0);
  s0->set_name("zero");
  s0->set_next_topic_id(topic_ids_max);  // its topic cursor at the very end
  auto* t0 = s0->add_topics();
  t0->set_id(0);
  t0->set_name("t0");
  *t0->mutable_config() = create_topic(0, "x").create_topic().config();
  t0->set_next_group_id(group_ids_max - 1);
  auto* g = t0->add_groups();
  g->set_id(group_ids_max - 1);
  g->set_name("last");
  *g->mutable_config() = *complete_group_config(proto::GroupConfig{});
  auto* s1 = snap.add_streams();
  s1->set_id(stream_ids_max - 1);
  s1->set_name("last");
  auto restored = metadata_state::from_snapshot(snap);
  RILL_REQUIRE_OK(restored);
  metadata_state m = std::move(*restored);
  BOOST_TEST(m.apply(create_stream("a")).stream_id == 1u);  // past the end (live), then 0 (live), then 1
  BOOST_TEST(m.view()->next_stream_id == 2u);
  BOOST_TEST(m.apply(create_topic(0, "t1")).topic_id == 1u);  // the cursor at the end wraps to 0 (live), then 1
  m.apply(create_group(0, 0, "g0"));
  BOOST_TEST(m.view()->streams.at(0).topics.at(0).groups.count(0) == 1u);  // group_ids_max - 1 live: wrapped to 0
  // The state survives its own snapshot, cursors and all.
  auto again = metadata_state::from_snapshot(m.snapshot(1));
  RILL_REQUIRE_OK(again);
  BOOST_TEST(again->view()->next_stream_id == 2u);
  BOOST_TEST(again->view()->streams.at(0).next_topic_id == 2u);
  // A snapshot whose cursor lies beyond the id space, or with a duplicate id, is refused.
  snap.set_next_stream_id(stream_ids_max + 1);
  BOOST_TEST(!metadata_state::from_snapshot(snap).has_value());
  snap.set_next_stream_id(5);
  snap.mutable_streams(1)->set_id(0);
  BOOST_TEST(!metadata_state::from_snapshot(snap).has_value());
}

// When every id of a space is live, creation is refused with limit_exceeded (the state's bound; the configured
// limits keep a node far below it).
BOOST_AUTO_TEST_CASE(a_full_id_space_refuses_creation) {
  metadata_state m;
  m.apply(create_stream("s"));
  for (std::uint32_t t = 0; t < topic_ids_max; ++t) {
    m.apply(create_topic(0, "t" + std::to_string(t), 1));
  }
  BOOST_TEST((status_of(m.check(create_topic(0, "more", 1))) == net::status::limit_exceeded));
  proto::MetadataCommand del;
  del.mutable_delete_topic()->set_stream_id(0);
  del.mutable_delete_topic()->set_topic_id(77);
  m.apply(del);
  BOOST_TEST(m.apply(create_topic(0, "more", 1)).topic_id == 77u);  // the only free id
}
