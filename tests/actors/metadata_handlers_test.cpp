// metadata_handlers: every metadata API's decisions without CAF: the command a change commits, what the reconciler
// then does on the node (partitions and groups spawned, closed, destroyed, resized; data removed), the reply plans of
// reads and changes and the replies built from them, the errors (bad header, not found, exists, limits, unknown API),
// and which data directories recovery keeps.
#include <boost/test/unit_test.hpp>

#include <set>

#include <fmt/core.h>

#include "actors/metadata_handlers.h"
#include "actors/reconciler.h"
#include "net/status.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {

std::uint16_t wire(net::api a) {
  return static_cast<std::uint16_t>(a);
}

proto::Identifier by_name(const std::string& name) {
  proto::Identifier id;
  id.set_name(name);
  return id;
}

proto::Identifier by_id(std::uint32_t v) {
  proto::Identifier id;
  id.set_id(v);
  return id;
}

template <class E>
net::status status_of(const E& r) {
  return r ? net::status::ok : net::status_of(r.error().code());
}

// A committed change: its reply plan and the reconciler's steps on a node that carried out everything before it.
struct committed {
  reply_plan reply;
  std::vector<reconcile_step> steps;

  [[nodiscard]] std::vector<std::uint64_t> ns_of(reconcile_kind k) const {
    std::vector<std::uint64_t> out;
    for (const auto& s : steps) {
      if (s.kind == k) {
        out.push_back(s.ns);
      }
    }
    return out;
  }
  [[nodiscard]] std::vector<std::string> paths_of(reconcile_kind k) const {
    std::vector<std::string> out;
    for (const auto& s : steps) {
      if (s.kind == k) {
        out.insert(out.end(), s.paths.begin(), s.paths.end());
      }
    }
    return out;
  }
};

std::vector<std::uint64_t> partitions_ns(std::uint32_t sid, std::uint32_t tid, std::uint32_t from, std::uint32_t to) {
  std::vector<std::uint64_t> out;
  for (std::uint32_t p = from; p < to; ++p) {
    out.push_back(partition_namespace(sid, tid, p));
  }
  return out;
}

// The metadata actor's steps without the actor: plan, check, apply (as the VSR group would), reconcile (every step
// succeeding).
struct harness {
  metadata_state state;
  config::log_config defaults;
  config::resource_limits limits;
  std::string data_dir = "/data";
  node_inventory running;

  expected<metadata_change> plan(net::api api, const google::protobuf::MessageLite& req) {
    return plan_change(*state.view(), wire(api), req.SerializeAsString(), defaults, limits);
  }
  // Plans, checks and applies the change, and carries it out.
  expected<committed> change(net::api api, const google::protobuf::MessageLite& req) {
    RILL_TRY(c, plan(api, req));
    c.command.set_time_ms(1234);
    RILL_TRY_VOID(state.check(c.command));
    (void)state.apply(c.command);
    committed out{reply_of(c, *state.view()), plan_reconcile(*state.view(), running, defaults, data_dir)};
    for (const auto& step : out.steps) {
      record(running, step);
    }
    BOOST_TEST(plan_reconcile(*state.view(), running, defaults, data_dir).empty());
    return out;
  }
  expected<reply_plan> read(net::api api, const google::protobuf::MessageLite& req) {
    return plan_read(*state.view(), wire(api), req.SerializeAsString());
  }

  committed create_stream(const std::string& name) {
    proto::StreamCreateRequest req;
    req.set_name(name);
    auto e = change(net::api::stream_create, req);
    BOOST_REQUIRE(e.has_value());
    return *e;
  }
  committed create_topic(const std::string& stream, const std::string& name, std::uint32_t partitions) {
    proto::TopicCreateRequest req;
    *req.mutable_stream() = by_name(stream);
    req.set_name(name);
    req.mutable_config()->set_partitions(partitions);
    auto e = change(net::api::topic_create, req);
    BOOST_REQUIRE(e.has_value());
    return *e;
  }
  committed create_group(const std::string& stream, const std::string& topic, const std::string& name) {
    proto::GroupCreateRequest req;
    *req.mutable_stream() = by_name(stream);
    *req.mutable_topic() = by_name(topic);
    req.set_name(name);
    auto e = change(net::api::group_create, req);
    BOOST_REQUIRE(e.has_value());
    return *e;
  }
};

// What a plan's topics say once their partitions answered: each with a PartitionInfo whose id is its index.
std::string fill_and_build(reply_plan plan, std::span<const std::string> described = {}) {
  for (auto& t : plan.topics) {
    for (std::size_t p = 0; p < t.partitions.size(); ++p) {
      t.info.add_partitions()->set_id(static_cast<std::uint32_t>(p));
    }
  }
  return build_reply(std::move(plan), described);
}

std::string described_group(std::uint32_t id, const std::string& name) {
  proto::GroupGetReply r;
  r.mutable_group()->set_id(id);
  r.mutable_group()->set_name(name);
  return r.SerializeAsString();
}

