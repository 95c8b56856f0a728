// group_state: membership, sticky cooperative assignment and offsets of one consumer group.
#include "actors/group_state.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "net/proto/coordinator.pb.h"
#include "net/proto/metadata.pb.h"
#include "net/status.h"

namespace rill::actors {
namespace {

class group_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "group"; }
  std::string message(int c) const override {
    switch (static_cast<group_errc>(c)) {
      case group_errc::unknown_member:
        return "unknown member";
      case group_errc::stale_generation:
        return "stale generation";
      case group_errc::not_owner:
        return "partition not owned by this member";
      case group_errc::bad_partition:
        return "no such partition";
      case group_errc::offset_regression:
        return "commit below the committed offset";
      case group_errc::group_full:
        return "the group is full";
      case group_errc::not_empty:
        return "the group has members";
    }
    return "group error";
  }
};

rill::unexpected fail(group_errc e, std::string detail) {
  return rill::unexpected(make_error_code(e), std::move(detail));
}

}  // namespace

const std::error_category& group_category() noexcept {
  static const group_category_impl c;
  return c;
}

group_state::group_state(std::uint32_t partitions, assignment_strategy strategy,
                         std::chrono::milliseconds session_timeout)
    : strategy_(strategy),
      session_timeout_(session_timeout),
      owner_(partitions),
      target_(partitions),
      revoke_deadline_(partitions),
      acquired_(partitions, 0),
      created_(partitions, 0) {
  RILL_ASSERT(session_timeout.count() > 0);
}

expected<group_state::joined> group_state::join(const std::optional<std::string>& member_id, time_point now,
                                                connection_id conn) {
  now_ = std::max(now_, now);
  if (member_id) {
    if (member_id->empty()) {
      return fail(group_errc::unknown_member, "a member id, when given, is not empty");
    }
    auto it = members_.find(*member_id);
    if (it != members_.end()) {
      // A rejoin of a live member (it lost track of the generation): same membership, nothing moves.
      it->second.expires_at = now + session_timeout_;
      it->second.conn = conn;
      return joined{*member_id, generation_};
    }
  }
  if (members_.size() >= members_max) {
    return fail(group_errc::group_full, fmt::format("the group has {} members, the most it takes", members_max));
  }
  std::string id = member_id ? *member_id : fmt::format("member-{}", next_member_++);
  while (!member_id && members_.contains(id)) {
    id = fmt::format("member-{}", next_member_++);
  }
  members_.emplace(id, member{now + session_timeout_, conn});
  rebalance();
  return joined{id, generation_};
}

expected<void> group_state::leave(const std::string& id) {
  if (!members_.contains(id)) {
    return fail(group_errc::unknown_member, id);
  }
  remove_member(id);
  rebalance();
  return {};
}

void group_state::remove_member(const std::string& id) {
  members_.erase(id);
  for (auto& o : owner_) {
    if (o == id) {
      o.reset();  // a member that is gone reads nothing: its partitions are free at once
    }
  }
}

std::vector<std::string> group_state::disconnected(connection_id conn) {
  std::vector<std::string> gone;
  if (conn == 0) {
    return gone;
  }
  for (const auto& [id, m] : members_) {
    if (m.conn == conn) {
      gone.push_back(id);
    }
  }
  for (const auto& id : gone) {
    remove_member(id);
  }
  if (!gone.empty()) {
    rebalance();
  }
  return gone;
}

expected<group_state::member_view> group_state::heartbeat(const std::string& id, time_point now,
                                                          std::span<const std::uint32_t> released, connection_id conn) {
  now_ = std::max(now_, now);
  auto it = members_.find(id);
  if (it == members_.end()) {
    return fail(group_errc::unknown_member, id);
  }
  it->second.expires_at = now + session_timeout_;
  if (conn != 0) {
    it->second.conn = conn;
  }
  std::vector<std::uint32_t> moving;
  for (const auto p : released) {
    if (p < owner_.size() && owner_[p] == id && target_[p] != id &&
        std::find(moving.begin(), moving.end(), p) == moving.end()) {
      moving.push_back(p);
    }
  }
  hand_over(moving);
  return view_of(id);
}

expected<group_state::member_view> group_state::assignment(const std::string& id) const {
  if (!members_.contains(id)) {
    return fail(group_errc::unknown_member, id);
  }
  return view_of(id);
}

group_state::member_view group_state::view_of(const std::string& id) const {
  member_view v;
  v.generation = generation_;
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    if (owner_[p] == id) {
      v.owned.push_back(p);
      v.acquired.push_back(acquired_[p]);
      if (target_[p] != id) {
        v.revoking.push_back(p);
      }
    }
  }
  return v;
}

