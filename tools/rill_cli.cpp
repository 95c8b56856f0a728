// rill: the command-line client (docs/cli.md is its manual).
//
//   rill [global flags] <command> [flags]   (global flags may come anywhere: rill stream list --json)
//     ping | stats | version | completion bash|zsh
//     context add|list|use|show|remove           (named servers in the client configuration file)
//     stream create|list|describe|delete NAME
//     topic create|list|describe|delete STREAM [TOPIC] [...]
//     produce STREAM TOPIC [...]                  (one message per line of standard input, sent as read)
//     consume STREAM TOPIC [...]                  (every partition, or --partition P, or --group NAME)
//     offset get|set ...  |  group create|list|describe|delete ...  |  top [...]
//
// Human output (tables) by default; --json prints JSON, one object per line for produce and consume, and errors as
// {"error":{...}} on stderr. Exit codes (cli_output.h): 0 ok, 1 refused, 2 usage, 3 unreachable.
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
#include "tools/cli_command_tree.h"
#include "tools/cli_consume.h"
#include "tools/cli_context.h"
#include "tools/cli_groups.h"
#include "tools/cli_output.h"
#include "tools/cli_produce.h"
#include "tools/cli_top.h"

using namespace rill;
using json = nlohmann::json;

namespace {

struct globals {
  std::string server;  // empty: RILL_SERVER, the context, or the default (cli_context.h)
  std::string context;
  bool json_output = false;
  bool version = false;
};

using cli::report;

constexpr const char* rill_version = "rill " RILL_VERSION;

// A short-lived connection to another member (no retries, 2 s to connect and to answer): a member that does not
// answer at once is reported, not waited for.
expected<std::unique_ptr<net::client>> connect_member(const net::client_options& co, const std::string& address) {
  net::client_options at = co;
  at.server = address;
  at.retries = 0;
  at.connect_timeout = std::chrono::seconds(2);
  at.request_timeout = std::chrono::seconds(2);
  return net::client::connect(at);
}

// rill cluster status: the node asked names the members (and the client addresses they announced); each member is
// asked for its own replica's state. One that does not answer is listed as unreachable.
int cluster_status(net::client& c, const net::client_options& co, bool json_output) {
  auto here = c.cluster_status();
  if (!here) {
    return report(here.error());
  }
  struct row {
    std::uint64_t node_id = 0;
    std::string address;
    std::optional<proto::ClusterStatusReply> status;
    std::string error;
  };
  std::vector<row> rows;
  rows.push_back({here->node_id(), c.server(), *here, {}});
  for (const auto& p : here->peers()) {
    row r{p.node_id(), p.client_address(), std::nullopt, {}};
    if (p.client_address().empty()) {
      r.error = "its client address is not known yet";
    } else {
      auto there = connect_member(co, p.client_address());
      auto got = there ? (*there)->cluster_status() : expected<proto::ClusterStatusReply>(unexpected(there.error()));
      if (got) {
        r.status = *got;
      } else {
        r.error = got.error().message();
      }
    }
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) { return a.node_id < b.node_id; });
  std::uint64_t commit_top = 0;
  std::uint64_t under_replicated = 0;  // the cluster's: each partition is counted by its primary's node
  for (const auto& r : rows) {
    commit_top = r.status ? std::max(commit_top, r.status->commit()) : commit_top;
    under_replicated += r.status ? r.status->under_replicated() : 0;
  }
  if (json_output) {
    json members = json::array();
    for (const auto& r : rows) {
      json m = {{"node_id", r.node_id}, {"client_address", r.address}, {"reachable", r.status.has_value()}};
      if (r.status) {
        m["role"] = r.status->role();
        m["view"] = r.status->view();
        m["op"] = r.status->op();
        m["commit"] = r.status->commit();
        m["checkpoint"] = r.status->checkpoint();
        m["primary_node"] = r.status->primary_node();
        m["view_changes"] = r.status->view_changes();
        m["lag"] = commit_top - r.status->commit();
        m["partitions_led"] = r.status->partitions_led();
        m["under_replicated"] = r.status->under_replicated();
      } else {
        m["error"] = r.error;
      }
      members.push_back(std::move(m));
    }
    fmt::print(
        "{}\n",
        json{{"cluster_id", here->cluster_id()}, {"members", members}, {"under_replicated", under_replicated}}.dump());
    return 0;
  }
  fmt::print("cluster {}: {}, {} under-replicated\n", here->cluster_id(), cli::count_of(rows.size(), "member"),
             cli::count_of(under_replicated, "partition"));
  cli::table t({"NODE>", "ADDRESS", "ROLE", "VIEW>", "OP>", "COMMIT>", "CHECKPOINT>", "LAG>", "LEADS>", "UNDER-REPL>"});
  for (const auto& r : rows) {
    if (r.status) {
      t.add({std::to_string(r.node_id), r.address, r.status->role(), std::to_string(r.status->view()),
             std::to_string(r.status->op()), std::to_string(r.status->commit()), std::to_string(r.status->checkpoint()),
             std::to_string(commit_top - r.status->commit()), std::to_string(r.status->partitions_led()),
             std::to_string(r.status->under_replicated())});
    } else {
      t.add({std::to_string(r.node_id), r.address.empty() ? "-" : r.address, "unreachable", "-", "-", "-", "-", "-",
             "-", "-"});
    }
  }
  t.print();
  for (const auto& r : rows) {
    if (!r.status) {
      fmt::print("node {}: {}\n", r.node_id, r.error);
    }
  }
  return 0;
}

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
                     {"recoveries", p.recoveries()},
                     {"node_id", p.node_id()}});
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

