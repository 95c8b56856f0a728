#include "consensus/group_host.h"

#include <fmt/core.h>

#include <algorithm>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/errc.h"

namespace rill::consensus {
namespace {
constexpr std::size_t head_bytes = 48;
constexpr std::size_t entry_bytes = 48;
constexpr std::uint64_t heartbeat_checksum_domain = 5;
static_assert(head_bytes >= 16 + 8 + 4 + 4 + 8);
static_assert(entry_bytes >= 8 + 4 + 4 + 8 + 16);

rill::unexpected bad(std::string detail) {
  return storage::make_unexpected(storage::errc::corrupt_data, "node heartbeat: " + std::move(detail));
}
}  // namespace

// Head: 0 checksum (16, of bytes 16..end), 16 cluster, 24 from, 28 count, 32 sequence, 40 reserved (8, zero).
// Entry: 0 group, 8 view, 12 reserved (4, zero), 16 commit, 24 checksum (16), 40 reserved (8, zero).
std::vector<std::byte> encode(const node_heartbeat& beat) {
  RILL_ASSERT(beat.entries.size() <= groups_per_host_max);
  std::vector<std::byte> out(head_bytes + entry_bytes * beat.entries.size());
  store_le<std::uint64_t>(out.data() + 16, beat.cluster);
  store_le<std::uint32_t>(out.data() + 24, beat.from.value());
  store_le<std::uint32_t>(out.data() + 28, static_cast<std::uint32_t>(beat.entries.size()));
  store_le<std::uint64_t>(out.data() + 32, beat.sequence);
  std::byte* p = out.data() + head_bytes;
  for (const auto& e : beat.entries) {
    store_le<std::uint64_t>(p, e.group.value());
    store_le<std::uint32_t>(p + 8, e.beat.view.value());
    store_le<std::uint64_t>(p + 16, e.beat.commit);
    store_le<std::uint64_t>(p + 24, e.beat.checksum.low);
    store_le<std::uint64_t>(p + 32, e.beat.checksum.high);
    p += entry_bytes;
  }
  const checksum_t c = checksum_of(std::span(out).subspan(16), heartbeat_checksum_domain);
  store_le<std::uint64_t>(out.data(), c.low);
  store_le<std::uint64_t>(out.data() + 8, c.high);
  return out;
}

message commit_message(const heartbeat_entry& e, std::uint64_t cluster, replica_t primary, std::uint64_t sequence) {
  message c;
  c.h.cmd = command::commit;
  c.h.cluster = cluster;
  c.h.view = e.beat.view.value();
  c.h.commit = e.beat.commit;
  c.h.op = e.beat.commit;
  c.h.parent = e.beat.checksum;
  c.h.timestamp = sequence;
  c.h.replica = primary;
  seal(c);
  return c;
}

expected<node_heartbeat> decode_node_heartbeat(std::span<const std::byte> bytes) {
  if (bytes.size() < head_bytes) {
    return bad(fmt::format("{} bytes, fewer than its {}-byte head", bytes.size(), head_bytes));
  }
  const checksum_t want{load_le<std::uint64_t>(bytes.data()), load_le<std::uint64_t>(bytes.data() + 8)};
  if (checksum_of(bytes.subspan(16), heartbeat_checksum_domain) != want) {
    return bad("checksum mismatch");
  }
  const std::uint32_t count = load_le<std::uint32_t>(bytes.data() + 28);
  if (count > groups_per_host_max) {
    return bad(fmt::format("{} entries, more than groups_per_host_max ({})", count, groups_per_host_max));
  }
  if (bytes.size() != head_bytes + entry_bytes * std::size_t{count}) {
    return bad(fmt::format("{} bytes for {} entries", bytes.size(), count));
  }
  if (load_le<std::uint64_t>(bytes.data() + 40) != 0) {
    return bad("reserved head bytes are not zero");
  }
  node_heartbeat beat;
  beat.cluster = load_le<std::uint64_t>(bytes.data() + 16);
  beat.from = node_t(load_le<std::uint32_t>(bytes.data() + 24));
  beat.sequence = load_le<std::uint64_t>(bytes.data() + 32);
  beat.entries.reserve(count);
  const std::byte* p = bytes.data() + head_bytes;
  for (std::uint32_t i = 0; i < count; ++i, p += entry_bytes) {
    if (load_le<std::uint32_t>(p + 12) != 0 || load_le<std::uint64_t>(p + 40) != 0) {
      return bad(fmt::format("entry {}: reserved bytes are not zero", i));
    }
    heartbeat_entry e;
    e.group = group_t(load_le<std::uint64_t>(p));
    e.beat.view = view_t(load_le<std::uint32_t>(p + 8));
    e.beat.commit = load_le<std::uint64_t>(p + 16);
    e.beat.checksum = {load_le<std::uint64_t>(p + 24), load_le<std::uint64_t>(p + 32)};
    beat.entries.push_back(e);
  }
  return beat;
}

// A group's transport: replica index to node, message tagged with the group.
class group_host::link final : public transport {
 public:
  link(group_host& host, group_t g, const std::vector<node_t>& members) : host_(host), group_(g), members_(members) {}
  void send(replica_t to, message m) override {
    RILL_ASSERT(to < members_.size(), "group {}: replica {} of {}", group_.value(), to, members_.size());
    host_.net_.send(members_[to], group_, std::move(m));
  }

