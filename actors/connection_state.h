#pragma once
// connection_state: one client connection's bytes and requests, without the socket: the received bytes split into
// request frames, the replies waiting to be sent, the requests and bytes in flight, and when to read, send, shut
// down and close. The connection actor owns the socket and submits the receives and sends this class asks for.
//
// Memory: an idle connection holds no receive buffer. With nothing buffered, a read is first a wait for readability
// (no buffer); only once bytes are waiting does a receive take a buffer from the shard's pool, and the buffer goes back
// as soon as every received byte is framed. A partly received frame keeps its buffer (it is data buffered), and the
// next receive goes straight into it. Replies are held only while queued. A frame larger than a window gets a buffer
// of its whole size (bounded by frame_bytes_max) once a window of it is in, not on its length prefix alone (a slow
// sender pins a window): its bytes are copied at most once, when the buffer grows, and only its first window;
// receives for it stop at its end. After a large
// frame, the next receive guesses that the next frame is as large (a buffer of its size; it still reads one window):
// large frames of one size arriving back to back are then not copied at all.
//
// Invariants
// - At most one read (a wait for readability or a receive) and one send are pending; the received bytes are not
//   touched while frames are being split out of them (a reply queued meanwhile may not start a read).
// - A receive buffer is held only while a receive is pending or received bytes wait to be framed: no buffer when
//   in_size_ is 0 and no receive is pending.
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

#include "base/assert.h"
#include "net/frame.h"
#include "net/status.h"
#include "storage/buffer_pool.h"

namespace rill::actors {

class connection_state {
 public:
  struct limits {
    std::uint64_t inflight_requests_max = 64;
    std::uint64_t inflight_bytes_max = 64 << 20;
    std::uint64_t frame_bytes_max = 16 << 20;
  };
  // A receive buffer holds at least this much (a frame's whole size once a larger frame's length is known), and a
  // receive reads at most recv_window_max even for a larger frame.
  static constexpr std::size_t recv_window_min = 64 * 1024;
  static constexpr std::size_t recv_window_max = 4 * 1024 * 1024;
  static_assert(recv_window_min <= recv_window_max);
  static_assert(recv_window_min >= net::request_prefix_bytes);

  // `pool`: where receive buffers come from (the shard's); it must outlive this state and its owner thread is the
  // only one that may call begin_read.
  connection_state(limits l, storage::buffer_pool& pool);

  // Receiving. The next read: a wait for readability (nothing buffered and no bytes known to be waiting: no buffer
  // is taken) or a receive into `buffer` (taken from the pool, after what is already buffered). Nothing when no read
  // should start now (one is pending, frames are being split, or reading is paused). Marks the read pending.
  struct read_op {
    bool poll = false;            // wait for readability (end_poll), else receive into buffer (end_recv)
    std::span<std::byte> buffer;  // the receive's bytes; empty for a poll
  };
  std::optional<read_op> begin_read();
  // The pending wait for readability completed: `result` is the poll events (< 0: it failed or was cancelled; the
  // connection is then closing). The next read is a receive.
  void end_poll(std::int64_t result);
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

  // Closing. No more reading; queued replies are still sent. Returns whether a read is pending (to cancel).
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
  [[nodiscard]] bool poll_pending() const noexcept { return recv_pending_ && polling_; }
  // The receive buffer held (its capacity; 0 when none) and the received bytes not yet framed.
  [[nodiscard]] std::size_t recv_buffer_bytes() const noexcept { return in_.capacity(); }
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return in_size_; }
  // Received bytes copied so far when the receive buffer grew (at most once per frame: the bytes of its first
  // receive) or kept the start of the next frame (moved to the front, or into a smaller buffer).
  [[nodiscard]] std::uint64_t copied_bytes() const noexcept { return copied_bytes_; }
  // The receive buffer, given up for good: the kernel may still write into it (the actor is terminated with a
  // receive pending), so it is neither reused nor freed (buffer_pool's abandon).
  void abandon_recv_buffer() noexcept { in_.abandon(); }
  // Gives the receive buffer back to the pool, with whatever it held, when no receive can write into it (the actor
  // terminating with only sends or cancels in the kernel): the pool then counts no buffer out for it.
  void release_recv_buffer() noexcept {
    RILL_ASSERT(!recv_pending_ || polling_, "a receive may still write into the buffer");
    in_.release();
    in_size_ = 0;
  }
  [[nodiscard]] bool is_closed() const noexcept { return closed_; }
  [[nodiscard]] std::uint32_t inflight_requests() const noexcept { return inflight_requests_; }
  [[nodiscard]] std::uint64_t inflight_bytes() const noexcept { return inflight_bytes_; }
  [[nodiscard]] std::uint64_t out_bytes() const noexcept { return out_bytes_; }
  [[nodiscard]] std::size_t out_queued() const noexcept { return out_.size(); }

 private:
  void drop_queued(bool keep_front);
  // Makes in_ hold at least `bytes`, keeping the in_size_ bytes buffered.
  void reserve_in(std::size_t bytes);

  limits limits_;
  storage::buffer_pool* pool_;
  storage::pooled_buffer in_;  // received, not yet framed (in_size_ bytes); a receive fills its tail
  std::size_t in_size_ = 0;
  std::size_t recv_at_ = 0;                 // where the pending receive writes in in_
  std::size_t consumed_ = 0;                // bytes of in_ framed since end_recv
  std::uint64_t copied_bytes_ = 0;          // copied_bytes()
  std::size_t frame_bytes_last_ = 0;        // the size of the last frame framed: the next receive's guess
  std::deque<std::vector<std::byte>> out_;  // replies waiting to be sent; front is being sent
  std::size_t out_sent_ = 0;                // bytes of out_.front() already sent
  std::uint64_t out_bytes_ = 0;
  std::uint32_t inflight_requests_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  bool recv_pending_ = false;  // a read (poll or receive) is pending
  bool polling_ = false;       // ... and it is a wait for readability
  bool readable_ = false;      // the last poll said bytes are waiting: the next read is a receive
  bool framing_ = false;
  bool send_pending_ = false;
  bool closing_ = false;           // no more reading; finish replies, then close
  bool close_after_send_ = false;  // a framing error: send what is queued, then close
  bool forced_ = false;            // the server is stopping: drop pending replies and unsent bytes, then close
  bool closed_ = false;            // the socket is closed
};

}  // namespace rill::actors
