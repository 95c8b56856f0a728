#include "storage/file_ops.h"

#include <atomic>
#include <cerrno>
#include <vector>

#include "storage/errc.h"

namespace rill::storage {

std::vector<::iovec> iovecs_after(std::span<const ::iovec> iov, std::uint64_t skip) {
  std::vector<::iovec> rest;
  for (const auto& v : iov) {
    if (skip >= v.iov_len) {
      skip -= v.iov_len;
      continue;
    }
    rest.push_back(::iovec{static_cast<char*>(v.iov_base) + skip, v.iov_len - skip});
    skip = 0;
  }
  return rest;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) {
    return name;
  }
  if (dir.back() == '/') {
    return dir + name;
  }
  return dir + "/" + name;
}

std::string parent_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    return ".";
  }
  if (slash == 0) {
    return "/";
  }
  return path.substr(0, slash);
}

task<expected<int>> open_file(io::engine& e, std::string path, std::uint32_t flags, std::uint32_t mode) {
  io::awaitable r(e);
  r.op = io::opcode::open;
  r.path = path;
  r.flags = flags;
  r.mode = mode;
  const std::int64_t rc = co_await r;
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "open " + path));
  }
  co_return static_cast<int>(rc);
}

task<expected<void>> close_file(io::engine& e, int fd, std::string path) {
  io::awaitable r(e);
  r.op = io::opcode::close;
  r.fd = fd;
  const std::int64_t rc = co_await r;
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "close " + path));
  }
  co_return expected<void>{};
}

task<expected<void>> close_once(io::engine& e, int& fd, std::string path) {
  if (fd < 0) {
    co_return expected<void>{};
  }
  const int open_fd = fd;
  fd = -1;
  co_return co_await close_file(e, open_fd, std::move(path));
}

task<expected<std::size_t>> read_at(io::engine& e, int fd, std::uint64_t offset, std::span<std::byte> buf,
                                    std::string path) {
  std::size_t got = 0;
  while (got < buf.size()) {
    io::awaitable r(e);
    r.op = io::opcode::read;
    r.fd = fd;
    r.offset = offset + got;
    r.buffer = buf.data() + got;
    r.length = buf.size() - got;
    const std::int64_t rc = co_await r;
    if (rc < 0) {
      if (rc == -EINTR || rc == -EAGAIN) {
        continue;
      }
      co_return unexpected(io_error(static_cast<int>(rc), "read " + path + " at byte " + std::to_string(offset + got)));
    }
    if (rc == 0) {
      break;  // end of file
    }
    got += static_cast<std::size_t>(rc);
  }
  co_return got;
}

task<expected<void>> write_all(io::engine& e, int fd, std::uint64_t offset, std::span<const std::byte> data,
                               std::string path) {
  std::size_t put = 0;
  while (put < data.size()) {
    io::awaitable r(e);
    r.op = io::opcode::write;
    r.fd = fd;
    r.offset = offset + put;
    r.cbuffer = data.data() + put;
    r.length = data.size() - put;
    const std::int64_t rc = co_await r;
    if (rc < 0) {
      if (rc == -EINTR || rc == -EAGAIN) {
        continue;
      }
      co_return unexpected(
          io_error(static_cast<int>(rc), "write " + path + " at byte " + std::to_string(offset + put)));
    }
    if (rc == 0) {
      co_return unexpected(io_error(-EIO, "write " + path + ": no progress"));
    }
    put += static_cast<std::size_t>(rc);
  }
  co_return expected<void>{};
}

task<expected<void>> writev_all(io::engine& e, int fd, std::uint64_t offset, std::span<const ::iovec> iov,
                                std::string path, bool blocking_ok) {
  std::uint64_t total = 0;
  for (const auto& v : iov) {
    total += v.iov_len;
  }
  std::uint64_t put = 0;
  std::vector<::iovec> rest;  // only built after a short write
  std::span<const ::iovec> current = iov;
  while (put < total) {
    io::awaitable r(e);
    r.op = io::opcode::writev;
    r.fd = fd;
    r.blocking_ok = blocking_ok;
    r.offset = offset + put;
    r.iov = current.data();
    r.iov_count = static_cast<unsigned>(current.size());
    const std::int64_t rc = co_await r;
    if (rc < 0) {
      if (rc == -EINTR || rc == -EAGAIN) {
        continue;
      }
      co_return unexpected(
          io_error(static_cast<int>(rc), "writev " + path + " at byte " + std::to_string(offset + put)));
    }
    if (rc == 0) {
      co_return unexpected(io_error(-EIO, "writev " + path + ": no progress"));
    }
    put += static_cast<std::uint64_t>(rc);
    if (put == total) {
      break;
    }
    rest = iovecs_after(iov, put);  // short write: continue from the first unwritten byte
    current = rest;
  }
  co_return expected<void>{};
}

