// The consensus formats: message headers and bodies, header lists, vsr_state; the client table; quorum sizes.
#include <boost/test/unit_test.hpp>

#include "consensus/client_table.h"
#include "consensus/message.h"
#include "consensus/vsr_state.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;

namespace {
message sample_prepare(std::uint64_t op, checksum_t parent) {
  message m;
  m.h.cmd = command::prepare;
  m.h.cluster = 7;
  m.h.client = 42;
  m.h.request = op;
  m.h.op = op;
  m.h.commit = op - 1;
  m.h.view = 3;
  m.h.replica = 1;
  m.h.operation = operation_user_min;
  m.h.parent = parent;
  for (std::uint64_t i = 0; i < op * 3; ++i) {
    m.body.push_back(static_cast<std::byte>(i));
  }
  seal(m);
  return m;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_sealed_message_round_trips_and_every_flipped_byte_is_caught) {
  const message m = sample_prepare(5, root_header(7).checksum);
  const auto bytes = encode(m);
  BOOST_TEST(bytes.size() == header::encoded_size + m.body.size());
  auto back = decode(bytes);
  RILL_REQUIRE_OK(back);
  BOOST_TEST((back->h == m.h));
  BOOST_TEST((back->body == m.body));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto broken = bytes;
    broken[i] ^= std::byte{0x10};
    BOOST_TEST(!decode(broken).has_value(), "a flip at byte " << i << " went unnoticed");
  }
  BOOST_TEST(!decode(std::span(bytes).first(100)).has_value());
  BOOST_TEST(!decode(std::span(bytes).first(bytes.size() - 1)).has_value());
}

BOOST_AUTO_TEST_CASE(checksums_chain_and_depend_on_every_field) {
  const header root = root_header(7);
  const message a = sample_prepare(1, root.checksum);
  const message b = sample_prepare(2, a.h.checksum);
  BOOST_TEST((b.h.parent == a.h.checksum));
  BOOST_TEST((root_header(7).checksum == root.checksum));
  BOOST_TEST((root_header(8).checksum != root.checksum));
  message c = a;
  c.h.view = 4;
  seal(c);
  BOOST_TEST((c.h.checksum != a.h.checksum));
  BOOST_TEST((header_checksum(a.h) == a.h.checksum));
}

BOOST_AUTO_TEST_CASE(header_lists_decode_only_prepares_with_good_checksums) {
  std::vector<header> hs;
  checksum_t parent = root_header(7).checksum;
  for (std::uint64_t op = 1; op <= 4; ++op) {
    hs.push_back(sample_prepare(op, parent).h);
    parent = hs.back().checksum;
  }
  auto body = encode_headers(hs);
  auto back = decode_headers(body);
  RILL_REQUIRE_OK(back);
  BOOST_TEST(back->size() == 4u);
  body[200] ^= std::byte{1};
  BOOST_TEST(!decode_headers(body).has_value());
  BOOST_TEST(!decode_headers(std::span(body).first(130)).has_value());
}

