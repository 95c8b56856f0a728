#pragma once
// io::engine: the one asynchronous file I/O interface the storage layer is written against.
//
// Model: submit an operation, receive its completion later. Whoever owns the engine drives it by calling poll():
// a loop in tests and tools, the shard's worker thread in rilld. Completions run inside poll(), on the owner's
// thread, never inside submit(), so a completion callback may submit further operations without recursion.
//
// Backends
// - uring_engine (io_uring_engine.h): liburing; reads, writes, fdatasync, opens, renames etc. as io_uring
//   operations, batched into one io_uring_enter per poll(); operations the kernel cannot do asynchronously
//   (directory listing; ftruncate where opcode 55 is missing) run on one helper thread and complete through an
//   eventfd the ring watches. No blocking system call on the caller's thread except the wait inside poll(true),
//   writes marked blocking_ok, and (inline idle syncs, shard runtime only) a lone write + fdatasync run by
//   poll_wait() where the owner would have slept.
// - sync_engine (io_sync_engine.h): plain blocking system calls run inside poll(); for tools.
// - sim_disk (sim_disk.h): an in-memory file system with seeded latency and faults and crash semantics; for tests
//   and the simulator.
//
// Contract for callers
// - A request (and every buffer, iovec array and string it points to) stays alive and unmoved from submit() until
//   its completion has run. Results: result >= 0 on success (bytes transferred, new fd, file size, or 0); -errno on
//   failure. A short read or write is a success with fewer bytes; callers loop (file_ops.h does).
// - The engine must be drained (in_flight() == 0) before it is destroyed.
// - Not thread-safe: one owner thread submits and polls.
#include <sys/uio.h>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rill::storage::io {

enum class opcode : std::uint8_t {
  open,       // path, flags (open_flag bits), mode -> fd
  close,      // fd
  read,       // fd, offset, buffer, length -> bytes read (0 at end of file)
  write,      // fd, offset, cbuffer, length -> bytes written
  writev,     // fd, offset, iov, iov_count -> bytes written
  fdatasync,  // fd
  fsync,      // fd (use on a directory fd to make its entries durable)
  ftruncate,  // fd, offset = new length
  rename,     // path -> path2 (replaces path2)
  unlink,     // path (a file)
  mkdir,      // path, mode
  rmdir,      // path (an empty directory)
  list_dir,   // path -> names (sorted, without . and ..), result = count
  file_size,  // fd -> size in bytes
  // fd, offset, length: allocates the blocks of [offset, offset + length) without changing the file's size
  // (fallocate FALLOC_FL_KEEP_SIZE), so later writes there never need new blocks: space reserved while it is there.
  // -EOPNOTSUPP where the file system cannot (file_ops' reserve_file then writes zeros within the file's size).
  reserve,
  // fd, offset, iov, iov_count: a vectored write followed by an fdatasync of the same file, submitted together
  // (io_uring: two linked SQEs, one trip to the kernel's worker instead of two). result: bytes written or -errno of
  // the write. sync_result: 0 when the fdatasync ran and succeeded, -errno when it failed, -ECANCELED when it did
  // not run because the write failed or was short.
  writev_datasync,
  // fd: drops the file's clean pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED over the whole file), so
  // that the next reads come from the device. A failed fdatasync leaves the pages whose writeback failed clean and
  // readable while their bytes never reached the disk (Linux since 4.13): a reader trusting the cache would take
  // them for durable data. Dirty pages stay: sync the file first. Recovery does both (file_ops' settle_file).
  drop_cache,
  // Sockets (the shard runtime's network I/O; not supported by sim_disk).
  accept,  // fd (a listening socket) -> the accepted socket, non-blocking and close-on-exec
  recv,    // fd, buffer, length -> bytes received (0: the peer closed)
  send,    // fd, cbuffer, length -> bytes sent (MSG_NOSIGNAL)
  // fd (a socket), cbuffer = a sockaddr, length = its size -> 0 once connected (a non-blocking socket: the engine
  // waits for the handshake, io_uring's IORING_OP_CONNECT), or -errno (ECONNREFUSED, ETIMEDOUT, ...).
  connect,
  // fd -> the poll(2) events once the socket is readable (POLLIN; POLLHUP/POLLERR when it is closed or failed).
  // Needs no buffer: a connection waits in it while idle and takes a receive buffer only once bytes are there.
  poll_readable,
  cancel,  // target: the request to cancel (it completes with -ECANCELED if it was still pending) -> 0 or -ENOENT
  // (cancel stays the last opcode: tables are sized by it)
};