namespace {
task<expected<void>> simple(io::engine& e, io::opcode op, int fd, std::uint64_t offset, std::string path,
                            std::string path2, std::string what) {
  io::awaitable r(e);
  r.op = op;
  r.fd = fd;
  r.offset = offset;
  r.path = std::move(path);
  r.path2 = std::move(path2);
  r.mode = 0700;
  const std::int64_t rc = co_await r;
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), what));
  }
  co_return expected<void>{};
}
}  // namespace

task<expected<void>> datasync_file(io::engine& e, int fd, std::string path) {
  co_return co_await simple(e, io::opcode::fdatasync, fd, 0, {}, {}, "fdatasync " + path);
}

namespace {
std::atomic<bool> bug_trust_page_cache{false};
}  // namespace

void set_bug_trust_page_cache(bool on) noexcept {
  bug_trust_page_cache.store(on, std::memory_order_relaxed);
}

namespace {
std::atomic<bool> bug_dirs_trust_existing{false};
}  // namespace

void set_bug_dirs_trust_existing(bool on) noexcept {
  bug_dirs_trust_existing.store(on, std::memory_order_relaxed);
}

task<expected<void>> settle_file(io::engine& e, int fd, std::string path) {
  if (bug_trust_page_cache.load(std::memory_order_relaxed)) {
    co_return expected<void>{};
  }
  RILL_CO_TRY_VOID(co_await simple(e, io::opcode::fdatasync, fd, 0, {}, {}, "fdatasync " + path));
  co_return co_await simple(e, io::opcode::drop_cache, fd, 0, {}, {}, "drop the cached pages of " + path);
}

task<expected<void>> settle_dir(io::engine& e, std::string path) {
  if (bug_trust_page_cache.load(std::memory_order_relaxed)) {
    co_return expected<void>{};
  }
  RILL_CO_TRY_VOID(co_await sync_dir(e, path));
  co_return co_await sync_dir(e, parent_path(path));
}

task<expected<void>> truncate_file(io::engine& e, int fd, std::uint64_t length, std::string path) {
  co_return co_await simple(e, io::opcode::ftruncate, fd, length, {}, {},
                            "ftruncate " + path + " to " + std::to_string(length));
}

task<expected<std::uint64_t>> size_of_file(io::engine& e, int fd, std::string path) {
  io::awaitable r(e);
  r.op = io::opcode::file_size;
  r.fd = fd;
  const std::int64_t rc = co_await r;
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "stat " + path));
  }
  co_return static_cast<std::uint64_t>(rc);
}

task<expected<void>> rename_file(io::engine& e, std::string from, std::string to) {
  std::string what = "rename " + from + " to " + to;
  co_return co_await simple(e, io::opcode::rename, -1, 0, std::move(from), std::move(to), std::move(what));
}

task<expected<void>> unlink_file(io::engine& e, std::string path, bool missing_ok) {
  io::awaitable r(e);
  r.op = io::opcode::unlink;
  r.path = path;
  const std::int64_t rc = co_await r;
  if (rc < 0 && !(missing_ok && rc == -ENOENT)) {
    co_return unexpected(io_error(static_cast<int>(rc), "unlink " + path));
  }
  co_return expected<void>{};
}

task<expected<void>> remove_dir(io::engine& e, std::string path) {
  std::string what = "rmdir " + path;
  co_return co_await simple(e, io::opcode::rmdir, -1, 0, std::move(path), {}, std::move(what));
}

task<expected<std::vector<std::string>>> list_dir(io::engine& e, std::string path) {
  std::vector<std::string> names;
  io::awaitable r(e);
  r.op = io::opcode::list_dir;
  r.path = path;
  r.names = &names;
  const std::int64_t rc = co_await r;
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "list " + path));
  }
  co_return names;
}

namespace {
// sync_dir; with `unreadable_ok`, nothing when the directory cannot be opened for reading (EACCES, EPERM).
task<expected<void>> sync_dir_of(io::engine& e, std::string path, bool unreadable_ok) {
  io::awaitable o(e);
  o.op = io::opcode::open;
  o.path = path;
  o.flags = io::open_directory;
  o.mode = 0;
  const std::int64_t fd = co_await o;
  if (unreadable_ok && (fd == -EACCES || fd == -EPERM)) {
    co_return expected<void>{};
  }
  if (fd < 0) {
    co_return unexpected(io_error(static_cast<int>(fd), "open " + path));
  }
  auto synced = co_await simple(e, io::opcode::fsync, static_cast<int>(fd), 0, {}, {}, "fsync directory " + path);
  auto closed = co_await close_file(e, static_cast<int>(fd), path);
  if (!synced) {
    co_return synced;
  }
  co_return closed;
}
}  // namespace

task<expected<void>> sync_dir(io::engine& e, std::string path) {
  co_return co_await sync_dir_of(e, std::move(path), false);
}

