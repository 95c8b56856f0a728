#include "storage/io/syscalls.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rill::storage::io {

const char* to_string(opcode op) noexcept {
  switch (op) {
    case opcode::open:
      return "open";
    case opcode::close:
      return "close";
    case opcode::read:
      return "read";
    case opcode::write:
      return "write";
    case opcode::writev:
      return "writev";
    case opcode::fdatasync:
      return "fdatasync";
    case opcode::fsync:
      return "fsync";
    case opcode::ftruncate:
      return "ftruncate";
    case opcode::rename:
      return "rename";
    case opcode::unlink:
      return "unlink";
    case opcode::mkdir:
      return "mkdir";
    case opcode::rmdir:
      return "rmdir";
    case opcode::list_dir:
      return "list_dir";
    case opcode::file_size:
      return "file_size";
    case opcode::reserve:
      return "reserve";
    case opcode::writev_datasync:
      return "writev_datasync";
    case opcode::drop_cache:
      return "drop_cache";
    case opcode::accept:
      return "accept";
    case opcode::recv:
      return "recv";
    case opcode::send:
      return "send";
    case opcode::connect:
      return "connect";
    case opcode::poll_readable:
      return "poll_readable";
    case opcode::cancel:
      return "cancel";
  }
  return "unknown";
}

namespace {
std::int64_t ok_or_errno(long rc) noexcept {
  return rc < 0 ? -errno : rc;
}

std::int64_t list(request& r) noexcept {
  DIR* d = ::opendir(r.path.c_str());
  if (d == nullptr) {
    return -errno;
  }
  r.names->clear();
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) {
      continue;
    }
    r.names->emplace_back(e->d_name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) {
    return -err;
  }
  std::sort(r.names->begin(), r.names->end());
  return static_cast<std::int64_t>(r.names->size());
}
}  // namespace

int posix_open_flags(std::uint32_t f) noexcept {
  int flags = O_CLOEXEC;
  if (f & open_directory) {
    flags |= O_RDONLY | O_DIRECTORY;
    return flags;
  }
  flags |= (f & open_read_only) ? O_RDONLY : O_RDWR;
  if (f & open_create) {
    flags |= O_CREAT;
  }
  if (f & open_exclusive) {
    flags |= O_EXCL;
  }
  if (f & open_truncate) {
    flags |= O_TRUNC;
  }
  return flags;
}

void execute_blocking(request& r) noexcept {
  switch (r.op) {
    case opcode::open:
      r.result = ok_or_errno(::open(r.path.c_str(), posix_open_flags(r.flags), r.mode));
      return;
    case opcode::close:
      r.result = ok_or_errno(::close(r.fd));
      return;
    case opcode::read:
      r.result = ok_or_errno(::pread(r.fd, r.buffer, r.length, static_cast<off_t>(r.offset)));
      return;
    case opcode::write:
      r.result = ok_or_errno(::pwrite(r.fd, r.cbuffer, r.length, static_cast<off_t>(r.offset)));
      return;
    case opcode::writev:
      r.result = ok_or_errno(::pwritev(r.fd, r.iov, static_cast<int>(r.iov_count), static_cast<off_t>(r.offset)));
      return;
    case opcode::fdatasync:
      r.result = ok_or_errno(::fdatasync(r.fd));
      return;
    case opcode::fsync:
      r.result = ok_or_errno(::fsync(r.fd));
      return;
    case opcode::ftruncate:
      r.result = ok_or_errno(::ftruncate(r.fd, static_cast<off_t>(r.offset)));
      return;
    case opcode::reserve:
      r.result = ok_or_errno(
          ::fallocate(r.fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(r.offset), static_cast<off_t>(r.length)));
      return;
    case opcode::rename:
      r.result = ok_or_errno(::rename(r.path.c_str(), r.path2.c_str()));
      return;
    case opcode::unlink:
      r.result = ok_or_errno(::unlink(r.path.c_str()));
      return;
    case opcode::mkdir:
      r.result = ok_or_errno(::mkdir(r.path.c_str(), r.mode));
      return;
    case opcode::rmdir:
      r.result = ok_or_errno(::rmdir(r.path.c_str()));
      return;
    case opcode::list_dir:
      r.result = list(r);
      return;
    case opcode::writev_datasync: {
      r.result = ok_or_errno(::pwritev(r.fd, r.iov, static_cast<int>(r.iov_count), static_cast<off_t>(r.offset)));
      std::uint64_t total = 0;
      for (unsigned i = 0; i < r.iov_count; ++i) {
        total += r.iov[i].iov_len;
      }
      r.sync_result =
          r.result >= 0 && static_cast<std::uint64_t>(r.result) == total ? ok_or_errno(::fdatasync(r.fd)) : -ECANCELED;
      return;
    }
    case opcode::drop_cache:
      // posix_fadvise returns the error number itself and leaves errno alone.
      r.result = -::posix_fadvise(r.fd, 0, 0, POSIX_FADV_DONTNEED);
      return;
    case opcode::accept:
      r.result = ok_or_errno(::accept4(r.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      return;
    case opcode::recv:
      r.result = ok_or_errno(::recv(r.fd, r.buffer, r.length, 0));
      return;
    case opcode::send:
      r.result = ok_or_errno(::send(r.fd, r.cbuffer, r.length, MSG_NOSIGNAL));
      return;
    case opcode::connect: {
      // Blocking execution: a non-blocking socket answers EINPROGRESS; wait until it is writable, then read the
      // outcome (SO_ERROR), as the kernel's connect would have waited.
      const auto* addr = reinterpret_cast<const ::sockaddr*>(r.cbuffer);
      if (::connect(r.fd, addr, static_cast<::socklen_t>(r.length)) == 0) {
        r.result = 0;
        return;
      }
      if (errno != EINPROGRESS) {
        r.result = -errno;
        return;
      }
      ::pollfd p{r.fd, POLLOUT, 0};
      if (::poll(&p, 1, -1) < 0) {
        r.result = -errno;
        return;
      }
      int error = 0;
      ::socklen_t len = sizeof error;
      r.result = ::getsockopt(r.fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0 ? -errno : -error;
      return;
    }
    case opcode::poll_readable: {
      ::pollfd p{r.fd, POLLIN, 0};
      const int rc = ::poll(&p, 1, -1);
      r.result = rc < 0 ? -errno : p.revents;
      return;
    }
    case opcode::cancel:
      r.result = -ENOENT;  // blocking execution leaves nothing pending to cancel
      return;
    case opcode::file_size: {
      struct stat st {};
      const int rc = ::fstat(r.fd, &st);
      r.result = rc < 0 ? -errno : static_cast<std::int64_t>(st.st_size);
      return;
    }
  }
  r.result = -EINVAL;
}

}  // namespace rill::storage::io
