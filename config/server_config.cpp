// The key registry: one entry per configuration key, with its type, range, default, meaning and accessors. Every
// layer (file, environment, flags) goes through the same entries, so validation is written once.
#include "config/server_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "config/cpu_allocation.h"
#include "config/errc.h"
#include "config/limits.h"

namespace rill::config {

const char* to_string(log_level l) noexcept {
  switch (l) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::off:
      return "off";
  }
  return "info";
}

namespace {

enum class kind : std::uint8_t { integer, boolean, string, addr, choice, members, optional_addr };

struct key_spec {
  std::string name;
  kind k;
  std::string description;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::vector<std::string> choices;
  bool secret = false;
  std::function<void(server_config&, const config_value&)> set;
  std::function<config_value(const server_config&)> get;
};

std::string env_name(const std::string& key) {
  std::string out = "RILL_";
  for (char c : key) {
    out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

key_spec integer(std::string name, std::uint64_t min, std::uint64_t max, std::string description,
                 std::uint64_t server_config::*field) {
  return key_spec{std::move(name),
                  kind::integer,
                  std::move(description),
                  min,
                  max,
                  {},
                  false,
                  [field](server_config& c, const config_value& v) { c.*field = std::get<std::uint64_t>(v); },
                  [field](const server_config& c) { return config_value{c.*field}; }};
}

// An integer key of a section struct (storage, limits) inside server_config.
template <class Section>
key_spec section_integer(std::string name, std::uint64_t min, std::uint64_t max, std::string description,
                         Section server_config::*section, std::uint64_t Section::*field) {
  return key_spec{
      std::move(name),
      kind::integer,
      std::move(description),
      min,
      max,
      {},
      false,
      [section, field](server_config& c, const config_value& v) { (c.*section).*field = std::get<std::uint64_t>(v); },
      [section, field](const server_config& c) { return config_value{(c.*section).*field}; }};
}

key_spec storage_integer(std::string name, std::uint64_t min, std::uint64_t max, std::string description,
                         std::uint64_t log_config::*field) {
  return section_integer(std::move(name), min, max, std::move(description), &server_config::storage, field);
}

key_spec limits_integer(std::string name, std::uint64_t min, std::uint64_t max, std::string description,
                        std::uint64_t resource_limits::*field) {
  return section_integer(std::move(name), min, max, std::move(description), &server_config::limits, field);
}

key_spec address_key(std::string name, std::string description, address server_config::*field) {
  return key_spec{std::move(name),
                  kind::addr,
                  std::move(description),
                  0,
                  0,
                  {},
                  false,
                  [field](server_config& c, const config_value& v) {
                    c.*field = *parse_address(std::get<std::string>(v));  // checked before set
                  },
                  [field](const server_config& c) { return config_value{(c.*field).to_string()}; }};
}

}  // namespace

expected<std::vector<cluster_member>> parse_members(std::string_view text) {
  std::vector<cluster_member> out;
  if (text.empty()) {
    return out;
  }
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view entry = text.substr(at, comma - at);
    const std::size_t sign = entry.find('@');
    if (sign == std::string_view::npos || sign == 0) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("member '{}': expected ID@HOST:PORT, e.g. 1@127.0.0.1:9422", entry));
    }
    std::uint64_t id = 0;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + sign, id);
    if (ec != std::errc{} || end != entry.data() + sign || id == 0 || id > limits::node_id_limit) {
      return unexpected(
          make_error_code(errc::bad_value),
          fmt::format("member '{}': the node id must be an integer in [1, {}]", entry, limits::node_id_limit));
    }
    auto a = parse_address(entry.substr(sign + 1));
    if (!a) {
      return unexpected(make_error_code(errc::bad_value), fmt::format("member '{}': {}", entry, a.error().detail()));
    }
    if (a->port == 0) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("member '{}': a member's replica address needs its port (not 0)", entry));
    }
    out.push_back(cluster_member{id, std::move(*a)});
    at = comma + 1;
  }
  return out;
}

std::string members_text(const std::vector<cluster_member>& members) {
  std::string out;
  for (const auto& m : members) {
    out += fmt::format("{}{}@{}", out.empty() ? "" : ",", m.node_id, m.replica_address.to_string());
  }
  return out;
}

