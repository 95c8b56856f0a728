#define BOOST_TEST_MODULE rill_config
#include <boost/test/unit_test.hpp>

#include <set>

#include "config/address.h"
#include "config/cpu_allocation.h"
#include "config/descriptor_budget.h"
#include "config/errc.h"
#include "config/server_config.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::config;

namespace {
std::string error_of(const expected<void>& r) {
  return r ? std::string() : r.error().detail();
}
template <class T>
std::string error_of(const expected<T>& r) {
  return r ? std::string() : r.error().detail();
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Two NUMA nodes, four cores each, two hyperthreads per core: CPUs 0-7 on node 0 (core k has CPUs k and k+4),
// 8-15 on node 1.
machine_topology big_machine() {
  machine_topology t;
  for (unsigned cpu = 0; cpu < 16; ++cpu) {
    const unsigned node = cpu / 8;
    const unsigned core = node * 4 + (cpu % 4);
    t.cpus.push_back(cpu_info{cpu, core, static_cast<int>(node)});
  }
  return t;
}

std::vector<unsigned> os_indexes(const std::vector<cpu_info>& cpus) {
  std::vector<unsigned> out;
  for (const auto& c : cpus) {
    out.push_back(c.os_index);
  }
  return out;
}
}  // namespace

BOOST_AUTO_TEST_CASE(defaults_build_and_every_key_is_documented) {
  config_builder b;
  auto c = b.build();
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->tcp_address.port == 9420);
  BOOST_TEST(c->http_address.port == 9421);
  BOOST_TEST(c->data_dir == "./rill-data");
  BOOST_TEST(c->pin_cores);
  auto keys = describe_keys();
  BOOST_TEST(keys.size() >= 25u);
  std::set<std::string> envs;
  for (const auto& k : keys) {
    BOOST_TEST(!k.description.empty(), k.key);
    BOOST_TEST(!k.default_text.empty(), k.key);
    BOOST_TEST(envs.insert(k.env).second, k.env);
  }
}

BOOST_AUTO_TEST_CASE(toml_file_sets_keys_and_errors_name_key_origin_and_range) {
  config_builder b;
  RILL_REQUIRE_OK(b.load_toml(R"(
[server]
data_dir = "/var/lib/rill"
[network]
tcp_address = "0.0.0.0:19420"
max_frame_bytes = 1048576
[runtime]
pin_cores = false
cpu_allocation = "0..1"
[storage]
durability = "every_ms"
sync_every_ms = 20
[logging]
level = "debug"
)",
                              "rill.toml"));
  auto c = b.build();
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->data_dir == "/var/lib/rill");
  BOOST_TEST(c->tcp_address.host == "0.0.0.0");
  BOOST_TEST(c->tcp_address.port == 19420);
  BOOST_TEST(c->max_frame_bytes == 1048576u);
  BOOST_TEST(!c->pin_cores);
  BOOST_TEST(c->cpu_allocation == "0..1");
  BOOST_TEST((c->storage.durability == durability_mode::every_ms));
  BOOST_TEST(c->storage.sync_every_ms == 20u);
  BOOST_TEST((c->level == log_level::debug));

  config_builder u;
  auto unknown = u.load_toml("[network]\nmax_frame_bites = 10\n", "rill.toml");
  BOOST_TEST(contains(error_of(unknown), "network.max_frame_bites"));
  BOOST_TEST(contains(error_of(unknown), "unknown key"));
  BOOST_TEST(contains(error_of(unknown), "line 2"));
  BOOST_TEST((unknown.error().code() == errc::unknown_key));

  config_builder r;
  auto range = r.load_toml("[network]\nmax_frame_bytes = 10\n", "rill.toml");
  BOOST_TEST(contains(error_of(range), "network.max_frame_bytes = 10"));
  BOOST_TEST(contains(error_of(range), "[4096, 268435456]"));
  BOOST_TEST(contains(error_of(range), "rill.toml line 2"));

  config_builder t;
  auto type = t.load_toml("[runtime]\npin_cores = \"yes\"\n", "rill.toml");
  BOOST_TEST(contains(error_of(type), "runtime.pin_cores"));
  BOOST_TEST(contains(error_of(type), "true or false"));

  config_builder ch;
  auto choice = ch.load_toml("[storage]\ndurability = \"sometimes\"\n", "rill.toml");
  BOOST_TEST(contains(error_of(choice), "sync_before_ack|every_records|every_ms"));

  config_builder top;
  BOOST_TEST(contains(error_of(top.load_toml("max_frame_bytes = 1\n", "rill.toml")), "section"));
  config_builder syntax;
  BOOST_TEST(contains(error_of(syntax.load_toml("[network\n", "rill.toml")), "rill.toml line 1"));
  config_builder addr;
  BOOST_TEST(contains(error_of(addr.load_toml("[network]\ntcp_address = \"localhost\"\n", "f")), "no port"));
  config_builder cpu;
  BOOST_TEST(
      contains(error_of(cpu.load_toml("[runtime]\ncpu_allocation = \"lots\"\n", "f")), "runtime.cpu_allocation"));
}

