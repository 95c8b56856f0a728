#include "storage/superblock.h"

#include <array>
#include <cerrno>

#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/superblock_format.h"

namespace rill::storage {
namespace sf = superblock_format;

namespace {
struct copy {
  bool exists = false;
  std::optional<superblock_state> state;
};

task<expected<copy>> open_copy(io::engine& e, std::string path, bool create) {
  copy c;
  io::awaitable r(e);
  r.op = io::opcode::open;
  r.path = path;
  r.flags = create ? std::uint32_t{io::open_create} : 0u;
  const std::int64_t rc = co_await r;
  if (rc == -ENOENT) {
    co_return c;
  }
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "open " + path));
  }
  c.exists = true;
  const int fd = static_cast<int>(rc);
  std::array<std::byte, sf::bytes> buf{};
  // What the copy says is trusted below: it must be what the disk holds (file_ops.h, settle_file).
  // (No co_await inside a conditional expression: GCC 12 destroys its temporaries twice.)
  auto settled = co_await settle_file(e, fd, path);
  expected<std::size_t> got = std::size_t{0};
  if (settled) {
    got = co_await read_at(e, fd, 0, buf, path);
  } else {
    got = unexpected(std::move(settled).error());
  }
  // Closed at once: the store reopens the copy through the cache when it writes it.
  auto closed = co_await close_file(e, fd, path);
  if (!got) {
    co_return unexpected(std::move(got).error());
  }
  RILL_CO_TRY_VOID(std::move(closed));
  if (*got == sf::bytes) {
    c.state = decode_superblock(buf.data());
  }
  co_return c;
}
}  // namespace

task<expected<superblock_store::opened>> superblock_store::open(io::engine& e, file_cache& files, std::string dir,
                                                                bool create) {
  const std::string path_a = join_path(dir, sf::name_a);
  const std::string path_b = join_path(dir, sf::name_b);
  RILL_CO_TRY(a, co_await open_copy(e, path_a, false));
  RILL_CO_TRY(b, co_await open_copy(e, path_b, false));
  opened out;
  out.store.engine_ = &e;
  out.store.dir_ = dir;
  const bool created_any = (!a.exists || !b.exists) && create;
  // On a failure below, what was opened is closed before the error is returned (the store goes with it).
  expected<void> made;
  if (a.exists) {
    out.store.a_.attach(files, path_a, 0);
  } else if (create) {
    made = co_await out.store.a_.create(e, files, path_a, io::open_create, 0);
  }
  if (made && b.exists) {
    out.store.b_.attach(files, path_b, 0);
  } else if (made && create) {
    made = co_await out.store.b_.create(e, files, path_b, io::open_create, 0);
  }
  if (made && created_any) {
    made = co_await sync_dir(e, dir);
  }
  if (!made) {
    (void)co_await out.store.a_.close(e);
    (void)co_await out.store.b_.close(e);
    co_return unexpected(std::move(made).error());
  }
  if (a.state && b.state) {
    out.found = true;
    out.store.state_ = a.state->sequence >= b.state->sequence ? *a.state : *b.state;
  } else if (a.state || b.state) {
    out.found = true;
    out.one_damaged = true;
    out.store.state_ = a.state ? *a.state : *b.state;
  }
  co_return out;
}

task<expected<void>> superblock_store::write(superblock_state next) {
  RILL_ASSERT(engine_ != nullptr);
  if (failed_) {
    co_return make_unexpected(errc::fenced, "superblock of " + dir_ + ": an earlier write failed");
  }
  next.sequence = state_.sequence + 1;
  const bool to_a = next.sequence % 2 == 1;
  cached_file& file = to_a ? a_ : b_;
  const std::string path = join_path(dir_, to_a ? sf::name_a : sf::name_b);
  if (!file.attached()) {
    co_return make_unexpected(errc::not_found, path + " is not open");
  }
  std::array<std::byte, sf::bytes> buf{};
  encode_superblock(next, buf.data());
  auto pinned = co_await file.pin(*engine_);
  if (!pinned) {
    failed_ = true;  // nothing was written; but the sequence must not be reused with another copy's content
    co_return unexpected(std::move(pinned).error());
  }
  file.mark_unsynced();
  auto w = co_await write_all(*engine_, pinned->fd(), 0, buf, path);
  if (w) {
    w = co_await datasync_file(*engine_, pinned->fd(), path);
  }
  if (!w) {
    failed_ = true;  // stays unsynced: the cache keeps it open until close()
    co_return w;
  }
  file.mark_synced();
  state_ = next;
  co_return expected<void>{};
}

task<expected<void>> superblock_store::initialize(superblock_state s) {
  RILL_CO_TRY_VOID(co_await write(s));
  co_return co_await write(s);
}

task<expected<void>> superblock_store::close() {
  expected<void> result;
  if (engine_ == nullptr) {
    co_return result;  // never opened
  }
  for (cached_file* f : {&a_, &b_}) {
    auto c = co_await f->close(*engine_);
    if (!c && result) {
      result = std::move(c);
    }
  }
  co_return result;
}

}  // namespace rill::storage
