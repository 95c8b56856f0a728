// The monitoring listener of the real rilld: /metrics in the Prometheus text format with counters that match what a
// client sent, /api/actors and /api/shards as JSON, /healthz, and the errors (404, 405).
#define BOOST_TEST_MODULE rill_monitoring_integration
#include <boost/test/unit_test.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "base/endian.h"
#include "net/client.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"
#include "storage/record_batch_builder.h"
#include "tests/integration/rilld_process.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::net;
using rill::testing::rilld_process;
using rill::testing::temp_data_dir;

namespace {

struct http_reply {
  int status = 0;
  std::string content_type;
  std::string body;
};

// A connected TCP socket to "host:port".
int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  BOOST_REQUIRE(::getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &res) == 0);
  const int fd = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::connect(fd, res->ai_addr, res->ai_addrlen) == 0);
  ::freeaddrinfo(res);
  return fd;
}

// One HTTP/1.1 request over a plain socket; reads until the server closes.
http_reply http(const std::string& address, const std::string& method, const std::string& target) {
  const int fd = connect_to(address);
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
  BOOST_REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  std::string raw;
  char buf[65536];
  for (;;) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  http_reply out;
  const auto end = raw.find("\r\n\r\n");
  BOOST_REQUIRE(end != std::string::npos);
  std::istringstream head(raw.substr(0, end));
  std::string version;
  head >> version >> out.status;
  std::string line;
  while (std::getline(head, line)) {
    if (line.rfind("Content-Type: ", 0) == 0) {
      out.content_type = line.substr(14, line.size() - 14 - (line.back() == '\r' ? 1 : 0));
    }
  }
  out.body = raw.substr(end + 4);
  return out;
}

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the Prometheus text format strictly enough to catch what a scraper would reject: every sample belongs to
// a family announced by a TYPE line before it, labels are well formed, values are numbers, and each histogram's
// buckets are cumulative with +Inf equal to its count.
std::vector<sample> parse_prometheus(const std::string& text) {
  static const std::regex sample_line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
  std::map<std::string, std::string> types;
  std::vector<sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name;
      std::string type;
      t >> name >> type;
      BOOST_TEST((type == "counter" || type == "gauge" || type == "histogram"), line);
      BOOST_TEST(!types.contains(name), "family announced twice: " << name);
      types[name] = type;
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0 || line.empty()) {
      continue;
    }
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(std::regex_match(line, m, sample_line), "not a sample line: " << line);
    sample s;
    s.name = m[1];
    const std::string labels = m[3];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label); it != std::sregex_iterator(); ++it) {
      s.labels[(*it)[1]] = (*it)[2];
    }
    std::size_t used = 0;
    s.value = std::stod(m[4], &used);
    BOOST_TEST(used == m[4].length(), line);
    std::string family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (!types.contains(family) && family.size() > sfx.size() &&
          family.compare(family.size() - sfx.size(), sfx.size(), sfx) == 0) {
        family = family.substr(0, family.size() - sfx.size());
      }
    }
    BOOST_REQUIRE_MESSAGE(types.contains(family), "sample before its TYPE line: " << line);
    out.push_back(std::move(s));
  }
  // Histograms: cumulative buckets, +Inf == count.
  std::map<std::string, std::pair<double, double>> last;  // series (labels without le) -> (last bucket, +Inf)
  std::map<std::string, double> counts;
  for (const auto& s : out) {
    auto key_labels = s.labels;
    key_labels.erase("le");
    std::string key = s.name.substr(0, s.name.rfind('_')) + ":";  // the family, then the labels
    for (const auto& [k, v] : key_labels) {
      key += k + "=" + v + ",";
    }
    if (s.name.ends_with("_bucket")) {
      auto& [prev, inf] = last[key];
      BOOST_TEST(s.value >= prev, "buckets not cumulative: " << key);
      prev = s.value;
      if (s.labels.at("le") == "+Inf") {
        inf = s.value;
      }
    } else if (s.name.ends_with("_count")) {
      counts[key] = s.value;
    }
  }
  for (const auto& [key, c] : counts) {
    BOOST_TEST(last[key].second == c, "+Inf bucket differs from _count: " << key);
  }
  return out;
}

double value_of(const std::vector<sample>& all, const std::string& name,
                const std::map<std::string, std::string>& where) {
  for (const auto& s : all) {
    if (s.name != name) {
      continue;
    }
    bool match = true;
    for (const auto& [k, v] : where) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) {
      return s.value;
    }
  }
  BOOST_FAIL("no sample " << name);
  return -1;
}

// Prometheus's own checker (and linter) of the text format accepts `page` without a complaint (where promtool was
// found at build time).
void promtool_accepts(const std::string& dir, const std::string& page) {
#ifdef PROMTOOL_PATH
  const std::string file = dir + "/metrics.txt";
  std::ofstream(file) << page;
  const std::string cmd = std::string(PROMTOOL_PATH) + " check metrics < " + file + " > " + file + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out(file + ".out");
  const std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  BOOST_TEST(rc == 0, "promtool check metrics: " << said);
  BOOST_TEST(said.empty(), "promtool check metrics: " << said);
#else
  (void)dir;
  (void)page;
  BOOST_TEST_MESSAGE(
      "promtool not found at build time: the Prometheus check is skipped (scripts/bootstrap installs "
      "prometheus)");
#endif
}

}  // namespace