BOOST_AUTO_TEST_CASE(layers_apply_in_order_file_environment_flags) {
  config_builder b;
  RILL_REQUIRE_OK(b.load_toml("[network]\nmax_frame_bytes = 100000\nconnections_max = 5\n", "file"));
  RILL_REQUIRE_OK(
      b.load_environment({"PATH=/usr/bin", "RILL_NETWORK_MAX_FRAME_BYTES=200000", "RILL_RUNTIME_PIN_CORES=false"}));
  RILL_REQUIRE_OK(b.set("network.max_frame_bytes", "300000", "--set"));
  auto c = b.build();
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->max_frame_bytes == 300000u);  // flag over environment over file
  BOOST_TEST(c->connections_max == 5u);       // file over default
  BOOST_TEST(!c->pin_cores);                  // environment over default

  config_builder e;
  auto unknown = e.load_environment({"RILL_NETWORK_MAX_FRAME=1"});
  BOOST_TEST(contains(error_of(unknown), "RILL_NETWORK_MAX_FRAME"));
  // The CLI's variables (RILL_SERVER and the rest), exported in the same shell, do not stop rilld.
  config_builder cli_env;
  RILL_REQUIRE_OK(cli_env.load_environment(
      {"RILL_SERVER=10.0.0.1:9420", "RILL_CONTEXT=prod", "RILL_HTTP=a:1", "RILL_CLI_CONFIG=/tmp/cli.toml"}));
  config_builder n;
  auto nan = n.load_environment({"RILL_NETWORK_CONNECTIONS_MAX=many"});
  BOOST_TEST(contains(error_of(nan), "network.connections_max = 'many'"));
  BOOST_TEST(contains(error_of(nan), "environment RILL_NETWORK_CONNECTIONS_MAX"));
  config_builder f;
  BOOST_TEST(contains(error_of(f.set("network.nope", "1", "--set")), "unknown key"));
}

BOOST_AUTO_TEST_CASE(cross_key_checks_name_the_key) {
  config_builder b;
  RILL_REQUIRE_OK(b.set("storage.flush_bytes_max", "1048576", "--set"));
  RILL_REQUIRE_OK(b.set("storage.pending_bytes_max", "65536", "--set"));
  auto c = b.build();
  BOOST_TEST(contains(error_of(c), "storage.pending_bytes_max"));
}

BOOST_AUTO_TEST_CASE(rendered_config_loads_back_to_the_same_values) {
  config_builder b;
  RILL_REQUIRE_OK(b.set("network.tcp_address", "[::1]:7000", "--tcp"));
  RILL_REQUIRE_OK(b.set("server.data_dir", "/tmp/with \"quotes\"", "--data-dir"));
  RILL_REQUIRE_OK(b.set("storage.retention_ms", "86400000", "--set"));
  auto c = b.build();
  RILL_REQUIRE_OK(c);
  const std::string text = render_toml(*c);
  config_builder again;
  RILL_REQUIRE_OK(again.load_toml(text, "current_config.toml"));
  auto d = again.build();
  RILL_REQUIRE_OK(d);
  BOOST_TEST(render_toml(*d) == text);
  BOOST_TEST(d->tcp_address.host == "::1");
  BOOST_TEST(d->data_dir == "/tmp/with \"quotes\"");
}

BOOST_AUTO_TEST_CASE(addresses) {
  auto a = parse_address("127.0.0.1:9420");
  RILL_REQUIRE_OK(a);
  BOOST_TEST(a->to_string() == "127.0.0.1:9420");
  auto v6 = parse_address("[::1]:0");
  RILL_REQUIRE_OK(v6);
  BOOST_TEST(v6->host == "::1");
  BOOST_TEST(v6->to_string() == "[::1]:0");
  BOOST_TEST(!parse_address("::1:9420").has_value());
  BOOST_TEST(!parse_address("host:70000").has_value());
  BOOST_TEST(!parse_address(":9420").has_value());
  BOOST_TEST(!parse_address("host:").has_value());
}