expected<void> group_state::release(const std::string& id, std::uint64_t generation,
                                    std::span<const std::uint32_t> partitions) {
  RILL_TRY_VOID(check_member(id, generation));
  for (const auto p : partitions) {
    if (p >= owner_.size()) {
      return fail(group_errc::bad_partition, fmt::format("partition {} of {}", p, owner_.size()));
    }
    if (owner_[p] != id || target_[p] == id) {
      return fail(group_errc::not_owner, fmt::format("partition {} is not being revoked from {}", p, id));
    }
  }
  std::vector<std::uint32_t> moving(partitions.begin(), partitions.end());
  std::sort(moving.begin(), moving.end());
  moving.erase(std::unique(moving.begin(), moving.end()), moving.end());
  hand_over(moving);
  return {};
}

std::vector<std::string> group_state::expire(time_point now) {
  now_ = std::max(now_, now);
  std::vector<std::string> gone;
  for (const auto& [id, m] : members_) {
    if (m.expires_at <= now) {
      gone.push_back(id);
    }
  }
  for (const auto& id : gone) {
    remove_member(id);
  }
  if (!gone.empty()) {
    rebalance();
  }
  // A live owner that did not give back a revoked partition in time loses it anyway: from now on its reads and
  // commits of it are refused, so the hand-over is as safe as a release.
  std::vector<std::uint32_t> forced;
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    if (owner_[p] && owner_[p] != target_[p] && revoke_deadline_[p] && *revoke_deadline_[p] <= now) {
      forced.push_back(p);
    }
  }
  hand_over(forced);
  return gone;
}

void group_state::hand_over(const std::vector<std::uint32_t>& partitions) {
  if (partitions.empty()) {
    return;
  }
  // A new generation first: the new owners read under a generation their old owners never had.
  ++generation_;
  for (const auto p : partitions) {
    RILL_ASSERT(owner_[p] && target_[p] && owner_[p] != target_[p]);
    owner_[p] = target_[p];  // the target is a member (targets are recomputed whenever members change)
    acquired_[p] = generation_;
  }
  note_revocations();
}

void group_state::note_revocations() {
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    if (owner_[p] && owner_[p] != target_[p]) {
      if (!revoke_deadline_[p]) {
        revoke_deadline_[p] = now_ + session_timeout_;
      }
    } else {
      revoke_deadline_[p].reset();
    }
  }
}

expected<void> group_state::check_member(const std::string& id, std::uint64_t generation) const {
  if (!members_.contains(id)) {
    return fail(group_errc::unknown_member, id);
  }
  if (generation != generation_) {
    return fail(
        group_errc::stale_generation,
        fmt::format("generation {} of member {} is not the group's current one: heartbeat for it", generation, id));
  }
  return {};
}

expected<void> group_state::check_read(const std::string& id, std::uint64_t generation, std::uint32_t p) const {
  RILL_TRY_VOID(check_member(id, generation));
  if (p >= owner_.size()) {
    return fail(group_errc::bad_partition, fmt::format("partition {} of {}", p, owner_.size()));
  }
  if (owner_[p] != id) {
    return fail(group_errc::not_owner, fmt::format("partition {} is not owned by {}", p, id));
  }
  return {};
}

bool group_state::still_owns(const std::string& id, std::uint64_t generation, std::uint32_t p) const {
  return p < owner_.size() && owner_[p] == id && acquired_[p] <= generation;
}

expected<void> group_state::commit(const std::string& id, std::uint64_t generation, std::uint32_t p,
                                   std::uint64_t offset) {
  RILL_TRY_VOID(check_read(id, generation, p));
  auto it = committed_.find(p);
  if (it != committed_.end() && offset < it->second) {
    return fail(group_errc::offset_regression,
                fmt::format("partition {}: commit of {} below the committed {}", p, offset, it->second));
  }
  committed_[p] = offset;
  return {};
}

expected<void> group_state::reset(std::uint32_t p, std::uint64_t offset) {
  if (!members_.empty()) {
    return fail(group_errc::not_empty,
                fmt::format("the group has {} members: offsets are reset only while it has none", members_.size()));
  }
  if (p >= owner_.size()) {
    return fail(group_errc::bad_partition, fmt::format("partition {} of {}", p, owner_.size()));
  }
  committed_[p] = offset;
  return {};
}