BOOST_AUTO_TEST_CASE(vsr_state_round_trips_and_rejects_what_cannot_be) {
  vsr_state s;
  s.cluster = 7;
  s.replica = 2;
  s.replica_count = 3;
  s.view = view_t(9);
  s.log_view = view_t(8);
  s.commit = op_t(100);
  checksum_t parent = root_header(7).checksum;
  for (std::uint64_t op = 1; op <= 3; ++op) {
    s.view_headers.push_back(sample_prepare(op, parent).h);
    parent = s.view_headers.back().checksum;
  }
  auto back = decode_vsr_state(encode(s));
  RILL_REQUIRE_OK(back);
  BOOST_TEST((*back == s));
  s.checkpoint.at = sample_prepare(90, parent).h;
  s.checkpoint.slot = 1;
  s.checkpoint.size = 12345;
  s.checkpoint.checksum = checksum_of(std::vector<std::byte>(3), checkpoint_checksum_domain);
  back = decode_vsr_state(encode(s));
  RILL_REQUIRE_OK(back);
  BOOST_TEST((*back == s));
  // The incarnation takes six bytes of the fixed part (zero before it existed), up to incarnation_max.
  for (const std::uint64_t inc : {std::uint64_t{1}, std::uint64_t{1'733'000'000'000}, incarnation_max}) {
    vsr_state with = s;
    with.incarnation = inc;
    const auto bytes = encode(with);
    BOOST_TEST(bytes.size() == encode(s).size());
    auto again = decode_vsr_state(bytes);
    RILL_REQUIRE_OK(again);
    BOOST_TEST(again->incarnation == inc);
    BOOST_TEST((*again == with));
  }
  vsr_state beyond = s;
  beyond.checkpoint.at = sample_prepare(101, parent).h;  // a checkpoint above the commit cannot be
  BOOST_TEST(!decode_vsr_state(encode(beyond)).has_value());
  vsr_state third = s;
  third.checkpoint.slot = 2;
  BOOST_TEST(!decode_vsr_state(encode(third)).has_value());

  vsr_state ahead = s;
  ahead.log_view = view_t(10);
  BOOST_TEST(!decode_vsr_state(encode(ahead)).has_value());
  vsr_state unchained = s;
  std::swap(unchained.view_headers[0], unchained.view_headers[1]);
  BOOST_TEST(!decode_vsr_state(encode(unchained)).has_value());
  vsr_state stranger = s;
  stranger.replica = 3;
  BOOST_TEST(!decode_vsr_state(encode(stranger)).has_value());
  auto bytes = encode(s);
  bytes.pop_back();
  BOOST_TEST(!decode_vsr_state(bytes).has_value());

  // The recovering flag (byte 14): round trips; 0 there (every superblock written before it existed) is not
  // recovering; any other bit is refused.
  BOOST_TEST((encode(s)[14] == std::byte{0}));
  vsr_state recovering = s;
  recovering.recovering = true;
  back = decode_vsr_state(encode(recovering));
  RILL_REQUIRE_OK(back);
  BOOST_TEST(back->recovering);
  BOOST_TEST((*back == recovering));
  auto flagged = encode(s);
  flagged[14] = std::byte{2};
  BOOST_TEST(!decode_vsr_state(flagged).has_value());
}

BOOST_AUTO_TEST_CASE(client_table_round_trips_through_checkpoint_bytes_and_rejects_damaged_ones) {
  client_table t(4);
  for (std::uint64_t c = 1; c <= 3; ++c) {
    message reply;
    reply.h.cmd = command::reply;
    reply.h.cluster = 7;
    reply.h.client = c;
    reply.body.assign(c * 5, std::byte{static_cast<unsigned char>(c)});
    seal(reply);
    t.open(c, c, reply);
  }
  std::vector<std::byte> bytes;
  t.encode(bytes);
  client_table back(4);
  BOOST_REQUIRE(back.restore(bytes));
  BOOST_TEST(back.size() == 3u);
  BOOST_TEST((back.find(2)->reply.body == t.find(2)->reply.body));
  client_table small(2);
  BOOST_TEST(!small.restore(bytes));  // more sessions than it may hold
  auto damaged = bytes;
  damaged[60] ^= std::byte{1};  // inside the first reply
  client_table kept(4);
  BOOST_REQUIRE(kept.restore(bytes));
  BOOST_TEST(!kept.restore(damaged));
  BOOST_TEST(kept.size() == 3u);  // unchanged by the failed restore
  bytes.pop_back();
  BOOST_TEST(!back.restore(bytes));
}

BOOST_AUTO_TEST_CASE(client_table_evicts_the_oldest_session_the_same_way_everywhere) {
  client_table t(2);
  message reply;
  reply.h.cmd = command::reply;  // (the table holds replies: what restore() accepts back)
  BOOST_TEST(!t.open(10, 1, reply).has_value());
  BOOST_TEST(!t.open(20, 2, reply).has_value());
  t.commit(10, 1, 3, reply);  // client 10 is now the more recent
  auto evicted = t.open(30, 4, reply);
  BOOST_REQUIRE(evicted.has_value());
  BOOST_TEST(*evicted == 20u);
  BOOST_TEST(t.find(20) == nullptr);
  BOOST_TEST(t.find(10)->request == 1u);
  BOOST_TEST(t.size() == 2u);
}

BOOST_AUTO_TEST_CASE(quorums_intersect_for_every_cluster_size) {
  for (std::size_t n = 1; n <= replicas_max; ++n) {
    const std::size_t rep = quorum_replication(n);
    const std::size_t vc = quorum_view_change(n);
    BOOST_TEST(rep + vc > n, "n=" << n);  // every view change quorum meets every replication quorum
    BOOST_TEST(rep <= n);
    BOOST_TEST(vc <= n);
  }
  BOOST_TEST(quorum_replication(3) == 2u);
  BOOST_TEST(quorum_view_change(3) == 2u);
  BOOST_TEST(quorum_view_change(2) == 2u);
  BOOST_TEST(primary_of(view_t(7), 3) == 1);
}
