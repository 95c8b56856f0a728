// Replicated partitions on clusters of real rilld processes (docs/replication.md): a topic with replication factor 3
// on 3 nodes; idempotent producers and a consumer through the client library while the primary of a partition is
// SIGKILLed and restarted, a backup is killed, a primary is paused (SIGSTOP) and one is cut off from the others
// (the transport fault switch). After each: every acknowledged batch is in its partition exactly once, in order,
// offsets dense; consumers read on without gaps or duplicates; and every replica's log holds the same bytes.
#define BOOST_TEST_MODULE rill_replication
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/endian.h"
#include "net/client.h"
#include "storage/record_batch_builder.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/integration/descriptors.h"

using namespace rill;
using namespace rill::testing::cluster_harness;

namespace {

constexpr std::uint32_t partitions = 3;

// One idempotent producer over every partition: batch k of partition p holds one record "p/k" at sequence k.
class producer {
 public:
  explicit producer(net::client& c) : c_(&c) {
    std::random_device rd;
    id_ = (std::uint64_t{rd()} << 20 | rd()) & ((std::uint64_t{1} << 52) - 1);
  }
  // Sends the partition's next batch (the client retries and follows redirects; a retry of a batch already
  // written is answered with its offset). True once acknowledged.
  bool send(std::uint32_t p) {
    const std::int32_t seq = next_[p];
    storage::batch_builder b;
    b.producer(static_cast<std::int64_t>(id_), 0, seq);
    b.add("k", fmt::format("{}/{}", p, seq));
    auto built = b.build();
    BOOST_REQUIRE(built.has_value());
    auto r = c_->produce(net::by_name("s"), net::by_name("t"), p, *built);
    if (!r) {
      last_error_ = r.error().message();
      return false;
    }
    ++next_[p];
    acked_[p].push_back(static_cast<std::int64_t>(r->base_offsets(0)));
    return true;
  }
  void send_all(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      for (std::uint32_t p = 0; p < partitions; ++p) {
        BOOST_REQUIRE_MESSAGE(send(p), "partition " << p << ": " << last_error_);
      }
    }
  }
  // Acknowledged offsets, per partition, in produce order.
  const std::map<std::uint32_t, std::vector<std::int64_t>>& acked() const { return acked_; }
  const std::string& last_error() const { return last_error_; }
  // Goes on through another client (nodes restarted on other ports).
  void use(net::client& c) { c_ = &c; }
  std::int32_t sent(std::uint32_t p) const { return next_.contains(p) ? next_.at(p) : 0; }

 private:
  net::client* c_;
  std::uint64_t id_ = 0;
  std::map<std::uint32_t, std::int32_t> next_;
  std::map<std::uint32_t, std::vector<std::int64_t>> acked_;
  std::string last_error_;
};

// Everything in partition p, from the first offset, through whichever node leads it.
std::vector<net::record> read_all(net::client& c, std::uint32_t p) {
  std::vector<net::record> out;
  std::int64_t next = 0;
  for (;;) {
    proto::PollRequest q;
    *q.mutable_stream() = net::by_name("s");
    *q.mutable_topic() = net::by_name("t");
    q.set_partition_id(p);
    q.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
    q.mutable_strategy()->set_value(static_cast<std::uint64_t>(next));
    q.set_max_records(1000);
    auto got = c.poll(q);
    RILL_REQUIRE_OK(got);
    auto records = net::decode_records(p, got->batches);
    RILL_REQUIRE_OK(records);
    if (records->empty()) {
      return out;
    }
    for (auto& r : *records) {
      if (r.offset >= next) {
        next = r.offset + 1;
        out.push_back(std::move(r));
      }
    }
  }
}

