#pragma once
// The server's configuration: every key with its default, meaning and allowed range, loaded in layers
//   defaults < TOML file < RILL_* environment variables < command-line flags
// An unknown key or a bad value stops startup with an error that names the key, the value, where it came from and
// what is allowed. docs/operations.md lists every key (generated from describe_keys()).
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/expected.h"
#include "config/address.h"
#include "config/log_config.h"
#include "config/resource_limits.h"

namespace rill::config {

// The rill CLI's environment variables (tools/cli_context.h): rilld ignores them, and no key may map to one.
inline constexpr std::array<std::string_view, 4> client_environment_names = {"RILL_SERVER", "RILL_HTTP", "RILL_CONTEXT",
                                                                             "RILL_CLI_CONFIG"};

enum class log_level : std::uint8_t { trace, debug, info, warn, error, off };

// The ranges of the [monitoring] keys. At the top of its range no partition, and no kind of actor (partitions,
// groups, connections: each at most a million), is ever aggregated on /metrics.
inline constexpr std::uint64_t partition_series_limit = partitions_limit;
inline constexpr std::uint64_t actor_series_limit = 1'000'000;
static_assert(actor_series_limit >= partitions_limit, "a partition actor per partition");
static_assert(actor_series_limit >= groups_limit, "a group actor per group");
const char* to_string(log_level l) noexcept;

// One member of a cluster: its node id and the replica-plane address the others reach it at.
struct cluster_member {
  std::uint64_t node_id = 0;
  address replica_address;
  friend bool operator==(const cluster_member&, const cluster_member&) = default;
};

// "ID@HOST:PORT[,ID@HOST:PORT...]" (also one entry of a TOML array). The error says what is wrong with which entry.
expected<std::vector<cluster_member>> parse_members(std::string_view text);
// The same text back ("1@127.0.0.1:9422,2@127.0.0.1:9432").
std::string members_text(const std::vector<cluster_member>& members);

struct server_config {
  // [server]
  std::string data_dir = "./rill-data";
  // [cluster]: which cluster this node belongs to (docs/operations.md, Clusters). No members: a cluster of this
  // node alone, which formats itself at its first start.
  std::uint64_t cluster_id = 0;  // 0: not given (a node alone then makes one up when it formats its directory)
  std::uint64_t node_id = 1;
  std::vector<cluster_member> members;
  // A topic's replication_factor when its creation names none (at most the members; 1: not replicated).
  std::uint64_t replication_factor_default = 1;
  std::uint64_t partition_journal_slots = 4096;  // a replicated partition's journal ring (ops)
  // [network]
  address tcp_address{"127.0.0.1", 9420};
  address http_address{"127.0.0.1", 9421};
  address replica_address{"127.0.0.1", 9422};  // the replica plane: what the other members connect to
  // The client address other nodes hand out for this one (empty host: the bound client address).
  address advertised_address;
  std::uint64_t max_frame_bytes = 16 * limits::mib;
  std::uint64_t connections_max = 10'000;
  std::uint64_t connection_inflight_requests_max = 64;
  std::uint64_t connection_inflight_bytes_max = 64 * limits::mib;
  std::uint64_t long_poll_wait_ms_max = 30'000;
  // [runtime]
  std::string cpu_allocation = "all";
  bool pin_cores = true;
  bool actor_metrics = true;       // time each message actors handle (docs/monitoring.md)
  bool failure_injection = false;  // POST /debug/... on the monitoring listener (tests, experiments)
  std::uint64_t max_throughput = 64;
  // [storage]: defaults for every topic's partitions
  log_config storage;
  std::uint64_t retention_check_ms = 30'000;      // how often each partition applies its retention
  std::uint64_t producer_expiry_ms = 86'400'000;  // an idle idempotent producer is forgotten after this
  bool blocking_writes = true;  // unsynced log writes as pwritev on the shard's thread (storage::log_options)
  bool inline_syncs = true;     // a lone write + fdatasync runs on an otherwise idle shard's thread (runtime_options)
  // [logging]
  log_level level = log_level::info;
  // [monitoring]: series rendered one by one on /metrics before they are aggregated (docs/monitoring.md)
  std::uint64_t partition_series_max = 1'000;
  std::uint64_t actor_series_max = 1'000;
  // [limits]: what clients may make this node hold
  resource_limits limits;
};

// A value as written in the file, the environment or a flag.
using config_value = std::variant<std::uint64_t, bool, std::string>;

struct key_doc {
  std::string key;      // "network.max_frame_bytes"
  std::string env;      // "RILL_NETWORK_MAX_FRAME_BYTES"
  std::string type;     // "integer", "boolean", "string", "address", "one of a|b|c"
  std::string allowed;  // "[4096, 268435456]", or empty
  std::string default_text;
  std::string description;
  bool secret = false;
};

// Every key, in file order.
std::vector<key_doc> describe_keys();

class config_builder {
 public:
  config_builder();

  // TOML text (a file's content); `origin` names it in errors. Tables are sections: [network] max_frame_bytes = ...
  expected<void> load_toml(std::string_view text, const std::string& origin);
  expected<void> load_toml_file(const std::string& path);
  // Every RILL_* variable of `environment` ("NAME=value" strings, as in environ).
  // RILL_* variables are keys (RILL_NETWORK_TCP_ADDRESS); an unknown one is an error, except the rill CLI's own
  // (client_environment_names), which a shell may export for both programs.
  expected<void> load_environment(const std::vector<std::string>& environment);
  // One key from a flag or an override, e.g. set("network.tcp_address", "0.0.0.0:9420", "--tcp").
  expected<void> set(std::string_view key, std::string_view value, const std::string& origin);
  // Cross-key checks (storage limits together; a members list that names this node, with distinct ids and
  // addresses, and a cluster id); the finished config.
  expected<server_config> build() const;

 private:
  server_config config_;
};

// The effective configuration as TOML, for <data>/runtime/current_config.toml: every key with its value, secrets
// left out. The server passes the config with the addresses it actually bound (port 0 replaced by the real port).
std::string render_toml(const server_config& c);

}  // namespace rill::config
