#pragma once
// Single-threaded coroutine synchronisation: an event many coroutines can wait for. Waiters resume, in the order
// they started waiting, inside set(); set() is a no-op for an already set event until reset().
#include <coroutine>
#include <vector>

namespace rill {

class async_event {
 public:
  async_event() = default;
  async_event(const async_event&) = delete;
  async_event& operator=(const async_event&) = delete;

  [[nodiscard]] bool is_set() const noexcept { return set_; }
  void reset() noexcept { set_ = false; }
  void set() {
    if (set_) {
      return;
    }
    set_ = true;
    auto waiters = std::move(waiters_);
    waiters_.clear();
    for (auto h : waiters) {
      h.resume();
    }
  }

  auto wait() noexcept {
    struct awaiter {
      async_event* e;
      bool await_ready() const noexcept { return e->set_; }
      void await_suspend(std::coroutine_handle<> h) { e->waiters_.push_back(h); }
      void await_resume() const noexcept {}
    };
    return awaiter{this};
  }

 private:
  bool set_ = false;
  std::vector<std::coroutine_handle<>> waiters_;
};

}  // namespace rill
