// cluster_report: /api/cluster and the cluster's /metrics lines (see the header).
#include "actors/cluster_report.h"

#include <nlohmann/json.hpp>

#include <fmt/core.h>

namespace rill::actors {

std::string render_cluster_json(const proto::ClusterStatusReply& s) {
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& p : s.peers()) {
    peers.push_back({{"node_id", p.node_id()},
                     {"replica_address", p.replica_address()},
                     {"client_address", p.client_address()},
                     {"connected", p.connected()},
                     {"last_error", p.last_error()},
                     {"bytes_sent", p.bytes_sent()},
                     {"bytes_received", p.bytes_received()},
                     {"messages_sent", p.messages_sent()},
                     {"messages_received", p.messages_received()},
                     {"connects", p.connects()},
                     {"refused", p.refused()},
                     {"heartbeats_dropped", p.heartbeats_dropped()},
                     {"queued_bytes", p.queued_bytes()}});
  }
  return nlohmann::json{{"cluster_id", s.cluster_id()},
                        {"node_id", s.node_id()},
                        {"role", s.role()},
                        {"view", s.view()},
                        {"log_view", s.log_view()},
                        {"op", s.op()},
                        {"commit", s.commit()},
                        {"commit_max", s.commit_max()},
                        {"checkpoint", s.checkpoint()},
                        {"primary_node", s.primary_node()},
                        {"view_changes", s.view_changes()},
                        {"client_address", s.client_address()},
                        {"partitions_led", s.partitions_led()},
                        {"under_replicated", s.under_replicated()},
                        {"peers", peers}}
      .dump();
}

std::string render_cluster_prometheus(const proto::ClusterStatusReply& s) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("rill_metadata_view", "gauge", "The view of this node's replica of the metadata group.");
  out += fmt::format("rill_metadata_view {}\n", s.view());
  family("rill_metadata_primary", "gauge", "1 when this node's replica is the metadata group's primary.");
  out += fmt::format("rill_metadata_primary {}\n", s.role() == "primary" || s.role() == "alone" ? 1 : 0);
  family("rill_metadata_op", "gauge", "The highest op in this node's metadata journal.");
  out += fmt::format("rill_metadata_op {}\n", s.op());
  family("rill_metadata_commit", "gauge", "The metadata ops this node has applied.");
  out += fmt::format("rill_metadata_commit {}\n", s.commit());
  family("rill_metadata_commit_lag", "gauge", "Ops known committed and not yet applied here.");
  out += fmt::format("rill_metadata_commit_lag {}\n", s.commit_max() - std::min(s.commit_max(), s.commit()));
  family("rill_metadata_view_changes_total", "counter", "Views this node's replica entered since rilld started.");
  out += fmt::format("rill_metadata_view_changes_total {}\n", s.view_changes());
  family("rill_node_partitions_led", "gauge", "Replicated partitions whose primary is this node.");
  out += fmt::format("rill_node_partitions_led {}\n", s.partitions_led());
  family("rill_node_under_replicated_partitions", "gauge",
         "Partitions this node leads that have a backup out of reach or behind (the cluster's count is the sum "
         "over its nodes: rill cluster status).");
  out += fmt::format("rill_node_under_replicated_partitions {}\n", s.under_replicated());
  if (s.peers_size() == 0) {
    return out;
  }
  struct series {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t (*value)(const proto::ClusterStatusReply::ClusterPeer&);
  };
  const series all[] = {
      {"rill_peer_connected", "gauge", "1 while the replica-plane connection to the peer is up.",
       [](const auto& p) -> std::uint64_t { return p.connected() ? 1 : 0; }},
      {"rill_peer_sent_bytes_total", "counter", "Bytes sent to the peer over the replica plane.",
       [](const auto& p) { return p.bytes_sent(); }},
      {"rill_peer_received_bytes_total", "counter", "Bytes received from the peer over the replica plane.",
       [](const auto& p) { return p.bytes_received(); }},
      {"rill_peer_sent_messages_total", "counter", "Messages (frames) sent to the peer.",
       [](const auto& p) { return p.messages_sent(); }},
      {"rill_peer_received_messages_total", "counter", "Messages (frames) received from the peer.",
       [](const auto& p) { return p.messages_received(); }},
      {"rill_peer_connects_total", "counter", "Connections to the peer established (a reconnect counts once more).",
       [](const auto& p) { return p.connects(); }},
      {"rill_peer_queue_bytes", "gauge", "Bytes queued for the peer.", [](const auto& p) { return p.queued_bytes(); }},
      {"rill_peer_refused_total", "counter", "Messages refused because the peer's queue was full.",
       [](const auto& p) { return p.refused(); }},
      {"rill_peer_heartbeats_dropped_total", "counter", "Heartbeats dropped because the peer's queue was full.",
       [](const auto& p) { return p.heartbeats_dropped(); }},
  };
  for (const auto& f : all) {
    family(f.name, f.type, f.help);
    for (const auto& p : s.peers()) {
      out += fmt::format("{}{{peer=\"{}\"}} {}\n", f.name, p.node_id(), f.value(p));
    }
  }
  return out;
}

}  // namespace rill::actors
