#include "consensus/client_table.h"

#include "base/assert.h"
#include "base/endian.h"

namespace rill::consensus {

client_table::client_table(std::size_t clients_max) : clients_max_(clients_max) {
  RILL_ASSERT(clients_max_ >= 1, "a client table without room for a session");
}

const client_session* client_table::find(std::uint64_t client) const {
  auto it = sessions_.find(client);
  return it == sessions_.end() ? nullptr : &it->second;
}

std::optional<std::uint64_t> client_table::open(std::uint64_t client, std::uint64_t op, message reply) {
  RILL_ASSERT(op > 0, "a session is named by the op that registered it (op 0 is the root)");
  RILL_ASSERT(reply.h.cmd == command::reply);
  RILL_ASSERT(sessions_.size() <= clients_max_);
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
  RILL_ASSERT(sessions_.size() <= clients_max_, "{} sessions, at most {}", sessions_.size(), clients_max_);
  return evicted;
}

void client_table::commit(std::uint64_t client, std::uint64_t request, std::uint64_t op, message reply) {
  auto it = sessions_.find(client);
  RILL_ASSERT(it != sessions_.end(), "commit for client {} without a session", client);
  RILL_ASSERT(request > it->second.request, "client {} request {} not above {}", client, request, it->second.request);
  RILL_ASSERT(op > it->second.last_commit, "client {} committed at op {} after op {}", client, op,
              it->second.last_commit);
  RILL_ASSERT(reply.h.cmd == command::reply);
  it->second.request = request;
  it->second.last_commit = op;
  it->second.reply = std::move(reply);
}

void client_table::encode(std::vector<std::byte>& out) const {
  RILL_ASSERT(sessions_.size() <= clients_max_);
  const std::size_t before = out.size();
  auto put64 = [&](std::uint64_t v) { append_le<std::uint64_t>(out, v); };
  auto put32 = [&](std::uint32_t v) { append_le<std::uint32_t>(out, v); };
  put32(static_cast<std::uint32_t>(sessions_.size()));
  for (const auto& [client, s] : sessions_) {
    put64(client);
    put64(s.session);
    put64(s.request);
    put64(s.last_commit);
    const auto reply = consensus::encode(s.reply);
    put32(static_cast<std::uint32_t>(reply.size()));
    out.insert(out.end(), reply.begin(), reply.end());
  }
  RILL_ASSERT(out.size() - before >= 4 + sessions_.size() * 36, "the encoding restore() expects");
}

bool client_table::restore(std::span<const std::byte> bytes) {
  std::size_t at = 0;
  auto need = [&](std::size_t n) { return bytes.size() - at >= n; };
  if (!need(4)) {
    return false;
  }
  const std::uint32_t count = load_le<std::uint32_t>(bytes.data());
  at = 4;
  if (count > clients_max_) {
    return false;
  }
  std::map<std::uint64_t, client_session> sessions;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!need(36)) {
      return false;
    }
    const std::byte* p = bytes.data() + at;
    const std::uint64_t client = load_le<std::uint64_t>(p);
    client_session s;
    s.session = load_le<std::uint64_t>(p + 8);
    s.request = load_le<std::uint64_t>(p + 16);
    s.last_commit = load_le<std::uint64_t>(p + 24);
    const std::uint32_t length = load_le<std::uint32_t>(p + 32);
    at += 36;
    if (!need(length)) {
      return false;
    }
    auto reply = decode(bytes.subspan(at, length));
    if (!reply || reply->h.cmd != command::reply) {
      return false;
    }
    at += length;
    s.reply = std::move(*reply);
    if (!sessions.emplace(client, std::move(s)).second) {
      return false;
    }
  }
  if (at != bytes.size()) {
    return false;
  }
  RILL_ASSERT(sessions.size() == count);
  RILL_ASSERT(sessions.size() <= clients_max_);
  sessions_ = std::move(sessions);
  return true;
}

}  // namespace rill::consensus