const char* durability_name(proto::Durability d) {
  switch (d) {
    case proto::DURABILITY_EVERY_RECORDS:
      return "every_records";
    case proto::DURABILITY_EVERY_MS:
      return "every_ms";
    default:
      return "sync_before_ack";
  }
}

std::uint64_t topic_messages(const proto::TopicInfo& t) {
  std::uint64_t n = 0;
  for (const auto& p : t.partitions()) {
    n += p.high_watermark() - p.log_start();
  }
  return n;
}

std::uint64_t topic_bytes(const proto::TopicInfo& t) {
  std::uint64_t n = 0;
  for (const auto& p : t.partitions()) {
    n += p.bytes();
  }
  return n;
}

// A replicated topic's partitions as each node's replica reports them: every member the node asked names (cluster
// status) is asked for the topic; a partition's entry from a node that holds a replica of it has a role. Members
// that do not answer are left out (their replicas are then missing from the table).
using replica_views = std::map<std::uint32_t, std::vector<proto::PartitionInfo>>;  // partition -> one per replica
replica_views gather_replicas(net::client& c, const net::client_options& co, const proto::TopicInfo& t) {
  replica_views out;
  auto add = [&](const proto::TopicInfo& from) {
    for (const auto& p : from.partitions()) {
      if (!p.role().empty()) {
        out[p.id()].push_back(p);
      }
    }
  };
  add(t);
  auto here = c.cluster_status();
  if (!here) {
    return out;
  }
  for (const auto& peer : here->peers()) {
    if (peer.client_address().empty()) {
      continue;
    }
    auto there = connect_member(co, peer.client_address());
    if (!there) {
      continue;
    }
    if (auto got = (*there)->get_topic(net::by_id(t.stream_id()), net::by_id(t.id())); got) {
      add(*got);
    }
  }
  for (auto& [id, rows] : out) {
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.node_id() < b.node_id(); });
  }
  return out;
}

json replicas_json(const replica_views& views) {
  json out = json::array();
  for (const auto& [id, rows] : views) {
    std::uint64_t top = 0;
    for (const auto& r : rows) {
      top = std::max(top, r.commit_op());
    }
    for (const auto& r : rows) {
      out.push_back({{"partition", id},
                     {"node_id", r.node_id()},
                     {"role", r.role()},
                     {"view", r.view()},
                     {"primary_node", r.primary_node()},
                     {"commit_op", r.commit_op()},
                     {"op", r.op()},
                     {"lag", top - r.commit_op()},
                     {"high_watermark", r.high_watermark()}});
    }
  }
  return out;
}

