#pragma once
// group_consumer: one member of a consumer group, reading the partitions the group assigns it, in one or more
// topics (a group per topic, all with the same name).
//
// Threads: a background thread with its own connection joins and heartbeats (every heartbeat_interval, a third of
// the session timeout by default) and keeps the latest assignment; poll(), commit() and close() run on the caller's
// thread over a second connection. The caller's thread is the only one that reads, so the hand-over of a revoked
// partition is done there: at the next poll() it stops reading the partition, commits its position (auto_commit),
// and releases it (through the heartbeat connection, which holds the member's session), after which the group gives
// it to its new owner.
//
// Positions: a partition newly assigned is read from the group's committed offset (NEXT); after that from the
// position after the last record poll() returned, for as long as the member keeps it (a partition that went to
// another member and came back is read from the group's offset again). commit() stores those positions; with
// auto_commit they are committed every auto_commit_interval, before a partition is released, and at close(). Delivery
// is at least once: what was returned but not committed is read again by the partition's next owner.
//
// If the member's session ended (a long pause, a server restart that outlived it), the background thread joins
// again under the same member id; the partitions it then owns are read from the group's offsets.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/client.h"

namespace rill::net {

struct group_subscription {
  proto::Identifier stream;
  proto::Identifier topic;
};

struct group_consumer_options {
  client_options connection;
  std::string group;
  std::vector<group_subscription> topics;
  std::optional<std::string> member_id;  // a stable id (rejoin as the same member); otherwise the server makes one
  bool create_group = true;              // create the group with `config` in a topic that lacks it
  proto::GroupConfig config;
  bool auto_commit = true;
  std::chrono::milliseconds auto_commit_interval{1000};
  std::chrono::milliseconds heartbeat_interval{0};  // 0: a third of the group's session timeout
  std::uint32_t max_records = 1000;
  std::uint64_t max_bytes = 1024 * 1024;
  std::chrono::milliseconds max_wait{500};  // a poll with nothing new waits this long
};

class group_consumer {
 public:
  // Connects twice, creates the groups where asked, joins, and starts heartbeating.
  static expected<std::unique_ptr<group_consumer>> create(group_consumer_options options);
  ~group_consumer();
  group_consumer(const group_consumer&) = delete;
  group_consumer& operator=(const group_consumer&) = delete;

  // Records of the partitions assigned to this member (empty when nothing arrived within max_wait). A record's
  // `subscription` is the index of its topic in options.topics. At most `max_records` (0: options.max_records):
  // the position moves past exactly what is returned.
  expected<std::vector<record>> poll(std::uint32_t max_records = 0);

  // The same without copying: `on` sees each record where it lies (in the reply, or in the decompressed batch),
  // valid during the call. Returns how many it saw; an error `on` returns ends the poll (positions stay where they
  // were for that partition).
  struct origin {
    std::uint32_t subscription = 0;
    std::uint32_t partition = 0;
    std::uint64_t generation = 0;
  };
  using visitor =
      std::function<expected<void>(const origin& from, const storage::batch_view&, const storage::record_view&)>;
  expected<std::size_t> poll_each(const visitor& on, std::uint32_t max_records = 0);
  // Commits the position after every record poll() returned, for the partitions this member still owns.
  expected<void> commit();
  // Stops heartbeating, commits (auto_commit) and leaves the groups. Called by the destructor.
  expected<void> close();

  struct assignment {
    std::string member_id;
    std::uint64_t generation = 0;
    std::vector<std::uint32_t> owned;
    std::vector<std::uint64_t> acquired;  // per owned partition: the generation it came to this member
    std::vector<std::uint32_t> revoking;
  };
  // Per subscription, as the background thread last heard it.
  [[nodiscard]] std::vector<assignment> assignments() const;

 private:
  struct subscription {
    group_subscription where;
    proto::Identifier group;
    // Shared with the heartbeat thread (under mutex_).
    assignment latest;
    std::uint64_t joins = 0;  // bumped at every (re)join: positions from before are forgotten
    // The poll thread's own.
    std::uint64_t joins_seen = 0;
    struct position_at {
      std::uint64_t offset = 0;    // the next offset to read
      std::uint64_t acquired = 0;  // of the ownership it was read under: stale once the partition changed hands
    };
    std::map<std::uint32_t, position_at> position;     // per partition read so far
    std::map<std::uint32_t, std::uint64_t> committed;  // what this member last committed
  };

  explicit group_consumer(group_consumer_options options);
  expected<void> join(subscription& s);
  void heartbeat_loop();
  // Brings the poll thread's view up to date: forgets positions of partitions gone (or gone and back), releases
  // revoked ones. Returns the view of each subscription this poll works with.
  expected<std::vector<assignment>> reconcile();
  expected<void> commit_subscription(subscription& s, const assignment& a);
  // Asks for the member's assignment now; false when the group no longer knows the member (a rejoin is due).
  expected<bool> refresh(subscription& s);
  // Takes `a` as the subscription's latest view unless it is older than the one there.
  void update_latest(subscription& s, const assignment& a);
  [[nodiscard]] std::chrono::milliseconds interval() const noexcept {
    return std::chrono::milliseconds(interval_ms_.load(std::memory_order_relaxed));
  }

  group_consumer_options options_;
  std::unique_ptr<client> main_;  // polls, commits, leaves (the caller's thread)
  std::unique_ptr<client> beat_;  // joins and heartbeats, releases too: the member's session connection
  std::mutex beat_mutex_;         // beat_ is used by both threads, one call at a time
  std::vector<subscription> subs_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::thread heartbeat_;
  bool stopping_ = false;
  bool rejoin_now_ = false;  // the poll thread found the member unknown: the heartbeat thread joins at once
  bool closed_ = false;
  std::atomic<std::int64_t> interval_ms_{1000};
  std::size_t next_ = 0;            // round robin over the readable partitions
  std::vector<std::byte> scratch_;  // decompressed batches
  std::chrono::steady_clock::time_point last_commit_ = std::chrono::steady_clock::now();
};

}  // namespace rill::net
