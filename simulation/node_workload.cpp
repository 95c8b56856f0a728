#include "simulation/node_workload.h"

#include <fmt/core.h>

#include <charconv>

#include "actors/coordinated_flows.h"
#include "actors/coordinators.h"
#include "actors/metadata_state.h"
#include "actors/partition_replica.h"
#include "base/assert.h"
#include "base/task.h"
#include "net/frame.h"
#include "net/proto/metadata.pb.h"
#include "net/proto/rill.pb.h"
#include "simulation/node_cluster.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"
#include "storage/validated_batches.h"

namespace rill::simulation {
namespace {

constexpr std::uint64_t producer_id_base = 1000;
constexpr std::uint32_t topics_max = 3;
constexpr std::uint64_t freeze_wait_ticks_max = 1'500;
// A request unanswered this long is given up, as a client's timeout gives up on a node that died under it (a dead
// process answers nothing): a produce is sent again (the same sequences), a consumer's step is dropped.
constexpr std::uint64_t request_timeout_ticks = 500;  // a change whose outcome stays unknown freezes its topic

// A record's key: "p<producer>.<sequence>"; its value: the incarnation's tag, then filler.
std::string key_of(record_id id) {
  return fmt::format("p{}.{}", id.producer, id.sequence);
}

std::optional<record_id> parse_key(std::string_view k) {
  if (k.size() < 4 || k[0] != 'p') {
    return std::nullopt;
  }
  const auto dot = k.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  record_id id;
  if (std::from_chars(k.data() + 1, k.data() + dot, id.producer).ec != std::errc{} ||
      std::from_chars(k.data() + dot + 1, k.data() + k.size(), id.sequence).ec != std::errc{}) {
    return std::nullopt;
  }
  return id;
}

// A coordinator's answer that says the command did not apply (unlike a submit that failed: it may still commit).
bool refused_for_sure(net::status s) {
  return s == net::status::not_owner || s == net::status::stale_generation || s == net::status::unknown_member ||
         s == net::status::offset_regression || s == net::status::group_not_found ||
         s == net::status::partition_not_found;
}

}  // namespace

std::vector<std::pair<record_id, std::string>> records_in(std::span<const std::byte> batch) {
  std::vector<std::pair<record_id, std::string>> out;
  auto view = storage::batch_view::validate(batch, storage::batch_limits{.batch_bytes_max = 1u << 30});
  if (!view) {
    return out;
  }
  std::vector<std::byte> scratch;
  auto region = storage::records_of(*view, 1u << 20, scratch);
  if (!region) {
    return out;
  }
  storage::record_reader rr(*region);
  for (;;) {
    auto r = rr.next();
    if (!r || !r->has_value()) {
      break;
    }
    const auto& key = (*r)->key;
    const auto& value = (*r)->value;
    std::string k(key ? reinterpret_cast<const char*>(key->data()) : "", key ? key->size() : 0);
    std::string v(value ? reinterpret_cast<const char*>(value->data()) : "", value ? value->size() : 0);
    const auto id = parse_key(k);
    out.emplace_back(id.value_or(record_id{0, -1}), v.substr(0, v.find('|')));
  }
  return out;
}

struct node_workload::producer {
  std::uint64_t id = 0;
  std::uint32_t left = 0;  // produces still to make
  std::map<partition_key, std::int64_t> next_sequence;
  struct pending {
    partition_key key;
    std::uint64_t ns = 0;
    std::vector<std::byte> batch;
    record_id first;
    std::uint32_t records = 0;
  };
  std::optional<pending> produce;
  bool in_flight = false;
  std::uint64_t sent_at = 0;
  std::uint64_t attempt = 0;  // an answer to an earlier attempt (one given up) is ignored
  std::uint64_t retry_at = 0;
};

struct node_workload::consumer {
  std::string name;
  std::optional<partition_key> on;
  // A reset of `on` whose outcome is unknown: made again before anything else, until it is acknowledged (a request
  // that failed may still commit, but never after a later one of the consumer's is acknowledged).
  std::optional<std::int64_t> reset_pending;
  bool busy = false;
  std::uint64_t busy_since = 0;
  std::optional<std::int64_t> resetting;  // the reset the step in flight makes, if it makes one
  std::uint64_t attempt = 0;
  std::uint64_t next_at = 0;
};

struct node_workload::member {
  std::string id;  // stable: it joins, and joins again, as itself
  std::uint64_t conn = 0;
  std::optional<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> group;  // stream, topic, group id
  bool joined = false;
  std::uint64_t generation = 0;
  std::vector<std::uint32_t> owned;     // not being revoked: read these
  std::vector<std::uint32_t> revoking;  // stopped reading: given back at the next heartbeat
  std::uint64_t session_ticks = 100;
  std::uint64_t beat_at = 0;
  std::uint64_t poll_at = 0;
  std::uint64_t paused_until = 0;
  bool zombie = false;  // back from a pause: polls with what it had before it heartbeats
  bool busy = false;
  std::uint64_t busy_since = 0;
  std::size_t busy_node = 0;       // the node the request in flight went to
  std::uint64_t busy_process = 0;  // ... and its process then (node_cluster::process_at)
  std::uint64_t attempt = 0;
  // The auto-commit poll in flight, if any: given up, it may have committed what it read (its node died under it,
  // after the commit applied): the group may skip that far.
  struct in_flight {
    std::string group;
    partition_key key;
  };
  std::optional<in_flight> auto_poll;
};

node_workload::node_workload(node_cluster& c, std::uint64_t seed)
    : cluster_(c),
      rng_(seed),
      pick_rng_(seed ^ 0x9e37'79b9'7f4a'7c15ULL),
      member_rng_(seed ^ 0x6d65'6d62'6572'7301ULL) {
  const auto& o = cluster_.options();
  for (std::uint32_t i = 0; i < o.producers; ++i) {
    auto p = std::make_unique<producer>();
    p->id = producer_id_base + i;
    p->left = o.produces;
    producers_.push_back(std::move(p));
  }
  for (std::uint32_t i = 0; i < o.consumers; ++i) {
    auto c2 = std::make_unique<consumer>();
    c2->name = fmt::format("reader{}", i);
    consumers_.push_back(std::move(c2));
  }
  for (std::uint32_t i = 0; i < o.members; ++i) {
    auto m = std::make_unique<member>();
    m->id = fmt::format("member{}", i);
    m->conn = i + 1;
    members_.push_back(std::move(m));
  }
  observed_.assign(coordinator_count, 0);
  changes_left_ = o.operator_changes;
  next_change_at_ = 10;
}

node_workload::~node_workload() {
  *alive_ = false;
}

bool node_workload::done() const {
  if (changes_left_ > 0 || changing_) {
    return false;
  }
  for (const auto& p : producers_) {
    if (p->left > 0 || p->produce) {
      return false;
    }
  }
  return true;
}

std::string node_workload::pending() const {
  std::size_t producing = 0;
  std::string first;  // what the first producer not done waits for
  for (const auto& p : producers_) {
    if (p->left > 0 || p->produce) {
      ++producing;
      if (first.empty()) {
        first = p->produce ? fmt::format(" (producer {}: {} left, {} {} to {})", p->id, p->left,
                                         p->in_flight ? "in flight" : "waiting", p->produce->first.sequence,
                                         p->produce->key.describe())
                           : fmt::format(" (producer {}: {} left, none open of {} partitions)", p->id, p->left,
                                         incarnations_.size());
      }
    }
  }
  // Why no node takes the first waiting producer's partition (each replica's refusal).
  for (const auto& p : producers_) {
    if (p->produce && !p->in_flight) {
      for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
        auto* r = cluster_.replica_at(i, p->produce->ns);
        if (r != nullptr) {
          const auto why = r->refusal();
          first += fmt::format("; node {}: {}", i + 1, why ? why->message : std::string("serving"));
        }
      }
      break;
    }
  }
  return fmt::format("{} operator changes left{}, {} producers not done{}", changes_left_,
                     changing_ ? " (one in flight)" : "", producing, first);
}

std::optional<partition_key> node_workload::current(std::uint32_t stream, std::uint32_t topic, std::uint64_t created_ms,
                                                    std::uint32_t partition) const {
  auto it = incarnations_.find({stream, topic, created_ms, partition});
  if (it == incarnations_.end()) {
    return std::nullopt;
  }
  return partition_key{stream, topic, created_ms, partition, it->second};
}

std::optional<std::size_t> node_workload::any_node() {
  std::vector<std::size_t> serving;
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (cluster_.serving(i)) {
      serving.push_back(i);
    }
  }
  if (serving.empty()) {
    return std::nullopt;
  }
  return serving[rng_.below(serving.size())];
}