void print_replicas(const replica_views& views) {
  cli::table rows({"PARTITION>", "NODE>", "ROLE", "VIEW>", "PRIMARY>", "COMMIT>", "OP>", "LAG>", "END>"});
  for (const auto& [id, list] : views) {
    std::uint64_t top = 0;
    for (const auto& r : list) {
      top = std::max(top, r.commit_op());
    }
    for (const auto& r : list) {
      rows.add({std::to_string(id), std::to_string(r.node_id()), r.role(), std::to_string(r.view()),
                std::to_string(r.primary_node()), std::to_string(r.commit_op()), std::to_string(r.op()),
                std::to_string(top - r.commit_op()), std::to_string(r.high_watermark())});
    }
  }
  fmt::print("  replicas (each as its node reports it; LAG: ops behind the highest commit):\n");
  rows.print(2);
}

// One topic for people: its settings on one line, then a table of its partitions.
void print_topic(const proto::TopicInfo& t) {
  const auto& c = t.config();
  fmt::print("topic {} (id {}): {}{}, {}, {}; retention {}, {}; segments of {}; {}{}\n", t.name(), t.id(),
             cli::count_of(c.partitions(), "partition"),
             c.replication_factor() > 1 ? fmt::format(" replicated on {} nodes", c.replication_factor()) : "",
             cli::count_of(topic_messages(t), "message"), cli::human_bytes(topic_bytes(t)),
             c.retention_ms() == 0 ? "forever" : cli::human_duration_ms(c.retention_ms()),
             c.retention_bytes() == 0 ? "no size limit" : cli::human_bytes(c.retention_bytes()) + " per partition",
             cli::human_bytes(c.segment_bytes()), durability_name(c.durability()),
             c.compression() == proto::COMPRESSION_ZSTD ? ", zstd" : "");
  cli::table parts({"PARTITION>", "START>", "END>", "MESSAGES>", "SIZE>", "SEGMENTS>", "STATUS"});
  for (const auto& p : t.partitions()) {
    std::string status = p.fenced().empty() ? "ok" : "FENCED: " + p.fenced();
    if (p.recoveries() > 0) {
      status += fmt::format(" (recovered {}x)", p.recoveries());
    }
    parts.add({std::to_string(p.id()), std::to_string(p.log_start()), std::to_string(p.high_watermark()),
               cli::grouped(p.high_watermark() - p.log_start()), cli::human_bytes(p.bytes()),
               std::to_string(p.segments()), status});
  }
  parts.print(2);
}

// Streams and topics are deleted with their data: a command that would delete messages asks first on a terminal
// and, elsewhere, only runs with --yes. Returns 0 to go on, else the exit code.
int confirm_delete(const std::string& what, std::uint64_t messages, std::uint64_t bytes, bool yes) {
  if (yes || messages == 0) {
    return 0;
  }
  const std::string holds =
      fmt::format("{} holds {} ({})", what, cli::count_of(messages, "message"), cli::human_bytes(bytes));
  if (::isatty(STDIN_FILENO) == 0) {
    return cli::usage_error(holds + ": pass --yes to delete it and its data");
  }
  fmt::print(stderr, "{}. Delete it and its data? [y/N] ", holds);
  std::string answer;
  std::getline(std::cin, answer);
  if (answer == "y" || answer == "Y" || answer == "yes") {
    return 0;
  }
  return cli::fail(cli::exit_refused, "not_confirmed", fmt::format("{} was not deleted", what));
}

enum class ctx_op { add, list, use, show, remove };