const char* to_string(opcode op) noexcept;

// open flags (bits of request::flags for opcode::open)
enum open_flag : std::uint32_t {
  open_read_only = 1u << 0,
  open_create = 1u << 1,     // create if missing
  open_exclusive = 1u << 2,  // with create: fail with EEXIST if present
  open_truncate = 1u << 3,   // truncate to 0 on open
  open_directory = 1u << 4,  // open a directory (for fsync of its entries)
};

struct request;

// Decides where a completion runs. The shard runtime gives each actor a router that turns the completion into a
// message to the actor, so that storage code resumes inside the actor's handler, never beside it.
class completion_router {
 public:
  virtual ~completion_router() = default;
  // Takes the completed request; must eventually call r.on_complete(r) exactly once (after clearing r.router).
  virtual void route(request& r) = 0;
};

struct request {
  opcode op = opcode::read;
  int fd = -1;
  std::uint64_t offset = 0;
  std::byte* buffer = nullptr;         // read
  const std::byte* cbuffer = nullptr;  // write
  std::size_t length = 0;
  const ::iovec* iov = nullptr;
  unsigned iov_count = 0;
  std::string path;
  std::string path2;
  std::uint32_t flags = 0;
  std::uint32_t mode = 0600;
  std::vector<std::string>* names = nullptr;  // list_dir output
  request* target = nullptr;                  // cancel
  // write / writev only: the caller lets the engine run the write as a plain blocking system call on the owner's
  // thread, inside poll() (uring_engine: pwrite(v) instead of an SQE; the other engines ignore it). A buffered write
  // to a file system that cannot write its page cache without blocking (ext4 refuses RWF_NOWAIT) otherwise goes from
  // the ring to a kernel worker thread and its completion back: two cross-thread wake-ups per write. The price: the
  // owner's thread copies the bytes itself, and waits where the kernel throttles writers of dirty pages.
  bool blocking_ok = false;

  std::int64_t result = 0;
  std::int64_t sync_result = 0;  // writev_datasync only
  void (*on_complete)(request&) = nullptr;
  void* user = nullptr;
  completion_router* router = nullptr;  // when set, the engine hands the completion to it instead

  // Engine-private.
  request* next_ = nullptr;
  std::uint64_t seq_ = 0;
};

// What every engine does with a finished request.
inline void complete(request& r) {
  if (r.router != nullptr) {
    r.router->route(r);
  } else {
    r.on_complete(r);
  }
}

class engine {
 public:
  engine() = default;
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  virtual ~engine() = default;

  // Queues `r`. Its on_complete runs from a later poll(). Never blocks, never completes inline.
  virtual void submit(request& r) = 0;
  // Submits what is queued, reaps what has completed and runs those completions. With wait = true and work in
  // flight, blocks until at least one completion has run. Returns the number of completions run.
  virtual std::size_t poll(bool wait) = 0;
  // Submitted requests whose completion has not yet run.
  [[nodiscard]] virtual std::size_t in_flight() const = 0;
  [[nodiscard]] virtual const char* name() const = 0;
};

// A request that resumes a coroutine when it completes: `co_await` it to submit and get the result.
class awaitable : public request {
 public:
  explicit awaitable(engine& e) noexcept : engine_(&e) {}
  awaitable(awaitable&& other) noexcept = default;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    handle_ = h;
    on_complete = &resume;
    engine_->submit(*this);
  }
  std::int64_t await_resume() const noexcept { return result; }

 private:
  static void resume(request& r) { static_cast<awaitable&>(r).handle_.resume(); }
  engine* engine_;
  std::coroutine_handle<> handle_;
};

// Drives `e` until `done()` holds or nothing is in flight. Returns done().
template <class Pred>
bool run_until(engine& e, Pred done) {
  while (!done()) {
    if (e.in_flight() == 0) {
      return done();
    }
    e.poll(true);
  }
  return true;
}

}  // namespace rill::storage::io
