// consensus::partition_group: three replicas of one partition, each on its own simulated disk, messages through a
// queue: produce through the primary, every replica's log holds the committed batches byte for byte, a backup
// refuses submits, the primary's loss moves the group to another node with nothing acknowledged lost, and a retry
// of an acknowledged batch there is answered with its original offsets.
#include <boost/test/unit_test.hpp>

#include <deque>
#include <map>
#include <set>

#include <fmt/core.h>

#include "base/clock.h"
#include "base/task.h"
#include "consensus/partition_group.h"
#include "simulation/sim_disk.h"
#include "storage/errc.h"
#include "storage/io/run.h"
#include "storage/record_batch_builder.h"
#include "storage/validated_batches.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
constexpr std::uint64_t group_id = 0x51;

template <class T>
std::string why(const expected<T>& r) {
  return r.has_value() ? std::string() : r.error().message();
}
template <class T>
std::string why_not(const expected<T>& r) {
  return why(r);
}

struct parcel {
  node_t from;
  node_t to;
  group_t group;
  message m;
};

struct nodes;

class queue_net final : public host_transport {
 public:
  queue_net(nodes& n, node_t from) : nodes_(n), from_(from) {}
  void send(node_t to, group_t group, message m) override;
  void send(node_t, const node_heartbeat&) override {}

 private:
  nodes& nodes_;
  node_t from_;
};

struct replica_node {
  std::unique_ptr<queue_net> net;
  std::unique_ptr<sim_disk> disk;
  storage::buffer_pool pool;
  manual_clock clk;
  storage::collecting_reporter reporter;
  std::unique_ptr<partition_group> g;
  std::size_t commits = 0;
};

