#pragma once
// actor_request: co_await a CAF request from inside an actor's coroutine (the reply, or an internal_error naming
// what CAF reported). The coroutine resumes on the actor's own thread, inside the response handler. Through a typed
// handle (interfaces.hpp) the request is checked at compile time: the message must be in the destination's
// interface, and Reply must be what it replies.
#include <caf/all.hpp>

#include <coroutine>
#include <optional>
#include <string>
#include <tuple>

#include "base/expected.h"
#include "net/status.h"

namespace rill::actors {

// Answers one request: the awaitable bridge from a coroutine to a CAF request/response. Self: the requesting
// actor's class; Handle: the destination's handle type.
template <class Reply, class Self, class Handle, class... Args>
class actor_request {
 public:
  actor_request(Self* self, Handle dest, Args... args)
      : self_(self), dest_(std::move(dest)), args_(std::move(args)...) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    std::apply(
        [&](auto&... a) {
          self_->request(dest_, caf::infinite, a...)
              .then(
                  [this, h](Reply& r) {
                    reply_ = std::move(r);
                    h.resume();
                  },
                  [this, h](caf::error& e) {
                    error_ = self_->system().render(e);
                    h.resume();
                  });
        },
        args_);
  }
  expected<Reply> await_resume() {
    if (reply_) {
      return std::move(*reply_);
    }
    return rill::unexpected(make_error_code(net::status::internal_error), "actor request failed: " + error_);
  }

 private:
  Self* self_;
  Handle dest_;
  std::tuple<Args...> args_;
  std::optional<Reply> reply_;
  std::string error_;
};

// co_await await_request<Reply>(this, dest, args...): the reply, or an internal_error.
template <class Reply, class Self, class Handle, class... Args>
actor_request<Reply, Self, Handle, Args...> await_request(Self* self, Handle dest, Args... args) {
  return actor_request<Reply, Self, Handle, Args...>(self, std::move(dest), std::move(args)...);
}

}  // namespace rill::actors