// Every acknowledged batch exactly once, in produce order, at the offset its acknowledgement named; offsets dense.
void check_partitions(net::client& c, const producer& prod) {
  for (std::uint32_t p = 0; p < partitions; ++p) {
    const auto records = read_all(c, p);
    std::map<std::string, int> seen;
    for (std::size_t i = 0; i < records.size(); ++i) {
      BOOST_TEST(records[i].offset == static_cast<std::int64_t>(i), "partition " << p << ": offsets not dense");
      ++seen[records[i].value.value_or("")];
    }
    for (const auto& [value, n] : seen) {
      BOOST_TEST(n == 1, "partition " << p << ": '" << value << "' is there " << n << " times");
    }
    const auto& acked = prod.acked().at(p);
    for (std::size_t k = 0; k < acked.size(); ++k) {
      const std::string want = fmt::format("{}/{}", p, k);
      BOOST_TEST(seen.contains(want), "partition " << p << ": acknowledged '" << want << "' is missing");
      if (acked[k] < static_cast<std::int64_t>(records.size())) {
        BOOST_TEST(records[static_cast<std::size_t>(acked[k])].value.value_or("") == want);
      }
    }
  }
}

// The replica's partition info as node i describes it.
std::optional<proto::PartitionInfo> replica_info(cluster& c, std::size_t i, std::uint32_t p) {
  net::client_options o;
  o.server = c.node(i).address();
  o.retries = 2;
  o.request_timeout = std::chrono::seconds(5);
  auto cl = net::client::connect(o);
  if (!cl) {
    return std::nullopt;
  }
  auto t = (*cl)->get_topic(net::by_name("s"), net::by_name("t"));
  if (!t) {
    return std::nullopt;
  }
  for (const auto& info : t->partitions()) {
    if (info.id() == p) {
      return info;
    }
  }
  return std::nullopt;
}

// The node (index) of partition p's primary, once some node's replica names itself primary.
std::size_t primary_of(cluster& c, std::uint32_t p) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      auto info = replica_info(c, i, p);
      if (info && info->role() == "primary") {
        return i;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_FAIL("partition " << p << " has no primary");
  return 0;
}

// Waits until each partition's primary is its preferred node (the first of its replicas): after a failover the
// primary hands it back once the preferred replica has kept up for 3 s.
bool preferred_lead(cluster& c, std::chrono::seconds within = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (std::uint32_t p = 0; p < partitions && all; ++p) {
      const std::size_t at = primary_of(c, p);
      auto info = replica_info(c, at, p);
      all = info.has_value() && info->role() == "primary" && info->replicas_size() > 0 &&
            info->replicas(0) == static_cast<std::uint64_t>(at + 1);
    }
    if (all) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// Waits until every node's replica of every partition has the same commit and holds it all (quiet: no produce).
bool converged(cluster& c, std::chrono::seconds within = std::chrono::seconds(30), std::uint32_t count = partitions) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (std::uint32_t p = 0; p < count && all; ++p) {
      std::optional<std::uint64_t> hw;
      for (std::size_t i = 0; i < c.size() && all; ++i) {
        auto info = replica_info(c, i, p);
        all = info.has_value() && info->commit_op() == info->op() && (!hw || *hw == info->high_watermark());
        if (info) {
          hw = info->high_watermark();
        }
      }
    }
    if (all) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The batches of a partition log's segment files, as bytes (each batch's 12-byte prefix names its length; the
// preallocated zeros after the last one are not part of it).
std::vector<std::byte> log_bytes(const std::string& dir) {
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".log") {
      segments.push_back(e.path().string());
    }
  }
  std::sort(segments.begin(), segments.end());
  std::vector<std::byte> out;
  for (const auto& path : segments) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t at = 0;
    while (at + 12 <= all.size()) {
      const auto length = load_be<std::int32_t>(reinterpret_cast<const std::byte*>(all.data() + at + 8));
      if (length <= 0 || at + 12 + static_cast<std::size_t>(length) > all.size()) {
        break;
      }
      const auto* b = reinterpret_cast<const std::byte*>(all.data() + at);
      out.insert(out.end(), b, b + 12 + length);
      at += 12 + static_cast<std::size_t>(length);
    }
  }
  return out;
}

// The batches of a partition log from `from` on (those starting below it are skipped).
std::vector<std::byte> log_bytes_from(const std::string& dir, std::int64_t from) {
  const auto all = log_bytes(dir);
  std::size_t at = 0;
  while (at + 12 <= all.size() && load_be<std::int64_t>(all.data() + at) < from) {
    at += 12 + static_cast<std::size_t>(load_be<std::int32_t>(all.data() + at + 8));
  }
  return std::vector<std::byte>(all.begin() + static_cast<std::ptrdiff_t>(std::min(at, all.size())), all.end());
}

