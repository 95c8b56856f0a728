// connection_state without a socket: frames split across receives, framing errors, the receive window, the
// back-pressure limits, partial sends, and when the connection shuts down and closes.
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <cstring>

#include "actors/connection_state.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"

using namespace rill;
using namespace rill::actors;

namespace {
std::vector<std::byte> ping_frame(std::uint32_t correlation, std::size_t batch_bytes = 0) {
  std::vector<std::byte> out;
  proto::PingRequest h;
  std::vector<std::byte> batches(batch_bytes, std::byte{7});
  net::append_request(out, correlation, net::api::ping, h, batches);
  return out;
}

// The next receive's buffer: a wait for readability first when nothing is buffered (answered: readable), then the
// receive. Nothing when no read may start.
std::optional<std::span<std::byte>> recv_buffer(connection_state& c) {
  auto r = c.begin_read();
  if (r && r->poll) {
    BOOST_TEST(c.recv_buffer_bytes() == 0u);  // waiting for readability holds no buffer
    c.check_invariants();
    c.end_poll(POLLIN);
    c.check_invariants();
    r = c.begin_read();
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE(!r->poll);
  }
  if (!r) {
    return std::nullopt;
  }
  return r->buffer;
}

// Delivers `bytes` through begin_read/end_recv (as many receives as it takes); returns the requests framed.
std::vector<connection_state::request> deliver(connection_state& c, std::span<const std::byte> bytes) {
  std::vector<connection_state::request> out;
  while (!bytes.empty()) {
    auto buffer = recv_buffer(c);
    c.check_invariants();
    BOOST_REQUIRE(buffer.has_value());
    const std::size_t n = std::min(buffer->size(), bytes.size());
    std::memcpy(buffer->data(), bytes.data(), n);
    bytes = bytes.subspan(n);
    BOOST_REQUIRE(c.end_recv(static_cast<std::int64_t>(n)));
    c.check_invariants();
    for (;;) {
      auto next = c.next_frame();
      c.check_invariants();
      if (auto* r = std::get_if<connection_state::request>(&next)) {
        out.push_back(*r);
        continue;
      }
      BOOST_REQUIRE(std::holds_alternative<std::monostate>(next));
      break;
    }
    c.framing_done();
    c.check_invariants();
  }
  return out;
}

connection_state::limits small_limits() {
  connection_state::limits l;
  l.inflight_requests_max = 2;
  l.inflight_bytes_max = 1000;
  l.frame_bytes_max = 300;
  return l;
}
}  // namespace

struct pool_fixture {
  storage::buffer_pool pool;
};

BOOST_FIXTURE_TEST_SUITE(connection_state_suite, pool_fixture)

BOOST_AUTO_TEST_CASE(frames_split_across_receives_and_counted_in_flight) {
  connection_state c(connection_state::limits{}, pool);
  auto a = ping_frame(1, 10);
  auto b = ping_frame(2);
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  // Byte by byte: every receive is at least the window, but only what arrived is framed.
  std::vector<connection_state::request> got;
  for (std::size_t i = 0; i < both.size(); ++i) {
    auto r = deliver(c, std::span<const std::byte>(both).subspan(i, 1));
    got.insert(got.end(), r.begin(), r.end());
  }
  BOOST_REQUIRE(got.size() == 2u);
  BOOST_TEST(got[0].view.correlation_id == 1u);
  BOOST_TEST(got[0].bytes == a.size());
  BOOST_TEST(got[0].view.batches.size() == 10u);
  BOOST_TEST(got[1].view.correlation_id == 2u);
  BOOST_TEST(c.inflight_requests() == 2u);
  BOOST_TEST(c.inflight_bytes() == both.size());
}

