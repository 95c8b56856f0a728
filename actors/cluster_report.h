#pragma once
// cluster_report: a node's cluster status (proto::ClusterStatusReply, what the metadata actor knows of its replica of
// the metadata group and of its peers) as /api/cluster's JSON and as /metrics lines (docs/monitoring.md). Plain
// code; the metadata actor publishes the status on a cluster_board the HTTP thread reads.
//
// Invariants: every metric line has its HELP and TYPE; a peer's series carry its node id as the label `peer`, so
// the series are bounded by the members list (limits::cluster_members_limit).
#include <atomic>
#include <memory>
#include <string>

#include "net/proto/rill.pb.h"

namespace rill::actors {

// The latest status, published by the metadata actor (at its start, then every few ticks), read by any thread.
class cluster_board {
 public:
  [[nodiscard]] std::shared_ptr<const proto::ClusterStatusReply> current() const {
    return status_.load(std::memory_order_acquire);
  }
  void publish(std::shared_ptr<const proto::ClusterStatusReply> s) {
    status_.store(std::move(s), std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const proto::ClusterStatusReply>> status_{
      std::make_shared<const proto::ClusterStatusReply>()};
};

[[nodiscard]] std::string render_cluster_json(const proto::ClusterStatusReply& s);
[[nodiscard]] std::string render_cluster_prometheus(const proto::ClusterStatusReply& s);

}  // namespace rill::actors
