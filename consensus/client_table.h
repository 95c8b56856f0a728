#pragma once
// client_table: the replicated record of client sessions, so that a retried request is executed once and answered
// from the table.
//
// A client opens a session with a register request (request number 0); the session is named by the op that
// committed it. Each later request carries the next request number. The table keeps, per client, the last committed
// request number and its reply. It is part of the replicated state: every replica updates it at apply, in op order,
// so it is identical everywhere and a new primary answers retries exactly as the old one would have.
//
// Invariants:
// - At most clients_max sessions. Registering one more evicts the session whose last commit is the oldest (ties:
//   the lowest client id), the same choice on every replica.
// - A session's request number only grows.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "consensus/message.h"

namespace rill::consensus {

struct client_session {
  std::uint64_t session = 0;      // the op that registered it
  std::uint64_t request = 0;      // the last committed request number
  std::uint64_t last_commit = 0;  // the op of that request (eviction order)
  message reply;                  // the reply to that request
};

class client_table {
 public:
  explicit client_table(std::size_t clients_max);

  [[nodiscard]] const client_session* find(std::uint64_t client) const;
  // Records a committed register at `op`; returns the client evicted to make room, if any.
  std::optional<std::uint64_t> open(std::uint64_t client, std::uint64_t op, message reply);
  // Records a committed request. The session must exist and request must be above its last.
  void commit(std::uint64_t client, std::uint64_t request, std::uint64_t op, message reply);

  [[nodiscard]] std::size_t size() const noexcept { return sessions_.size(); }

  // For checkpoints: the table as bytes (u32 count, then per session client, session, request, last_commit as u64
  // and the encoded reply with its u32 length), and back. restore() checks every reply's checksums and the count
  // against clients_max; on failure (false) the table is unchanged.
  void encode(std::vector<std::byte>& out) const;
  [[nodiscard]] bool restore(std::span<const std::byte> bytes);
  [[nodiscard]] const std::map<std::uint64_t, client_session>& sessions() const noexcept { return sessions_; }

 private:
  std::size_t clients_max_;
  std::map<std::uint64_t, client_session> sessions_;
};

}  // namespace rill::consensus
