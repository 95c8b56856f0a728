#pragma once
// rill_driver: the load harness's driver for rill itself, through the client library (net/client.h).
//
// Units: stream `<prefix>-<s>`, topic `bench` with --partitions partitions; unit u = (u / partitions, u % partitions).
// Producers build one record batch per send (idempotent: producer id and sequence per partition, zstd when asked)
// and send it as one produce request. Consumers poll each of their partitions from offset 0 with the OFFSET
// strategy, check every batch's CRC as a client must, and walk its records without copying them.
//
// Durability: --sync before-ack creates the topic with DURABILITY_SYNC_BEFORE_ACK (acknowledged after the fdatasync
// that covers the batch); --sync none with DURABILITY_EVERY_MS and sync_every_ms 1000 (acknowledged once written;
// at most a second unsynced, like Redis's appendfsync everysec; a background fdatasync runs back to back while data
// is unsynced, and consumers see a batch once it is synced, so end-to-end latency includes about one fdatasync).
#include <memory>

#include "tools/load/load.h"

namespace rill::bench {

std::unique_ptr<system_driver> make_rill_driver(const load_options& options);

}  // namespace rill::bench
