// durable_floor: loopback round trips, append + fdatasync, and the two together (durable_floor.h).
//
// Invariants
// - Every figure is counted over whole round trips (or syncs) that ended inside its measuring window.
// - Files are created fresh under the options' directory and removed before the function returns.
#include "tools/durable_floor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <span>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "config/limits.h"
#include "storage/errc.h"

namespace rill::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t reply_bytes = 32;
constexpr std::uint64_t file_bytes_max = 2 * limits::gib;

rill::error sys_error(const std::string& what) {
  return storage::io_error(-errno, what);
}

// A descriptor closed on scope exit.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

bool read_all(int fd, std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) {
      return false;
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r <= 0) {
      return false;
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// One durable append: the next `data.size()` bytes of `fd` at *end, then fdatasync. Wraps at the file limit.
bool append_sync(int fd, std::span<const std::byte> data, std::uint64_t& end) {
  if (end + data.size() > file_bytes_max) {
    end = 0;
  }
  if (::pwrite(fd, data.data(), data.size(), static_cast<off_t>(end)) != static_cast<ssize_t>(data.size())) {
    return false;
  }
  end += data.size();
  return ::fdatasync(fd) == 0;
}

expected<int> fresh_file(const std::string& path, std::uint64_t zeros) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return unexpected(sys_error("open " + path));
  }
  if (zeros > 0) {
    std::vector<std::byte> z(limits::mib);
    for (std::uint64_t at = 0; at < zeros; at += z.size()) {
      if (::pwrite(fd, z.data(), z.size(), static_cast<off_t>(at)) != static_cast<ssize_t>(z.size())) {
        auto e = sys_error("write zeros to " + path);
        ::close(fd);
        return unexpected(std::move(e));
      }
    }
    if (::fsync(fd) != 0) {
      auto e = sys_error("fsync " + path);
      ::close(fd);
      return unexpected(std::move(e));
    }
  }
  return fd;
}

// Round trips per second over loopback; with `file` >= 0 the server appends + fdatasyncs each request first.
expected<double> round_trips(const durable_floor_options& o, int file) {
  fd_guard listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0) {
    return unexpected(sys_error("socket"));
  }
  ::sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::socklen_t len = sizeof addr;
  if (::bind(listener.fd, reinterpret_cast<::sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener.fd, 1) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<::sockaddr*>(&addr), &len) != 0) {
    return unexpected(sys_error("listen on loopback"));
  }
  bool server_failed = false;
  std::thread server([&] {
    fd_guard c(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    const int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<std::byte> in(o.bytes);
    std::vector<std::byte> reply(reply_bytes);
    std::uint64_t end = 0;
    while (read_all(c.fd, in.data(), in.size())) {
      if (file >= 0 && !append_sync(file, in, end)) {
        server_failed = true;
        return;
      }
      if (!write_all(c.fd, reply.data(), reply.size())) {
        return;
      }
    }
  });
  fd_guard s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0 || ::connect(s.fd, reinterpret_cast<::sockaddr*>(&addr), sizeof addr) != 0) {
    auto e = sys_error("connect to loopback");
    ::shutdown(listener.fd, SHUT_RDWR);
    server.join();
    return unexpected(std::move(e));
  }
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<std::byte> request(o.bytes, std::byte{'x'});
  std::vector<std::byte> reply(reply_bytes);
  std::uint64_t done = 0;
  const auto start = clock_type::now();
  const auto until =
      start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.duration_s));
  auto now = start;
  bool ok = true;
  while (now < until) {
    if (!write_all(s.fd, request.data(), request.size()) || !read_all(s.fd, reply.data(), reply.size())) {
      ok = false;
      break;
    }
    ++done;
    now = clock_type::now();
  }
  ::shutdown(s.fd, SHUT_RDWR);
  server.join();
  if (!ok || server_failed) {
    return storage::make_unexpected(storage::errc::io_error, server_failed
                                                                 ? "append + fdatasync failed in the server thread"
                                                                 : "the loopback connection failed");
  }
  return static_cast<double>(done) / std::chrono::duration<double>(now - start).count();
}

expected<double> appends(const durable_floor_options& o, int file) {
  std::vector<std::byte> data(o.bytes, std::byte{'x'});
  std::uint64_t end = 0;
  std::uint64_t done = 0;
  const auto start = clock_type::now();
  const auto until =
      start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.duration_s));
  auto now = start;
  while (now < until) {
    if (!append_sync(file, data, end)) {
      return unexpected(sys_error("append + fdatasync"));
    }
    ++done;
    now = clock_type::now();
  }
  return static_cast<double>(done) / std::chrono::duration<double>(now - start).count();
}

}  // namespace

expected<durable_floor_result> measure_durable_floor(const durable_floor_options& o) {
  if (o.bytes == 0 || o.bytes > 64 * limits::mib) {
    return storage::make_unexpected(storage::errc::invalid_argument,
                                    fmt::format("--bytes {}: must be in [1, 67108864]", o.bytes));
  }
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) {
    return storage::make_unexpected(storage::errc::io_error, fmt::format("create {}: {}", o.dir, ec.message()));
  }
  const std::string path = o.dir + "/durable-floor.dat";
  durable_floor_result r;
  {
    RILL_TRY(loop, round_trips(o, -1));
    r.loopback_per_s = loop;
  }
  {
    RILL_TRY(fd, fresh_file(path, 0));
    fd_guard g(fd);
    RILL_TRY(a, appends(o, fd));
    r.append_per_s = a;
  }
  {
    RILL_TRY(fd, fresh_file(path, 0));
    fd_guard g(fd);
    RILL_TRY(f, round_trips(o, fd));
    r.floor_per_s = f;
  }
  {
    // Enough zeros for the run at twice the append rate measured, within the file limit.
    const auto need = static_cast<std::uint64_t>(r.append_per_s * 2 * o.duration_s) * o.bytes + limits::mib;
    RILL_TRY(fd, fresh_file(path, std::min(need, file_bytes_max)));
    fd_guard g(fd);
    RILL_TRY(f, round_trips(o, fd));
    r.floor_prezeroed_per_s = f;
  }
  std::filesystem::remove(path, ec);
  return r;
}

int run_durable_floor(const durable_floor_options& o) {
  auto r = measure_durable_floor(o);
  if (!r) {
    fmt::print(stderr, "rill-bench durable-floor: {}\n", r.error().message());
    return 1;
  }
  if (o.json) {
    fmt::print(
        "{{\"bytes\":{},\"loopback_per_s\":{:.0f},\"append_per_s\":{:.0f},\"floor_per_s\":{:.0f},"
        "\"floor_prezeroed_per_s\":{:.0f}}}\n",
        o.bytes, r->loopback_per_s, r->append_per_s, r->floor_per_s, r->floor_prezeroed_per_s);
    return 0;
  }
  fmt::print("durable floor for {}-byte batches, one in flight ({} s each, {}):\n", o.bytes, o.duration_s, o.dir);
  fmt::print("  loopback round trips (32-byte reply)        {:>10.0f} /s\n", r->loopback_per_s);
  fmt::print("  append + fdatasync of a fresh file          {:>10.0f} /s\n", r->append_per_s);
  fmt::print("  round trip + append + fdatasync (the floor) {:>10.0f} /s\n", r->floor_per_s);
  fmt::print("  the same over a pre-zeroed, synced file     {:>10.0f} /s\n", r->floor_prezeroed_per_s);
  return 0;
}

}  // namespace rill::bench
