#pragma once
// connection_state: one client connection's bytes and requests, without the socket: the received bytes split into
// request frames, the replies waiting to be sent, the requests and bytes in flight, and when to read, send, shut
// down and close. The connection actor owns the socket and submits the receives and sends this class asks for.
//
// Invariants
// - At most one receive and one send are pending; the received bytes are not touched while frames are being split
//   out of them (a reply queued meanwhile may not start a receive).
// - Reading is paused while inflight_requests_max requests or inflight_bytes_max request bytes are being served,
//   or inflight_bytes_max reply bytes wait to be sent, and for good once the connection is closing.
// - out_bytes_ is the sum of the queued replies' sizes; out_sent_ < the front reply's size (when there is one).
// - A framing error queues its error reply and ends reading: what is queued is sent, then the connection closes.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "net/frame.h"
#include "net/status.h"

namespace rill::actors {

class connection_state {
 public:
  struct limits {
    std::uint64_t inflight_requests_max = 64;
    std::uint64_t inflight_bytes_max = 64 << 20;
    std::uint64_t frame_bytes_max = 16 << 20;
  };
  // A receive reads at least this much, and at most recv_window_max even for a larger frame.
  static constexpr std::size_t recv_window_min = 64 * 1024;
  static constexpr std::size_t recv_window_max = 4 * 1024 * 1024;
  static_assert(recv_window_min <= recv_window_max);
  static_assert(recv_window_min >= net::request_prefix_bytes);

  explicit connection_state(limits l);

  // Receiving. The buffer the next receive fills, or nothing when none should start now (one is pending, frames
  // are being split, or reading is paused). Marks the receive pending.
  std::optional<std::span<std::byte>> begin_recv();
  // The pending receive completed: `result` bytes arrived (<= 0: the peer closed or the socket failed; the
  // connection is then closing). Returns whether bytes arrived.
  bool end_recv(std::int64_t result);

  // A request frame, parsed (its spans point into the received bytes until framing_done), with its size.
  struct request {
    net::request_view view;
    std::uint32_t bytes = 0;
  };
  // A frame that cannot be served: answer it with this error, send what is queued, then close.
  struct frame_error {
    std::uint32_t correlation = 0;
    net::status st = net::status::ok;
    std::string message;
  };
  // The next whole request in the received bytes (now counted in flight), a framing error, or nothing (more bytes
  // are needed, or reading ended). Call after end_recv returned true, until it returns nothing; then framing_done.
  std::variant<std::monostate, request, frame_error> next_frame();
  void framing_done();

  // Replies. Queues `frame`, the answer to a request of `request_bytes` (0 for a framing error's reply, which
  // answers no request in flight). False when it has nowhere to go: the socket is closed or the server is forcing
  // the connection closed (the request then stays counted in flight).
  bool queue_reply(std::vector<std::byte> frame, std::uint32_t request_bytes);
  // What the next send writes, or nothing (one is pending, or nothing is queued, or the socket is closed). Marks the
  // send pending.
  std::optional<std::span<const std::byte>> begin_send();
  // The pending send completed: `result` bytes were written (< 0: the peer is gone; what is queued is dropped).
  void end_send(std::int64_t result);

  // Closing. No more reading; queued replies are still sent. Returns whether a receive is pending (to cancel).
  bool shut_down();
  // The server is stopping: replies still being computed and unsent bytes are dropped. Returns whether a send is
  // pending (to cancel: its reply stays queued until it completes). Call shut_down after.
  bool force();
  enum class step { wait, shut_down, close };
  // What to do now that something completed: keep waiting, shut down (a framing error's reply went out), or close
  // the socket (nothing left to send, answer or complete; `io_in_flight`: the actor's requests in the kernel).
  [[nodiscard]] step next_step(bool io_in_flight) const;
  // The socket is closed: replies are dropped from now on.
  void closed() {
    closed_ = true;
    closing_ = true;
  }

  [[nodiscard]] bool can_read() const;
  // Asserts the invariants above (O(queued replies): tests call it after every step).
  void check_invariants() const;
  [[nodiscard]] bool recv_pending() const noexcept { return recv_pending_; }
  [[nodiscard]] bool is_closed() const noexcept { return closed_; }
  [[nodiscard]] std::uint32_t inflight_requests() const noexcept { return inflight_requests_; }
  [[nodiscard]] std::uint64_t inflight_bytes() const noexcept { return inflight_bytes_; }
  [[nodiscard]] std::uint64_t out_bytes() const noexcept { return out_bytes_; }
  [[nodiscard]] std::size_t out_queued() const noexcept { return out_.size(); }

 private:
  void drop_queued(bool keep_front);

  limits limits_;
  std::vector<std::byte> in_;               // received, not yet framed; during a receive, its buffer's tail
  std::size_t recv_at_ = 0;                 // where the pending receive writes in in_
  std::size_t consumed_ = 0;                // bytes of in_ framed since end_recv
  std::deque<std::vector<std::byte>> out_;  // replies waiting to be sent; front is being sent
  std::size_t out_sent_ = 0;                // bytes of out_.front() already sent
  std::uint64_t out_bytes_ = 0;
  std::uint32_t inflight_requests_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  bool recv_pending_ = false;
  bool framing_ = false;
  bool send_pending_ = false;
  bool closing_ = false;           // no more reading; finish replies, then close
  bool close_after_send_ = false;  // a framing error: send what is queued, then close
  bool forced_ = false;            // the server is stopping: drop pending replies and unsent bytes, then close
  bool closed_ = false;            // the socket is closed
};

}  // namespace rill::actors