namespace {

const std::vector<key_spec>& registry() {
  constexpr std::uint64_t kib = limits::kib;
  constexpr std::uint64_t mib = limits::mib;
  constexpr std::uint64_t gib = limits::gib;
  constexpr std::uint64_t year_ms = 365ull * 24 * 3600 * 1000;
  static const std::vector<key_spec> keys = [] {
    std::vector<key_spec> k;
    k.push_back(
        key_spec{"server.data_dir",
                 kind::string,
                 "Directory of all persistent state (streams, metadata, runtime files); created 0700 if missing.",
                 0,
                 0,
                 {},
                 false,
                 [](server_config& c, const config_value& v) { c.data_dir = std::get<std::string>(v); },
                 [](const server_config& c) { return config_value{c.data_dir}; }});
    k.push_back(integer("cluster.id", 0, limits::cluster_id_limit,
                        "The cluster this node belongs to; every member names the same. 0: none given (a node alone "
                        "makes one up when it formats its data directory; members must name it).",
                        &server_config::cluster_id));
    k.push_back(integer("cluster.node_id", 1, limits::node_id_limit,
                        "This node's id: one of the members' ids (ignored by a node alone).", &server_config::node_id));
    k.push_back(key_spec{"cluster.members",
                         kind::members,
                         "Every member's node id and replica-plane address, this node's included: a TOML array of "
                         "\"ID@HOST:PORT\" strings, or on --set and in the environment one string separated by "
                         "commas. Empty: a cluster of this node alone.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) {
                           c.members = *parse_members(std::get<std::string>(v));  // checked before set
                         },
                         [](const server_config& c) { return config_value{members_text(c.members)}; }});
    k.push_back(integer("cluster.replication_factor", 1, limits::cluster_members_limit,
                        "The replication factor of a topic created without one: each of its partitions is then a VSR "
                        "group on that many members (at most the cluster's members; 1: one node serves the topic).",
                        &server_config::replication_factor_default));
    k.push_back(integer("cluster.partition_journal_slots", 64, 65536,
                        "Ops the journal ring of each replicated partition's replica holds (its journal.wal takes "
                        "about 4 KiB per slot). A replica further behind than this copies the partition's log from a "
                        "peer (state transfer). A replica keeps the ring its files were created with.",
                        &server_config::partition_journal_slots));
    k.push_back(address_key("network.tcp_address", "Client protocol listener (HOST:PORT; port 0 picks a free port).",
                            &server_config::tcp_address));
    k.push_back(address_key("network.http_address", "HTTP listener for /metrics, /healthz, /api and /ui.",
                            &server_config::http_address));
    k.push_back(address_key("network.replica_address",
                            "Replica-plane listener: the other members of the cluster connect here (HOST:PORT).",
                            &server_config::replica_address));
    k.push_back(key_spec{"network.advertised_address",
                         kind::optional_addr,
                         "The client address other nodes hand out for this one (HOST:PORT); empty: the bound "
                         "client address.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) {
                           const auto& text = std::get<std::string>(v);
                           c.advertised_address = text.empty() ? address{} : *parse_address(text);
                         },
                         [](const server_config& c) {
                           return config_value{c.advertised_address.host.empty() ? std::string()
                                                                                 : c.advertised_address.to_string()};
                         }});
    k.push_back(
        integer("network.max_frame_bytes", 4 * kib, 256 * mib,
                "Largest request frame accepted; a larger one gets an error reply and the connection is closed.",
                &server_config::max_frame_bytes));
    k.push_back(integer("network.connections_max", 1, 1'000'000, "Client connections accepted at once.",
                        &server_config::connections_max));
    k.push_back(integer("network.connection_inflight_requests_max", 1, 65'536,
                        "Requests of one connection being served at once; reading pauses at the cap.",
                        &server_config::connection_inflight_requests_max));
    k.push_back(integer("network.connection_inflight_bytes_max", 64 * kib, 4 * gib,
                        "Request bytes of one connection being served at once; reading pauses at the cap.",
                        &server_config::connection_inflight_bytes_max));
    k.push_back(integer("network.long_poll_wait_ms_max", 0, 600'000, "Longest max wait a poll may ask for.",
                        &server_config::long_poll_wait_ms_max));
    k.push_back(key_spec{"runtime.cpu_allocation",
                         kind::string,
                         "CPUs that run shards, one shard each: \"all\", N, \"a..b\", \"numa:auto\" or "
                         "\"numa:nodes=0,1;cores=N;no_ht=true\".",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.cpu_allocation = std::get<std::string>(v); },
                         [](const server_config& c) { return config_value{c.cpu_allocation}; }});
    k.push_back(key_spec{"runtime.pin_cores",
                         kind::boolean,
                         "Bind each shard's thread to its CPU and memory node.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.pin_cores = std::get<bool>(v); },
                         [](const server_config& c) { return config_value{c.pin_cores}; }});
    k.push_back(key_spec{"runtime.actor_metrics",
                         kind::boolean,
                         "Time every message an actor handles (busy time, latency per message type); off leaves "
                         "the message counters only.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.actor_metrics = std::get<bool>(v); },
                         [](const server_config& c) { return config_value{c.actor_metrics}; }});
    k.push_back(integer("runtime.max_throughput", 1, 100'000,
                        "Messages an actor handles before its shard checks I/O completions and other actors.",
                        &server_config::max_throughput));
    k.push_back(storage_integer("storage.segment_bytes", limits::segment_bytes_min, limits::segment_bytes_limit,
                                "Roll a partition's active segment before it exceeds this many bytes.",
                                &log_config::segment_bytes));
    k.push_back(storage_integer("storage.segment_ms", 0, year_ms,
                                "Roll the active segment when its first batch is this old (0: never).",
                                &log_config::segment_ms));
    k.push_back(storage_integer("storage.retention_ms", 0, 100 * year_ms,
                                "Delete sealed segments whose newest record is older than this (0: keep).",
                                &log_config::retention_ms));
    k.push_back(storage_integer("storage.retention_bytes", 0, std::uint64_t{1} << 60,
                                "Delete the oldest sealed segments while a partition is larger (0: no limit).",
                                &log_config::retention_bytes));
    k.push_back(integer("storage.retention_check_ms", 100, 86'400'000,
                        "How often each partition applies its retention (retention_ms, retention_bytes).",
                        &server_config::retention_check_ms));
    k.push_back(integer("storage.producer_expiry_ms", producer_expiry_ms_min, producer_expiry_ms_limit,
                        "An idempotent producer whose newest batch in a partition is older than this is forgotten "
                        "there (as Kafka's producer.id.expiration.ms): its next batch must start a new sequence, "
                        "and retries of its older batches are no longer recognised. Replicated partitions take "
                        "the value of their primary's node.",
                        &server_config::producer_expiry_ms));
    k.push_back(key_spec{"storage.blocking_writes",
                         kind::boolean,
                         "Write unsynced log data (relaxed durability) with pwritev on the shard's own thread rather "
                         "than through io_uring's kernel worker: no thread hand-off per write; the shard waits where "
                         "the kernel throttles dirty pages.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.blocking_writes = std::get<bool>(v); },
                         [](const server_config& c) { return config_value{c.blocking_writes}; }});
    k.push_back(key_spec{"storage.inline_syncs",
                         kind::boolean,
                         "A shard about to sleep with one log write + fdatasync outstanding (sync before ack) and no "
                         "other file I/O runs them on its own thread instead of through io_uring's kernel worker: no "
                         "thread hand-off per durable produce; work reaching that shard meanwhile waits for the "
                         "fdatasync. Off: every fdatasync goes through the ring.",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.inline_syncs = std::get<bool>(v); },
                         [](const server_config& c) { return config_value{c.inline_syncs}; }});
    k.push_back(storage_integer("storage.max_message_bytes", limits::batch_bytes_min, limits::batch_bytes_limit,
                                "Largest record batch accepted.", &log_config::max_message_bytes));
    k.push_back(
        key_spec{"storage.durability",
                 kind::choice,
                 "When an append is acknowledged: after the fsync that covers it, or once written (relaxed: a "
                 "background fsync runs back to back while data is unsynced, so consumers, who see only synced data "
                 "either way, wait about one fsync; N records / T ms bound what a power loss can take).",
                 0,
                 0,
                 {"sync_before_ack", "every_records", "every_ms"},
                 false,
                 [](server_config& c, const config_value& v) {
                   const auto& s = std::get<std::string>(v);
                   c.storage.durability = s == "every_records" ? durability_mode::every_records
                                          : s == "every_ms"    ? durability_mode::every_ms
                                                               : durability_mode::sync_before_ack;
                 },
                 [](const server_config& c) { return config_value{std::string(to_string(c.storage.durability))}; }});
    k.push_back(
        storage_integer("storage.sync_every_records", 1, 1'000'000'000,
                        "Under durability = every_records: at most this many records unsynced (what a power loss can "
                        "take); visibility does not wait for it.",
                        &log_config::sync_every_records));
    k.push_back(storage_integer("storage.sync_every_ms", 1, 3'600'000,
                                "Under durability = every_ms: fsync at least this often (what a power loss can take); "
                                "visibility does not wait for it.",
                                &log_config::sync_every_ms));
    k.push_back(storage_integer("storage.flush_bytes_max", 4 * kib, limits::flush_bytes_limit,
                                "Most bytes one group commit writes with one vectored write.",
                                &log_config::flush_bytes_max));
    k.push_back(storage_integer("storage.pending_bytes_max", 4 * kib, 1 * gib,
                                "Queued bytes per partition beyond which produces get a retriable overload error.",
                                &log_config::pending_bytes_max));
    k.push_back(storage_integer(
        "storage.preallocate_bytes", 0, 256 * mib,
        "Under sync_before_ack, keep the active segment written with zeros this far ahead, from its first "
        "write on (idle partitions hold none).",
        &log_config::preallocate_bytes));
    k.push_back(storage_integer("storage.read_window_bytes", limits::read_window_bytes_min,
                                limits::read_window_bytes_limit, "Size of one positional read of a fetch.",
                                &log_config::read_window_bytes));
    k.push_back(storage_integer(
        "storage.delete_step_bytes", limits::delete_step_bytes_min, limits::delete_step_bytes_limit,
        "Retention shrinks a file by this much per step before unlinking it.", &log_config::delete_step_bytes));
    k.push_back(storage_integer("storage.superblock_interval_records", 1, 1'000'000'000,
                                "Persist the committed offset after this many newly committed records.",
                                &log_config::superblock_interval_records));
    k.push_back(key_spec{"logging.level",
                         kind::choice,
                         "Least severe events rilld writes to stderr (notices are info, corruption reports error).",
                         0,
                         0,
                         {"trace", "debug", "info", "warn", "error", "off"},
                         false,
                         [](server_config& c, const config_value& v) {
                           const auto& s = std::get<std::string>(v);
                           const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
                           for (int i = 0; i < 6; ++i) {
                             if (s == names[i]) {
                               c.level = static_cast<log_level>(i);
                             }
                           }
                         },
                         [](const server_config& c) { return config_value{std::string(to_string(c.level))}; }});
    // [monitoring]: the cardinality of /metrics (actors/runtime/metrics.h; docs/monitoring.md).
    k.push_back(integer("monitoring.partition_series_max", 0, partition_series_limit,
                        "Partitions whose rill_partition_* series /metrics shows one by one; with more, each series "
                        "sums a topic (or a stream, or the node, whichever first fits; 0: the node).",
                        &server_config::partition_series_max));
    k.push_back(integer("monitoring.actor_series_max", 0, actor_series_limit,
                        "Actors of one kind whose rill_actor_* series /metrics shows one by one; with more, that "
                        "kind's series sum its actors per shard.",
                        &server_config::actor_series_max));
    // [limits]: what clients may make this node hold (config/resource_limits.h; docs/operations.md, Limits).
    k.push_back(
        limits_integer("limits.streams_max", 1, streams_limit, "Streams on this node.", &resource_limits::streams_max));
    k.push_back(limits_integer("limits.topics_per_stream_max", 1, topics_per_stream_limit, "Topics in one stream.",
                               &resource_limits::topics_per_stream_max));
    k.push_back(limits_integer("limits.partitions_per_topic_max", 1, partitions_per_topic_limit,
                               "Partitions of one topic (at creation and after partitions add).",
                               &resource_limits::partitions_per_topic_max));
    k.push_back(limits_integer("limits.partitions_max", 1, partitions_limit,
                               "Partitions of every topic on this node together (an idle one holds no descriptor; "
                               "the open files of all count against limits.open_files_max).",
                               &resource_limits::partitions_max));
    k.push_back(limits_integer("limits.open_files_max", open_files_min, open_files_limit,
                               "Storage files (segments, superblocks) held open by every partition together, split "
                               "evenly between the shards; the least recently used idle ones are closed beyond it "
                               "and reopened when next used (rilld refuses to start when this and "
                               "network.connections_max exceed its descriptor limit).",
                               &resource_limits::open_files_max));
    k.push_back(limits_integer("limits.groups_per_topic_max", 1, groups_per_topic_limit,
                               "Consumer groups of one topic.", &resource_limits::groups_per_topic_max));
    k.push_back(limits_integer("limits.groups_max", 1, groups_limit,
                               "Consumer groups of every topic on this node together.", &resource_limits::groups_max));
    k.push_back(limits_integer("limits.consumers_per_partition_max", 1, consumers_per_partition_limit,
                               "Named consumers that store offsets in one partition (one file each).",
                               &resource_limits::consumers_per_partition_max));
    k.push_back(limits_integer("limits.producers_per_partition_max", 1, producers_per_partition_limit,
                               "Idempotent producers one partition remembers; beyond it, the one idle longest is "
                               "forgotten (its next batch must start a new sequence). Each takes at most 146 bytes "
                               "of the partition's checkpoint. Replicated partitions take the value of their "
                               "primary's node.",
                               &resource_limits::producers_per_partition_max));
    // Environment names must be unique, and none may be one of the rill CLI's own variables.
    std::set<std::string> envs(client_environment_names.begin(), client_environment_names.end());
    for (const auto& key : k) {
      RILL_ASSERT(envs.insert(env_name(key.name)).second, "{} is taken (by another key or the rill CLI)",
                  env_name(key.name));
    }
    // Last: the rendered file groups keys by section, in this order.
    k.push_back(key_spec{"debug.failure_injection",
                         kind::boolean,
                         "Serve POST /debug/stall on the monitoring listener (stalls an actor: tests and "
                         "experiments only).",
                         0,
                         0,
                         {},
                         false,
                         [](server_config& c, const config_value& v) { c.failure_injection = std::get<bool>(v); },
                         [](const server_config& c) { return config_value{c.failure_injection}; }});
    return k;
  }();
  return keys;
}