void require_no_actor_effects(const committed& e) {
  BOOST_TEST(e.steps.empty());
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_and_changes_are_told_apart) {
  for (auto a : {net::api::stream_get, net::api::stream_list, net::api::topic_get, net::api::topic_list,
                 net::api::stats, net::api::group_list}) {
    BOOST_TEST(is_metadata_read(wire(a)));
  }
  for (auto a : {net::api::stream_create, net::api::stream_update, net::api::stream_delete, net::api::topic_create,
                 net::api::topic_update, net::api::topic_delete, net::api::partitions_add, net::api::partitions_delete,
                 net::api::group_create, net::api::group_delete}) {
    BOOST_TEST(!is_metadata_read(wire(a)));
  }
  BOOST_TEST(!is_metadata_read(9999));
}

BOOST_AUTO_TEST_CASE(a_stream_is_created_updated_listed_got_and_deleted) {
  harness h;
  auto created = h.create_stream("orders");
  require_no_actor_effects(created);
  BOOST_TEST((created.reply.kind == reply_kind::ready));
  proto::StreamCreateReply cr;
  BOOST_REQUIRE(cr.ParseFromString(build_reply(created.reply, {})));
  BOOST_TEST(cr.stream().id() == 0u);
  BOOST_TEST(cr.stream().name() == "orders");
  BOOST_TEST(cr.stream().created_ms() == 1234u);
  h.create_stream("payments");

  proto::StreamUpdateRequest up;
  *up.mutable_stream() = by_id(1);
  up.set_name("billing");
  auto updated = h.change(net::api::stream_update, up);
  RILL_REQUIRE_OK(updated);
  require_no_actor_effects(*updated);
  proto::StreamUpdateReply ur;
  BOOST_REQUIRE(ur.ParseFromString(build_reply(updated->reply, {})));
  BOOST_TEST(ur.stream().id() == 1u);
  BOOST_TEST(ur.stream().name() == "billing");

  auto listed = h.read(net::api::stream_list, proto::StreamListRequest{});
  RILL_REQUIRE_OK(listed);
  proto::StreamListReply lr;
  BOOST_REQUIRE(lr.ParseFromString(build_reply(*listed, {})));
  BOOST_REQUIRE(lr.streams_size() == 2);
  BOOST_TEST(lr.streams(0).name() == "orders");
  BOOST_TEST(lr.streams(1).name() == "billing");

  h.create_topic("orders", "eu", 2);
  h.create_topic("orders", "us", 1);
  h.create_group("orders", "eu", "audit");
  proto::StreamGetRequest get;
  *get.mutable_stream() = by_name("orders");
  auto got = h.read(net::api::stream_get, get);
  RILL_REQUIRE_OK(got);
  BOOST_TEST((got->kind == reply_kind::stream));
  BOOST_REQUIRE(got->topics.size() == 2u);
  BOOST_TEST(got->topics[0].partitions ==
             (std::vector<std::uint64_t>{partition_namespace(0, 0, 0), partition_namespace(0, 0, 1)}));
  BOOST_TEST(got->topics[1].partitions == std::vector<std::uint64_t>{partition_namespace(0, 1, 0)});
  proto::StreamGetReply gr;
  BOOST_REQUIRE(gr.ParseFromString(fill_and_build(*got)));
  BOOST_TEST(gr.stream().name() == "orders");
  BOOST_TEST(gr.stream().topics() == 2u);
  BOOST_REQUIRE(gr.topics_size() == 2);
  BOOST_TEST(gr.topics(0).name() == "eu");
  BOOST_TEST(gr.topics(0).partitions_size() == 2);
  BOOST_TEST(gr.topics(1).name() == "us");

  // Delete: everything of the stream, listed from the view before the command (the view after has none of it).
  proto::StreamDeleteRequest del;
  *del.mutable_stream() = by_name("orders");
  auto planned = h.plan(net::api::stream_delete, del);
  RILL_REQUIRE_OK(planned);
  BOOST_TEST(planned->command.has_delete_stream());
  BOOST_TEST(planned->command.delete_stream().stream_id() == 0u);
  auto deleted = h.change(net::api::stream_delete, del);
  RILL_REQUIRE_OK(deleted);
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_partition) ==
             (std::vector<std::uint64_t>{partition_namespace(0, 0, 0), partition_namespace(0, 0, 1),
                                         partition_namespace(0, 1, 0)}));
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_group) == std::vector<std::uint64_t>{group_namespace(0, 0, 0)});
  BOOST_TEST(deleted->paths_of(reconcile_kind::remove_topic_data) ==
             (std::vector<std::string>{"/data/groups/0/0", "/data/streams/0/topics/0", "/data/groups/0/1",
                                       "/data/streams/0/topics/1"}));
  BOOST_TEST(deleted->paths_of(reconcile_kind::remove_stream_data) ==
             (std::vector<std::string>{"/data/groups/0", "/data/streams/0"}));
  BOOST_TEST(deleted->ns_of(reconcile_kind::spawn_partition).empty());
  BOOST_TEST(deleted->steps.size() == 7u);
  BOOST_TEST(build_reply(deleted->reply, {}).empty());  // StreamDeleteReply has no fields
  BOOST_TEST((status_of(h.read(net::api::stream_get, get)) == net::status::stream_not_found));
}

