// partition_replica: a replicated partition's replica on this node (see the header).
#include "actors/partition_replica.h"

#include <fmt/core.h>

#include "base/assert.h"
#include "consensus/journal.h"
#include "consensus/partition_machine.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {

// A region of the partition's snapshot.bin (the layout fixes it: region 1 starts here).
constexpr std::uint64_t checkpoint_region_bytes = std::uint64_t{64} << 20;

// A checkpoint's most bytes: its 16-byte head, the client table (each session: 36 bytes, a reply header and a reply
// of at most a journal slot), and the machine's snapshot at most.
std::uint64_t client_table_bytes_max(std::uint32_t clients_max) {
  return 16 + 4 +
         std::uint64_t{clients_max} * (36 + consensus::header::encoded_size + partition_replica::journal_slot_bytes);
}
std::uint64_t checkpoint_bytes_max(std::uint32_t clients_max) {
  return client_table_bytes_max(clients_max) + consensus::partition_snapshot_bytes_budget;
}

rill::unexpected refused(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

// A produce verdict other than fresh or duplicate, as the status the producer is told (nullopt: accepted).
std::optional<rill::error> verdict_error(const consensus::partition_machine::produce_reply& r) {
  switch (r.verdict) {
    case storage::producer_verdict::fresh:
    case storage::producer_verdict::duplicate:
      return std::nullopt;
    case storage::producer_verdict::duplicate_sequence:
      return rill::error(make_error_code(net::status::duplicate_sequence), r.detail);
    case storage::producer_verdict::sequence_gap:
      return rill::error(make_error_code(net::status::sequence_gap), r.detail);
    case storage::producer_verdict::producer_fenced:
      return rill::error(make_error_code(net::status::producer_fenced), r.detail);
    case storage::producer_verdict::unknown_producer_id:
      return rill::error(make_error_code(net::status::unknown_producer_id), r.detail);
  }
  return rill::error(make_error_code(net::status::internal_error), "an unknown producer verdict");
}

// Counts an operation of the replica for as long as it lives (close() waits for none to be in flight). A replica
// destroyed under it (a crashed process, in the simulator) is not touched.
struct counted {
  std::size_t& n;
  std::shared_ptr<bool> alive;
  counted(std::size_t& c, std::shared_ptr<bool> a) : n(c), alive(std::move(a)) { ++n; }
  ~counted() {
    if (*alive) {
      --n;
    }
  }
  counted(const counted&) = delete;
  counted& operator=(const counted&) = delete;
};

}  // namespace

partition_replica::partition_replica(partition_replica_options options, partition_replica_env env,
                                     partition_replica_callbacks callbacks)
    : options_(std::move(options)),
      env_(env),
      callbacks_(std::move(callbacks)),
      stamps_(env_.clk, env_.stamps_from.value_or(elapsed_clock::anchor_of(env_.clk))) {
  RILL_ASSERT(options_.members.size() >= 2, "a replicated partition of {} members", options_.members.size());
  RILL_ASSERT(options_.reopen_ticks >= 1);
  idle_.set();
  reads_idle_.set();
}

partition_replica::~partition_replica() {
  *alive_ = false;
}

void partition_replica::notice(const std::string& line) const {
  if (callbacks_.notice) {
    callbacks_.notice(line);
  }
}

void partition_replica::start() {
  RILL_ASSERT(!opening_ && !group_ && !closing_);
  opening_ = true;
  idle_.reset();
  spawn(open_group(), [] {});
}

task<std::uint32_t> partition_replica::journal_slots_of() {
  // A journal created earlier keeps its ring (journal_slots applies to new replicas): its size is the ring's header
  // pages plus one slot per op, which names the slot count. Read through the engine (the simulator's disk too).
  const std::string path = storage::join_path(storage::join_path(options_.dir, vsr_dir), "journal.wal");
  auto fd = co_await storage::open_file(env_.engine, path, storage::io::open_read_only);
  if (!fd) {
    co_return options_.journal_slots;  // none yet (or unreadable: the journal's own open names the problem)
  }
  auto size = co_await storage::size_of_file(env_.engine, *fd, path);
  (void)co_await storage::close_file(env_.engine, *fd, path);
  if (size && *size > 0) {
    if (const auto slots = consensus::journal_slot_count_of(*size, journal_slot_bytes)) {
      co_return static_cast<std::uint32_t>(*slots);
    }
  }
  co_return options_.journal_slots;  // a size no ring has: the journal's open names the mismatch
}