std::uint64_t node_workload::group_of(const partition_key& k) const {
  // (With partition_id_reused planted, the group every incarnation of the partition gets.)
  return actors::partition_group_id(k.stream, k.topic, k.topic_created_ms, k.partition,
                                    cluster_.options().bugs.partition_id_reused ? 0 : k.incarnation);
}

std::optional<std::size_t> node_workload::primary_of(const partition_key& k) {
  // A client that knows the committed metadata asks the primary of the incarnation it knows: a node that has not yet
  // carried out a delete and an add back still runs the old incarnation's replica, a partition no longer named.
  const std::uint64_t ns = actors::partition_namespace(k.stream, k.topic, k.partition);
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (auto* r = cluster_.replica_at(i, ns);
        r != nullptr && r->options().group.value() == group_of(k) && !r->refusal()) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> node_workload::any_primary_of(const partition_key& k) {
  const std::uint64_t ns = actors::partition_namespace(k.stream, k.topic, k.partition);
  std::vector<std::size_t> serving;
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (auto* r = cluster_.replica_at(i, ns);
        r != nullptr && r->options().group.value() == group_of(k) && !r->refusal()) {
      serving.push_back(i);
    }
  }
  if (serving.empty()) {
    return std::nullopt;
  }
  return serving[pick_rng_.below(serving.size())];
}

std::pair<std::shared_ptr<const actors::metadata_view>, std::uint64_t> node_workload::newest_view() const {
  std::shared_ptr<const actors::metadata_view> best;
  std::uint64_t best_op = 0;
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (auto v = cluster_.view_at(i); v && (!best || cluster_.applied_at(i) > best_op)) {
      best = v;
      best_op = cluster_.applied_at(i);
    }
  }
  return {best, best_op};
}

void node_workload::learn(std::uint64_t tick) {
  (void)tick;
  // The most advanced view among the serving nodes (by the op applied: a view's version counts commands only since
  // its state was last restored): partitions gone are forgotten, new ones (or ones back) get a new incarnation. The
  // operator waits for each of its changes to show here, so none is missed.
  const auto [best, best_op] = newest_view();
  if (!best || best_op < learned_op_) {
    // (The node that had applied the most may be down now: what the others show is older. Learning it would forget
    // partitions that exist, and drop produces whose sequences the producer has already used: a gap.)
    return;
  }
  learned_op_ = best_op;
  // A partition's incarnation is the metadata op that created it (topic_meta::partitions_created): a delete and an
  // add back make another one even where the workload saw neither.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t, std::uint32_t>, std::uint64_t> live;
  groups_.clear();
  for (const auto& [sid, s] : best->streams) {
    for (const auto& [tid, t] : s.topics) {
      for (const auto& [gid, g] : t.groups) {
        groups_[{sid, tid, gid}] = t.created_ms;
      }
      for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
        live[{sid, tid, t.created_ms, p}] = t.partition_created(p);
      }
    }
  }
  incarnations_ = std::move(live);
}

void node_workload::step() {
  learn(cluster_.now());
  step_operator();
  for (auto& p : producers_) {
    step_producer(*p);
  }
  for (auto& c : consumers_) {
    step_consumer(*c);
  }
  for (auto& m : members_) {
    step_member(*m);
  }
  observe_groups();
}

