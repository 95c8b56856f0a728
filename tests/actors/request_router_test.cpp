#define BOOST_TEST_MODULE rill_actor_handlers
// request_router without CAF: every API's decision, every error a request gets before it reaches another actor
// (with the exact message the connection actor sends), the balanced choice, and the reply frames.
#include <boost/test/unit_test.hpp>

#include <set>
#include <tuple>

#include <fmt/core.h>
#include "actors/reply_encoding.h"
#include "actors/request_router.h"

#include "base/endian.h"
#include "net/frame.h"
#include "storage/crc32c.h"
#include "storage/record_batch_builder.h"
#include "tests/actors/orders_catalogue.h"
#include "tests/storage/tampered_batch.h"

using namespace rill;
using namespace rill::actors;

namespace {
// Actors present unless listed as missing.
struct fake_directory final : actor_directory {
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> missing_partitions;
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> missing_groups;
  bool has_partition(std::uint32_t s, std::uint32_t t, std::uint32_t p) const override {
    return !missing_partitions.count({s, t, p});
  }
  bool has_group(std::uint32_t s, std::uint32_t t, std::uint32_t g) const override {
    return !missing_groups.count({s, t, g});
  }
};

proto::Identifier named(const std::string& n) {
  proto::Identifier id;
  id.set_name(n);
  return id;
}

metadata_view make_view() {
  return testing::orders_catalogue();
}

struct fixture {
  metadata_view view = make_view();
  fake_directory actors;
  std::uint32_t balanced = 0;
  manual_clock clk;
  std::vector<std::byte> frame;  // the last request, kept alive for its view