const key_spec* find_key(std::string_view name) {
  for (const auto& k : registry()) {
    if (k.name == name) {
      return &k;
    }
  }
  return nullptr;
}

std::string allowed_text(const key_spec& k) {
  switch (k.k) {
    case kind::integer:
      return fmt::format("an integer in [{}, {}]", k.min, k.max);
    case kind::boolean:
      return "true or false";
    case kind::string:
      if (k.name == "server.data_dir") {
        return "a non-empty path";
      }
      return k.name == "runtime.cpu_allocation"
                 ? "\"all\", N, \"a..b\", \"numa:auto\" or \"numa:nodes=..;cores=..;no_ht=..\""
                 : "a string";
    case kind::addr:
      return "HOST:PORT";
    case kind::optional_addr:
      return "HOST:PORT, or empty";
    case kind::members:
      return "ID@HOST:PORT entries (at most " + std::to_string(limits::cluster_members_limit) + ")";
    case kind::choice: {
      std::string s = "one of ";
      for (std::size_t i = 0; i < k.choices.size(); ++i) {
        s += (i ? "|" : "") + k.choices[i];
      }
      return s;
    }
  }
  return {};
}

std::string value_text(const config_value& v) {
  if (const auto* u = std::get_if<std::uint64_t>(&v)) {
    return std::to_string(*u);
  }
  if (const auto* b = std::get_if<bool>(&v)) {
    return *b ? "true" : "false";
  }
  return "'" + std::get<std::string>(v) + "'";
}

