#pragma once
// checker: the safety properties of a simulated run, checked as events happen (after every step).
//
// - One canonical committed history: the first replica to apply op k fixes its checksum; every replica's applied
//   prefix must match it, op by op, in order, without gaps (a restart replays from its checkpoint; a state
//   transfer jumps to a checkpoint of a canonical op). The state machine's digest after op k is the same on every
//   replica, and a checkpoint restores exactly the digest the canonical history had at its op.
// - No acknowledged write lost: a client's reply names op k and the prepare checksum; it must be the canonical op
//   k, and at the end every replica's applied prefix must include it.
// - Exactly once: no payload appears twice in the canonical history.
// - No regression: a replica's durable view, log view, commit and checkpoint never go backwards (across restarts
//   too, a lost disk excepted); within one incarnation its view and commit_max never go backwards.
// - Offsets: the ledger's assignment at apply (op -> base offset, records) is the same on every replica; a client's
//   produce ack names that assignment; no offset ever names two records (ack, apply, every record any consumer
//   reads from any replica's partition log, at any time); visible <= committed: a partition log's committed
//   offset never passes the offsets of ops committed so far; consumers read in order without gaps; at the end every
//   acknowledged offset is visible on every replica of the converged core (acked <= visible), whose logs hold
//   exactly the canonical records from offset 0.
// - Consumer positions stored through the group never go back (each acknowledged commit of a position stores one
//   at least as high as the last).
// - Persist before advertise: no replica sends a message carrying a view (or, for start_view, a log view) that is
//   not yet durable (votes excepted: a start_view_change proposes a view, it does not adopt it).
// - A replica recovering from a lost disk (durably so) sends no prepare_ok, start_view_change or do_view_change.
// - Acknowledge only what is durable: a replica sends prepare_ok for (op, checksum) only while its journal holds that
//   prepare durably: a write of it completed (or the replica recovered it at a restart), and no later write to op
//   was submitted since. Optional (check_ack_durable): the end-to-end checkers catch the same bug, later.
//
// The first violation is kept (with the tick); later ones are counted.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "consensus/replica.h"
#include "simulation/workload.h"

namespace rill::simulation {

class checker {
 public:
  explicit checker(std::size_t replica_count, bool check_ack_durable = true)
      : replicas_(replica_count), check_ack_durable_(check_ack_durable) {}

  void on_applied(std::uint64_t tick, consensus::replica_t r, const consensus::header& h, payload_id payload,
                  std::uint64_t digest);
  void on_restart(consensus::replica_t r);
  // The replica's disk was lost (it restarts formatted anew, recovering): its durable state starts over.
  void on_wiped(consensus::replica_t r);
  // A checkpoint was installed (at a restart, or by state transfer): r's applied prefix is now up to at.op.
  void on_installed(std::uint64_t tick, consensus::replica_t r, const consensus::header& at, std::uint64_t digest);
  void on_persisted(std::uint64_t tick, consensus::replica_t r, const consensus::vsr_state& s);
  void on_sent(std::uint64_t tick, consensus::replica_t r, const consensus::message& m);
  // Replica r's journal: a write of (op, checksum) was submitted (what the slot held is no longer known durable), a
  // write completed (durable if ok), or a restart recovered these headers (all durable; nothing else is).
  void on_write_submitted(consensus::replica_t r, std::uint64_t op);
  void on_write_done(consensus::replica_t r, std::uint64_t op, consensus::checksum_t checksum, bool ok);
  void on_recovered(consensus::replica_t r, const std::vector<consensus::header>& journal);
  void on_ack(std::uint64_t tick, std::uint64_t client, const client_ack& ack);
  // The ledger of replica r gave op's payload offsets [base, base + records).
  void on_offsets(std::uint64_t tick, consensus::replica_t r, std::uint64_t op, payload_id payload, std::uint64_t base,
                  std::uint32_t records);
  // A record read from replica r's partition log (a consumer, or the final check).
  void on_consumed(std::uint64_t tick, consensus::replica_t r, std::uint64_t offset, payload_id payload,
                   std::uint32_t index);
  // Replica r's partition log shows everything below `committed` to consumers.
  void on_visible(std::uint64_t tick, consensus::replica_t r, std::uint64_t committed);
  // At the end: replica r's log holds records [0, end): every acknowledged offset must be below.
  void check_acks_visible(std::uint64_t tick, consensus::replica_t r, std::uint64_t end);
  void fail_partition(std::uint64_t tick, std::string what) { fail(tick, std::move(what)); }
  // A replica's state machine executed a payload a second time.
  void on_duplicate(std::uint64_t tick, consensus::replica_t r);
  void on_state(std::uint64_t tick, const consensus::replica& r);
  // At the end of the run: every acknowledged op is applied by each of `replicas` (those that converged).
  void check_acks_applied(std::uint64_t tick, const std::vector<const consensus::replica*>& replicas);

  [[nodiscard]] bool ok() const noexcept { return !violation_; }
  [[nodiscard]] const std::string& violation() const noexcept { return *violation_; }
  [[nodiscard]] std::uint64_t violations() const noexcept { return violations_; }
  [[nodiscard]] std::uint64_t committed() const noexcept { return canonical_.size(); }
  [[nodiscard]] std::uint64_t acks() const noexcept { return acked_.size(); }
  // Consumer-group coordinator commits accepted (side group 1's clients).
  [[nodiscard]] std::uint64_t group_commits() const noexcept { return group_commits_; }

 private:
  void fail(std::uint64_t tick, std::string what);

  struct replica_track {
    std::uint64_t applied = 0;  // this incarnation's applied prefix
    consensus::vsr_state durable;
    bool durable_known = false;
    std::uint32_t view = 0;
    std::uint64_t commit_max = 0;
    std::map<std::uint64_t, consensus::checksum_t> journal_durable;  // op -> the prepare the journal holds durably
  };
  std::vector<replica_track> replicas_;
  bool check_ack_durable_ = true;
  std::map<std::uint64_t, consensus::checksum_t> canonical_;  // op -> prepare checksum
  std::map<std::uint64_t, std::uint64_t> digests_;            // op -> state machine digest after it
  std::map<payload_id, std::uint64_t> payload_op_;            // payload -> op in the canonical history
  std::map<std::uint64_t, std::uint64_t> acked_;              // op -> client
  struct record_id {
    payload_id payload;
    std::uint32_t index = 0;
    friend bool operator==(const record_id&, const record_id&) = default;
  };
  std::map<std::uint64_t, record_id> offsets_;                 // offset -> the record it names
  std::uint64_t committed_offsets_ = 0;                        // offsets assigned by ops committed so far
  std::uint64_t acked_offset_end_ = 0;                         // one past the highest acknowledged offset
  std::map<std::uint64_t, std::uint64_t> consumer_positions_;  // client -> last acknowledged stored position
  // Consumer groups (coordinator acks): who each reply said owns a partition in a generation, and the accepted
  // commits per (group, partition) by op.
  void on_coordinator_ack(std::uint64_t tick, std::uint64_t client, const client_ack& ack);
  std::map<std::tuple<std::string, std::uint64_t, std::uint32_t>, std::string> group_owner_;
  std::map<std::pair<std::string, std::uint32_t>, std::map<std::uint64_t, std::uint64_t>> group_commits_by_op_;
  std::uint64_t group_commits_ = 0;
  std::optional<std::string> violation_;
  std::uint64_t violations_ = 0;
};

}  // namespace rill::simulation
