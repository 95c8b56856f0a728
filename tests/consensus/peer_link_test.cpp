// consensus::peer_link, two nodes' links wired through in-memory pipes: the hello goes first and frames only once
// the peer's hello checked out; frames queued while the peer was away arrive in order after the handshake; a peer of
// another cluster is refused and the dialler backs off (doubling, bounded); a full queue refuses messages and drops
// heartbeats; a frame cut by a broken connection is sent again whole on the next one.
#include <boost/test/unit_test.hpp>

#include "consensus/peer_link.h"
#include "tests/consensus/sealed_prepare.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;

namespace {
const std::vector<std::uint64_t> members{1, 2, 3};

using rill::consensus::testing::prepare_of;

// Moves what `from` has to write into `to`, at most `chunk` bytes per write; returns what `to` took apart.
std::vector<peer_frame> pump(peer_link& from, peer_link& to, std::size_t chunk = 1u << 20) {
  std::vector<peer_frame> out;
  for (auto w = from.to_write(); !w.empty(); w = from.to_write()) {
    const auto part = w.first(std::min(chunk, w.size()));
    const std::vector<std::byte> copy(part.begin(), part.end());
    from.wrote(copy.size());
    auto got = to.received(copy);
    BOOST_REQUIRE_MESSAGE(got.has_value(), (got ? std::string() : got.error().detail()));
    out.insert(out.end(), std::make_move_iterator(got->begin()), std::make_move_iterator(got->end()));
  }
  return out;
}

// Node 1 dials node 2; node 2 takes the hello as its acceptor would, and hands the connection to its link.
void handshake(peer_link& one, peer_link& two) {
  BOOST_REQUIRE(one.connect_due(0) || one.status() == peer_link::state::idle);
  one.connecting();
  one.connected();
  const auto hello = one.to_write();
  BOOST_REQUIRE(hello.size() == peer_hello_bytes);
  auto theirs = decode_peer_hello(hello);
  RILL_REQUIRE_OK(theirs);
  one.wrote(hello.size());
  two.accepted(*theirs);
  BOOST_TEST(one.to_write().empty(), "no frame before the peer's hello checked out");
  pump(two, one);  // two's hello (and anything it had queued)
}
}  // namespace

BOOST_AUTO_TEST_SUITE(peer_link_suite)

BOOST_AUTO_TEST_CASE(the_hello_goes_first_and_frames_queued_meanwhile_arrive_in_order) {
  const std::uint64_t digest = 99;
  peer_link one(peer_hello{7, 1, digest, 11}, 2, members);
  peer_link two(peer_hello{7, 2, digest, 22}, 1, members);
  BOOST_TEST(one.dials());
  BOOST_TEST(!two.dials());
  BOOST_TEST(!two.connect_due(0));
  // Queued before any connection.
  for (std::uint64_t op = 1; op <= 3; ++op) {
    BOOST_TEST((one.send(group_t(op), prepare_of(op)) == peer_link::queued::yes));
  }
  BOOST_TEST(one.to_write().empty());
  handshake(one, two);
  BOOST_TEST((one.status() == peer_link::state::established));
  BOOST_TEST((two.status() == peer_link::state::established));
  BOOST_TEST(one.theirs()->incarnation == 22u);
  // In small pieces: whole frames, in order.
  const auto frames = pump(one, two, 7);
  BOOST_REQUIRE(frames.size() == 3u);
  for (std::uint64_t op = 1; op <= 3; ++op) {
    BOOST_TEST(frames[op - 1].group.value() == op);
    BOOST_TEST((frames[op - 1].m.h == prepare_of(op).h));
  }
  BOOST_TEST(one.queued_bytes() == 0u);
  BOOST_TEST(one.stats().frames_sent == 3u);
  BOOST_TEST(two.stats().frames_received == 3u);
  // The other way too, heartbeats included.
  node_heartbeat beat;
  beat.cluster = 7;
  beat.from = node_t(2);
  beat.sequence = 5;
  BOOST_TEST((two.send(beat) == peer_link::queued::yes));
  BOOST_TEST((two.send(group_t(4), prepare_of(4)) == peer_link::queued::yes));
  const auto back = pump(two, one);
  BOOST_REQUIRE(back.size() == 2u);
  BOOST_TEST((back[0].kind == peer_frame_kind::heartbeat));
  BOOST_TEST(back[0].beat.sequence == 5u);
  BOOST_TEST((back[1].m.h == prepare_of(4).h));
}