rill::unexpected key_error(errc code, const key_spec& k, const std::string& shown, const std::string& origin) {
  return unexpected(make_error_code(code),
                    fmt::format("{} = {} (from {}): allowed is {}", k.name, shown, origin, allowed_text(k)));
}

// Checks `v` (already of the key's type) against the key's range or choices, then stores it.
expected<void> check_and_set(server_config& c, const key_spec& k, const config_value& v, const std::string& origin) {
  switch (k.k) {
    case kind::integer: {
      const auto n = std::get<std::uint64_t>(v);
      if (n < k.min || n > k.max) {
        return key_error(errc::out_of_range, k, std::to_string(n), origin);
      }
      break;
    }
    case kind::addr:
      if (auto a = parse_address(std::get<std::string>(v)); !a) {
        return unexpected(make_error_code(errc::bad_value),
                          fmt::format("{} (from {}): {}", k.name, origin, a.error().detail()));
      }
      break;
    case kind::optional_addr:
      if (const auto& text = std::get<std::string>(v); !text.empty()) {
        if (auto a = parse_address(text); !a) {
          return unexpected(make_error_code(errc::bad_value),
                            fmt::format("{} (from {}): {}", k.name, origin, a.error().detail()));
        }
      }
      break;
    case kind::members: {
      auto m = parse_members(std::get<std::string>(v));
      if (!m) {
        return unexpected(make_error_code(errc::bad_value),
                          fmt::format("{} (from {}): {}", k.name, origin, m.error().detail()));
      }
      if (m->size() > limits::cluster_members_limit) {
        return unexpected(make_error_code(errc::out_of_range),
                          fmt::format("{} (from {}): {} members; allowed is at most {} (the metadata group spans "
                                      "every member)",
                                      k.name, origin, m->size(), limits::cluster_members_limit));
      }
      break;
    }
    case kind::choice:
      if (std::find(k.choices.begin(), k.choices.end(), std::get<std::string>(v)) == k.choices.end()) {
        return key_error(errc::bad_value, k, value_text(v), origin);
      }
      break;
    case kind::string:
      if (k.name == "runtime.cpu_allocation") {
        if (auto spec = parse_cpu_allocation(std::get<std::string>(v)); !spec) {
          return unexpected(make_error_code(errc::bad_value),
                            fmt::format("{} (from {}): {}", k.name, origin, spec.error().detail()));
        }
      }
      if (k.name == "server.data_dir" && std::get<std::string>(v).empty()) {
        return key_error(errc::bad_value, k, "''", origin);
      }
      break;
    case kind::boolean:
      break;
  }
  k.set(c, v);
  return {};
}