struct nodes {
  explicit nodes(std::size_t n, std::uint64_t retention = 0, std::uint64_t slots = 64)
      : retention_bytes(retention), journal_slots(slots) {
    for (std::size_t i = 0; i < n; ++i) {
      auto r = std::make_unique<replica_node>();
      r->net = std::make_unique<queue_net>(*this, node_t(static_cast<std::uint32_t>(i + 1)));
      r->disk = std::make_unique<sim_disk>(300 + i);
      all.push_back(std::move(r));
      starts[i] = 0;
    }
    for (std::size_t i = 0; i < n; ++i) {
      start(i);
    }
  }
  ~nodes() {
    for (std::size_t i = 0; i < all.size(); ++i) {
      stop(i);
    }
  }
  partition_group_options options(std::size_t i) const {
    partition_group_options o;
    o.group = group_t(group_id);
    for (std::size_t k = 0; k < all.size(); ++k) {
      o.members.push_back(node_t(static_cast<std::uint32_t>(k + 1)));
    }
    o.self = node_t(static_cast<std::uint32_t>(i + 1));
    o.storage.files.journal = journal_options{journal_slots, 8 * 1024};
    o.storage.files.snapshot_bytes_max = 64 * 1024;
    o.seed = 1000 + i + 100 * starts.at(i);
    o.sessions_max = 2;
    o.recovering = recovering.contains(i);
    o.storage.transfer_bytes_max = 2 * 1024;  // several chunks per transfer
    o.storage.log.config.retention_bytes = retention_bytes;
    o.storage.log.config.segment_bytes = 1024 * 1024;  // the least allowed
    o.silence_ms = silence_ms;
    if (auto it = settings.find(i); it != settings.end()) {
      o.settings = it->second;
    }
    return o;
  }
  void start(std::size_t i) {
    ++starts[i];
    replica_node& r = *all.at(i);
    replica_node* self = &r;
    auto g = storage::io::run_task(*r.disk,
                                   partition_group::open(
                                       *r.disk, r.pool, r.clk, r.reporter, "/g", "/p", options(i), *r.net,
                                       [] { return std::int64_t{1'700'000'000'000}; }, [self] { ++self->commits; }));
    BOOST_REQUIRE(g.has_value());
    BOOST_REQUIRE_MESSAGE(g->has_value(), (g->has_value() ? "" : g->error().message()));
    r.g = std::move(**g);
  }
  // A crash: what was in flight is lost, what was synced stays.
  void stop(std::size_t i) {
    replica_node& r = *all.at(i);
    if (!r.g) {
      return;
    }
    r.disk->halt();
    while (r.disk->in_flight() > 0) {
      r.disk->poll(true);
    }
    (void)storage::io::run_task(*r.disk, r.g->close());
    r.g.reset();
    r.disk->crash();
    r.disk->restart_process();
  }
  void round() {
    for (auto& r : all) {
      if (r->g) {
        r->disk->advance_time(1'000'000);
        if (silence_ms > 0) {
          r->clk.advance(std::chrono::milliseconds(10));  // a round is a 10 ms tick
        }
        while (r->disk->poll(false) > 0) {
        }
      }
    }
    while (!queue.empty()) {
      parcel p = std::move(queue.front());
      queue.pop_front();
      auto& to = all.at(p.to.value() - 1);
      if (to->g && !cut.contains(p.to.value()) && !cut.contains(p.from.value())) {
        to->g->on_message(p.m);
      }
    }
    for (auto& r : all) {
      if (r->g) {
        r->g->tick();
      }
    }
  }
  // Rounds until `done` holds (at most n).
  template <class F>
  bool rounds_until(F done, int n = 2'000) {
    for (int i = 0; i < n; ++i) {
      if (done()) {
        return true;
      }
      round();
    }
    return done();
  }
  std::optional<std::size_t> primary() const {
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i]->g && all[i]->g->primary()) {
        return i;
      }
    }
    return std::nullopt;
  }

  std::vector<std::unique_ptr<replica_node>> all;
  std::deque<parcel> queue;
  std::set<std::uint32_t> cut;       // nodes whose messages are lost (both ways)
  std::set<std::size_t> recovering;  // formatted anew after losing their disk (at their next start)
  std::map<std::size_t, std::uint64_t> starts;
  std::uint64_t retention_bytes = 0;  // the topic's retention.bytes on every replica (0: none)
  std::uint64_t journal_slots = 64;
  std::map<std::size_t, partition_settings> settings;  // a node's configured partition settings (else the defaults)
  std::uint64_t silence_ms = 0;                        // partition_group_options::silence_ms (and the clocks move)
  // Bytes and messages sent to each node (by node id), and the most messages ever waiting in the queue.
  std::map<std::uint32_t, std::uint64_t> bytes_to;
  std::map<std::uint32_t, std::uint64_t> messages_to;
  std::size_t queue_max = 0;
};

void queue_net::send(node_t to, group_t group, message m) {
  BOOST_REQUIRE(group.value() == group_id);
  nodes_.bytes_to[to.value()] += m.h.size;
  ++nodes_.messages_to[to.value()];
  nodes_.queue.push_back({from_, to, group, std::move(m)});
  nodes_.queue_max = std::max(nodes_.queue_max, nodes_.queue.size());
}

std::vector<std::byte> batch(std::int64_t producer, std::int32_t sequence, std::string_view value) {
  storage::batch_builder b;
  if (producer >= 0) {
    b.producer(producer, 0, sequence);
  }
  b.add("k", value);
  auto built = b.build();
  BOOST_REQUIRE(built.has_value());
  auto v = storage::validated_batches::validate(std::move(*built), 1 << 20);
  BOOST_REQUIRE(v.has_value());
  return partition_machine::produce_request(v->bytes(), v->batches().front().crc_tail);
}

struct outcome {
  std::optional<expected<partition_submitted>> result;
};

void submit(partition_group& g, std::vector<std::byte> body, outcome& out) {
  spawn(g.submit(operation_produce_batch, std::move(body)),
        [&out](expected<partition_submitted> r) { out.result = std::move(r); });
}

