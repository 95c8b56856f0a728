#pragma once
// snapshot_file: snapshot.bin, where a replica's checkpoints live (the state machine and the client table as of
// an applied op), on io::engine like the journal.
//
// Layout: two regions of snapshot_bytes_max bytes each. The file is sparse, but the first `reserved` bytes of each
// region are allocated (fallocate) at open, and after each checkpoint write the reservation of both regions grows to
// twice the checkpoint's size when it is below that (best effort): checkpoints are written into reserved space, so
// a full data disk does not stop the metadata (a checkpoint larger than the reservation may still fail there).
// A checkpoint is written whole into the region the superblock does not name, synced, and only then named by the
// superblock (vsr_state::checkpoint: slot, size, checksum). So a crash at any point leaves the named checkpoint
// intact: either the superblock still names the old region, untouched, or it names the new one, synced before.
//
// Its descriptor is a storage::cached_file (journal.h, Descriptors), pinned around each operation.
//
// Invariants: a write never touches the other region; read() returns bytes only when their XXH3-128 matches the
// checksum the superblock recorded (errors: corrupt_data).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "consensus/types.h"
#include "storage/file_cache.h"
#include "storage/io/engine.h"

namespace rill::consensus {

inline constexpr std::uint64_t snapshot_bytes_max_limit = std::uint64_t{1} << 32;  // 4 GiB per region
inline constexpr std::uint64_t snapshot_bytes_min = 4096;
static_assert(snapshot_bytes_min <= snapshot_bytes_max_limit);

class snapshot_file {
 public:
  // Opens dir/snapshot.bin (created, with the directory synced, when `create` and missing). Errors: invalid_argument
  // for bytes_max outside 4 KiB..4 GiB; I/O errors.
  // `reserved` (<= bytes_max): what open() reserves of each region. Reservation failures are not errors (a disk
  // full at open keeps what it has; reserved_bytes() tells).
  static task<expected<std::unique_ptr<snapshot_file>>> open(storage::io::engine& e, std::string dir,
                                                             std::uint64_t bytes_max, bool create,
                                                             std::uint64_t reserved = 0,
                                                             storage::file_cache* files = nullptr);
  ~snapshot_file();

  // Writes `bytes` into region `slot` (0 or 1) and fdatasyncs. Errors: invalid_argument when it does not fit.
  task<expected<void>> write(std::uint8_t slot, std::span<const std::byte> bytes);
  task<expected<std::vector<std::byte>>> read(std::uint8_t slot, std::uint64_t size, checksum_t checksum);
  task<expected<void>> close();

  [[nodiscard]] std::uint64_t bytes_max() const noexcept { return bytes_max_; }
  // Bytes of each region known to be reserved.
  [[nodiscard]] std::uint64_t reserved_bytes() const noexcept { return reserved_; }

 private:
  // Grows the reservation of both regions to `bytes` (at most bytes_max); keeps the old one when that fails.
  task<void> reserve(std::uint64_t bytes);

  snapshot_file(storage::io::engine& e, std::string path, std::uint64_t bytes_max)
      : engine_(&e), path_(std::move(path)), bytes_max_(bytes_max) {}

  storage::io::engine* engine_;
  std::string path_;
  std::uint64_t bytes_max_;
  std::unique_ptr<storage::file_cache> own_files_;  // (declared before file_: it outlives it)
  storage::cached_file file_;
  std::uint64_t reserved_ = 0;
};

}  // namespace rill::consensus