// Text from the environment or a flag, converted to the key's type.
expected<config_value> from_text(const key_spec& k, std::string_view text, const std::string& origin) {
  switch (k.k) {
    case kind::integer: {
      std::uint64_t n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
        return key_error(errc::bad_value, k, "'" + std::string(text) + "'", origin);
      }
      return config_value{n};
    }
    case kind::boolean:
      // Exactly true or false, as in TOML: "yes", "1" or "on" would be one more spelling for the docs and a typo
      // ("ture") away from a silent default.
      if (text == "true") {
        return config_value{true};
      }
      if (text == "false") {
        return config_value{false};
      }
      return key_error(errc::bad_value, k, "'" + std::string(text) + "'", origin);
    default:
      return config_value{std::string(text)};
  }
}

}  // namespace

std::vector<key_doc> describe_keys() {
  std::vector<key_doc> out;
  const server_config defaults;
  for (const auto& k : registry()) {
    key_doc d;
    d.key = k.name;
    d.env = env_name(k.name);
    d.type = k.k == kind::integer                              ? "integer"
             : k.k == kind::boolean                            ? "boolean"
             : k.k == kind::addr || k.k == kind::optional_addr ? "address"
             : k.k == kind::choice                             ? "choice"
             : k.k == kind::members                            ? "members"
                                                               : "string";
    d.allowed = allowed_text(k);
    d.default_text = value_text(k.get(defaults));
    d.description = k.description;
    d.secret = k.secret;
    out.push_back(std::move(d));
  }
  return out;
}

