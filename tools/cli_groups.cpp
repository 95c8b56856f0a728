// rill CLI: consumer groups (see cli_groups.h).
#include "tools/cli_groups.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <boost/locale/encoding_utf.hpp>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/core.h>

#include "net/errc.h"
#include "net/group_consumer.h"
#include "tools/cli_consume.h"
#include "tools/cli_output.h"

namespace rill::cli {
namespace {
using json = nlohmann::json;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) {
  g_stop = 1;
}

json group_json(const proto::GroupInfo& g) {
  json members = json::array();
  for (const auto& m : g.members()) {
    members.push_back({{"member_id", m.member_id()},
                       {"owned", std::vector<std::uint32_t>(m.owned().begin(), m.owned().end())},
                       {"revoking", std::vector<std::uint32_t>(m.revoking().begin(), m.revoking().end())},
                       {"session_left_ms", m.session_left_ms()}});
  }
  json parts = json::array();
  for (const auto& p : g.partitions()) {
    parts.push_back({{"partition", p.partition_id()},
                     {"owner", p.has_owner() ? json(p.owner()) : json(nullptr)},
                     {"target", p.has_target() ? json(p.target()) : json(nullptr)},
                     {"committed", p.has_committed() ? json(p.committed()) : json(nullptr)},
                     {"high_watermark", p.high_watermark()},
                     {"log_start", p.log_start()},
                     {"lag", p.lag()}});
  }
  return {{"stream_id", g.stream_id()},
          {"topic_id", g.topic_id()},
          {"id", g.id()},
          {"name", g.name()},
          {"strategy", g.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? "round_robin" : "range"},
          {"session_timeout_ms", g.session_timeout_ms()},
          {"generation", g.generation()},
          {"stable", g.stable()},
          {"coordinator_node", g.coordinator_node()},
          {"from_metadata", g.from_metadata()},
          {"members", members},
          {"partitions", parts}};
}

std::uint64_t group_lag(const proto::GroupInfo& g) {
  std::uint64_t lag = 0;
  for (const auto& p : g.partitions()) {
    lag += p.lag();
  }
  return lag;
}

std::string partition_list(const google::protobuf::RepeatedField<std::uint32_t>& ps) {
  std::string out;
  for (auto p : ps) {
    out += (out.empty() ? "" : ",") + std::to_string(p);
  }
  return out.empty() ? "-" : out;
}

// One group for people: a summary line, then its members and partitions as tables.
void print_group(const proto::GroupInfo& g) {
  if (g.from_metadata()) {
    fmt::print("group {} (id {}): coordinated by node {} (describe it for its members and offsets); {} assignment, "
               "session timeout {}\n",
               g.name(), g.id(), g.coordinator_node(),
               g.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? "round_robin" : "range",
               human_duration_ms(g.session_timeout_ms()));
    return;
  }
  fmt::print("group {} (id {}): {}, {}, generation {}, {}, lag {}; {} assignment, session timeout {}\n", g.name(),
             g.id(), g.stable() ? "stable" : "rebalancing",
             count_of(static_cast<std::uint64_t>(g.members_size()), "member"), g.generation(),
             count_of(static_cast<std::uint64_t>(g.partitions_size()), "partition"), grouped(group_lag(g)),
             g.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? "round_robin" : "range",
             human_duration_ms(g.session_timeout_ms()));
  if (g.coordinator_node() != 0) {
    fmt::print("  coordinator: node {}\n", g.coordinator_node());
  }
  if (g.members_size() > 0) {
    table members({"MEMBER", "PARTITIONS", "RELEASING", "SESSION LEFT>"});
    for (const auto& m : g.members()) {
      members.add({m.member_id(), partition_list(m.owned()), partition_list(m.revoking()),
                   human_duration_ms(m.session_left_ms())});
    }
    members.print(2);
  }
  table parts({"PARTITION>", "OWNER", "COMMITTED>", "END>", "LAG>"});
  for (const auto& p : g.partitions()) {
    std::string owner = p.has_owner() ? p.owner() : "-";
    if (p.has_target() && (!p.has_owner() || p.target() != p.owner())) {
      owner += " -> " + p.target();
    }
    parts.add({std::to_string(p.partition_id()), owner, p.has_committed() ? std::to_string(p.committed()) : "-",
               std::to_string(p.high_watermark()), grouped(p.lag())});
  }
  parts.print(2);
}

void print_groups(const std::vector<proto::GroupInfo>& groups, const std::string& stream, const std::string& topic) {
  if (groups.empty()) {
    fmt::print("no consumer groups on {}/{} (create one: rill group create {} {} NAME)\n", stream, topic, stream,
               topic);
    return;
  }
  table t({"GROUP", "ID>", "STATE", "MEMBERS>", "GENERATION>", "LAG>", "STRATEGY"});
  for (const auto& g : groups) {
    if (g.from_metadata()) {
      t.add({g.name(), std::to_string(g.id()), fmt::format("on node {}", g.coordinator_node()), "-", "-", "-",
             g.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? "round_robin" : "range"});
      continue;
    }
    t.add({g.name(), std::to_string(g.id()), g.stable() ? "stable" : "rebalancing", std::to_string(g.members_size()),
           std::to_string(g.generation()), grouped(group_lag(g)),
           g.strategy() == proto::ASSIGNMENT_ROUND_ROBIN ? "round_robin" : "range"});
  }
  t.print();
}

}  // namespace

