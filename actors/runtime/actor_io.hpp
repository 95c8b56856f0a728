#pragma once
// actor_io: the io::engine an actor hands to its storage code. Submissions go to the actor's home shard ring;
// every completion comes back as an (io_done_atom, request) message to the actor, so storage coroutines resume
// inside the actor's handler, metered and ordered with its other messages, never beside it.
//
// Contract: construct on the actor's home shard (in the actor's constructor or handler); the actor handles io_done
// with io_completion (its typed interface lists io_done_signature, an internal message no other actor may send);
// the actor closes what it opened before it quits. If the actor is gone when a completion arrives, the completion is
// dropped (the request's frame is leaked rather than used after free).
#include <caf/all.hpp>

#include "actors/runtime/shard.h"
#include "storage/io/engine.h"

namespace rill::actors {

using io_done_atom = caf::atom_constant<caf::atom("io_done")>;

class actor_io final : public storage::io::engine, public storage::io::completion_router {
 public:
  explicit actor_io(caf::local_actor* owner);
  ~actor_io() override = default;

  void submit(storage::io::request& r) override;
  std::size_t poll(bool wait) override;  // never: the shard drives the ring
  [[nodiscard]] std::size_t in_flight() const override { return in_flight_; }
  [[nodiscard]] const char* name() const override { return "actor"; }

  void route(storage::io::request& r) override;
  // Runs the completion of `r` (what the io_done handler calls).
  void deliver(storage::io::request& r);

 private:
  caf::weak_actor_ptr owner_;
  shard* shard_;
  std::size_t in_flight_ = 0;
};

// The handler every actor that owns an actor_io adds to its behaviors (a callable, so that typed behaviors take it
// as one of their handlers): runs the completion of the request the message carries.
struct io_completion {
  actor_io* io;
  void operator()(io_done_atom, std::uint64_t request) const;
};

// The internal message an actor with an actor_io adds to its typed interface.
using io_done_signature = caf::reacts_to<io_done_atom, std::uint64_t>;

}  // namespace rill::actors
