#pragma once
// broker: one rilld: its data directory, shard runtime, metadata actor, partitions and client listener. Start it,
// use it, stop it: stop() stops accepting, lets the connections finish their in-flight requests, syncs and closes
// every partition and the metadata log, then stops the shards. CAF-free header.
#include <memory>
#include <string>

#include "base/expected.h"
#include "config/address.h"
#include "config/server_config.h"

namespace rill::actors {

class broker {
 public:
  // Boots from a validated config: locks <data>/runtime/lock (one rilld per data directory), binds the client
  // listener, starts the shards, recovers the metadata and every partition, and writes the effective config to
  // <data>/runtime/current_config.toml. Errors say what failed (the address in use, the locked directory, ...).
  static expected<std::unique_ptr<broker>> start(config::server_config config);
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
