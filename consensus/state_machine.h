#pragma once
// state_machine: what a VSR group replicates. The replica hands it committed prepares in op order, exactly once per
// op on each replica (a restart replays from the last checkpoint); it must be deterministic, so that every replica
// reaches the same state and produces the same reply bytes. A replica that installs a checkpoint (its own at a
// restart, or a peer's in a state transfer) restores the state machine from it and applies only the ops after it.
//
// The replica owns sessions (client table); the state machine sees only user operations (operation >=
// operation_user_min).
//
// Two hooks serve state that is fed from prepares rather than from apply (a replicated partition: its batches are
// the prepares' bodies, written to the partition log as they are prepared, before they commit):
// - prepare(): the primary's say over an op before it enters the log. What depends on history not yet committed is
//   decided here, against the committed state plus the uncommitted ops the primary holds: a retried produce
//   becomes a body-less answer that names the op holding the batch, so no batch is in the log twice.
// - skip(): a committed user op that the replica does not execute (its session was evicted, or the request was
//   executed before). Its body is in the log all the same; a state machine whose state follows the log accounts for
//   it here (deterministically, like apply). No reply is made.
#include <cstddef>
#include <span>
#include <vector>

#include "consensus/message.h"

namespace rill::consensus {

class state_machine {
 public:
  virtual ~state_machine() = default;
  // Applies a committed prepare; returns the reply body sent to the client. Must not fail: whatever a request means,
  // its outcome (including "rejected") is part of the reply, decided the same way everywhere.
  virtual std::vector<std::byte> apply(const header& prepare, std::span<const std::byte> body) = 0;
  virtual void skip(const header& prepare, std::span<const std::byte> body) {
    (void)prepare;
    (void)body;
  }

  struct proposal {
    std::uint8_t operation = 0;
    std::vector<std::byte> body;
  };
  // Where a prepare is made: its op, the view it is prepared in, and the primary's tick count (the prepare header's
  // timestamp).
  struct prepare_context {
    std::uint64_t op = 0;
    view_t view{0};
    std::uint64_t ticks = 0;
  };
  // Called on the primary as it turns a request into the prepare of op `at.op`, when every op from the last one
  // applied here up to at.op - 1 is held with its body: `pending` (in op order). What it returns is replicated as
  // is, so it may stamp what only the primary decides (a partition's offsets, leader epoch and log-append time);
  // given the same arguments and state it decides the same way. Returns the operation (>= operation_user_min) and
  // body to prepare; by default the request's own.
  virtual proposal prepare(const header& request, const prepare_context& at, std::vector<std::byte> body,
                           std::span<const message* const> pending) {
    (void)at;
    (void)pending;
    return {request.operation, std::move(body)};
  }
  // Checkpoints: the whole state as bytes (deterministic: the same state gives the same bytes), and back. restore()
  // is given only bytes some replica's snapshot() produced (checksummed on disk and in transit); it returns false
  // when it cannot use them, and then leaves the state as it was.
  [[nodiscard]] virtual std::vector<std::byte> snapshot() const = 0;
  [[nodiscard]] virtual bool restore(std::span<const std::byte> bytes) = 0;
};

}  // namespace rill::consensus