BOOST_AUTO_TEST_CASE(the_receive_window_grows_for_a_large_frame) {
  connection_state::limits l;
  l.frame_bytes_max = 64 << 20;
  connection_state c(l, pool);
  auto buffer = recv_buffer(c);
  c.check_invariants();
  BOOST_REQUIRE(buffer.has_value());
  BOOST_TEST(buffer->size() == connection_state::recv_window_min);
  BOOST_TEST(!c.begin_read().has_value());  // one receive at a time
  // The first bytes announce a 10 MiB frame: the next receive fills the window first (a length alone does not make
  // the buffer grow), and once a window of the frame is in, it asks for the rest, up to the window's maximum.
  auto big = ping_frame(5, 10 << 20);
  std::memcpy(buffer->data(), big.data(), 100);
  BOOST_REQUIRE(c.end_recv(100));
  c.check_invariants();
  BOOST_TEST(std::holds_alternative<std::monostate>(c.next_frame()));
  c.check_invariants();
  c.framing_done();
  c.check_invariants();
  buffer = recv_buffer(c);
  c.check_invariants();
  BOOST_REQUIRE(buffer.has_value());
  BOOST_TEST(buffer->size() == connection_state::recv_window_min - 100);
  std::memcpy(buffer->data(), big.data() + 100, buffer->size());
  BOOST_REQUIRE(c.end_recv(static_cast<std::int64_t>(buffer->size())));
  BOOST_TEST(std::holds_alternative<std::monostate>(c.next_frame()));
  c.framing_done();
  buffer = recv_buffer(c);
  c.check_invariants();
  BOOST_REQUIRE(buffer.has_value());
  BOOST_TEST(buffer->size() == connection_state::recv_window_max);
  BOOST_TEST(c.recv_buffer_bytes() >= big.size());  // the whole frame's buffer, grown once
}

BOOST_AUTO_TEST_CASE(an_oversized_frame_is_refused_and_the_connection_closes_after_its_reply) {
  connection_state c(small_limits(), pool);
  auto big = ping_frame(77, 400);
  auto buffer = recv_buffer(c);
  c.check_invariants();
  BOOST_REQUIRE(buffer.has_value());
  std::memcpy(buffer->data(), big.data(), 16);
  BOOST_REQUIRE(c.end_recv(16));
  c.check_invariants();
  auto next = c.next_frame();
  c.check_invariants();
  const auto* e = std::get_if<connection_state::frame_error>(&next);
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->correlation == 77u);
  BOOST_TEST(static_cast<int>(e->st) == static_cast<int>(net::status::frame_too_large));
  BOOST_TEST(std::holds_alternative<std::monostate>(c.next_frame()));  // nothing more is framed
  c.framing_done();
  c.check_invariants();
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(20), 0));
  c.check_invariants();
  BOOST_TEST(!c.can_read());
  BOOST_TEST(!c.begin_read().has_value());
  c.check_invariants();
  BOOST_TEST((c.next_step(false) == connection_state::step::wait));  // the reply is still to be sent
  auto out = c.begin_send();
  c.check_invariants();
  BOOST_REQUIRE(out.has_value());
  c.end_send(20);
  c.check_invariants();
  BOOST_TEST((c.next_step(false) == connection_state::step::shut_down));
  BOOST_TEST(!c.shut_down());                                       // no receive pending: nothing to cancel
  BOOST_TEST((c.next_step(true) == connection_state::step::wait));  // a cancel still in the kernel
  BOOST_TEST((c.next_step(false) == connection_state::step::close));
  c.closed();
  c.check_invariants();
  BOOST_TEST(!c.queue_reply(std::vector<std::byte>(5), 0));
  c.check_invariants();
}

BOOST_AUTO_TEST_CASE(a_frame_that_does_not_parse_is_malformed) {
  connection_state c(connection_state::limits{}, pool);
  auto f = ping_frame(9);
  f[15] = std::byte{0xff};  // header length runs past the frame
  auto r = recv_buffer(c);
  c.check_invariants();
  BOOST_REQUIRE(r.has_value());
  std::memcpy(r->data(), f.data(), f.size());
  BOOST_REQUIRE(c.end_recv(static_cast<std::int64_t>(f.size())));
  c.check_invariants();
  auto next = c.next_frame();
  c.check_invariants();
  const auto* e = std::get_if<connection_state::frame_error>(&next);
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->correlation == 9u);
  BOOST_TEST(static_cast<int>(e->st) == static_cast<int>(net::status::malformed_frame));
  BOOST_TEST(c.inflight_requests() == 0u);
}