task<expected<void>> make_dirs(io::engine& e, std::string path) {
  // Walk down from the first component, creating what is missing, and sync each directory's parent: a crash must
  // not lose a directory that files were already written into. Existing ones too: an earlier make_dirs (this
  // process's, or a crashed one's) may have created a directory and failed (EIO) or died before its parent's fsync,
  // and its entry is then in the cache only; mkdir answers EEXIST, and the files written below it later, however
  // well synced, vanish with it at a power loss (rill-sim --node seeds 1119617984222312034 and 9580106533886807598:
  // a partition replica acknowledged prepares into a journal whose directory was never durable, came back empty
  // after a power loss, and voted a view change that cut committed ops). The cost is one fsync of a clean directory
  // per component, at opens only (about 40 us each on ext4 here). A parent this user cannot read (EACCES, EPERM: a
  // system directory above the data directory) is not one it made, and is left alone.
  std::vector<std::string> prefixes;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      prefixes.push_back(path.substr(0, i));
    }
  }
  for (const auto& p : prefixes) {
    if (p.empty() || p == "/" || p == ".") {
      continue;
    }
    io::awaitable r(e);
    r.op = io::opcode::mkdir;
    r.path = p;
    r.mode = 0700;
    const std::int64_t rc = co_await r;
    if (rc < 0 && rc != -EEXIST) {
      co_return unexpected(io_error(static_cast<int>(rc), "mkdir " + p));
    }
    if (rc == -EEXIST && bug_dirs_trust_existing.load(std::memory_order_relaxed)) {
      continue;
    }
    // (A found directory's parent this user cannot read is skipped: not one it made.)
    auto synced = co_await sync_dir_of(e, parent_path(p), rc == -EEXIST);
    if (!synced) {
      co_return synced;
    }
  }
  co_return expected<void>{};
}

namespace {
// list_dir's raw result: the count, or -errno (-ENOENT: missing, -ENOTDIR: a file).
task<std::int64_t> list_raw(io::engine& e, std::string path, std::vector<std::string>& names) {
  io::awaitable r(e);
  r.op = io::opcode::list_dir;
  r.path = std::move(path);
  r.names = &names;
  co_return co_await r;
}
}  // namespace

task<expected<void>> remove_tree(io::engine& e, std::string path, std::uint64_t step_bytes) {
  std::vector<std::string> names;
  const std::int64_t rc = co_await list_raw(e, path, names);
  if (rc == -ENOENT) {
    co_return expected<void>{};
  }
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "list " + path));
  }
  for (const auto& name : names) {
    const std::string child = join_path(path, name);
    std::vector<std::string> sub;
    const std::int64_t child_rc = co_await list_raw(e, child, sub);
    if (child_rc >= 0) {
      RILL_CO_TRY_VOID(co_await remove_tree(e, child, step_bytes));
      continue;
    }
    if (child_rc != -ENOTDIR) {
      co_return unexpected(io_error(static_cast<int>(child_rc), "list " + child));
    }
    RILL_CO_TRY(fd, co_await open_file(e, child, 0, 0600));
    auto size = co_await size_of_file(e, fd, child);
    std::uint64_t remaining = size ? *size : 0;
    while (remaining > step_bytes) {
      remaining -= step_bytes;
      if (!co_await truncate_file(e, fd, remaining, child)) {
        break;
      }
    }
    (void)co_await close_file(e, fd, child);
    RILL_CO_TRY_VOID(co_await unlink_file(e, child, true));
  }
  RILL_CO_TRY_VOID(co_await remove_dir(e, path));
  co_return co_await sync_dir(e, parent_path(path));
}

task<expected<bool>> reserve_file(io::engine& e, int fd, std::uint64_t offset, std::uint64_t length, std::string path) {
  RILL_ASSERT(length > 0);
  io::awaitable r(e);
  r.op = io::opcode::reserve;
  r.fd = fd;
  r.offset = offset;
  r.length = length;
  const std::int64_t rc = co_await r;
  if (rc == -EOPNOTSUPP || rc == -EINVAL) {
    co_return false;
  }
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "reserve " + std::to_string(length) + " bytes at byte " +
                                                            std::to_string(offset) + " of " + path));
  }
  co_return true;
}

task<expected<void>> write_zeros(io::engine& e, int fd, std::uint64_t offset, std::uint64_t length, std::string path) {
  static const std::vector<std::byte> zeros(1024 * 1024);
  while (length > 0) {
    const std::uint64_t n = std::min<std::uint64_t>(length, zeros.size());
    auto w = co_await write_all(e, fd, offset, std::span<const std::byte>(zeros.data(), n), path);
    if (!w) {
      co_return w;
    }
    offset += n;
    length -= n;
  }
  co_return expected<void>{};
}

}  // namespace rill::storage