task<expected<void>> partition_replica::clear_leftover() {
  // The superblock names the group its directory belongs to. Another group's is a deleted incarnation of this
  // partition (a partition deleted and added back, a topic created again under the same ids) that this node did not
  // destroy (it was down across the change): the metadata says the partition is this group now, and a group id
  // never comes back, so the old data goes (issue 38, finding 1).
  const std::string vsr = storage::join_path(options_.dir, vsr_dir);
  auto sb = co_await consensus::superblock::open(env_.engine, vsr, false, consensus::vsr_state{});
  if (!sb) {
    co_return expected<void>{};  // none (or unreadable: the group's own open names the problem)
  }
  const std::uint64_t found = (*sb)->state().cluster;
  (void)co_await (*sb)->close();
  if (found == options_.group.value()) {
    co_return expected<void>{};
  }
  notice(
      fmt::format("partition {}: its directory holds group {:#x}, a deleted incarnation of the partition, not "
                  "group {:#x}: removed",
                  options_.dir, found, options_.group.value()));
  co_return co_await storage::remove_tree(env_.engine, options_.dir, options_.log.config.delete_step_bytes);
}

task<void> partition_replica::open_group() {
  auto alive = alive_;
  counted op(operations_, alive_);
  if (auto cleared = co_await clear_leftover(); !cleared && *alive) {
    opening_ = false;
    opened(rill::unexpected(std::move(cleared).error()));
    idle_.set();
    co_return;
  }
  if (!*alive) {
    co_return;
  }
  const std::uint32_t slots = co_await journal_slots_of();
  if (!*alive) {
    co_return;
  }
  consensus::partition_group_options o;
  o.group = options_.group;
  o.members = options_.members;
  o.self = options_.self;
  o.storage.files.journal = consensus::journal_options{slots, journal_slot_bytes};
  // A checkpoint is the client table, then the machine's snapshot: the machine keeps its snapshot within
  // partition_snapshot_bytes_budget whatever its settings (issue 38, finding 4), and the client table within the rest.
  o.storage.files.snapshot_bytes_max = checkpoint_region_bytes;
  RILL_ASSERT(checkpoint_bytes_max(o.replica.clients_max) <= checkpoint_region_bytes);
  if (options_.checkpoint_region_bytes != 0 && options_.checkpoint_region_bytes < checkpoint_region_bytes) {
    RILL_ASSERT(options_.checkpoint_region_bytes > client_table_bytes_max(o.replica.clients_max), "{} bytes",
                options_.checkpoint_region_bytes);
    o.storage.files.snapshot_bytes_max = options_.checkpoint_region_bytes;
    o.machine.snapshot_bytes_budget = options_.checkpoint_region_bytes - client_table_bytes_max(o.replica.clients_max);
  }
  o.storage.files.snapshot_reserved_bytes = 64 * 1024;
  o.storage.files.files = options_.log.files;  // the shard's cache: the group's files count in its limit too
  o.storage.log = options_.log;
  o.storage.log.owner_entries.emplace_back(vsr_dir);  // the group's files, beside the log's
  o.settings = options_.settings;
  o.silence_ms = std::uint64_t{o.replica.primary_timeout_ticks} * options_.tick_ms;
  o.recovering = options_.recovering;
  // A recovering member's incarnation starts at the wall clock (a floor under the one it takes once caught up).
  o.incarnation =
      options_.recovering ? static_cast<std::uint64_t>(std::max<std::int64_t>(0, env_.clk.wall_ms().value())) : 0;
  o.reachable = options_.reachable;
  o.seed = options_.seed ? options_.seed() : 0;
  elapsed_clock* stamps = &stamps_;
  // (Named, not temporaries of the co_await expression: GCC 12 destroys a std::function temporary made among a
  // co_await's arguments twice, which released `alive` once too often: docs/architecture.md, Coroutines.)
  const rill::clock* clk = &env_.clk;
  consensus::partition_machine::wall_clock now_ms =
      options_.bug_stamps_follow_wall
          ? consensus::partition_machine::wall_clock([clk] { return clk->wall_ms().value(); })
          : consensus::partition_machine::wall_clock([stamps] { return stamps->now_ms(); });
  std::function<void()> committed = [this, alive] {
    if (*alive && !closing_ && callbacks_.committed) {
      callbacks_.committed();
    }
  };
  auto r = co_await consensus::partition_group::open(env_.engine, env_.pool, env_.clk, env_.reporter,
                                                     storage::join_path(options_.dir, vsr_dir), options_.dir,
                                                     std::move(o), env_.net, std::move(now_ms), std::move(committed));
  if (!*alive) {
    if (r) {
      (void)co_await (*r)->close();  // (the replica went while its group opened)
    }
    co_return;
  }
  opening_ = false;
  opened(std::move(r));
  idle_.set();
}