BOOST_AUTO_TEST_CASE(reading_pauses_at_the_limits_and_resumes_with_the_replies) {
  connection_state c(small_limits(), pool);
  auto a = ping_frame(1);
  auto b = ping_frame(2);
  BOOST_TEST(deliver(c, a).size() == 1u);
  BOOST_TEST(deliver(c, b).size() == 1u);
  BOOST_TEST(!c.can_read());  // two requests in flight
  BOOST_TEST(!c.begin_read().has_value());
  c.check_invariants();
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(10), static_cast<std::uint32_t>(a.size())));
  c.check_invariants();
  BOOST_TEST(c.can_read());
  // Replies the client does not read count too.
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(1000), static_cast<std::uint32_t>(b.size())));
  c.check_invariants();
  BOOST_TEST(c.inflight_requests() == 0u);
  BOOST_TEST(c.out_bytes() == 1010u);
  BOOST_TEST(!c.can_read());
  auto s = c.begin_send();
  c.check_invariants();
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->size() == 10u);
  BOOST_TEST(!c.begin_send().has_value());  // one send at a time
  c.end_send(4);                            // partial
  s = c.begin_send();
  c.check_invariants();
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->size() == 6u);
  c.end_send(6);
  c.check_invariants();
  s = c.begin_send();
  c.check_invariants();
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->size() == 1000u);
  c.end_send(1000);
  c.check_invariants();
  BOOST_TEST(c.out_bytes() == 0u);
  BOOST_TEST(c.can_read());
  BOOST_TEST((c.next_step(false) == connection_state::step::wait));  // open and idle
}

BOOST_AUTO_TEST_CASE(the_peer_closing_finishes_what_is_in_flight_first) {
  connection_state c(connection_state::limits{}, pool);
  auto a = ping_frame(1);
  BOOST_TEST(deliver(c, a).size() == 1u);
  BOOST_REQUIRE(recv_buffer(c).has_value());
  c.check_invariants();
  BOOST_TEST(!c.end_recv(0));  // the peer closed
  BOOST_TEST(!c.can_read());
  BOOST_TEST((c.next_step(false) == connection_state::step::wait));  // the request is still being answered
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(8), static_cast<std::uint32_t>(a.size())));
  c.check_invariants();
  BOOST_REQUIRE(c.begin_send().has_value());
  c.check_invariants();
  c.end_send(8);
  c.check_invariants();
  BOOST_TEST((c.next_step(false) == connection_state::step::close));
}

BOOST_AUTO_TEST_CASE(forcing_drops_unsent_replies_and_answers_nothing_more) {
  connection_state c(connection_state::limits{}, pool);
  auto a = ping_frame(1);
  auto b = ping_frame(2);
  BOOST_TEST(deliver(c, a).size() == 1u);
  BOOST_TEST(deliver(c, b).size() == 1u);
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(10), static_cast<std::uint32_t>(a.size())));
  c.check_invariants();
  BOOST_TEST(c.queue_reply(std::vector<std::byte>(30), 0));
  c.check_invariants();
  BOOST_REQUIRE(recv_buffer(c).has_value());
  c.check_invariants();
  BOOST_REQUIRE(c.begin_send().has_value());
  c.check_invariants();
  BOOST_TEST(c.force());  // a send is pending: to cancel; its reply stays until it completes
  BOOST_TEST(c.out_queued() == 1u);
  BOOST_TEST(c.out_bytes() == 10u);
  BOOST_TEST(c.shut_down());  // the receive armed by deliver is pending: to cancel
  BOOST_TEST(!c.queue_reply(std::vector<std::byte>(5), static_cast<std::uint32_t>(b.size())));
  c.check_invariants();
  BOOST_TEST(c.inflight_requests() == 1u);  // never to be answered
  c.end_send(-125);                         // cancelled
  BOOST_TEST(c.out_queued() == 0u);
  BOOST_TEST((c.next_step(false) == connection_state::step::wait));  // the receive is still pending
  BOOST_TEST(!c.end_recv(-125));
  c.check_invariants();
  BOOST_TEST((c.next_step(false) == connection_state::step::close));
}

