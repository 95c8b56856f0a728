// rill: the command-line client.
//
//   rill [--server HOST:PORT] [--json] <command>
//     ping | stats
//     stream create|list|describe|delete NAME
//     topic create STREAM TOPIC [--partitions N] [--retention-ms MS] [--retention-bytes B] [--segment-bytes B]
//                              [--compression none|zstd] [--durability sync_before_ack|every_records|every_ms]
//                              [--max-message-bytes B]
//     topic list STREAM | topic describe|delete STREAM TOPIC
//     produce STREAM TOPIC [--partition P | --key K] [--header k=v]... [--zstd]   (one message per stdin line)
//     consume STREAM TOPIC [--partition P] [--from first|last|end|next|offset:N|timestamp:MS|timestamp:ISO |
//                              --since 1h] [--count N] [--consumer NAME] [--follow]
//                              [--value-format text|base64|hex|raw] [--format TEMPLATE]   (tools/cli_consume.h)
//     consume STREAM TOPIC --group NAME [--member ID] [--count N] [--follow] [--value-format F] [--format T]
//     offset get|set STREAM TOPIC --partition P --consumer NAME [OFFSET]
//     group create STREAM TOPIC NAME [--strategy range|round_robin] [--session-timeout-ms MS]
//     group list STREAM TOPIC | group describe|delete STREAM TOPIC NAME
//     top [--http HOST:PORT] [--interval-ms N] [--rows N] [--once]   (rilld's monitoring listener)
//
// Human output by default; --json prints JSON (one object per line for produce and consume). Exit status: 0 ok,
// 1 the server refused (the message says why), 2 bad usage, 3 the server could not be reached.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include <fmt/core.h>

#include "net/client.h"
#include "net/errc.h"
#include "tools/cli_consume.h"
#include "tools/cli_groups.h"
#include "tools/cli_top.h"

using namespace rill;
using json = nlohmann::json;