void group_state::set_partitions_created(std::span<const std::uint64_t> created) {
  RILL_ASSERT(created.size() == created_.size(), "{} incarnations for {} partitions", created.size(), created_.size());
  created_.assign(created.begin(), created.end());
}

void group_state::resize(std::uint32_t partitions, std::span<const std::uint64_t> created, bool keep_replaced) {
  RILL_ASSERT(created.empty() || created.size() == partitions, "{} incarnations for {} partitions", created.size(),
              partitions);
  for (std::uint32_t p = 0; p < std::min<std::size_t>(partitions, owner_.size()) && !created.empty(); ++p) {
    if (created_[p] != 0 && created[p] != 0 && created_[p] != created[p] && !keep_replaced) {
      // Another partition under the same id: what the group had of the old one is not its.
      owner_[p].reset();
      target_[p].reset();
      revoke_deadline_[p].reset();
      acquired_[p] = 0;
      committed_.erase(p);
    }
  }
  created_.resize(partitions, 0);
  if (!created.empty()) {
    created_.assign(created.begin(), created.end());
  }
  owner_.resize(partitions);
  target_.resize(partitions);
  revoke_deadline_.resize(partitions);
  acquired_.resize(partitions);
  committed_.erase(committed_.lower_bound(partitions), committed_.end());
  rebalance();
}

std::vector<group_state::member_info> group_state::member_list() const {
  std::vector<member_info> out;
  for (const auto& [id, m] : members_) {
    out.push_back(member_info{id, m.expires_at});
  }
  return out;
}

std::string group_state::serialize() const {
  proto::GroupStateFile f;
  f.set_generation(generation_);
  f.set_next_member(next_member_);
  f.set_partitions(partitions());
  for (const auto& [id, m] : members_) {
    f.add_members(id);
  }
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    const auto c = committed(p);
    if (!owner_[p] && !c) {
      continue;
    }
    auto* slot = f.add_slots();
    slot->set_partition_id(p);
    if (owner_[p]) {
      slot->set_owner(*owner_[p]);
      slot->set_acquired(acquired_[p]);
    }
    if (c) {
      slot->set_committed(*c);
    }
  }
  return f.SerializeAsString();
}

expected<group_state> group_state::restore(std::string_view bytes, assignment_strategy strategy,
                                           std::chrono::milliseconds session_timeout, std::uint32_t partitions,
                                           time_point now) {
  proto::GroupStateFile f;
  if (!f.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return rill::unexpected(make_error_code(net::status::storage_error), "the group state does not parse");
  }
  group_state g(partitions, strategy, session_timeout);
  g.now_ = now;
  g.generation_ = f.generation();
  g.next_member_ = std::max<std::uint64_t>(f.next_member(), 1);
  for (const auto& id : f.members()) {
    if (!id.empty() && g.members_.size() < members_max) {
      g.members_.emplace(id, member{now + g.session_timeout_, 0});
    }
  }
  for (const auto& slot : f.slots()) {
    if (slot.partition_id() >= partitions) {
      continue;  // partitions deleted since
    }
    if (slot.has_owner() && g.members_.contains(slot.owner())) {
      g.owner_[slot.partition_id()] = slot.owner();
      g.acquired_[slot.partition_id()] = std::min(slot.acquired(), g.generation_);
    }
    if (slot.has_committed()) {
      g.committed_[slot.partition_id()] = slot.committed();
    }
  }
  // The saved targets are recomputed (sticky: owners keep their shares); when the partition count changed, or the
  // file was written mid-revocation, this is a new generation like any other change.
  const auto before = g.generation_;
  g.rebalance();
  if (f.partitions() == partitions && g.stable()) {
    g.generation_ = before;  // nothing moved: members go on with the generation they know
  }
  return g;
}

void group_state::refresh(time_point now) {
  now_ = std::max(now_, now);
  for (auto& [id, m] : members_) {
    m.expires_at = std::max(m.expires_at, now_ + session_timeout_);
  }
  for (auto& d : revoke_deadline_) {
    if (d) {
      d = std::max(*d, now_ + session_timeout_);  // (an owner asked to give back has a whole timeout to hear it)
    }
  }
}

