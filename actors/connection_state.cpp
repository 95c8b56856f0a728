// connection_state: framing, back-pressure and closing of one client connection (see the header).
#include "actors/connection_state.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "base/endian.h"
#include "net/errc.h"

namespace rill::actors {
namespace {
// The correlation id of a frame that is refused, when enough of it arrived to tell.
std::uint32_t correlation_of(std::span<const std::byte> frame) {
  return frame.size() >= 8 ? load_be<std::uint32_t>(frame.data() + 4) : 0;
}
}  // namespace

connection_state::connection_state(limits l, storage::buffer_pool& pool) : limits_(l), pool_(&pool) {
  RILL_ASSERT(l.inflight_requests_max > 0);
  RILL_ASSERT(l.inflight_bytes_max > 0);
  RILL_ASSERT(l.frame_bytes_max >= net::request_prefix_bytes);
}

bool connection_state::can_read() const {
  return !closing_ && !close_after_send_ && inflight_requests_ < limits_.inflight_requests_max &&
         inflight_bytes_ < limits_.inflight_bytes_max && out_bytes_ < limits_.inflight_bytes_max;
}

std::optional<connection_state::read_op> connection_state::begin_read() {
  if (recv_pending_ || framing_ || !can_read()) {
    return std::nullopt;
  }
  if (in_size_ == 0 && !readable_) {
    // Nothing buffered and no bytes known to be waiting: wait for them without holding a buffer (the idle case).
    RILL_ASSERT(!in_);
    recv_pending_ = true;
    polling_ = true;
    return read_op{true, {}};
  }
  // The buffer holds at least a window, and the whole frame once a larger one is coming and a window of it is in:
  // it grows once per frame (copying what was buffered: the first window), never again as the frame's bytes
  // arrive. Not before a window is in: a length prefix alone (a slow or hostile sender) pins a window, not up to
  // frame_bytes_max. A receive for a large frame stops at its end, so that no start of the next frame is left to
  // move afterwards.
  std::size_t need = recv_window_min;
  std::size_t frame_rest = recv_window_max;
  if (in_size_ >= net::length_bytes) {
    const std::uint64_t frame = std::uint64_t{load_be<std::uint32_t>(in_.data())} + net::length_bytes;
    RILL_ASSERT(frame > in_size_, "a whole frame of {} bytes was left unframed", frame);
    RILL_ASSERT(frame <= limits_.frame_bytes_max, "a frame of {} bytes over the limit was not refused", frame);
    if (in_size_ >= recv_window_min) {
      need = std::max<std::uint64_t>(need, frame);
    }
    if (frame > recv_window_min) {
      frame_rest = static_cast<std::size_t>(frame - in_size_);
    }
  } else if (in_size_ == 0 && frame_bytes_last_ > recv_window_min) {
    // A frame starts here, most likely one like the last (a producer's batches are much alike): a buffer of that
    // size, so that the frame's first window need not be copied into a grown one. The receive still reads one window:
    // a guess that is wrong costs what it would have cost without it (at most that window is moved once).
    RILL_ASSERT(frame_bytes_last_ <= limits_.frame_bytes_max);
    need = frame_bytes_last_;
    frame_rest = recv_window_min;
  }
  reserve_in(need);
  RILL_ASSERT(in_.capacity() > in_size_);
  const std::size_t want = std::min({in_.capacity() - in_size_, recv_window_max, frame_rest});
  RILL_ASSERT(want > 0);
  recv_at_ = in_size_;
  recv_pending_ = true;
  readable_ = false;
  return read_op{false, std::span<std::byte>(in_.data() + recv_at_, want)};
}

void connection_state::reserve_in(std::size_t bytes) {
  if (in_.capacity() >= bytes) {
    return;
  }
  auto bigger = pool_->acquire(bytes);
  RILL_ASSERT(bigger.capacity() >= bytes);
  if (in_size_ > 0) {
    std::memcpy(bigger.data(), in_.data(), in_size_);
    copied_bytes_ += in_size_;
  }
  in_ = std::move(bigger);  // the smaller buffer goes back to the pool
}

void connection_state::end_poll(std::int64_t result) {
  RILL_ASSERT(recv_pending_);
  RILL_ASSERT(polling_);
  RILL_ASSERT(!framing_);
  recv_pending_ = false;
  polling_ = false;
  if (result < 0) {
    closing_ = true;  // cancelled at shut down, or the socket failed
    return;
  }
  readable_ = true;  // POLLIN, or POLLHUP/POLLERR: the receive tells which
}

bool connection_state::end_recv(std::int64_t result) {
  RILL_ASSERT(recv_pending_);
  RILL_ASSERT(!polling_);
  RILL_ASSERT(!framing_);
  RILL_ASSERT(recv_at_ == in_size_);
  recv_pending_ = false;
  if (result <= 0) {
    closing_ = true;  // the peer closed (0) or the socket failed: finish what is in flight, then go
    in_size_ = 0;     // a partial frame that never completes
    in_.release();
    return false;
  }
  RILL_ASSERT(recv_at_ + static_cast<std::size_t>(result) <= in_.capacity());
  in_size_ = recv_at_ + static_cast<std::size_t>(result);
  framing_ = true;
  consumed_ = 0;
  return true;
}

std::variant<std::monostate, connection_state::request, connection_state::frame_error> connection_state::next_frame() {
  if (!framing_ || close_after_send_) {
    return std::monostate{};
  }
  const auto rest = std::span<const std::byte>(in_.data(), in_size_).subspan(consumed_);
  auto size = net::next_frame_size(rest, net::request_prefix_bytes, limits_.frame_bytes_max);
  if (!size) {
    close_after_send_ = true;
    return frame_error{correlation_of(rest), net::status_of(size.error().code()), size.error().detail()};
  }
  if (!size->has_value()) {
    return std::monostate{};
  }
  const auto frame = rest.first(**size);
  consumed_ += frame.size();
  auto req = net::parse_request(frame);
  if (!req) {
    close_after_send_ = true;
    return frame_error{correlation_of(frame), net::status::malformed_frame, req.error().detail()};
  }
  const auto bytes = static_cast<std::uint32_t>(frame.size());
  frame_bytes_last_ = frame.size();
  ++inflight_requests_;
  inflight_bytes_ += bytes;
  return request{*req, bytes};
}

void connection_state::framing_done() {
  RILL_ASSERT(framing_);
  RILL_ASSERT(consumed_ <= in_size_);
  const std::size_t rest = in_size_ - consumed_;
  if (rest == 0 || close_after_send_) {
    in_size_ = 0;
    in_.release();  // every byte framed: the buffer goes back to the pool until bytes wait again
  } else {
    // The next frame's start stays. Its buffer: a window, or the frame's whole size once a window of it is in (as
    // begin_read would make it), so that it is moved once, not moved here and then again when the buffer grows.
    std::size_t need = recv_window_min;
    if (rest >= net::length_bytes && rest >= recv_window_min) {
      const std::uint64_t frame = std::uint64_t{load_be<std::uint32_t>(in_.data() + consumed_)} + net::length_bytes;
      RILL_ASSERT(frame > rest, "a whole frame of {} bytes was left unframed", frame);
      RILL_ASSERT(frame <= limits_.frame_bytes_max, "a frame of {} bytes over the limit was not refused", frame);
      need = std::max<std::uint64_t>(need, frame);
    }
    // A large buffer (grown for a large frame) holding the start of a small one: keep a window, not the large one.
    const bool shrink = in_.capacity() > recv_window_min && rest <= recv_window_min / 2 && need <= recv_window_min;
    if (in_.capacity() < need || shrink) {
      auto other = pool_->acquire(need);
      RILL_ASSERT(other.capacity() >= need);
      std::memcpy(other.data(), in_.data() + consumed_, rest);
      copied_bytes_ += rest;
      in_ = std::move(other);
    } else if (consumed_ > 0) {
      std::memmove(in_.data(), in_.data() + consumed_, rest);
      copied_bytes_ += rest;
    }
    in_size_ = rest;
  }
  consumed_ = 0;
  framing_ = false;
}

bool connection_state::queue_reply(std::vector<std::byte> frame, std::uint32_t request_bytes) {
  if (closed_ || forced_) {
    return false;  // closed meanwhile: the reply has nowhere to go
  }
  if (request_bytes > 0) {
    RILL_ASSERT(inflight_requests_ > 0);
    RILL_ASSERT(inflight_bytes_ >= request_bytes);
    --inflight_requests_;
    inflight_bytes_ -= request_bytes;
  }
  out_bytes_ += frame.size();
  out_.push_back(std::move(frame));
  return true;
}

std::optional<std::span<const std::byte>> connection_state::begin_send() {
  if (send_pending_ || out_.empty() || closed_) {
    return std::nullopt;
  }
  RILL_ASSERT(out_sent_ < out_.front().size());
  send_pending_ = true;
  return std::span<const std::byte>(out_.front()).subspan(out_sent_);
}

void connection_state::end_send(std::int64_t result) {
  RILL_ASSERT(send_pending_);
  send_pending_ = false;
  if (result < 0) {
    drop_queued(false);  // the peer is gone: nothing more can be delivered
    closing_ = true;
    return;
  }
  if (forced_) {
    drop_queued(false);  // nothing more is sent
    return;
  }
  RILL_ASSERT(!out_.empty());
  out_sent_ += static_cast<std::size_t>(result);
  RILL_ASSERT(out_sent_ <= out_.front().size());
  if (out_sent_ == out_.front().size()) {
    out_bytes_ -= out_.front().size();
    out_.pop_front();
    out_sent_ = 0;
  }
}

bool connection_state::shut_down() {
  closing_ = true;
  if (!recv_pending_ && !framing_) {
    in_size_ = 0;  // a partial frame that is never read to its end
    in_.release();
  }
  return recv_pending_;
}

bool connection_state::force() {
  forced_ = true;
  // While a send is pending the kernel may still read the front reply: it stays until the send completes.
  drop_queued(send_pending_);
  return send_pending_;
}

void connection_state::drop_queued(bool keep_front) {
  while (out_.size() > (keep_front ? 1 : 0)) {
    out_bytes_ -= out_.back().size();
    out_.pop_back();
  }
  if (!keep_front) {
    out_sent_ = 0;
  }
  RILL_ASSERT(out_.empty() ? out_bytes_ == 0 : out_bytes_ == out_.front().size());
}

void connection_state::check_invariants() const {
  std::uint64_t queued = 0;
  for (const auto& frame : out_) {
    queued += frame.size();
  }
  RILL_ASSERT(queued == out_bytes_, "{} bytes queued, {} counted", queued, out_bytes_);
  RILL_ASSERT(out_.empty() ? out_sent_ == 0 : out_sent_ < out_.front().size());
  RILL_ASSERT(!send_pending_ || !out_.empty());
  RILL_ASSERT(!framing_ || !recv_pending_);
  RILL_ASSERT(consumed_ <= in_size_);
  RILL_ASSERT(in_size_ <= in_.capacity());
  RILL_ASSERT(!recv_pending_ || polling_ || recv_at_ < in_.capacity());
  RILL_ASSERT(!polling_ || recv_pending_);
  RILL_ASSERT(!polling_ || !in_, "a buffer held while waiting for readability");
  RILL_ASSERT(in_size_ > 0 || framing_ || (recv_pending_ && !polling_) || !in_, "an idle connection holds a buffer");
  RILL_ASSERT(inflight_requests_ == 0 ? inflight_bytes_ == 0 : inflight_bytes_ >= inflight_requests_);
  RILL_ASSERT(!closed_ || closing_);
}

connection_state::step connection_state::next_step(bool io_in_flight) const {
  const bool done_sending = out_.empty() && !send_pending_;
  const bool requests_done = inflight_requests_ == 0 || forced_;
  if (closed_ || !done_sending || !requests_done) {
    return step::wait;
  }
  if (!closing_) {
    return close_after_send_ ? step::shut_down : step::wait;
  }
  // Nothing of the connection's may be left in the kernel when it closes: the pending read and the cancels first.
  if (recv_pending_ || io_in_flight) {
    return step::wait;
  }
  return step::close;
}

}  // namespace rill::actors
