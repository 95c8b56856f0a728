#pragma once
// partition_actor: one partition, on the shard its namespace hashes to. A thin behavior over partition_state:
// produce, poll (long polls parked in long_poll until data is committed or their deadline passes; each deadline
// is a timer on the shard's deadline heap), consumer offsets, info, close and destroy. Requests that
// arrive while the log is being opened wait in the mailbox. Its public contract is partition_actor_hdl
// (interfaces.hpp); partition_actor_impl adds the messages only the actor itself (its I/O and timers) sends.
#include <caf/all.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "actors/interfaces.hpp"
#include "actors/long_poll.h"
#include "actors/messages.hpp"
#include "actors/partition_state.h"
#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/deadline_heap.h"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "base/clock.h"
#include "base/elapsed_clock.h"
#include "config/limits.h"

namespace rill::actors {

struct partition_identity {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition_id = 0;
  std::string dir;
};

// The replica plane's peers connected now, as the metadata actor (which owns the plane) last saw them: written by
// it every 100 ms, read by replicated partitions (an under-replicated partition has a backup out of reach). Node ids,
// 0 in unused slots; a cluster has at most cluster_members_limit members, this node included.
struct replica_links {
  std::array<std::atomic<std::uint64_t>, limits::cluster_members_limit> connected{};
  [[nodiscard]] bool reaches(std::uint64_t node) const noexcept {
    for (const auto& c : connected) {
      if (c.load(std::memory_order_relaxed) == node) {
        return true;
      }
    }
    return false;
  }
  // This node's replicated partitions counted under-replicated now: each replica partition actor adds itself while
  // its primary counts it so, and removes itself when that ends or the actor stops (rill cluster status, /metrics).
  mutable std::atomic<std::int64_t> under_replicated{0};  // (partitions hold the links const: only this is theirs)
};

// What every partition actor shares; owned by the broker, outliving its actors.
struct partition_services {
  const clock* clk = nullptr;
  // The process's start: where replicas' stamp clocks count from (elapsed_clock); unset: each from its creation.
  std::optional<elapsed_clock::anchor> stamps_from;
  storage::log_reporter* reporter = nullptr;
  std::uint64_t long_poll_wait_ms_max = 30'000;
  std::chrono::milliseconds retention_interval{30'000};
  std::uint64_t default_max_bytes = 1 << 20;
  std::uint64_t consumers_per_partition_max = 1'000;    // limits.consumers_per_partition_max
  std::uint64_t producers_per_partition_max = 100'000;  // limits.producers_per_partition_max
  std::uint64_t producer_expiry_ms = 86'400'000;        // storage.producer_expiry_ms
  const replica_links* links = nullptr;                 // a cluster member's
};

// Internal messages: sent by the actor's own timers and I/O, never by another actor.
using tick_atom = caf::atom_constant<caf::atom("tick")>;              // the log's next deadline (sync, roll)
using poll_timeout_atom = caf::atom_constant<caf::atom("ptimeout")>;  // parked polls due by then expire
using retention_atom = caf::atom_constant<caf::atom("retention")>;    // enforce the log's retention
using recover_atom = caf::atom_constant<caf::atom("recover")>;        // try to recover the fenced log

// A parked poll (both partition actors): the request, the promise to answer, its deadline's timer.
struct partition_poll_waiter {
  proto::PollRequest request;
  std::optional<std::int64_t> resume_at;  // a group's position (poll_msg)
  caf::response_promise promise;
  deadline_heap::timer_id timer = 0;  // its deadline on the shard's heap (0: none)
};

// The log's positions and sizes into the partition's gauges (both partition actors).
inline void publish_log_gauges(const storage::partition_log& log, partition_metrics& m) {
  const auto st = log.stats();
  m.log_start.store(log.log_start().value(), std::memory_order_relaxed);
  m.high_watermark.store(log.committed().value(), std::memory_order_relaxed);
  m.log_end.store(log.log_end().value(), std::memory_order_relaxed);
  m.segments.store(st.segments, std::memory_order_relaxed);
  m.bytes.store(st.bytes, std::memory_order_relaxed);
}

// Tells a partition's metrics what its log took to write and sync (both partition actors).
class log_timing final : public storage::log_observer {
 public:
  explicit log_timing(partition_metrics& m) : m_(m) {}
  void group_written(std::chrono::nanoseconds took, std::uint32_t, bool) override { m_.write.record(took); }
  void synced(std::chrono::nanoseconds took) override { m_.sync.record(took); }