void group_state::save_whole(proto::GroupStateWhole& out) const {
  out.Clear();
  out.set_strategy(strategy_ == assignment_strategy::round_robin ? 1 : 0);
  out.set_session_timeout_ms(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(session_timeout_).count()));
  out.set_generation(generation_);
  out.set_next_member(next_member_);
  out.set_now_ns(now_.count());
  out.set_incarnation(incarnation_);
  for (const auto& [id, m] : members_) {
    auto* pm = out.add_members();
    pm->set_id(id);
    pm->set_expires_at_ns(m.expires_at.count());
    pm->set_conn(m.conn);
  }
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    auto* slot = out.add_slots();
    if (owner_[p]) {
      slot->set_owner(*owner_[p]);
    }
    if (target_[p]) {
      slot->set_target(*target_[p]);
    }
    if (auto c = committed(p)) {
      slot->set_committed(*c);
    }
    if (revoke_deadline_[p]) {
      slot->set_revoke_deadline_ns(revoke_deadline_[p]->count());
    }
    slot->set_acquired(acquired_[p]);
  }
  if (std::any_of(created_.begin(), created_.end(), [](std::uint64_t c) { return c != 0; })) {
    for (const std::uint64_t c : created_) {
      out.add_partitions_created(c);
    }
  }
}

expected<group_state> group_state::load_whole(const proto::GroupStateWhole& in) {
  auto bad = [](std::string what) {
    return rill::unexpected(std::make_error_code(std::errc::invalid_argument), "group state: " + std::move(what));
  };
  if (in.strategy() > 1 || in.session_timeout_ms() == 0 || in.session_timeout_ms() > 86'400'000 ||
      in.members_size() > static_cast<int>(members_max)) {
    return bad("strategy, session timeout or member count out of range");
  }
  group_state g(static_cast<std::uint32_t>(in.slots_size()),
                in.strategy() == 1 ? assignment_strategy::round_robin : assignment_strategy::range,
                std::chrono::milliseconds(in.session_timeout_ms()));
  g.generation_ = in.generation();
  g.next_member_ = std::max<std::uint64_t>(in.next_member(), 1);
  g.incarnation_ = in.incarnation();
  g.now_ = time_point(in.now_ns());
  for (const auto& m : in.members()) {
    if (m.id().empty() || !g.members_.emplace(m.id(), member{time_point(m.expires_at_ns()), m.conn()}).second) {
      return bad("an empty or repeated member id");
    }
  }
  for (int i = 0; i < in.slots_size(); ++i) {
    const auto& slot = in.slots(i);
    const auto p = static_cast<std::uint32_t>(i);
    if ((slot.has_owner() && !g.members_.contains(slot.owner())) ||
        (slot.has_target() && !g.members_.contains(slot.target())) || slot.acquired() > g.generation_) {
      return bad(fmt::format("partition {}: an owner or target that is not a member, or a generation ahead", p));
    }
    if (slot.has_owner()) {
      g.owner_[p] = slot.owner();
    }
    if (slot.has_target()) {
      g.target_[p] = slot.target();
    }
    if (slot.has_committed()) {
      g.committed_[p] = slot.committed();
    }
    if (slot.has_revoke_deadline_ns()) {
      g.revoke_deadline_[p] = time_point(slot.revoke_deadline_ns());
    }
    g.acquired_[p] = slot.acquired();
  }
  if (in.partitions_created_size() != 0) {
    if (in.partitions_created_size() != in.slots_size()) {
      return bad(
          fmt::format("{} partition incarnations for {} partitions", in.partitions_created_size(), in.slots_size()));
    }
    g.created_.assign(in.partitions_created().begin(), in.partitions_created().end());
  }
  return g;
}

std::optional<std::uint64_t> group_state::committed(std::uint32_t p) const {
  auto it = committed_.find(p);
  return it == committed_.end() ? std::nullopt : std::optional(it->second);
}

std::vector<std::optional<std::uint64_t>> group_state::committed_offsets() const {
  std::vector<std::optional<std::uint64_t>> out(partitions());
  for (const auto& [p, offset] : committed_) {
    RILL_ASSERT(p < out.size(), "offset of partition {} of {}", p, out.size());
    out[p] = offset;
  }
  return out;
}

std::optional<std::string> group_state::owner(std::uint32_t p) const {
  RILL_ASSERT(p < owner_.size());
  return owner_[p];
}

std::optional<std::string> group_state::target(std::uint32_t p) const {
  RILL_ASSERT(p < target_.size());
  return target_[p];
}

bool group_state::stable() const noexcept {
  return owner_ == target_;
}

std::optional<group_state::time_point> group_state::next_deadline() const {
  std::optional<time_point> earliest;
  for (const auto& [id, m] : members_) {
    if (!earliest || m.expires_at < *earliest) {
      earliest = m.expires_at;
    }
  }
  for (const auto& d : revoke_deadline_) {
    if (d && (!earliest || *d < *earliest)) {
      earliest = *d;
    }
  }
  return earliest;
}

