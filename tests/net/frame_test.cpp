#define BOOST_TEST_MODULE rill_net
#include <boost/test/unit_test.hpp>

#include "base/endian.h"
#include "base/random.h"
#include "net/errc.h"
#include "net/frame.h"
#include "net/murmur2.h"
#include "net/proto/rill.pb.h"
#include "storage/record_batch_builder.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::net;

BOOST_AUTO_TEST_CASE(request_round_trip_with_batches_in_place) {
  proto::ProduceRequest h;
  h.mutable_stream()->set_name("orders");
  h.mutable_topic()->set_id(3);
  h.mutable_partitioning()->set_partition_id(2);
  storage::batch_builder b;
  b.add("k", "v");
  const auto batch = *b.build();
  std::vector<std::byte> out;
  append_request(out, 77, api::produce, h, batch);
  append_request(out, 78, api::ping, proto::PingRequest{});

  auto size = next_frame_size(out, request_prefix_bytes, 1 << 20);
  RILL_REQUIRE_OK(size);
  BOOST_REQUIRE(size->has_value());
  auto req = parse_request(std::span<const std::byte>(out).first(**size));
  RILL_REQUIRE_OK(req);
  BOOST_TEST(req->correlation_id == 77u);
  BOOST_TEST(req->api_wire == static_cast<std::uint16_t>(api::produce));
  BOOST_TEST(req->version == protocol_version);
  proto::ProduceRequest back;
  BOOST_REQUIRE(back.ParseFromArray(req->header.data(), static_cast<int>(req->header.size())));
  BOOST_TEST(back.stream().name() == "orders");
  BOOST_TEST(back.topic().id() == 3u);
  BOOST_TEST(back.partitioning().partition_id() == 2u);
  BOOST_TEST(req->batches.size() == batch.size());
  BOOST_TEST((std::equal(batch.begin(), batch.end(), req->batches.begin())));
  // The second frame follows.
  auto rest = std::span<const std::byte>(out).subspan(**size);
  auto size2 = next_frame_size(rest, request_prefix_bytes, 1 << 20);
  RILL_REQUIRE_OK(size2);
  BOOST_TEST(**size2 == rest.size());
  auto ping = parse_request(rest);
  RILL_REQUIRE_OK(ping);
  BOOST_TEST(ping->correlation_id == 78u);
  BOOST_TEST(ping->header.empty());
  BOOST_TEST(ping->batches.empty());
}

BOOST_AUTO_TEST_CASE(a_request_head_and_its_batches_are_the_whole_frame) {
  // The client sends the head and the batches with one vectored send: together they are append_request's frame.
  proto::ProduceRequest h;
  h.mutable_stream()->set_name("orders");
  h.mutable_topic()->set_name("t");
  storage::batch_builder b;
  b.add("k", "v");
  b.add_value(std::string(3000, 'x'));
  const auto batch = *b.build();
  const metadata_position at{3, 5};
  std::vector<std::byte> whole;
  append_request(whole, 9, api::produce, h, batch, at);
  std::vector<std::byte> head{std::byte{7}};  // appended after what is there
  append_request_head(head, 9, api::produce, h, batch, at);
  head.insert(head.end(), batch.begin(), batch.end());
  BOOST_TEST((std::span<const std::byte>(head).subspan(1).size() == whole.size()));
  BOOST_TEST((std::equal(whole.begin(), whole.end(), head.begin() + 1)));
}

BOOST_AUTO_TEST_CASE(reply_and_error_reply) {
  std::vector<std::byte> out;
  proto::ProduceReply r;
  r.set_partition_id(1);
  r.add_base_offsets(100);
  append_reply(out, 9, status::ok, r);
  append_error_reply(out, 10, status::topic_not_found, "topic 'x' not found in stream 'y'");
  auto s1 = next_frame_size(out, reply_prefix_bytes, 1 << 20);
  RILL_REQUIRE_OK(s1);
  auto a = parse_reply(std::span<const std::byte>(out).first(**s1));
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->correlation_id == 9u);
  BOOST_TEST((a->st == status::ok));
  auto b = parse_reply(std::span<const std::byte>(out).subspan(**s1));
  RILL_REQUIRE_OK(b);
  BOOST_TEST((b->st == status::topic_not_found));
  proto::ErrorReply e;
  BOOST_REQUIRE(e.ParseFromArray(b->header.data(), static_cast<int>(b->header.size())));
  BOOST_TEST(e.message() == "topic 'x' not found in stream 'y'");
  BOOST_TEST(!is_retriable(status::topic_not_found));
  BOOST_TEST(is_retriable(status::overloaded));
  BOOST_TEST(to_string(status::crc_mismatch) == "crc_mismatch");
}