// The committed batches of a replica's log from `from` (its log start when -1), as bytes.
std::vector<std::byte> committed_from(replica_node& r, std::int64_t from = -1) {
  auto& log = r.g->log();
  std::vector<std::byte> out;
  offset_t at = from < 0 ? log.log_start() : offset_t(from);
  while (at < log.committed()) {
    storage::read_request q;
    q.offset = at;
    q.max_bytes = 1 << 20;
    auto got = storage::io::run_task(*r.disk, log.read(q));
    BOOST_REQUIRE(got.has_value());
    BOOST_REQUIRE_MESSAGE(got->has_value(), why_not(*got));
    BOOST_REQUIRE((*got)->batches > 0u);
    const auto bytes = (*got)->bytes.span();
    out.insert(out.end(), bytes.begin(), bytes.end());
    at = (*got)->next_offset;
  }
  return out;
}

// The committed batches of a replica's log, as bytes.
std::vector<std::byte> committed_bytes(replica_node& r) {
  auto& log = r.g->log();
  storage::read_request q;
  q.offset = offset_t(0);
  q.max_bytes = 1 << 20;
  auto got = storage::io::run_task(*r.disk, log.read(q));
  BOOST_REQUIRE(got.has_value() && got->has_value());
  const auto bytes = (*got)->bytes.span();
  return std::vector<std::byte>(bytes.begin(), bytes.end());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(partition_group_suite)

BOOST_AUTO_TEST_CASE(produces_commit_on_a_quorum_and_every_log_holds_the_same_bytes) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  BOOST_TEST(p == 0u);  // members[0] is the preferred primary: view 0's
  // A backup takes no submit and names the primary.
  outcome refused;
  submit(*n.all[1]->g, batch(-1, -1, "x"), refused);
  BOOST_REQUIRE(refused.result.has_value());
  BOOST_TEST(!refused.result->has_value());
  BOOST_TEST(refused.result->error().message().find("node 1") != std::string::npos);

  std::vector<outcome> outs(6);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    submit(*n.all[p]->g, batch(7, static_cast<std::int32_t>(i), "value-" + std::to_string(i)), outs[i]);
  }
  BOOST_REQUIRE(n.rounds_until(
      [&] { return std::all_of(outs.begin(), outs.end(), [](const outcome& o) { return o.result.has_value(); }); }));
  for (std::size_t i = 0; i < outs.size(); ++i) {
    BOOST_REQUIRE_MESSAGE(outs[i].result->has_value(), why(*outs[i].result));
    auto r = partition_machine::decode_produce_reply((*outs[i].result)->reply);
    BOOST_REQUIRE(r);
    BOOST_TEST(r->base_offset == static_cast<std::int64_t>(i));  // submitted in order, stamped in order
  }
  // Every replica's log commits the same bytes (backups learn the commit from the next heartbeat).
  BOOST_REQUIRE(n.rounds_until([&] {
    return std::all_of(n.all.begin(), n.all.end(), [](const auto& r) { return r->g->machine().next_offset() == 6; });
  }));
  const auto primary_bytes = committed_bytes(*n.all[p]);
  BOOST_TEST(!primary_bytes.empty());
  for (auto& r : n.all) {
    BOOST_TEST((committed_bytes(*r) == primary_bytes));
  }
}