void group_state::rebalance() {
  ++generation_;
  target_ = compute_target();
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    if (!owner_[p]) {
      owner_[p] = target_[p];  // free: hand it over now
      acquired_[p] = generation_;
    }
    // Owned by someone else than its target: revoking until released (or its owner is gone, or the revocation
    // times out).
  }
  note_revocations();
}

std::vector<std::optional<std::string>> group_state::compute_target() const {
  const auto n = static_cast<std::uint32_t>(owner_.size());
  std::vector<std::optional<std::string>> out(n);
  if (members_.empty() || n == 0) {
    return out;
  }
  std::vector<std::string> ids;
  for (const auto& [id, m] : members_) {
    ids.push_back(id);
  }
  const auto m = static_cast<std::uint32_t>(ids.size());
  const std::uint32_t base = n / m;
  const std::uint32_t extra = n % m;

  // Where the strategy alone would put each partition (the ideal member index).
  auto ideal = [&](std::uint32_t p) -> std::uint32_t {
    if (strategy_ == assignment_strategy::round_robin) {
      return p % m;
    }
    // range: members 0..extra-1 take base + 1 contiguous partitions, the others base.
    const std::uint32_t big = extra * (base + 1);
    return p < big ? p / (base + 1) : extra + (p - big) / std::max<std::uint32_t>(base, 1);
  };

  // Shares: the members that own the most now get the larger shares (fewer moves); ties by id order.
  std::map<std::string, std::uint32_t> index;
  for (std::uint32_t i = 0; i < m; ++i) {
    index.emplace(ids[i], i);
  }
  std::vector<std::uint32_t> owned_now(m, 0);
  for (const auto& o : owner_) {
    if (o) {
      ++owned_now[index.at(*o)];  // owners are members (removed members' partitions were freed)
    }
  }
  std::vector<std::uint32_t> order(m);
  for (std::uint32_t i = 0; i < m; ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return owned_now[a] > owned_now[b]; });
  std::vector<std::uint32_t> quota(m, base);
  for (std::uint32_t k = 0; k < extra; ++k) {
    quota[order[k]] = base + 1;
  }

  std::vector<std::uint32_t> given(m, 0);
  // 1. Sticky: a member keeps what it owns, up to its share (partitions its strategy would give it first).
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t p = 0; p < n; ++p) {
      if (out[p] || !owner_[p]) {
        continue;
      }
      const auto i = index.at(*owner_[p]);
      if ((pass == 0) != (ideal(p) == i) || given[i] >= quota[i]) {
        continue;
      }
      out[p] = ids[i];
      ++given[i];
    }
  }
  // 2. The rest: to the strategy's member when it has room, then to whoever has room, in id order.
  for (std::uint32_t p = 0; p < n; ++p) {
    const auto i = ideal(p);
    if (!out[p] && given[i] < quota[i]) {
      out[p] = ids[i];
      ++given[i];
    }
  }
  std::uint32_t next = 0;
  for (std::uint32_t p = 0; p < n; ++p) {
    if (out[p]) {
      continue;
    }
    while (given[next] >= quota[next]) {
      ++next;
    }
    out[p] = ids[next];
    ++given[next];
  }
  return out;
}

void group_state::check_invariants() const {
  RILL_ASSERT(owner_.size() == target_.size());
  RILL_ASSERT(created_.size() == owner_.size(), "{} incarnations for {} partitions", created_.size(), owner_.size());
  std::map<std::string, std::uint32_t> counts;
  for (std::uint32_t p = 0; p < owner_.size(); ++p) {
    if (owner_[p]) {
      RILL_ASSERT(members_.contains(*owner_[p]), "partition {} owned by {}, not a member", p, *owner_[p]);
      ++counts[*owner_[p]];
    }
    if (target_[p]) {
      RILL_ASSERT(members_.contains(*target_[p]), "partition {} targeted at {}, not a member", p, *target_[p]);
    } else {
      RILL_ASSERT(members_.empty(), "partition {} has no target while the group has members", p);
    }
  }
  if (stable() && !members_.empty()) {
    const auto n = static_cast<std::uint32_t>(owner_.size());
    const auto m = static_cast<std::uint32_t>(members_.size());
    for (const auto& [id, mem] : members_) {
      const auto c = counts.contains(id) ? counts.at(id) : 0;
      RILL_ASSERT(c == n / m || c == n / m + 1, "member {} owns {} of {} partitions with {} members", id, c, n, m);
    }
  }
}

}  // namespace rill::actors
