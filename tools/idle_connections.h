#pragma once
// idle_connections: `rill-bench idle-connections`, the memory a running rilld spends per idle client connection.
//
// Opens `connections` TCP connections to the server and leaves them idle, waits until the server's rill_connections
// gauge (its /metrics on the monitoring listener) counts every one of them, and reads the server's resident memory
// (VmRSS of /proc/PID/status, so the server must run on this machine) before and after. Then, with --ping, sends one
// ping on every connection, reads every reply, lets them go idle again and reads the memory once more: what a
// connection keeps after it served a request. The figure is (RSS after - RSS before) / connections; kernel socket
// memory is not in it (it is not the process's).
//
// Raises the soft RLIMIT_NOFILE to the hard limit first; the server's own limits (its RLIMIT_NOFILE and
// network.connections_max) must admit `connections` more.
#include <cstdint>
#include <string>

namespace rill::bench {

struct idle_connections_options {
  std::string server;   // HOST:PORT of rilld's client listener
  std::string monitor;  // HOST:PORT of its monitoring listener
  int pid = 0;          // rilld's process id
  std::uint32_t connections = 1000;
  bool ping = false;
  double accept_timeout_s = 120;
  bool json = false;
};

// Runs the measurement and prints it; returns the process exit code (0, or 1 with a message on stderr).
int run_idle_connections(const idle_connections_options& o);

}  // namespace rill::bench
