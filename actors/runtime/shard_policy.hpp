#pragma once
// shard_policy: rill's CAF scheduler policy (thread-per-core). Internal to actors/: includes CAF.
//
// - One run queue per worker (= shard). Every job, from any thread, goes to its home shard's queue (homed actors
//   carry it; others use actor id % shards). No stealing: an actor never migrates.
// - CAF's worker loop calls dequeue() between actor runs; scheduler.max-throughput bounds one run, so dequeue runs
//   often. Each dequeue first lets the shard's io_uring engine submit and reap without blocking (completions become
//   messages to the actors that asked) and fires due timers, then returns the next job.
// - With nothing to run, the worker sleeps only in io_uring (poll_wait), until an I/O completion, the next timer
//   deadline, or a wake from another thread's enqueue (an eventfd write, done only when the worker said it sleeps).
#include <caf/all.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/scheduler/coordinator.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/runtime/homed.h"
#include "actors/runtime/shard.h"

namespace rill::actors {

// The shards, created before the actor system and outliving it.
struct shard_set {
  std::vector<std::unique_ptr<shard>> shards;
  bool pin = false;
  bool inline_syncs = false;  // uring_engine::set_inline_idle_syncs on every shard's ring
};

// Set by runtime before the actor system starts; read by the policy's coordinator data.
shard_set*& pending_shard_set() noexcept;

struct shard_policy : caf::policy::unprofiled {
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) : set(pending_shard_set()) {}
    shard_set* set;
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
    worker_data(const worker_data&) {}  // each worker gets its own queue
    std::mutex mutex;
    std::deque<caf::resumable*> queue;  // guarded by mutex
    std::atomic<bool> sleeping{false};
    shard* home = nullptr;  // set on the worker's thread at its first dequeue
    std::atomic<shard*> published{nullptr};
  };

  template <class Coordinator>
  static std::size_t home_of(Coordinator* co, caf::resumable* job) {
    const std::size_t n = co->num_workers();
    if (auto* h = dynamic_cast<homed*>(job)) {
      return h->home_shard() % n;
    }
    if (auto* a = dynamic_cast<caf::abstract_actor*>(job)) {
      return a->id() % n;
    }
    return 0;
  }

  template <class Worker>
  static void push(Worker* w, caf::resumable* job) {
    auto& d = w->data();
    {
      std::lock_guard<std::mutex> guard(d.mutex);
      d.queue.push_back(job);
      if (shard* s = d.published.load(std::memory_order_acquire)) {
        s->stats().run_queue_length.store(d.queue.size(), std::memory_order_relaxed);
      }
    }
    if (d.sleeping.exchange(false)) {
      if (shard* s = d.published.load(std::memory_order_acquire)) {
        s->stats().wakes_sent.fetch_add(1, std::memory_order_relaxed);
        s->ring().wake();
      }
    }
  }

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(self->worker_by_id(home_of(self, job)), job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    push(self, job);  // coordinator::stop() hands each worker its shutdown job this way
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    auto* co = self->parent();
    push(co->worker_by_id(home_of(co, job)), job);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    internal_enqueue(self, job);
  }

  template <class Worker>
  static caf::resumable* try_pop(Worker* self) {
    auto& d = self->data();
    std::lock_guard<std::mutex> guard(d.mutex);
    if (d.queue.empty()) {
      return nullptr;
    }
    caf::resumable* job = d.queue.front();
    d.queue.pop_front();
    if (shard* s = d.published.load(std::memory_order_acquire)) {
      s->stats().run_queue_length.store(d.queue.size(), std::memory_order_relaxed);
    }
    return job;
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& d = self->data();
    if (d.home == nullptr) {
      auto* set = self->parent()->data().set;
      d.home = set->shards.at(self->id()).get();
      d.home->start_on_this_thread(set->pin, set->inline_syncs);
      d.published.store(d.home, std::memory_order_release);
    }
    shard& s = *d.home;
    for (;;) {
      // I/O completions and due timers first: they turn into messages for this shard's actors.
      s.stats().completions.fetch_add(s.ring().poll(false), std::memory_order_relaxed);
      s.stats().timers_fired.fetch_add(s.timers().fire_due(monotonic_now()), std::memory_order_relaxed);
      s.stats().submissions.store(s.ring().submissions(), std::memory_order_relaxed);
      s.stats().inline_syncs.store(s.ring().inline_syncs(), std::memory_order_relaxed);
      s.stats().in_flight.store(s.ring().in_flight(), std::memory_order_relaxed);
      s.stats().pool_cached_bytes.store(s.pool().cached_bytes(), std::memory_order_relaxed);
      s.stats().pool_outstanding.store(s.pool().outstanding(), std::memory_order_relaxed);
      s.stats().open_files.store(s.files().open_count(), std::memory_order_relaxed);
      s.stats().open_file_evictions.store(s.files().stats().evictions, std::memory_order_relaxed);
      if (caf::resumable* job = try_pop(self)) {
        s.ring().submit_deferred();  // a write + fdatasync kept back for an idle moment must not wait behind `job`
        s.stats().jobs_run.fetch_add(1, std::memory_order_relaxed);
        return job;
      }
      // Nothing to run: announce the sleep, look once more, then sleep in the ring.
      d.sleeping.store(true);
      if (caf::resumable* job = try_pop(self)) {
        s.ring().submit_deferred();
        d.sleeping.store(false);
        s.stats().jobs_run.fetch_add(1, std::memory_order_relaxed);
        return job;
      }
      std::optional<std::chrono::nanoseconds> timeout;
      if (const auto next = s.timers().next_deadline()) {
        timeout = std::max(*next - monotonic_now(), std::chrono::nanoseconds(0));
      }
      s.stats().sleeps.fetch_add(1, std::memory_order_relaxed);
      s.stats().asleep.store(true, std::memory_order_release);  // after `sleeping`: a push seen after it wakes us
      s.stats().completions.fetch_add(s.ring().poll_wait(timeout), std::memory_order_relaxed);
      s.stats().asleep.store(false, std::memory_order_relaxed);
      d.sleeping.store(false);
    }
  }

  template <class Worker, class F>
  void foreach_resumable(Worker* self, F f) {
    auto& d = self->data();
    std::lock_guard<std::mutex> guard(d.mutex);
    for (auto* job : d.queue) {
      f(job);
    }
    d.queue.clear();
  }

  template <class Coordinator, class F>
  void foreach_central_resumable(Coordinator*, F) {}
};

}  // namespace rill::actors