 private:
  group_host& host_;
  group_t group_;
  std::vector<node_t> members_;
};

group_host::group_host(const host_options& options, host_transport& net) : options_(options), net_(net) {
  RILL_ASSERT(options_.heartbeat_ticks >= 1);
  RILL_ASSERT(options_.peer_timeout_ticks > options_.heartbeat_ticks,
              "a peer must miss several heartbeats before it counts as silent");
  RILL_ASSERT(options_.groups_max >= 1 && options_.groups_max <= groups_per_host_max);
}

group_host::~group_host() = default;

expected<transport*> group_host::join(group_t g, std::vector<node_t> members) {
  auto refuse = [&](std::string why) -> rill::unexpected {
    return storage::make_unexpected(storage::errc::invalid_argument,
                                    fmt::format("group {}: {}", g.value(), std::move(why)));
  };
  if (groups_.contains(g)) {
    return refuse("already hosted");
  }
  if (groups_.size() >= options_.groups_max) {
    return refuse(fmt::format("this node hosts groups_max ({}) groups already", options_.groups_max));
  }
  if (members.empty() || members.size() > replicas_max) {
    return refuse(fmt::format("{} members (1 to {})", members.size(), replicas_max));
  }
  std::vector<node_t> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return refuse("a node is named twice among its members");
  }
  const auto self = std::find(members.begin(), members.end(), options_.node);
  if (self == members.end()) {
    return refuse(fmt::format("node {} is not among its members", options_.node.value()));
  }
  hosted h;
  h.self = static_cast<replica_t>(self - members.begin());
  h.net = std::make_unique<link>(*this, g, members);
  for (node_t n : members) {
    if (n != options_.node && !peers_.contains(n)) {
      peers_[n].heard = now_;  // silent only once it has had peer_timeout_ticks to speak
    }
  }
  h.members = std::move(members);
  transport* t = h.net.get();
  groups_.emplace(g, std::move(h));
  return t;
}

void group_host::attach(group_t g, driver& d) {
  auto it = groups_.find(g);
  RILL_ASSERT(it != groups_.end(), "group {} attached before it joined", g.value());
  RILL_ASSERT(it->second.d == nullptr, "group {} attached twice", g.value());
  RILL_ASSERT(d.replica().index() == it->second.self, "group {}: the driver runs replica {}, this node is {}",
              g.value(), d.replica().index(), it->second.self);
  it->second.d = &d;
  activate(g);
  index_primary(g, it->second);
}

void group_host::leave(group_t g) {
  active_.erase(g);
  if (auto it = groups_.find(g); it != groups_.end() && it->second.led_by) {
    led_[*it->second.led_by].erase(g);
  }
  groups_.erase(g);
  // Peers it no longer shares a group with get no more heartbeats.
  std::set<node_t> still;
  for (const auto& [id, h] : groups_) {
    still.insert(h.members.begin(), h.members.end());
  }
  std::erase_if(peers_, [&](const auto& p) { return !still.contains(p.first); });
}

void group_host::activate(group_t g) {
  active_.insert(g);
}

void group_host::index_primary(group_t g, hosted& h) {
  if (h.d == nullptr) {
    return;
  }
  const node_t primary = h.members[primary_of(h.d->replica().view(), h.members.size())];
  if (h.led_by == primary) {
    return;
  }
  if (h.led_by) {
    auto old = led_.find(*h.led_by);
    old->second.erase(g);
    if (old->second.empty()) {
      led_.erase(old);
    }
  }
  led_[primary].insert(g);
  h.led_by = primary;
}

