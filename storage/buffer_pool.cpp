#include "storage/buffer_pool.h"

#include <cstdlib>
#include <new>
#include <thread>

#include "base/assert.h"

namespace rill::storage {

pooled_buffer& pooled_buffer::operator=(pooled_buffer&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::exchange(o.pool_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void pooled_buffer::set_size(std::size_t n) noexcept {
  RILL_ASSERT(n <= capacity_, "size {} over capacity {}", n, capacity_);
  size_ = n;
}

void pooled_buffer::release() noexcept {
  if (data_ != nullptr) {
    pool_->give_back(data_, capacity_);
    data_ = nullptr;
    pool_ = nullptr;
    capacity_ = 0;
    size_ = 0;
  }
}

void pooled_buffer::abandon() noexcept {
  if (data_ != nullptr) {
    pool_->abandoned_.fetch_add(1, std::memory_order_relaxed);
    data_ = nullptr;
    pool_ = nullptr;
    capacity_ = 0;
    size_ = 0;
  }
}

buffer_pool::~buffer_pool() {
  reclaim_remote();
  const std::size_t abandoned = abandoned_.load(std::memory_order_relaxed);
  RILL_ASSERT(outstanding_ == abandoned, "buffer_pool destroyed with {} buffers still out ({} abandoned)", outstanding_,
              abandoned);
  for (auto& list : free_) {
    for (std::byte* p : list) {
      std::free(p);
    }
  }
}

std::size_t buffer_pool::class_of(std::size_t bytes) noexcept {
  std::size_t c = 0;
  std::size_t size = class_bytes_min;
  while (size < bytes) {
    size <<= 1;
    ++c;
  }
  return c;
}

pooled_buffer buffer_pool::acquire(std::size_t bytes) {
  const auto me = std::this_thread::get_id();
  auto owner = owner_.load(std::memory_order_relaxed);
  if (owner == std::thread::id{}) {
    owner_.store(me, std::memory_order_relaxed);
  } else {
    RILL_ASSERT(owner == me, "buffer_pool: acquire on a thread that does not own the pool");
  }
  reclaim_remote();
  ++outstanding_;
  if (bytes > class_bytes_max) {
    const std::size_t cap = (bytes + alignment - 1) / alignment * alignment;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, cap));
    RILL_ASSERT(p != nullptr, "out of memory allocating {} bytes", cap);
    ++allocations_;
    return pooled_buffer(this, p, cap);
  }
  const std::size_t c = class_of(bytes);
  const std::size_t cap = class_bytes_min << c;
  if (!free_[c].empty()) {
    std::byte* p = free_[c].back();
    free_[c].pop_back();
    cached_bytes_ -= cap;
    return pooled_buffer(this, p, cap);
  }
  auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, cap));
  RILL_ASSERT(p != nullptr, "out of memory allocating {} bytes", cap);
  ++allocations_;
  return pooled_buffer(this, p, cap);
}

void buffer_pool::give_back(std::byte* data, std::size_t capacity) noexcept {
  if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    give_back_local(data, capacity);
    return;
  }
  // Every buffer is at least class_bytes_min (4 KiB) and aligned: room for the node.
  auto* node = reinterpret_cast<remote_node*>(data);
  node->capacity = capacity;
  node->next = remote_.load(std::memory_order_relaxed);
  while (!remote_.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

void buffer_pool::reclaim_remote() noexcept {
  auto* node = remote_.exchange(nullptr, std::memory_order_acquire);
  while (node != nullptr) {
    auto* next = node->next;
    give_back_local(reinterpret_cast<std::byte*>(node), node->capacity);
    node = next;
  }
}

void buffer_pool::give_back_local(std::byte* data, std::size_t capacity) noexcept {
  RILL_ASSERT(outstanding_ > 0);
  --outstanding_;
  if (capacity > class_bytes_max) {
    std::free(data);
    return;
  }
  const std::size_t c = class_of(capacity);
  if (free_[c].size() >= cached_max_) {
    std::free(data);
    return;
  }
  free_[c].push_back(data);
  cached_bytes_ += capacity;
}

}  // namespace rill::storage
