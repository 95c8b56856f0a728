#pragma once
// actor_request: co_await a CAF request from inside an actor's coroutine (the reply, or an internal_error naming
// what CAF reported). The coroutine resumes on the actor's own thread, inside the response handler.
#include <caf/all.hpp>

#include <coroutine>
#include <optional>
#include <string>
#include <tuple>

#include "base/expected.h"
#include "net/status.h"

namespace rill::actors {

// Answers one request: the awaitable bridge from a coroutine to a CAF request/response.
template <class Reply, class... Args>
class actor_request {
 public:
  actor_request(caf::event_based_actor* self, caf::actor dest, Args... args)
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
  caf::event_based_actor* self_;
  caf::actor dest_;
  std::tuple<Args...> args_;
  std::optional<Reply> reply_;
  std::string error_;
};

}  // namespace rill::actors