BOOST_AUTO_TEST_CASE(the_primary_crashes_another_node_leads_and_nothing_acknowledged_is_lost) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  std::size_t p = *n.primary();
  std::vector<outcome> outs(4);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    submit(*n.all[p]->g, batch(9, static_cast<std::int32_t>(i), "a"), outs[i]);
  }
  BOOST_REQUIRE(n.rounds_until(
      [&] { return std::all_of(outs.begin(), outs.end(), [](const outcome& o) { return o.result.has_value(); }); }));
  n.stop(p);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t q = *n.primary();
  BOOST_TEST(q != p);
  // A retry of an acknowledged batch is answered with its original offset; the next batch goes after it.
  outcome retry;
  outcome next;
  submit(*n.all[q]->g, batch(9, 3, "a"), retry);
  submit(*n.all[q]->g, batch(9, 4, "b"), next);
  BOOST_REQUIRE(n.rounds_until([&] { return retry.result.has_value() && next.result.has_value(); }));

  BOOST_REQUIRE_MESSAGE(retry.result->has_value(), why(*retry.result));
  BOOST_REQUIRE_MESSAGE(next.result->has_value(), why(*next.result));
  auto r = partition_machine::decode_produce_reply((*retry.result)->reply);
  BOOST_REQUIRE(r);
  BOOST_TEST((r->verdict == storage::producer_verdict::duplicate));
  BOOST_TEST(r->base_offset == 3);
  r = partition_machine::decode_produce_reply((*next.result)->reply);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->base_offset == 4);
  // The crashed node comes back, catches up by repair, and holds the same committed bytes.
  n.start(p);
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[p]->g->machine().next_offset() == 5; }));
  BOOST_REQUIRE(n.rounds_until([&] { return committed_bytes(*n.all[p]) == committed_bytes(*n.all[q]); }));
}

BOOST_AUTO_TEST_CASE(a_primary_cut_off_fails_its_submits_and_the_majority_goes_on) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  n.cut.insert(static_cast<std::uint32_t>(p + 1));
  outcome lost;
  submit(*n.all[p]->g, batch(-1, -1, "lost"), lost);
  BOOST_REQUIRE(n.rounds_until([&] { return lost.result.has_value(); }));
  BOOST_TEST(!lost.result->has_value());  // never acknowledged: no quorum had it
  BOOST_REQUIRE(n.rounds_until([&] {
    for (std::size_t i = 0; i < n.all.size(); ++i) {
      if (i != p && n.all[i]->g->primary()) {
        return true;
      }
    }
    return false;
  }));
  n.cut.clear();
  // Healed: one primary, and the old one follows it.
  BOOST_REQUIRE(n.rounds_until([&] {
    std::size_t primaries = 0;
    for (auto& r : n.all) {
      primaries += r->g->primary() ? 1 : 0;
    }
    return primaries == 1 && !n.all[p]->g->primary();
  }));
}

BOOST_AUTO_TEST_CASE(a_backup_that_stops_acknowledging_is_reported_lagging_until_it_acknowledges_again) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  outcome first;
  submit(*n.all[p]->g, batch(-1, -1, "a"), first);
  BOOST_REQUIRE(n.rounds_until([&] { return first.result.has_value(); }));
  BOOST_TEST(n.all[p]->g->lagging().empty());
  const std::size_t away = (p + 1) % 3;
  n.cut.insert(static_cast<std::uint32_t>(away + 1));
  outcome second;
  submit(*n.all[p]->g, batch(-1, -1, "b"), second);  // the other backup makes the quorum
  BOOST_REQUIRE(n.rounds_until([&] { return second.result.has_value(); }));
  for (std::uint64_t i = 0; i < partition_group::lag_ticks; ++i) {
    n.round();
  }
  const auto lagging = n.all[p]->g->lagging();
  BOOST_REQUIRE_EQUAL(lagging.size(), 1u);
  BOOST_TEST(lagging[0] == static_cast<replica_t>(away));
  BOOST_TEST(n.all[away]->g->lagging().empty());  // a backup reports nothing
  n.cut.clear();
  // Healed: it repairs what it missed (committed ops are not acknowledged again), and its acknowledgement of the
  // primary's probe clears it, with nothing produced.
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[away]->g->machine().next_offset() == 2; }));
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[p]->g->lagging().empty(); }, 1'000));
  BOOST_TEST(n.all[p]->g->probes() >= 1u);
  // A probe committed nothing a consumer sees.
  BOOST_TEST(n.all[p]->g->machine().next_offset() == 2);
}

