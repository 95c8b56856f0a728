// group_consumer: a consumer-group member over two connections (see group_consumer.h).
#include "net/group_consumer.h"

#include <algorithm>
#include <cctype>

#include <fmt/core.h>

namespace rill::net {
namespace {

bool is(const rill::error& e, status s) {
  return e.code() == make_error_code(s);
}

// Errors that mean "your view of the group is out of date", not "something broke".
bool is_membership_error(const rill::error& e) {
  return is(e, status::unknown_member) || is(e, status::stale_generation) || is(e, status::not_owner);
}

bool contains(const std::vector<std::uint32_t>& v, std::uint32_t p) {
  return std::find(v.begin(), v.end(), p) != v.end();
}

group_consumer::assignment from_proto(const std::string& member, const proto::GroupAssignment& a) {
  group_consumer::assignment out;
  out.member_id = member;
  out.generation = a.generation();
  out.owned.assign(a.owned().begin(), a.owned().end());
  out.acquired.assign(a.acquired().begin(), a.acquired().end());
  out.acquired.resize(out.owned.size(), 0);
  out.revoking.assign(a.revoking().begin(), a.revoking().end());
  return out;
}

// The generation `p` came to the member in, if it owns `p`.
std::optional<std::uint64_t> acquired_of(const group_consumer::assignment& a, std::uint32_t p) {
  for (std::size_t i = 0; i < a.owned.size(); ++i) {
    if (a.owned[i] == p) {
      return a.acquired[i];
    }
  }
  return std::nullopt;
}

}  // namespace

group_consumer::group_consumer(group_consumer_options options) : options_(std::move(options)) {}

expected<std::unique_ptr<group_consumer>> group_consumer::create(group_consumer_options options) {
  if (options.topics.empty()) {
    return rill::unexpected(make_error_code(status::bad_header), "a group consumer subscribes to at least one topic");
  }
  const bool name_ok = !options.group.empty() && options.group.size() <= 255 &&
                       std::all_of(options.group.begin(), options.group.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                       });
  if (!name_ok) {
    return rill::unexpected(make_error_code(status::invalid_name),
                            fmt::format("group name '{}': 1-255 bytes of [A-Za-z0-9._-]", options.group));
  }
  std::unique_ptr<group_consumer> g(new group_consumer(std::move(options)));
  RILL_TRY(main, client::connect(g->options_.connection));
  RILL_TRY(beat, client::connect(g->options_.connection));
  g->main_ = std::move(main);
  g->beat_ = std::move(beat);
  for (const auto& t : g->options_.topics) {
    subscription s;
    s.where = t;
    s.group = by_name(g->options_.group);
    if (g->options_.create_group) {
      auto found = g->main_->get_group(t.stream, t.topic, s.group);
      if (!found && is(found.error(), status::group_not_found)) {
        auto made = g->main_->create_group(t.stream, t.topic, g->options_.group, g->options_.config);
        if (!made && !is(made.error(), status::already_exists)) {
          return rill::unexpected(std::move(made).error());
        }
      } else if (!found) {
        return rill::unexpected(std::move(found).error());
      }
    }
    g->subs_.push_back(std::move(s));
  }
  for (auto& s : g->subs_) {
    RILL_TRY_VOID(g->join(s));
  }
  g->heartbeat_ = std::thread([p = g.get()] { p->heartbeat_loop(); });
  return g;
}

group_consumer::~group_consumer() {
  (void)close();
}

expected<void> group_consumer::join(subscription& s) {
  std::optional<std::string> wanted = options_.member_id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!s.latest.member_id.empty()) {
      wanted = s.latest.member_id;  // a rejoin keeps the id the group knows this member by
    }
  }
  proto::GroupJoinReply joined;
  proto::GroupAssignment a;
  {
    std::lock_guard<std::mutex> beat(beat_mutex_);
    RILL_TRY(j, beat_->join_group(s.where.stream, s.where.topic, s.group, wanted));
    RILL_TRY(first, beat_->heartbeat_group(s.where.stream, s.where.topic, s.group, j.member_id()));
    joined = std::move(j);
    a = std::move(first);
  }
  interval_ms_ = options_.heartbeat_interval.count() > 0 ? options_.heartbeat_interval.count()
                                                         : std::max<std::int64_t>(joined.session_timeout_ms() / 3, 10);
  std::lock_guard<std::mutex> lock(mutex_);
  s.latest = from_proto(joined.member_id(), a);
  ++s.joins;
  wake_.notify_all();
  return {};
}

void group_consumer::update_latest(subscription& s, const assignment& a) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Replies may arrive out of order across the two threads: never go back to an older generation.
  if (s.latest.member_id == a.member_id && a.generation >= s.latest.generation) {
    s.latest = a;
    wake_.notify_all();
  }
}