BOOST_AUTO_TEST_CASE(an_idle_connection_holds_no_buffer_and_a_partial_frame_keeps_one) {
  connection_state c(connection_state::limits{}, pool);
  // Idle from the start: the first read is a wait for readability, without a buffer.
  auto r = c.begin_read();
  c.check_invariants();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->poll);
  BOOST_TEST(r->buffer.empty());
  BOOST_TEST(pool.outstanding() == 0u);
  BOOST_TEST(!c.begin_read().has_value());  // one read at a time
  c.end_poll(POLLIN);
  c.check_invariants();
  // Pipelined requests in one receive, the last one cut short: its start keeps the buffer.
  std::vector<std::byte> bytes;
  for (std::uint32_t i = 0; i < 20; ++i) {
    auto f = ping_frame(i, 100);
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  auto last = ping_frame(99, 1000);
  bytes.insert(bytes.end(), last.begin(), last.begin() + 50);
  BOOST_TEST(deliver(c, bytes).size() == 20u);
  BOOST_TEST(pool.outstanding() == 1u);
  BOOST_TEST(c.buffered_bytes() == 50u);
  BOOST_TEST(c.recv_buffer_bytes() >= connection_state::recv_window_min);
  // The rest of it: a receive straight into the kept buffer (no wait first), then the buffer goes back.
  r = c.begin_read();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(!r->poll);
  const auto rest = std::span<const std::byte>(last).subspan(50);
  std::memcpy(r->buffer.data(), rest.data(), rest.size());
  BOOST_REQUIRE(c.end_recv(static_cast<std::int64_t>(rest.size())));
  BOOST_TEST(std::holds_alternative<connection_state::request>(c.next_frame()));
  BOOST_TEST(std::holds_alternative<std::monostate>(c.next_frame()));
  c.framing_done();
  c.check_invariants();
  BOOST_TEST(pool.outstanding() == 0u);
  BOOST_TEST(c.recv_buffer_bytes() == 0u);
  r = c.begin_read();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->poll);  // idle again
  // A shut down cancels the wait; the connection still holds nothing.
  BOOST_TEST(c.shut_down());
  c.end_poll(-ECANCELED);
  c.check_invariants();
  BOOST_TEST(pool.outstanding() == 0u);
  BOOST_TEST((c.next_step(false) == connection_state::step::wait));  // 21 requests still being answered
}