namespace {
bool valid_utf8(std::string_view s) {
  try {
    (void)boost::locale::conv::utf_to_utf<char>(s.data(), s.data() + s.size(), boost::locale::conv::stop);
    return true;
  } catch (const boost::locale::conv::conversion_error&) {
    return false;
  }
}

std::string base64(std::string_view s) {
  using namespace boost::archive::iterators;
  using encoder = base64_from_binary<transform_width<const char*, 6, 8>>;
  std::string out(encoder(s.data()), encoder(s.data() + s.size()));
  out.append((3 - s.size() % 3) % 3, '=');
  return out;
}

json bytes_json(const std::optional<std::string>& bytes) {
  if (!bytes) {
    return nullptr;
  }
  if (valid_utf8(*bytes)) {
    return *bytes;
  }
  return json{{"base64", base64(*bytes)}};
}
}  // namespace

json record_json(const net::record& rec) {
  json h = json::object();
  for (const auto& [k, v] : rec.headers) {
    h[valid_utf8(k) ? k : "base64:" + base64(k)] = bytes_json(v);
  }
  return json{{"partition", rec.partition}, {"offset", rec.offset}, {"timestamp", rec.timestamp_ms},
              {"key", bytes_json(rec.key)}, {"headers", h},         {"value", bytes_json(rec.value)}};
}

int group_consume(const group_consume_args& args) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  net::group_consumer_options o;
  o.connection = args.connection;
  o.group = args.group;
  o.topics.push_back(net::group_subscription{net::by_name(args.stream), net::by_name(args.topic)});
  o.member_id = args.member_id;
  o.config = args.config;
  o.auto_commit = false;  // commits follow what was printed, below
  o.max_wait = std::chrono::milliseconds(args.follow ? 1000 : 300);
  auto made = net::group_consumer::create(o);
  if (!made) {
    return report(made.error());
  }
  auto& gc = **made;
  std::uint64_t printed = 0;
  int empty_polls = 0;
  int rc = 0;
  // Following, a lost server is waited out (the client library reconnects at the next call, and the member rejoins
  // if its session ended): said on stderr, retried with a backoff of 100 ms doubling to 5 s.
  bool lost = false;
  auto backoff = std::chrono::milliseconds(100);
  const auto wait_out = [&](const rill::error& e) {
    if (!args.follow || !server_lost(e)) {
      return false;
    }
    if (!lost) {
      notice("reconnecting", fmt::format("lost the server ({}), reconnecting", e.message()));
      lost = true;
    }
    for (auto slept = std::chrono::milliseconds(0); slept < backoff && g_stop == 0;
         slept += std::chrono::milliseconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    return true;
  };
  while (g_stop == 0) {
    const auto left = args.count > 0 ? static_cast<std::uint32_t>(std::min<std::uint64_t>(args.count - printed, 10000))
                                     : std::uint32_t{0};
    auto records = gc.poll(left);
    if (!records) {
      if (wait_out(records.error())) {
        continue;
      }
      rc = report(records.error());
      break;
    }
    if (lost) {
      notice("reconnected", "reconnected");
      lost = false;
      backoff = std::chrono::milliseconds(100);
    }
    std::string out;
    for (const auto& rec : *records) {
      ++printed;
      if (args.output.json) {
        auto j = record_json_as(args.output, rec);
        j["member"] = gc.assignments()[rec.subscription].member_id;
        j["generation"] = rec.generation;
        out += j.dump() + "\n";
      } else {
        out += record_text(args.output, rec);
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    if (!records->empty()) {
      // Printed means consumed: the group's offsets move past it now.
      if (auto c = gc.commit(); !c) {
        // Not committed: the records are read again after a rejoin (at least once, as group_consumer.h says).
        if (wait_out(c.error())) {
          continue;
        }
        rc = report(c.error());
        break;
      }
    }
    if (args.count > 0 && printed >= args.count) {
      break;
    }
    empty_polls = records->empty() ? empty_polls + 1 : 0;
    if (!args.follow && empty_polls >= 2) {
      // Nothing more, unless the group is still moving partitions to this member (then give it a few seconds).
      const auto a = gc.assignments()[0];
      if ((!a.owned.empty() && a.revoking.empty()) || empty_polls >= 10) {
        break;
      }
    }
  }
  if (auto closed = gc.close(); !closed && rc == 0) {
    rc = report(closed.error());
  }
  return rc;
}

int group_command(net::client& c, group_op op, const std::string& stream, const std::string& topic,
                  const std::string& name, const proto::GroupConfig& config, bool json_output) {
  const auto sid = net::by_name(stream);
  const auto tid = net::by_name(topic);
  switch (op) {
    case group_op::create: {
      auto r = c.create_group(sid, tid, name, config);
      if (!r) {
        return report(r.error());
      }
      json_output ? fmt::print("{}\n", group_json(*r).dump()) : print_group(*r);
      return 0;
    }
    case group_op::list: {
      auto r = c.list_groups(sid, tid);
      if (!r) {
        return report(r.error());
      }
      if (json_output) {
        json all = json::array();
        for (const auto& g : *r) {
          all.push_back(group_json(g));
        }
        fmt::print("{}\n", all.dump());
      } else {
        print_groups(*r, stream, topic);
      }
      return 0;
    }
    case group_op::describe: {
      auto r = c.get_group(sid, tid, net::by_name(name));
      if (!r) {
        return report(r.error());
      }
      json_output ? fmt::print("{}\n", group_json(*r).dump()) : print_group(*r);
      return 0;
    }
    case group_op::remove: {
      auto r = c.delete_group(sid, tid, net::by_name(name));
      if (!r) {
        return report(r.error());
      }
      json_output ? fmt::print("{}\n", json{{"deleted", name}}.dump()) : fmt::print("deleted group {}\n", name);
      return 0;
    }
  }
  return 2;
}

}  // namespace rill::cli