config_builder::config_builder() = default;

expected<void> config_builder::load_toml(std::string_view text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return unexpected(make_error_code(errc::bad_value),
                      fmt::format("{} line {}: {}", origin, e.source().begin.line, e.description()));
  }
  for (const auto& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    const auto* table = section_node.as_table();
    if (table == nullptr) {
      return unexpected(
          make_error_code(errc::unknown_key),
          fmt::format("{}: '{}' at the top level; every key belongs to a section such as [network]", origin, section));
    }
    for (const auto& [name_key, node] : *table) {
      const std::string name = section + "." + std::string(name_key.str());
      const key_spec* k = find_key(name);
      if (k == nullptr) {
        return unexpected(make_error_code(errc::unknown_key),
                          fmt::format("{} (from {} line {}): unknown key", name, origin, node.source().begin.line));
      }
      const std::string where = fmt::format("{} line {}", origin, node.source().begin.line);
      config_value v;
      if (k->k == kind::integer) {
        const auto* i = node.as_integer();
        if (i == nullptr || i->get() < 0) {
          return key_error(errc::bad_value, *k, i ? std::to_string(i->get()) : "a non-integer", where);
        }
        v = static_cast<std::uint64_t>(i->get());
      } else if (k->k == kind::boolean) {
        const auto* b = node.as_boolean();
        if (b == nullptr) {
          return key_error(errc::bad_value, *k, "a non-boolean", where);
        }
        v = b->get();
      } else if (k->k == kind::members && node.as_array() != nullptr) {
        std::string joined;
        for (const auto& entry : *node.as_array()) {
          const auto* s = entry.as_string();
          if (s == nullptr || s->get().find(',') != std::string::npos) {
            return key_error(errc::bad_value, *k, "an array entry that is not one \"ID@HOST:PORT\" string", where);
          }
          joined += (joined.empty() ? "" : ",") + s->get();
        }
        v = joined;
      } else {
        const auto* s = node.as_string();
        if (s == nullptr) {
          return key_error(errc::bad_value, *k, "a non-string", where);
        }
        v = s->get();
      }
      RILL_TRY_VOID(check_and_set(config_, *k, v, where));
    }
  }
  return {};
}