 private:
  partition_metrics& m_;
};

// After the read of parked poll `id` came back (partition_actor and replica_partition_actor alike): parks it again
// when it found nothing and may wait (a commit or its deadline reads again), else takes it and answers it with the
// read or its error, cancelling its deadline on `timers` and counting what it read. `Waiter` has `request`,
// `resume_at`, `promise` and `timer`.
template <class Waiter>
void answer_poll_read(long_poll<Waiter>& polls, typename long_poll<Waiter>::waiter_id id,
                      expected<storage::read_result> r, deadline_heap& timers, partition_metrics& published) {
  const Waiter* waiting = polls.find(id);
  if (waiting == nullptr) {
    return;
  }
  const bool found_nothing = r && r->batches == 0;
  const auto wanted = found_nothing ? wanted_offset(waiting->request, waiting->resume_at, *r) : std::nullopt;
  if (polls.read_done(id, found_nothing, wanted) != long_poll<Waiter>::after_read::answer) {
    return;
  }
  auto answered = polls.take(id);
  timers.cancel(answered.timer);
  if (r) {
    bump(published.records_read, r->records);
    bump(published.bytes_read, r->bytes.size());
  }
  answered.promise.deliver(r ? poll_reply{outcome{}, std::make_shared<storage::read_result>(std::move(*r))}
                             : poll_reply{outcome::of(r.error()), nullptr});
}

using partition_actor_impl =
    partition_actor_hdl::extend<io_done_signature, caf::reacts_to<poll_timeout_atom, std::int64_t>,
                                caf::reacts_to<tick_atom>, caf::reacts_to<retention_atom>,
                                caf::reacts_to<unstall_atom, std::uint64_t>,  // stall n's time is over
                                caf::reacts_to<recover_atom>>;

class partition_actor final : public metered<partition_actor_impl::base>, public homed {
 public:
  partition_actor(caf::actor_config& cfg, std::size_t home, partition_identity id, storage::log_options options,
                  const partition_services* services);
  behavior_type make_behavior() override;

 private:
  using poll_waiter = partition_poll_waiter;
  using waiter_id = long_poll<poll_waiter>::waiter_id;

  behavior_type serving();
  void publish_gauges();
  void opened(expected<std::unique_ptr<partition_state>> r);
  void run_poll(waiter_id id);
  void run_polls(const std::vector<waiter_id>& ids);
  void after_append();
  void schedule_poll_deadline(waiter_id id);
  void schedule_tick();
  void schedule_retention();
  // A fenced log is recovered by the actor itself (partition_state::recover_log), first after
  // recovery_delay_min and then backing off to recovery_delay_max while the cause (a full disk, a failing device)
  // is still there. While it runs, produces, polls and offset stores are refused as unavailable (retriable).
  void schedule_recovery();
  // A recover_atom: a fenced log is recovered, a partition that could not open is opened again.
  void recover();
  void reopen();
  void answer_recovering(waiter_id id);
  // The open state becomes the actor's (callbacks, gauges, timers), after the first open or a reopen.
  void install(std::unique_ptr<partition_state> state);
  void watch_log();
  // A recovery or reopen ended: a close that arrived meanwhile runs now.
  void recovery_done();
  void run_finish(caf::typed_response_promise<outcome> rp, bool destroy);
  // Closes the log (and removes its directory when `destroy`), answering parked polls first; then quits.
  caf::result<outcome> finish(bool destroy);
  // Why a produce or poll is refused: the log did not open, or it is closing.
  outcome refusal() const;

  partition_identity id_;
  std::shared_ptr<partition_metrics> published_ = std::make_shared<partition_metrics>();
  log_timing timing_{*published_};
  storage::log_options options_;
  const partition_services* services_;
  std::unique_ptr<actor_io> io_;
  std::unique_ptr<partition_state> state_;
  std::optional<rill::error> open_error_;
  long_poll<poll_waiter> polls_;
  std::optional<std::chrono::nanoseconds> tick_at_;
  std::size_t operations_ = 0;  // coroutines of this actor still running
  bool closing_ = false;
  static constexpr std::chrono::milliseconds recovery_delay_min{200};
  static constexpr std::chrono::milliseconds recovery_delay_max{10'000};
  std::chrono::milliseconds recovery_delay_ = recovery_delay_min;
  bool recovery_scheduled_ = false;
  bool recovering_ = false;        // requests are refused: a recovery waits for the log to be idle, or runs
  bool recovery_running_ = false;  // recover_log() or a reopen is in flight
  std::optional<std::pair<caf::typed_response_promise<outcome>, bool>>
      finish_deferred_;       // a close (destroy?) waiting for it
  std::uint64_t stalls_ = 0;  // stalls begun: a timer's unstall ends only the stall it was set for
};

}  // namespace rill::actors