void partition_replica::opened(expected<std::unique_ptr<consensus::partition_group>> r) {
  if (!r) {
    open_error_ = r.error();
    if (!closing_) {
      notice(fmt::format("partition {}: cannot open its replica (next try in {} ticks): {}", options_.dir,
                         options_.reopen_ticks, r.error().message()));
      reopen_due_ = ticks_ + options_.reopen_ticks;
    }
  } else {
    group_ = std::move(*r);
    options_.log.trusted_end = offset_t(-1);  // (a bound for one reopen only)
    transfers_seen_ = 0;
    restarts_seen_ = 0;
    open_error_.reset();
  }
  if (callbacks_.changed) {
    callbacks_.changed();
  }
}

void partition_replica::set_leading(bool leading) {
  if (leading != was_primary_) {
    was_primary_ = leading;
    if (callbacks_.leading) {
      callbacks_.leading(leading);
    }
  }
}

void partition_replica::tick() {
  ++ticks_;
  if (closing_) {
    return;
  }
  if (!group_) {
    if (!opening_ && !reopening_ && reopen_due_ != 0 && ticks_ >= reopen_due_) {
      reopen_due_ = 0;
      ++reopens_;
      opening_ = true;
      idle_.reset();
      spawn(open_group(), [] {});
    }
    return;
  }
  group_->tick();
  if (const auto copies = group_->storage().transfers(); copies != transfers_seen_) {
    transfers_seen_ = copies;
    const auto restarts = group_->storage().restarts();
    notice(fmt::format(
        "partition {}: copied the committed log through op {} from a peer (state transfer){}; the replica goes on "
        "from there",
        options_.dir, group_->storage().committed_op(),
        restarts != restarts_seen_
            ? fmt::format(", its log started over at offset {} (the peer's retention removed what is below)",
                          group_->log().log_start().value())
            : std::string()));
    restarts_seen_ = restarts;
  }
  const bool primary = group_->primary();
  if (primary != was_primary_) {
    set_leading(primary);
    notice(fmt::format("partition {}: replica {} is {} (view {})", options_.dir, group_->replica().index(),
                       primary ? "primary" : "a backup", group_->replica().view().value()));
    if (callbacks_.changed) {
      callbacks_.changed();
    }
  }
  if (group_->fenced() && operations_ == 0 && reads_ == 0 && group_->submits_in_flight() == 0 && !reopening_) {
    // Reopen from the files (the replica restarts: it rejoins and catches up from its peers). After a failed
    // fdatasync the page cache may hold bytes the disk does not: the reopen trusts no batch from the log's synced
    // end on (as the single node's partition does), beside recovery's own settling of what it reads.
    notice(fmt::format("partition {}: {}; reopening the replica", options_.dir, group_->fence_error()->message()));
    reopening_ = true;
    idle_.reset();
    set_leading(false);
    auto job = [](partition_replica* self, std::shared_ptr<bool> alive) -> task<void> {
      counted op(self->operations_, alive);
      (void)co_await self->group_->close();
      if (!*alive) {
        co_return;
      }
      // The synced end as the log closed, not as the group fenced: a group fenced by its journal leaves its log
      // working, and close() waits for the log's operations in flight (a state transfer's copy, which commits what
      // it synced; appends of waiting writes) and syncs and persists the committed offset. A bound taken at the
      // fence cut below that committed offset at the reopen, and the log's committed batches lost their .meta
      // entries (rill-sim --node --seed 775723948386111964: "committed batch at 51 without its op" at every open).
      // A fenced log syncs nothing more, so its synced end is the same either way.
      self->options_.log.trusted_end = self->group_->log().synced_end();
      self->group_.reset();
      self->reopening_ = false;
      if (!self->closing_) {
        self->reopen_due_ = self->ticks_ + self->options_.reopen_ticks;  // a disk failing again is not reopened at once
      }
      if (self->callbacks_.changed) {
        self->callbacks_.changed();
      }
      self->idle_.set();
    };
    spawn(job(this, alive_), [] {});
    return;
  }
  if (options_.retention_ticks > 0) {
    if (retention_due_ == 0) {
      retention_due_ = ticks_ + options_.retention_ticks;
    } else if (ticks_ >= retention_due_ && !retaining_ && !group_->fenced()) {
      retention_due_ = ticks_ + options_.retention_ticks;
      run_retention();
    }
  }
}