// An operator's change: one metadata command, and how to tell from a view that it took effect.
struct node_workload::change {
  std::vector<std::byte> body;
  std::function<bool(const actors::metadata_view&)> shows;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> topic;  // the topic it touches (held off meanwhile)
  std::optional<std::uint32_t> add_back;  // a partition delete: the partition count to add back to afterwards
  std::optional<std::string> topic_made;  // a topic created (by this name): its group is created afterwards
  std::uint64_t started = 0;
  bool sent = false;
  bool answered = false;
  bool applied = false;
};

bool node_workload::frozen(std::uint32_t stream, std::uint32_t topic) const {
  return (change_ && change_->topic == std::pair{stream, topic}) || frozen_forever_.contains({stream, topic});
}

namespace {
std::vector<std::byte> bytes_of(const proto::MetadataCommand& cmd) {
  std::string bytes;
  RILL_ASSERT(cmd.SerializeToString(&bytes));
  return std::vector<std::byte>(reinterpret_cast<const std::byte*>(bytes.data()),
                                reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
}

const actors::topic_meta* topic_in(const actors::metadata_view& v, std::uint32_t sid, std::uint32_t tid) {
  auto s = v.streams.find(sid);
  if (s == v.streams.end()) {
    return nullptr;
  }
  auto t = s->second.topics.find(tid);
  return t == s->second.topics.end() ? nullptr : &t->second;
}
}  // namespace

std::optional<node_workload::change> node_workload::next_change(const actors::metadata_view& view) {
  proto::MetadataCommand cmd;
  cmd.set_time_ms(cluster_.now() + 1'700'000'000'000ULL);
  change c;
  const auto members = static_cast<std::uint32_t>(cluster_.node_count());
  if (view.streams.empty()) {
    cmd.mutable_create_stream()->set_name("s");
    c.shows = [](const actors::metadata_view& v) { return !v.streams.empty(); };
    c.body = bytes_of(cmd);
    return c;
  }
  const auto& s = view.streams.begin()->second;
  std::vector<const actors::topic_meta*> topics;
  for (const auto& [tid, t] : s.topics) {
    if (!frozen(s.id, tid)) {
      topics.push_back(&t);
    }
  }
  const auto choice = rng_.below(4);
  if (topics.empty() || (choice == 0 && s.topics.size() < topics_max)) {
    proto::TopicConfig want;
    want.set_partitions(1 + static_cast<std::uint32_t>(rng_.below(3)));
    want.set_replication_factor(std::min<std::uint32_t>(3, members));
    auto complete = actors::complete_topic_config(want, config::log_config{}, actors::replication_limits{members, 1});
    RILL_ASSERT(complete.has_value(), "{}", complete ? "" : complete.error().message());
    const std::string name = fmt::format("t{}", topics_created_++);
    auto* ct = cmd.mutable_create_topic();
    ct->set_stream_id(s.id);
    ct->set_name(name);
    *ct->mutable_config() = *complete;
    c.topic_made = name;
    c.shows = [sid = s.id, name](const actors::metadata_view& v) {
      auto st = v.streams.find(sid);
      return st != v.streams.end() && std::any_of(st->second.topics.begin(), st->second.topics.end(),
                                                  [&](const auto& kv) { return kv.second.name == name; });
    };
    c.body = bytes_of(cmd);
    return c;
  }
  const actors::topic_meta& t = *topics[rng_.below(topics.size())];
  const std::uint32_t sid = s.id;
  const std::uint32_t tid = t.id;
  const std::uint64_t created = t.created_ms;
  c.topic = std::pair{sid, tid};
  if (choice == 1 && s.topics.size() >= 2) {
    auto* d = cmd.mutable_delete_topic();
    d->set_stream_id(sid);
    d->set_topic_id(tid);
    c.shows = [sid, tid, created](const actors::metadata_view& v) {
      const auto* now = topic_in(v, sid, tid);
      return now == nullptr || now->created_ms != created;
    };
  } else if (choice == 2 && t.config.partitions() >= 2) {
    // The last partition deleted, then added back (another incarnation of it: review finding 1).
    auto* d = cmd.mutable_delete_partitions();
    d->set_stream_id(sid);
    d->set_topic_id(tid);
    d->set_count(1);
    const std::uint32_t fewer = t.config.partitions() - 1;
    c.add_back = t.config.partitions();
    c.shows = [sid, tid, fewer](const actors::metadata_view& v) {
      const auto* now = topic_in(v, sid, tid);
      return now == nullptr || now->config.partitions() <= fewer;
    };
  } else if (t.config.partitions() < 3) {
    auto* a = cmd.mutable_add_partitions();
    a->set_stream_id(sid);
    a->set_topic_id(tid);
    a->set_count(1);
    const std::uint32_t more = t.config.partitions() + 1;
    c.shows = [sid, tid, more](const actors::metadata_view& v) {
      const auto* now = topic_in(v, sid, tid);
      return now == nullptr || now->config.partitions() >= more;
    };
  } else {
    auto* u = cmd.mutable_update_topic();
    u->set_stream_id(sid);
    u->set_topic_id(tid);
    const std::uint64_t retention = 1 + rng_.below(64 * 1024);
    u->mutable_config()->set_retention_bytes(retention);
    c.shows = [sid, tid, retention](const actors::metadata_view& v) {
      const auto* now = topic_in(v, sid, tid);
      return now == nullptr || now->config.retention_bytes() == retention;
    };
  }
  c.body = bytes_of(cmd);
  return c;
}

bool node_workload::progress(change& c) {
  if (!c.sent) {
    // Producers finish what they have in flight on the topic first.
    if (c.topic) {
      for (const auto& p : producers_) {
        if (p->in_flight && p->produce && p->produce->key.stream == c.topic->first &&
            p->produce->key.topic == c.topic->second) {
          return false;
        }
      }
    }
    auto at = any_node();
    if (!at) {
      return false;
    }
    c.sent = true;
    c.started = cluster_.now();
    change* cp = &c;
    cluster_.submit_metadata(*at, c.body, [cp, alive = alive_, this](bool applied) {
      if (*alive && change_.get() == cp) {
        cp->answered = true;
        cp->applied = applied;
      }
    });
    return false;
  }
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (auto v = cluster_.view_at(i); v && c.shows(*v)) {
      ++changes_;
      return true;
    }
  }
  if (c.answered && !c.applied) {
    return true;  // refused (a name taken, a topic gone): nothing changed
  }
  if (cluster_.now() - c.started > freeze_wait_ticks_max) {
    if (c.topic) {
      frozen_forever_.insert(*c.topic);  // its outcome unknown: the topic takes no more produces
    }
    return true;
  }
  return false;
}