// Submits `count` batches through the primary and waits until all are acknowledged.
constexpr std::uint64_t idle_sync_ticks_for_test = 100;  // partition_group's idle_sync_ticks

static void produce(nodes& n, std::size_t p, int count, std::string_view tag) {
  std::vector<outcome> outs(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < outs.size(); ++i) {
    submit(*n.all[p]->g, batch(-1, -1, fmt::format("{}-{}", tag, i)), outs[i]);
  }
  BOOST_REQUIRE(n.rounds_until(
      [&] { return std::all_of(outs.begin(), outs.end(), [](const outcome& o) { return o.result.has_value(); }); },
      20'000));
  for (auto& o : outs) {
    BOOST_REQUIRE_MESSAGE(o.result->has_value(), why(*o.result));
  }
}

BOOST_AUTO_TEST_CASE(a_backup_behind_the_journal_ring_copies_the_log_from_a_peer) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  produce(n, p, 5, "before");
  const std::size_t away = (p + 1) % 3;
  n.cut.insert(static_cast<std::uint32_t>(away + 1));
  produce(n, p, 200, "while-away");  // past the 64-slot journal ring: repair cannot bring it back
  n.cut.clear();
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[away]->g->machine().next_offset() == 205; }, 20'000));
  BOOST_REQUIRE(n.rounds_until([&] { return committed_bytes(*n.all[away]) == committed_bytes(*n.all[p]); }));
  BOOST_TEST(n.all[away]->g->storage().transfers() >= 1u);
  // It takes part again: the next produce commits everywhere.
  produce(n, p, 3, "after");
  BOOST_REQUIRE(n.rounds_until([&] { return committed_bytes(*n.all[away]) == committed_bytes(*n.all[p]); }));
}