void partition_replica::run_retention() {
  retaining_ = true;
  auto job = [](partition_replica* self, std::shared_ptr<bool> alive) -> task<void> {
    counted op(self->operations_, alive);
    auto r = co_await self->group_->enforce_retention();
    if (!*alive) {
      co_return;
    }
    self->retaining_ = false;
    ++self->retention_runs_;
    if (!r && r.error().code() != make_error_code(storage::errc::closed)) {
      self->notice(fmt::format("{}: retention: {}", self->options_.dir, r.error().message()));
    }
    if (self->callbacks_.changed) {
      self->callbacks_.changed();
    }
  };
  spawn(job(this, alive_), [] {});
}

void partition_replica::on_message(const consensus::message& m) {
  if (group_ && !closing_) {
    group_->on_message(m);
  }
}

std::optional<replica_refusal> partition_replica::refusal() const {
  if (closing_) {
    return replica_refusal{net::status::unavailable, "the partition is closing", std::nullopt};
  }
  if (!group_) {
    if (open_error_) {
      return replica_refusal{net::status_of(open_error_->code()), open_error_->detail(), std::nullopt};
    }
    return replica_refusal{net::status::unavailable, "the partition's replica is opening; retry", std::nullopt};
  }
  if (group_->fenced()) {
    return replica_refusal{net::status::unavailable,
                           "this node's replica of the partition stopped at a storage failure and is reopening; "
                           "retry (the other replicas go on)",
                           std::nullopt};
  }
  if (const auto unheard = group_->silenced(); unheard && !options_.bug_primary_never_silenced) {
    // Cut off (or paused) long enough for its backups to choose another primary: what it would serve may be stale,
    // and a write it took would wait for a quorum it cannot reach. The client looks for the partition elsewhere;
    // a read from any replica (from_replica) is still served, as by a backup, from what is committed.
    return replica_refusal{net::status::not_primary,
                           fmt::format("partition {} of topic {}: its primary here has not been heard by a quorum of "
                                       "its replicas for {} ms (cut off?); another node may lead it now",
                                       options_.partition_id, options_.topic_id, unheard->count()),
                           std::nullopt};
  }
  if (!group_->primary()) {
    const std::uint64_t node = group_->primary_node().value();
    if (node == options_.self.value()) {
      return replica_refusal{net::status::not_primary,
                             fmt::format("partition {} of topic {}: its replicas are choosing a primary; retry shortly",
                                         options_.partition_id, options_.topic_id),
                             std::nullopt};
    }
    return replica_refusal{
        net::status::not_primary,
        fmt::format("partition {} of topic {} is led by node {}", options_.partition_id, options_.topic_id, node),
        node};
  }
  return std::nullopt;
}

std::optional<replica_refusal> partition_replica::stale_offset_refusal() const {
  if (group_ && group_->primary() && group_->replica().view().value() == 0 &&
      group_->replica().commit_max().value() == 0) {
    // The primary of view 0 that has committed nothing with its peers yet: a new group's, or a replica formatted
    // after its group moved on (its node carried the partition's creation out late) that leads only in its own eyes
    // and holds none of the group's state. Until an op commits it cannot tell which (issue 38: rill-sim --node).
    return replica_refusal{net::status::unavailable,
                           fmt::format("partition {} of topic {}: its replica here has not yet committed anything with "
                                       "its peers; retry shortly",
                                       options_.partition_id, options_.topic_id),
                           std::nullopt};
  }
  if (group_ && group_->primary() && !group_->replica().caught_up_in_view()) {
    // A new primary still committing its predecessors' ops: its consumers' offsets may be behind what was stored. A
    // moment, not a failure: the client retries.
    return replica_refusal{net::status::unavailable,
                           fmt::format("partition {} of topic {}: its new primary is still applying what the previous "
                                       "ones committed; retry shortly",
                                       options_.partition_id, options_.topic_id),
                           std::nullopt};
  }
  return catching_up_refusal();
}

