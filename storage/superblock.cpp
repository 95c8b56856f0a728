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
  int fd = -1;
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
  c.fd = static_cast<int>(rc);
  std::array<std::byte, sf::bytes> buf{};
  auto got = co_await read_at(e, c.fd, 0, buf, path);
  if (!got) {
    (void)co_await close_file(e, c.fd, path);
    co_return unexpected(std::move(got).error());
  }
  if (*got == sf::bytes) {
    c.state = decode_superblock(buf.data());
  }
  co_return c;
}
}  // namespace

task<expected<superblock_store::opened>> superblock_store::open(io::engine& e, std::string dir, bool create) {
  const std::string path_a = join_path(dir, sf::name_a);
  const std::string path_b = join_path(dir, sf::name_b);
  RILL_CO_TRY(a, co_await open_copy(e, path_a, false));
  RILL_CO_TRY(b, co_await open_copy(e, path_b, false));
  opened out;
  out.store.engine_ = &e;
  out.store.dir_ = dir;
  const bool created_any = (a.fd < 0 || b.fd < 0) && create;
  if (a.fd < 0 && create) {
    RILL_CO_TRY(fd, co_await open_file(e, path_a, io::open_create, 0600));
    a.fd = fd;
  }
  if (b.fd < 0 && create) {
    RILL_CO_TRY(fd, co_await open_file(e, path_b, io::open_create, 0600));
    b.fd = fd;
  }
  if (created_any) {
    RILL_CO_TRY_VOID(co_await sync_dir(e, dir));
  }
  out.store.fd_a_ = a.fd;
  out.store.fd_b_ = b.fd;
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
  const int fd = to_a ? fd_a_ : fd_b_;
  const std::string path = join_path(dir_, to_a ? sf::name_a : sf::name_b);
  if (fd < 0) {
    co_return make_unexpected(errc::not_found, path + " is not open");
  }
  std::array<std::byte, sf::bytes> buf{};
  encode_superblock(next, buf.data());
  auto w = co_await write_all(*engine_, fd, 0, buf, path);
  if (w) {
    w = co_await datasync_file(*engine_, fd, path);
  }
  if (!w) {
    failed_ = true;
    co_return w;
  }
  state_ = next;
  co_return expected<void>{};
}

task<expected<void>> superblock_store::initialize(superblock_state s) {
  RILL_CO_TRY_VOID(co_await write(s));
  co_return co_await write(s);
}

task<expected<void>> superblock_store::close() {
  expected<void> result;
  for (int* fd : {&fd_a_, &fd_b_}) {
    if (*fd >= 0) {
      auto c = co_await close_file(*engine_, *fd, dir_ + "/superblock");
      if (!c && result) {
        result = std::move(c);
      }
      *fd = -1;
    }
  }
  co_return result;
}

}  // namespace rill::storage
