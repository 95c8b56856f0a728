#pragma once
// buffer_pool: reusable 4 KiB-aligned I/O buffers in power-of-two size classes (4 KiB .. 16 MiB).
//
// Contract
// - acquire(n) returns a buffer of capacity >= n (the class size); its bytes are uninitialized. Requests above the
//   largest class are served by a one-off allocation that is freed, not pooled, on release.
// - A buffer returns to its pool when its handle is destroyed; each class keeps at most `cached_per_class_max`
//   free buffers and frees the rest, so the pool's idle memory is bounded.
// - The pool must outlive every buffer it handed out, except those abandoned: abandon() gives a buffer up for good
//   when the kernel may still write into it (its owner is going away with a receive pending); it is never reused nor
//   freed, and the pool stops waiting for it (it still counts as outstanding).
// - One owner thread: the thread of the first acquire() (a shard's, or a test's) is the only one that may acquire.
//   A buffer may be released on any thread: a poll's read buffer travels in the reply to the connection actor,
//   which may live on another shard. A release on a foreign thread pushes the buffer onto a lock-free list inside
//   the buffer's own bytes (no allocation); the owner takes it back at its next acquire() or when the pool is
//   destroyed. The owner's free lists and counters are touched by the owner only.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace rill::storage {

class buffer_pool;

class pooled_buffer {
 public:
  pooled_buffer() = default;
  pooled_buffer(pooled_buffer&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        capacity_(std::exchange(o.capacity_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  pooled_buffer& operator=(pooled_buffer&& o) noexcept;
  pooled_buffer(const pooled_buffer&) = delete;
  pooled_buffer& operator=(const pooled_buffer&) = delete;
  ~pooled_buffer() { release(); }

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  // The bytes in use (set by the owner, <= capacity).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  void set_size(std::size_t n) noexcept;
  [[nodiscard]] std::span<std::byte> span() noexcept { return {data_, size_}; }
  [[nodiscard]] std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  [[nodiscard]] std::span<std::byte> whole() noexcept { return {data_, capacity_}; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  void release() noexcept;
  // Leaks the bytes on purpose (see the contract above); any thread. The handle is empty afterwards.
  void abandon() noexcept;

 private:
  friend class buffer_pool;
  pooled_buffer(buffer_pool* p, std::byte* d, std::size_t cap) noexcept : pool_(p), data_(d), capacity_(cap) {}
  buffer_pool* pool_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
};

class buffer_pool {
 public:
  static constexpr std::size_t alignment = 4096;
  static constexpr std::size_t class_bytes_min = 4096;
  static constexpr std::size_t classes = 13;  // 4 KiB << 12 = 16 MiB
  static constexpr std::size_t class_bytes_max = class_bytes_min << (classes - 1);

  explicit buffer_pool(std::size_t cached_per_class_max = 8) noexcept : cached_max_(cached_per_class_max) {}
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  pooled_buffer acquire(std::size_t bytes);

  // Counts as of the owner's last acquire (buffers released on other threads since are still "out").
  [[nodiscard]] std::size_t outstanding() const noexcept { return outstanding_; }
  [[nodiscard]] std::size_t cached_bytes() const noexcept { return cached_bytes_; }
  [[nodiscard]] std::uint64_t allocations() const noexcept { return allocations_; }

 private:
  friend class pooled_buffer;
  // A buffer released on a foreign thread, linked through its own first bytes.
  struct remote_node {
    remote_node* next;
    std::size_t capacity;
  };
  void give_back(std::byte* data, std::size_t capacity) noexcept;
  void give_back_local(std::byte* data, std::size_t capacity) noexcept;
  void reclaim_remote() noexcept;
  static std::size_t class_of(std::size_t bytes) noexcept;

  std::atomic<std::thread::id> owner_{};       // set by the first acquire
  std::atomic<remote_node*> remote_{nullptr};  // released elsewhere, waiting for the owner
  std::atomic<std::size_t> abandoned_{0};      // buffers given up for good (pooled_buffer::abandon)

  std::size_t cached_max_;
  std::array<std::vector<std::byte*>, classes> free_{};
  std::size_t outstanding_ = 0;
  std::size_t cached_bytes_ = 0;
  std::uint64_t allocations_ = 0;
};

}  // namespace rill::storage