BOOST_AUTO_TEST_CASE(a_peer_of_another_cluster_is_refused_and_the_dialler_backs_off) {
  peer_link_options o;
  o.reconnect_min_ms = 100;
  o.reconnect_max_ms = 350;
  peer_link one(peer_hello{7, 1, 99, 11}, 2, members, o);
  one.connecting();
  one.connected();
  one.wrote(one.to_write().size());
  auto refused = one.received(encode(peer_hello{8, 2, 99, 22}));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().detail().find("belongs to cluster 8") != std::string::npos);
  one.closed(1'000, refused.error().detail());
  BOOST_TEST((one.status() == peer_link::state::idle));
  BOOST_TEST(one.last_error().find("cluster 8") != std::string::npos);
  BOOST_TEST(!one.connect_due(1'099));
  BOOST_TEST(one.connect_due(1'100));
  // Each failure doubles the wait, up to the bound: 200, then 350 (not 400).
  one.connecting();
  one.closed(1'100, "refused");
  BOOST_TEST(!one.connect_due(1'299));
  BOOST_TEST(one.connect_due(1'300));
  one.connecting();
  one.closed(1'300, "refused");
  BOOST_TEST(!one.connect_due(1'649));
  BOOST_TEST(one.connect_due(1'650));
  // Another members list, and a node answering for another, are refused the same way.
  peer_link three(peer_hello{7, 1, 99, 11}, 3, members, o);
  three.connecting();
  three.connected();
  three.wrote(three.to_write().size());
  auto wrong = three.received(encode(peer_hello{7, 2, 99, 22}));
  BOOST_TEST((!wrong.has_value() && wrong.error().detail().find("answers as node 2") != std::string::npos));
  peer_link four(peer_hello{7, 1, 99, 11}, 2, members, o);
  four.connecting();
  four.connected();
  four.wrote(four.to_write().size());
  auto digest = four.received(encode(peer_hello{7, 2, 98, 22}));
  BOOST_TEST((!digest.has_value() && digest.error().detail().find("cluster.members") != std::string::npos));
}

BOOST_AUTO_TEST_CASE(a_full_queue_refuses_messages_and_drops_heartbeats) {
  peer_link_options o;
  o.queue_bytes_max = 1'000;
  peer_link one(peer_hello{7, 1, 99, 11}, 2, members, o);
  std::size_t taken = 0;
  while (one.send(group_t(1), prepare_of(taken + 1, 100)) == peer_link::queued::yes) {
    ++taken;
  }
  BOOST_TEST(taken >= 1u);
  BOOST_TEST(one.queued_bytes() <= 1'000u);
  BOOST_TEST(one.stats().refused == 1u);
  node_heartbeat beat;
  beat.cluster = 7;
  beat.from = node_t(1);
  for (int i = 0; i < 10; ++i) {
    beat.entries.push_back(heartbeat_entry{group_t(static_cast<std::uint64_t>(i)), commit_beat{}});
  }
  BOOST_TEST((one.send(beat) == peer_link::queued::heartbeat_dropped));
  BOOST_TEST(one.stats().heartbeats_dropped == 1u);
  BOOST_TEST(one.queued_bytes() <= 1'000u);
}

BOOST_AUTO_TEST_CASE(a_frame_cut_by_a_broken_connection_goes_again_whole) {
  peer_link one(peer_hello{7, 1, 99, 11}, 2, members);
  peer_link two(peer_hello{7, 2, 99, 22}, 1, members);
  handshake(one, two);
  BOOST_TEST((one.send(group_t(1), prepare_of(1, 500)) == peer_link::queued::yes));
  BOOST_TEST((one.send(group_t(1), prepare_of(2, 500)) == peer_link::queued::yes));
  // Half of the first frame is written, then the connection breaks on both sides.
  const auto w = one.to_write();
  const std::vector<std::byte> half(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2));
  one.wrote(half.size());
  RILL_REQUIRE_OK(two.received(half));
  one.closed(10, "connection reset");
  two.closed(10, "connection reset");
  BOOST_TEST(one.queued_bytes() > 0u);
  // A new connection: the hello first, then both frames whole (the half sent before is gone with that connection).
  BOOST_REQUIRE(one.connect_due(10 + 100));
  handshake(one, two);
  const auto frames = pump(one, two);
  BOOST_REQUIRE(frames.size() == 2u);
  BOOST_TEST((frames[0].m.h == prepare_of(1, 500).h));
  BOOST_TEST((frames[1].m.h == prepare_of(2, 500).h));
  BOOST_TEST(one.stats().connects == 2u);
  BOOST_TEST(two.stats().connects == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
