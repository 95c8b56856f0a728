#include "consensus/snapshot_file.h"

#include <fmt/core.h>

#include <algorithm>

#include "base/assert.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::consensus {

using storage::errc;
using storage::make_unexpected;

task<expected<std::unique_ptr<snapshot_file>>> snapshot_file::open(storage::io::engine& e, std::string dir,
                                                                   std::uint64_t bytes_max, bool create,
                                                                   std::uint64_t reserved, storage::file_cache* files) {
  if (bytes_max < snapshot_bytes_min || bytes_max > snapshot_bytes_max_limit) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("snapshot bytes_max {}: allowed is 4096..{}",
                                                                  bytes_max, snapshot_bytes_max_limit));
  }
  const std::string path = dir + "/snapshot.bin";
  std::unique_ptr<snapshot_file> f(new snapshot_file(e, path, bytes_max));
  if (files == nullptr) {
    f->own_files_ = std::make_unique<storage::file_cache>(storage::file_cache::files_unlimited);
    files = f->own_files_.get();
  }
  RILL_CO_TRY_VOID(co_await f->file_.create(e, *files, path, create ? storage::io::open_create : 0u, 0));
  RILL_ASSERT(f->bytes_max_ >= snapshot_bytes_min);
  RILL_ASSERT(f->bytes_max_ <= snapshot_bytes_max_limit);
  if (create) {
    RILL_CO_TRY_VOID(co_await storage::sync_dir(e, dir));
  }
  if (reserved > 0) {
    co_await f->reserve(std::min(reserved, bytes_max));
  }
  co_return f;
}

task<void> snapshot_file::reserve(std::uint64_t bytes) {
  RILL_ASSERT(bytes <= bytes_max_);
  if (bytes <= reserved_) {
    co_return;
  }
  auto pin = co_await file_.pin(*engine_);
  if (!pin) {
    co_return;  // (best effort, like a failed reservation)
  }
  for (std::uint8_t slot = 0; slot <= 1; ++slot) {
    auto r = co_await storage::reserve_file(*engine_, pin->fd(), slot * bytes_max_, bytes, path_);
    if (!r || !*r) {
      co_return;  // the disk is full, or no fallocate: what was reserved before stays (never zeros over a checkpoint)
    }
  }
  reserved_ = bytes;
}

snapshot_file::~snapshot_file() = default;

task<expected<void>> snapshot_file::write(std::uint8_t slot, std::span<const std::byte> bytes) {
  RILL_ASSERT(slot <= 1);
  RILL_ASSERT(!bytes.empty(), "a checkpoint always holds at least its header");
  RILL_ASSERT(file_.attached(), "a write after close()");
  if (bytes.size() > bytes_max_) {
    co_return make_unexpected(
        errc::invalid_argument,
        fmt::format("{}: a checkpoint of {} bytes does not fit a region of {}", path_, bytes.size(), bytes_max_));
  }
  RILL_ASSERT(slot * bytes_max_ + bytes.size() <= (slot + 1) * bytes_max_, "a write never touches the other region");
  {
    RILL_CO_TRY(pin, co_await file_.pin(*engine_));  // (held through the sync: the write reaches it)
    RILL_CO_TRY_VOID(co_await storage::write_all(*engine_, pin.fd(), slot * bytes_max_, bytes, path_));
    RILL_CO_TRY_VOID(co_await storage::datasync_file(*engine_, pin.fd(), path_));
  }
  if (reserved_ > 0 && reserved_ < 2 * bytes.size()) {
    co_await reserve(std::min(bytes_max_, 2 * bytes.size()));  // room for the next checkpoint to grow into
  }
  co_return expected<void>{};
}

task<expected<std::vector<std::byte>>> snapshot_file::read(std::uint8_t slot, std::uint64_t size, checksum_t checksum) {
  RILL_ASSERT(slot <= 1);
  RILL_ASSERT(file_.attached(), "a read after close()");
  if (size > bytes_max_) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: the superblock names a checkpoint of {} bytes; "
                                                              "a region holds {}",
                                                              path_, size, bytes_max_));
  }
  std::vector<std::byte> bytes(size);
  RILL_CO_TRY(pin, co_await file_.pin(*engine_));
  RILL_CO_TRY(got, co_await storage::read_at(*engine_, pin.fd(), slot * bytes_max_, bytes, path_));
  if (got != size || checksum_of(bytes, checkpoint_checksum_domain) != checksum) {
    co_return make_unexpected(errc::corrupt_data,
                              fmt::format("{}: region {} does not hold the checkpoint the superblock names ({} bytes, "
                                          "{})",
                                          path_, slot, size, to_string(checksum)));
  }
  RILL_ASSERT(bytes.size() == size);
  co_return bytes;
}

task<expected<void>> snapshot_file::close() {
  if (!file_.attached()) {
    co_return expected<void>{};
  }
  co_return co_await file_.close(*engine_);
}

}  // namespace rill::consensus