BOOST_AUTO_TEST_CASE(a_member_that_lost_its_disk_recovers_and_copies_the_log_before_it_votes) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  produce(n, p, 150, "a");
  const std::size_t lost = (p + 2) % 3;
  n.stop(lost);
  n.all[lost]->disk->wipe();
  n.recovering.insert(lost);
  n.start(lost);
  BOOST_TEST(n.all[lost]->g->replica().recovering());
  BOOST_REQUIRE(n.rounds_until(
      [&] {
        return !n.all[lost]->g->replica().recovering() && n.all[lost]->g->machine().next_offset() == 150 &&
               committed_bytes(*n.all[lost]) == committed_bytes(*n.all[p]);
      },
      20'000));
  // Restarted again, it is no longer recovering (the flag cleared durably), and it holds the log.
  n.stop(lost);
  n.start(lost);
  BOOST_TEST(!n.all[lost]->g->replica().recovering());
  // The other backup goes away: the recovered member makes the quorum.
  const std::size_t other = 3 - p - lost;
  n.cut.insert(static_cast<std::uint32_t>(other + 1));
  produce(n, p, 4, "b");
  BOOST_REQUIRE(n.rounds_until([&] { return committed_bytes(*n.all[lost]) == committed_bytes(*n.all[p]); }));
}

// Issue 38, finding 12: recovering a wiped member moved thousands of times what it held (2.9 GB for about 1 MB of
// messages). Every `headers` reply ran the whole repair pass again, and nothing remembered what was already asked,
// so each answer sent up to repair_requests_per_tick requests more (a cascade growing eightfold per round trip).
// Here the ring holds every op (4,096 slots, no checkpoint yet): the member repairs its way back op by op. What its
// peers send it stays within twice what it then holds (batches and their headers) plus a little for the view's
// messages.
BOOST_AUTO_TEST_CASE(a_wiped_member_recovers_without_moving_much_more_than_it_holds) {
  nodes n(3, 0, 4096);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  constexpr int batches = 800;
  produce(n, p, batches, std::string(400, 'v'));
  const std::size_t lost = (p + 2) % 3;
  n.stop(lost);
  n.all[lost]->disk->wipe();
  n.recovering.insert(lost);
  n.bytes_to.clear();
  n.messages_to.clear();
  n.queue_max = 0;
  n.start(lost);
  BOOST_REQUIRE(n.rounds_until(
      [&] {
        return !n.all[lost]->g->replica().recovering() && n.all[lost]->g->machine().next_offset() == batches &&
               committed_bytes(*n.all[lost]) == committed_bytes(*n.all[p]);
      },
      20'000));
  const std::uint64_t held = committed_from(*n.all[lost]).size() + std::uint64_t{batches} * header::encoded_size;
  const std::uint64_t moved = n.bytes_to[static_cast<std::uint32_t>(lost + 1)];
  BOOST_TEST_MESSAGE("recovery moved " << moved << " bytes in " << n.messages_to[static_cast<std::uint32_t>(lost + 1)]
                                       << " messages to a member that then held " << held << " (queue at most "
                                       << n.queue_max << ")");
  BOOST_TEST(moved <= 2 * held + 64 * 1024, "moved " << moved << " bytes for " << held << " held");
}

BOOST_AUTO_TEST_CASE(retention_keeps_what_replicas_need_and_a_wiped_member_starts_at_its_peers_log_start) {
  nodes n(3, 1);  // retention.bytes 1: every sealed segment goes once no replica may need it
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  const std::string value(6000, 'v');  // ~170 batches a 1 MiB segment
  for (int k = 0; k < 10; ++k) {
    produce(n, p, 50, fmt::format("{}-{}", value, k));
  }
  BOOST_REQUIRE(n.rounds_until([&] {
    return std::all_of(n.all.begin(), n.all.end(), [](const auto& r) { return r->g->machine().next_offset() == 500; });
  }));
  for (std::size_t i = 0; i < 3; ++i) {
    auto& r = *n.all[i];
    const std::int64_t ceiling = r.g->storage().retention_ceiling();
    BOOST_TEST_CONTEXT("replica " << i) {
      // Batches at or below the durable checkpoint may go, never those above it (a checkpoint every 16 ops here).
      BOOST_TEST(ceiling > 0);
      BOOST_TEST(ceiling <= 500);
      BOOST_TEST(ceiling >= 500 - 16 - 8);
      auto retained = storage::io::run_task(*r.disk, r.g->enforce_retention());
      BOOST_REQUIRE(retained.has_value());
      BOOST_REQUIRE_MESSAGE(retained->has_value(), why(*retained));
      BOOST_TEST((*retained)->segments_removed >= 1u);
      BOOST_TEST(r.g->log().log_start().value() > 0);
      BOOST_TEST(r.g->log().log_start().value() <= ceiling);
    }
  }
  // A backup cut off for a few ops catches up by repair: nothing it needs was removed.
  const std::size_t away = (p + 1) % 3;
  n.cut.insert(static_cast<std::uint32_t>(away + 1));
  produce(n, p, 10, "short-absence");
  n.cut.clear();
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[away]->g->machine().next_offset() == 510; }, 20'000));
  const std::uint64_t transfers_before = n.all[away]->g->storage().transfers();
  // A member that lost its disk: its peers' logs start past 0, so its log starts over at the peer's start.
  const std::size_t lost = (p + 2) % 3;
  n.stop(lost);
  n.all[lost]->disk->wipe();
  n.recovering.insert(lost);
  n.start(lost);
  BOOST_REQUIRE(n.rounds_until(
      [&] { return !n.all[lost]->g->replica().recovering() && n.all[lost]->g->machine().next_offset() == 510; },
      40'000));
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[lost]->g->log().committed().value() == 510; }));
  const std::int64_t start = n.all[lost]->g->log().log_start().value();
  BOOST_TEST(start > 0);
  BOOST_TEST(start >= n.all[p]->g->log().log_start().value());
  BOOST_TEST(committed_from(*n.all[lost]) == committed_from(*n.all[p], start));
  BOOST_TEST(n.all[away]->g->storage().transfers() == transfers_before);
  // Restarted, it keeps its log from that start; then it makes the quorum with the other backup away.
  n.stop(lost);
  n.start(lost);
  BOOST_TEST(n.all[lost]->g->log().log_start().value() == start);
  n.cut.insert(static_cast<std::uint32_t>(away + 1));
  produce(n, p, 4, "after");
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[lost]->g->log().committed().value() == 514; }));
  BOOST_TEST(committed_from(*n.all[lost]) == committed_from(*n.all[p], start));
}