void group_consumer::heartbeat_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, interval(), [this] { return stopping_ || rejoin_now_; });
    if (stopping_) {
      break;
    }
    rejoin_now_ = false;
    for (auto& s : subs_) {
      const std::string member = s.latest.member_id;
      lock.unlock();
      auto a = [&] {
        std::lock_guard<std::mutex> beat(beat_mutex_);
        return beat_->heartbeat_group(s.where.stream, s.where.topic, s.group, member);
      }();
      if (!a && is(a.error(), status::unknown_member)) {
        (void)join(s);  // the session ended: join again as the same member
      } else if (a) {
        update_latest(s, from_proto(member, *a));
      }
      lock.lock();
    }
  }
}

std::vector<group_consumer::assignment> group_consumer::assignments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<assignment> out;
  for (const auto& s : subs_) {
    out.push_back(s.latest);
  }
  return out;
}

expected<bool> group_consumer::refresh(subscription& s) {
  std::string member;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    member = s.latest.member_id;
  }
  auto a = main_->group_assignment(s.where.stream, s.where.topic, s.group, member);
  if (!a) {
    if (!is_membership_error(a.error())) {
      return rill::unexpected(std::move(a).error());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    rejoin_now_ = true;  // unknown member: the heartbeat thread joins again now
    wake_.notify_all();
    return false;
  }
  update_latest(s, from_proto(member, *a));
  return true;
}

expected<void> group_consumer::commit_subscription(subscription& s, const assignment& a) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> offsets;
    assignment now = a;
    if (attempt > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      now = s.latest;
    }
    for (const auto& [p, pos] : s.position) {
      auto c = s.committed.find(p);
      if (acquired_of(now, p) == pos.acquired && (c == s.committed.end() || c->second != pos.offset)) {
        offsets.emplace_back(p, pos.offset);
      }
    }
    if (offsets.empty()) {
      return {};
    }
    proto::GroupMember m;
    m.set_member_id(now.member_id);
    m.set_generation(now.generation);
    auto r = main_->commit_group(s.where.stream, s.where.topic, s.group, m, offsets);
    if (r) {
      for (const auto& [p, o] : offsets) {
        s.committed[p] = o;
      }
      return {};
    }
    if (is(r.error(), status::offset_regression)) {
      // The group is ahead of what this member read (it cannot be, unless its view was stale): read on from the
      // group's offsets.
      s.position.clear();
      s.committed.clear();
      return {};
    }
    if (!is_membership_error(r.error())) {
      return r;
    }
    RILL_TRY(known, refresh(s));  // a new generation: commit what this member still owns under it
    if (!known) {
      break;
    }
  }
  return {};  // what could not be committed is read again by the partition's next owner (at least once)
}

expected<std::vector<group_consumer::assignment>> group_consumer::reconcile() {
  std::vector<assignment> views;
  for (auto& s : subs_) {
    assignment a;
    std::uint64_t joins = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      a = s.latest;
      joins = s.joins;
    }
    if (s.joins_seen != joins) {
      s.position.clear();  // a new membership: the group's offsets say where to go on
      s.committed.clear();
      s.joins_seen = joins;
    }
    // A position holds only for the ownership it was read under.
    std::erase_if(s.position, [&](const auto& kv) { return acquired_of(a, kv.first) != kv.second.acquired; });
    std::erase_if(s.committed, [&](const auto& kv) { return !s.position.contains(kv.first); });
    if (!a.revoking.empty()) {
      // Hand-over: this thread no longer reads them; their positions go to the group first.
      if (options_.auto_commit) {
        RILL_TRY_VOID(commit_subscription(s, a));
      }
      auto r = [&] {
        std::lock_guard<std::mutex> beat(beat_mutex_);
        return beat_->heartbeat_group(s.where.stream, s.where.topic, s.group, a.member_id, a.revoking);
      }();
      if (!r && !is_membership_error(r.error())) {
        return rill::unexpected(std::move(r).error());
      }
      for (auto p : a.revoking) {
        s.position.erase(p);
        s.committed.erase(p);
      }
      if (r) {
        a = from_proto(a.member_id, *r);
        update_latest(s, a);
      } else {
        (void)refresh(s);
        std::lock_guard<std::mutex> lock(mutex_);
        a = s.latest;
      }
      std::erase_if(s.position, [&](const auto& kv) { return acquired_of(a, kv.first) != kv.second.acquired; });
    }
    views.push_back(std::move(a));
  }
  return views;
}

expected<void> group_consumer::commit() {
  if (closed_) {
    return {};
  }
  last_commit_ = std::chrono::steady_clock::now();
  for (auto& s : subs_) {
    assignment a;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      a = s.latest;
    }
    RILL_TRY_VOID(commit_subscription(s, a));
  }
  return {};
}

expected<std::vector<record>> group_consumer::poll(std::uint32_t max_records) {
  std::vector<record> out;
  auto seen = poll_each(
      [&](const origin& from, const storage::batch_view& v, const storage::record_view& r) -> expected<void> {
        RILL_TRY(rec, copy_record(from.partition, v, r));
        rec.subscription = from.subscription;
        rec.generation = from.generation;
        out.push_back(std::move(rec));
        return {};
      },
      max_records);
  if (!seen) {
    return rill::unexpected(std::move(seen).error());
  }
  return out;
}