bool group_host::quiet(const driver& d) {
  return d.fenced() || (d.in_flight() == 0 && !d.checkpoint_held() && d.replica().idle());
}

void group_host::settle_idle(group_t g, const hosted& h) {
  if (h.d == nullptr || !quiet(*h.d)) {
    return;
  }
  const node_t primary = h.members[primary_of(h.d->replica().view(), h.members.size())];
  if ((h.unheard || silent(primary)) && primary != options_.node && !h.d->fenced()) {
    // Its primary is silent about it (its node's heartbeats stopped, before or after the group joined or entered
    // this view, or they leave it out): it ticks on, towards its primary timeout.
    return;
  }
  active_.erase(g);
}

bool group_host::silent(node_t n) const {
  auto p = peers_.find(n);
  return p != peers_.end() && now_ - p->second.heard > options_.peer_timeout_ticks;
}

void group_host::on_message(node_t from, group_t g, const message& m) {
  auto it = groups_.find(g);
  if (it == groups_.end() || it->second.d == nullptr) {
    return;  // not (or no longer) hosted here
  }
  // No check of m.h.replica against `from`: a prepare keeps the index of the primary that made it when a peer
  // forwards it in repair. The replica decides whom to trust; the transport authenticates nodes.
  (void)from;
  activate(g);
  it->second.d->on_message(m);
  index_primary(g, it->second);
  heartbeat_if_committed(it->second);
}

void group_host::flush_commits() {
  for (group_t g : active_) {
    const std::uint32_t before = early_heartbeats_;
    heartbeat_if_committed(groups_.at(g));
    if (early_heartbeats_ != before) {
      return;  // (one heartbeat carries every group)
    }
  }
}

void group_host::heartbeat_if_committed(hosted& h) {
  // A commit a led group makes goes out at once (one change at a time then waits no tick), up to the limit per tick;
  // later ones in the same tick go with the next tick's heartbeats.
  if (early_heartbeats_ >= options_.commit_heartbeats_per_tick_max || h.d == nullptr || h.d->fenced()) {
    return;
  }
  const auto b = h.d->replica().beat();
  if (b && b->commit > h.commit_beaten) {
    ++early_heartbeats_;
    send_heartbeats();
  }
}

void group_host::on_request(group_t g, const message& m) {
  auto it = groups_.find(g);
  if (it == groups_.end() || it->second.d == nullptr || m.h.cmd != command::request) {
    return;
  }
  activate(g);
  it->second.d->on_message(m);
  index_primary(g, it->second);
}

void group_host::on_heartbeat(const node_heartbeat& beat) {
  if (beat.cluster != options_.cluster || beat.from == options_.node) {
    return;
  }
  auto p = peers_.find(beat.from);
  if (p == peers_.end()) {
    return;  // shares no group with this node
  }
  p->second.heard = now_;
  p->second.woken = false;
  std::set<group_t> named;
  for (const auto& e : beat.entries) {
    auto it = groups_.find(e.group);
    if (it == groups_.end() || it->second.d == nullptr) {
      continue;
    }
    hosted& h = it->second;
    const replica_t primary = primary_of(e.beat.view, h.members.size());
    if (h.members[primary] != beat.from) {
      continue;  // only the primary of the view it names speaks for a group
    }
    const class replica& r = h.d->replica();
    if (e.beat.view < r.view()) {
      ++counters_.entries_skipped;  // the primary of a view this replica has left: nothing it would take
      continue;
    }
    if (e.beat.view == r.view()) {
      // Only its own view's primary speaks for the group here. (An entry for a higher view is handed over, so that
      // the replica asks for that view, but it does not count as hearing from the primary: until the replica is
      // in that view, the primary it waits for is another.)
      named.insert(e.group);
      h.unheard = false;
      if (!active_.contains(e.group) && e.beat.commit <= r.commit_max().value()) {
        ++counters_.entries_skipped;  // nothing new for a group with nothing to do
        continue;
      }
    }
    ++counters_.commits_delivered;
    activate(e.group);
    h.d->on_message(commit_message(e, r.durable_state().cluster, primary, beat.sequence));
    index_primary(e.group, h);
  }
  // A group this node believes the sender leads, left out: the sender abdicates, lost the group, or restarted
  // without it. The group ticks until its primary names it again (or it elects another).
  wake_led_by(beat.from, &named);
}