// Copies of received bytes (copied_bytes): a frame larger than a window gets a buffer of its size once its length is
// in, so only its first receive is copied (when the buffer grows), however large it is; its receives stop at its
// end, so the next frame's start is not moved afterwards. Pipelined small frames move only a cut-short last frame.
BOOST_AUTO_TEST_CASE(a_large_frame_is_copied_at_most_once_and_only_its_first_receive) {
  connection_state::limits l;
  l.frame_bytes_max = 64 << 20;
  l.inflight_requests_max = 1'000'000;
  l.inflight_bytes_max = 1ull << 40;
  for (const std::size_t size :
       {std::size_t{100'000}, std::size_t{1} << 20, std::size_t{10} << 20, (std::size_t{16} << 20) - 100}) {
    BOOST_TEST_CONTEXT("frame of " << size << " bytes") {
      connection_state c(l, pool);
      auto big = ping_frame(1, size);
      auto small = ping_frame(2, 100);
      std::vector<std::byte> bytes = big;
      bytes.insert(bytes.end(), small.begin(), small.end());
      bytes.insert(bytes.end(), big.begin(), big.end());  // and another large one behind it
      BOOST_TEST(deliver(c, bytes).size() == 3u);
      // Each large frame: what of it its first receive brought (a window; the second's shares its window with the
      // small frame), copied once into the frame's buffer; nothing else.
      BOOST_TEST(c.copied_bytes() == 2 * connection_state::recv_window_min - small.size());
      BOOST_TEST(pool.outstanding() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(large_frames_of_one_size_back_to_back_are_copied_only_for_the_first) {
  connection_state::limits l;
  l.inflight_requests_max = 1'000'000;
  l.inflight_bytes_max = 1ull << 40;
  connection_state c(l, pool);
  std::vector<std::byte> bytes;
  for (std::uint32_t i = 0; i < 20; ++i) {
    auto f = ping_frame(i, 300'000);
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  BOOST_TEST(deliver(c, bytes).size() == 20u);
  // The first frame's first window, when its buffer grew; every later frame gets a buffer of its size at once.
  BOOST_TEST(c.copied_bytes() == connection_state::recv_window_min);
  BOOST_TEST(pool.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(pipelined_small_frames_copy_only_the_start_of_a_frame_cut_short) {
  connection_state::limits l;
  l.inflight_requests_max = 1'000'000;
  l.inflight_bytes_max = 1ull << 40;
  connection_state c(l, pool);
  std::vector<std::byte> bytes;
  std::size_t frames = 0;
  while (bytes.size() < (std::size_t{8} << 20)) {
    auto f = ping_frame(static_cast<std::uint32_t>(frames++), 10'000);
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  BOOST_TEST(deliver(c, bytes).size() == frames);
  // At most one frame's start moved per receive of a window.
  const double per_byte = static_cast<double>(c.copied_bytes()) / static_cast<double>(bytes.size());
  BOOST_TEST_MESSAGE("10 kB frames: " << per_byte << " bytes copied per byte received");
  BOOST_TEST(c.copied_bytes() <= bytes.size() / connection_state::recv_window_min * 10'100);
}

BOOST_AUTO_TEST_CASE(a_large_frame_grows_the_buffer_and_gives_it_back) {
  connection_state::limits l;
  l.frame_bytes_max = 64 << 20;
  connection_state c(l, pool);
  auto big = ping_frame(5, 10 << 20);
  auto small = ping_frame(6);
  std::vector<std::byte> bytes = big;
  bytes.insert(bytes.end(), small.begin(), small.begin() + 10);  // the start of the next frame
  const auto got = deliver(c, bytes);
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].bytes == big.size());
  // The large buffer is not kept for ten bytes of the next frame: a window holds them.
  BOOST_TEST(c.buffered_bytes() == 10u);
  BOOST_TEST(c.recv_buffer_bytes() == connection_state::recv_window_min);
  BOOST_TEST(pool.outstanding() == 1u);
  BOOST_TEST(deliver(c, std::span<const std::byte>(small).subspan(10)).size() == 1u);
  BOOST_TEST(pool.outstanding() == 0u);
  // The peer closing with a partial frame buffered gives its buffer back too.
  BOOST_TEST(deliver(c, std::span<const std::byte>(small).first(5)).empty());
  BOOST_TEST(pool.outstanding() == 1u);
  BOOST_REQUIRE(recv_buffer(c).has_value());
  BOOST_TEST(!c.end_recv(0));
  c.check_invariants();
  BOOST_TEST(pool.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(a_length_prefix_alone_pins_a_window_not_the_frame) {
  // A slow or hostile sender that sends only the length of a 16 MiB frame (or a frame and the next one's length)
  // holds one window of buffer, not 16 MiB; the whole frame's buffer comes once a window of it is in.
  connection_state::limits l;
  l.frame_bytes_max = 16 << 20;
  connection_state c(l, pool);
  auto big = ping_frame(7, (16 << 20) - 64);
  BOOST_TEST(deliver(c, std::span<const std::byte>(big).first(net::length_bytes)).empty());
  auto next = recv_buffer(c);
  BOOST_REQUIRE(next.has_value());
  BOOST_TEST(c.recv_buffer_bytes() == connection_state::recv_window_min);
  c.end_recv(0);  // the peer gives up
  BOOST_TEST(pool.outstanding() == 0u);

  connection_state d(l, pool);
  auto small = ping_frame(8);
  std::vector<std::byte> bytes = small;
  bytes.insert(bytes.end(), big.begin(), big.begin() + net::length_bytes);
  BOOST_TEST(deliver(d, bytes).size() == 1u);
  BOOST_TEST(d.buffered_bytes() == net::length_bytes);
  BOOST_TEST(d.recv_buffer_bytes() <= connection_state::recv_window_min);
  // Once a window of the frame is in, its buffer is the frame's size, and the rest arrives without another copy.
  const auto copied = d.copied_bytes();
  const auto got = deliver(d, std::span<const std::byte>(big).subspan(net::length_bytes));
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].bytes == big.size());
  BOOST_TEST(d.copied_bytes() - copied <= connection_state::recv_window_min);
}

BOOST_AUTO_TEST_SUITE_END()
