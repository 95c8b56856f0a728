#pragma once
// state_machine: what a VSR group replicates. The replica hands it committed prepares in op order, exactly once per
// op on each replica (a restart replays from the last checkpoint); it must be deterministic, so that every replica
// reaches the same state and produces the same reply bytes.
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
};

}  // namespace rill::consensus
