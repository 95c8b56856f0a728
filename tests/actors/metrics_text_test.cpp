// The /metrics renderer as a plain function over synthetic samples (tests/actors/synthetic_samples.h): the bound on
// its series once a node has more partitions or actors than monitoring.*_series_max, that every aggregate is the
// sum of what it replaces, the limits at 0 and at the top of their range, and what the page says about it; stream and
// topic names as labels beside the ids (actors/sample_names.h) and /api/topics.
#define BOOST_TEST_MODULE rill_metrics_text
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/runtime/metrics.h"
#include "actors/sample_names.h"
#include "config/server_config.h"
#include "tests/actors/synthetic_samples.h"

using namespace rill;
using namespace rill::actors;

namespace {

struct sample_line {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The sample lines of a page; checks on the way that every family is announced once, before its samples.
std::vector<sample_line> parse(const std::string& page) {
  std::vector<sample_line> out;
  std::set<std::string> families;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      BOOST_TEST(families.insert(name).second, "announced twice: " << name);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      continue;
    }
    BOOST_REQUIRE_MESSAGE(!line.empty() && line[0] != '#', "not a sample line: " << line);
    sample_line s;
    const auto space = line.rfind(' ');
    s.value = std::stod(line.substr(space + 1));
    const auto brace = line.find('{');
    s.name = line.substr(0, std::min(brace, space));
    if (brace < space) {
      const auto labels = line.substr(brace + 1, line.rfind('}') - brace - 1);
      std::size_t at = 0;
      while (at < labels.size()) {
        const auto eq = labels.find('=', at);
        const auto close = labels.find('"', eq + 2);
        s.labels[labels.substr(at, eq - at)] = labels.substr(eq + 2, close - eq - 2);
        at = close + 2;
      }
    }
    std::string family = s.name;
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (!families.contains(family) && family.ends_with(suffix)) {
        family.resize(family.size() - suffix.size());
      }
    }
    BOOST_TEST(families.contains(family), "a sample before its family: " << line);
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, std::size_t> series_per_name(const std::vector<sample_line>& samples) {
  std::map<std::string, std::size_t> out;
  for (const auto& s : samples) {
    ++out[s.name];
  }
  return out;
}

// Per name (and le, and message type, and kind for actor series): the sum over every series. Aggregation must keep
// these: an aggregate is the sum of the series it replaces.
std::map<std::string, double> totals(const std::vector<sample_line>& samples, const std::string& prefix) {
  std::map<std::string, double> out;
  for (const auto& s : samples) {
    if (s.name.rfind(prefix, 0) != 0) {
      continue;
    }
    std::string key = s.name;
    for (const char* label : {"le", "type", "kind"}) {
      if (s.labels.contains(label)) {
        key += std::string(",") + label + "=" + s.labels.at(label);
      }
    }
    out[key] += s.value;
  }
  return out;
}

void check_same_totals(const std::vector<sample_line>& detailed, const std::vector<sample_line>& aggregated,
                       const std::string& prefix) {
  const auto a = totals(detailed, prefix);
  const auto b = totals(aggregated, prefix);
  BOOST_TEST(a.size() == b.size(), prefix);
  for (const auto& [key, value] : a) {
    BOOST_REQUIRE_MESSAGE(b.contains(key), key << " is gone");
    BOOST_TEST(std::abs(b.at(key) - value) <= 1e-6 * std::max(1.0, std::abs(value)), key);
  }
}

std::string render(const test::synthetic_node& node, std::uint64_t partition_series_max,
                   std::uint64_t actor_series_max) {
  return render_prometheus(test::synthetic_actors(node), test::synthetic_shards(node), process_sample{},
                           series_limits{partition_series_max, actor_series_max});
}

double value_of(const std::vector<sample_line>& samples, const std::string& name,
                const std::map<std::string, std::string>& labels) {
  for (const auto& s : samples) {
    if (s.name == name && s.labels == labels) {
      return s.value;
    }
  }
  BOOST_FAIL("no " << name << " with the labels asked for");
  return 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ten_thousand_partitions_above_the_limit_are_summed_per_topic_in_a_bounded_page) {
  test::synthetic_node node;  // 10,000 partitions in 10 topics of 1,000, 100 connections, 2 shards
  const auto actors = test::synthetic_actors(node);
  const auto page = render(node, 1'000, 1'000);
  const auto samples = parse(page);
  const auto counts = series_per_name(samples);
  BOOST_TEST_MESSAGE("10,000 partitions, limits 1,000: " << page.size() << " bytes, " << samples.size() << " samples");
  // Per topic: ten series in each partition family, each the sum of its topic's partitions.
  BOOST_TEST(value_of(samples, "rill_metrics_partition_series_aggregated", {{"level", "topic"}}) == 1);
  for (const char* name :
       {"rill_partition_high_watermark", "rill_partition_bytes", "rill_partition_segments",
        "rill_partition_produce_errors_total", "rill_partition_write_seconds_count", "rill_partitions"}) {
    BOOST_TEST(counts.at(name) == 10u, name);
  }
  for (std::uint32_t t = 0; t < 10; ++t) {
    std::int64_t hw = 0;
    std::uint64_t bytes = 0;
    std::uint64_t produce_bucket_3 = 0;
    for (const auto& a : actors) {
      if (a.partition && a.partition->topic_id == t) {
        hw += a.partition->high_watermark;
        bytes += a.partition->bytes;
        for (std::size_t b = 0; b <= 3; ++b) {
          produce_bucket_3 += a.partition->produce.counts[b];
        }
      }
    }
    const std::map<std::string, std::string> topic{{"stream", "0"}, {"topic", std::to_string(t)}};
    BOOST_TEST(value_of(samples, "rill_partition_high_watermark", topic) == static_cast<double>(hw));
    BOOST_TEST(value_of(samples, "rill_partition_bytes", topic) == static_cast<double>(bytes));
    BOOST_TEST(value_of(samples, "rill_partitions", topic) == 1'000);
    auto bucket = topic;
    bucket["le"] = "1e-05";  // the fourth bound
    BOOST_TEST(value_of(samples, "rill_partition_produce_seconds_bucket", bucket) ==
               static_cast<double>(produce_bucket_3));
    // The group of the topic: lag summed over its partitions.
    auto group = topic;
    group["group"] = "readers";
    std::int64_t lag = 0;
    for (const auto& a : actors) {
      if (a.partition && a.partition->topic_id == t) {
        lag +=
            std::max<std::int64_t>(0, a.partition->high_watermark - std::max<std::int64_t>(50, a.partition->log_start));
      }
    }
    BOOST_TEST(value_of(samples, "rill_group_lag", group) == static_cast<double>(lag));
  }
  // Partition actors per shard (10,000 > 1,000); connections (100), groups (10) and metadata one by one.
  BOOST_TEST(value_of(samples, "rill_metrics_actor_series_aggregated", {{"kind", "partition"}}) == 1);
  BOOST_TEST(value_of(samples, "rill_metrics_actor_series_aggregated", {{"kind", "connection"}}) == 0);
  BOOST_TEST(counts.at("rill_actor_messages_received_total") == 2u + 100u + 10u + 1u);
  BOOST_TEST(counts.at("rill_connection_requests_total") == 100u);
  std::uint64_t received_shard_1 = 0;
  for (const auto& a : actors) {
    if (a.kind == "partition" && a.shard == 1) {
      received_shard_1 += a.received;
    }
  }
  BOOST_TEST(value_of(samples, "rill_actor_messages_received_total", {{"kind", "partition"}, {"shard", "1"}}) ==
             static_cast<double>(received_shard_1));
  // The bound: partition series 10 per family, actor series (2 + 111) per family, so well under a megabyte where
  // one series per partition makes 160 MB (bench/micro metrics_render).
  BOOST_TEST(samples.size() < 20'000u);
  BOOST_TEST(page.size() < 2'000'000u);
  // And nothing is lost: the same totals as with one series per partition and per actor.
  const auto detailed = parse(render(node, config::partition_series_limit, config::actor_series_limit));
  check_same_totals(detailed, samples, "rill_partition_");
  check_same_totals(detailed, samples, "rill_actor_");
  check_same_totals(detailed, samples, "rill_group_lag");
}

BOOST_AUTO_TEST_CASE(within_the_limit_and_at_the_top_of_the_range_every_partition_has_its_series) {
  test::synthetic_node small;
  small.partitions = 500;
  small.partitions_per_topic = 100;
  const auto within = parse(render(small, 1'000, 1'000));
  BOOST_TEST(value_of(within, "rill_metrics_partition_series_aggregated", {{"level", "partition"}}) == 0);
  BOOST_TEST(series_per_name(within).at("rill_partition_high_watermark") == 500u);
  BOOST_TEST(!series_per_name(within).contains("rill_partitions"));
  BOOST_TEST(value_of(within, "rill_partition_high_watermark",
                      {{"stream", "0"}, {"topic", "4"}, {"partition", "99"}}) == 100 + 499);
  BOOST_TEST(series_per_name(within).at("rill_group_lag") == 500u);
  // Exactly at the limit: still one by one.
  BOOST_TEST(series_per_name(parse(render(small, 500, 500))).at("rill_partition_high_watermark") == 500u);

  test::synthetic_node big;  // above the defaults: 3,000 partitions
  big.partitions = 3'000;
  const auto top = parse(render(big, config::partition_series_limit, config::actor_series_limit));
  const auto counts = series_per_name(top);
  BOOST_TEST(value_of(top, "rill_metrics_partition_series_aggregated", {{"level", "partition"}}) == 0);
  BOOST_TEST(value_of(top, "rill_metrics_actor_series_aggregated", {{"kind", "partition"}}) == 0);
  BOOST_TEST(counts.at("rill_partition_high_watermark") == 3'000u);
  BOOST_TEST(counts.at("rill_actor_messages_received_total") == 3'000u + 100u + 3u + 1u);
  BOOST_TEST(counts.at("rill_group_lag") == 3'000u);
}

BOOST_AUTO_TEST_CASE(at_zero_every_partition_family_is_one_node_series_and_actors_are_per_shard) {
  test::synthetic_node node;
  node.partitions = 3'000;
  const auto detailed = parse(render(node, config::partition_series_limit, config::actor_series_limit));
  const auto samples = parse(render(node, 0, 0));
  const auto counts = series_per_name(samples);
  BOOST_TEST(value_of(samples, "rill_metrics_partition_series_aggregated", {{"level", "node"}}) == 1);
  for (const char* name : {"rill_partition_high_watermark", "rill_partition_log_start_offset", "rill_partitions",
                           "rill_partition_sync_seconds_sum", "rill_partition_sync_seconds_count"}) {
    BOOST_TEST(counts.at(name) == 1u, name);
  }
  BOOST_TEST(counts.at("rill_partition_sync_seconds_bucket") == latency_histogram::bucket_count);
  BOOST_TEST(value_of(samples, "rill_partitions", {}) == 3'000);
  // Every kind per shard: metadata (shard 0), partitions, groups, connections on two shards.
  for (const char* kind : {"metadata", "partition", "group", "connection"}) {
    BOOST_TEST(value_of(samples, "rill_metrics_actor_series_aggregated", {{"kind", kind}}) == 1, kind);
  }
  BOOST_TEST(counts.at("rill_actor_mailbox_depth") == 1u + 2u + 2u + 2u);
  BOOST_TEST(counts.at("rill_connection_sent_bytes_total") == 2u);
  BOOST_TEST(counts.at("rill_group_lag") == 3u);  // one per group
  check_same_totals(detailed, samples, "rill_partition_");
  check_same_totals(detailed, samples, "rill_actor_");
  check_same_totals(detailed, samples, "rill_connection_");
  check_same_totals(detailed, samples, "rill_group_lag");
}

BOOST_AUTO_TEST_CASE(more_topics_than_the_limit_sum_per_stream_so_the_bound_holds) {
  // 2,000 topics of one partition: per topic would be 2,000 series, above a limit of 1,000; per stream is one.
  test::synthetic_node node;
  node.partitions = 2'000;
  node.partitions_per_topic = 1;
  const auto actors = test::synthetic_actors(node);
  BOOST_TEST((partition_level_for(actors, 1'000) == partition_level::stream));
  BOOST_TEST((partition_level_for(actors, 2'000) == partition_level::partition));
  BOOST_TEST((partition_level_for(actors, 0) == partition_level::node));
  BOOST_TEST((partition_level_for({}, 0) == partition_level::partition));  // no partitions: nothing to aggregate
  const auto samples = parse(render(node, 1'000, 1'000));
  BOOST_TEST(value_of(samples, "rill_metrics_partition_series_aggregated", {{"level", "stream"}}) == 1);
  BOOST_TEST(series_per_name(samples).at("rill_partition_bytes") == 1u);
  BOOST_TEST(value_of(samples, "rill_partitions", {{"stream", "0"}}) == 2'000);
}

namespace {

// The metadata of the small node below: stream 0 "shop" with topics 0 "orders" and 1 "payments" (3 partitions each)
// and one group per topic.
metadata_view shop_view() {
  metadata_view v;
  stream_meta s;
  s.id = 0;
  s.name = "shop";
  for (const auto& [id, name] : std::map<std::uint32_t, std::string>{{0, "orders"}, {1, "payments"}}) {
    topic_meta t;
    t.id = id;
    t.name = name;
    t.config.set_partitions(3);
    group_meta g;
    g.id = 0;
    g.name = "readers";
    t.groups.emplace(0, g);
    s.topics.emplace(id, std::move(t));
  }
  v.streams.emplace(0, std::move(s));
  return v;
}

std::vector<actor_sample> named_actors(const test::synthetic_node& node) {
  auto actors = test::synthetic_actors(node);
  name_samples(actors, shop_view());
  return actors;
}

}  // namespace

BOOST_AUTO_TEST_CASE(partitions_and_groups_are_labelled_by_name_beside_their_ids) {
  test::synthetic_node node;
  node.partitions = 6;
  node.partitions_per_topic = 3;
  node.connections = 1;
  const auto actors = named_actors(node);
  const auto samples = parse(render_prometheus(actors, test::synthetic_shards(node), process_sample{}, {1'000, 1'000}));
  // One series per partition: ids (as before, so existing queries keep working) and names.
  const std::map<std::string, std::string> p{
      {"stream", "0"}, {"topic", "1"}, {"partition", "2"}, {"stream_name", "shop"}, {"topic_name", "payments"}};
  BOOST_TEST(value_of(samples, "rill_partition_high_watermark", p) == 100 + 5);
  BOOST_TEST(value_of(samples, "rill_partition_read_records_total", p) == 0);
  auto bucket = p;
  bucket["le"] = "+Inf";
  BOOST_TEST(value_of(samples, "rill_partition_produce_seconds_bucket", bucket) >= 0);
  const std::map<std::string, std::string> g{
      {"stream", "0"}, {"topic", "0"}, {"group", "readers"}, {"stream_name", "shop"}, {"topic_name", "orders"}};
  BOOST_TEST(value_of(samples, "rill_group_members", g) == 2);
  auto g1 = g;
  g1["partition"] = "1";
  BOOST_TEST(value_of(samples, "rill_group_lag", g1) == 100 + 1 - 50);
  // Every partition and group series has its names.
  for (const auto& s : samples) {
    if (s.name.starts_with("rill_partition_") || s.name.starts_with("rill_group_")) {
      BOOST_TEST(s.labels.contains("stream_name"), s.name);
      BOOST_TEST(s.labels.contains("topic_name"), s.name);
    }
  }
  // Aggregated per topic (limit 2 < 6 partitions) the names stay; per stream (limit 1 < 2 topics) the stream's.
  const auto per_topic = parse(render_prometheus(actors, {}, process_sample{}, {2, 1'000}));
  BOOST_TEST(value_of(per_topic, "rill_partitions",
                      {{"stream", "0"}, {"topic", "1"}, {"stream_name", "shop"}, {"topic_name", "payments"}}) == 3);
  const auto per_stream = parse(render_prometheus(actors, {}, process_sample{}, {1, 1'000}));
  BOOST_TEST(value_of(per_stream, "rill_partitions", {{"stream", "0"}, {"stream_name", "shop"}}) == 6);
  // Actors keep their id names on /metrics (name="0/1/2"), with display_name by the names of now; /api/actors gives
  // them by name too.
  bool labelled = false;
  for (const auto& s : samples) {
    if (s.name == "rill_actor_messages_processed_total" && s.labels.contains("kind") &&
        s.labels.at("kind") == "partition" && s.labels.at("name") == "0/1/2") {
      BOOST_TEST(s.labels.at("display_name") == "shop/payments/2");
      labelled = true;
    }
    if (s.name.starts_with("rill_actor_") && s.labels.contains("kind") && s.labels.at("kind") == "metadata") {
      BOOST_TEST(!s.labels.contains("display_name"), "metadata is named as it is");
    }
  }
  BOOST_TEST(labelled);
  const auto json = nlohmann::json::parse(render_actors_json(actors));
  std::set<std::string> display;
  for (const auto& a : json) {
    display.insert(a["display_name"].get<std::string>());
  }
  BOOST_TEST(display.contains("shop/payments/2"));
  BOOST_TEST(display.contains("shop/orders/readers"));
  BOOST_TEST(display.contains("metadata"));
  const auto parts = nlohmann::json::parse(render_partitions_json(actors));
  BOOST_TEST(parts.size() == 6u);
  BOOST_TEST(parts[4]["topic_name"] == "payments");
  BOOST_TEST(parts[4]["stream_name"] == "shop");
}

BOOST_AUTO_TEST_CASE(name_labels_are_escaped_and_left_out_where_the_metadata_has_no_name) {
  test::synthetic_node node;
  node.partitions = 2;
  node.partitions_per_topic = 1;
  node.connections = 0;
  auto actors = test::synthetic_actors(node);
  name_samples(actors, shop_view());                // topic 0 is orders; topic 1 is payments: both named
  actors[1].partition->stream_name = "a\"b\\c\nd";  // what the text format requires escaping (names never hold it)
  metadata_view empty;
  auto unnamed = test::synthetic_actors(node);
  name_samples(unnamed, empty);  // the stream is gone (being deleted): ids only
  const auto page = render_prometheus(actors, {}, process_sample{}, {1'000, 1'000});
  BOOST_TEST(page.find(R"(rill_partition_bytes{stream="0",topic="0",partition="0",stream_name="a\"b\\c\nd",)"
                       R"(topic_name="orders"})") != std::string::npos);
  const auto bare = parse(render_prometheus(unnamed, {}, process_sample{}, {1'000, 1'000}));
  BOOST_TEST(value_of(bare, "rill_partition_high_watermark", {{"stream", "0"}, {"topic", "1"}, {"partition", "0"}}) ==
             101);
  BOOST_TEST(unnamed[1].display_name == "0/0/0");
}

BOOST_AUTO_TEST_CASE(api_topics_sums_each_topic_by_name_with_its_groups_lag_and_the_node_totals) {
  test::synthetic_node node;
  node.partitions = 6;
  node.partitions_per_topic = 3;
  node.connections = 2;
  auto actors = named_actors(node);
  actors[4].partition->records_read = 7;  // partition 0/1/0 (after the metadata actor)
  const auto totals = node_totals_of(shop_view(), 2);
  BOOST_TEST(totals.streams == 1u);
  BOOST_TEST(totals.topics == 2u);
  BOOST_TEST(totals.partitions == 6u);
  BOOST_TEST(totals.groups == 2u);
  const auto j = nlohmann::json::parse(render_topics_json(actors, totals));
  BOOST_TEST(j["totals"]["streams"] == 1);
  BOOST_TEST(j["totals"]["connections"] == 2);
  BOOST_TEST(j["totals"]["partitions"] == 6);
  BOOST_TEST(j["totals"]["high_watermark"] == 100 * 6 + (0 + 1 + 2 + 3 + 4 + 5));
  BOOST_TEST(j["totals"]["records_read"] == 7);
  BOOST_TEST(j["topics_omitted"] == 0);
  BOOST_REQUIRE(j["topics"].size() == 2u);
  const auto& payments = j["topics"][1];
  BOOST_TEST(payments["stream_name"] == "shop");
  BOOST_TEST(payments["topic_name"] == "payments");
  BOOST_TEST(payments["partitions"] == 3);
  BOOST_TEST(payments["high_watermark"] == 103 + 104 + 105);
  BOOST_TEST(payments["records_read"] == 7);
  BOOST_TEST(payments["records"] == (103 - 3) + (104 - 4) + (105 - 0));  // high watermark minus log start
  BOOST_REQUIRE(payments["groups"].size() == 1u);
  BOOST_TEST(payments["groups"][0]["name"] == "readers");
  BOOST_TEST(payments["groups"][0]["members"] == 2);
  BOOST_TEST(payments["groups"][0]["generation"] == 3);
  BOOST_TEST(payments["groups"][0]["lag"] == (103 - 50) + (104 - 50) + (105 - 50));
  BOOST_TEST(j["bucket_bounds_ns"].size() == latency_histogram::bounds_ns.size());
  BOOST_TEST(payments["produce"]["buckets"].size() == latency_histogram::bucket_count);
}

BOOST_AUTO_TEST_CASE(api_topics_is_bounded) {
  test::synthetic_node node;
  node.partitions = static_cast<std::uint32_t>(topics_json_max) + 5;
  node.partitions_per_topic = 1;
  node.connections = 0;
  const auto j = nlohmann::json::parse(render_topics_json(test::synthetic_actors(node), node_totals{}));
  BOOST_TEST(j["topics"].size() == topics_json_max);
  BOOST_TEST(j["topics_omitted"] == 5);
}
