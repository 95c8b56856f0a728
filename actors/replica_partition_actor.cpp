// replica_partition_actor: a replicated partition's replica on this node (see the header).
#include "actors/replica_partition_actor.hpp"

#include <fmt/core.h>

#include <random>

#include <sys/stat.h>

#include "actors/metadata_state.h"
#include "actors/runtime/shard.h"
#include "consensus/journal.h"
#include "consensus/partition_machine.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {

// The group's journal slot: prepare headers of batches, and whole consumer-offset operations (a name of at most
// 255 bytes) and session registrations.
constexpr std::uint32_t journal_slot_bytes = 4096;
// The group's journal, superblock and snapshot, in the partition's directory.
constexpr std::string_view vsr_dir = "vsr";

outcome verdict_outcome(const consensus::partition_machine::produce_reply& r) {
  switch (r.verdict) {
    case storage::producer_verdict::fresh:
    case storage::producer_verdict::duplicate:
      return {};
    case storage::producer_verdict::duplicate_sequence:
      return outcome{net::status::duplicate_sequence, r.detail};
    case storage::producer_verdict::sequence_gap:
      return outcome{net::status::sequence_gap, r.detail};
    case storage::producer_verdict::producer_fenced:
      return outcome{net::status::producer_fenced, r.detail};
    case storage::producer_verdict::unknown_producer_id:
      return outcome{net::status::unknown_producer_id, r.detail};
  }
  return outcome{net::status::internal_error, "an unknown producer verdict"};
}

}  // namespace

// The group's messages to peers go to the metadata actor, which owns the replica plane.
class replica_partition_actor::plane_transport final : public consensus::host_transport {
 public:
  explicit plane_transport(metadata_actor_hdl plane) : plane_(std::move(plane)) {}
  void send(consensus::node_t to, consensus::group_t group, consensus::message m) override {
    caf::anon_send(plane_, replica_atom::value,
                   replica_frame{to.value(), group.value(), std::make_shared<const consensus::message>(std::move(m))});
  }
  void send(consensus::node_t, const consensus::node_heartbeat&) override {
    // The replica sends its own commit heartbeats (partition_group: heartbeats_by_host off).
  }

 private:
  metadata_actor_hdl plane_;
};

replica_partition_actor::replica_partition_actor(caf::actor_config& cfg, std::size_t home, partition_identity id,
                                                 storage::log_options options, replica_placement placement,
                                                 const partition_services* services)
    : metered<replica_partition_impl::base>(cfg, "partition", home),
      homed(home),
      id_(std::move(id)),
      options_(options),
      placement_(std::move(placement)),
      services_(services),
      polls_(std::chrono::milliseconds(services->long_poll_wait_ms_max)) {
  RILL_ASSERT(placement_.members.size() >= 2, "a replicated partition of {} members", placement_.members.size());
  set_metrics_name(fmt::format("{}/{}/{}", id_.stream_id, id_.topic_id, id_.partition_id));
  published_->stream_id = id_.stream_id;
  published_->topic_id = id_.topic_id;
  published_->partition_id = id_.partition_id;
  options_.observer = &timing_;
  attach_metrics<partition_metrics>(published_);
  transport_ = std::make_unique<plane_transport>(placement_.plane);
}

replica_partition_actor::~replica_partition_actor() = default;

replica_partition_actor::behavior_type replica_partition_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  options_.files = &current_shard()->files();
  open_group();
  schedule_tick();
  return serving();
}

std::uint32_t replica_partition_actor::journal_slots() const {
  // A journal created earlier keeps its ring (cluster.partition_journal_slots applies to new replicas): its size is
  // the ring's header pages plus one slot per op, which names the slot count.
  struct stat st {};
  const std::string path = storage::join_path(storage::join_path(id_.dir, std::string(vsr_dir)), "journal.wal");
  if (::stat(path.c_str(), &st) == 0 && st.st_size > 0) {
    if (const auto slots =
            consensus::journal_slot_count_of(static_cast<std::uint64_t>(st.st_size), journal_slot_bytes)) {
      return static_cast<std::uint32_t>(*slots);
    }
  }
  return placement_.journal_slots;  // none yet, or a size no ring has (the journal's open names the mismatch)
}