void node_workload::step_operator() {
  if (change_) {
    if (!progress(*change_)) {
      return;
    }
    learn(cluster_.now());
    std::unique_ptr<change> done = std::move(change_);
    if (done->add_back && !frozen_forever_.contains(*done->topic)) {
      // The partition just deleted comes back, the topic still held off.
      proto::MetadataCommand cmd;
      cmd.set_time_ms(cluster_.now() + 1'700'000'000'000ULL);
      auto* a = cmd.mutable_add_partitions();
      a->set_stream_id(done->topic->first);
      a->set_topic_id(done->topic->second);
      a->set_count(1);
      auto next = std::make_unique<change>();
      next->body = bytes_of(cmd);
      next->topic = done->topic;
      const auto [sid, tid] = *done->topic;
      const std::uint32_t more = *done->add_back;
      next->shows = [sid, tid, more](const actors::metadata_view& v) {
        const auto* now = topic_in(v, sid, tid);
        return now == nullptr || now->config.partitions() >= more;
      };
      change_ = std::move(next);
      return;
    }
    if (done->topic_made) {
      if (auto next = group_change(*done->topic_made)) {
        change_ = std::move(next);  // (the topic's group: part of the same change)
        return;
      }
    }
    changing_ = false;
    next_change_at_ = cluster_.now() + 100 + rng_.below(500);
    return;
  }
  if (changes_left_ == 0 || cluster_.now() < next_change_at_) {
    return;
  }
  auto at = any_node();
  if (!at) {
    return;
  }
  // Decided on the most advanced view, not a lagging node's: one that still shows a topic deleted since would let
  // the operator delete the last topic (rill-sim --node seed 11267126437916202177: no partition left to produce to).
  const auto newest = newest_view().first;
  if (!newest) {
    return;
  }
  auto c = next_change(*newest);
  if (!c) {
    return;
  }
  --changes_left_;
  changing_ = true;
  change_ = std::make_unique<change>(std::move(*c));
}

std::unique_ptr<node_workload::change> node_workload::group_change(const std::string& topic_name) {
  // The topic as the most advanced serving node has it (the change showed there).
  const auto best = newest_view().first;
  if (!best || best->streams.empty()) {
    return nullptr;
  }
  const auto& s = best->streams.begin()->second;
  for (const auto& [tid, t] : s.topics) {
    if (t.name != topic_name) {
      continue;
    }
    proto::MetadataCommand cmd;
    cmd.set_time_ms(cluster_.now() + 1'700'000'000'000ULL);
    auto* cg = cmd.mutable_create_group();
    cg->set_stream_id(s.id);
    cg->set_topic_id(tid);
    cg->set_name("g");
    proto::GroupConfig want;
    want.set_session_timeout_ms(static_cast<std::uint32_t>(member_rng_.between(1'000, 3'000)));
    want.set_strategy(member_rng_.below(2) == 0 ? proto::ASSIGNMENT_RANGE : proto::ASSIGNMENT_ROUND_ROBIN);
    auto complete = actors::complete_group_config(want);
    RILL_ASSERT(complete.has_value(), "{}", complete ? "" : complete.error().message());
    *cg->mutable_config() = *complete;
    auto c = std::make_unique<change>();
    c->body = bytes_of(cmd);
    c->shows = [sid = s.id, tid = tid, created = t.created_ms](const actors::metadata_view& v) {
      const auto* now = topic_in(v, sid, tid);
      return now == nullptr || now->created_ms != created || !now->groups.empty();
    };
    return c;
  }
  return nullptr;
}

std::optional<std::pair<std::size_t, actors::coordinated_group>> node_workload::node_for_group(std::uint32_t stream,
                                                                                               std::uint32_t topic,
                                                                                               std::uint32_t group) {
  std::vector<std::pair<std::size_t, actors::coordinated_group>> able;
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    if (cluster_.coordinators_at(i) == nullptr) {
      continue;
    }
    if (auto v = cluster_.view_at(i)) {
      if (auto g = actors::find_coordinated_group(*v, stream, topic, group)) {
        able.emplace_back(i, std::move(*g));
      }
    }
  }
  if (able.empty()) {
    return std::nullopt;
  }
  return able[member_rng_.below(able.size())];
}

std::pair<const actors::coordinators*, std::uint64_t> node_workload::most_advanced(std::uint32_t index) const {
  const actors::coordinators* best = nullptr;
  std::uint64_t best_commit = 0;
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    const actors::coordinators* c = cluster_.coordinators_at(i);
    if (c != nullptr && (best == nullptr || c->replica(index).commit_min().value() > best_commit)) {
      best = c;
      best_commit = c->replica(index).commit_min().value();
    }
  }
  return {best, best_commit};
}

std::int64_t node_workload::committed_end(const partition_key& k) const {
  std::int64_t end = 0;
  const auto ns = actors::partition_namespace(k.stream, k.topic, k.partition);
  for (std::size_t i = 0; i < cluster_.node_count(); ++i) {
    auto* r = cluster_.replica_at(i, ns);
    if (r != nullptr && r->group() != nullptr && r->options().group.value() == group_of(k)) {
      end = std::max(end, r->group()->log().committed().value());
    }
  }
  return end;
}

bool node_workload::truly_owns(const actors::coordinated_group& g, const std::string& member_id,
                               std::uint64_t generation, std::uint32_t partition) const {
  const std::uint32_t index = actors::coordinator_for(g.key(), coordinator_count);
  const auto [best, commit] = most_advanced(index);
  if (best == nullptr) {
    return true;  // (no replica open anywhere: nothing to judge by)
  }
  const actors::group_state* state = actors::coordinated_state(best->machine(index), g);
  return state != nullptr && state->still_owns(member_id, generation, partition);
}

