#pragma once
// long_poll: the polls a partition holds until data is committed or their deadline passes, without the actor. Each
// waiter carries a payload (the actor's request and promise), a deadline, and, once a read found nothing, the
// offset from which data would answer it. The partition actor runs the reads this class asks for, schedules
// each waiter's deadline on its shard's deadline heap, and answers a waiter when read_done says so.
//
// Invariants
// - A waiter is reading or idle; it is answered (removed) only when a read of it ends, or when the partition closes
//   while it is idle. An expired waiter is answered by its next read, data or not.
// - deadlines_ holds exactly the waiters not yet expired that have a deadline.
// - After drain() no waiter waits: all are expired, and so is every waiter added later.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/assert.h"
#include "base/strong.h"
#include "net/proto/rill.pb.h"
#include "storage/partition_log.h"

namespace rill::actors {

template <class Payload>
class long_poll {
 public:
  using waiter_id = std::uint64_t;
  using time = std::chrono::nanoseconds;  // monotonic

  // A poll waits at most `wait_max`, however long it asks for.
  explicit long_poll(std::chrono::milliseconds wait_max) : wait_max_(wait_max) {}

  // Registers a poll that asks to wait `wait_ms` from `now` (0: not at all; its first read answers, data or not).
  waiter_id add(Payload payload, std::uint64_t wait_ms, time now) {
    RILL_ASSERT(!closing_);
    const waiter_id id = next_id_++;
    const auto wait = std::min(std::chrono::milliseconds(wait_ms), wait_max_);
    waiter w{std::move(payload), std::nullopt, std::nullopt, false};
    if (wait.count() > 0 && !draining_) {
      w.deadline = now + wait;
      deadlines_.emplace(*w.deadline, id);
    }
    waiters_.emplace(id, std::move(w));
    return id;
  }

  // Whether to start a read of `id` now (it is registered and not reading); marks it reading.
  bool start_read(waiter_id id) {
    auto it = waiters_.find(id);
    if (it == waiters_.end() || it->second.reading) {
      return false;
    }
    it->second.reading = true;
    return true;
  }

  enum class after_read { gone, parked, answer };
  // A read of `id` ended. `found_nothing`: it succeeded with no batch; `wanted`: then the offset from which data
  // would answer it (nullopt: any commit may, its start moves). `answer`: take(id) and reply.
  after_read read_done(waiter_id id, bool found_nothing, std::optional<offset_t> wanted) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) {
      return after_read::gone;
    }
    waiter& w = it->second;
    RILL_ASSERT(w.reading);
    w.reading = false;
    if (found_nothing && w.deadline && !closing_) {
      w.wanted = wanted;
      return after_read::parked;  // a commit or the deadline reads again
    }
    return after_read::answer;
  }

  Payload* find(waiter_id id) {
    auto it = waiters_.find(id);
    return it == waiters_.end() ? nullptr : &it->second.payload;
  }

  // Removes an idle waiter to answer it.
  Payload take(waiter_id id) {
    auto it = waiters_.find(id);
    RILL_ASSERT(it != waiters_.end());
    RILL_ASSERT(!it->second.reading);
    if (it->second.deadline) {
      deadlines_.erase({*it->second.deadline, id});
    }
    Payload p = std::move(it->second.payload);
    waiters_.erase(it);
    return p;
  }

  // The idle waiters that the committed offsets reaching `high_watermark` may answer: to read again.
  [[nodiscard]] std::vector<waiter_id> woken(offset_t high_watermark) const {
    std::vector<waiter_id> out;
    for (const auto& [id, w] : waiters_) {
      if (!w.reading && (!w.wanted || *w.wanted < high_watermark)) {
        out.push_back(id);
      }
    }
    return out;
  }

  // Expires every waiter whose deadline is at or before `now`; returns those idle (their read answers them).
  std::vector<waiter_id> expire(time now) {
    std::vector<waiter_id> out;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const waiter_id id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      waiter& w = waiters_.at(id);
      w.deadline.reset();
      if (!w.reading) {
        out.push_back(id);
      }
    }
    return out;
  }

  // The server is stopping: every waiter expires now, and every later one at once; returns those idle.
  std::vector<waiter_id> drain() {
    draining_ = true;
    deadlines_.clear();
    std::vector<waiter_id> out;
    for (auto& [id, w] : waiters_) {
      w.deadline.reset();
      if (!w.reading) {
        out.push_back(id);
      }
    }
    return out;
  }

  // The partition closes: the idle waiters are removed and returned (to be answered so); those reading are
  // answered when their read ends. No waiter is added after.
  std::vector<Payload> close() {
    closing_ = true;
    std::vector<Payload> out;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.reading) {
        ++it;
        continue;
      }
      if (it->second.deadline) {
        deadlines_.erase({*it->second.deadline, it->first});
      }
      out.push_back(std::move(it->second.payload));
      it = waiters_.erase(it);
    }
    return out;
  }

  // When `id` expires, unless it has (or never waits).
  [[nodiscard]] std::optional<time> deadline_of(waiter_id id) const {
    auto it = waiters_.find(id);
    return it == waiters_.end() ? std::nullopt : it->second.deadline;
  }
  // The earliest deadline still to expire.
  [[nodiscard]] std::optional<time> next_deadline() const {
    if (deadlines_.empty()) {
      return std::nullopt;
    }
    return deadlines_.begin()->first;
  }
  [[nodiscard]] std::size_t size() const noexcept { return waiters_.size(); }

  // Asserts the invariants above (O(waiters): tests call it after every step).
  void check_invariants() const {
    std::size_t waiting = 0;
    for (const auto& [id, w] : waiters_) {
      RILL_ASSERT(id < next_id_);
      if (w.deadline) {
        ++waiting;
        RILL_ASSERT(deadlines_.count({*w.deadline, id}) == 1, "waiter {} has a deadline the index lacks", id);
      }
      RILL_ASSERT(!closing_ || w.reading, "waiter {} idle after close", id);
    }
    RILL_ASSERT(waiting == deadlines_.size(), "{} deadlines for {} waiting", deadlines_.size(), waiting);
    RILL_ASSERT(!draining_ || deadlines_.empty());
  }

 private:
  struct waiter {
    Payload payload;
    std::optional<time> deadline;    // nullopt: expired (the next read answers)
    std::optional<offset_t> wanted;  // after a read found nothing: data from here answers; nullopt: any commit may
    bool reading = false;
  };

  std::chrono::milliseconds wait_max_;
  std::map<waiter_id, waiter> waiters_;
  std::set<std::pair<time, waiter_id>> deadlines_;
  waiter_id next_id_ = 1;
  bool draining_ = false;
  bool closing_ = false;
};

// The log read a poll asks for. `resume_at`: a group's position (overrides the strategy; clamped into
// [log_start, log_end]); `stored_offset`: the named consumer's stored offset (NEXT reads from there, or from the
// log start if retention removed it; from the first offset when none is stored).
storage::read_request read_request_for(const proto::PollRequest& r, std::optional<std::int64_t> resume_at,
                                       std::optional<std::int64_t> stored_offset, offset_t log_start, offset_t log_end,
                                       std::uint64_t default_max_bytes);

// After a read of the poll found nothing: the offset from which data would answer it (the read's next offset), or
// nullopt when its start may move while it waits (NEXT for a named consumer: the stored offset may change).
std::optional<offset_t> wanted_offset(const proto::PollRequest& r, std::optional<std::int64_t> resume_at,
                                      const storage::read_result& empty_read);

}  // namespace rill::actors