void replica_partition_actor::open_group() {
  consensus::partition_group_options o;
  o.group = consensus::group_t(placement_.group);
  for (auto n : placement_.members) {
    o.members.push_back(consensus::node_t(static_cast<std::uint32_t>(n)));
  }
  o.self = consensus::node_t(static_cast<std::uint32_t>(placement_.self));
  o.storage.files.journal = consensus::journal_options{journal_slots(), journal_slot_bytes};
  o.storage.files.snapshot_bytes_max = 64 * 1024 * 1024;
  o.storage.files.snapshot_reserved_bytes = 64 * 1024;
  o.storage.files.files = options_.files;  // the shard's cache: the group's files count in storage.open_files_max
  o.storage.log = options_;
  o.storage.log.owner_entries.push_back(std::string(vsr_dir));  // the group's files, beside the log's
  o.machine.consumers_max = services_->consumers_per_partition_max;
  o.recovering = placement_.recovering;
  if (const replica_links* links = services_->links; links != nullptr) {
    o.reachable = [links](consensus::node_t n) { return links->reaches(n.value()); };
  }
  o.seed = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
  opening_ = true;
  ++operations_;
  const rill::clock* clk = services_->clk;
  rill::spawn(
      consensus::partition_group::open(
          *io_, current_shard()->pool(), *clk, *services_->reporter, storage::join_path(id_.dir, std::string(vsr_dir)),
          id_.dir, std::move(o), *transport_, [clk] { return clk->wall_ms().value(); }, [this] { on_committed(); }),
      [this](expected<std::unique_ptr<consensus::partition_group>> r) {
        --operations_;
        opening_ = false;
        opened(std::move(r));
        if (closing_ && finish_deferred_) {
          run_finish();
        }
      });
}

void replica_partition_actor::opened(expected<std::unique_ptr<consensus::partition_group>> r) {
  if (!r) {
    open_error_ = r.error();
    count_under_replicated(false);
    if (closing_) {
      return;
    }
    services_->reporter->notice(fmt::format("partition {}: cannot open its replica (next try in {} ms): {}", id_.dir,
                                            reopen_delay.count(), r.error().message()));
  } else if (closing_) {
    group_ = std::move(*r);  // the close waiting for this open closes it
    return;
  } else {
    group_ = std::move(*r);
    options_.trusted_end = offset_t(-1);  // (a bound for one reopen only)
    transfers_seen_ = 0;
    restarts_seen_ = 0;
    open_error_.reset();
    publish_gauges();
    return;
  }
  schedule_reopen();
}

void replica_partition_actor::schedule_reopen() {
  auto self = caf::actor_cast<replica_partition_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + reopen_delay,
                                     [self] { caf::anon_send(self, replica_reopen_atom::value); });
}

void replica_partition_actor::schedule_tick() {
  auto self = caf::actor_cast<replica_partition_impl>(this);
  current_shard()->timers().schedule(monotonic_now() + tick_period,
                                     [self] { caf::anon_send(self, replica_tick_msg_atom::value); });
}

void replica_partition_actor::on_tick() {
  if (closing_) {
    return;
  }
  schedule_tick();
  if (!group_) {
    return;
  }
  group_->tick();
  if (const auto copies = group_->storage().transfers(); copies != transfers_seen_) {
    transfers_seen_ = copies;
    const auto restarts = group_->storage().restarts();
    services_->reporter->notice(fmt::format(
        "partition {}: copied the committed log through op {} from a peer "
        "(state transfer){}; the replica goes on from there",
        id_.dir, group_->storage().committed_op(),
        restarts != restarts_seen_
            ? fmt::format(", its log started over at offset {} (the peer's retention removed what is below)",
                          group_->log().log_start().value())
            : std::string()));
    restarts_seen_ = restarts;
  }
  const bool primary = group_->primary();
  if (primary != was_primary_) {
    set_leading(primary);
    services_->reporter->notice(fmt::format("partition {}: replica {} is {} (view {})", id_.dir,
                                            group_->replica().index(), primary ? "primary" : "a backup",
                                            group_->replica().view().value()));
    if (!primary) {
      // Parked polls: this replica no longer serves them; their clients find the primary.
      run_polls(polls_.woken(offset_t(INT64_MAX)));
    }
    publish_gauges();
  }
  if (group_->fenced() && operations_ == 0 && group_->submits_in_flight() == 0) {
    // Reopen from the files (the replica restarts: it rejoins and catches up from its peers).
    services_->reporter->notice(
        fmt::format("partition {}: {}; reopening the replica", id_.dir, group_->fence_error()->message()));
    ++operations_;
    reopening_ = true;
    // After a failed fdatasync the page cache may hold bytes the disk does not: the reopen trusts no batch from the
    // log's synced end on (as the single node's partition does), beside recovery's own settling of what it reads.
    options_.trusted_end = group_->log().synced_end();
    set_leading(false);
    rill::spawn(group_->close(), [this](expected<void>) {
      --operations_;
      reopening_ = false;
      group_.reset();
      count_under_replicated(false);
      if (closing_) {
        if (finish_deferred_) {
          run_finish();
        }
      } else {
        schedule_reopen();  // after a pause: a disk that fails again at once is not reopened in a tight loop
      }
    });
  }
  const std::uint64_t retention_ticks =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(services_->retention_interval / tick_period));
  if (retention_due_ == 0) {
    retention_due_ = ticks_ + retention_ticks;
  } else if (ticks_ >= retention_due_ && !retaining_ && !group_->fenced() && !reopening_) {
    retention_due_ = ticks_ + retention_ticks;
    run_retention();
  }
  if (++ticks_ % 100 == 0) {
    publish_gauges();
  }
}

