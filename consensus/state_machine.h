#pragma once
// state_machine: what a VSR group replicates. The replica hands it committed prepares in op order, exactly once per
// op on each replica (a restart replays from the last checkpoint); it must be deterministic, so that every replica
// reaches the same state and produces the same reply bytes. A replica that installs a checkpoint (its own at a
// restart, or a peer's in a state transfer) restores the state machine from it and applies only the ops after it.
//
// The replica owns sessions (client table); the state machine sees only user operations (operation >=
// operation_user_min).
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
  // Checkpoints: the whole state as bytes (deterministic: the same state gives the same bytes), and back. restore()
  // is given only bytes some replica's snapshot() produced (checksummed on disk and in transit); it returns false
  // when it cannot use them, and then leaves the state as it was.
  [[nodiscard]] virtual std::vector<std::byte> snapshot() const = 0;
  [[nodiscard]] virtual bool restore(std::span<const std::byte> bytes) = 0;
};

}  // namespace rill::consensus