// `rill context ...`: edits the client configuration file (cli_context.h), or shows what a command would use.
int context_command(ctx_op op, const std::string& name, const cli::context& given, bool make_current,
                    const globals& g) {
  if (op == ctx_op::show) {
    auto e = cli::resolve_endpoints(g.server, "", g.context, true);
    if (!e) {
      return cli::usage_error(e.error().detail());
    }
    g.json_output
        ? fmt::print(
              "{}\n",
              json{{"server", e->server}, {"http", e->http}, {"from", e->source}, {"file", cli::client_file_path()}}
                  .dump())
        : fmt::print("server {} (from {})\nhttp   {}\nfile   {}\n", e->server, e->source, e->http,
                     cli::client_file_path());
    return 0;
  }
  auto f = cli::load_client_file();
  if (!f) {
    return cli::usage_error(f.error().detail());
  }
  switch (op) {
    case ctx_op::add: {
      if (auto ok = cli::check_server_list("--server", given.server); !ok) {
        return cli::usage_error(ok.error().detail());
      }
      if (!given.http.empty()) {
        if (auto ok = cli::check_server_list("--http", given.http); !ok) {
          return cli::usage_error(ok.error().detail());
        }
      }
      f->contexts[name] = given;
      if (make_current || f->current.empty()) {
        f->current = name;
      }
      break;
    }
    case ctx_op::use:
    case ctx_op::remove:
      if (!f->contexts.contains(name)) {
        return cli::usage_error(fmt::format("no context {} in {}", name, f->path));
      }
      if (op == ctx_op::use) {
        f->current = name;
      } else {
        f->contexts.erase(name);
        if (f->current == name) {
          f->current.clear();
        }
      }
      break;
    case ctx_op::list: {
      if (g.json_output) {
        json all = json::array();
        for (const auto& [n, c] : f->contexts) {
          all.push_back({{"name", n}, {"server", c.server}, {"http", c.http}, {"current", n == f->current}});
        }
        fmt::print("{}\n", all.dump());
        return 0;
      }
      if (f->contexts.empty()) {
        fmt::print("no contexts in {} (add one: rill context add NAME --server HOST:PORT)\n", f->path);
        return 0;
      }
      cli::table t({"", "NAME", "SERVER", "HTTP"});
      for (const auto& [n, c] : f->contexts) {
        t.add({n == f->current ? "*" : "", n, c.server, c.http.empty() ? "-" : c.http});
      }
      t.print();
      return 0;
    }
    case ctx_op::show:
      break;
  }
  if (auto saved = cli::save_client_file(*f); !saved) {
    return cli::fail(cli::exit_refused, "config_file", saved.error().detail());
  }
  const char* verb = op == ctx_op::add ? "saved" : op == ctx_op::use ? "now using" : "removed";
  g.json_output
      ? fmt::print("{}\n", json{{"context", name}, {"current", f->current}, {"file", f->path}}.dump())
      : fmt::print("{} context {} ({}; current: {})\n", verb, name, f->path, f->current.empty() ? "none" : f->current);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rill: command-line client of the rill server (docs/cli.md)", "rill"};
  // Global flags are accepted after any subcommand too: a subcommand passes what it does not know to its parent.
  app.fallthrough();
  app.require_subcommand(0, 1);
  globals g;
  app.add_option("--server", g.server,
                 "server HOST:PORT, or a list HOST:PORT,HOST:PORT (default: RILL_SERVER, the context, "
                 "127.0.0.1:9420)");
  app.add_option("--context", g.context,
                 "a context of the client configuration file (default: RILL_CONTEXT, its "
                 "current one)");
  app.add_flag("--json", g.json_output, "JSON output (errors too, on stderr)");
  app.add_flag("--version", g.version, "print the version and exit");

  auto* ping = app.add_subcommand("ping", "check that the server answers");
  auto* stats = app.add_subcommand("stats", "server statistics");
  auto* cluster = app.add_subcommand("cluster", "the cluster's members and their replicas of the metadata group");
  cluster->require_subcommand(1);
  auto* c_status = cluster->add_subcommand("status",
                                           "every member: reachable or not, role, view, op, commit, "
                                           "checkpoint, lag");
  auto* version = app.add_subcommand("version", "print the version");
  auto* completion =
      app.add_subcommand("completion", "print a shell completion script: source <(rill completion bash)");
  std::string completion_shell;
  completion->add_option("shell", completion_shell, "bash | zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));

  auto* ctx = app.add_subcommand("context", "named servers in the client configuration file")->require_subcommand(1);
  std::string ctx_name;
  std::string ctx_server;
  std::string ctx_http;
  bool ctx_use = false;
  auto* ctx_add = ctx->add_subcommand("add", "add or replace a context");
  ctx_add->add_option("name", ctx_name)->required();
  // These shadow the global --server: here they say what to store, not where to connect.
  ctx_add->add_option("--server", ctx_server, "HOST:PORT or HOST:PORT,HOST:PORT")->required();
  ctx_add->add_option("--http", ctx_http, "rilld's monitoring listener (network.http_address), for rill top");
  ctx_add->add_flag("--use", ctx_use, "make it the current context");
  auto* ctx_list = ctx->add_subcommand("list", "the contexts, the current one marked");
  auto* ctx_use_cmd = ctx->add_subcommand("use", "make a context the current one");
  ctx_use_cmd->add_option("name", ctx_name)->required();
  auto* ctx_show = ctx->add_subcommand("show", "where this command line would connect, and why");
  auto* ctx_remove = ctx->add_subcommand("remove", "remove a context");
  ctx_remove->add_option("name", ctx_name)->required();

  auto* stream = app.add_subcommand("stream", "streams")->require_subcommand(1);
  std::string stream_name;
  auto* s_create = stream->add_subcommand("create", "create a stream");
  s_create->add_option("name", stream_name)->required();
  auto* s_list = stream->add_subcommand("list", "list streams");
  auto* s_describe = stream->add_subcommand("describe", "a stream and its topics");
  s_describe->add_option("name", stream_name)->required();
  bool yes = false;
  auto* s_delete = stream->add_subcommand("delete", "delete a stream and all its data");
  s_delete->add_option("name", stream_name)->required();
  s_delete->add_flag("--yes,-y", yes, "do not ask: delete even if it holds messages");

  auto* topic = app.add_subcommand("topic", "topics")->require_subcommand(1);
  std::string topic_name;
  proto::TopicConfig tc;
  std::uint32_t partitions = 1;
  std::uint32_t replication_factor = 0;
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
  t_create
      ->add_option("--replication-factor", replication_factor,
                   "nodes each partition is replicated on (at most the cluster's members; default: the server's "
                   "cluster.replication_factor)")
      ->check(CLI::Range(1u, 6u));
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
  t_delete->add_flag("--yes,-y", yes, "do not ask: delete even if it holds messages");

  cli::produce_args pa;
  std::string key;
  std::vector<std::string> headers;
  std::uint32_t linger_ms = 10;
  auto* produce = app.add_subcommand("produce", "produce one message per line of standard input, sent as read");
  produce->add_option("stream", pa.stream)->required();
  produce->add_option("topic", pa.topic)->required();
  auto* p_partition = produce->add_option("--partition", pa.partition, "partition");
  auto* p_key = produce->add_option("--key", key, "key of every message (partitions by Kafka's murmur2)");
  p_key->excludes(p_partition);
  produce
      ->add_option("--key-separator", pa.key_separator, "each line is KEY<SEP>VALUE (a line without SEP: value only)")
      ->excludes(p_key);
  produce->add_option("--header", headers, "header k=v (repeatable)");
  produce->add_flag("--zstd", pa.zstd, "compress batches with zstd");
  produce->add_option("--linger-ms", linger_ms, "send what was read after at most this long (0-10000)")
      ->check(CLI::Range(0u, 10'000u))
      ->capture_default_str();

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
  consume->add_flag("--from-replica", consume_args.from_replica,
                    "a replicated topic: read committed messages from the replica on the node asked, primary or not "
                    "(it may lag the primary by a heartbeat)");
  consume->add_option("--value-format", consume_args.value_format,
                      "text (escaped, the default) | base64 | hex | raw (the bytes unchanged; not with --json)");
  consume->add_option("--format", consume_args.format,
                      "text template: %s value %k key %p partition %o offset %T timestamp ms %t ISO-8601 time "
                      "%h headers %S value bytes %K key bytes %g group generation %% \\n \\t");

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
  std::string top_http;
  top->add_option("--http", top_http,
                  "rilld's monitoring listener, network.http_address (default: RILL_HTTP, the context, "
                  "127.0.0.1:9421)");
  top->add_option("--interval-ms", top_interval_ms, "between samples")->check(CLI::Range(100, 3'600'000));
  top->add_option("--rows", top_args.rows, "busiest actors shown")->check(CLI::Range(1, 10'000));
  top->add_flag("--once", top_args.once, "print one view (two samples an interval apart) and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    cli::set_json_output(g.json_output);
    // Which command: its help names the flags.
    std::string command = "rill";
    for (const CLI::App* a = &app; !a->get_subcommands().empty(); a = a->get_subcommands().back()) {
      command += " " + a->get_subcommands().back()->get_name();
    }
    std::string message = fmt::format("{} (see {} --help)", e.what(), command);
    if (const auto left = app.remaining(true); !left.empty()) {
      // What CLI11 could not place, with the nearest flag or subcommand: the likely typo.
      message += "\n" + cli::suggestions(app, left);
      message.pop_back();
    }
    return cli::usage_error(message.substr(0, 4096));
  }
  cli::set_json_output(g.json_output);
  if (g.version || *version) {
    g.json_output ? fmt::print("{}\n", json{{"version", RILL_VERSION}}.dump()) : fmt::print("{}\n", rill_version);
    return 0;
  }
  if (app.get_subcommands().empty()) {
    fmt::print("{}", app.help());
    return cli::exit_usage;
  }
  if (*completion) {
    fmt::print("{}", cli::completion_script(app, "rill", completion_shell));
    return 0;
  }
  if (*ctx) {
    return context_command(ctx_add->parsed()       ? ctx_op::add
                           : ctx_list->parsed()    ? ctx_op::list
                           : ctx_use_cmd->parsed() ? ctx_op::use
                           : ctx_show->parsed()    ? ctx_op::show
                                                   : ctx_op::remove,
                           ctx_name, cli::context{ctx_server, ctx_http}, ctx_use, g);
  }
  auto where = cli::resolve_endpoints(g.server, top_http, g.context, top->parsed());
  if (!where) {
    return cli::usage_error(where.error().detail());
  }
  if (*top) {
    top_args.http = where->http;
    top_args.interval = std::chrono::milliseconds(top_interval_ms);
    return cli::top(top_args);
  }
  net::client_options co;
  co.server = where->server;
  g.server = where->server;
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
                  : fmt::print("{} answered: {}\n", c.server(), r->version());
    return 0;
  }
  if (*c_status) {
    return cluster_status(c, co, g.json_output);
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
                              {"uptime_ms", r->uptime_ms()},
                              {"version", r->version()}}
                             .dump());
    } else {
      cli::table t({"SERVER", "VERSION", "UPTIME>", "STREAMS>", "TOPICS>", "PARTITIONS>", "MESSAGES>", "SIZE>",
                    "CONNECTIONS>", "SHARDS>"});
      t.add({c.server(), r->version(), cli::human_duration_ms(r->uptime_ms()), std::to_string(r->streams()),
             std::to_string(r->topics()), std::to_string(r->partitions()), cli::grouped(r->messages()),
             cli::human_bytes(r->bytes()), std::to_string(r->connections()), std::to_string(r->shards())});
      t.print();
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
    cli::table t({"STREAM", "ID>", "TOPICS>"});
    for (const auto& s : *r) {
      out.push_back({{"id", s.id()}, {"name", s.name()}, {"topics", s.topics()}, {"created_ms", s.created_ms()}});
      t.add({s.name(), std::to_string(s.id()), std::to_string(s.topics())});
    }
    if (g.json_output) {
      fmt::print("{}\n", out.dump());
    } else if (t.empty()) {
      fmt::print("no streams (create one: rill stream create NAME)\n");
    } else {
      t.print();
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
      std::uint64_t messages = 0;
      std::uint64_t bytes = 0;
      cli::table topics({"TOPIC", "ID>", "PARTITIONS>", "MESSAGES>", "SIZE>", "RETENTION>", "DURABILITY"});
      for (const auto& t : r->topics()) {
        messages += topic_messages(t);
        bytes += topic_bytes(t);
        topics.add({t.name(), std::to_string(t.id()), std::to_string(t.config().partitions()),
                    cli::grouped(topic_messages(t)), cli::human_bytes(topic_bytes(t)),
                    t.config().retention_ms() == 0 ? "forever" : cli::human_duration_ms(t.config().retention_ms()),
                    durability_name(t.config().durability())});
      }
      fmt::print("stream {} (id {}): {}, {}, {}\n", r->stream().name(), r->stream().id(),
                 cli::count_of(static_cast<std::uint64_t>(r->topics_size()), "topic"),
                 cli::count_of(messages, "message"), cli::human_bytes(bytes));
      if (!topics.empty()) {
        topics.print(2);
      }
    }
    return 0;
  }
  if (*s_delete) {
    if (!yes) {
      auto d = c.get_stream(sid);
      if (!d) {
        return report(d.error());
      }
      std::uint64_t messages = 0;
      std::uint64_t bytes = 0;
      for (const auto& t : d->topics()) {
        messages += topic_messages(t);
        bytes += topic_bytes(t);
      }
      if (const int rc = confirm_delete("stream " + stream_name, messages, bytes, yes); rc != 0) {
        return rc;
      }
    }
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
    if (replication_factor) {
      tc.set_replication_factor(replication_factor);
    }
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
                  : fmt::print("created topic {} (id {}) with {} in stream {}\n", r->name(), r->id(),
                               cli::count_of(r->config().partitions(), "partition"), stream_name);
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
    // In a cluster, a topic's partitions are counted by the node that serves it: ask it (one connection per node).
    std::map<std::string, std::unique_ptr<net::client>> homes;
    for (auto& t : topics) {
      const std::string home =
          t.partitions_size() > 0 && t.config().replication_factor() <= 1 ? t.partitions(0).served_by() : std::string();
      if (home.empty() || home.starts_with("node ")) {
        continue;
      }
      if (!homes.contains(home)) {
        net::client_options at = co;
        at.server = home;
        auto there = net::client::connect(at);
        if (!there) {
          return report(there.error());
        }
        homes[home] = std::move(*there);
      }
      auto full = homes[home]->get_topic(net::by_id(t.stream_id()), net::by_id(t.id()));
      if (!full) {
        return report(full.error());
      }
      t = std::move(*full);
    }
    json out = json::array();
    cli::table list({"TOPIC", "ID>", "PARTITIONS>", "MESSAGES>", "SIZE>", "RETENTION>", "DURABILITY"});
    for (auto& t : topics) {
      const bool replicated = *t_describe && t.config().replication_factor() > 1;
      replica_views views;
      if (replicated) {
        // The partitions' offsets and sizes as their primaries report them (a backup learns a commit a heartbeat
        // later: the node asked may lag by one).
        views = gather_replicas(c, co, t);
        for (auto& part : *t.mutable_partitions()) {
          for (const auto& r : views[part.id()]) {
            if (r.role() == "primary") {
              part = r;
            }
          }
        }
      }
      if (g.json_output) {
        out.push_back(topic_json(t));
        if (replicated) {
          out.back()["replicas"] = replicas_json(views);
        }
      } else if (*t_describe) {
        print_topic(t);
        if (replicated) {
          print_replicas(views);
        }
      } else {
        list.add({t.name(), std::to_string(t.id()), std::to_string(t.config().partitions()),
                  cli::grouped(topic_messages(t)), cli::human_bytes(topic_bytes(t)),
                  t.config().retention_ms() == 0 ? "forever" : cli::human_duration_ms(t.config().retention_ms()),
                  durability_name(t.config().durability())});
      }
    }
    if (g.json_output) {
      fmt::print("{}\n", (*t_describe ? out[0] : out).dump());
    } else if (*t_list) {
      list.empty()
          ? fmt::print("no topics in stream {} (create one: rill topic create {} NAME)\n", stream_name, stream_name)
          : list.print();
    }
    return 0;
  }
  if (*t_delete) {
    if (!yes) {
      auto d = c.get_topic(sid, tid);
      if (!d) {
        return report(d.error());
      }
      if (const int rc = confirm_delete(fmt::format("topic {}/{}", stream_name, topic_name), topic_messages(*d),
                                        topic_bytes(*d), yes);
          rc != 0) {
        return rc;
      }
    }
    auto r = c.delete_topic(sid, tid);
    if (!r) {
      return report(r.error());
    }
    g.json_output ? fmt::print("{}\n", json{{"deleted", topic_name}}.dump())
                  : fmt::print("deleted topic {} of stream {}\n", topic_name, stream_name);
    return 0;
  }
  if (*produce) {
    for (const auto& h : headers) {
      const auto eq = h.find('=');
      if (eq == std::string::npos) {
        return cli::usage_error(fmt::format("--header {}: expected k=v", h));
      }
      pa.headers.emplace_back(h.substr(0, eq), h.substr(eq + 1));
    }
    if (!key.empty()) {
      pa.key = key;
    }
    pa.linger = std::chrono::milliseconds(linger_ms);
    return cli::produce(c, pa);
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