std::optional<replica_refusal> partition_replica::catching_up_refusal() const {
  if (group_ == nullptr || options_.bug_reads_while_copying) {
    return std::nullopt;
  }
  const bool recovering = group_->replica().recovering();
  if (!recovering && !group_->storage().transfer_target()) {
    return std::nullopt;
  }
  // (A primary copying its log: found by rill-sim --node, a new primary that had installed its peers' checkpoint
  // served high watermark 0 for 300 ticks while its first transfer peer stayed silent.)
  const std::uint64_t primary = group_->primary_node().value();
  return replica_refusal{
      net::status::unavailable,
      fmt::format("partition {} of topic {}: this node's replica is catching up ({}); {}", options_.partition_id,
                  options_.topic_id, recovering ? "recovering a lost disk" : "copying the log from a peer",
                  primary != options_.self.value() ? fmt::format("read from the primary, node {}", primary)
                                                   : std::string("retry shortly")),
      std::nullopt};
}

std::optional<replica_refusal> partition_replica::poll_refusal(const proto::PollRequest& r) const {
  const bool by_stored_offset =
      r.strategy().kind() == proto::PollStrategy::NEXT && r.consumer().kind_case() == proto::Consumer::kName;
  if (by_stored_offset) {
    // The consumer's stored offset is the primary's to read, once it shows everything committed (a backup's, or a new
    // primary's, may be behind: the consumer would read again what it has consumed, and its auto-commit go back).
    if (auto no = refusal()) {
      return no;
    }
    return stale_offset_refusal();
  }
  auto no = refusal();
  if (!no) {
    return catching_up_refusal();  // a primary copying its log
  }
  // A read from any replica: a backup (or a primary in a view change) answers with what it knows committed, unless
  // the poll stores the consumer's offset (a write: the primary's).
  if (no->status == net::status::not_primary && r.from_replica() && !r.auto_commit()) {
    // Except a replica catching up (recovering a lost disk, or copying its log from a peer, or waiting to try the
    // copy again): it serves nothing until it has (its committed prefix is older than its peers' by an unknown
    // stretch).
    return catching_up_refusal();
  }
  return no;
}

task<expected<partition_replica::produced>> partition_replica::produce(
    std::shared_ptr<storage::validated_batches> batches) {
  RILL_ASSERT(batches != nullptr);
  counted op(operations_, alive_);
  auto alive = alive_;
  produced out;
  const auto bytes = batches->bytes();
  for (const auto& b : batches->batches()) {
    if (!*alive || !group_ || closing_) {
      co_return refused(net::status::unavailable, "the partition is closing");
    }
    auto body = consensus::partition_machine::produce_request(bytes.subspan(b.position, b.size), b.crc_tail);
    auto committed = co_await group_->submit(consensus::operation_produce_batch, std::move(body));
    if (!committed) {
      co_return rill::unexpected(std::move(committed).error());
    }
    auto reply = consensus::partition_machine::decode_produce_reply(committed->reply);
    RILL_ASSERT(reply.has_value(), "partition {}: an undecodable produce reply", options_.dir);
    if (auto e = verdict_error(*reply)) {
      co_return rill::unexpected(std::move(*e));
    }
    out.base_offsets.push_back(reply->base_offset);
    out.timestamp_ms = std::max(out.timestamp_ms, reply->timestamp_ms);
  }
  co_return out;
}

