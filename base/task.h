#pragma once
// task<T>: a lazily started coroutine returning T, awaited by exactly one other coroutine.
//
// Why coroutines: storage code is asynchronous (every file operation is submitted to an io::engine and completes
// later, when the engine's owner polls it), and recovery, rolls and retention are sequences of many such
// operations. Written as coroutines they read as straight-line code while staying single-threaded and
// deterministic: a coroutine only ever resumes from the engine's poll() on the owner's thread, or from the
// coroutine that awaits it.
//
// Contract
// - A task does nothing until it is awaited (or handed to spawn()). Destroying an un-started task is fine;
//   destroying a started one before it finishes is a programmer error (its frame may be referenced by in-flight I/O).
// - Exceptions never escape a task: rill code returns errors as values; an escaping exception terminates.
// - Completion resumes the awaiter by symmetric transfer, so long chains of synchronous completions do not grow the
//   stack in optimized builds. (Under AddressSanitizer GCC emits no tail call for it and they do; storage code never
//   builds such chains, because every file operation completes from the engine's poll(), on a fresh stack.)
#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

#include "base/assert.h"

namespace rill {

template <class T>
class task;

namespace detail {

struct task_promise_base {
  std::coroutine_handle<> continuation_ = std::noop_coroutine();
  bool done_ = false;

  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      h.promise().done_ = true;
      return h.promise().continuation_;
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }
  [[noreturn]] void unhandled_exception() const noexcept { std::terminate(); }
};

template <class T>
struct task_promise : task_promise_base {
  std::optional<T> value_;
  task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    value_.emplace(std::forward<U>(v));
  }
};

template <>
struct task_promise<void> : task_promise_base {
  task<void> get_return_object() noexcept;
  void return_void() const noexcept {}
};

}  // namespace detail

template <class T = void>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;

  task() = default;
  explicit task(handle_type h) noexcept : handle_(h) {}
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() { destroy(); }

  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(handle_); }
  [[nodiscard]] bool done() const noexcept { return handle_ && handle_.promise().done_; }

  auto operator co_await() && noexcept {
    struct awaiter {
      handle_type handle_;
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        handle_.promise().continuation_ = awaiting;
        return handle_;
      }
      T await_resume() {
        RILL_ASSERT(handle_.promise().done_);
        if constexpr (!std::is_void_v<T>) {
          RILL_ASSERT(handle_.promise().value_.has_value());
          return std::move(*handle_.promise().value_);
        }
      }
    };
    RILL_ASSERT(handle_, "awaiting an empty task");
    return awaiter{handle_};
  }

  // For spawn(): starts the task; `continuation` runs when it finishes.
  void start(std::coroutine_handle<> continuation) {
    RILL_ASSERT(handle_);
    handle_.promise().continuation_ = continuation;
    handle_.resume();
  }
  T take_result() {
    RILL_ASSERT(done());
    if constexpr (!std::is_void_v<T>) {
      return std::move(*handle_.promise().value_);
    }
  }

 private:
  void destroy() noexcept {
    if (handle_) {
      // A started, unfinished task may be referenced by in-flight I/O: destroying it would be use-after-free later.
      RILL_ASSERT(handle_.promise().done_ || handle_.promise().continuation_ == std::noop_coroutine(),
                  "destroying a running task");
      handle_.destroy();
      handle_ = {};
    }
  }
  handle_type handle_;
};

namespace detail {
template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}

// A fire-and-forget coroutine that owns itself: it frees its frame when it finishes.
struct detached {
  struct promise_type {
    detached get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    [[noreturn]] void unhandled_exception() const noexcept { std::terminate(); }
  };
};

template <class T, class F>
detached spawn_impl(task<T> t, F on_done) {
  if constexpr (std::is_void_v<T>) {
    co_await std::move(t);
    on_done();
  } else {
    on_done(co_await std::move(t));
  }
}
}  // namespace detail

// Runs `t` without an awaiting coroutine; `on_done(result)` (or `on_done()` for task<void>) runs when it finishes,
// on whichever thread resumed its last operation (for storage code: the io::engine owner's poll()). The caller must
// keep everything the task references alive until then.
template <class T, class F>
void spawn(task<T> t, F on_done) {
  detail::spawn_impl(std::move(t), std::move(on_done));
}

}  // namespace rill