void node_workload::observe_groups() {
  for (std::uint32_t index = 0; index < coordinator_count; ++index) {
    const auto [best, best_commit] = most_advanced(index);
    if (best == nullptr || best_commit <= observed_[index]) {
      continue;
    }
    observed_[index] = best_commit;
    for (const auto& [key, state] : best->machine(index).groups()) {
      if (cluster_.debug()) {
        std::string offsets;
        for (const auto& o : state.committed_offsets()) {
          offsets += o ? fmt::format(" {}", *o) : std::string(" -");
        }
        fmt::print("{} coordinator {} at op {}: group {} generation {} offsets{}\n", cluster_.now(), index, best_commit,
                   key.name, state.generation(), offsets);
      }
      cluster_.checker().on_group_offsets(
          cluster_.now(), fmt::format("{}/{}/{}#{}", key.stream, key.topic, key.name, state.incarnation()),
          state.committed_offsets());
    }
  }
}

void node_workload::step_member(member& m) {
  const std::uint64_t now = cluster_.now();
  if (m.busy && (now - m.busy_since > request_timeout_ticks || cluster_.process_at(m.busy_node) != m.busy_process)) {
    m.busy = false;  // given up (or its connection dropped: the node's process died)
    ++m.attempt;
    if (m.auto_poll) {
      // What it read may have been committed.
      cluster_.checker().on_group_uncertain(m.auto_poll->group, m.auto_poll->key);
      --auto_in_flight_[{m.auto_poll->group, m.auto_poll->key}];
    }
  }
  if (!m.busy) {
    m.auto_poll.reset();
  }
  if (m.busy || now < m.paused_until) {
    return;
  }
  if (!cluster_.liveness() && member_rng_.chance_ppm(cluster_.options().member_pause_ppm)) {
    // A pause (a long GC, a VM stopped): no heartbeat for up to three session timeouts.
    m.paused_until = now + m.session_ticks / 2 + member_rng_.below(m.session_ticks * 3);
    m.zombie = m.joined;
    ++pauses_;
    return;
  }
  if (m.group && !groups_.contains(*m.group)) {
    m.group.reset();
  }
  if (!m.group) {
    if (groups_.empty()) {
      return;
    }
    auto it = groups_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(member_rng_.below(groups_.size())));
    m.group = it->first;
    m.joined = false;
    m.owned.clear();
    m.revoking.clear();
  }
  const auto [sid, tid, gid] = *m.group;
  if (m.zombie) {
    m.zombie = false;
    if (!m.owned.empty()) {
      member_poll(m);  // with the generation it had: its partitions may have moved meanwhile
      return;
    }
  }
  if (m.joined && now < m.beat_at) {
    if (now >= m.poll_at && !m.owned.empty()) {
      member_poll(m);
    }
    return;
  }
  auto at = node_for_group(sid, tid, gid);
  if (!at) {
    return;
  }
  auto& [node, g] = *at;
  std::string header;
  net::api api = net::api::group_join;
  if (!m.joined) {
    proto::GroupJoinRequest rq;
    rq.mutable_stream()->set_id(sid);
    rq.mutable_topic()->set_id(tid);
    rq.mutable_group()->set_id(gid);
    rq.set_member_id(m.id);
    header = rq.SerializeAsString();
  } else {
    api = net::api::group_heartbeat;
    proto::GroupHeartbeatRequest rq;
    rq.mutable_stream()->set_id(sid);
    rq.mutable_topic()->set_id(tid);
    rq.mutable_group()->set_id(gid);
    rq.set_member_id(m.id);
    for (auto p : m.revoking) {
      rq.add_released(p);  // it stopped reading them
    }
    header = rq.SerializeAsString();
  }
  m.busy = true;
  m.busy_since = now;
  m.busy_node = node;
  m.busy_process = cluster_.process_at(node);
  member* mp = &m;
  auto job = [](actors::coordinators* c, actors::coordinated_group grp, std::uint16_t a, std::string h,
                std::uint64_t conn) -> task<expected<actors::coordinated_answer>> {
    co_return co_await actors::coordinate(*c, grp, a, std::move(h), conn);
  };
  spawn(
      job(cluster_.coordinators_at(node), g, static_cast<std::uint16_t>(api), std::move(header),
          actors::connection_key(node + 1, m.conn)),
      [this, mp, api, attempt = m.attempt, group = *m.group, alive = alive_](expected<actors::coordinated_answer> got) {
        if (!*alive || mp->attempt != attempt || mp->group != group) {
          return;
        }
        mp->busy = false;
        if (!got) {
          const auto status = actors::status_of_group(got.error().code());
          if (status == net::status::unknown_member) {
            mp->joined = false;  // its session ended: join again
            mp->owned.clear();
            mp->revoking.clear();
          }
          return;
        }
        if (api == net::api::group_join) {
          proto::GroupJoinReply r;
          RILL_ASSERT(r.ParseFromString(got->header));
          mp->joined = true;
          mp->generation = r.generation();
          mp->session_ticks = std::max<std::uint64_t>(10, r.session_timeout_ms() / 10);
          mp->beat_at = cluster_.now();  // its assignment, at once
          return;
        }
        proto::GroupAssignment r;
        RILL_ASSERT(r.ParseFromString(got->header));
        mp->generation = r.generation();
        mp->owned.clear();
        mp->revoking.assign(r.revoking().begin(), r.revoking().end());
        for (auto p : r.owned()) {
          if (std::find(mp->revoking.begin(), mp->revoking.end(), p) == mp->revoking.end()) {
            mp->owned.push_back(p);
          }
        }
        mp->beat_at = cluster_.now() + mp->session_ticks / 3;
      });
}