task<expected<std::optional<std::int64_t>>> partition_replica::store_offset(std::string consumer, std::int64_t offset) {
  counted op(operations_, alive_);
  if (!group_ || closing_) {
    co_return refused(net::status::unavailable, "the partition is closing");
  }
  // An explicit store may move the consumer back on purpose (the reply names the offset it replaced); a poll's
  // auto-commit never does (commit_offset).
  auto stored = co_await group_->submit(consensus::operation_consumer_offset_reset,
                                        consensus::partition_machine::offset_request(consumer, offset));
  if (!stored) {
    co_return rill::unexpected(std::move(stored).error());
  }
  auto r = consensus::partition_machine::decode_offset_reply(stored->reply);
  RILL_ASSERT(r.has_value(), "an undecodable offset reply");
  using status = consensus::partition_machine::offset_status;
  switch (r->status) {
    case status::stored:
      co_return r->previous < 0 ? std::nullopt : std::optional<std::int64_t>(r->previous);
    case status::out_of_range:
      co_return refused(net::status::offset_out_of_range,
                        fmt::format("offset {} for consumer '{}': the partition holds offsets up to {}", offset,
                                    consumer, r->next_offset));
    case status::limit_exceeded:
      co_return refused(net::status::limit_exceeded,
                        fmt::format("consumer '{}': the partition already stores the offsets of "
                                    "limits.consumers_per_partition_max consumers",
                                    consumer));
    case status::invalid_name:
      co_return refused(net::status::invalid_name, fmt::format("consumer name '{}'", consumer));
    case status::behind:  // (only a poll's auto-commit is refused for going back; this store is a reset)
      co_return refused(net::status::internal_error, "an explicit offset store refused as behind");
  }
  co_return refused(net::status::internal_error, "an unknown offset status");
}

task<expected<void>> partition_replica::commit_offset(std::string consumer, std::int64_t offset) {
  counted op(operations_, alive_);
  if (!group_ || closing_) {
    co_return refused(net::status::unavailable, "the partition is closing");
  }
  auto stored = co_await group_->submit(consensus::operation_consumer_offset,
                                        consensus::partition_machine::offset_request(consumer, offset));
  if (!stored) {
    co_return rill::unexpected(std::move(stored).error());
  }
  co_return expected<void>{};  // (stored, or behind: a later offset is there already)
}

void partition_replica::update_config(const config::log_config& c) {
  RILL_ASSERT(config::changes_in_place(options_.log.config, c), "partition {}: a setting that needs a reopen",
              options_.dir);
  options_.log.config = c;
  if (group_) {
    group_->log().update_config(c);
  }
}

std::string partition_replica::describe() const {
  return fmt::format("{}: {}{}{}{}{} operations {}, reads {}{}", options_.dir, group_ ? "open" : "not open",
                     opening_ ? ", opening" : "", reopening_ ? ", reopening" : "", closing_ ? ", closing" : "",
                     retaining_ ? ", retaining" : "", operations_, reads_,
                     group_ ? fmt::format(", submits {}, tasks {}, storage: {}", group_->submits_in_flight(),
                                          group_->tasks(), group_->storage().describe())
                            : std::string());
}

task<expected<storage::read_result>> partition_replica::read(storage::read_request rq) {
  if (!group_ || closing_ || group_->fenced()) {
    co_return refused(net::status::unavailable, "the partition is closing or reopening");
  }
  auto alive = alive_;
  ++reads_;
  reads_idle_.reset();
  auto got = co_await group_->log().read(rq);
  if (*alive && --reads_ == 0) {
    reads_idle_.set();
  }
  co_return got;
}

task<expected<void>> partition_replica::close(bool destroy) {
  RILL_ASSERT(!closing_, "partition {}: closed twice", options_.dir);
  closing_ = true;
  auto alive = alive_;
  co_await idle_.wait();  // an open or reopen in flight ends first (its group, if any, is closed below)
  if (!*alive) {
    co_return expected<void>{};
  }
  co_await reads_idle_.wait();  // (the log is never closed under a reader)
  if (!*alive) {
    co_return expected<void>{};
  }
  set_leading(false);
  if (group_) {
    auto closed = co_await group_->close();
    if (!*alive) {
      co_return expected<void>{};
    }
    group_.reset();
    RILL_CO_TRY_VOID(std::move(closed));
  }
  if (destroy) {
    RILL_CO_TRY_VOID(co_await storage::remove_tree(env_.engine, options_.dir, options_.log.config.delete_step_bytes));
  }
  co_return expected<void>{};
}

}  // namespace rill::actors