BOOST_AUTO_TEST_CASE(stream_errors_bad_header_not_found_exists_and_names) {
  harness h;
  h.create_stream("orders");
  // A header that does not parse.
  BOOST_TEST(
      (status_of(plan_read(*h.state.view(), wire(net::api::stream_get), "\xff\xff\xff")) == net::status::bad_header));
  BOOST_TEST((status_of(plan_change(*h.state.view(), wire(net::api::stream_delete), "\xff\xff\xff", h.defaults,
                                    h.limits)) == net::status::bad_header));
  // No stream named: bad_header; an unknown one: stream_not_found.
  BOOST_TEST((status_of(h.read(net::api::stream_get, proto::StreamGetRequest{})) == net::status::bad_header));
  proto::StreamGetRequest missing;
  *missing.mutable_stream() = by_id(7);
  BOOST_TEST((status_of(h.read(net::api::stream_get, missing)) == net::status::stream_not_found));
  proto::StreamDeleteRequest del;
  *del.mutable_stream() = by_name("nope");
  BOOST_TEST((status_of(h.plan(net::api::stream_delete, del)) == net::status::stream_not_found));
  // What only the state tells, at the commit: exists. Names are refused by the plan already (and again at the
  // commit, which also replays old journals: metadata_state::check).
  proto::StreamCreateRequest again;
  again.set_name("orders");
  BOOST_TEST((status_of(h.change(net::api::stream_create, again)) == net::status::already_exists));
  proto::StreamCreateRequest bad;
  bad.set_name("no spaces");
  BOOST_TEST((status_of(h.plan(net::api::stream_create, bad)) == net::status::invalid_name));
  proto::MetadataCommand bad_command;
  bad_command.mutable_create_stream()->set_name("no spaces");
  BOOST_TEST((status_of(h.state.check(bad_command)) == net::status::invalid_name));
  bad.set_name(std::string(name_bytes_max + 1, 'a'));
  BOOST_TEST((status_of(h.change(net::api::stream_create, bad)) == net::status::invalid_name));
}

// '.' and '..' are refused for new names by the handlers, before anything is committed; the state still replays a
// journal in which an earlier build committed one (metadata_state::check keeps the old rule), with the same ids.
BOOST_AUTO_TEST_CASE(dot_names_are_refused_for_requests_and_replayed_from_old_journals) {
  harness h;
  h.create_stream("orders");
  for (const std::string dot : {".", ".."}) {
    BOOST_TEST_CONTEXT(dot) {
      proto::StreamCreateRequest stream;
      stream.set_name(dot);
      BOOST_TEST((status_of(h.plan(net::api::stream_create, stream)) == net::status::invalid_name));
      proto::StreamUpdateRequest rename;
      *rename.mutable_stream() = by_name("orders");
      rename.set_name(dot);
      BOOST_TEST((status_of(h.plan(net::api::stream_update, rename)) == net::status::invalid_name));
      proto::TopicCreateRequest topic;
      *topic.mutable_stream() = by_name("orders");
      topic.set_name(dot);
      BOOST_TEST((status_of(h.plan(net::api::topic_create, topic)) == net::status::invalid_name));
    }
  }
  // A journal of an earlier build: stream 1 named '.', then stream 2 'b' and a topic in it.
  metadata_state replayed;
  for (const std::string name : {"a", ".", "b"}) {
    proto::MetadataCommand c;
    c.mutable_create_stream()->set_name(name);
    RILL_REQUIRE_OK(replayed.check(c));
    replayed.apply(c);
  }
  const auto& streams = replayed.view()->streams;
  BOOST_REQUIRE(streams.size() == 3u);
  BOOST_TEST(streams.at(1).name == ".");
  BOOST_TEST(streams.at(2).name == "b");
}