BOOST_AUTO_TEST_CASE(cpu_allocation_forms_resolve_on_a_two_node_machine) {
  const auto topo = big_machine();
  auto resolve = [&](const char* text) {
    auto spec = parse_cpu_allocation(text);
    BOOST_REQUIRE_MESSAGE(spec.has_value(), text);
    return resolve_cpu_allocation(*spec, topo);
  };
  BOOST_TEST(resolve("all")->size() == 16u);
  BOOST_TEST(os_indexes(*resolve("3")) == (std::vector<unsigned>{0, 1, 2}));
  BOOST_TEST(os_indexes(*resolve("4..6")) == (std::vector<unsigned>{4, 5, 6}));
  BOOST_TEST(resolve("numa:auto")->size() == 16u);
  BOOST_TEST(os_indexes(*resolve("numa:nodes=1;cores=2")) == (std::vector<unsigned>{8, 9}));
  // no_ht: one CPU per physical core (CPU 4 shares core 0 with CPU 0).
  BOOST_TEST(os_indexes(*resolve("numa:nodes=0;no_ht=true")) == (std::vector<unsigned>{0, 1, 2, 3}));
  BOOST_TEST(os_indexes(*resolve("numa:nodes=0,1;cores=2;no_ht=true")) == (std::vector<unsigned>{0, 1, 8, 9}));
  // Out of range on this machine: errors say what exists.
  BOOST_TEST(contains(error_of(resolve("17")), "16 CPUs"));
  BOOST_TEST(contains(error_of(resolve("14..20")), "CPU 16 does not exist"));
  BOOST_TEST(contains(error_of(resolve("numa:nodes=2")), "NUMA node 2"));
  BOOST_TEST(contains(error_of(resolve("numa:nodes=0;cores=5;no_ht=true")), "only 4"));
  // Grammar errors.
  for (const char* bad : {"", "0", "5..3", "a..b", "numa:", "numa:nodes=", "numa:cores=0", "numa:no_ht=maybe",
                          "numa:nodes=1;nodes=2", "numa:foo=1", "numa:nodes"}) {
    BOOST_TEST(!parse_cpu_allocation(bad).has_value(), "'" << bad << "'");
  }
}

BOOST_AUTO_TEST_CASE(this_machine_topology_is_detected) {
  std::string note;
  const auto topo = machine_topology::detect(&note);
  BOOST_TEST(!topo.cpus.empty());
  auto all = resolve_cpu_allocation(*parse_cpu_allocation("all"), topo);
  RILL_REQUIRE_OK(all);
  BOOST_TEST(all->size() == topo.cpus.size());
}

BOOST_AUTO_TEST_CASE(limits_keys_are_ranged_and_the_descriptor_budget_names_its_keys) {
  config_builder b;
  RILL_REQUIRE_OK(b.load_toml("[limits]\npartitions_max = 2000\nstreams_max = 5\nopen_files_max = 3000\n", "file"));
  auto c = b.build();
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->limits.partitions_max == 2000u);
  BOOST_TEST(c->limits.streams_max == 5u);
  BOOST_TEST(render_toml(*c).find("[limits]\nstreams_max = 5\n") != std::string::npos);
  auto too_many = b.set("limits.topics_per_stream_max", "4097", "--set");
  BOOST_REQUIRE(!too_many.has_value());
  BOOST_TEST(too_many.error().detail().find("[1, 4096]") != std::string::npos, too_many.error().detail());
  BOOST_TEST(!b.set("limits.partitions_per_topic_max", "0", "--set").has_value());
  BOOST_TEST(c->limits.open_files_max == 3000u);
  auto too_few = b.set("limits.open_files_max", "15", "--set");
  BOOST_REQUIRE(!too_few.has_value());
  BOOST_TEST(too_few.error().detail().find("limits.open_files_max") != std::string::npos, too_few.error().detail());
  BOOST_TEST(too_few.error().detail().find("[16, 10000000]") != std::string::npos, too_few.error().detail());

  // 10,000 connections + 3,000 storage files (whatever the partitions: idle ones hold none) + the reserve.
  const std::uint64_t needed = 10'000 + 3'000 + descriptors_reserved;
  BOOST_TEST(descriptors_needed(*c) == needed);
  RILL_REQUIRE_OK(check_descriptor_budget(*c, needed));
  auto refused = check_descriptor_budget(*c, needed - 1);
  BOOST_REQUIRE(!refused.has_value());
  const std::string why = refused.error().detail();
  BOOST_TEST(why.find("network.connections_max = 10000") != std::string::npos, why);
  BOOST_TEST(why.find("limits.open_files_max = 3000") != std::string::npos, why);
  BOOST_TEST(why.find(std::to_string(needed - 1)) != std::string::npos, why);
  // Raising the soft limit to the hard one.
  auto raised = raise_descriptor_limit();
  RILL_REQUIRE_OK(raised);
  BOOST_TEST(raised->soft == raised->hard);
  BOOST_TEST(raised->soft >= raised->soft_before);
}