expected<std::size_t> group_consumer::poll_each(const visitor& on, std::uint32_t max_records) {
  const std::uint32_t limit = max_records > 0 ? max_records : options_.max_records;
  if (closed_) {
    return rill::unexpected(make_error_code(status::unavailable), "the group consumer is closed");
  }
  if (options_.auto_commit && std::chrono::steady_clock::now() - last_commit_ >= options_.auto_commit_interval) {
    RILL_TRY_VOID(commit());  // what the previous polls returned counts as consumed
  }
  RILL_TRY(views, reconcile());
  struct readable {
    std::size_t sub;
    std::uint32_t partition;
    std::uint64_t acquired;
  };
  std::vector<readable> ready;
  for (std::size_t i = 0; i < views.size(); ++i) {
    for (std::size_t j = 0; j < views[i].owned.size(); ++j) {
      if (!contains(views[i].revoking, views[i].owned[j])) {
        ready.push_back(readable{i, views[i].owned[j], views[i].acquired[j]});
      }
    }
  }
  const auto long_wait = std::min(options_.max_wait, interval());
  auto pause = [&] {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, long_wait);  // until the heartbeat thread hears something new, or the wait ends
  };
  if (ready.empty()) {
    pause();
    return std::size_t{0};
  }
  // Each readable partition once, without waiting; the last one tried waits for data.
  for (std::size_t k = 0; k < ready.size(); ++k) {
    const auto& r = ready[(next_ + k) % ready.size()];
    subscription& s = subs_[r.sub];
    const assignment& view = views[r.sub];
    proto::PollRequest req;
    *req.mutable_stream() = s.where.stream;
    *req.mutable_topic() = s.where.topic;
    req.set_partition_id(r.partition);
    auto pos = s.position.find(r.partition);
    if (pos != s.position.end()) {
      req.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
      req.mutable_strategy()->set_value(pos->second.offset);
    } else {
      req.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
    }
    req.mutable_consumer()->set_group(options_.group);
    req.mutable_member()->set_member_id(view.member_id);
    req.mutable_member()->set_generation(view.generation);
    req.set_max_records(limit);
    req.set_max_bytes(options_.max_bytes);
    req.set_max_wait_ms(k + 1 == ready.size() ? static_cast<std::uint32_t>(long_wait.count()) : 0);
    auto got = main_->poll(req);
    if (!got) {
      if (is_membership_error(got.error())) {
        RILL_TRY(known, refresh(s));
        if (!known) {
          pause();  // a rejoin is under way on the heartbeat thread
        }
        return std::size_t{0};
      }
      if (is(got.error(), status::offset_out_of_range) && pos != s.position.end()) {
        s.position.erase(pos);  // retention passed it: go on from the group's offset (kept within the log)
        return std::size_t{0};
      }
      return rill::unexpected(std::move(got).error());
    }
    if (got->header.batches() == 0) {
      if (pos == s.position.end()) {
        s.position[r.partition] = subscription::position_at{got->header.start_offset(), r.acquired};
      }
      continue;
    }
    const origin from{static_cast<std::uint32_t>(r.sub), r.partition, view.generation};
    const auto start = static_cast<std::int64_t>(got->header.start_offset());
    std::size_t n = 0;
    std::int64_t last = -1;
    RILL_TRY_VOID(for_each_record(
        got->batches, scratch_, [&](const storage::batch_view& v, const storage::record_view& rec) -> expected<void> {
          const std::int64_t offset = v.base_offset().value() + rec.offset_delta;
          if (offset < start || n >= limit) {
            return {};  // before the position the poll resolved to, or beyond what the caller takes
          }
          if (auto taken = on(from, v, rec); !taken) {
            return taken;
          }
          ++n;
          last = offset;
          return {};
        }));
    // After the last record seen (a whole batch may hold more than the limit).
    s.position[r.partition] = subscription::position_at{
        n == limit ? static_cast<std::uint64_t>(last + 1) : got->header.next_offset(), r.acquired};
    next_ = (next_ + k + 1) % ready.size();
    return n;
  }
  return std::size_t{0};
}

expected<void> group_consumer::close() {
  if (closed_) {
    return {};
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (heartbeat_.joinable()) {
    heartbeat_.join();
  }
  expected<void> result;
  if (options_.auto_commit && main_) {
    result = commit();
  }
  closed_ = true;
  for (auto& s : subs_) {
    if (!s.latest.member_id.empty() && main_) {
      auto left = main_->leave_group(s.where.stream, s.where.topic, s.group, s.latest.member_id);
      if (!left && result && !is(left.error(), status::unknown_member)) {
        result = std::move(left);
      }
    }
  }
  return result;
}

}  // namespace rill::net