BOOST_AUTO_TEST_CASE(a_topic_is_created_got_listed_updated_and_deleted) {
  harness h;
  h.create_stream("orders");
  h.create_stream("other");
  h.create_topic("other", "x", 1);
  auto created = h.create_topic("orders", "eu", 3);
  BOOST_TEST(created.ns_of(reconcile_kind::spawn_partition) == partitions_ns(0, 0, 0, 3));
  BOOST_TEST(created.steps.size() == 3u);  // nothing closed, destroyed or removed
  BOOST_TEST((created.reply.kind == reply_kind::topic));
  BOOST_REQUIRE(created.reply.topics.size() == 1u);
  BOOST_TEST(created.reply.topics[0].partitions.size() == 3u);
  proto::TopicCreateReply cr;
  BOOST_REQUIRE(cr.ParseFromString(fill_and_build(created.reply)));
  BOOST_TEST(cr.topic().name() == "eu");
  BOOST_TEST(cr.topic().stream_id() == 0u);
  BOOST_TEST(cr.topic().config().partitions() == 3u);
  BOOST_TEST(cr.topic().config().has_retention_ms());  // completed from the defaults
  BOOST_TEST(cr.topic().partitions_size() == 3);

  proto::TopicGetRequest get;
  *get.mutable_stream() = by_name("orders");
  *get.mutable_topic() = by_name("eu");
  auto got = h.read(net::api::topic_get, get);
  RILL_REQUIRE_OK(got);
  proto::TopicGetReply gr;
  BOOST_REQUIRE(gr.ParseFromString(fill_and_build(*got)));
  BOOST_TEST(gr.topic().id() == 0u);

  h.create_topic("orders", "us", 1);
  proto::TopicListRequest list;
  *list.mutable_stream() = by_name("orders");
  auto listed = h.read(net::api::topic_list, list);
  RILL_REQUIRE_OK(listed);
  BOOST_TEST((listed->kind == reply_kind::topics));
  proto::TopicListReply lr;
  BOOST_REQUIRE(lr.ParseFromString(fill_and_build(*listed)));
  BOOST_REQUIRE(lr.topics_size() == 2);
  BOOST_TEST(lr.topics(1).name() == "us");

  // A retention update is taken in place by every partition of the topic (issue 38, finding 10).
  proto::TopicUpdateRequest up;
  *up.mutable_stream() = by_name("orders");
  *up.mutable_topic() = by_name("eu");
  up.set_name("europe");
  up.mutable_config()->set_retention_ms(60'000);
  auto updated = h.change(net::api::topic_update, up);
  RILL_REQUIRE_OK(updated);
  BOOST_TEST(updated->ns_of(reconcile_kind::update_partition) == partitions_ns(0, 0, 0, 3));
  BOOST_TEST(updated->steps.size() == 3u);  // nothing closes; the other topics' partitions are untouched
  BOOST_TEST(updated->steps.back().config.retention_ms == 60'000u);
  proto::TopicUpdateReply ur;
  BOOST_REQUIRE(ur.ParseFromString(fill_and_build(updated->reply)));
  BOOST_TEST(ur.topic().name() == "europe");
  BOOST_TEST(ur.topic().config().retention_ms() == 60'000u);

  h.create_group("orders", "europe", "g1");
  h.create_group("orders", "europe", "g2");
  proto::TopicDeleteRequest del;
  *del.mutable_stream() = by_name("orders");
  *del.mutable_topic() = by_id(0);
  auto deleted = h.change(net::api::topic_delete, del);
  RILL_REQUIRE_OK(deleted);
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_partition) == partitions_ns(0, 0, 0, 3));
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_group) ==
             (std::vector<std::uint64_t>{group_namespace(0, 0, 0), group_namespace(0, 0, 1)}));
  BOOST_TEST(deleted->paths_of(reconcile_kind::remove_topic_data) ==
             (std::vector<std::string>{"/data/groups/0/0", "/data/streams/0/topics/0"}));
  BOOST_TEST(deleted->steps.size() == 6u);
  BOOST_TEST(build_reply(deleted->reply, {}).empty());
  BOOST_TEST((status_of(h.read(net::api::topic_get, get)) == net::status::topic_not_found));
}