BOOST_AUTO_TEST_CASE(a_metadata_position_rides_in_any_header_without_touching_its_fields) {
  proto::ProduceRequest h;
  h.mutable_stream()->set_name("orders");
  h.mutable_partitioning()->set_partition_id(2);
  const std::vector<std::byte> batch(61, std::byte{7});
  const metadata_position at{42, 1234567};
  std::vector<std::byte> out;
  append_request(out, 5, api::produce, h, batch, at);
  append_reply_raw(out, 6, status::ok, {}, {}, at);  // an empty header: the position is all of it
  append_error_reply(out, 7, status::unavailable, "later", {}, at);
  append_request(out, 8, api::ping, proto::PingRequest{});  // none: nothing appended
  std::span<const std::byte> rest(out);
  auto next = [&](std::size_t prefix) {
    auto size = next_frame_size(rest, prefix, 1 << 20);
    BOOST_REQUIRE(size.has_value() && size->has_value());
    auto frame = rest.first(**size);
    rest = rest.subspan(**size);
    return frame;
  };
  auto req = parse_request(next(request_prefix_bytes));
  RILL_REQUIRE_OK(req);
  proto::ProduceRequest back;
  BOOST_REQUIRE(back.ParseFromArray(req->header.data(), static_cast<int>(req->header.size())));
  BOOST_TEST(back.stream().name() == "orders");
  BOOST_TEST(back.partitioning().partition_id() == 2u);
  BOOST_TEST((metadata_position_of(req->header) == at));
  BOOST_TEST(req->batches.size() == batch.size());  // the batches still follow the (longer) header
  auto empty = parse_reply(next(reply_prefix_bytes));
  RILL_REQUIRE_OK(empty);
  BOOST_TEST((metadata_position_of(empty->header) == at));
  auto error = parse_reply(next(reply_prefix_bytes));
  RILL_REQUIRE_OK(error);
  proto::ErrorReply e;
  BOOST_REQUIRE(e.ParseFromArray(error->header.data(), static_cast<int>(error->header.size())));
  BOOST_TEST(e.message() == "later");
  BOOST_TEST((metadata_position_of(error->header) == at));
  auto ping = parse_request(next(request_prefix_bytes));
  RILL_REQUIRE_OK(ping);
  BOOST_TEST(ping->header.empty());
  BOOST_TEST((metadata_position_of(ping->header) == metadata_position{}));
  BOOST_TEST(rest.empty());
  // A header that does not parse carries none.
  const std::byte junk[] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}};
  BOOST_TEST((metadata_position_of(junk) == metadata_position{}));
}

BOOST_AUTO_TEST_CASE(frame_sizes_partial_oversized_and_short) {
  std::vector<std::byte> out;
  append_request(out, 1, api::stats, proto::StatsRequest{});
  for (std::size_t n = 0; n < out.size(); ++n) {
    auto s = next_frame_size(std::span<const std::byte>(out).first(n), request_prefix_bytes, 1 << 20);
    RILL_REQUIRE_OK(s);
    BOOST_TEST(!s->has_value(), "prefix of " << n);
  }
  // Oversized: refused from the length alone.
  std::vector<std::byte> big(4);
  store_be<std::uint32_t>(big.data(), 100'000'000);
  auto over = next_frame_size(big, request_prefix_bytes, 1 << 20);
  BOOST_REQUIRE(!over.has_value());
  BOOST_TEST((over.error().code() == errc::frame_too_large));
  // Shorter than a prefix.
  std::vector<std::byte> tiny(4);
  store_be<std::uint32_t>(tiny.data(), 3);
  auto small = next_frame_size(tiny, request_prefix_bytes, 1 << 20);
  BOOST_REQUIRE(!small.has_value());
  BOOST_TEST((small.error().code() == errc::malformed_frame));
  // A header length past the frame.
  auto bad = out;
  store_be<std::uint32_t>(bad.data() + 12, 1000);
  BOOST_TEST(!parse_request(bad).has_value());
}

BOOST_AUTO_TEST_CASE(api_numbers) {
  BOOST_TEST((api_from_wire(30) == api::produce));
  BOOST_TEST(!api_from_wire(999).has_value());
  BOOST_TEST(!api_from_wire(0).has_value());
}

BOOST_AUTO_TEST_CASE(random_bytes_never_crash_the_frame_parser) {
  prng rng(5);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> junk(rng.below(64));
    for (auto& b : junk) {
      b = static_cast<std::byte>(rng.next());
    }
    auto s = next_frame_size(junk, request_prefix_bytes, 1 << 16);
    if (s && s->has_value()) {
      (void)parse_request(std::span<const std::byte>(junk).first(**s));
    }
  }
}

BOOST_AUTO_TEST_CASE(murmur2_matches_kafkas_partitioner) {
  // Kafka's own test vectors (UtilsTest.testMurmur2).
  auto h = [](std::string_view s) { return murmur2(storage::as_bytes(s)); };
  BOOST_TEST(h("21") == -973932308);
  BOOST_TEST(h("foobar") == -790332482);
  BOOST_TEST(h("a-little-bit-long-string") == -985981536);
  BOOST_TEST(h("a-little-bit-longer-string") == -1486304829);
  BOOST_TEST(h("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971);
  BOOST_TEST(h("abc") == 479470107);
  BOOST_TEST(partition_for_key(storage::as_bytes("foobar"), 7) ==
             ((static_cast<std::uint32_t>(-790332482) & 0x7fffffffu) % 7));
}
