#pragma once
// durable_versions: which changes of a persisted state are on disk, and the replies that wait for them. Plain: the
// owner counts each change, writes the whole state one write at a time (start_write() says when and which
// version) and reports each write's end; a waiter runs once every change made before it began to wait is on disk,
// or with the error that fenced the state (after a failed write nothing newer can be promised).
//
// Invariants
// - durable() <= version(); durable() only grows.
// - At most one write is in flight, and it writes the version current when it started.
// - Waiters wait for non-decreasing versions and run in that order, each exactly once.
// - Once fenced, nothing more is written and every waiter, queued or new, runs with the fence's error.
// - A refused write (the disk was full: the file kept its old content) fails the waiters it would have satisfied
//   and fences nothing. A write starts again only for someone waiting (a new waiter, or one that waits for a change
//   made during the refused write), so a full disk costs one write attempt per request, never a retry loop, and a
//   group whose writes were refused works again with the first request once there is room. The refused changes
//   stay in the state and become durable with the next write that works: a refused reply means "maybe applied",
//   as a timeout does.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "base/assert.h"
#include "base/expected.h"

namespace rill::actors {

class durable_versions {
 public:
  using done_fn = std::function<void(const std::optional<rill::error>&)>;

  // The state changed: what waits from now on waits for this change too.
  void changed() noexcept { ++version_; }

  // Runs `done` once everything changed so far is durable: at once when it is (or when fenced).
  void wait(done_fn done) {
    RILL_ASSERT(done != nullptr);
    if (fence_ || durable_ >= version_) {
      done(fence_);
      return;
    }
    RILL_ASSERT(waiting_.empty() || waiting_.back().first <= version_);
    waiting_.emplace_back(version_, std::move(done));
  }

  // The version to write now, or nullopt: a write is in flight, nothing changed since the last, or fenced. The
  // write is in flight from here until write_done().
  std::optional<std::uint64_t> start_write() noexcept {
    if (writing_ || fence_ || durable_ >= version_ || (refused_ == version_ && waiting_.empty())) {
      return std::nullopt;
    }
    writing_ = true;
    return version_;
  }

  // The write of `written` (what start_write() returned) ended: durable, or failed (`failure`: fenced from now).
  // Runs the waiters it satisfies (all of them, with the error, on a failure).
  void write_done(std::uint64_t written, std::optional<rill::error> failure) {
    RILL_ASSERT(writing_);
    RILL_ASSERT(written <= version_);
    RILL_ASSERT(written > durable_);
    writing_ = false;
    if (failure) {
      fence(std::move(*failure));
      return;
    }
    durable_ = written;
    release();
  }

  // The write of `written` did not happen at all (no space: the file holds what it held): the waiters it would have
  // satisfied run with `e`; nothing is fenced, and the next change starts a write again.
  void write_refused(std::uint64_t written, const rill::error& e) {
    RILL_ASSERT(writing_);
    RILL_ASSERT(written <= version_);
    RILL_ASSERT(written > durable_);
    writing_ = false;
    refused_ = version_;
    while (!waiting_.empty() && waiting_.front().first <= written) {
      auto done = std::move(waiting_.front().second);
      waiting_.pop_front();
      done(e);
    }
  }

  // Nothing more can be written (a failed open or write): every waiter runs with `e`.
  void fence(rill::error e) {
    if (!fence_) {
      fence_ = std::move(e);
    }
    release();
  }

  [[nodiscard]] const std::optional<rill::error>& fenced() const noexcept { return fence_; }
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
  [[nodiscard]] std::uint64_t durable() const noexcept { return durable_; }
  [[nodiscard]] bool writing() const noexcept { return writing_; }
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.size(); }

 private:
  void release() {
    // Popped before it runs: a waiter may add waiters.
    while (!waiting_.empty() && (fence_ || waiting_.front().first <= durable_)) {
      auto done = std::move(waiting_.front().second);
      waiting_.pop_front();
      done(fence_);
    }
  }

  std::uint64_t version_ = 0;  // changes made
  std::uint64_t durable_ = 0;  // changes on disk
  bool writing_ = false;
  std::uint64_t refused_ = 0;  // the version when a write was last refused (0: none)
  std::optional<rill::error> fence_;
  std::deque<std::pair<std::uint64_t, done_fn>> waiting_;  // by version
};

}  // namespace rill::actors