BOOST_AUTO_TEST_CASE(topic_errors_not_found_exists_and_limits) {
  harness h;
  h.create_stream("orders");
  h.create_topic("orders", "eu", 1);
  proto::TopicCreateRequest req;
  *req.mutable_stream() = by_name("nope");
  req.set_name("x");
  BOOST_TEST((status_of(h.plan(net::api::topic_create, req)) == net::status::stream_not_found));
  *req.mutable_stream() = by_name("orders");
  req.mutable_config()->set_partitions(0);  // below the allowed range: refused before anything is committed
  BOOST_TEST((status_of(h.plan(net::api::topic_create, req)) == net::status::invalid_config));
  req.mutable_config()->set_partitions(100'001);
  BOOST_TEST((status_of(h.plan(net::api::topic_create, req)) == net::status::invalid_config));
  req.mutable_config()->set_partitions(1);
  req.set_name("eu");
  BOOST_TEST((status_of(h.change(net::api::topic_create, req)) == net::status::already_exists));
  proto::TopicGetRequest get;
  *get.mutable_stream() = by_name("orders");
  BOOST_TEST((status_of(h.read(net::api::topic_get, get)) == net::status::bad_header));  // no topic named
  *get.mutable_topic() = by_name("us");
  BOOST_TEST((status_of(h.read(net::api::topic_get, get)) == net::status::topic_not_found));
  proto::TopicUpdateRequest up;
  *up.mutable_stream() = by_name("orders");
  *up.mutable_topic() = by_id(5);
  BOOST_TEST((status_of(h.plan(net::api::topic_update, up)) == net::status::topic_not_found));
  proto::TopicDeleteRequest del;
  *del.mutable_stream() = by_id(3);
  BOOST_TEST((status_of(h.plan(net::api::topic_delete, del)) == net::status::stream_not_found));
  proto::TopicListRequest list;
  *list.mutable_stream() = by_id(3);
  BOOST_TEST((status_of(h.read(net::api::topic_list, list)) == net::status::stream_not_found));
}

BOOST_AUTO_TEST_CASE(partitions_are_added_and_deleted_and_the_groups_resized) {
  harness h;
  h.create_stream("orders");
  h.create_topic("orders", "eu", 2);
  h.create_group("orders", "eu", "a");
  h.create_group("orders", "eu", "b");
  proto::PartitionsAddRequest add;
  *add.mutable_stream() = by_name("orders");
  *add.mutable_topic() = by_name("eu");
  add.set_count(3);
  auto added = h.change(net::api::partitions_add, add);
  RILL_REQUIRE_OK(added);
  BOOST_TEST(added->ns_of(reconcile_kind::spawn_partition) == partitions_ns(0, 0, 2, 5));  // the others keep running
  BOOST_TEST(added->ns_of(reconcile_kind::resize_group) ==
             (std::vector<std::uint64_t>{group_namespace(0, 0, 0), group_namespace(0, 0, 1)}));
  BOOST_TEST(added->steps.size() == 5u);
  BOOST_TEST(added->steps.back().partitions == 5u);
  proto::PartitionsAddReply ar;
  BOOST_REQUIRE(ar.ParseFromString(fill_and_build(added->reply)));
  BOOST_TEST(ar.topic().config().partitions() == 5u);
  BOOST_TEST(ar.topic().partitions_size() == 5);

  proto::PartitionsDeleteRequest del;
  *del.mutable_stream() = by_name("orders");
  *del.mutable_topic() = by_name("eu");
  del.set_count(2);
  auto deleted = h.change(net::api::partitions_delete, del);
  RILL_REQUIRE_OK(deleted);
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_partition) == partitions_ns(0, 0, 3, 5));
  BOOST_TEST(deleted->ns_of(reconcile_kind::resize_group).size() == 2u);
  BOOST_TEST(deleted->steps.size() == 4u);
  BOOST_TEST(deleted->steps.back().partitions == 3u);
  proto::PartitionsDeleteReply dr;
  BOOST_REQUIRE(dr.ParseFromString(fill_and_build(deleted->reply)));
  BOOST_TEST(dr.topic().partitions_size() == 3);

  // All of them, or more than the topic has: refused at the commit (a topic keeps one).
  del.set_count(3);
  BOOST_TEST((status_of(h.change(net::api::partitions_delete, del)) == net::status::invalid_config));
  del.set_count(9);
  BOOST_TEST((status_of(h.change(net::api::partitions_delete, del)) == net::status::invalid_config));
  *del.mutable_topic() = by_name("us");
  BOOST_TEST((status_of(h.plan(net::api::partitions_delete, del)) == net::status::topic_not_found));
  BOOST_TEST(h.state.view()->streams.at(0).topics.at(0).config.partitions() == 3u);
}

BOOST_AUTO_TEST_CASE(a_group_is_created_listed_and_deleted) {
  harness h;
  h.create_stream("orders");
  h.create_topic("orders", "eu", 2);
  auto created = h.create_group("orders", "eu", "audit");
  BOOST_TEST(created.ns_of(reconcile_kind::spawn_group) == std::vector<std::uint64_t>{group_namespace(0, 0, 0)});
  BOOST_REQUIRE(created.steps.size() == 1u);
  BOOST_TEST(created.steps[0].partitions == 2u);
  BOOST_TEST((created.reply.kind == reply_kind::group));
  BOOST_TEST(created.reply.groups == std::vector<std::uint64_t>{group_namespace(0, 0, 0)});
  const std::string described = described_group(0, "audit");
  proto::GroupCreateReply cr;
  BOOST_REQUIRE(cr.ParseFromString(build_reply(created.reply, std::span(&described, 1))));
  BOOST_TEST(cr.group().name() == "audit");
  BOOST_TEST(h.state.view()->streams.at(0).topics.at(0).groups.at(0).config.session_timeout_ms() ==
             session_timeout_ms_default);
  h.create_group("orders", "eu", "billing");

  proto::GroupListRequest list;
  *list.mutable_stream() = by_name("orders");
  *list.mutable_topic() = by_name("eu");
  auto listed = h.read(net::api::group_list, list);
  RILL_REQUIRE_OK(listed);
  BOOST_TEST((listed->kind == reply_kind::groups));
  BOOST_TEST(listed->groups == (std::vector<std::uint64_t>{group_namespace(0, 0, 0), group_namespace(0, 0, 1)}));
  const std::vector<std::string> both{described_group(0, "audit"), described_group(1, "billing")};
  proto::GroupListReply lr;
  BOOST_REQUIRE(lr.ParseFromString(build_reply(*listed, both)));
  BOOST_REQUIRE(lr.groups_size() == 2);
  BOOST_TEST(lr.groups(1).name() == "billing");

  proto::GroupDeleteRequest del;
  *del.mutable_stream() = by_name("orders");
  *del.mutable_topic() = by_name("eu");
  *del.mutable_group() = by_name("audit");
  auto deleted = h.change(net::api::group_delete, del);
  RILL_REQUIRE_OK(deleted);
  BOOST_TEST(deleted->ns_of(reconcile_kind::destroy_group) == std::vector<std::uint64_t>{group_namespace(0, 0, 0)});
  BOOST_TEST(deleted->steps.size() == 1u);  // the group actor removes its own state
  BOOST_TEST(build_reply(deleted->reply, {}).empty());
  BOOST_TEST((status_of(h.change(net::api::group_delete, del)) == net::status::group_not_found));
}