BOOST_AUTO_TEST_CASE(monitoring_series_keys_take_0_to_their_limit_and_name_key_and_range) {
  const server_config defaults;
  BOOST_TEST(defaults.partition_series_max == 1'000u);
  BOOST_TEST(defaults.actor_series_max == 1'000u);
  struct key {
    const char* name;
    std::uint64_t limit;
    std::uint64_t server_config::*field;
  };
  for (const key k :
       {key{"monitoring.partition_series_max", partition_series_limit, &server_config::partition_series_max},
        key{"monitoring.actor_series_max", actor_series_limit, &server_config::actor_series_max}}) {
    const std::string name = k.name;
    const std::string leaf = name.substr(name.find('.') + 1);
    for (const std::uint64_t v : {std::uint64_t{0}, std::uint64_t{7}, k.limit}) {
      config_builder b;
      RILL_REQUIRE_OK(b.load_toml("[monitoring]\n" + leaf + " = " + std::to_string(v) + "\n", "rill.toml"));
      auto c = b.build();
      RILL_REQUIRE_OK(c);
      BOOST_TEST(((*c).*k.field == v), name);
      // And back through the rendered file.
      config_builder again;
      RILL_REQUIRE_OK(again.load_toml(render_toml(*c), "current_config.toml"));
      const auto loaded = again.build();
      RILL_REQUIRE_OK(loaded);
      BOOST_TEST(((*loaded).*k.field == v), name);
    }
    const std::string range = "allowed is an integer in [0, " + std::to_string(k.limit) + "]";
    config_builder file;
    const auto above = file.load_toml("[monitoring]\n" + leaf + " = " + std::to_string(k.limit + 1) + "\n", "f");
    BOOST_TEST(contains(error_of(above), name + " = " + std::to_string(k.limit + 1)), error_of(above));
    BOOST_TEST(contains(error_of(above), range), error_of(above));
    BOOST_TEST((above.error().code() == errc::out_of_range));
    config_builder negative;
    BOOST_TEST(contains(error_of(negative.load_toml("[monitoring]\n" + leaf + " = -1\n", "f")), range));
    config_builder env;
    std::string env_name = "RILL_MONITORING_" + leaf;
    for (auto& c : env_name) {
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    const auto from_env = env.load_environment({env_name + "=" + std::to_string(k.limit + 1)});
    BOOST_TEST(contains(error_of(from_env), name), error_of(from_env));
    BOOST_TEST(contains(error_of(from_env), range), error_of(from_env));
    config_builder flag;
    BOOST_TEST(contains(error_of(flag.set(name, "some", "--set")), name + " = 'some'"));
  }
}

BOOST_AUTO_TEST_CASE(booleans_are_exactly_true_or_false_everywhere) {
  std::size_t booleans = 0;
  for (const auto& k : describe_keys()) {
    if (k.type != "boolean") {
      continue;
    }
    ++booleans;
    BOOST_TEST(k.allowed == "true or false");
    for (const char* spelling : {"true", "false"}) {
      config_builder ok;
      RILL_REQUIRE_OK(ok.set(k.key, spelling, "--set " + k.key));
      config_builder env;
      RILL_REQUIRE_OK(env.load_environment({k.env + "=" + spelling}));
      const auto section = k.key.substr(0, k.key.find('.'));
      config_builder file;
      RILL_REQUIRE_OK(file.load_toml("[" + section + "]\n" + k.key.substr(section.size() + 1) + " = " + spelling + "\n",
                                     "rill.toml"));
    }
    for (const char* spelling : {"yes", "no", "1", "0", "on", "off", "TRUE", "True", "", " true"}) {
      config_builder flag;
      const auto bad = flag.set(k.key, spelling, "--set " + k.key);
      BOOST_TEST(contains(error_of(bad), k.key + " = '" + spelling + "'"), k.key << " took '" << spelling << "'");
      BOOST_TEST(contains(error_of(bad), "allowed is true or false"));
      config_builder env;
      const auto from_env = env.load_environment({k.env + "=" + spelling});
      BOOST_TEST(contains(error_of(from_env), k.key), k.env << " took '" << spelling << "'");
      BOOST_TEST(contains(error_of(from_env), "true or false"));
    }
    const auto section = k.key.substr(0, k.key.find('.'));
    config_builder file;
    const auto text = file.load_toml("[" + section + "]\n" + k.key.substr(section.size() + 1) + " = \"yes\"\n", "f");
    BOOST_TEST(contains(error_of(text), k.key));
    BOOST_TEST(contains(error_of(text), "true or false"));
  }
  BOOST_TEST(booleans >= 3u);  // runtime.pin_cores, runtime.actor_metrics, debug.failure_injection
}

BOOST_AUTO_TEST_CASE(an_empty_data_dir_is_refused_by_name) {
  config_builder flag;
  const auto bad = flag.set("server.data_dir", "", "--data-dir");
  BOOST_TEST(contains(error_of(bad), "server.data_dir = '' (from --data-dir)"));
  BOOST_TEST(contains(error_of(bad), "a non-empty path"));
  config_builder env;
  BOOST_TEST(contains(error_of(env.load_environment({"RILL_SERVER_DATA_DIR="})), "server.data_dir"));
  config_builder file;
  BOOST_TEST(contains(error_of(file.load_toml("[server]\ndata_dir = \"\"\n", "f")), "server.data_dir"));
}

BOOST_AUTO_TEST_CASE(cluster_keys_from_a_file_the_environment_and_flags_and_what_a_members_list_must_hold) {
  // A TOML array of members, and the same as one comma-separated string from the environment and --set.
  config_builder file;
  RILL_REQUIRE_OK(file.load_toml(
      "[cluster]\nid = 77\nnode_id = 2\nmembers = [\"1@127.0.0.1:9422\", \"2@127.0.0.1:9432\", \"3@[::1]:9442\"]\n"
      "[network]\nreplica_address = \"0.0.0.0:9432\"\nadvertised_address = \"rill-2.example:9420\"\n",
      "rill.toml"));
  auto c = file.build();
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->cluster_id == 77u);
  BOOST_TEST(c->node_id == 2u);
  BOOST_REQUIRE(c->members.size() == 3u);
  BOOST_TEST(c->members[2].node_id == 3u);
  BOOST_TEST(c->members[2].replica_address.host == "::1");
  BOOST_TEST(c->replica_address.port == 9432);
  BOOST_TEST(c->advertised_address.host == "rill-2.example");
  // Rendered and loaded back.
  config_builder again;
  RILL_REQUIRE_OK(again.load_toml(render_toml(*c), "current_config.toml"));
  auto d = again.build();
  RILL_REQUIRE_OK(d);
  BOOST_TEST((d->members == c->members));
  BOOST_TEST(render_toml(*d) == render_toml(*c));
  config_builder env;
  RILL_REQUIRE_OK(env.load_environment({"RILL_CLUSTER_ID=5", "RILL_CLUSTER_NODE_ID=1",
                                        "RILL_CLUSTER_MEMBERS=1@127.0.0.1:9422,2@127.0.0.1:9432,3@127.0.0.1:9442"}));
  auto e = env.build();
  RILL_REQUIRE_OK(e);
  BOOST_TEST(e->members.size() == 3u);
  BOOST_TEST(members_text(e->members) == "1@127.0.0.1:9422,2@127.0.0.1:9432,3@127.0.0.1:9442");
  // Defaults: a node alone, the replica plane on 9422, no advertised address.
  auto defaults = config_builder{}.build();
  RILL_REQUIRE_OK(defaults);
  BOOST_TEST(defaults->members.empty());
  BOOST_TEST(defaults->replica_address.to_string() == "127.0.0.1:9422");
  BOOST_TEST(defaults->advertised_address.host.empty());

  // Every refusal names the key, the value and what is allowed.
  auto refused = [](std::initializer_list<std::pair<std::string, std::string>> sets) {
    config_builder b;
    for (const auto& [k, v] : sets) {
      if (auto r = b.set(k, v, "--set " + k); !r) {
        return error_of(r);
      }
    }
    return error_of(b.build());
  };
  const std::string three = "1@127.0.0.1:9422,2@127.0.0.1:9432,3@127.0.0.1:9442";
  BOOST_TEST(contains(refused({{"cluster.members", "1@127.0.0.1"}}), "cluster.members (from --set cluster.members)"));
  BOOST_TEST(contains(refused({{"cluster.members", "x@127.0.0.1:9422"}}), "the node id must be an integer"));
  BOOST_TEST(contains(refused({{"cluster.members", "127.0.0.1:9422"}}), "expected ID@HOST:PORT"));
  BOOST_TEST(contains(refused({{"cluster.members", "1@127.0.0.1:0"}}), "needs its port"));
  BOOST_TEST(contains(refused({{"cluster.members", "1@h:1,2@h:2,3@h:3,4@h:4,5@h:5,6@h:6,7@h:7"}}),
                      "7 members; allowed is at most 6"));
  BOOST_TEST(contains(refused({{"cluster.id", "9"}, {"cluster.members", "1@h:1,1@h:2"}}), "node id 1 is listed twice"));
  BOOST_TEST(
      contains(refused({{"cluster.id", "9"}, {"cluster.members", "1@h:1,2@h:1"}}), "address h:1 is listed twice"));
  BOOST_TEST(contains(refused({{"cluster.id", "9"}, {"cluster.node_id", "4"}, {"cluster.members", three}}),
                      "cluster.node_id = 4: not one of cluster.members"));
  BOOST_TEST(contains(refused({{"cluster.members", three}}), "cluster.id = 0: a cluster of 3 members needs its id"));
  // Groups of two deadlock after a lost disk (issue 38, finding 7): two members, or a default factor of 2, are refused
  // with the reason.
  BOOST_TEST(contains(refused({{"cluster.id", "9"}, {"cluster.members", "1@127.0.0.1:9422,2@127.0.0.1:9432"}}),
                      "a cluster of two members is refused"));
  BOOST_TEST(contains(refused({{"cluster.id", "9"}, {"cluster.members", three}, {"cluster.replication_factor", "2"}}),
                      "cluster.replication_factor = 2 is refused: a group of two needs both replicas"));
  // A replicated partition's checkpoint holds its producers and consumers (issue 38, finding 4): limits that
  // together would pass its budget are refused in a cluster, naming both keys; each alone is within its range.
  BOOST_TEST(contains(refused({{"cluster.id", "9"},
                               {"cluster.node_id", "1"},
                               {"cluster.members", three},
                               {"limits.producers_per_partition_max", "400000"},
                               {"limits.consumers_per_partition_max", "100000"}}),
                      "limits.producers_per_partition_max = 400000 and limits.consumers_per_partition_max = 100000: a "
                      "replicated partition's checkpoint would hold up to"));
  BOOST_TEST(
      contains(refused({{"limits.producers_per_partition_max", "1000001"}}), "limits.producers_per_partition_max"));
  BOOST_TEST(contains(refused({{"storage.producer_expiry_ms", "999"}}), "storage.producer_expiry_ms"));
  {
    config_builder alone;  // a node alone keeps no checkpoint of its partitions: only each key's range holds
    RILL_REQUIRE_OK(alone.set("limits.producers_per_partition_max", "1000000", "--set"));
    RILL_REQUIRE_OK(alone.set("limits.consumers_per_partition_max", "1000000", "--set"));
    RILL_REQUIRE_OK(alone.set("storage.producer_expiry_ms", "3600000", "--set"));
    auto built = alone.build();
    RILL_REQUIRE_OK(built);
    BOOST_TEST(built->producer_expiry_ms == 3'600'000u);
    BOOST_TEST(built->limits.producers_per_partition_max == 1'000'000u);
  }
  // This node listens where the list says it is (a wildcard host with the listed port is fine).
  BOOST_TEST(contains(refused({{"cluster.id", "9"}, {"cluster.node_id", "2"}, {"cluster.members", three}}),
                      "network.replica_address = 127.0.0.1:9422: cluster.members lists node 2 at"));
  BOOST_TEST(
      contains(refused({{"cluster.node_id", "0"}}), "cluster.node_id = 0 (from --set cluster.node_id): allowed"));
  BOOST_TEST(contains(refused({{"network.advertised_address", "nohost"}}), "network.advertised_address"));
  config_builder bad_array;
  BOOST_TEST(contains(error_of(bad_array.load_toml("[cluster]\nmembers = [1, 2]\n", "f")), "cluster.members"));
}
