// The real rilld over real sockets: streams, topics, produce and poll round trips through the client library,
// every poll strategy, long polls, consumer offsets, errors, restarts and SIGKILL.
#define BOOST_TEST_MODULE rill_integration
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <set>
#include <thread>

#include "net/client.h"
#include "storage/record_batch_builder.h"
#include "tests/integration/rilld_process.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::net;
using rill::testing::rilld_process;
using rill::testing::temp_data_dir;

namespace {
struct server {
  server() : proc(dir.path() + "/data") {
    auto a = proc.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "rilld did not start:\n" << proc.log());
    connect();
  }
  void connect() {
    client_options o;
    o.server = proc.address();
    auto c = client::connect(o);
    BOOST_REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error().message()));
    cli = std::move(*c);
  }
  void restart() {
    cli.reset();
    BOOST_TEST(proc.stop() == 0);
    auto a = proc.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "rilld did not restart:\n" << proc.log());
    connect();
  }
  temp_data_dir dir;
  rilld_process proc;
  std::unique_ptr<client> cli;
};

status status_of(const rill::error& e) {
  return static_cast<status>(e.code().value());
}

std::vector<std::byte> batch_of(std::initializer_list<std::pair<std::string, std::string>> kvs) {
  storage::batch_builder b;
  for (const auto& [k, v] : kvs) {
    b.add(k, v);
  }
  return *b.build();
}

proto::PollRequest poll_request(const std::string& stream, const std::string& topic, std::uint32_t partition,
                                proto::PollStrategy::Kind kind, std::uint64_t value = 0) {
  proto::PollRequest p;
  *p.mutable_stream() = by_name(stream);
  *p.mutable_topic() = by_name(topic);
  p.set_partition_id(partition);
  p.mutable_strategy()->set_kind(kind);
  p.mutable_strategy()->set_value(value);
  return p;
}
}  // namespace

BOOST_AUTO_TEST_CASE(streams_topics_produce_poll_and_restart) {
  server s;
  auto pong = s.cli->ping();
  RILL_REQUIRE_OK(pong);
  BOOST_TEST(pong->version().find("rill") != std::string::npos);

  auto stream = s.cli->create_stream("orders");
  RILL_REQUIRE_OK(stream);
  BOOST_TEST(stream->name() == "orders");
  auto dup = s.cli->create_stream("orders");
  BOOST_REQUIRE(!dup.has_value());
  BOOST_TEST((status_of(dup.error()) == status::already_exists));
  auto badname = s.cli->create_stream("no spaces");
  BOOST_REQUIRE(!badname.has_value());
  BOOST_TEST((status_of(badname.error()) == status::invalid_name));

  proto::TopicConfig cfg;
  cfg.set_partitions(3);
  auto topic = s.cli->create_topic(by_name("orders"), "eu", cfg);
  RILL_REQUIRE_OK(topic);
  BOOST_TEST(topic->partitions_size() == 3);
  proto::TopicConfig rf;
  rf.set_replication_factor(3);
  auto refused = s.cli->create_topic(by_name("orders"), "replicated", rf);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((status_of(refused.error()) == status::invalid_config));
  BOOST_TEST(refused.error().detail().find("replication_factor") != std::string::npos);

  auto p0 = s.cli->produce(by_name("orders"), by_name("eu"), 0, batch_of({{"k1", "v1"}, {"k2", "v2"}}));
  RILL_REQUIRE_OK(p0);
  BOOST_TEST(p0->base_offsets(0) == 0u);
  auto p1 = s.cli->produce(by_name("orders"), by_name("eu"), 0, batch_of({{"k3", "v3"}}));
  RILL_REQUIRE_OK(p1);
  BOOST_TEST(p1->base_offsets(0) == 2u);

  auto polled = s.cli->poll(poll_request("orders", "eu", 0, proto::PollStrategy::FIRST));
  RILL_REQUIRE_OK(polled);
  auto records = decode_records(0, polled->batches);
  RILL_REQUIRE_OK(records);
  BOOST_REQUIRE(records->size() == 3u);
  BOOST_TEST(*(*records)[0].value == "v1");
  BOOST_TEST(*(*records)[2].key == "k3");
  BOOST_TEST(polled->header.high_watermark() == 3u);

  // Unknown things.
  auto nostream = s.cli->produce(by_name("nope"), by_name("eu"), 0, batch_of({{"k", "v"}}));
  BOOST_TEST((status_of(nostream.error()) == status::stream_not_found));
  auto notopic = s.cli->produce(by_name("orders"), by_name("nope"), 0, batch_of({{"k", "v"}}));
  BOOST_TEST((status_of(notopic.error()) == status::topic_not_found));
  auto nopart = s.cli->produce(by_name("orders"), by_name("eu"), 7, batch_of({{"k", "v"}}));
  BOOST_TEST((status_of(nopart.error()) == status::partition_not_found));

  s.restart();
  auto again = s.cli->poll(poll_request("orders", "eu", 0, proto::PollStrategy::FIRST));
  RILL_REQUIRE_OK(again);
  BOOST_TEST(again->header.records() == 3u);
  auto listed = s.cli->list_streams();
  RILL_REQUIRE_OK(listed);
  BOOST_REQUIRE(listed->size() == 1u);
  auto p2 = s.cli->produce(by_name("orders"), by_name("eu"), 0, batch_of({{"k4", "v4"}}));
  RILL_REQUIRE_OK(p2);
  BOOST_TEST(p2->base_offsets(0) == 3u);
}