BOOST_AUTO_TEST_CASE(group_errors_exists_config_and_limits) {
  harness h;
  h.create_stream("orders");
  h.create_topic("orders", "eu", 1);
  h.create_group("orders", "eu", "audit");
  proto::GroupCreateRequest req;
  *req.mutable_stream() = by_name("orders");
  *req.mutable_topic() = by_name("eu");
  req.set_name("audit");
  BOOST_TEST((status_of(h.change(net::api::group_create, req)) == net::status::already_exists));
  req.set_name("other");
  req.mutable_config()->set_session_timeout_ms(session_timeout_ms_min - 1);
  BOOST_TEST((status_of(h.plan(net::api::group_create, req)) == net::status::invalid_config));
  req.mutable_config()->set_session_timeout_ms(session_timeout_ms_max + 1);
  BOOST_TEST((status_of(h.plan(net::api::group_create, req)) == net::status::invalid_config));
  req.clear_config();
  *req.mutable_topic() = by_name("us");
  BOOST_TEST((status_of(h.plan(net::api::group_create, req)) == net::status::topic_not_found));
  proto::GroupDeleteRequest del;
  *del.mutable_stream() = by_name("orders");
  *del.mutable_topic() = by_name("eu");
  BOOST_TEST((status_of(h.plan(net::api::group_delete, del)) == net::status::bad_header));  // no group named
  proto::GroupListRequest list;
  *list.mutable_stream() = by_name("orders");
  *list.mutable_topic() = by_id(4);
  BOOST_TEST((status_of(h.read(net::api::group_list, list)) == net::status::topic_not_found));
  // A topic holds groups_per_topic_max groups at most (the state's own bound, above the configured limit's range).
  h.limits.groups_per_topic_max = config::groups_per_topic_limit;
  *req.mutable_topic() = by_name("eu");
  for (std::size_t g = 1; g < groups_per_topic_max; ++g) {
    req.set_name("g" + std::to_string(g));
    RILL_REQUIRE_OK(h.change(net::api::group_create, req));
  }
  req.set_name("one-too-many");
  BOOST_TEST((status_of(h.change(net::api::group_create, req)) == net::status::limit_exceeded));
}

BOOST_AUTO_TEST_CASE(stats_count_streams_and_topics_the_actor_adds_the_rest) {
  harness h;
  h.create_stream("a");
  h.create_stream("b");
  h.create_topic("a", "x", 2);
  h.create_topic("a", "y", 1);
  h.create_topic("b", "z", 4);
  auto plan = h.read(net::api::stats, proto::StatsRequest{});
  RILL_REQUIRE_OK(plan);
  BOOST_TEST((plan->kind == reply_kind::stats));
  plan->stats.set_partitions(7);
  proto::StatsReply r;
  BOOST_REQUIRE(r.ParseFromString(build_reply(*plan, {})));
  BOOST_TEST(r.streams() == 2u);
  BOOST_TEST(r.topics() == 3u);
  BOOST_TEST(r.partitions() == 7u);
}

BOOST_AUTO_TEST_CASE(apis_that_are_not_metadata_are_refused) {
  harness h;
  BOOST_TEST((status_of(plan_read(*h.state.view(), wire(net::api::stream_create), "")) == net::status::unknown_api));
  BOOST_TEST((status_of(plan_change(*h.state.view(), wire(net::api::stream_get), "", h.defaults, h.limits)) ==
              net::status::unknown_api));
  BOOST_TEST((status_of(plan_change(*h.state.view(), wire(net::api::produce), "", h.defaults, h.limits)) ==
              net::status::unknown_api));
  BOOST_TEST((status_of(plan_change(*h.state.view(), 9999, "", h.defaults, h.limits)) == net::status::unknown_api));
  BOOST_TEST((status_of(plan_read(*h.state.view(), 9999, "")) == net::status::unknown_api));
}

