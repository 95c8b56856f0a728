#pragma once
// cluster_group: this node's replica of a VSR group that spans several nodes (rilld's metadata group in a cluster),
// and this node's one client session to it. The replica runs in a driver (driver.h) over journal_storage in one
// directory, hosted by the node's group_host (group_host.h), which carries its messages over the replica plane.
// What is its own: the session through which this node submits, whichever replica is primary.
//
// Session: one per node and start (client id = node id << 48 | a number drawn at each start, so a restarted node
// never reuses a session whose request numbers it forgot). It registers, then sends one request at a time, to the
// node of the primary of the view its own replica is in; a request not answered within request_timeout_ticks is
// sent again with the same request number, to every member after the first retry. The client table deduplicates:
// a retried request that a primary committed before it failed is answered from the table, applied once. A reply
// names the op that committed it (submitted::op). An eviction (the table forgot the session) opens a new session
// and fails the submit with unavailable: whether the request ran before cannot be told, so it is not sent again.
//
// Replies for other nodes' sessions (this replica is their primary) go back to them over the plane; the owner
// hands replies that arrive from the plane to on_client_message().
//
// Recovery is the replica's own (a restarted replica catches up from its peers; a member formatted by
// `rilld recover` votes for nothing until it has caught up). open() does not wait for the group to be up: a submit
// waits (and retries) until some primary answers.
//
// Errors are values: a storage failure fences the replica (driver.h) and every submit then fails with it; a submit
// not answered within submit_timeout_ticks fails with unavailable (the change may still commit later: a retry of
// the same change finds it made, as with any client of a broker).
//
// Contract: single-threaded, on the engine's thread, like the driver and the host. One submit at a time (a second
// is refused: overloaded). close() before destroying it: it answers a submit or apply wait in flight (closed,
// false) and refuses later ones.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/async.h"
#include "base/expected.h"
#include "base/random.h"
#include "base/task.h"
#include "consensus/driver.h"
#include "consensus/group_host.h"
#include "consensus/group_storage.h"
#include "storage/io/engine.h"

namespace rill::consensus {

inline constexpr unsigned cluster_session_node_shift = 48;
// The node whose session a client id is.
[[nodiscard]] inline constexpr std::uint64_t node_of_client(std::uint64_t client) noexcept {
  return client >> cluster_session_node_shift;
}

struct cluster_group_options {
  std::uint64_t cluster = 0;  // the group's identity in its messages
  group_t group{0};
  std::vector<node_t> members;  // every member's node id, ascending; replica r runs on members[r]
  node_t self;
  bool recovering = false;  // the directory is new and this member lost its data (`rilld recover`)
  // The incarnation a superblock this open creates starts with (vsr_state::incarnation): rilld gives a recovering
  // member the wall clock in ms, a floor under the one it takes when it has caught up.
  std::uint64_t incarnation = 0;
  journal_options journal{1024, 64 * 1024};
  std::uint64_t snapshot_bytes_max = 256 * 1024 * 1024;
  std::uint64_t snapshot_reserved_bytes = 4 * 1024 * 1024;
  std::uint64_t checkpoint_interval = 0;  // 0: slot_count / 4
  std::uint64_t seed = 0;                 // drawn at each start (the session number, the replica's jitter)
  std::uint32_t request_timeout_ticks = 20;
  std::uint32_t submit_timeout_ticks = 1000;
  std::uint32_t clients_max = 64;
  replica_options replica;  // timeouts; cluster, replica, replica_count and seed are set from the above
};

// What a submit got: the state machine's reply, and the op that committed it (read-your-writes: a node serves a
// request that names op N once it has applied N).
struct submitted {
  std::vector<std::byte> reply;
  std::uint64_t op = 0;
  bool evicted = false;  // (internal: the session was evicted; submit() registers anew)
};

class cluster_group {
 public:
  // Opens (creating when missing) dir's journal_storage and builds the replica; joins `host` as options.group and
  // attaches. `sm` at its initial state; `sm`, `host` and `net` outlive the group. `hooks.reply` is the group's own.
  static task<expected<std::unique_ptr<cluster_group>>> open(storage::io::engine& e, std::string dir, state_machine& sm,
                                                             cluster_group_options options, group_host& host,
                                                             host_transport& net, driver_hooks hooks);
  ~cluster_group();

  // Commits one operation through this node's session; returns the reply once committed and applied by the primary.
  task<expected<submitted>> submit(std::uint8_t operation, std::vector<std::byte> body);
  // A reply or eviction for a session of this node, from the plane.
  void on_client_message(const message& m);
  // A tick passed (the host ticks the replica; this ticks the session's retries).
  void tick();
  // Waits until the replica here has applied `op` (or the timeout passes: false).
  task<bool> applied_through(std::uint64_t op, std::uint32_t timeout_ticks);
  task<expected<void>> close();

  [[nodiscard]] const class replica& replica() const noexcept { return driver_->replica(); }
  [[nodiscard]] node_t primary_node() const;
  [[nodiscard]] std::uint64_t body_bytes_max() const noexcept {
    return options_.journal.message_size_max - header::encoded_size;
  }

 private:
  cluster_group(cluster_group_options o, group_host& host, host_transport& net)
      : options_(std::move(o)), host_(host), net_(net), rng_(options_.seed) {}
  void on_reply(message m);
  void send_request(bool everyone);
  task<expected<submitted>> request(std::uint8_t operation, std::vector<std::byte> body);
  void new_session();
  void wake_applied(std::uint64_t op);
  // Fenced or closing: the submit and every apply wait in flight end now (their callers see why).
  void wake_all();

  cluster_group_options options_;
  group_host& host_;
  host_transport& net_;
  prng rng_;
  std::unique_ptr<journal_storage> storage_;
  std::unique_ptr<driver> driver_;
  std::function<void(const header&)> applied_hook_;
  std::uint64_t client_ = 0;
  std::uint64_t request_ = 0;  // the last request number used
  bool registered_ = false;
  struct waiter {
    message m;  // the request, resent as is
    std::optional<message> answer;
    std::uint64_t sent_at = 0;
    std::uint64_t started_at = 0;
    std::uint32_t sends = 0;
    async_event done;
  };
  waiter* waiting_ = nullptr;
  struct apply_waiter {
    std::uint64_t op = 0;
    std::uint64_t deadline = 0;
    bool reached = false;
    async_event done;
  };
  std::vector<apply_waiter*> apply_waiters_;
  std::uint64_t ticks_ = 0;
  std::optional<error> fenced_;
  bool closed_ = false;  // close() began: submits are refused, waiters answered
};

}  // namespace rill::consensus