void node_workload::member_poll(member& m) {
  const std::uint64_t now = cluster_.now();
  m.poll_at = now + 5 + member_rng_.below(20);
  const auto [sid, tid, gid] = *m.group;
  const std::uint32_t partition = m.owned[member_rng_.below(m.owned.size())];
  const auto created = groups_.at(*m.group);
  const auto key = current(sid, tid, created, partition);
  if (!key) {
    return;
  }
  const auto at = any_primary_of(*key);
  if (!at || cluster_.coordinators_at(*at) == nullptr) {
    return;
  }
  std::optional<actors::coordinated_group> g;
  if (auto v = cluster_.view_at(*at)) {
    g = actors::find_coordinated_group(*v, sid, tid, gid);
  }
  if (!g) {
    return;
  }
  proto::PollRequest rq;
  rq.mutable_stream()->set_id(sid);
  rq.mutable_topic()->set_id(tid);
  rq.set_partition_id(partition);
  rq.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  rq.mutable_consumer()->set_group(g->id.name);
  rq.mutable_member()->set_member_id(m.id);
  rq.mutable_member()->set_generation(m.generation);
  // Half the polls auto-commit; the others commit explicitly once the data is in (as a client that processes first).
  const bool auto_commit = member_rng_.below(2) == 0;
  rq.set_auto_commit(auto_commit);
  rq.set_max_bytes(2048);
  const bool owned = truly_owns(*g, m.id, m.generation, partition);
  const std::uint64_t ns = actors::partition_namespace(sid, tid, partition);
  actors::partition_replica* r = cluster_.replica_at(*at, ns);
  m.busy = true;
  m.busy_since = now;
  m.busy_node = *at;
  m.busy_process = cluster_.process_at(*at);
  const std::string label = fmt::format("{}/{}/{}#{}", sid, tid, g->id.name, gid);
  if (auto_commit) {
    m.auto_poll = member::in_flight{label, *key};
    ++auto_in_flight_[{label, *key}];
  }
  member* mp = &m;
  struct outcome {
    std::optional<storage::read_result> read;  // delivered
    std::int64_t start = 0;
    std::int64_t log_start = 0;
    std::int64_t end = -1;             // of what was read, delivered or not
    bool uncertain = false;            // not delivered, but its auto-commit may have applied (a submit that failed)
    std::optional<net::status> error;  // not delivered
  };
  const auto bug = cluster_.options().bugs.poll_unconfirmed            ? actors::poll_bug::unconfirmed
                   : cluster_.options().bugs.poll_recheck_after_commit ? actors::poll_bug::recheck_after_commit
                                                                       : actors::poll_bug::none;
  auto job = [](node_cluster* cl, std::size_t node_index, std::uint64_t partition_ns, actors::partition_replica* rep,
                actors::coordinators* coords, actors::coordinated_group grp, proto::PollRequest req,
                actors::poll_bug unconfirmed) -> task<outcome> {
    outcome out;
    auto planned = co_await actors::plan_member_poll(*coords, grp, std::move(req), 100);
    if (!planned) {
      out.error = actors::status_of_group(planned.error().code());
      co_return out;
    }
    if (cl->replica_at(node_index, partition_ns) != rep || rep->closing() || rep->group() == nullptr) {
      out.error = net::status::unavailable;
      co_return out;
    }
    storage::read_request q;
    out.log_start = rep->group()->log().log_start().value();
    out.start = std::max<std::int64_t>(planned->resume_at.value_or(0), out.log_start);
    q.offset = offset_t(out.start);
    q.max_bytes = 2048;
    auto got = co_await rep->read(q);
    if (!got) {
      out.error = net::status::unavailable;
      co_return out;
    }
    const bool data = got->batches > 0;
    if (data) {
      out.end = got->next_offset.value();
    }
    auto confirmed = co_await actors::confirm_member_poll(
        *coords, grp, *planned, data ? std::optional<std::int64_t>(got->next_offset.value()) : std::nullopt,
        unconfirmed);
    if (!confirmed) {
      out.error = actors::status_of_group(confirmed.error().code());
      out.uncertain = data && planned->auto_commit && !refused_for_sure(*out.error);
      co_return out;
    }
    out.read = std::move(*got);
    co_return out;
  };
  spawn(job(&cluster_, *at, ns, r, cluster_.coordinators_at(*at), *g, std::move(rq), bug),
        [this, mp, key = *key, issued = now, owned, generation = m.generation, node = *at, label, grp = *g, auto_commit,
         attempt = m.attempt, alive = alive_](outcome got) {
          if (!*alive) {
            return;
          }
          const bool current = mp->attempt == attempt;  // (else given up: what the server did still counts)
          if (cluster_.debug()) {
            fmt::print("{} member {} poll of {} (issued {}, node {}, generation {}): start {} end {} {}{}\n",
                       cluster_.now(), mp->id, key.describe(), issued, node + 1, generation, got.start, got.end,
                       got.error ? fmt::format("refused {}", static_cast<int>(*got.error)) : std::string("delivered"),
                       got.uncertain ? " (uncertain)" : "");
          }
          if (current && auto_commit) {
            --auto_in_flight_[{label, key}];  // (given up, it was counted out then)
          }
          if (current) {
            mp->busy = false;
          }
          if (got.uncertain) {
            cluster_.checker().on_group_uncertain(label, key);
          }
          if (got.error) {
            if (current && (*got.error == net::status::not_owner || *got.error == net::status::stale_generation ||
                            *got.error == net::status::unknown_member)) {
              ++zombie_refusals_;
              mp->beat_at = cluster_.now();  // its assignment moved: ask again
            }
            return;
          }
          if (!got.read || got.read->batches == 0) {
            return;
          }
          std::int64_t first = -1;
          std::int64_t end = 0;
          for (const auto& v : got.read->batch_views()) {
            std::int64_t offset = v.base_offset().value();
            for (const auto& [id, tag] : records_in(v.bytes())) {
              cluster_.checker().on_read(cluster_.now(), static_cast<std::uint32_t>(node + 1), key, offset, id, tag);
              if (offset >= got.start && first < 0) {
                first = offset;
              }
              ++group_records_;
              ++offset;
            }
            end = offset;
          }
          // Another member's auto-commit poll in flight may have committed past what the group was delivered.
          const bool others_in_flight = auto_in_flight_[{label, key}] > 0;
          cluster_.checker().on_group_delivery(issued, cluster_.now(), label, mp->id, generation, key, owned,
                                               first < 0 ? got.start : first, end, got.log_start, others_in_flight);
          if (!auto_commit && current) {
            // The member commits what it read, once it has it (its outcome does not matter here: the next poll
            // starts where the group is).
            commit_read(*mp, node, grp, generation, key.partition, end);
          }
        });
}