BOOST_AUTO_TEST_CASE(recovery_keeps_the_data_the_view_knows) {
  harness h;
  h.create_stream("a");
  h.create_topic("a", "x", 2);
  h.create_group("a", "x", "g");
  const auto& v = *h.state.view();
  using ids = std::vector<std::uint64_t>;
  BOOST_TEST(data_tree_root("/data", data_tree::groups) == "/data/groups");
  BOOST_TEST(data_tree_root("/data/", data_tree::streams) == "/data/streams");
  BOOST_TEST(data_tree_children(data_tree::streams, "/d/streams", 0) == "/d/streams");
  BOOST_TEST(data_tree_children(data_tree::streams, "/d/streams/0", 1) == "/d/streams/0/topics");
  BOOST_TEST(data_tree_children(data_tree::streams, "/d/streams/0/topics/0", 2) == "/d/streams/0/topics/0/partitions");
  BOOST_TEST(data_tree_children(data_tree::groups, "/d/groups/0", 1) == "/d/groups/0");

  BOOST_TEST((known_data_entry(v, data_tree::streams, ids{}, "0") == std::optional<std::uint64_t>(0)));
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{}, "1").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{}, "x0").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{}, "0x").has_value());
  BOOST_TEST(known_data_entry(v, data_tree::streams, ids{0}, "0").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{0}, "1").has_value());
  BOOST_TEST(known_data_entry(v, data_tree::streams, ids{0, 0}, "1").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{0, 0}, "2").has_value());  // partition 2 of 2
  BOOST_TEST(!known_data_entry(v, data_tree::streams, ids{0, 0}, "4294967296").has_value());
  BOOST_TEST(known_data_entry(v, data_tree::groups, ids{0, 0}, "0").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::groups, ids{0, 0}, "1").has_value());
  BOOST_TEST(!known_data_entry(v, data_tree::groups, ids{0, 3}, "0").has_value());
  BOOST_TEST(partition_dir("/data", 1, 2, 3) == "/data/streams/1/topics/2/partitions/3");
}

namespace {
// The refusal of a limit: limit_exceeded, naming the key and its value; nothing was committed.
void refused_by(const expected<metadata_change>& planned, const std::string& key_and_value) {
  BOOST_REQUIRE(!planned.has_value());
  BOOST_TEST((status_of(planned) == net::status::limit_exceeded));
  BOOST_TEST(planned.error().message().find(key_and_value) != std::string::npos, planned.error().message());
}
}  // namespace

