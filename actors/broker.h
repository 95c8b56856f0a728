#pragma once
// broker: one rilld: its data directory, shard runtime, metadata actor, partitions and client listener. Start it,
// use it, stop it: stop() stops accepting, lets the connections finish their in-flight requests, syncs and closes
// every partition and the metadata log, then stops the shards. CAF-free header.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/expected.h"
#include "config/address.h"
#include "config/server_config.h"

namespace rill::actors {

// What `rilld format` or `rilld recover` wrote into a data directory (consensus/node_identity.h).
struct format_result {
  std::uint64_t cluster_id = 0;
  std::uint64_t node_id = 0;
  std::vector<std::uint64_t> members;
  bool recovering = false;
};

class broker {
 public:
  // Boots from a validated config, in phases (docs/operations.md, "Start-up phases"):
  //   1. validate: the CPU allocation against the machine; nothing is touched.
  //   2. claim: <data>/runtime/ is created, <data>/runtime/lock taken (one rilld per data directory), <data>/identity
  //      checked against the cluster keys (another cluster, node or members list is refused by name; a member of a
  //      cluster never starts from an unformatted directory), the client and the monitoring listener bound (each
  //      retried while its address is in use: net/listen.h). A failure removes what this start created (the lock
  //      file, the directories), so the data directory is left as it was.
  //   3. recover: the shards start, the metadata and every partition are recovered; then the effective config is
  //      written to <data>/runtime/current_config.toml. A failure leaves what recovery wrote (valid state).
  //   4. accept: both listeners start accepting. Nothing fails after this, so no client is ever answered by a start
  //      that fails; connections made during phases 2 and 3 wait in the kernel's queue.
  // Errors say what failed (the key and address in use, the locked directory, the recovery problem).
  static expected<std::unique_ptr<broker>> start(config::server_config config);
  // `rilld format` (recover = false: a node of a new cluster, or a node alone) and `rilld recover` (a member whose
  // data was lost): takes the data directory's lock and writes <data>/identity. Refused for a directory that has an
  // identity, or data without one, and (recover) without members or a cluster id; the message says why.
  static expected<format_result> format(const config::server_config& config, bool recover);
  ~broker();  // stop() if not stopped

  // The address the client listener actually bound (port 0 in the config becomes a real port).
  [[nodiscard]] const config::address& tcp_address() const noexcept;
  // The address of the monitoring listener (/metrics, /healthz, /api/...; docs/monitoring.md).
  [[nodiscard]] const config::address& http_address() const noexcept;
  [[nodiscard]] std::size_t shards() const noexcept;
  void stop();

 private:
  struct impl;
  explicit broker(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace rill::actors