void replica_partition_actor::run_retention() {
  retaining_ = true;
  ++operations_;
  rill::spawn(group_->enforce_retention(), [this](expected<storage::retention_result> r) {
    --operations_;
    retaining_ = false;
    bump(published_->retention_runs);
    if (!r && r.error().code() != make_error_code(storage::errc::closed)) {
      services_->reporter->notice(fmt::format("{}: retention: {}", id_.dir, r.error().message()));
    }
    if (!closing_) {
      publish_gauges();
    }
  });
}

void replica_partition_actor::set_leading(bool leading) {
  if (leading != was_primary_) {
    was_primary_ = leading;
    caf::anon_send(placement_.plane, leader_atom::value,
                   partition_namespace(id_.stream_id, id_.topic_id, id_.partition_id), leading);
  }
}

void replica_partition_actor::on_committed() {
  if (!group_ || closing_) {
    return;
  }
  run_polls(polls_.woken(group_->log().committed()));
}

void replica_partition_actor::publish_gauges() {
  if (!group_) {
    return;
  }
  publish_log_gauges(group_->log(), *published_);
  published_->fenced.store(group_->fenced() ? 1 : 0, std::memory_order_relaxed);
  const bool under = under_replicated();
  published_->under_replicated.store(under ? 1 : 0, std::memory_order_relaxed);
  count_under_replicated(under);
}

void replica_partition_actor::count_under_replicated(bool under) {
  if (under != counted_under_ && services_->links != nullptr) {
    services_->links->under_replicated.fetch_add(under ? 1 : -1, std::memory_order_relaxed);
    counted_under_ = under;
  }
}

bool replica_partition_actor::under_replicated() const {
  if (!group_ || !group_->primary()) {
    return false;  // the primary counts its partition; a backup does not
  }
  if (!group_->lagging().empty()) {
    return true;
  }
  for (const auto node : placement_.members) {
    if (node != placement_.self && services_->links != nullptr && !services_->links->reaches(node)) {
      return true;
    }
  }
  return false;
}

std::optional<outcome> replica_partition_actor::refusal() const {
  if (closing_) {
    return outcome{net::status::unavailable, "the partition is closing"};
  }
  if (!group_) {
    return open_error_ ? outcome::of(*open_error_)
                       : outcome{net::status::unavailable, "the partition's replica is opening; retry"};
  }
  if (group_->fenced()) {
    return outcome{net::status::unavailable,
                   "this node's replica of the partition stopped at a storage failure and is reopening; retry "
                   "(the other replicas go on)"};
  }
  if (!group_->primary()) {
    const std::uint64_t node = group_->primary_node().value();
    outcome o;
    o.st = net::status::not_primary;
    o.redirect = node == placement_.self ? std::string() : placement_.address_of(node);
    o.message = node == placement_.self
                    ? fmt::format("partition {} of topic {}: its replicas are choosing a primary; retry shortly",
                                  id_.partition_id, id_.topic_id)
                    : fmt::format("partition {} of topic {} is led by node {}{}{}", id_.partition_id, id_.topic_id,
                                  node, o.redirect.empty() ? "" : " at ", o.redirect);
    return o;
  }
  return std::nullopt;
}