void group_host::wake_led_by(node_t n, const std::set<group_t>* named) {
  auto led = led_.find(n);
  if (led == led_.end()) {
    return;
  }
  for (group_t g : led->second) {
    hosted& h = groups_.at(g);
    if (h.d == nullptr || h.unheard || (named != nullptr && named->contains(g)) ||
        h.members[primary_of(h.d->replica().view(), h.members.size())] != n) {
      continue;  // (a stale entry, its view moved on since: refreshed at the next input or heartbeat)
    }
    h.unheard = true;
    ++counters_.wakes;
    activate(g);
  }
}

void group_host::poke(group_t g) {
  auto it = groups_.find(g);
  if (it == groups_.end() || it->second.d == nullptr) {
    return;
  }
  activate(g);
  it->second.d->poke();
  index_primary(g, it->second);
}

void group_host::tick(std::uint64_t elapsed) {
  RILL_ASSERT(elapsed >= 1);
  now_ += elapsed;
  early_heartbeats_ = 0;
  // A copy: a group's tick may make another active (a local delivery) or idle.
  const std::vector<group_t> ticking(active_.begin(), active_.end());
  bool commit_moved = false;  // a group this node leads committed since its last heartbeat (commit heartbeats)
  for (group_t g : ticking) {
    auto it = groups_.find(g);
    if (it == groups_.end() || it->second.d == nullptr) {
      active_.erase(g);
      continue;
    }
    ++counters_.group_ticks;
    it->second.d->on_tick();
    if (options_.commit_heartbeats_per_tick_max > 0) {
      const auto b = it->second.d->fenced() ? std::nullopt : it->second.d->replica().beat();
      commit_moved = commit_moved || (b && b->commit > it->second.commit_beaten);
    }
    index_primary(g, it->second);
    settle_idle(g, it->second);
  }
  if (now_ >= heartbeat_due_ || commit_moved) {
    heartbeat_due_ = now_ + options_.heartbeat_ticks;
    send_heartbeats();
  }
  wake_silent_peers();
  for (group_t g : active_) {
    const hosted& h = groups_.at(g);
    RILL_ASSERT(h.d != nullptr, "group {} active before it is attached", g.value());
  }
}

void group_host::send_heartbeats() {
  std::map<node_t, node_heartbeat> out;
  for (auto& [g, h] : groups_) {
    index_primary(g, h);
    if (h.d == nullptr || h.d->fenced()) {
      continue;
    }
    // (Only inputs change a replica, and every input activates its group: an inactive group is still quiet.)
    RILL_ASSERT(active_.contains(g) || quiet(*h.d), "group {} is inactive but not quiet", g.value());
    const auto b = h.d->replica().beat();
    if (!b) {
      continue;
    }
    h.commit_beaten = b->commit;
    RILL_ASSERT(h.members[primary_of(b->view, h.members.size())] == options_.node);
    for (node_t n : h.members) {
      if (n != options_.node) {
        out[n].entries.push_back({g, *b});
      }
    }
  }
  ++sequence_;
  // Every peer gets one, empty or not: an empty heartbeat still says this node is alive.
  for (const auto& [n, p] : peers_) {
    node_heartbeat& beat = out[n];
    beat.cluster = options_.cluster;
    beat.from = options_.node;
    beat.sequence = sequence_;
    RILL_ASSERT(beat.entries.size() <= options_.groups_max);
    ++counters_.heartbeats_sent;
    counters_.entries_sent += beat.entries.size();
    net_.send(n, beat);
  }
}

void group_host::wake_silent_peers() {
  for (auto& [n, p] : peers_) {
    if (p.woken || now_ - p.heard <= options_.peer_timeout_ticks) {
      continue;
    }
    p.woken = true;
    wake_led_by(n, nullptr);
  }
}

std::uint64_t group_host::ticks_until_due() const {
  if (!active_.empty()) {
    return 1;
  }
  std::uint64_t due = heartbeat_due_ > now_ ? heartbeat_due_ - now_ : 1;
  for (const auto& [n, p] : peers_) {
    if (!p.woken) {
      const std::uint64_t silent_at = p.heard + options_.peer_timeout_ticks + 1;
      due = std::min(due, silent_at > now_ ? silent_at - now_ : 1);
    }
  }
  return std::max<std::uint64_t>(due, 1);
}

}  // namespace rill::consensus