BOOST_AUTO_TEST_CASE(an_idle_group_syncs_its_journal_headers_so_its_descriptors_may_close) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t p = *n.primary();
  produce(n, p, 3, "x");
  // Right after the writes, header-ring writes wait for a sync on some replica; a second of silence syncs them.
  BOOST_REQUIRE(n.rounds_until(
      [&] {
        return std::none_of(n.all.begin(), n.all.end(),
                            [](const auto& r) { return r->g->storage().headers_unsynced(); });
      },
      3 * static_cast<int>(idle_sync_ticks_for_test)));
}

BOOST_AUTO_TEST_CASE(after_a_failover_the_group_goes_back_to_its_preferred_replica) {
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary() == std::optional<std::size_t>(0); }));
  produce(n, 0, 3, "a");
  n.stop(0);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t q = *n.primary();
  BOOST_TEST(q != 0u);
  produce(n, q, 3, "b");
  n.start(0);
  // Idle, it catches up by repair, which acknowledges nothing (the ops are committed); the primary's probe is what
  // it acknowledges. Within hand_over_ticks of that (and a view change) replica 0 leads again.
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary() == std::optional<std::size_t>(0); }, 1'000));
  BOOST_TEST(n.all[q]->g->probes() >= 1u);
  BOOST_TEST(n.all[q]->g->hand_overs() == 1u);
  BOOST_TEST(n.all[0]->g->replica().view().value() % 3 == 0u);
  produce(n, 0, 2, "d");
  BOOST_REQUIRE(n.rounds_until([&] {
    return n.all[0]->g->machine().next_offset() == 8 && committed_bytes(*n.all[1]) == committed_bytes(*n.all[0]) &&
           committed_bytes(*n.all[2]) == committed_bytes(*n.all[0]);
  }));
  // It stays there: nobody hands over again.
  for (int i = 0; i < 1'000; ++i) {
    n.round();
  }
  BOOST_TEST((n.primary() == std::optional<std::size_t>(0)));
}

BOOST_AUTO_TEST_CASE(a_group_that_committed_nothing_goes_back_to_its_preferred_replica_too) {
  // Nothing produced, ever: no prepare to acknowledge, so the probe is what shows the returned replica is there.
  nodes n(3);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary() == std::optional<std::size_t>(0); }));
  n.stop(0);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary().has_value(); }));
  const std::size_t q = *n.primary();
  n.start(0);
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary() == std::optional<std::size_t>(0); }, 2'000));
  BOOST_TEST(n.all[q]->g->hand_overs() == 1u);
  BOOST_TEST(n.all[0]->g->machine().next_offset() == 0);  // probes commit nothing a consumer sees
}