void node_workload::commit_read(member& m, std::size_t node, const actors::coordinated_group& g,
                                std::uint64_t generation, std::uint32_t partition, std::int64_t next) {
  actors::coordinators* c = cluster_.coordinators_at(node);
  if (c == nullptr) {
    return;
  }
  proto::GroupCommitRequest commit;
  commit.mutable_stream()->set_id(g.id.stream_id);
  commit.mutable_topic()->set_id(g.id.topic_id);
  commit.mutable_group()->set_id(g.id.group_id);
  commit.mutable_member()->set_member_id(m.id);
  commit.mutable_member()->set_generation(generation);
  auto* o = commit.add_offsets();
  o->set_partition_id(partition);
  o->set_offset(static_cast<std::uint64_t>(next));
  auto job = [](actors::coordinators* coords, actors::coordinated_group grp, std::string header,
                std::uint64_t conn) -> task<void> {
    (void)co_await actors::coordinate(*coords, grp, static_cast<std::uint16_t>(net::api::group_commit),
                                      std::move(header), conn);
  };
  spawn(job(c, g, commit.SerializeAsString(), actors::connection_key(node + 1, m.conn)), [] {});
}

bool node_workload::groups_caught_up(std::string* why) const {
  for (const auto& m : members_) {
    if (!m->group || !m->joined || !groups_.contains(*m->group)) {
      continue;
    }
    const auto [sid, tid, gid] = *m->group;
    const auto created = groups_.at(*m->group);
    const actors::coordinators* c = nullptr;
    std::optional<actors::coordinated_group> g;
    for (std::size_t i = 0; i < cluster_.node_count() && !g; ++i) {
      c = cluster_.coordinators_at(i);
      auto v = cluster_.view_at(i);
      if (c != nullptr && v) {
        g = actors::find_coordinated_group(*v, sid, tid, gid);
      }
    }
    if (!g) {
      continue;
    }
    const actors::group_state* state = actors::coordinated_state(c->machine(c->index_for(g->key())), *g);
    for (std::uint32_t p = 0; p < g->id.partitions; ++p) {
      const auto key = current(sid, tid, created, p);
      if (!key) {
        continue;
      }
      const std::int64_t end = committed_end(*key);
      const auto committed = state == nullptr ? std::nullopt : state->committed(p);
      if (end > 0 && (!committed || static_cast<std::int64_t>(*committed) < end)) {
        if (why != nullptr) {
          *why = fmt::format("group {}/{}/{}: partition {} committed {} of {} ({} members)", sid, tid, g->id.name, p,
                             committed ? fmt::format("{}", *committed) : std::string("none"), end,
                             state == nullptr ? 0 : state->members());
        }
        return false;
      }
    }
  }
  return true;
}

void node_workload::step_producer(producer& p) {
  if (p.in_flight && cluster_.now() - p.sent_at > request_timeout_ticks) {
    p.in_flight = false;  // given up: sent again below
    ++p.attempt;
    ++retries_;
  }
  if (p.in_flight || cluster_.now() < p.retry_at) {
    return;
  }
  if (p.produce) {
    // Its partition gone (deleted, or another incarnation now): never acknowledged, and never will be.
    const auto& k = p.produce->key;
    const auto now = current(k.stream, k.topic, k.topic_created_ms, k.partition);
    if (!now || now->incarnation != k.incarnation) {
      p.produce.reset();
      return;
    }
  } else {
    if (p.left == 0 || incarnations_.empty()) {
      return;
    }
    std::vector<partition_key> open;
    for (const auto& [k, inc] : incarnations_) {
      const auto& [sid, tid, created, part] = k;
      if (!frozen(sid, tid)) {
        open.push_back(partition_key{sid, tid, created, part, inc});
      }
    }
    if (open.empty()) {
      return;
    }
    const partition_key key = open[rng_.below(open.size())];
    producer::pending w;
    w.key = key;
    w.ns = actors::partition_namespace(key.stream, key.topic, key.partition);
    w.records = 1 + static_cast<std::uint32_t>(rng_.below(3));
    auto& seq = p.next_sequence[key];
    w.first = record_id{p.id, seq};
    storage::batch_builder b;
    b.producer(static_cast<std::int64_t>(p.id), 0, static_cast<std::int32_t>(seq));
    for (std::uint32_t i = 0; i < w.records; ++i) {
      b.add(key_of(record_id{p.id, seq + i}), key.tag() + "|" + std::string(rng_.below(200), 'v'));
    }
    seq += w.records;
    auto built = b.build();
    RILL_ASSERT(built.has_value());
    w.batch = std::move(*built);
    p.produce = std::move(w);
    --p.left;
  }
  const auto at = primary_of(p.produce->key);
  if (!at) {
    p.retry_at = cluster_.now() + 10;
    return;
  }
  actors::partition_replica* r = cluster_.replica_at(*at, p.produce->ns);
  auto batches = storage::validated_batches::validate(p.produce->batch, 1 << 20);
  RILL_ASSERT(batches.has_value(), "{}", batches ? "" : batches.error().message());
  p.in_flight = true;
  p.sent_at = cluster_.now();
  producer* pp = &p;
  if (cluster_.debug()) {
    fmt::print("{} produce {} p{}.{} x{} to node {} (group {:#x}, view {})\n", cluster_.now(),
               p.produce->key.describe(), p.produce->first.producer, p.produce->first.sequence, p.produce->records,
               *at + 1, r->options().group.value(), r->group()->replica().view().value());
  }
  spawn(r->produce(std::make_shared<storage::validated_batches>(std::move(*batches))),
        [this, pp, attempt = p.attempt, alive = alive_](expected<actors::partition_replica::produced> got) {
          if (!*alive || pp->attempt != attempt || !pp->in_flight) {
            return;
          }
          pp->in_flight = false;
          if (!got) {
            if (cluster_.debug()) {
              fmt::print("{} produce p{}.{} failed: {}\n", cluster_.now(), pp->produce->first.producer,
                         pp->produce->first.sequence, got.error().message());
            }
            ++retries_;
            pp->retry_at = cluster_.now() + 5 + rng_.below(50);  // sent again, the same sequences
            return;
          }
          RILL_ASSERT(got->base_offsets.size() == 1);
          if (cluster_.debug()) {
            fmt::print("{} acked p{}.{} at {}\n", cluster_.now(), pp->produce->first.producer,
                       pp->produce->first.sequence, got->base_offsets.front());
          }
          cluster_.checker().on_ack(cluster_.now(), pp->produce->key, pp->produce->first, got->base_offsets.front(),
                                    pp->produce->records);
          ++produced_;
          pp->produce.reset();
        });
}