// The base offset of a partition log's first segment file (its log start once retention's deletions are done).
std::int64_t first_segment(const std::string& dir) {
  std::int64_t first = INT64_MAX;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".log") {
      first = std::min<std::int64_t>(first, std::stoll(e.path().stem().string()));
    }
  }
  return first;
}

// Stops every node (gracefully) and compares each partition's log across the replicas byte for byte.
void check_replicas_identical(cluster& c) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    c.node(i).stop();
  }
  for (std::uint32_t p = 0; p < partitions; ++p) {
    const auto first = log_bytes(fmt::format("{}/streams/0/topics/0/partitions/{}", c.dir(0), p));
    BOOST_TEST(!first.empty());
    for (std::size_t i = 1; i < c.size(); ++i) {
      const auto other = log_bytes(fmt::format("{}/streams/0/topics/0/partitions/{}", c.dir(i), p));
      BOOST_TEST((other == first), "partition " << p << ": node " << i + 1 << "'s log (" << other.size()
                                                << " bytes) differs from node 1's (" << first.size() << ")");
    }
  }
}

// Waits (10 s at most) until node i's /metrics shows partition p's rill_partition_under_replicated at `value`.
bool under_replicated_gauge(cluster& c, std::size_t i, std::uint32_t p, char value) {
  const std::string series =
      fmt::format("rill_partition_under_replicated{{stream=\"0\",topic=\"0\",partition=\"{}\"", p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string line;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string metrics = http_get(c.node(i).http_address(), "/metrics");
    const auto at = metrics.find(series);
    line = at == std::string::npos ? std::string() : metrics.substr(at, metrics.find('\n', at) - at);
    if (!line.empty() && line.back() == value) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_MESSAGE("node " << i + 1 << ": " << (line.empty() ? series + " missing" : line));
  return false;
}

// A client of node i alone, with few retries: what a client connected to that node sees.
std::unique_ptr<net::client> client_of_node(cluster& c, std::size_t i) {
  net::client_options o;
  o.server = c.node(i).address();
  o.retries = 2;
  o.request_timeout = std::chrono::seconds(3);
  auto cl = net::client::connect(o);
  BOOST_REQUIRE(cl.has_value());
  return std::move(*cl);
}

// A poll of s/t's partition p from offset 0.
proto::PollRequest poll_from_start(std::uint32_t p, bool from_replica) {
  proto::PollRequest q;
  *q.mutable_stream() = net::by_name("s");
  *q.mutable_topic() = net::by_name("t");
  q.set_partition_id(p);
  q.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
  q.mutable_strategy()->set_value(0);
  q.set_from_replica(from_replica);
  return q;
}

void make_topic(cluster& c) {
  auto admin = c.client(0);
  RILL_REQUIRE_OK(admin->create_stream("s"));
  proto::TopicConfig tc;
  tc.set_partitions(partitions);
  tc.set_replication_factor(3);
  auto t = admin->create_topic(net::by_name("s"), "t", tc);
  RILL_REQUIRE_OK(t);
  BOOST_TEST(t->config().replication_factor() == 3u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(primaries_spread_and_a_topic_is_refused_more_replicas_than_nodes) {
  cluster c(3);
  c.start_all();
  make_topic(c);
  auto pc = c.client_of_all();
  producer prod(*pc);
  prod.send_all(3);
  BOOST_REQUIRE(converged(c));
  // Each partition's primary is its preferred node, one per node (a slow start may elect another first: it hands
  // the partition back once the preferred replica has acknowledged what is committed).
  BOOST_TEST(preferred_lead(c));
  std::set<std::size_t> primaries;
  for (std::uint32_t p = 0; p < partitions; ++p) {
    primaries.insert(primary_of(c, p));
    auto info = replica_info(c, 0, p);
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST(info->replicas_size() == 3);
  }
  BOOST_TEST(primaries.size() == 3u, "3 partitions' primaries on " << primaries.size() << " nodes");
  // Every replica answers a read from_replica with the committed records, without a redirect; a backup asked
  // without it sends the client to the primary.
  for (std::size_t i = 0; i < c.size(); ++i) {
    net::client_options o;
    o.server = c.node(i).address();
    o.retries = 0;
    auto only = net::client::connect(o);
    RILL_REQUIRE_OK(only);
    for (std::uint32_t p = 0; p < partitions; ++p) {
      proto::PollRequest q;
      *q.mutable_stream() = net::by_name("s");
      *q.mutable_topic() = net::by_name("t");
      q.set_partition_id(p);
      q.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
      q.set_from_replica(true);
      const auto redirects = (*only)->redirects();
      auto got = (*only)->poll(q);
      RILL_REQUIRE_OK(got);
      auto records = net::decode_records(p, got->batches);
      RILL_REQUIRE_OK(records);
      BOOST_TEST(records->size() == 3u, "node " << i + 1 << ", partition " << p);
      BOOST_TEST((*only)->redirects() == redirects);
      if (primary_of(c, p) != i) {
        net::client_options one = o;
        auto fresh = net::client::connect(one);  // (no partition route learnt yet)
        RILL_REQUIRE_OK(fresh);
        q.set_from_replica(false);
        RILL_REQUIRE_OK((*fresh)->poll(q));
        BOOST_TEST((*fresh)->redirects() == 1u, "a backup's replica served a poll not from_replica");
      }
    }
  }
  proto::TopicConfig four;
  four.set_replication_factor(4);
  auto refused = c.client(1)->create_topic(net::by_name("s"), "t4", four);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((status_of(refused.error()) == net::status::invalid_config));
  BOOST_TEST(refused.error().message().find("replication_factor = 4") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_killed_primary_loses_nothing_acknowledged_and_consumers_read_on) {
  cluster c(3);
  c.start_all();
  make_topic(c);
  auto pc = c.client_of_all();
  producer prod(*pc);
  prod.send_all(20);

  // A consumer of partition 0 reads on through the failover, by offset, through whichever node leads.
  std::atomic<bool> stop{false};
  std::vector<std::string> consumed;
  std::string consumer_error;
  std::thread reader([&] {
    auto cc = c.client_of_all(std::chrono::seconds(10));
    std::int64_t next = 0;
    while (!stop.load()) {
      proto::PollRequest q;
      *q.mutable_stream() = net::by_name("s");
      *q.mutable_topic() = net::by_name("t");
      q.set_partition_id(0);
      q.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
      q.mutable_strategy()->set_value(static_cast<std::uint64_t>(next));
      q.set_max_wait_ms(100);
      auto got = cc->poll(q);
      if (!got) {
        consumer_error = got.error().message();
        continue;  // the client retried already; try again
      }
      auto records = net::decode_records(0, got->batches);
      if (!records) {
        consumer_error = records.error().message();
        return;
      }
      for (auto& r : *records) {
        if (r.offset >= next) {
          if (r.offset != next) {
            consumer_error = fmt::format("a gap: offset {} after {}", r.offset, next - 1);
            return;
          }
          consumed.push_back(r.value.value_or(""));
          next = r.offset + 1;
        }
      }
    }
  });

  const std::size_t killed = primary_of(c, 0);
  c.node(killed).kill_hard();
  const auto t0 = std::chrono::steady_clock::now();
  // The next acknowledged produce on the partition whose primary died.
  BOOST_REQUIRE_MESSAGE(prod.send(0), "partition 0: " << prod.last_error());
  BOOST_TEST_MESSAGE(
      "SIGKILL of partition 0's primary (node "
      << killed + 1 << ") to the next acknowledged produce: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count() << " ms");
  prod.send_all(10);
  c.start(killed);
  prod.send_all(10);
  BOOST_REQUIRE(converged(c));
  // The returned node leads its partitions again (a controlled view change, once it has acknowledged what is
  // committed: it caught up by repair, so the next produces show it).
  prod.send_all(3);
  BOOST_TEST(preferred_lead(c));
  prod.send_all(2);
  // The consumer saw every record of partition 0 once, in order.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (consumed.size() < static_cast<std::size_t>(prod.sent(0)) && std::chrono::steady_clock::now() < deadline &&
         consumer_error.find("gap") == std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  reader.join();
  BOOST_TEST(consumer_error.find("gap") == std::string::npos, consumer_error);
  BOOST_REQUIRE_EQUAL(consumed.size(), static_cast<std::size_t>(prod.sent(0)));
  for (std::size_t k = 0; k < consumed.size(); ++k) {
    BOOST_TEST(consumed[k] == fmt::format("0/{}", k));
  }
  check_partitions(*c.client_of_all(), prod);
  check_replicas_identical(c);
}

BOOST_AUTO_TEST_CASE(a_killed_backup_catches_up_when_it_returns) {
  cluster c(3);
  c.start_all();
  make_topic(c);
  auto pc = c.client_of_all();
  producer prod(*pc);
  prod.send_all(10);
  const std::size_t primary = primary_of(c, 2);
  const std::size_t backup = (primary + 1) % c.size();
  c.node(backup).kill_hard();
  prod.send_all(20);  // partitions whose primary was the backup's node fail over; partition 2 goes on
  // The primary counts partition 2 under-replicated while the backup is away (its gauge refreshes every second).
  BOOST_TEST(under_replicated_gauge(c, primary, 2, '1'));
  {
    // The node's count (rill cluster status adds the members' counts up): the partitions it leads, and of them the
    // under-replicated ones; on /metrics too.
    auto status = c.client(primary)->cluster_status();
    RILL_REQUIRE_OK(status);
    BOOST_TEST(status->partitions_led() >= 1u);
    BOOST_TEST(status->under_replicated() >= 1u);
    BOOST_TEST(status->under_replicated() <= status->partitions_led());
    const std::string metrics = http_get(c.node(primary).http_address(), "/metrics");
    BOOST_TEST(metrics.find("rill_node_under_replicated_partitions ") != std::string::npos);
  }
  c.start(backup);
  prod.send_all(5);
  BOOST_REQUIRE(converged(c));
  // Caught up by repair (committed ops are not acknowledged); the next prepare it acknowledges clears the count.
  BOOST_REQUIRE_MESSAGE(prod.send(2), "partition 2: " << prod.last_error());
  BOOST_TEST(under_replicated_gauge(c, primary, 2, '0'));
  // Every partition acknowledged by all three again: the cluster counts none.
  prod.send_all(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::uint64_t total = 0;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    total = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      auto status = c.client(i)->cluster_status();
      RILL_REQUIRE_OK(status);
      total += status->under_replicated();
    }
  } while (total != 0 && std::chrono::steady_clock::now() < deadline);
  BOOST_TEST(total == 0u);
  check_partitions(*c.client_of_all(), prod);
  check_replicas_identical(c);
}

BOOST_AUTO_TEST_CASE(a_paused_primary_and_a_cut_off_primary_are_replaced) {
  cluster c(3, 42, {"--set", "debug.failure_injection=true"});
  c.start_all();
  make_topic(c);
  auto pc = c.client_of_all(std::chrono::seconds(2));
  producer prod(*pc);
  prod.send_all(5);
  // Paused: its connections stay open, so the client's request times out and is retried elsewhere.
  const std::size_t paused = primary_of(c, 1);
  ::kill(c.node(paused).pid(), SIGSTOP);
  BOOST_REQUIRE_MESSAGE(prod.send(1), "partition 1: " << prod.last_error());
  ::kill(c.node(paused).pid(), SIGCONT);
  prod.send_all(5);
  // Cut off from the others by the fault switch: it cannot commit; the other two elect a primary and go on.
  const std::size_t cut = primary_of(c, 1);
  set_cut_off(c, cut, true);
  BOOST_REQUIRE_MESSAGE(prod.send(1), "partition 1: " << prod.last_error());
  // A client of the cut-off node alone reads no stale data there (issue 38, finding 5: with nothing in its pipeline
  // the old primary never timed out and served its clients what it had for as long as the cut lasted). Unheard by
  // its quorum for the primary timeout, it serves nothing as primary; a read from any replica gets only what it
  // knows committed, a prefix of what was acknowledged.
  {
    auto alone = client_of_node(c, cut);
    for (const bool any_replica : {false, true}) {
      auto got = alone->poll(poll_from_start(1, any_replica));
      if (!any_replica) {
        BOOST_TEST(!got.has_value(), "the cut-off primary served a poll (high watermark "
                                         << (got ? got->header.high_watermark() : 0) << ", " << prod.sent(1)
                                         << " acknowledged)");
        if (!got) {
          BOOST_TEST_MESSAGE("poll of the cut-off primary: " << got.error().message());
        }
        continue;
      }
      BOOST_REQUIRE_MESSAGE(got.has_value(), "a read from any replica: " << (got ? "" : got.error().message()));
      auto records = net::decode_records(0, got->batches);
      BOOST_REQUIRE(records.has_value());
      BOOST_TEST(records->size() < static_cast<std::size_t>(prod.sent(1)));  // (it missed the last one)
      for (std::size_t k = 0; k < records->size(); ++k) {
        BOOST_TEST((*records)[k].value.value_or("") == fmt::format("1/{}", k));
      }
    }
  }
  set_cut_off(c, cut, false);
  prod.send_all(5);
  BOOST_REQUIRE(converged(c));
  check_partitions(*c.client_of_all(), prod);
  check_replicas_identical(c);
}

// Issue 38, finding 5: a group member whose partitions moved read on, because its polls were checked against its
// node's replica of the coordinator, which a cut leaves behind. Member A's node is cut off; B joins through another
// node and takes A's partitions once A's session ends; A, still polling through its own node (from any replica, so
// that its node's replica of the partition can answer), must get nothing: data goes out only once ownership is
// confirmed against the committed coordinator state (an auto-commit, or a read barrier).
BOOST_AUTO_TEST_CASE(a_member_whose_partitions_moved_reads_nothing_through_a_stale_coordinator_replica) {
  cluster c(3, 43, {"--set", "debug.failure_injection=true"});
  c.start_all();
  make_topic(c);
  auto all = c.client_of_all(std::chrono::seconds(5));
  producer prod(*all);
  prod.send_all(3);
  proto::GroupConfig gc;
  gc.set_session_timeout_ms(1'000);
  RILL_REQUIRE_OK(all->create_group(net::by_name("s"), net::by_name("t"), "g", gc));
  auto a = client_of_node(c, 0);
  auto joined = a->join_group(net::by_name("s"), net::by_name("t"), net::by_name("g"));
  RILL_REQUIRE_OK(joined);
  auto a_owns = a->heartbeat_group(net::by_name("s"), net::by_name("t"), net::by_name("g"), joined->member_id());
  RILL_REQUIRE_OK(a_owns);
  BOOST_REQUIRE(a_owns->owned_size() == static_cast<int>(partitions));
  const auto poll_as_a = [&](std::uint64_t generation) {
    proto::PollRequest q = poll_from_start(0, true);
    q.mutable_consumer()->set_group("g");
    q.mutable_member()->set_member_id(joined->member_id());
    q.mutable_member()->set_generation(generation);
    return a->poll(q);
  };
  {
    auto got = poll_as_a(a_owns->generation());
    BOOST_REQUIRE_MESSAGE(got.has_value(), "A's poll before the cut: " << (got ? "" : got.error().message()));
    BOOST_TEST(got->header.records() > 0u);
  }
  set_cut_off(c, 0, true);
  // B joins through node 2 and, once A's session has ended, owns every partition.
  auto b = client_of_node(c, 1);
  std::optional<proto::GroupJoinReply> b_joined;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool b_owns_all = false;
  while (!b_owns_all && std::chrono::steady_clock::now() < deadline) {
    if (!b_joined) {
      if (auto j = b->join_group(net::by_name("s"), net::by_name("t"), net::by_name("g")); j) {
        b_joined = *j;
      }
    } else if (auto h =
                   b->heartbeat_group(net::by_name("s"), net::by_name("t"), net::by_name("g"), b_joined->member_id());
               h) {
      b_owns_all = h->owned_size() == static_cast<int>(partitions) && h->revoking_size() == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_REQUIRE_MESSAGE(b_owns_all, "member B never owned every partition");
  // A's node still has A owning partition 0 in its replica of the coordinator; A must read nothing there.
  auto got = poll_as_a(a_owns->generation());
  BOOST_TEST(!got.has_value(),
             "member A read " << (got ? got->header.records() : 0) << " records of a partition member B owns");
  if (!got) {
    BOOST_TEST_MESSAGE("A's poll through its cut-off node: " << got.error().message());
  }
  set_cut_off(c, 0, false);
}

BOOST_AUTO_TEST_CASE(a_wiped_node_recovers_its_replicas_and_copies_their_logs) {
  // A small journal ring, so that a replica away for a while is behind it and must copy the log (state transfer).
  cluster c(3, 43, {"--set", "cluster.partition_journal_slots=64"});
  c.start_all();
  make_topic(c);
  auto pc = c.client_of_all();
  producer prod(*pc);
  prod.send_all(80);  // 80 batches per partition: past the ring
  const std::size_t lost = primary_of(c, 0);
  c.node(lost).kill_hard();
  std::filesystem::remove_all(c.dir(lost));
  c.format(lost, "recover");  // a member that lost its data: its replicas vote for nothing until caught up
  prod.send_all(5);           // the partitions it led fail over
  c.start(lost);              // (on other ports: the client is told them)
  pc = c.client_of_all();
  prod.use(*pc);
  prod.send_all(5);
  BOOST_REQUIRE(converged(c, std::chrono::seconds(60)));
  BOOST_TEST(c.node(lost).log().find("(state transfer)") != std::string::npos, c.node(lost).log());
  // Its replicas leave `recovering` once they hold what the primary's start_view names (converged() can see the
  // same commit a moment before: an event to wait for, bounded).
  for (std::uint32_t p = 0; p < partitions; ++p) {
    std::optional<proto::PartitionInfo> info;
    for (int i = 0; i < 300; ++i) {
      info = replica_info(c, lost, p);
      if (info && (info->role() == "primary" || info->role() == "backup")) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST((info->role() == "primary" || info->role() == "backup"), "partition " << p << ": " << info->role());
  }
  // It takes part again: with another node gone, the recovered one makes each partition's quorum.
  const std::size_t other = (lost + 1) % c.size();
  c.node(other).kill_hard();
  prod.send_all(3);
  c.start(other);
  BOOST_REQUIRE(converged(c, std::chrono::seconds(60)));
  check_partitions(*c.client_of_all(), prod);
  check_replicas_identical(c);
}

BOOST_AUTO_TEST_CASE(retention_applies_on_every_replica_and_a_wiped_node_starts_at_its_peers_log_start) {
  cluster c(3, 47, {"--set", "cluster.partition_journal_slots=64", "--set", "storage.retention_check_ms=200"});
  c.start_all();
  {
    auto admin = c.client(0);
    RILL_REQUIRE_OK(admin->create_stream("s"));
    proto::TopicConfig tc;
    tc.set_partitions(1);
    tc.set_replication_factor(3);
    tc.set_segment_bytes(1024 * 1024);
    tc.set_retention_bytes(1);  // every sealed segment goes once no replica may need it
    RILL_REQUIRE_OK(admin->create_topic(net::by_name("s"), "t", tc));
  }
  auto pc = c.client_of_all();
  const std::string big(60'000, 'r');
  std::int64_t produced = 0;
  auto send = [&](const std::string& value, int n) {
    for (int i = 0; i < n; ++i) {
      storage::batch_builder b;
      b.add("k", fmt::format("{}/{}", produced, value));
      auto built = b.build();
      BOOST_REQUIRE(built.has_value());
      auto r = pc->produce(net::by_name("s"), net::by_name("t"), 0, *built);
      RILL_REQUIRE_OK(r);
      ++produced;
    }
  };
  send(big, 80);   // ~4.8 MB: 4 sealed segments on each replica
  send("x", 200);  // the durable checkpoints move a ring (64 ops) past the big batches
  const auto dir = [&](std::size_t i) { return fmt::format("{}/streams/0/topics/0/partitions/0", c.dir(i)); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto retained_everywhere = [&] {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (first_segment(dir(i)) == 0) {
        return false;
      }
    }
    return true;
  };
  while (!retained_everywhere() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_REQUIRE_MESSAGE(retained_everywhere(), "retention removed nothing on some replica");
  BOOST_REQUIRE(converged(c, std::chrono::seconds(30), 1));  // (a backup learns the last commit a moment later)
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto info = replica_info(c, i, 0);
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST(info->log_start() > 0u, "node " << i + 1);
    BOOST_TEST(info->high_watermark() == static_cast<std::uint64_t>(produced), "node " << i + 1);
  }
  // A node that lost its disk: behind every peer's log start, it starts its log over at a peer's start.
  const std::size_t lost = primary_of(c, 0);
  c.node(lost).kill_hard();
  std::filesystem::remove_all(c.dir(lost));
  c.format(lost, "recover");
  c.start(lost);
  pc = c.client_of_all();
  send("y", 5);
  const auto caught_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::optional<proto::PartitionInfo> info;
  while (std::chrono::steady_clock::now() < caught_up) {
    info = replica_info(c, lost, 0);
    if (info && info->high_watermark() == static_cast<std::uint64_t>(produced) &&
        (info->role() == "primary" || info->role() == "backup")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->high_watermark() == static_cast<std::uint64_t>(produced));
  BOOST_TEST(info->log_start() > 0u);
  BOOST_TEST(c.node(lost).log().find("its log started over at offset") != std::string::npos, c.node(lost).log());
  BOOST_REQUIRE(converged(c, std::chrono::seconds(60), 1));
  for (std::size_t i = 0; i < c.size(); ++i) {
    c.node(i).stop();
  }
  std::int64_t from = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    from = std::max(from, first_segment(dir(i)));
  }
  BOOST_TEST(first_segment(dir(lost)) > 0);
  const auto reference = log_bytes_from(dir(lost), from);
  BOOST_TEST(!reference.empty());
  for (std::size_t i = 0; i < c.size(); ++i) {
    BOOST_TEST((log_bytes_from(dir(i), from) == reference), "node " << i + 1 << " differs from offset " << from);
  }
}

// Each replica's journal.wal, superblock and snapshot.bin live under its shard's file cache beside the log's files:
// 60 partitions with 3 replicas put 60 groups (8 files each: 3 of the group, the log's 2 superblock copies, a
// segment's .log, .index and .meta) on every node, under limits.open_files_max = 100. Once the writes are over (an
// idle group syncs its journal within a second), each node holds at most that many more descriptors than before.
BOOST_AUTO_TEST_CASE(idle_replicas_hold_no_more_descriptors_than_the_limit) {
  constexpr std::size_t files_max = 100;
  constexpr std::uint32_t count = 60;
  cluster c(3, 53, {"--set", "limits.open_files_max=" + std::to_string(files_max)});
  c.start_all();
  auto admin = c.client(0);
  RILL_REQUIRE_OK(admin->create_stream("s"));
  auto pc = c.client_of_all();
  RILL_REQUIRE_OK(pc->ping());
  std::vector<std::size_t> before;
  for (std::size_t i = 0; i < c.size(); ++i) {
    before.push_back(testing::open_descriptors(c.node(i).pid()));
  }
  proto::TopicConfig tc;
  tc.set_partitions(count);
  tc.set_replication_factor(3);
  RILL_REQUIRE_OK(admin->create_topic(net::by_name("s"), "t", tc));
  for (std::uint32_t p = 0; p < count; ++p) {
    storage::batch_builder b;
    b.add("k", fmt::format("{}", p));
    auto built = b.build();
    BOOST_REQUIRE(built.has_value());
    auto r = pc->produce(net::by_name("s"), net::by_name("t"), p, *built);
    BOOST_REQUIRE_MESSAGE(r.has_value(), "partition " << p << ": " << (r ? std::string() : r.error().message()));
  }
  // (A few more for client connections the nodes opened to each other or to the clients meanwhile.)
  constexpr std::size_t slack = 8;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::size_t bound = before[i] + files_max + slack;
    const std::size_t now = testing::descriptors_settled_at_most(c.node(i).pid(), bound, std::chrono::seconds(30));
    BOOST_TEST_MESSAGE("node " << i + 1 << ": " << before[i] << " descriptors before, " << now << " with " << count
                               << " replicas");
    BOOST_TEST(now <= bound, "node " << i + 1 << " holds " << now << " descriptors, more than " << bound);
  }
  for (std::uint32_t p = 0; p < count; ++p) {
    proto::PollRequest q;
    *q.mutable_stream() = net::by_name("s");
    *q.mutable_topic() = net::by_name("t");
    q.set_partition_id(p);
    q.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
    auto got = pc->poll(q);
    BOOST_REQUIRE_MESSAGE(got.has_value(), "partition " << p << ": " << (got ? std::string() : got.error().message()));
    BOOST_TEST(got->header.high_watermark() == 1u, "partition " << p);
  }
}