BOOST_AUTO_TEST_CASE(metrics_parse_and_count_what_a_client_sent) {
  temp_data_dir dir;
  rilld_process proc(dir.path() + "/data");
  BOOST_REQUIRE_MESSAGE(proc.start().has_value(), proc.log());
  BOOST_REQUIRE(!proc.http_address().empty());
  client_options o;
  o.server = proc.address();
  auto c = client::connect(o);
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE((*c)->create_stream("s").has_value());
  proto::TopicConfig tc;
  tc.set_partitions(1);
  BOOST_REQUIRE((*c)->create_topic(by_name("s"), "t", tc).has_value());
  constexpr int produces = 25;
  std::uint64_t produced_bytes = 0;
  for (int i = 0; i < produces; ++i) {
    storage::batch_builder b;
    b.add("k", "value " + std::to_string(i));
    const auto batch = *b.build();
    produced_bytes += batch.size();
    BOOST_REQUIRE((*c)->produce(by_name("s"), by_name("t"), 0, batch).has_value());
  }

  // A group that committed 10 of the 25: its lag is 15.
  BOOST_REQUIRE((*c)->create_group(by_name("s"), by_name("t"), "g").has_value());
  {
    auto m = (*c)->join_group(by_name("s"), by_name("t"), by_name("g"));
    BOOST_REQUIRE(m.has_value());
    proto::GroupMember who;
    who.set_member_id(m->member_id());
    who.set_generation(m->generation());
    BOOST_REQUIRE((*c)->commit_group(by_name("s"), by_name("t"), by_name("g"), who, {{0, 10}}).has_value());
    BOOST_REQUIRE((*c)->leave_group(by_name("s"), by_name("t"), by_name("g"), m->member_id()).has_value());
  }

  const auto health = http(proc.http_address(), "GET", "/healthz");
  BOOST_TEST(health.status == 200);
  BOOST_TEST(health.body == "ok\n");

  const auto metrics = http(proc.http_address(), "GET", "/metrics");
  BOOST_TEST(metrics.status == 200);
  BOOST_TEST(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  const auto all = parse_prometheus(metrics.body);
  promtool_accepts(dir.path(), metrics.body);
  const std::map<std::string, std::string> partition{{"kind", "partition"}, {"name", "0/0/0"}};
  auto produce = partition;
  produce["type"] = "produce";
  BOOST_TEST(value_of(all, "rill_actor_handling_seconds_count", produce) == produces);
  BOOST_TEST(value_of(all, "rill_actor_messages_processed_total", partition) >= produces);
  BOOST_TEST(value_of(all, "rill_actor_mailbox_depth", partition) == 0);
  BOOST_TEST(value_of(all, "rill_actor_busy_seconds_total", partition) > 0);
  BOOST_TEST(value_of(all, "rill_connections", {}) == 1);
  // Storage descriptors (storage/file_cache.h): the shards' caches hold the partition's files, under the limit.
  double open_files = 0;
  for (const auto& smp : all) {
    open_files += smp.name == "rill_storage_open_files" ? smp.value : 0;
  }
  BOOST_TEST(open_files >= 1);
  BOOST_TEST(open_files <= 4000);
  BOOST_TEST(value_of(all, "rill_storage_open_file_evictions_total", {{"shard", "0"}}) >= 0);
  BOOST_TEST(value_of(all, "rill_process_resident_memory_bytes", {}) > 1e6);
  BOOST_TEST(value_of(all, "rill_process_open_fds", {}) > 3);
  BOOST_TEST(value_of(all, "rill_shard_jobs_total", {{"shard", "0"}}) > 0);
  // At least a write per produce, on whichever shard the partition lives: through the ring, or run by an idle shard
  // itself (storage.inline_syncs).
  double writes_seen = 0;
  for (const char* shard : {"0", "1"}) {
    writes_seen += value_of(all, "rill_shard_io_submissions_total", {{"shard", shard}}) +
                   value_of(all, "rill_shard_io_inline_syncs_total", {{"shard", shard}});
  }
  BOOST_TEST(writes_seen > produces);
  BOOST_TEST(value_of(all, "rill_shard_io_in_flight", {{"shard", "0"}}) >= 1);  // the listener's accept
  const std::map<std::string, std::string> p0{{"stream", "0"}, {"topic", "0"}, {"partition", "0"}};
  BOOST_TEST(value_of(all, "rill_partition_high_watermark", p0) == produces);
  BOOST_TEST(value_of(all, "rill_partition_log_end_offset", p0) == produces);
  BOOST_TEST(value_of(all, "rill_partition_log_start_offset", p0) == 0);
  BOOST_TEST(value_of(all, "rill_partition_segments", p0) == 1);
  BOOST_TEST(value_of(all, "rill_partition_bytes", p0) > 0);
  BOOST_TEST(value_of(all, "rill_partition_produce_seconds_count", p0) == produces);
  const auto writes = value_of(all, "rill_partition_write_seconds_count", p0);  // groups of appends
  BOOST_TEST((writes >= 1 && writes <= produces));
  BOOST_TEST(value_of(all, "rill_partition_produce_errors_total", p0) == 0);
  const std::map<std::string, std::string> g{{"stream", "0"}, {"topic", "0"}, {"group", "g"}};
  BOOST_TEST(value_of(all, "rill_group_members", g) == 0);
  BOOST_TEST(value_of(all, "rill_group_generation", g) == 2);  // the join, the leave
  auto g0 = g;
  g0["partition"] = "0";
  BOOST_TEST(value_of(all, "rill_group_lag", g0) == produces - 10);
  // This client's connection: every request it made, none refused.
  BOOST_TEST(value_of(all, "rill_connection_requests_total", {}) >= produces + 6);
  BOOST_TEST(value_of(all, "rill_connection_errors_total", {}) == 0);
  BOOST_TEST(value_of(all, "rill_connection_received_bytes_total", {}) > 0);
  BOOST_TEST(value_of(all, "rill_connection_sent_bytes_total", {}) > 0);
  // Copies per produced byte: the router's one copy of each validated batch; small requests sent one at a time are
  // never moved inside the receive buffer.
  BOOST_TEST(value_of(all, "rill_connection_produce_bytes_total", {}) == static_cast<double>(produced_bytes));
  BOOST_TEST(value_of(all, "rill_connection_produce_copied_bytes_total", {}) == static_cast<double>(produced_bytes));
  BOOST_TEST(value_of(all, "rill_connection_receive_copied_bytes_total", {}) == 0);
  // The client's connection is named by its address and counts its requests' replies from the partition.
  const auto client_conn =
      value_of(all, "rill_actor_handling_seconds_count", {{"kind", "connection"}, {"type", "reply"}});
  BOOST_TEST(client_conn >= produces);

  const auto actors = http(proc.http_address(), "GET", "/api/actors");
  BOOST_TEST(actors.status == 200);
  BOOST_TEST(actors.content_type == "application/json");
  const auto j = nlohmann::json::parse(actors.body);
  bool found = false;
  for (const auto& a : j) {
    if (a["kind"] == "partition" && a["name"] == "0/0/0") {
      found = true;
      BOOST_TEST(a["types"]["produce"]["count"].get<int>() == produces);
      BOOST_TEST(a["mailbox"].get<int>() == 0);
    }
  }
  BOOST_TEST(found);
  const auto partitions = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/partitions").body);
  BOOST_REQUIRE(partitions.size() == 1u);
  BOOST_TEST(partitions[0]["high_watermark"].get<int>() == produces);
  BOOST_TEST(partitions[0]["produce"]["count"].get<int>() == produces);
  const auto shards = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/shards").body);
  BOOST_TEST(shards.size() == 2u);  // runtime.cpu_allocation=2 in the test harness
  std::uint64_t resident = 0;
  for (const auto& s : shards) {
    resident += s["actors"].get<std::uint64_t>();
  }
  BOOST_TEST(resident >= 4u);  // metadata, listener, partition, connection at least

  // A client that connects and sends nothing is dropped after 5 s; the others are then served (before the fix they
  // waited forever, and so did rilld's shutdown).
  {
    const int idle = connect_to(proc.http_address());
    BOOST_TEST(http(proc.http_address(), "GET", "/healthz").status == 200);
    char b = 0;
    BOOST_TEST(::recv(idle, &b, 1, 0) == 0);  // the server closed the idle connection
    ::close(idle);
  }
  // Silent and trickling clients (slowloris) do not delay a probe: /healthz is answered while every one of them is
  // still connected, waiting for its request deadline (a listener serving one connection at a time answered it only
  // after dropping them, 5 s each).
  {
    std::vector<int> slow;
    for (int i = 0; i < 5; ++i) {
      slow.push_back(connect_to(proc.http_address()));
    }
    BOOST_REQUIRE(::send(slow[0], "GET /metr", 9, 0) == 9);
    BOOST_TEST(http(proc.http_address(), "GET", "/healthz").status == 200);
    for (const int fd : slow) {
      char b = 0;
      errno = 0;
      BOOST_TEST(::recv(fd, &b, 1, MSG_DONTWAIT) == -1);  // neither answered nor dropped yet
      BOOST_TEST((errno == EAGAIN || errno == EWOULDBLOCK));
      ::close(fd);
    }
  }
  BOOST_TEST(http(proc.http_address(), "GET", "/nope").status == 404);
  BOOST_TEST(http(proc.http_address(), "POST", "/metrics").status == 405);
  const auto head = http(proc.http_address(), "HEAD", "/healthz");
  BOOST_TEST(head.status == 200);
  BOOST_TEST(head.body.empty());
  BOOST_TEST(proc.stop() == 0);
}

// Failure injection stalls a partition's actor: requests pile up in its mailbox, /api/actors shows the depth rise,
// and once the stall ends everything is handled and the depth is back to zero. The stall is long (60 s) and ended
// by the test once it has seen all the requests waiting (/debug/unstall): no window of time to hit.
BOOST_AUTO_TEST_CASE(streams_and_topics_are_monitored_by_name_and_api_topics_sums_them) {
  temp_data_dir dir;
  rilld_process proc(dir.path() + "/data");
  BOOST_REQUIRE_MESSAGE(proc.start().has_value(), proc.log());
  client_options o;
  o.server = proc.address();
  auto c = client::connect(o);
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE((*c)->create_stream("shop").has_value());
  proto::TopicConfig tc;
  tc.set_partitions(2);
  BOOST_REQUIRE((*c)->create_topic(by_name("shop"), "orders", tc).has_value());
  // 30 records on partition 1, in 3 batches of 10; a consumer reads the first batch; a group commits 12.
  for (int i = 0; i < 3; ++i) {
    storage::batch_builder b;
    for (int r = 0; r < 10; ++r) {
      b.add("k", "order " + std::to_string(i * 10 + r));
    }
    BOOST_REQUIRE((*c)->produce(by_name("shop"), by_name("orders"), 1, *b.build()).has_value());
  }
  proto::PollRequest poll;
  *poll.mutable_stream() = by_name("shop");
  *poll.mutable_topic() = by_name("orders");
  poll.set_partition_id(1);
  poll.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
  poll.mutable_strategy()->set_value(0);
  poll.set_max_records(5);  // whole batches come back: the first, of 10
  auto polled = (*c)->poll(poll);
  BOOST_REQUIRE(polled.has_value());
  const auto read = polled->header.records();
  BOOST_TEST(read >= 5u);
  BOOST_REQUIRE((*c)->create_group(by_name("shop"), by_name("orders"), "billing").has_value());
  {
    auto m = (*c)->join_group(by_name("shop"), by_name("orders"), by_name("billing"));
    BOOST_REQUIRE(m.has_value());
    proto::GroupMember who;
    who.set_member_id(m->member_id());
    who.set_generation(m->generation());
    BOOST_REQUIRE(
        (*c)->commit_group(by_name("shop"), by_name("orders"), by_name("billing"), who, {{1, 12}}).has_value());
  }

  // /metrics: the names beside the ids (today's queries by id keep working), escaped and accepted by promtool.
  auto page = http(proc.http_address(), "GET", "/metrics").body;
  promtool_accepts(dir.path(), page);
  auto all = parse_prometheus(page);
  const std::map<std::string, std::string> p1{
      {"stream", "0"}, {"topic", "0"}, {"partition", "1"}, {"stream_name", "shop"}, {"topic_name", "orders"}};
  BOOST_TEST(value_of(all, "rill_partition_high_watermark", p1) == 30);
  BOOST_TEST(value_of(all, "rill_partition_read_records_total", p1) == static_cast<double>(read));
  BOOST_TEST(value_of(all, "rill_partition_high_watermark", {{"stream", "0"}, {"topic", "0"}, {"partition", "1"}}) ==
             30);
  const std::map<std::string, std::string> g1{
      {"stream_name", "shop"}, {"topic_name", "orders"}, {"group", "billing"}, {"partition", "1"}};
  BOOST_TEST(value_of(all, "rill_group_lag", g1) == 30 - 12);
  BOOST_TEST(value_of(all, "rill_group_members", {{"stream_name", "shop"}, {"group", "billing"}}) == 1);

  // /api/partitions and /api/actors by name.
  const auto partitions = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/partitions").body);
  BOOST_REQUIRE(partitions.size() == 2u);
  for (const auto& p : partitions) {
    BOOST_TEST(p["stream_name"] == "shop");
    BOOST_TEST(p["topic_name"] == "orders");
  }
  std::set<std::string> display;
  for (const auto& a : nlohmann::json::parse(http(proc.http_address(), "GET", "/api/actors").body)) {
    display.insert(a["display_name"].get<std::string>());
  }
  BOOST_TEST(display.contains("shop/orders/1"));
  BOOST_TEST(display.contains("shop/orders/billing"));

  // /api/topics: what the dashboard shows first.
  const auto topics_reply = http(proc.http_address(), "GET", "/api/topics");
  BOOST_TEST(topics_reply.status == 200);
  BOOST_TEST(topics_reply.content_type == "application/json");
  const auto topics = nlohmann::json::parse(topics_reply.body);
  BOOST_TEST(topics["totals"]["streams"] == 1);
  BOOST_TEST(topics["totals"]["topics"] == 1);
  BOOST_TEST(topics["totals"]["partitions"] == 2);
  BOOST_TEST(topics["totals"]["groups"] == 1);
  BOOST_TEST(topics["totals"]["connections"] == 1);
  BOOST_TEST(topics["totals"]["records"] == 30);
  BOOST_TEST(topics["totals"]["records_read"] == read);
  BOOST_TEST(topics["totals"]["produce"]["count"] == 3);
  BOOST_REQUIRE(topics["topics"].size() == 1u);
  const auto& t = topics["topics"][0];
  BOOST_TEST(t["stream_name"] == "shop");
  BOOST_TEST(t["topic_name"] == "orders");
  BOOST_TEST(t["partitions"] == 2);
  BOOST_TEST(t["high_watermark"] == 30);
  BOOST_TEST(t["bytes"].get<std::uint64_t>() > 0u);
  BOOST_REQUIRE(t["groups"].size() == 1u);
  BOOST_TEST(t["groups"][0]["name"] == "billing");
  BOOST_TEST(t["groups"][0]["members"] == 1);
  BOOST_TEST(t["groups"][0]["lag"] == 30 - 12);

  // A renamed topic shows its new name at once (names are looked up when a page is rendered).
  BOOST_REQUIRE((*c)->update_topic(by_name("shop"), by_name("orders"), proto::TopicConfig{}, "purchases").has_value());
  // (A rename reopens nothing, but the metrics are sampled: wait until they are rendered with the new name.)
  auto renamed = p1;
  renamed["topic_name"] = "purchases";
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    for (const auto& smp : parse_prometheus(http(proc.http_address(), "GET", "/metrics").body)) {
      bool match = smp.name == "rill_partition_high_watermark" && smp.value == 30;
      for (const auto& [k, v] : renamed) {
        match = match && smp.labels.contains(k) && smp.labels.at(k) == v;
      }
      seen = seen || match;
    }
    if (!seen) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  BOOST_TEST(seen, "partition 1 under the topic's new name");
  const auto after = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/topics").body);
  BOOST_TEST(after["topics"][0]["topic_name"] == "purchases");
}

BOOST_AUTO_TEST_CASE(a_stalled_partition_shows_its_mailbox_rise_and_fall) {
  temp_data_dir dir;
  rilld_process proc(dir.path() + "/data", {"--set", "debug.failure_injection=true"});
  BOOST_REQUIRE_MESSAGE(proc.start().has_value(), proc.log());
  client_options o;
  o.server = proc.address();
  auto c = client::connect(o);
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE((*c)->create_stream("s").has_value());
  proto::TopicConfig tc;
  tc.set_partitions(1);
  BOOST_REQUIRE((*c)->create_topic(by_name("s"), "t", tc).has_value());
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/stall?stream=0&topic=0&partition=9&ms=100").status == 404);
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/stall?stream=0").status == 400);
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/stall?stream=0&topic=0&partition=0&ms=0").status == 400);

  auto mailbox = [&] {
    const auto j = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/actors").body);
    for (const auto& a : j) {
      if (a["kind"] == "partition" && a["name"] == "0/0/0") {
        return a["mailbox"].get<std::uint64_t>();
      }
    }
    BOOST_FAIL("no partition actor");
    return std::uint64_t{0};
  };
  BOOST_TEST(mailbox() == 0u);
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/unstall?stream=0&topic=0&partition=9").status == 404);
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/unstall?stream=0").status == 400);
  BOOST_TEST(http(proc.http_address(), "POST", "/debug/unstall?stream=0&topic=0&partition=0").status == 200);  // none
  BOOST_REQUIRE(http(proc.http_address(), "POST", "/debug/stall?stream=0&topic=0&partition=0&ms=60000").status == 200);

  // 20 produce requests pipelined on one connection: all reach the stalled partition's mailbox.
  constexpr int requests = 20;
  const int fd = connect_to(proc.address());
  std::vector<std::byte> frames;
  for (int i = 0; i < requests; ++i) {
    proto::ProduceRequest h;
    *h.mutable_stream() = by_name("s");
    *h.mutable_topic() = by_name("t");
    h.mutable_partitioning()->set_partition_id(0);
    storage::batch_builder b;
    b.add("k", "stalled " + std::to_string(i));
    net::append_request(frames, static_cast<std::uint32_t>(i + 1), net::api::produce, h, *b.build());
  }
  BOOST_REQUIRE(::send(fd, frames.data(), frames.size(), 0) == static_cast<ssize_t>(frames.size()));

  // The deadlines only keep a broken server from hanging the test (the stall itself ends after 60 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  std::uint64_t deepest = 0;
  while (deepest < static_cast<std::uint64_t>(requests) && std::chrono::steady_clock::now() < deadline) {
    deepest = std::max(deepest, mailbox());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_REQUIRE_MESSAGE(deepest >= static_cast<std::uint64_t>(requests),
                        "the stalled partition's mailbox held at most " << deepest << " of " << requests);
  // Still stalled: nothing was answered yet.
  std::byte none;
  errno = 0;
  BOOST_TEST(::recv(fd, &none, 1, MSG_DONTWAIT | MSG_PEEK) == -1);
  BOOST_TEST((errno == EAGAIN || errno == EWOULDBLOCK));
  // The stall ends: the depth falls back to zero and every request is answered, in order, without error.
  BOOST_REQUIRE(http(proc.http_address(), "POST", "/debug/unstall?stream=0&topic=0&partition=0").status == 200);
  std::uint64_t now = deepest;
  const auto drained_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (now > 0 && std::chrono::steady_clock::now() < drained_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = mailbox();
  }
  BOOST_TEST(now == 0u, "the mailbox still holds " << now << " after the stall ended");
  std::vector<std::byte> in;
  int answered = 0;
  while (answered < requests) {
    std::byte buf[4096];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    BOOST_REQUIRE(n > 0);
    in.insert(in.end(), buf, buf + n);
    for (;;) {
      auto size = net::next_frame_size(in, net::reply_prefix_bytes, 1 << 20);
      BOOST_REQUIRE(size.has_value());
      if (!size->has_value()) {
        break;
      }
      auto reply = net::parse_reply(std::span<const std::byte>(in).first(**size));
      BOOST_REQUIRE(reply.has_value());
      BOOST_TEST((reply->st == net::status::ok));
      BOOST_TEST(reply->correlation_id == static_cast<std::uint32_t>(answered + 1));
      ++answered;
      in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(**size));
    }
  }
  ::close(fd);
  const auto p = nlohmann::json::parse(http(proc.http_address(), "GET", "/api/partitions").body);
  BOOST_TEST(p[0]["high_watermark"].get<int>() == requests);
  BOOST_TEST(proc.stop() == 0);
}

namespace {
// Sends `pings` pipelined pings and one ping carrying `large_bytes` of batches (a large frame) in one go, then
// reads every reply: all ok, in order.
void pipelined_burst_and_large_frame(int fd, std::uint32_t pings, std::size_t large_bytes) {
  std::vector<std::byte> out;
  proto::PingRequest h;
  for (std::uint32_t i = 1; i <= pings; ++i) {
    append_request(out, i, api::ping, h);
  }
  const std::vector<std::byte> batches(large_bytes, std::byte{7});
  append_request(out, pings + 1, api::ping, h, batches);
  std::size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    BOOST_REQUIRE(n > 0);
    sent += static_cast<std::size_t>(n);
  }
  auto recv_all = [fd](std::byte* p, std::size_t n) {
    while (n > 0) {
      const ssize_t k = ::recv(fd, p, n, 0);
      BOOST_REQUIRE(k > 0);
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  };
  for (std::uint32_t i = 1; i <= pings + 1; ++i) {
    std::vector<std::byte> frame(length_bytes);
    recv_all(frame.data(), length_bytes);
    frame.resize(length_bytes + load_be<std::uint32_t>(frame.data()));
    recv_all(frame.data() + length_bytes, frame.size() - length_bytes);
    const auto reply = parse_reply(frame);
    BOOST_REQUIRE(reply.has_value());
    BOOST_TEST(reply->correlation_id == i);
    BOOST_TEST(static_cast<int>(reply->st) == static_cast<int>(status::ok));
  }
}

double sum_of(const std::vector<sample>& all, const std::string& name) {
  double sum = 0;
  for (const auto& s : all) {
    sum += s.name == name ? s.value : 0;
  }
  return sum;
}
}  // namespace

BOOST_AUTO_TEST_CASE(an_idle_connection_holds_no_pooled_buffer_and_still_serves_bursts_and_large_frames) {
  temp_data_dir dir;
  rilld_process proc(dir.path() + "/data");
  BOOST_REQUIRE_MESSAGE(proc.start().has_value(), proc.log());
  const int fd = connect_to(proc.address());
  for (int round = 0; round < 2; ++round) {
    // A burst of pipelined requests and a 12 MiB frame (under the 16 MiB network.max_frame_bytes), then idle.
    pipelined_burst_and_large_frame(fd, 200, 12u << 20);
    // Idle now: the connection is still open and holds no receive buffer, and no shard has a pooled buffer out
    // (no partitions exist, so the connection was the pool's only user); the buffers it used are back in the pools.
    bool idle = false;
    std::vector<sample> all;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         !idle && std::chrono::steady_clock::now() < deadline;) {
      const auto r = http(proc.http_address(), "GET", "/metrics");
      BOOST_REQUIRE(r.status == 200);
      all = parse_prometheus(r.body);
      idle = sum_of(all, "rill_connections") == 1 && sum_of(all, "rill_connection_receive_buffer_bytes") == 0 &&
             sum_of(all, "rill_shard_buffer_pool_outstanding_buffers") == 0;
      if (!idle) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    BOOST_TEST_INFO("round " << round);
    BOOST_TEST(idle);
    BOOST_TEST(sum_of(all, "rill_shard_buffer_pool_cached_bytes") > 0);
    BOOST_TEST(sum_of(all, "rill_connection_requests_total") == 201.0 * (round + 1));
  }
  ::close(fd);
}

// monitoring.partition_series_max and actor_series_max below what the node holds: /metrics shows a topic of three
// partitions as one series per family (their sums) and the partition actors per shard, says so, and stays valid for
// promtool; /api/partitions still lists each partition.
BOOST_AUTO_TEST_CASE(partitions_beyond_the_series_limit_are_summed_per_topic) {
  temp_data_dir dir;
  rilld_process proc(dir.path() + "/data",
                     {"--set", "monitoring.partition_series_max=2", "--set", "monitoring.actor_series_max=2"});
  BOOST_REQUIRE_MESSAGE(proc.start().has_value(), proc.log());
  client_options o;
  o.server = proc.address();
  auto c = client::connect(o);
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE((*c)->create_stream("s").has_value());
  proto::TopicConfig tc;
  tc.set_partitions(3);
  BOOST_REQUIRE((*c)->create_topic(by_name("s"), "t", tc).has_value());
  for (std::uint32_t p = 0; p < 3; ++p) {
    for (std::uint32_t i = 0; i <= p; ++i) {  // 1, 2 and 3 batches
      storage::batch_builder b;
      b.add("k", "v");
      BOOST_REQUIRE((*c)->produce(by_name("s"), by_name("t"), p, *b.build()).has_value());
    }
  }
  // A second topic of one partition: four partitions in two topics, so per topic fits the limit of 2.
  tc.set_partitions(1);
  BOOST_REQUIRE((*c)->create_topic(by_name("s"), "u", tc).has_value());
  {
    storage::batch_builder b;
    b.add("k", "v");
    BOOST_REQUIRE((*c)->produce(by_name("s"), by_name("u"), 0, *b.build()).has_value());
  }
  const auto metrics = http(proc.http_address(), "GET", "/metrics");
  BOOST_REQUIRE(metrics.status == 200);
  const auto all = parse_prometheus(metrics.body);
  promtool_accepts(dir.path(), metrics.body);
  BOOST_TEST(value_of(all, "rill_metrics_partition_series_aggregated", {{"level", "topic"}}) == 1);
  BOOST_TEST(value_of(all, "rill_metrics_actor_series_aggregated", {{"kind", "partition"}}) == 1);
  const std::map<std::string, std::string> topic{{"stream", "0"}, {"topic", "0"}};
  BOOST_TEST(value_of(all, "rill_partitions", topic) == 3);
  BOOST_TEST(value_of(all, "rill_partition_high_watermark", topic) == 1 + 2 + 3);
  BOOST_TEST(value_of(all, "rill_partition_produce_seconds_count", topic) == 1 + 2 + 3);
  for (const auto& s : all) {
    if (s.name.rfind("rill_partition_", 0) == 0) {
      BOOST_TEST(!s.labels.contains("partition"), s.name);
    }
    if (s.name.rfind("rill_actor_", 0) == 0 && s.labels.at("kind") == "partition") {
      BOOST_TEST(!s.labels.contains("name"), s.name);
      BOOST_TEST(!s.labels.contains("id"), s.name);
    }
  }
  // The produces handled by the partition actors, summed per shard: six.
  double produces = 0;
  for (const auto& s : all) {
    if (s.name == "rill_actor_handling_seconds_count" && s.labels.at("kind") == "partition" &&
        s.labels.at("type") == "produce") {
      produces += s.value;
    }
  }
  BOOST_TEST(produces == 6 + 1);
  BOOST_TEST(value_of(all, "rill_partition_high_watermark", {{"stream", "0"}, {"topic", "1"}}) == 1);
  BOOST_TEST(nlohmann::json::parse(http(proc.http_address(), "GET", "/api/partitions").body).size() == 4u);

  // One topic on demand: topic 1 (one partition, within the limit) in full detail, and nothing else's series.
  const auto detail = http(proc.http_address(), "GET", "/metrics?stream=0&topic=1");
  BOOST_REQUIRE(detail.status == 200);
  const auto one = parse_prometheus(detail.body);
  promtool_accepts(dir.path(), detail.body);
  BOOST_TEST(value_of(one, "rill_metrics_partition_series_aggregated", {{"level", "partition"}}) == 0);
  BOOST_TEST(value_of(one, "rill_partition_high_watermark", {{"stream", "0"}, {"topic", "1"}, {"partition", "0"}}) ==
             1);
  BOOST_TEST(value_of(one, "rill_actor_handling_seconds_count",
                      {{"kind", "partition"}, {"name", "0/1/0"}, {"type", "produce"}}) == 1);
  for (const auto& s : one) {  // every series left is the topic's; no connection or shard series
    if (s.name.rfind("rill_partition_", 0) == 0 || s.name.rfind("rill_group_", 0) == 0) {
      BOOST_TEST(s.labels.at("topic") == "1", s.name);
    } else if (s.name.rfind("rill_actor_", 0) == 0) {
      BOOST_TEST(s.labels.at("name").rfind("0/1/", 0) == 0, s.name);
    } else {
      BOOST_TEST(s.name.rfind("rill_connection_", 0) != 0, s.name);
      BOOST_TEST(s.name.rfind("rill_shard_", 0) != 0, s.name);
    }
  }
  // Topic 0 (three partitions, above the limit) stays summed; bad queries are refused.
  const auto t0 = parse_prometheus(http(proc.http_address(), "GET", "/metrics?stream=0&topic=0").body);
  BOOST_TEST(value_of(t0, "rill_partition_high_watermark", {{"stream", "0"}, {"topic", "0"}}) == 6);
  BOOST_TEST(http(proc.http_address(), "GET", "/metrics?stream=0&topic=x").status == 400);
  BOOST_TEST(http(proc.http_address(), "GET", "/metrics?detail=1").status == 400);
  BOOST_TEST(http(proc.http_address(), "GET", "/metrics?stream=0").status == 400);
  BOOST_TEST(http(proc.http_address(), "GET", "/metrics?stream=0&topic=99999").status == 400);
}

// A storage failure fences a partition (here: an fdatasync that reports EIO, by failure injection): the produce
// fails, and the partition recovers by itself, without a restart, trusting nothing above what it had synced; it then
// takes writes again, and describe and /metrics say what happened.
BOOST_AUTO_TEST_CASE(a_fenced_partition_recovers_by_itself_and_says_so) {
  temp_data_dir dir;
  rilld_process p(dir.path() + "/d", {"--set", "debug.failure_injection=true"});
  BOOST_REQUIRE_MESSAGE(p.start().has_value(), p.log());
  client_options o;
  o.server = p.address();
  auto c = client::connect(o);
  RILL_REQUIRE_OK(c);
  RILL_REQUIRE_OK((*c)->create_stream("s"));
  proto::TopicConfig one;
  one.set_partitions(1);
  RILL_REQUIRE_OK((*c)->create_topic(by_name("s"), "t", one));
  auto batch = [](const std::string& v) {
    storage::batch_builder b;
    b.add("k", v);
    return *b.build();
  };
  for (int i = 0; i < 3; ++i) {
    RILL_REQUIRE_OK((*c)->produce(by_name("s"), by_name("t"), 0, batch("before-" + std::to_string(i))));
  }
  BOOST_TEST(http(p.http_address(), "POST", "/debug/fail-syncs?stream=0&topic=0&partition=0&n=1").status == 200);
  BOOST_TEST(http(p.http_address(), "POST", "/debug/fail-syncs?stream=0&topic=0&partition=0").status == 400);
  auto failed = (*c)->produce(by_name("s"), by_name("t"), 0, batch("lost"));
  BOOST_REQUIRE(!failed.has_value());
  const auto st = static_cast<status>(failed.error().code().value());
  BOOST_TEST((st == status::partition_fenced || st == status::storage_error), failed.error().message());
  // Recovered by itself: waited for (the first try comes 200 ms after the fence), with a guard against hanging.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  proto::PartitionInfo info;
  for (;;) {
    auto t = (*c)->get_topic(by_name("s"), by_name("t"));
    RILL_REQUIRE_OK(t);
    info = t->partitions(0);
    if (info.recoveries() >= 1 && info.fenced().empty()) {
      break;
    }
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no recovery within 60 s:\n" << p.log());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(info.recoveries() == 1u);
  BOOST_TEST(info.high_watermark() == 3u);  // the produce whose sync failed was never visible, and is gone
  RILL_REQUIRE_OK((*c)->produce(by_name("s"), by_name("t"), 0, batch("after")));
  proto::PollRequest req;
  *req.mutable_stream() = by_name("s");
  *req.mutable_topic() = by_name("t");
  req.set_partition_id(0);
  req.mutable_strategy()->set_kind(proto::PollStrategy::FIRST);
  req.set_max_records(100);
  auto polled = (*c)->poll(req);
  RILL_REQUIRE_OK(polled);
  auto records = decode_records(0, polled->batches);
  RILL_REQUIRE_OK(records);
  BOOST_REQUIRE(records->size() == 4u);
  BOOST_TEST(*records->at(2).value == "before-2");
  BOOST_TEST(*records->at(3).value == "after");
  BOOST_TEST(records->at(3).offset == 3);
  const auto metrics = http(p.http_address(), "GET", "/metrics").body;
  BOOST_TEST(metrics.find("rill_partition_recoveries_total{stream=\"0\",topic=\"0\",partition=\"0\",stream_name=\"s\","
                          "topic_name=\"t\"} 1") != std::string::npos,
             metrics.substr(0, 2000));
  BOOST_TEST(
      metrics.find(
          "rill_partition_fenced{stream=\"0\",topic=\"0\",partition=\"0\",stream_name=\"s\",topic_name=\"t\"} 0") !=
      std::string::npos);
  BOOST_TEST(p.log().find("recovered from a storage failure") != std::string::npos, p.log());
  c->reset();
  BOOST_TEST(p.stop() == 0);
}