  template <class M>
  route_decision route(net::api a, const M& header, std::vector<std::byte> batches = {}, std::uint16_t version = 1,
                       std::uint16_t api_wire = 0) {
    frame.clear();
    net::append_request(frame, 42, a, header, batches);
    auto req = net::parse_request(frame);
    BOOST_REQUIRE(req.has_value());
    req->version = version;
    if (api_wire != 0) {
      req->api_wire = api_wire;
    }
    return route_request(*req, view, actors, balanced, clk);
  }
  // A request whose header is these raw bytes.
  route_decision route_raw(net::api a, const std::string& header) {
    frame.clear();
    proto::PingRequest empty;
    net::append_request(frame, 42, a, empty);
    auto req = net::parse_request(frame);
    BOOST_REQUIRE(req.has_value());
    req->header = std::span<const std::byte>(reinterpret_cast<const std::byte*>(header.data()), header.size());
    return route_request(*req, view, actors, balanced, clk);
  }
};

void check_error(const route_decision& d, net::status st, const std::string& message) {
  const auto* e = std::get_if<reply_error>(&d);
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(static_cast<int>(e->st) == static_cast<int>(st));
  BOOST_TEST(e->message == message);
}

proto::ProduceRequest produce_to(const std::string& stream, const std::string& topic,
                                 std::optional<std::uint32_t> partition) {
  proto::ProduceRequest h;
  *h.mutable_stream() = named(stream);
  *h.mutable_topic() = named(topic);
  if (partition) {
    h.mutable_partitioning()->set_partition_id(*partition);
  } else {
    h.mutable_partitioning()->set_balanced(true);
  }
  return h;
}

std::vector<std::byte> a_batch(const std::string& value = "v") {
  storage::batch_builder b;
  b.add("k", value);
  return *b.build();
}
const std::vector<std::byte> one_batch = a_batch();

std::uint32_t chosen_partition(const route_decision& d) {
  const auto* p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  return p->partition.partition_id;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(request_router_suite)

BOOST_AUTO_TEST_CASE(unknown_api_and_bad_version) {
  fixture f;
  proto::PingRequest ping;
  check_error(f.route(net::api::ping, ping, {}, 1, 999), net::status::unknown_api, "api 999 does not exist");
  check_error(f.route(net::api::ping, ping, {}, 2), net::status::unsupported_version,
              "protocol version 2 (this server speaks 1)");
}

BOOST_AUTO_TEST_CASE(ping_answers_at_once_and_login_is_unsupported) {
  fixture f;
  proto::PingRequest ping;
  auto d = f.route(net::api::ping, ping);
  const auto* r = std::get_if<reply_frame>(&d);
  BOOST_REQUIRE(r != nullptr);
  auto reply = net::parse_reply(r->frame);
  BOOST_REQUIRE(reply.has_value());
  BOOST_TEST(reply->correlation_id == 42u);
  proto::PingReply p;
  BOOST_REQUIRE(p.ParseFromArray(reply->header.data(), static_cast<int>(reply->header.size())));
  BOOST_TEST(p.server_time_ms() == static_cast<std::uint64_t>(f.clk.wall_ms().value()));
  BOOST_TEST(p.version() == server_version);
  proto::LoginRequest login;
  check_error(f.route(net::api::login, login), net::status::unsupported,
              "authentication arrives with a later version; no login is needed");
}

BOOST_AUTO_TEST_CASE(bad_headers) {
  fixture f;
  const std::string garbage = "\xff\xff\xff";
  for (auto a : {net::api::produce, net::api::poll, net::api::offset_get, net::api::offset_store, net::api::group_join,
                 net::api::group_commit}) {
    check_error(f.route_raw(a, garbage), net::status::bad_header, "the request header does not parse");
  }
}

BOOST_AUTO_TEST_CASE(unknown_stream_topic_and_partition) {
  fixture f;
  check_error(f.route(net::api::produce, produce_to("nope", "eu", 0), one_batch), net::status::stream_not_found,
              "stream 'nope' not found");
  check_error(f.route(net::api::produce, produce_to("orders", "asia", 0), one_batch), net::status::topic_not_found,
              "topic 'asia' not found in stream 'orders'");
  check_error(f.route(net::api::produce, produce_to("orders", "eu", 4), one_batch), net::status::partition_not_found,
              "partition 4 not found in topic 'eu' (4 partitions)");
  proto::ProduceRequest no_stream = produce_to("orders", "eu", 0);
  no_stream.clear_stream();
  check_error(f.route(net::api::produce, no_stream, one_batch), net::status::bad_header, "no stream given");
  f.actors.missing_partitions.insert({3, 5, 2});
  check_error(f.route(net::api::produce, produce_to("orders", "eu", 2), one_batch), net::status::unavailable,
              "the partition is being created or deleted; retry");
  BOOST_TEST(f.balanced == 0u);  // explicit partitions leave the counter alone
}

BOOST_AUTO_TEST_CASE(produce_goes_to_the_partition_with_its_batches) {
  fixture f;
  auto d = f.route(net::api::produce, produce_to("orders", "eu", 2), one_batch);
  const auto* p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  BOOST_TEST(p->partition.stream_id == 3u);
  BOOST_TEST(p->partition.topic_id == 5u);
  BOOST_TEST(p->partition.partition_id == 2u);
  const auto* call = std::get_if<produce_call>(&p->call);
  BOOST_REQUIRE(call != nullptr);
  BOOST_REQUIRE(call->batches != nullptr);
  BOOST_TEST((std::vector<std::byte>(call->batches->bytes().begin(), call->batches->bytes().end()) == one_batch));
  BOOST_TEST(call->batches->batches().size() == 1u);
  check_error(f.route(net::api::produce, produce_to("orders", "eu", 2)), net::status::invalid_batch,
              "a produce request carries at least one batch");
}

// The router validates a produce's batches in the request's bytes, each once and in full, and answers a bad one
// itself with the status the partition used to give it; only a request whose batches all pass is copied (once).
BOOST_AUTO_TEST_CASE(produce_batches_are_validated_in_place_and_a_bad_one_is_answered_at_once) {
  namespace bf = storage::batch_format;
  fixture f;
  auto route_eu = [&](const std::vector<std::byte>& batches) {
    return f.route(net::api::produce, produce_to("orders", "eu", 0), batches);
  };
  auto refused = [](const route_decision& d) -> const reply_error& {
    const auto* e = std::get_if<reply_error>(&d);
    BOOST_REQUIRE(e != nullptr);
    return *e;
  };
  // A flipped record byte: the CRC.
  auto flipped = one_batch;
  flipped.back() ^= std::byte{1};
  const auto crc = refused(route_eu(flipped));
  BOOST_TEST(static_cast<int>(crc.st) == static_cast<int>(net::status::crc_mismatch));
  BOOST_TEST(crc.message.starts_with("batch 0 (byte 0 of the request): "), crc.message);
  // A producer id written over a plain batch, its CRC left alone: refused for the CRC, not for the fields (which
  // are never looked at before the CRC passed).
  auto forged = one_batch;
  store_be<std::int64_t>(forged.data() + bf::producer_id_at, 42);
  BOOST_TEST(static_cast<int>(refused(route_eu(forged)).st) == static_cast<int>(net::status::crc_mismatch));
  // The same fields with the CRC recomputed: now the fields.
  store_be<std::uint32_t>(forged.data() + bf::crc_at,
                          storage::crc32c(forged.data() + bf::attributes_at, forged.size() - bf::attributes_at));
  const auto fields = refused(route_eu(forged));
  BOOST_TEST(static_cast<int>(fields.st) == static_cast<int>(net::status::invalid_producer_fields));
  BOOST_TEST(fields.message.find("producer_id 42 with producer_epoch -1") != std::string::npos, fields.message);
  // The second batch bad: the whole request refused, naming it and its byte.
  auto two = one_batch;
  two.insert(two.end(), flipped.begin(), flipped.end());
  const auto second = refused(route_eu(two));
  BOOST_TEST(second.message.starts_with(fmt::format("batch 1 (byte {} of the request): ", one_batch.size())),
             second.message);
  // Truncated.
  const auto cut = refused(route_eu(std::vector<std::byte>(one_batch.begin(), one_batch.end() - 1)));
  BOOST_TEST(static_cast<int>(cut.st) == static_cast<int>(net::status::invalid_batch));
  BOOST_TEST(cut.message.find("truncated") != std::string::npos, cut.message);
  // The topic's max_message_bytes ('eu': 1 MiB); a topic without one in the view gets the absolute limit (its log
  // checks its own).
  const auto large = a_batch(std::string((1 << 20) + 100, 'x'));
  const auto over = refused(route_eu(large));
  BOOST_TEST(static_cast<int>(over.st) == static_cast<int>(net::status::batch_too_large));
  BOOST_TEST(over.message.find("exceeds the limit of 1048576 bytes") != std::string::npos, over.message);
  auto us = f.route(net::api::produce, produce_to("orders", "us", 0), large);
  BOOST_TEST(std::holds_alternative<to_partition>(us));
  // Two good batches: one request, both listed with their producer fields.
  auto good = one_batch;
  good.insert(good.end(), one_batch.begin(), one_batch.end());
  auto d = route_eu(good);
  const auto* p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  const auto& call = std::get<produce_call>(p->call);
  BOOST_REQUIRE(call.batches->batches().size() == 2u);
  BOOST_TEST(call.batches->batches()[1].position == one_batch.size());
  BOOST_TEST(call.batches->batches()[1].producer_id == -1);
  BOOST_TEST(call.batches->bytes().size() == good.size());
}

BOOST_AUTO_TEST_CASE(balanced_produces_go_round_robin) {
  fixture f;
  std::vector<std::uint32_t> chosen;
  for (int i = 0; i < 6; ++i) {
    chosen.push_back(chosen_partition(f.route(net::api::produce, produce_to("orders", "eu", std::nullopt), one_batch)));
  }
  BOOST_TEST(chosen == (std::vector<std::uint32_t>{0, 1, 2, 3, 0, 1}));
  // The counter is the connection's, shared by its topics; a topic not found does not advance it.
  BOOST_TEST(chosen_partition(f.route(net::api::produce, produce_to("orders", "us", std::nullopt), one_batch)) == 0u);
  BOOST_TEST(f.balanced == 7u);
  (void)f.route(net::api::produce, produce_to("orders", "asia", std::nullopt), one_batch);
  BOOST_TEST(f.balanced == 7u);
  // A missing partition actor still takes its turn.
  f.actors.missing_partitions.insert({3, 5, 3});
  check_error(f.route(net::api::produce, produce_to("orders", "eu", std::nullopt), one_batch), net::status::unavailable,
              "the partition is being created or deleted; retry");
  BOOST_TEST(chosen_partition(f.route(net::api::produce, produce_to("orders", "eu", std::nullopt), one_batch)) == 0u);
}

BOOST_AUTO_TEST_CASE(polls_by_name_and_by_group) {
  fixture f;
  proto::PollRequest h;
  *h.mutable_stream() = named("orders");
  *h.mutable_topic() = named("eu");
  h.set_partition_id(1);
  h.mutable_consumer()->set_name("c1");
  h.set_max_wait_ms(500);
  auto d = f.route(net::api::poll, h);
  const auto* p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  BOOST_TEST(p->partition.partition_id == 1u);
  const auto* call = std::get_if<poll_call>(&p->call);
  BOOST_REQUIRE(call != nullptr);
  BOOST_TEST(!call->group.has_value());
  BOOST_TEST(call->request.max_wait_ms() == 500u);

  h.mutable_consumer()->set_group("billing");
  d = f.route(net::api::poll, h);
  p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  call = std::get_if<poll_call>(&p->call);
  BOOST_REQUIRE(call != nullptr);
  BOOST_REQUIRE(call->group.has_value());
  BOOST_TEST(call->group->group_id == 7u);
  BOOST_TEST(call->group->topic_id == 5u);

  h.mutable_consumer()->set_group("nobody");
  check_error(f.route(net::api::poll, h), net::status::group_not_found, "group 'nobody' not found in topic 'eu'");
  h.set_partition_id(9);
  check_error(f.route(net::api::poll, h), net::status::partition_not_found,
              "partition 9 not found in topic 'eu' (4 partitions)");
  // The partition's actor is checked before the group is looked up.
  h.set_partition_id(1);
  f.actors.missing_partitions.insert({3, 5, 1});
  check_error(f.route(net::api::poll, h), net::status::unavailable, "the partition is being created or deleted; retry");
  f.actors.missing_partitions.clear();
  h.mutable_consumer()->set_group("billing");
  f.actors.missing_groups.insert({3, 5, 7});
  check_error(f.route(net::api::poll, h), net::status::unavailable, "the group is being created or deleted; retry");
}

BOOST_AUTO_TEST_CASE(consumer_offsets_go_to_the_partition_group_offsets_to_the_group) {
  fixture f;
  proto::OffsetStoreRequest h;
  *h.mutable_stream() = named("orders");
  *h.mutable_topic() = named("eu");
  h.set_partition_id(3);
  h.mutable_consumer()->set_name("c1");
  h.set_offset(17);
  auto d = f.route(net::api::offset_store, h);
  auto* p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  auto* call = std::get_if<offset_call>(&p->call);
  BOOST_REQUIRE(call != nullptr);
  BOOST_TEST(call->store);
  BOOST_TEST(call->consumer == "c1");
  BOOST_TEST(call->offset == 17);

  proto::OffsetGetRequest g;
  *g.mutable_stream() = named("orders");
  *g.mutable_topic() = named("eu");
  g.set_partition_id(3);
  g.mutable_consumer()->set_name("c1");
  d = f.route(net::api::offset_get, g);
  p = std::get_if<to_partition>(&d);
  BOOST_REQUIRE(p != nullptr);
  call = std::get_if<offset_call>(&p->call);
  BOOST_REQUIRE(call != nullptr);
  BOOST_TEST(!call->store);

  h.mutable_consumer()->set_group("billing");
  d = f.route(net::api::offset_store, h);
  const auto* to = std::get_if<to_group>(&d);
  BOOST_REQUIRE(to != nullptr);
  BOOST_TEST(to->group.group_id == 7u);
  BOOST_TEST(to->api == static_cast<std::uint16_t>(net::api::offset_store));
  BOOST_TEST(!to->tracks_member);
  proto::OffsetStoreRequest parsed;
  BOOST_REQUIRE(parsed.ParseFromString(to->header));
  BOOST_TEST(parsed.offset() == 17u);

  h.clear_consumer();
  check_error(f.route(net::api::offset_store, h), net::status::bad_header,
              "an offset request names a consumer or a group");
  h.mutable_consumer()->set_group("nobody");
  check_error(f.route(net::api::offset_store, h), net::status::group_not_found,
              "group 'nobody' not found in topic 'eu'");
}

BOOST_AUTO_TEST_CASE(group_requests_go_to_the_group) {
  fixture f;
  proto::GroupGetRequest h;
  *h.mutable_stream() = named("orders");
  *h.mutable_topic() = named("eu");
  *h.mutable_group() = named("billing");
  for (auto a : {net::api::group_get, net::api::group_join, net::api::group_leave, net::api::group_heartbeat,
                 net::api::group_assignment, net::api::group_commit, net::api::group_offsets}) {
    auto d = f.route(a, h);
    const auto* to = std::get_if<to_group>(&d);
    BOOST_REQUIRE(to != nullptr);
    BOOST_TEST(to->group.stream_id == 3u);
    BOOST_TEST(to->group.group_id == 7u);
    BOOST_TEST(to->api == static_cast<std::uint16_t>(a));
    BOOST_TEST(to->tracks_member == (a == net::api::group_join || a == net::api::group_heartbeat));
  }
  proto::Identifier by_id;
  by_id.set_id(7);
  *h.mutable_group() = by_id;
  BOOST_TEST(std::holds_alternative<to_group>(f.route(net::api::group_get, h)));
  by_id.set_id(8);
  *h.mutable_group() = by_id;
  check_error(f.route(net::api::group_get, h), net::status::group_not_found, "group #8 not found in topic 'eu'");
  *h.mutable_group() = named("billing");
  *h.mutable_topic() = named("asia");
  check_error(f.route(net::api::group_get, h), net::status::topic_not_found,
              "topic 'asia' not found in stream 'orders'");
}

BOOST_AUTO_TEST_CASE(everything_else_goes_to_the_metadata_actor) {
  fixture f;
  proto::StatsRequest stats;
  auto d = f.route(net::api::stats, stats);
  const auto* m = std::get_if<to_metadata>(&d);
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->stats);
  BOOST_TEST(m->api == static_cast<std::uint16_t>(net::api::stats));
  // Headers are not parsed here: the metadata actor answers a bad one.
  for (auto a : {net::api::stream_create, net::api::topic_list, net::api::partitions_add, net::api::group_create,
                 net::api::group_list, net::api::group_delete}) {
    d = f.route_raw(a, "\xff\xff");
    m = std::get_if<to_metadata>(&d);
    BOOST_REQUIRE(m != nullptr);
    BOOST_TEST(!m->stats);
    BOOST_TEST(m->api == static_cast<std::uint16_t>(a));
    BOOST_TEST(m->header == "\xff\xff");
  }
}

BOOST_AUTO_TEST_CASE(reply_frames) {
  std::vector<std::byte> frame;  // the reply's views point into it
  auto parse = [&frame](std::vector<std::byte> f) {
    frame = std::move(f);
    auto r = net::parse_reply(frame);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->correlation_id == 9u);
    return *r;
  };
  {
    auto r = parse(produce_reply_frame(9, 2, {10, 12}, -1));
    proto::ProduceReply p;
    BOOST_REQUIRE(p.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())));
    BOOST_TEST(p.partition_id() == 2u);
    BOOST_TEST(p.base_offsets_size() == 2);
    BOOST_TEST(p.base_offsets(1) == 12u);
    BOOST_TEST(p.timestamp_ms() == 0u);  // no timestamp: 0
  }
  {
    storage::read_result data;
    data.batches = 0;
    data.requested = offset_t(-1);
    data.first_offset = offset_t(-1);
    data.next_offset = offset_t(5);
    data.high_watermark = offset_t(5);
    data.log_start = offset_t(1);
    auto r = parse(poll_reply_frame(9, 3, data));
    proto::PollReply p;
    BOOST_REQUIRE(p.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())));
    BOOST_TEST(p.partition_id() == 3u);
    BOOST_TEST(p.first_offset() == 0u);
    BOOST_TEST(p.start_offset() == 0u);
    BOOST_TEST(p.next_offset() == 5u);
    BOOST_TEST(p.log_start() == 1u);
    BOOST_TEST(r.batches.empty());
  }
  {
    auto r = parse(offset_reply_frame(9, true, std::nullopt));
    proto::OffsetStoreReply p;
    BOOST_REQUIRE(p.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())));
    BOOST_TEST(!p.has_previous());
    r = parse(offset_reply_frame(9, false, 4));
    proto::OffsetGetReply g;
    BOOST_REQUIRE(g.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())));
    BOOST_TEST(g.offset() == 4u);
  }
  {
    auto r = parse(error_reply_frame(9, net::status::unavailable, "gone"));
    BOOST_TEST(static_cast<int>(r.st) == static_cast<int>(net::status::unavailable));
    proto::ErrorReply e;
    BOOST_REQUIRE(e.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())));
    BOOST_TEST(e.message() == "gone");
  }
  {
    proto::StatsReply s;
    s.set_streams(4);
    proto::StatsReply patched;
    BOOST_REQUIRE(patched.ParseFromString(stats_reply_header(s.SerializeAsString(), 11)));
    BOOST_TEST(patched.streams() == 4u);
    BOOST_TEST(patched.connections() == 11u);
    BOOST_TEST(patched.version() == server_version);
    auto r = parse(serialized_reply_frame(9, s.SerializeAsString()));
    BOOST_TEST(r.header.size() == s.SerializeAsString().size());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(a_poll_past_every_offset_is_refused_in_the_clients_own_number) {
  fixture f;
  proto::PollRequest h;
  *h.mutable_stream() = named("orders");
  *h.mutable_topic() = named("eu");
  h.set_partition_id(1);
  h.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
  h.mutable_strategy()->set_value(UINT64_MAX);
  check_error(f.route(net::api::poll, h), net::status::offset_out_of_range,
              "offset 18446744073709551615 is beyond the log end (offsets are below 2^63)");
  h.mutable_strategy()->set_value(std::uint64_t{1} << 63);
  check_error(f.route(net::api::poll, h), net::status::offset_out_of_range,
              "offset 9223372036854775808 is beyond the log end (offsets are below 2^63)");
  h.mutable_strategy()->set_value((std::uint64_t{1} << 63) - 1);  // the largest offset there can be: the log decides
  const auto d = f.route(net::api::poll, h);
  BOOST_TEST(std::get_if<to_partition>(&d) != nullptr);
}

BOOST_AUTO_TEST_CASE(error_replies_never_show_the_servers_paths) {
  const std::string data = "/var/lib/rill";
  // Statuses whose messages come from the server's files: a fixed text, whatever the message.
  for (auto st : {net::status::storage_error, net::status::partition_fenced, net::status::disk_full,
                  net::status::internal_error}) {
    const auto told = client_error_of(st, "fdatasync /var/lib/rill/streams/1/topics/2/partitions/0/0.log: EIO", data);
    BOOST_TEST(told.redacted);
    BOOST_TEST(told.message.find(data) == std::string::npos, told.message);
    BOOST_TEST(told.message.find("server's log") != std::string::npos, told.message);
  }
  // Any other message keeps its words; each path under the data directory goes, its punctuation stays.
  auto told = client_error_of(net::status::partition_not_found,
                              "no partition in /var/lib/rill/streams/1/topics/2/partitions/0: gone, and "
                              "'/var/lib/rill/x' (/var/lib/rill/y).",
                              data);
  BOOST_TEST(told.redacted);
  BOOST_TEST(told.message == "no partition in <server path>: gone, and '<server path>' (<server path>).");
  // No path, or a data directory's name inside a word: unchanged.
  told = client_error_of(net::status::offset_out_of_range, "offset 5 is beyond the log end 3", data);
  BOOST_TEST(!told.redacted);
  BOOST_TEST(told.message == "offset 5 is beyond the log end 3");
  told = client_error_of(net::status::unavailable, "metadata recovery failed", "data");
  BOOST_TEST(!told.redacted);
  BOOST_TEST(told.message == "metadata recovery failed");
  told = client_error_of(net::status::invalid_config, "data/x is bad", "data");
  BOOST_TEST(told.message == "<server path> is bad");
  told = client_error_of(net::status::invalid_config, "anything", "");
  BOOST_TEST(!told.redacted);
}
