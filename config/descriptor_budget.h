#pragma once
// descriptor_budget: the file descriptors rilld's configured limits imply, and the process limit they must fit.
// At start rilld raises its soft RLIMIT_NOFILE to the hard limit (logging both), then refuses to start when
// network.connections_max plus limits.open_files_max (plus a fixed reserve) exceed it: a node that would run out of
// descriptors under load refuses up front, naming the keys and the figures, rather than fail later with "Too many
// open files" in the middle of a write (issue 13).
//
// What is counted: one descriptor per connection; limits.open_files_max for the partitions' storage files (each
// shard's file_cache keeps its share, closing idle files beyond it: an idle partition holds none, whatever the
// number of its segments); descriptors_reserved for everything else (listeners, the metadata journal and
// superblock, io_uring rings and eventfds per shard, HTTP connections, consumer offset files being replaced, the
// group actors' files while they write). Not counted: storage files with I/O in flight or unsynced writes, which the
// caches never close, beyond the limit (a burst of writes to more partitions than the limit, under a relaxed
// durability policy); partition_descriptors is what one written partition holds at most besides sealed segments.
#include <cstdint>

#include "base/expected.h"
#include "config/server_config.h"

namespace rill::config {

inline constexpr std::uint64_t partition_descriptors = 4;
inline constexpr std::uint64_t descriptors_reserved = 512;

// The descriptors `c` may make rilld hold.
[[nodiscard]] std::uint64_t descriptors_needed(const server_config& c) noexcept;

// Plain: do `c`'s limits fit `descriptors_limit`? Error out_of_range naming network.connections_max,
// limits.partitions_max, the figures and the limit.
expected<void> check_descriptor_budget(const server_config& c, std::uint64_t descriptors_limit);

struct descriptor_limit {
  std::uint64_t soft_before = 0;
  std::uint64_t soft = 0;  // after raising it
  std::uint64_t hard = 0;
};
// Raises this process's soft RLIMIT_NOFILE to its hard limit (capped at what the kernel takes: nr_open). Error
// bad_value when getrlimit or setrlimit fail.
expected<descriptor_limit> raise_descriptor_limit();

// Boot: raise_descriptor_limit, log the figures on stderr (at logging.level info or below), then
// check_descriptor_budget against the raised soft limit.
expected<void> fit_descriptor_budget(const server_config& c);

}  // namespace rill::config