namespace {

struct globals {
  std::string server = "127.0.0.1:9420";
  bool json_output = false;
};

using cli::report;

json topic_json(const proto::TopicInfo& t) {
  json parts = json::array();
  for (const auto& p : t.partitions()) {
    parts.push_back({{"id", p.id()},
                     {"log_start", p.log_start()},
                     {"high_watermark", p.high_watermark()},
                     {"log_end", p.log_end()},
                     {"bytes", p.bytes()},
                     {"segments", p.segments()},
                     {"fenced", p.fenced()},
                     {"recoveries", p.recoveries()}});
  }
  const auto& c = t.config();
  return {{"stream_id", t.stream_id()},
          {"id", t.id()},
          {"name", t.name()},
          {"partitions", parts},
          {"config",
           {{"partitions", c.partitions()},
            {"replication_factor", c.replication_factor()},
            {"retention_ms", c.retention_ms()},
            {"retention_bytes", c.retention_bytes()},
            {"segment_bytes", c.segment_bytes()},
            {"compression", c.compression() == proto::COMPRESSION_ZSTD ? "zstd" : "none"},
            {"max_message_bytes", c.max_message_bytes()}}}};
}

void print_topic(const proto::TopicInfo& t) {
  fmt::print("topic {} (id {}), {} partitions, retention_ms {}, retention_bytes {}, segment_bytes {}\n", t.name(),
             t.id(), t.config().partitions(), t.config().retention_ms(), t.config().retention_bytes(),
             t.config().segment_bytes());
  for (const auto& p : t.partitions()) {
    fmt::print("  partition {}: offsets [{}, {}) ({} messages), {} bytes in {} segments{}{}\n", p.id(), p.log_start(),
               p.high_watermark(), p.high_watermark() - p.log_start(), p.bytes(), p.segments(),
               p.recoveries() == 0   ? std::string()
               : p.recoveries() == 1 ? std::string(", recovered once from a storage failure")
                                     : fmt::format(", recovered {} times from storage failures", p.recoveries()),
               p.fenced().empty() ? "" : "\n    FENCED: " + p.fenced());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rill: command-line client of the rill server"};
  app.require_subcommand(1);
  globals g;
  app.add_option("--server", g.server, "server HOST:PORT")->capture_default_str();
  app.add_flag("--json", g.json_output, "JSON output");

  auto* ping = app.add_subcommand("ping", "check that the server answers");
  auto* stats = app.add_subcommand("stats", "server statistics");

  auto* stream = app.add_subcommand("stream", "streams")->require_subcommand(1);
  std::string stream_name;
  auto* s_create = stream->add_subcommand("create", "create a stream");
  s_create->add_option("name", stream_name)->required();
  auto* s_list = stream->add_subcommand("list", "list streams");
  auto* s_describe = stream->add_subcommand("describe", "a stream and its topics");
  s_describe->add_option("name", stream_name)->required();
  auto* s_delete = stream->add_subcommand("delete", "delete a stream and all its data");
  s_delete->add_option("name", stream_name)->required();

  auto* topic = app.add_subcommand("topic", "topics")->require_subcommand(1);
  std::string topic_name;
  proto::TopicConfig tc;
  std::uint32_t partitions = 1;
  std::uint64_t retention_ms = 0;
  std::uint64_t retention_bytes = 0;
  std::uint64_t segment_bytes = 0;
  std::uint64_t max_message_bytes = 0;
  std::string compression;
  std::string durability;
  auto* t_create = topic->add_subcommand("create", "create a topic");
  t_create->add_option("stream", stream_name)->required();
  t_create->add_option("topic", topic_name)->required();
  t_create->add_option("--partitions", partitions, "partitions")->check(CLI::Range(1u, 100000u));
  t_create->add_option("--retention-ms", retention_ms, "delete data older than this (0: keep)");
  t_create->add_option("--retention-bytes", retention_bytes, "keep at most this much per partition (0: no limit)");
  t_create->add_option("--segment-bytes", segment_bytes, "segment size");
  t_create->add_option("--max-message-bytes", max_message_bytes, "largest batch accepted");
  t_create->add_option("--compression", compression, "none | zstd (what producers are asked to use)")
      ->check(CLI::IsMember({"none", "zstd"}));
  t_create->add_option("--durability", durability, "sync_before_ack | every_records | every_ms")
      ->check(CLI::IsMember({"sync_before_ack", "every_records", "every_ms"}));
  auto* t_list = topic->add_subcommand("list", "list a stream's topics");
  t_list->add_option("stream", stream_name)->required();
  auto* t_describe = topic->add_subcommand("describe", "a topic and its partitions");
  t_describe->add_option("stream", stream_name)->required();
  t_describe->add_option("topic", topic_name)->required();
  auto* t_delete = topic->add_subcommand("delete", "delete a topic and all its data");
  t_delete->add_option("stream", stream_name)->required();
  t_delete->add_option("topic", topic_name)->required();

  std::optional<std::uint32_t> partition;
  std::string key;
  std::vector<std::string> headers;
  bool zstd = false;
  auto* produce = app.add_subcommand("produce", "produce one message per line of standard input");
  produce->add_option("stream", stream_name)->required();
  produce->add_option("topic", topic_name)->required();
  auto* p_partition = produce->add_option("--partition", partition, "partition");
  produce->add_option("--key", key, "key of every message (partitions by Kafka's murmur2)")->excludes(p_partition);
  produce->add_option("--header", headers, "header k=v (repeatable)");
  produce->add_flag("--zstd", zstd, "compress batches with zstd");

  std::uint32_t consume_partition = 0;
  std::string consumer;
  cli::consume_args consume_args;
  auto* consume = app.add_subcommand("consume", "print messages (every partition, or one), one value per line");
  consume->add_option("stream", consume_args.stream)->required();
  consume->add_option("topic", consume_args.topic)->required();
  std::string group_name;
  std::string group_strategy = "range";
  std::uint32_t session_timeout_ms = 10'000;
  auto* c_partition = consume->add_option("--partition", consume_args.partition, "read this partition only");
  auto* c_from = consume->add_option("--from", consume_args.from,
                                     "first | last | end | next | offset:N | timestamp:MS | timestamp:ISO-8601");
  auto* c_since = consume->add_option("--since", consume_args.since, "from this long ago: 90s, 15m, 1h, 2d, 1h30m")
                      ->excludes(c_from);
  consume->add_option("--count", consume_args.count, "stop after this many messages (0: all there are)");
  auto* c_consumer = consume->add_option("--consumer", consume_args.consumer,
                                         "a named consumer: its offset is stored on the server (per partition)");
  auto* c_group = consume->add_option("--group", consume_args.group,
                                      "read as a member of this consumer group (created if missing): the partitions "
                                      "come from the group's assignment, positions from its committed offsets");
  c_group->excludes(c_partition)->excludes(c_from)->excludes(c_since)->excludes(c_consumer);
  consume
      ->add_option("--member", consume_args.member_id, "with --group: a stable member id (rejoin as the same member)")
      ->needs(c_group);
  consume->add_flag("--follow", consume_args.follow, "keep waiting for new messages (reconnecting if the server goes)");
  consume->add_option("--value-format", consume_args.value_format,
                      "text (escaped, the default) | base64 | hex | raw (the bytes unchanged; not with --json)");
  consume->add_option("--format", consume_args.format,
                      "text template: %s value %k key %p partition %o offset %T timestamp ms %t ISO-8601 time "
                      "%h headers %S value bytes %K key bytes %% \\n \\t");

  auto* group = app.add_subcommand("group", "consumer groups")->require_subcommand(1);
  auto* g_create = group->add_subcommand("create", "create a consumer group of a topic");
  auto* g_list = group->add_subcommand("list", "a topic's consumer groups");
  auto* g_describe = group->add_subcommand("describe", "members, generation, assignment, offsets and lag");
  auto* g_delete = group->add_subcommand("delete", "delete a consumer group and its offsets");
  for (auto* sub : {g_create, g_list, g_describe, g_delete}) {
    sub->add_option("stream", stream_name)->required();
    sub->add_option("topic", topic_name)->required();
    if (sub != g_list) {
      sub->add_option("name", group_name)->required();
    }
  }
  for (auto* sub : {g_create, consume}) {
    sub->add_option("--strategy", group_strategy, "assignment strategy of a new group: range | round_robin")
        ->check(CLI::IsMember({"range", "round_robin"}));
    sub->add_option("--session-timeout-ms", session_timeout_ms,
                    "a new group's session timeout: members silent this long are removed (100-3600000)");
  }

  auto* offset = app.add_subcommand("offset", "consumer offsets")->require_subcommand(1);
  std::uint64_t offset_value = 0;
  auto* o_get = offset->add_subcommand("get", "a consumer's stored offset");
  auto* o_set = offset->add_subcommand("set", "store a consumer's offset (may move it back)");
  for (auto* sub : {o_get, o_set}) {
    sub->add_option("stream", stream_name)->required();
    sub->add_option("topic", topic_name)->required();
    sub->add_option("--partition", consume_partition, "partition")->required();
    sub->add_option("--consumer", consumer, "consumer name")->required();
  }
  o_set->add_option("offset", offset_value, "the next offset to consume")->required();

  cli::top_args top_args;
  std::uint32_t top_interval_ms = 1000;
  auto* top = app.add_subcommand("top", "the busiest actors and shards of a rilld, refreshed every second");
  top->add_option("--http", top_args.http, "rilld's monitoring listener (network.http_address)")->capture_default_str();
  top->add_option("--interval-ms", top_interval_ms, "between samples")->check(CLI::Range(100, 3'600'000));
  top->add_option("--rows", top_args.rows, "busiest actors shown")->check(CLI::Range(1, 10'000));
  top->add_flag("--once", top_args.once, "print one view (two samples an interval apart) and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (*top) {
    top_args.interval = std::chrono::milliseconds(top_interval_ms);
    return cli::top(top_args);
  }
  net::client_options co;
  co.server = g.server;
  proto::GroupConfig group_config;
  group_config.set_strategy(group_strategy == "round_robin" ? proto::ASSIGNMENT_ROUND_ROBIN : proto::ASSIGNMENT_RANGE);
  group_config.set_session_timeout_ms(session_timeout_ms);
  if (*consume) {
    consume_args.connection = co;
    consume_args.json_output = g.json_output;
    consume_args.group_config = group_config;
    return cli::consume(consume_args);
  }
  auto connected = net::client::connect(co);
  if (!connected) {
    return report(connected.error());
  }
  net::client& c = **connected;
  const auto sid = net::by_name(stream_name);
  const auto tid = net::by_name(topic_name);

  if (*ping) {
    auto r = c.ping();
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", json{{"version", r->version()}, {"server_time_ms", r->server_time_ms()}}.dump())
                  : fmt::print("{} answered: {}\n", g.server, r->version());
    return 0;
  }
  if (*stats) {
    auto r = c.stats();
    if (!r) {
      return report(r.error());
    }
    if (g.json_output) {
      fmt::print("{}\n", json{{"streams", r->streams()},
                              {"topics", r->topics()},
                              {"partitions", r->partitions()},
                              {"messages", r->messages()},
                              {"bytes", r->bytes()},
                              {"connections", r->connections()},
                              {"shards", r->shards()},
                              {"version", r->version()}}
                             .dump());
    } else {
      fmt::print("{}: {} streams, {} topics, {} partitions, {} messages, {} bytes, {} connections, {} shards\n",
                 r->version(), r->streams(), r->topics(), r->partitions(), r->messages(), r->bytes(), r->connections(),
                 r->shards());
    }
    return 0;
  }
  if (*s_create) {
    auto r = c.create_stream(stream_name);
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", json{{"id", r->id()}, {"name", r->name()}}.dump())
                  : fmt::print("created stream {} (id {})\n", r->name(), r->id());
    return 0;
  }
  if (*s_list) {
    auto r = c.list_streams();
    if (!r) {
      return report(r.error());
    }
    json out = json::array();
    for (const auto& s : *r) {
      out.push_back({{"id", s.id()}, {"name", s.name()}, {"topics", s.topics()}});
      if (!g.json_output) {
        fmt::print("{} (id {}): {} topics\n", s.name(), s.id(), s.topics());
      }
    }
    if (g.json_output) {
      fmt::print("{}\n", out.dump());
    }
    return 0;
  }
  if (*s_describe) {
    auto r = c.get_stream(sid);
    if (!r) {
      return report(r.error());
    }
    if (g.json_output) {
      json topics = json::array();
      for (const auto& t : r->topics()) {
        topics.push_back(topic_json(t));
      }
      fmt::print("{}\n", json{{"id", r->stream().id()}, {"name", r->stream().name()}, {"topics", topics}}.dump());
    } else {
      fmt::print("stream {} (id {}), {} topics\n", r->stream().name(), r->stream().id(), r->topics_size());
      for (const auto& t : r->topics()) {
        print_topic(t);
      }
    }
    return 0;
  }
  if (*s_delete) {
    auto r = c.delete_stream(sid);
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", json{{"deleted", stream_name}}.dump())
                  : fmt::print("deleted stream {}\n", stream_name);
    return 0;
  }
  if (*t_create) {
    tc.set_partitions(partitions);
    if (retention_ms) {
      tc.set_retention_ms(retention_ms);
    }
    if (retention_bytes) {
      tc.set_retention_bytes(retention_bytes);
    }
    if (segment_bytes) {
      tc.set_segment_bytes(segment_bytes);
    }
    if (max_message_bytes) {
      tc.set_max_message_bytes(max_message_bytes);
    }
    if (!compression.empty()) {
      tc.set_compression(compression == "zstd" ? proto::COMPRESSION_ZSTD : proto::COMPRESSION_NONE);
    }
    if (!durability.empty()) {
      tc.set_durability(durability == "every_records" ? proto::DURABILITY_EVERY_RECORDS
                        : durability == "every_ms"    ? proto::DURABILITY_EVERY_MS
                                                      : proto::DURABILITY_SYNC_BEFORE_ACK);
    }
    auto r = c.create_topic(sid, topic_name, tc);
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", topic_json(*r).dump())
                  : fmt::print("created topic {} (id {}) with {} partitions in stream {}\n", r->name(), r->id(),
                               r->config().partitions(), stream_name);
    return 0;
  }
  if (*t_list || *t_describe) {
    std::vector<proto::TopicInfo> topics;
    if (*t_list) {
      auto r = c.list_topics(sid);
      if (!r) {
        return report(r.error());
      }
      topics = std::move(*r);
    } else {
      auto r = c.get_topic(sid, tid);
      if (!r) {
        return report(r.error());
      }
      topics.push_back(std::move(*r));
    }
    json out = json::array();
    for (const auto& t : topics) {
      if (g.json_output) {
        out.push_back(topic_json(t));
      } else {
        print_topic(t);
      }
    }
    if (g.json_output) {
      fmt::print("{}\n", (*t_describe ? out[0] : out).dump());
    }
    return 0;
  }
  if (*t_delete) {
    auto r = c.delete_topic(sid, tid);
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", json{{"deleted", topic_name}}.dump())
                  : fmt::print("deleted topic {} of stream {}\n", topic_name, stream_name);
    return 0;
  }
  if (*produce) {
    net::producer_options po;
    po.zstd = zstd;
    auto p = net::producer::create(c, sid, tid, po);
    if (!p) {
      return report(p.error());
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> hdrs;
    for (const auto& h : headers) {
      const auto eq = h.find('=');
      if (eq == std::string::npos) {
        fmt::print(stderr, "rill: --header {}: expected k=v\n", h);
        return 2;
      }
      hdrs.emplace_back(h.substr(0, eq), h.substr(eq + 1));
    }
    const bool progress = ::isatty(STDOUT_FILENO) && ::isatty(STDERR_FILENO) && !g.json_output;
    std::uint64_t acked = 0;
    auto last_progress = std::chrono::steady_clock::now();
    auto emit = [&](const std::vector<net::producer::ack>& acks) {
      for (const auto& a : acks) {
        ++acked;
        if (g.json_output) {
          fmt::print("{}\n", json{{"partition", a.partition}, {"offset", a.offset}}.dump());
        }
      }
      if (progress && std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(1)) {
        fmt::print(stderr, "\r{} messages acknowledged", acked);
        last_progress = std::chrono::steady_clock::now();
      }
    };
    std::string line;
    while (std::getline(std::cin, line)) {
      net::message m;
      m.value = line;
      if (!key.empty()) {
        m.key = key;
      }
      m.partition = partition;
      m.headers = hdrs;
      auto acks = (*p)->send(m);
      if (!acks) {
        return report(acks.error());
      }
      emit(*acks);
    }
    auto rest = (*p)->flush();
    if (!rest) {
      return report(rest.error());
    }
    emit(*rest);
    if (!g.json_output) {
      fmt::print(stderr, "{}{} messages acknowledged\n", progress ? "\r" : "", acked);
    }
    return 0;
  }
  if (*group) {
    const auto op = *g_create     ? cli::group_op::create
                    : *g_list     ? cli::group_op::list
                    : *g_describe ? cli::group_op::describe
                                  : cli::group_op::remove;
    return cli::group_command(c, op, stream_name, topic_name, group_name, group_config, g.json_output);
  }
  if (*o_get) {
    auto r = c.get_offset(sid, tid, consume_partition, consumer);
    if (!r) {
      return report(r.error());
    }
    if (g.json_output) {
      fmt::print("{}\n", json{{"consumer", consumer}, {"offset", *r ? json(**r) : json(nullptr)}}.dump());
    } else if (*r) {
      fmt::print("{}\n", **r);
    } else {
      fmt::print("consumer {} has no stored offset\n", consumer);
    }
    return 0;
  }
  if (*o_set) {
    auto r = c.store_offset(sid, tid, consume_partition, consumer, offset_value);
    if (!r) {
      return report(r.error());
    }
    if (g.json_output) {
      fmt::print(
          "{}\n",
          json{{"consumer", consumer}, {"offset", offset_value}, {"previous", *r ? json(**r) : json(nullptr)}}.dump());
    } else {
      fmt::print("consumer {} now at {}{}\n", consumer, offset_value,
                 *r ? fmt::format(" (was {})", **r) : std::string());
    }
    return 0;
  }
  return 2;
}