caf::result<produce_reply> replica_partition_actor::produce(produce_msg& msg) {
  if (auto refused = refusal()) {
    return produce_reply{*refused, {}, -1};
  }
  RILL_ASSERT(msg.batches != nullptr);
  auto rp = make_response_promise<produce_reply>();
  ++operations_;
  const auto arrived = std::chrono::steady_clock::now();
  rill::spawn(produce_all(std::move(msg.batches)), [this, rp, arrived](produce_reply r) mutable {
    --operations_;
    published_->produce.record(std::chrono::steady_clock::now() - arrived);
    if (!r.result.ok()) {
      bump(published_->produce_errors);
    }
    rp.deliver(std::move(r));
  });
  return rp;
}

task<produce_reply> replica_partition_actor::produce_all(std::shared_ptr<storage::validated_batches> batches) {
  // One op per batch, in the request's order. A failure stops the request there: the batches before it are
  // committed (a retry of an idempotent producer's is answered with their offsets), those after it are not sent.
  produce_reply out;
  const auto bytes = batches->bytes();
  for (const auto& b : batches->batches()) {
    if (!group_ || closing_) {
      co_return produce_reply{outcome{net::status::unavailable, "the partition is closing"}, {}, -1};
    }
    auto body = consensus::partition_machine::produce_request(bytes.subspan(b.position, b.size), b.crc_tail);
    auto committed = co_await group_->submit(consensus::operation_produce_batch, std::move(body));
    if (!committed) {
      co_return produce_reply{outcome::of(committed.error()), {}, -1};
    }
    auto reply = consensus::partition_machine::decode_produce_reply(committed->reply);
    RILL_ASSERT(reply.has_value(), "partition {}: an undecodable produce reply", id_.dir);
    if (auto o = verdict_outcome(*reply); !o.ok()) {
      co_return produce_reply{std::move(o), {}, -1};
    }
    out.base_offsets.push_back(reply->base_offset);
    out.timestamp_ms = std::max(out.timestamp_ms, reply->timestamp_ms);
  }
  co_return out;
}

caf::result<offset_reply> replica_partition_actor::store_offset(offset_msg& msg) {
  if (auto refused = refusal()) {
    return offset_reply{*refused, std::nullopt};
  }
  auto rp = make_response_promise<offset_reply>();
  ++operations_;
  auto job = [](consensus::partition_group* g, std::string consumer, std::int64_t offset) -> task<offset_reply> {
    // An explicit store may move the consumer back on purpose (the reply names the offset it replaced); a poll's
    // auto-commit never does (operation_consumer_offset).
    auto stored = co_await g->submit(consensus::operation_consumer_offset_reset,
                                     consensus::partition_machine::offset_request(consumer, offset));
    if (!stored) {
      co_return offset_reply{outcome::of(stored.error()), std::nullopt};
    }
    auto r = consensus::partition_machine::decode_offset_reply(stored->reply);
    RILL_ASSERT(r.has_value(), "an undecodable offset reply");
    using status = consensus::partition_machine::offset_status;
    switch (r->status) {
      case status::stored:
        co_return offset_reply{outcome{}, r->previous < 0 ? std::nullopt : std::optional<std::int64_t>(r->previous)};
      case status::out_of_range:
        co_return offset_reply{outcome{net::status::offset_out_of_range,
                                       fmt::format("offset {} for consumer '{}': the partition holds offsets up to "
                                                   "{}",
                                                   offset, consumer, r->next_offset)},
                               std::nullopt};
      case status::limit_exceeded:
        co_return offset_reply{outcome{net::status::limit_exceeded,
                                       fmt::format("consumer '{}': the partition already stores the offsets of "
                                                   "limits.consumers_per_partition_max consumers",
                                                   consumer)},
                               std::nullopt};
      case status::invalid_name:
        co_return offset_reply{outcome{net::status::invalid_name, fmt::format("consumer name '{}'", consumer)},
                               std::nullopt};
      case status::behind:  // (only a poll's auto-commit is refused for going back; this store is a reset)
        co_return offset_reply{outcome{net::status::internal_error, "an explicit offset store refused as behind"},
                               std::nullopt};
    }
    co_return offset_reply{outcome{net::status::internal_error, "an unknown offset status"}, std::nullopt};
  };
  rill::spawn(job(group_.get(), std::move(msg.consumer), msg.offset), [this, rp](offset_reply r) mutable {
    --operations_;
    rp.deliver(std::move(r));
  });
  return rp;
}