void node_workload::step_consumer(consumer& c) {
  if (c.busy && cluster_.now() - c.busy_since > request_timeout_ticks) {
    c.busy = false;  // given up: a reset it was making may still be made
    ++c.attempt;
    if (c.resetting && c.on) {
      c.reset_pending = c.resetting;
      cluster_.checker().on_offset_reset_unknown(c.name, *c.on, *c.resetting);
    }
  }
  if (c.busy || cluster_.now() < c.next_at || incarnations_.empty()) {
    return;
  }
  c.next_at = cluster_.now() + 20 + rng_.below(40);
  const bool gone =
      !c.on || !current(c.on->stream, c.on->topic, c.on->topic_created_ms, c.on->partition) ||
      current(c.on->stream, c.on->topic, c.on->topic_created_ms, c.on->partition)->incarnation != c.on->incarnation;
  if (gone) {
    c.reset_pending.reset();
  }
  if (gone || (!c.reset_pending && rng_.below(10) == 0)) {
    auto it = incarnations_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng_.below(incarnations_.size())));
    const auto& [sid, tid, created, part] = it->first;
    c.on = partition_key{sid, tid, created, part, it->second};
  }
  const std::uint64_t ns = actors::partition_namespace(c.on->stream, c.on->topic, c.on->partition);
  const auto at = any_primary_of(*c.on);
  if (!at) {
    return;
  }
  actors::partition_replica* r = cluster_.replica_at(*at, ns);
  if (r->stale_offset_refusal()) {
    return;  // a new primary still applying what its predecessors committed
  }
  consensus::partition_group* g = r->group();
  const auto stored = g->machine().consumer_offset(c.name);
  cluster_.checker().on_offset_read(cluster_.now(), c.name, *c.on, stored);
  auto& log = g->log();
  storage::read_request rq;
  rq.offset = offset_t(std::max<std::int64_t>(stored.value_or(0), log.log_start().value()));
  rq.max_bytes = 2048;
  c.busy = true;
  c.busy_since = cluster_.now();
  consumer* cp = &c;
  const partition_key key = *c.on;
  const auto node = static_cast<std::uint32_t>(*at + 1);
  // The replica may close, even go, while the read is in flight: it is looked up again before the store.
  const std::uint64_t issued = cluster_.now();
  auto job = [](node_cluster* cl, std::size_t node_index, std::uint64_t partition_ns, actors::partition_replica* rep,
                storage::read_request q, std::string name, bool rewind,
                std::int64_t back_to) -> task<expected<std::pair<storage::read_result, bool>>> {
    RILL_CO_TRY(got, co_await rep->read(q));
    if (cl->replica_at(node_index, partition_ns) != rep || rep->closing()) {
      co_return rill::unexpected(make_error_code(net::status::unavailable), "the replica closed");
    }
    if (rewind) {
      auto reset = co_await rep->store_offset(name, back_to);  // on purpose: may move back
      co_return std::pair{std::move(got), reset.has_value()};
    }
    if (got.batches > 0) {
      auto committed = co_await rep->commit_offset(name, got.next_offset.value());
      co_return std::pair{std::move(got), committed.has_value()};
    }
    co_return std::pair{std::move(got), false};
  };
  const bool rewind = c.reset_pending || rng_.below(12) == 0;
  const std::int64_t back_to =
      c.reset_pending ? *c.reset_pending : std::max<std::int64_t>(log.log_start().value(), stored.value_or(0) / 2);
  c.resetting = rewind ? std::optional<std::int64_t>(back_to) : std::nullopt;
  spawn(job(&cluster_, *at, ns, r, rq, c.name, rewind, back_to),
        [this, cp, key, node, rewind, back_to, issued, attempt = c.attempt,
         alive = alive_](expected<std::pair<storage::read_result, bool>> got) {
          if (!*alive || cp->attempt != attempt) {
            return;
          }
          cp->busy = false;
          if (!got) {
            return;
          }
          const auto& [read, stored_ok] = *got;
          if (cluster_.debug()) {
            auto* rep =
                cluster_.replica_at(node - 1, actors::partition_namespace(key.stream, key.topic, key.partition));
            if (rep != nullptr && rep->group() != nullptr) {
              const auto& rr = rep->group()->replica();
              fmt::print(
                  "{} consumer poll of {} at node {}: hw {} (view {} op {} commit_min {} commit_max {} log "
                  "committed {})\n",
                  cluster_.now(), key.describe(), node, read.high_watermark.value(), rr.view().value(), rr.op().value(),
                  rr.commit_min().value(), rr.commit_max().value(), rep->group()->log().committed().value());
            }
          }
          cluster_.checker().on_poll(issued, node, key, read.high_watermark.value());
          if (rewind && !stored_ok) {
            cp->reset_pending = back_to;
            cluster_.checker().on_offset_reset_unknown(cp->name, key, back_to);
          } else if (rewind) {
            cp->reset_pending.reset();
          }
          for (const auto& v : read.batch_views()) {
            std::int64_t offset = v.base_offset().value();
            for (const auto& [id, tag] : records_in(v.bytes())) {
              cluster_.checker().on_read(cluster_.now(), node, key, offset, id, tag);
              ++records_read_;
              ++offset;
            }
          }
          if (stored_ok) {
            cluster_.checker().on_offset_stored(cluster_.now(), cp->name, key,
                                                rewind ? back_to : read.next_offset.value(), rewind);
          }
        });
}

}  // namespace rill::simulation