// Issue 38, finding 4: the bounds on producers and consumers are replicated state. The primary commits its node's
// settings; every replica applies them at the same op, whatever its own node's say; a new primary with other
// settings commits its own.
BOOST_AUTO_TEST_CASE(the_primary_commits_its_nodes_partition_settings_and_every_replica_applies_them) {
  partition_settings small;
  small.consumers_max = 5;
  small.producers_max = 2;
  small.producer_expiry_ms = 60'000;
  nodes n(3);
  n.settings[0] = small;
  n.stop(0);
  n.start(0);
  BOOST_REQUIRE(n.rounds_until([&] {
    return n.primary() == std::optional<std::size_t>(0) &&
           std::all_of(n.all.begin(), n.all.end(), [&](const auto& r) { return r->g->machine().settings() == small; });
  }));
  // Three producers: only the two newest are remembered, on every replica.
  std::vector<outcome> outs(3);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    submit(*n.all[0]->g, batch(static_cast<std::int64_t>(40 + i), 0, "p"), outs[i]);
    BOOST_REQUIRE(n.rounds_until([&] { return outs[i].result.has_value(); }));
    BOOST_REQUIRE_MESSAGE(outs[i].result->has_value(), why(*outs[i].result));
  }
  BOOST_REQUIRE(n.rounds_until([&] {
    return std::all_of(n.all.begin(), n.all.end(), [](const auto& r) {
      return r->g->machine().next_offset() == 3 && r->g->machine().producers().size() == 2u;
    });
  }));
  for (const auto& r : n.all) {
    BOOST_TEST(!r->g->machine().producers().find(40).has_value());
  }
  // The primary goes; the next one's node has the defaults, and commits them.
  n.stop(0);
  BOOST_REQUIRE(n.rounds_until([&] {
    return n.primary().has_value() && std::all_of(n.all.begin() + 1, n.all.end(), [](const auto& r) {
             return r->g->machine().settings() == partition_settings{};
           });
  }));
}

// Issue 38, finding 5: a primary cut off with an empty pipeline never stepped down, and served its clients stale data
// for as long as the cut lasted. Now its backups answer its heartbeats (commit_ok), and a primary that a quorum has
// not heard within the backups' primary timeout is silenced (its owner serves nothing from it) until heard again.
BOOST_AUTO_TEST_CASE(a_primary_unheard_by_its_quorum_is_silenced_until_heard_again) {
  nodes n(3);
  n.silence_ms = 400;  // the backups' primary timeout: 40 ticks of 10 ms
  for (std::size_t i = 0; i < 3; ++i) {
    n.stop(i);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    n.start(i);
  }
  BOOST_REQUIRE(n.rounds_until([&] { return n.primary() == std::optional<std::size_t>(0); }));
  // A new primary serves nothing until a quorum has answered a heartbeat of its view (the view's start earns
  // nothing): one heartbeat's round trip.
  BOOST_TEST(n.all[0]->g->silenced().has_value());
  BOOST_REQUIRE(n.rounds_until([&] { return !n.all[0]->g->silenced(); }, 10));
  // Idle and heard: never silenced.
  for (int i = 0; i < 200; ++i) {
    n.round();
    BOOST_REQUIRE(n.all[0]->g->primary());
    BOOST_REQUIRE(!n.all[0]->g->silenced().has_value());
  }
  // Cut off: still primary in its own eyes (nothing in its pipeline to time out), but silenced once a quorum has not
  // heard it for 400 ms, and not before.
  n.cut.insert(1);
  int rounds = 0;
  while (!n.all[0]->g->silenced() && rounds < 200) {
    n.round();
    ++rounds;
  }
  BOOST_TEST(n.all[0]->g->primary());
  BOOST_REQUIRE(n.all[0]->g->silenced().has_value());
  BOOST_TEST(n.all[0]->g->silenced()->count() > 400);
  BOOST_TEST(rounds >= 35);  // the last heartbeat heard went out up to 5 ticks before the cut
  BOOST_TEST(rounds <= 50);
  // The others have chosen a primary meanwhile (or do so now).
  BOOST_REQUIRE(n.rounds_until([&] { return n.all[1]->g->primary() || n.all[2]->g->primary(); }));
  // Heard again: it learns of the new view and steps down.
  n.cut.clear();
  BOOST_REQUIRE(n.rounds_until([&] { return !n.all[0]->g->primary() || !n.all[0]->g->silenced(); }));
}

BOOST_AUTO_TEST_SUITE_END()
