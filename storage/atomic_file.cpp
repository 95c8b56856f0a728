#include "storage/atomic_file.h"

#include <cerrno>

#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::storage {

bool is_temp_name(const std::string& name) noexcept {
  const std::string suffix = temp_suffix;
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

task<expected<void>> write_file_atomic(io::engine& e, std::string dir, std::string name,
                                       std::vector<std::byte> content) {
  const std::string final_path = join_path(dir, name);
  const std::string temp_path = final_path + temp_suffix;
  RILL_CO_TRY(fd, co_await open_file(e, temp_path, io::open_create | io::open_truncate, 0600));
  auto written = co_await write_all(e, fd, 0, content, temp_path);
  if (written) {
    written = co_await datasync_file(e, fd, temp_path);
  }
  auto closed = co_await close_file(e, fd, temp_path);
  if (!written) {
    co_return written;
  }
  if (!closed) {
    co_return closed;
  }
  RILL_CO_TRY_VOID(co_await rename_file(e, temp_path, final_path));
  co_return co_await sync_dir(e, dir);
}

task<expected<std::optional<std::vector<std::byte>>>> read_whole_file(io::engine& e, std::string path,
                                                                      std::uint64_t bytes_max) {
  io::awaitable r(e);
  r.op = io::opcode::open;
  r.path = path;
  r.flags = io::open_read_only;
  const std::int64_t rc = co_await r;
  if (rc == -ENOENT) {
    co_return std::optional<std::vector<std::byte>>{};
  }
  if (rc < 0) {
    co_return unexpected(io_error(static_cast<int>(rc), "open " + path));
  }
  const int fd = static_cast<int>(rc);
  auto size = co_await size_of_file(e, fd, path);
  expected<std::optional<std::vector<std::byte>>> out = std::optional<std::vector<std::byte>>{};
  if (!size) {
    out = unexpected(std::move(size).error());
  } else if (*size > bytes_max) {
    out = make_unexpected(errc::corrupt_data, path + ": " + std::to_string(*size) + " bytes, more than the " +
                                                  std::to_string(bytes_max) + " such a file may have");
  } else {
    std::vector<std::byte> bytes(*size);
    auto got = co_await read_at(e, fd, 0, bytes, path);
    if (!got) {
      out = unexpected(std::move(got).error());
    } else {
      bytes.resize(*got);
      out = std::optional<std::vector<std::byte>>{std::move(bytes)};
    }
  }
  auto closed = co_await close_file(e, fd, path);
  if (out && !closed) {
    co_return unexpected(std::move(closed).error());
  }
  co_return out;
}

}  // namespace rill::storage