std::optional<outcome> replica_partition_actor::stale_offset_refusal() const {
  if (group_ && group_->primary() && !group_->replica().caught_up_in_view()) {
    // A new primary still committing its predecessors' ops: its consumers' offsets may be behind what was stored
    // (issue 38, finding 9). A moment, not a failure: the client retries.
    return outcome{net::status::unavailable,
                   fmt::format("partition {} of topic {}: its new primary is still applying what the previous ones "
                               "committed; retry shortly",
                               id_.partition_id, id_.topic_id)};
  }
  return std::nullopt;
}

std::optional<outcome> replica_partition_actor::poll_refusal(const proto::PollRequest& r) const {
  const bool by_stored_offset =
      r.strategy().kind() == proto::PollStrategy::NEXT && r.consumer().kind_case() == proto::Consumer::kName;
  if (by_stored_offset) {
    // The consumer's stored offset is the primary's to read, once it shows everything committed (a backup's, or a new
    // primary's, may be behind: the consumer would read again what it has consumed, and its auto-commit go back).
    if (auto refused = refusal()) {
      return refused;
    }
    return stale_offset_refusal();
  }
  auto refused = refusal();
  // A read from any replica: a backup (or a primary in a view change) answers with what it knows committed, unless
  // the poll stores the consumer's offset (a write: the primary's).
  if (refused && refused->st == net::status::not_primary && r.from_replica() && !r.auto_commit()) {
    // Except a replica catching up (recovering a lost disk, or copying its log from a peer): it serves nothing
    // until it has (its committed prefix is older than its peers' by an unknown stretch).
    if (group_->replica().recovering() || group_->transferring()) {
      return outcome{net::status::unavailable,
                     fmt::format("partition {} of topic {}: this node's replica is catching up ({}); read from the "
                                 "primary, node {}",
                                 id_.partition_id, id_.topic_id,
                                 group_->transferring() ? "copying the log from a peer" : "recovering a lost disk",
                                 group_->primary_node().value())};
    }
    return std::nullopt;
  }
  return refused;
}

void replica_partition_actor::run_poll(waiter_id id) {
  const poll_waiter* w = polls_.find(id);
  if (w == nullptr || !polls_.start_read(id)) {
    return;
  }
  if (auto refused = poll_refusal(w->request)) {
    (void)polls_.read_done(id, false, std::nullopt);
    auto answered = polls_.take(id);
    current_shard()->timers().cancel(answered.timer);
    answered.promise.deliver(poll_reply{*refused, nullptr});
    return;
  }
  auto& log = group_->log();
  const bool named = w->request.consumer().kind_case() == proto::Consumer::kName;
  const auto stored = named ? group_->machine().consumer_offset(w->request.consumer().name()) : std::nullopt;
  const auto query = read_request_for(w->request, w->resume_at, stored, log.log_start(), log.committed(),
                                      services_->default_max_bytes);
  ++operations_;
  auto job = [](consensus::partition_group* g, storage::read_request q, proto::PollRequest request,
                bool by_name) -> task<expected<storage::read_result>> {
    RILL_CO_TRY(result, co_await g->log().read(q));
    if (request.auto_commit() && result.batches > 0 && by_name && g->primary()) {
      RILL_CO_TRY_VOID(co_await g->submit(
          consensus::operation_consumer_offset,
          consensus::partition_machine::offset_request(request.consumer().name(), result.next_offset.value())));
    }
    co_return result;
  };
  rill::spawn(job(group_.get(), query, w->request, named), [this, id](expected<storage::read_result> r) {
    --operations_;
    answer_poll_read(polls_, id, std::move(r), current_shard()->timers(), *published_);
  });
}

void replica_partition_actor::run_polls(const std::vector<waiter_id>& ids) {
  for (auto id : ids) {
    run_poll(id);
  }
}

void replica_partition_actor::schedule_poll_deadline(waiter_id id) {
  const auto due = polls_.deadline_of(id);
  if (!due) {
    return;
  }
  auto self = caf::actor_cast<replica_partition_impl>(this);
  const std::int64_t at = due->count();
  polls_.find(id)->timer =
      current_shard()->timers().schedule(*due, [self, at] { caf::anon_send(self, poll_timeout_atom::value, at); });
}

caf::result<outcome> replica_partition_actor::finish(bool destroy) {
  auto rp = make_response_promise<outcome>();
  closing_ = true;
  for (auto& w : polls_.close()) {
    current_shard()->timers().cancel(w.timer);
    w.promise.deliver(poll_reply{outcome{net::status::unavailable, "the partition is closing"}, nullptr});
  }
  RILL_ASSERT(!finish_deferred_, "partition {}: a second close while one waits", id_.dir);
  finish_deferred_.emplace(rp, destroy);
  if (!opening_ && !reopening_) {
    run_finish();
  }  // else the open or reopen in flight runs it when it ends
  return rp;
}

