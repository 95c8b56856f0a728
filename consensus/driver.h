#pragma once
// driver: runs one replica of a VSR group. It feeds the replica its inputs (messages, ticks, storage completions)
// and executes every effect the replica returns: journal writes and reads, superblock persists and checkpoint writes
// through group_storage (io::engine underneath), sends through a transport, and replies, applies and installed
// checkpoints through the host's hooks. It is the one executor of effects: rilld's local group (local_group.h) and
// each replica of the simulator (simulation/cluster.h) run it, so the simulator tests the code that runs in
// production. No CAF, no thread, no clock: the host says when a tick has passed.
//
// Storage errors are values, and they fence: a failed journal write, superblock persist or checkpoint write stops
// the driver (an fsync that failed leaves the file's state unknown, so nothing it wrote may be acknowledged; only a
// restart, which reads back what is really there, may go on). A failed read is handed to the replica as "could not
// read" when the group has peers to repair from; alone, it fences too (a committed op that does not read back is
// lost). Once fenced, the driver feeds the replica nothing and executes nothing: completions still in flight are
// dropped, the hooks' fenced() is called once, and the host restarts the replica from storage or gives up.
//
// Storage that keeps state of its own beside the journal (partition_storage) is told what the replica applied and
// installed, and looks at the replica after each input (group_storage.h); a write it gave up (errc::superseded) is
// reported to the replica as not written, without a fence.
//
// Checkpoint gate: a host whose state machine keeps state outside the checkpoint bytes (a partition's records in
// its own log) says through hooks.checkpoint_gate, or its storage through durable_through(), how far that state is
// durable. A checkpoint is written only once
// the gate reaches its op; until then it is held (at most one: the replica writes one at a time) and retried at
// every input and at poke(). So a checkpoint never covers an op whose external state a restart would miss.
//
// Invariants (asserted): a completion is handed to the replica at most once and only while not fenced; in_flight()
// counts storage operations started and not completed; effects are executed in the order the replica returned them.
//
// Contract: single-threaded (the engine's completions and the host's calls on one thread). Hooks run inside the
// effect loop. One may resume a coroutine that feeds the driver again (local_group's reply hook wakes a submit,
// whose caller may submit the next): that nested input runs to completion, its effects executed, before the outer
// loop goes on with the effects it still had. The replica is never on the stack then (it returned its effects),
// so its state is consistent; only the order of effects across the two inputs interleaves. A hook must never
// destroy the driver. Destroy it once in_flight() is 0 (settle()), or after its storage has dropped every callback
// in flight (a simulated crash).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/async.h"
#include "base/expected.h"
#include "base/task.h"
#include "consensus/group_storage.h"
#include "consensus/replica.h"

namespace rill::consensus {

// Where the replica's messages to its peers go. Best effort: a message may be lost, delayed, duplicated or reordered
// (the protocol copes). send() must not call back into the driver.
class transport {
 public:
  virtual ~transport() = default;
  virtual void send(replica_t to, message m) = 0;
};

// What the host learns from the driver; every hook is optional.
struct driver_hooks {
  std::function<void(message)> reply;                         // to the client m.h.client names
  std::function<void(const header&)> applied;                 // an op applied on this replica
  std::function<void(const header&)> installed;               // a peer's checkpoint installed through this op
  std::function<void(const message&)> prepare;                // a prepare taken in: delivered, written or read back
  std::function<void(std::uint64_t op)> writing;              // a journal write of op is submitted
  std::function<void(std::uint64_t op, checksum_t)> written;  // a journal write is durable
  std::function<void(const vsr_state&)> persisted;            // a vsr_state is durable
  std::function<void(std::uint8_t slot, std::uint64_t op)> checkpointed;  // a checkpoint is durable
  std::function<std::uint64_t()> checkpoint_gate;  // external state durable through this op (unset: all)
  std::function<void(const error&)> fenced;        // the driver stopped at a storage failure
};

class driver {
 public:
  // Constructs the replica on what storage recovered (see replica's constructor); `sm` at its initial state, and
  // `sm`, `storage` and `net` (null for a one-replica group) outlive the driver.
  driver(const replica_options& options, state_machine& sm, recovered_state recovered, group_storage& storage,
         transport* net, driver_hooks hooks, replica_bugs bugs = {});
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  // Inputs. Ignored once fenced.
  void on_message(const message& m);
  void on_tick();
  // replica::hand_over: a controlled view change to `target`.
  void hand_over(view_t target);
  // The checkpoint gate moved: a held checkpoint may go now.
  void poke();
  // Stops the driver where it is: nothing more is executed or fed to the replica, completions are dropped. The one
  // call a hook or the transport may make into the driver (it only sets a flag the effect loop reads): for a host
  // that models a crash in the middle of an input (the simulator's crash right after an acknowledgement). The host
  // destroys the driver next, as at a crash.
  void halt() noexcept { halted_ = true; }

  [[nodiscard]] const class replica& replica() const noexcept { return *replica_; }
  [[nodiscard]] bool fenced() const noexcept { return fenced_.has_value(); }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  [[nodiscard]] bool checkpoint_held() const noexcept { return held_checkpoint_.has_value(); }
  // Until no storage operation is in flight.
  task<void> settle();

 private:
  void run(std::vector<effect>& effects);
  void execute(effect& e);
  void release_checkpoint();
  // After each input the replica took: storage looks at what it holds now (group_storage::replica_changed).
  void changed();
  void fence(error e);
  void started();
  void completed();
  // Wraps a completion: drops it once the driver is gone or fenced, counts it, then runs the rest.
  template <class T, class F>
  std::function<void(T)> completion(F f);

  group_storage* storage_;
  transport* net_;
  driver_hooks hooks_;
  std::unique_ptr<class replica> replica_;
  bool fence_on_read_error_;  // alone: nobody to repair a read from (see the header)
  std::optional<error> fenced_;
  bool halted_ = false;
  std::optional<checkpoint_effect> held_checkpoint_;
  std::size_t in_flight_ = 0;
  async_event idle_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // callbacks check it (a crash destroys the driver)
};

}  // namespace rill::consensus