expected<void> config_builder::load_toml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return unexpected(make_error_code(errc::bad_value), fmt::format("config file {}: cannot be read", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return load_toml(buffer.str(), path);
}

expected<void> config_builder::load_environment(const std::vector<std::string>& environment) {
  for (const auto& entry : environment) {
    if (entry.rfind("RILL_", 0) != 0) {
      continue;
    }
    const auto eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (std::find(client_environment_names.begin(), client_environment_names.end(), name) !=
        client_environment_names.end()) {
      continue;  // the CLI's, exported in the same shell
    }
    const std::string value = eq == std::string::npos ? std::string() : entry.substr(eq + 1);
    const key_spec* found = nullptr;
    for (const auto& k : registry()) {
      if (env_name(k.name) == name) {
        found = &k;
        break;
      }
    }
    if (found == nullptr) {
      return unexpected(
          make_error_code(errc::unknown_key),
          fmt::format("environment variable {}: no such configuration key (see docs/operations.md)", name));
    }
    RILL_TRY(v, from_text(*found, value, "environment " + name));
    RILL_TRY_VOID(check_and_set(config_, *found, v, "environment " + name));
  }
  return {};
}

expected<void> config_builder::set(std::string_view key, std::string_view value, const std::string& origin) {
  const key_spec* k = find_key(key);
  if (k == nullptr) {
    return unexpected(make_error_code(errc::unknown_key), fmt::format("{} (from {}): unknown key", key, origin));
  }
  RILL_TRY(v, from_text(*k, value, origin));
  return check_and_set(config_, *k, v, origin);
}

expected<server_config> config_builder::build() const {
  auto storage = validate(config_.storage);
  if (!storage) {
    return unexpected(storage.error().code(), "storage." + storage.error().detail());
  }
  if (const std::size_t members = std::max<std::size_t>(1, config_.members.size());
      config_.replication_factor_default > members) {
    return unexpected(make_error_code(errc::bad_value),
                      fmt::format("cluster.replication_factor = {}: allowed range is [1, {}] (the cluster's members)",
                                  config_.replication_factor_default, members));
  }
  if (const std::uint64_t bytes = partition_checkpoint_head_bytes +
                                  config_.limits.producers_per_partition_max * partition_checkpoint_producer_bytes +
                                  config_.limits.consumers_per_partition_max * partition_checkpoint_consumer_bytes;
      !config_.members.empty() && bytes > partition_checkpoint_budget_bytes) {
    return unexpected(
        make_error_code(errc::bad_value),
        fmt::format("limits.producers_per_partition_max = {} and limits.consumers_per_partition_max = {}: a "
                    "replicated partition's checkpoint would hold up to {} bytes, past its {} (each producer takes "
                    "up to {} bytes, each consumer {}): lower either",
                    config_.limits.producers_per_partition_max, config_.limits.consumers_per_partition_max, bytes,
                    partition_checkpoint_budget_bytes, partition_checkpoint_producer_bytes,
                    partition_checkpoint_consumer_bytes));
  }
  if (config_.replication_factor_default == 2) {
    return unexpected(make_error_code(errc::bad_value),
                      fmt::format("cluster.{}", limits::replication_factor_two_refused));
  }
  if (!config_.members.empty()) {
    const std::string listed = members_text(config_.members);
    std::set<std::uint64_t> ids;
    std::set<std::string> addresses;
    for (const auto& m : config_.members) {
      if (!ids.insert(m.node_id).second) {
        return unexpected(make_error_code(errc::bad_value),
                          fmt::format("cluster.members = '{}': node id {} is listed twice", listed, m.node_id));
      }
      if (!addresses.insert(m.replica_address.to_string()).second) {
        return unexpected(
            make_error_code(errc::bad_value),
            fmt::format("cluster.members = '{}': address {} is listed twice", listed, m.replica_address.to_string()));
      }
    }
    if (config_.members.size() == 2) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("cluster.members = '{}': {}", listed, limits::two_members_refused));
    }
    if (!ids.contains(config_.node_id)) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("cluster.node_id = {}: not one of cluster.members = '{}' (this node must be "
                                    "listed too)",
                                    config_.node_id, listed));
    }
    if (config_.cluster_id == 0) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("cluster.id = 0: a cluster of {} members needs its id, the same on every member "
                                    "(an integer in [1, {}])",
                                    config_.members.size(), limits::cluster_id_limit));
    }
    // This node listens where the members list says the others reach it (a wildcard host with that port too: the
    // list names the routable address). Otherwise its peers would dial someone else, and be refused at the hello.
    const auto self = std::find_if(config_.members.begin(), config_.members.end(),
                                   [&](const cluster_member& m) { return m.node_id == config_.node_id; });
    const address& listed_here = self->replica_address;
    const address& bound = config_.replica_address;
    const bool wildcard = bound.host == "0.0.0.0" || bound.host == "::" || bound.host == "[::]";
    if (config_.members.size() > 1 &&
        (bound.port != listed_here.port || (!wildcard && bound.host != listed_here.host))) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("network.replica_address = {}: cluster.members lists node {} at {}; listen there "
                                    "(--replica {}, or a wildcard host with port {})",
                                    bound.to_string(), config_.node_id, listed_here.to_string(),
                                    listed_here.to_string(), listed_here.port));
    }
  }
  return config_;
}

std::string render_toml(const server_config& c) {
  std::string out = "# The effective configuration of this rilld, written at startup (secrets left out).\n";
  std::string section;
  for (const auto& k : registry()) {
    if (k.secret) {
      continue;
    }
    const auto dot = k.name.find('.');
    const std::string sec = k.name.substr(0, dot);
    if (sec != section) {
      section = sec;
      out += "\n[" + section + "]\n";
    }
    const config_value v = k.get(c);
    std::string shown;
    if (const auto* u = std::get_if<std::uint64_t>(&v)) {
      shown = std::to_string(*u);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      shown = *b ? "true" : "false";
    } else if (k.k == kind::members) {
      shown = "[";
      for (const auto& m : c.members) {
        std::ostringstream quoted;
        quoted << toml::value<std::string>(fmt::format("{}@{}", m.node_id, m.replica_address.to_string()));
        shown += (shown.size() > 1 ? ", " : "") + quoted.str();
      }
      shown += "]";
    } else {
      std::ostringstream quoted;
      quoted << toml::value<std::string>(std::get<std::string>(v));
      shown = quoted.str();
    }
    out += k.name.substr(dot + 1) + " = " + shown + "\n";
  }
  return out;
}

}  // namespace rill::config