BOOST_AUTO_TEST_CASE(every_limit_refuses_before_the_commit_and_names_its_key) {
  harness h;
  h.limits.streams_max = 2;
  h.limits.topics_per_stream_max = 2;
  h.limits.partitions_per_topic_max = 10;
  h.limits.partitions_max = 15;
  h.limits.groups_per_topic_max = 2;
  h.limits.groups_max = 3;
  h.create_stream("a");
  h.create_stream("b");
  proto::StreamCreateRequest stream;
  stream.set_name("c");
  refused_by(h.plan(net::api::stream_create, stream), "limits.streams_max = 2");

  h.create_topic("a", "x", 10);
  proto::TopicCreateRequest topic;
  *topic.mutable_stream() = by_name("a");
  topic.set_name("y");
  topic.mutable_config()->set_partitions(11);
  refused_by(h.plan(net::api::topic_create, topic), "limits.partitions_per_topic_max = 10");
  topic.mutable_config()->set_partitions(6);  // 10 + 6 > 15 on the node
  refused_by(h.plan(net::api::topic_create, topic), "limits.partitions_max = 15");
  topic.mutable_config()->set_partitions(5);
  RILL_REQUIRE_OK(h.change(net::api::topic_create, topic));
  topic.set_name("z");
  topic.mutable_config()->set_partitions(1);
  refused_by(h.plan(net::api::topic_create, topic), "limits.topics_per_stream_max = 2");

  // Adding partitions is checked the same way.
  proto::PartitionsAddRequest add;
  *add.mutable_stream() = by_name("a");
  *add.mutable_topic() = by_name("x");
  add.set_count(1);
  refused_by(h.plan(net::api::partitions_add, add), "limits.partitions_per_topic_max = 10");
  *add.mutable_topic() = by_name("y");
  refused_by(h.plan(net::api::partitions_add, add), "limits.partitions_max = 15");
  add.set_count(4'000'000'000u);  // no overflow
  refused_by(h.plan(net::api::partitions_add, add), "limits.partitions_per_topic_max = 10");

  h.create_group("a", "x", "g1");
  h.create_group("a", "x", "g2");
  proto::GroupCreateRequest group;
  *group.mutable_stream() = by_name("a");
  *group.mutable_topic() = by_name("x");
  group.set_name("g3");
  refused_by(h.plan(net::api::group_create, group), "limits.groups_per_topic_max = 2");
  h.create_group("a", "y", "g1");
  *group.mutable_topic() = by_name("y");
  refused_by(h.plan(net::api::group_create, group), "limits.groups_max = 3");

  // Deleting makes room again; what exists beyond a lowered limit stays, only growth is refused.
  proto::TopicDeleteRequest del;
  *del.mutable_stream() = by_name("a");
  *del.mutable_topic() = by_name("y");
  RILL_REQUIRE_OK(h.change(net::api::topic_delete, del));
  RILL_REQUIRE_OK(h.change(net::api::topic_create, topic));
  h.limits.partitions_max = 1;
  BOOST_TEST(h.state.view()->partition_count() == 11u);
  RILL_REQUIRE_OK(h.change(net::api::topic_update, [] {
    proto::TopicUpdateRequest up;
    *up.mutable_stream() = by_name("a");
    *up.mutable_topic() = by_name("z");
    up.mutable_config()->set_retention_ms(1000);
    return up;
  }()));
  *del.mutable_topic() = by_name("z");
  RILL_REQUIRE_OK(h.change(net::api::topic_delete, del));
  BOOST_TEST(h.state.view()->partition_count() == 10u);
}

// The request: 100,000 partitions in one topic, refused under the default limits before anything is
// committed (the state does not change).
BOOST_AUTO_TEST_CASE(a_hundred_thousand_partitions_are_refused_by_default) {
  harness h;
  h.create_stream("s");
  const auto version = h.state.view()->version;
  proto::TopicCreateRequest topic;
  *topic.mutable_stream() = by_name("s");
  topic.set_name("huge");
  topic.mutable_config()->set_partitions(100'000);
  refused_by(h.plan(net::api::topic_create, topic),
             fmt::format("limits.partitions_per_topic_max = {}", config::resource_limits{}.partitions_per_topic_max));
  BOOST_TEST(h.state.view()->version == version);
  topic.mutable_config()->set_partitions(static_cast<std::uint32_t>(config::resource_limits{}.partitions_max));
  RILL_REQUIRE_OK(h.change(net::api::topic_create, topic));
  proto::TopicCreateRequest one = topic;
  one.set_name("one");
  one.mutable_config()->set_partitions(1);
  refused_by(h.plan(net::api::topic_create, one), "limits.partitions_max");
}

// Issue 13 point 10: topic ids are 12 bits; creating and deleting a topic 5,000 times in a stream (a test suite's
// topic per test) still creates, and every reused id's directories are named for removal before the commit.
BOOST_AUTO_TEST_CASE(ids_are_reused_once_their_topic_is_gone) {
  harness h;
  h.create_stream("s");
  h.create_topic("s", "keeper", 1);  // id 0 stays live: the cursor skips it when it comes round
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 5'000; ++i) {
    proto::TopicCreateRequest req;
    *req.mutable_stream() = by_name("s");
    req.set_name("t" + std::to_string(i));
    auto planned = h.plan(net::api::topic_create, req);
    RILL_REQUIRE_OK(planned);
    BOOST_REQUIRE(planned->created_id.has_value());
    const std::uint32_t id = *planned->created_id;
    BOOST_REQUIRE(id != 0u);
    BOOST_REQUIRE(id < topic_ids_max);
    BOOST_TEST(
        leftovers_of(*planned, h.data_dir) == (std::vector<std::string>{fmt::format("/data/groups/0/{}", id),
                                                                        fmt::format("/data/streams/0/topics/{}", id)}),
        boost::test_tools::per_element());
    auto e = h.change(net::api::topic_create, req);
    RILL_REQUIRE_OK(e);
    BOOST_REQUIRE(e->steps.size() == 1u);
    BOOST_REQUIRE(e->steps[0].kind == reconcile_kind::spawn_partition);
    BOOST_REQUIRE(e->steps[0].topic_id == id);  // the commit assigned the planned id
    seen.insert(id);
    proto::TopicDeleteRequest del;
    *del.mutable_stream() = by_name("s");
    *del.mutable_topic() = by_name(req.name());
    RILL_REQUIRE_OK(h.change(net::api::topic_delete, del));
  }
  BOOST_TEST(seen.size() == topic_ids_max - 1);  // every id but the keeper's came round
  BOOST_TEST(h.state.view()->streams.at(0).topics.size() == 1u);
  // Streams and groups go round the same way; partitions added back after a delete name their directories too.
  for (int i = 0; i < 3; ++i) {
    proto::StreamCreateRequest s;
    s.set_name("gone");
    auto planned = h.plan(net::api::stream_create, s);
    RILL_REQUIRE_OK(planned);
    BOOST_TEST(leftovers_of(*planned, h.data_dir).size() == 2u);
    RILL_REQUIRE_OK(h.change(net::api::stream_create, s));
    proto::StreamDeleteRequest d;
    *d.mutable_stream() = by_name("gone");
    RILL_REQUIRE_OK(h.change(net::api::stream_delete, d));
  }
  h.create_topic("s", "p", 3);
  proto::PartitionsDeleteRequest pd;
  *pd.mutable_stream() = by_name("s");
  *pd.mutable_topic() = by_name("p");
  pd.set_count(2);
  RILL_REQUIRE_OK(h.change(net::api::partitions_delete, pd));
  proto::PartitionsAddRequest pa;
  *pa.mutable_stream() = by_name("s");
  *pa.mutable_topic() = by_name("p");
  pa.set_count(2);
  auto planned = h.plan(net::api::partitions_add, pa);
  RILL_REQUIRE_OK(planned);
  const std::uint32_t tid = planned->topic_id;
  BOOST_TEST(leftovers_of(*planned, h.data_dir) ==
                 (std::vector<std::string>{partition_dir("/data", 0, tid, 1), partition_dir("/data", 0, tid, 2)}),
             boost::test_tools::per_element());
}