void replica_partition_actor::run_finish() {
  RILL_ASSERT(finish_deferred_.has_value());
  auto [rp, destroy] = *finish_deferred_;
  finish_deferred_.reset();
  auto job = [](replica_partition_actor* self, bool remove) -> task<expected<void>> {
    if (self->group_) {
      RILL_CO_TRY_VOID(co_await self->group_->close());
    }
    if (remove) {
      RILL_CO_TRY_VOID(
          co_await storage::remove_tree(*self->io_, self->id_.dir, self->options_.config.delete_step_bytes));
    }
    co_return expected<void>{};
  };
  rill::spawn(job(this, destroy), [this, rp](expected<void> r) mutable {
    group_.reset();
    count_under_replicated(false);
    rp.deliver(r ? outcome{} : outcome::of(r.error()));
    quit();
  });
}

replica_partition_actor::behavior_type replica_partition_actor::serving() {
  return {
      io_completion{io_.get()},
      [this](produce_atom, produce_msg& msg) { return produce(msg); },
      [this](poll_atom, poll_msg& msg) -> caf::result<poll_reply> {
        if (auto refused = poll_refusal(msg.request)) {
          return poll_reply{*refused, nullptr};
        }
        auto rp = make_response_promise<poll_reply>();
        const std::uint64_t wait_ms = msg.request.max_wait_ms();
        const auto id = polls_.add(poll_waiter{std::move(msg.request), msg.resume_at, rp, 0}, wait_ms, monotonic_now());
        schedule_poll_deadline(id);
        run_poll(id);
        return rp;
      },
      [this](drain_atom) { run_polls(polls_.drain()); },
      [this](poll_timeout_atom, std::int64_t at) { run_polls(polls_.expire(std::chrono::nanoseconds(at))); },
      [this](offset_get_atom, offset_msg& msg) -> offset_reply {
        if (auto refused = refusal()) {
          return offset_reply{*refused, std::nullopt};
        }
        if (auto stale = stale_offset_refusal()) {
          return offset_reply{*stale, std::nullopt};
        }
        return offset_reply{outcome{}, group_->machine().consumer_offset(msg.consumer)};
      },
      [this](offset_store_atom, offset_msg& msg) { return store_offset(msg); },
      [this](info_atom) -> partition_info {
        partition_info out;
        out.info.set_id(id_.partition_id);
        out.info.set_node_id(placement_.self);
        for (auto n : placement_.members) {
          out.info.add_replicas(n);
        }
        if (!group_) {
          out.info.set_role("opening");
          out.result = open_error_ ? outcome::of(*open_error_) : outcome{net::status::unavailable, "not open"};
          return out;
        }
        describe_log(group_->log(), out.info);
        const auto& r = group_->replica();
        out.info.set_primary_node(group_->primary_node().value());
        out.info.set_view(r.view().value());
        out.info.set_role(r.recovering()                                 ? "recovering"
                          : group_->transferring()                       ? "transferring"
                          : r.status() == consensus::status::view_change ? "view_change"
                          : r.is_primary()                               ? "primary"
                                                                         : "backup");
        out.info.set_commit_op(r.commit_min().value());
        out.info.set_op(r.op().value());
        if (group_->fenced()) {
          out.info.set_fenced("a storage failure: see the server's log");
        }
        return out;
      },
      [this](replica_tick_msg_atom) { on_tick(); },
      [this](replica_reopen_atom) {
        if (!closing_ && !group_ && !opening_) {
          open_group();
        }
      },
      [this](replica_atom, replica_frame& f) {
        if (group_ && !closing_ && f.m != nullptr) {
          group_->on_message(*f.m);
        }
      },
      [this](stall_atom, std::uint32_t) {
        services_->reporter->notice(
            fmt::format("partition {}: stall is not supported on a replicated partition "
                        "(pause the node instead)",
                        id_.dir));
      },
      [](unstall_atom) {},
      [this](fail_syncs_atom, std::uint32_t n) {
        if (group_) {
          group_->log().inject_sync_failures(n);
        }
      },
      [this](close_atom) { return finish(false); },
      [this](destroy_atom) { return finish(true); },
  };
}

}  // namespace rill::actors
