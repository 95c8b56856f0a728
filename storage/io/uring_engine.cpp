// Invariants
// - in_flight_ counts requests between submit() and the end of their completion callback.
// - A request is in exactly one of: pending_ (not yet an SQE), the ring, helper_queue_, helper_done_.
// - The eventfd poll is armed whenever a helper request is outstanding.
// - blocking_done_ holds only requests that prep() ran on this thread; reap() empties it.
// - disk_in_flight_ counts the file requests (not sockets) among in_flight_.
// - Inline idle syncs: poll(false) submits nothing while inline_candidate() holds; the deferred request leaves
//   pending_ only through poll_wait() (run inline), submit_deferred(), poll(true) or a later poll(false) that finds
//   company for it.
#include "storage/io/uring_engine.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "storage/errc.h"
#include "storage/io/syscalls.h"

namespace rill::storage::io {
namespace {
bool is_file_op(opcode op) noexcept {
  switch (op) {
    case opcode::accept:
    case opcode::recv:
    case opcode::send:
    case opcode::connect:
    case opcode::poll_readable:
    case opcode::cancel:
      return false;
    default:
      return true;
  }
}

// user_data of the eventfd poll; requests use their address (never this value).
constexpr std::uint64_t eventfd_tag = 1;
// Low bit of user_data marks the write half of a writev_datasync pair (requests are at least 8-byte aligned).
constexpr std::uint64_t linked_write_tag = 1;
static_assert(alignof(request) >= 2);
// liburing 2.3 has no helper for IORING_OP_FTRUNCATE (kernel 6.9+); the opcode number is stable ABI.
constexpr int op_ftruncate = 55;

}  // namespace

expected<std::unique_ptr<uring_engine>> uring_engine::create(unsigned entries, bool probe_opcodes) {
  std::unique_ptr<uring_engine> e(new uring_engine());
  const int rc = io_uring_queue_init(entries, &e->ring_, 0);
  if (rc < 0) {
    return unexpected(io_error(rc, "io_uring_queue_init"));
  }
  e->ring_ready_ = true;
  if (io_uring_probe* probe = probe_opcodes ? io_uring_get_probe_ring(&e->ring_) : nullptr) {
    e->native_ftruncate_ = io_uring_opcode_supported(probe, op_ftruncate);
    e->native_mkdir_ = io_uring_opcode_supported(probe, IORING_OP_MKDIRAT);
    e->native_rename_ = io_uring_opcode_supported(probe, IORING_OP_RENAMEAT);
    e->native_unlink_ = io_uring_opcode_supported(probe, IORING_OP_UNLINKAT);
    io_uring_free_probe(probe);
  }
  e->eventfd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (e->eventfd_ < 0) {
    return unexpected(io_error(-errno, "eventfd"));
  }
  return e;
}

uring_engine::~uring_engine() {
  RILL_ASSERT(in_flight_ == 0, "uring_engine destroyed with {} requests in flight", in_flight_);
  if (helper_.joinable()) {
    {
      std::lock_guard lock(helper_mutex_);
      helper_stop_ = true;
    }
    helper_cv_.notify_one();
    helper_.join();
  }
  if (ring_ready_) {
    // An armed eventfd poll may still sit in the ring; exiting the ring cancels it.
    io_uring_queue_exit(&ring_);
  }
  if (eventfd_ >= 0) {
    ::close(eventfd_);
  }
}

bool uring_engine::needs_helper(const request& r) const noexcept {
  switch (r.op) {
    case opcode::list_dir:
    case opcode::file_size:
    case opcode::drop_cache:  // (IORING_OP_FADVISE would do; it is rare: recovery only)
      return true;
    case opcode::ftruncate:
      return !native_ftruncate_;
    case opcode::mkdir:
      return !native_mkdir_;
    case opcode::rename:
      return !native_rename_;
    case opcode::unlink:
    case opcode::rmdir:
      return !native_unlink_;
    default:
      return false;
  }
}

void uring_engine::submit(request& r) {
  RILL_ASSERT(r.on_complete != nullptr);
  ++in_flight_;
  if (is_file_op(r.op)) {
    ++disk_in_flight_;
  }
  if (r.op == opcode::writev_datasync) {
    ++datasyncs_seen_;
    if (inline_idle_syncs_ && (datasync_in_flight_ > 0 || (last_datasync_fd_ >= 0 && r.fd != last_datasync_fd_))) {
      // Company: another sync is in flight, or another file was synced last (more than one log syncs on this
      // shard, whose syncs would overlap on the device if they went to the ring).
      inline_off_until_ = datasyncs_seen_ + inline_backoff_syncs;
      ++inline_backoffs_;
    }
    last_datasync_fd_ = r.fd;
    ++datasync_in_flight_;
  }
  if (needs_helper(r)) {
    start_helper();
    ++helper_outstanding_;
    {
      std::lock_guard lock(helper_mutex_);
      helper_queue_.push_back(&r);
    }
    helper_cv_.notify_one();
    return;
  }
  pending_.push_back(&r);
}

bool uring_engine::prep(request& r) {
  if (r.blocking_ok && (r.op == opcode::write || r.op == opcode::writev)) {
    execute_blocking(r);
    ++blocking_writes_;
    blocking_done_.push_back(&r);
    return true;
  }
  if (r.op == opcode::writev_datasync) {
    // Two linked SQEs: the fdatasync starts only after the whole write succeeded (a short or failed write cancels it).
    if (io_uring_sq_space_left(&ring_) < 2) {
      return false;
    }
    io_uring_sqe* write = io_uring_get_sqe(&ring_);
    io_uring_prep_writev(write, r.fd, r.iov, r.iov_count, r.offset);
    write->flags |= IOSQE_IO_LINK;
    io_uring_sqe_set_data64(write, reinterpret_cast<std::uint64_t>(&r) | linked_write_tag);
    io_uring_sqe* sync = io_uring_get_sqe(&ring_);
    io_uring_prep_fsync(sync, r.fd, IORING_FSYNC_DATASYNC);
    io_uring_sqe_set_data(sync, &r);
    submissions_ += 2;
    return true;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    return false;
  }
  switch (r.op) {
    case opcode::open:
      io_uring_prep_openat(sqe, AT_FDCWD, r.path.c_str(), posix_open_flags(r.flags), r.mode);
      break;
    case opcode::close:
      io_uring_prep_close(sqe, r.fd);
      break;
    case opcode::read:
      io_uring_prep_read(sqe, r.fd, r.buffer, static_cast<unsigned>(r.length), r.offset);
      break;
    case opcode::write:
      io_uring_prep_write(sqe, r.fd, r.cbuffer, static_cast<unsigned>(r.length), r.offset);
      break;
    case opcode::writev:
      io_uring_prep_writev(sqe, r.fd, r.iov, r.iov_count, r.offset);
      break;
    case opcode::fdatasync:
      io_uring_prep_fsync(sqe, r.fd, IORING_FSYNC_DATASYNC);
      break;
    case opcode::fsync:
      io_uring_prep_fsync(sqe, r.fd, 0);
      break;
    case opcode::ftruncate:
      io_uring_prep_rw(op_ftruncate, sqe, r.fd, nullptr, 0, r.offset);
      break;
    case opcode::reserve:
      io_uring_prep_fallocate(sqe, r.fd, FALLOC_FL_KEEP_SIZE, r.offset, r.length);
      break;
    case opcode::rename:
      io_uring_prep_renameat(sqe, AT_FDCWD, r.path.c_str(), AT_FDCWD, r.path2.c_str(), 0);
      break;
    case opcode::unlink:
      io_uring_prep_unlinkat(sqe, AT_FDCWD, r.path.c_str(), 0);
      break;
    case opcode::rmdir:
      io_uring_prep_unlinkat(sqe, AT_FDCWD, r.path.c_str(), AT_REMOVEDIR);
      break;
    case opcode::mkdir:
      io_uring_prep_mkdirat(sqe, AT_FDCWD, r.path.c_str(), r.mode);
      break;
    case opcode::accept:
      io_uring_prep_accept(sqe, r.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      break;
    case opcode::recv:
      io_uring_prep_recv(sqe, r.fd, r.buffer, r.length, 0);
      break;
    case opcode::send:
      io_uring_prep_send(sqe, r.fd, r.cbuffer, r.length, MSG_NOSIGNAL);
      break;
    case opcode::connect:
      io_uring_prep_connect(sqe, r.fd, reinterpret_cast<const ::sockaddr*>(r.cbuffer),
                            static_cast<::socklen_t>(r.length));
      break;
    case opcode::poll_readable:
      io_uring_prep_poll_add(sqe, r.fd, POLLIN);
      break;
    case opcode::cancel:
      io_uring_prep_cancel(sqe, r.target, 0);
      break;
    case opcode::list_dir:
    case opcode::file_size:
    case opcode::drop_cache:
    case opcode::writev_datasync:
      RILL_UNREACHABLE("{} is not a single SQE", to_string(r.op));
  }
  io_uring_sqe_set_data(sqe, &r);
  ++submissions_;
  return true;
}

void uring_engine::arm_eventfd() {
  if (eventfd_armed_) {
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
    RILL_ASSERT(sqe != nullptr);
  }
  io_uring_prep_poll_add(sqe, eventfd_, POLLIN);
  io_uring_sqe_set_data64(sqe, eventfd_tag);
  eventfd_armed_ = true;
}

void uring_engine::start_helper() {
  if (helper_.joinable()) {
    return;
  }
  helper_ = std::thread([this] { helper_main(); });
}

void uring_engine::helper_main() {
  for (;;) {
    request* r = nullptr;
    {
      std::unique_lock lock(helper_mutex_);
      helper_cv_.wait(lock, [this] { return helper_stop_ || !helper_queue_.empty(); });
      if (helper_queue_.empty()) {
        return;  // stopping, and nothing left
      }
      r = helper_queue_.front();
      helper_queue_.pop_front();
    }
    execute_blocking(*r);
    {
      std::lock_guard lock(helper_mutex_);
      helper_done_.push_back(r);
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(eventfd_, &one, sizeof one);
  }
}

std::size_t uring_engine::reap(std::vector<request*>& done) {
  const std::size_t before = done.size();
  done.insert(done.end(), blocking_done_.begin(), blocking_done_.end());
  blocking_done_.clear();
  io_uring_cqe* cqe = nullptr;
  bool signalled = false;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    if (io_uring_cqe_get_data64(cqe) == eventfd_tag) {
      signalled = true;
      eventfd_armed_ = false;
    } else if (const std::uint64_t data = io_uring_cqe_get_data64(cqe); data & linked_write_tag) {
      // The write half of writev_datasync: remember its result; the request completes with its sync.
      reinterpret_cast<request*>(data & ~linked_write_tag)->result = cqe->res;
    } else {
      auto* r = static_cast<request*>(io_uring_cqe_get_data(cqe));
      if (r->op == opcode::writev_datasync) {
        r->sync_result = cqe->res;
      } else {
        r->result = cqe->res;
      }
      done.push_back(r);
    }
    io_uring_cqe_seen(&ring_, cqe);
  }
  if (signalled) {
    // Reset the counter before collecting, so a completion posted after this read re-triggers the poll.
    [[maybe_unused]] const ssize_t rd = ::read(eventfd_, &eventfd_value_, sizeof eventfd_value_);
  }
  if (helper_outstanding_ > 0) {
    std::lock_guard lock(helper_mutex_);
    for (request* r : helper_done_) {
      done.push_back(r);
    }
    helper_outstanding_ -= helper_done_.size();
    helper_done_.clear();
  }
  return done.size() - before;
}

void uring_engine::wake() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(eventfd_, &one, sizeof one);
}

bool uring_engine::inline_candidate() const noexcept {
  return inline_idle_syncs_ && pending_.size() == 1 && pending_.front()->op == opcode::writev_datasync &&
         disk_in_flight_ == 1 && helper_outstanding_ == 0 && datasyncs_seen_ >= inline_off_until_;
}

void uring_engine::run_inline(request& r) {
  execute_blocking(r);  // pwritev, then fdatasync when the whole write went down (-ECANCELED otherwise), as the ring
  ++inline_syncs_;
}

void uring_engine::submit_deferred() {
  if (pending_.empty()) {
    return;
  }
  while (!pending_.empty() && prep(*pending_.front())) {
    pending_.pop_front();
  }
  const int rc = io_uring_submit(&ring_);
  ++enters_;
  RILL_ASSERT(rc >= 0 || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN, "io_uring_enter: {}", std::strerror(-rc));
}

void uring_engine::finish(std::vector<request*>& done) {
  for (request* r : done) {
    RILL_ASSERT(in_flight_ > 0);
    --in_flight_;
    if (is_file_op(r->op)) {
      RILL_ASSERT(disk_in_flight_ > 0);
      --disk_in_flight_;
    }
    if (r->op == opcode::writev_datasync) {
      RILL_ASSERT(datasync_in_flight_ > 0);
      --datasync_in_flight_;
    }
    complete(*r);
  }
}

std::size_t uring_engine::poll_wait(std::optional<std::chrono::nanoseconds> timeout) {
  std::vector<request*> done;
  if (inline_candidate() && (!timeout || *timeout >= inline_timeout_min)) {
    // The owner would sleep with one write + fdatasync outstanding and nothing else: do it here instead of handing
    // it to a kernel worker and being woken by its completion. Whatever reaches the shard meanwhile waits for it.
    request* r = pending_.front();
    pending_.pop_front();
    run_inline(*r);
    done.push_back(r);
  }
  while (!pending_.empty() && prep(*pending_.front())) {
    pending_.pop_front();
  }
  reap(done);
  arm_eventfd();  // a wake() from another thread (or a helper completion) ends the sleep
  int rc = 0;
  if (!done.empty()) {
    rc = io_uring_submit(&ring_);
  } else if (timeout) {
    const auto ns = std::max<std::int64_t>(timeout->count(), 0);
    __kernel_timespec ts{ns / 1'000'000'000, ns % 1'000'000'000};
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  } else {
    rc = io_uring_submit_and_wait(&ring_, 1);
  }
  ++enters_;
  RILL_ASSERT(rc >= 0 || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN || rc == -ETIME, "io_uring_enter: {}",
              std::strerror(-rc));
  reap(done);
  finish(done);
  return done.size();
}

std::size_t uring_engine::poll(bool wait) {
  std::vector<request*> done;
  for (;;) {
    // A lone write + fdatasync stays queued for poll_wait() or submit_deferred() (inline idle syncs).
    const bool keep_back = !wait && inline_candidate();
    while (!keep_back && !pending_.empty() && prep(*pending_.front())) {
      pending_.pop_front();  // a full ring leaves the rest queued for after this submit
    }
    // Reap first: a stale eventfd completion (its helper result already collected) clears eventfd_armed_ here, so
    // the poll is re-armed below before we sleep, and a helper completion can always wake us.
    reap(done);
    if (helper_outstanding_ > 0) {
      arm_eventfd();
    }
    const bool block = wait && done.empty() && in_flight_ > 0;
    const int rc = block ? io_uring_submit_and_wait(&ring_, 1) : io_uring_submit(&ring_);
    ++enters_;
    RILL_ASSERT(rc >= 0 || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN, "io_uring_enter: {}", std::strerror(-rc));
    reap(done);
    if (!done.empty() || !wait || in_flight_ == 0) {
      break;
    }
  }
  finish(done);
  return done.size();
}

}  // namespace rill::storage::io
