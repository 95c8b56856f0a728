#pragma once
// durable_floor: what this machine allows a durable produce with one batch in flight, with no broker in the way.
//
// Three figures, each measured for `duration_s` with two threads of this process:
// - loopback: round trips per second of a `bytes` request answered by a 32-byte reply over one loopback TCP
//   connection (TCP_NODELAY), the server thread reading the whole request before it replies;
// - append: pwrite of `bytes` at the end of a fresh file in `dir`, then fdatasync, back to back (what a log that
//   grows costs the file system: its size and allocation are journalled with each sync);
// - floor: the round trip in which the server thread appends the request to a fresh file and fdatasyncs it before
//   it replies. No broker can acknowledge more batches per second, durably, with one batch in flight per producer;
// - floor_prezeroed: the same over a file written with zeros and synced before timing (overwriting allocated, written
//   blocks needs no journal commit: the best case, for a broker that recycles old files).
// Used by bench/compare beside the peers (rill-bench durable-floor). Contract: writes at most 2 GiB under `dir`
// (removed afterwards); fails with a message on any system call error.
#include <cstdint>
#include <string>

#include "base/expected.h"

namespace rill::bench {

struct durable_floor_options {
  std::string dir;
  std::uint64_t bytes = 25'600;
  double duration_s = 3;
  bool json = false;
};

struct durable_floor_result {
  double loopback_per_s = 0;
  double append_per_s = 0;
  double floor_per_s = 0;
  double floor_prezeroed_per_s = 0;
};

expected<durable_floor_result> measure_durable_floor(const durable_floor_options& o);
// Runs the measurement and prints it (text, or one JSON object); the process exit status.
int run_durable_floor(const durable_floor_options& o);

}  // namespace rill::bench
