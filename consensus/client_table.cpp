#include "consensus/client_table.h"

#include "base/assert.h"

namespace rill::consensus {

const client_session* client_table::find(std::uint64_t client) const {
  auto it = sessions_.find(client);
  return it == sessions_.end() ? nullptr : &it->second;
}

std::optional<std::uint64_t> client_table::open(std::uint64_t client, std::uint64_t op, message reply) {
  std::optional<std::uint64_t> evicted;
  if (!sessions_.contains(client) && sessions_.size() >= clients_max_) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.last_commit < oldest->second.last_commit) {
        oldest = it;  // strict: ties keep the lowest client id (map order)
      }
    }
    evicted = oldest->first;
    sessions_.erase(oldest);
  }
  sessions_[client] = client_session{op, 0, op, std::move(reply)};
  return evicted;
}

void client_table::commit(std::uint64_t client, std::uint64_t request, std::uint64_t op, message reply) {
  auto it = sessions_.find(client);
  RILL_ASSERT(it != sessions_.end(), "commit for client {} without a session", client);
  RILL_ASSERT(request > it->second.request, "client {} request {} not above {}", client, request, it->second.request);
  it->second.request = request;
  it->second.last_commit = op;
  it->second.reply = std::move(reply);
}

}  // namespace rill::consensus
