#pragma once
// Coroutine helpers over io::engine with rill errors: each submits one or more requests and returns an expected
// whose error names the operation and the file. Short reads and writes are continued until done (or end of file
// for reads). Paths are taken by value: they live in the coroutine frame while the request is in flight.
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "storage/io/engine.h"

namespace rill::storage {

task<expected<int>> open_file(io::engine& e, std::string path, std::uint32_t flags, std::uint32_t mode = 0600);
task<expected<void>> close_file(io::engine& e, int fd, std::string path);
// Closes `fd` if it is open (>= 0) and sets it to -1 first, so a second call (or a destructor) does nothing. `fd`
// must outlive the call (an object's member, closed from its close()).
task<expected<void>> close_once(io::engine& e, int& fd, std::string path);
// Reads up to buf.size() bytes at `offset`; fewer only at end of file. Returns the bytes read.
task<expected<std::size_t>> read_at(io::engine& e, int fd, std::uint64_t offset, std::span<std::byte> buf,
                                    std::string path);
task<expected<void>> write_all(io::engine& e, int fd, std::uint64_t offset, std::span<const std::byte> data,
                               std::string path);
// Writes every iovec in order starting at `offset` (one writev, continued if short). `iov` is not modified.
// `blocking_ok`: the engine may run the write on its owner's thread (io::request::blocking_ok).
task<expected<void>> writev_all(io::engine& e, int fd, std::uint64_t offset, std::span<const ::iovec> iov,
                                std::string path, bool blocking_ok = false);
task<expected<void>> datasync_file(io::engine& e, int fd, std::string path);
// Makes what reads of the file return what its device holds, before recovery trusts it: an fdatasync (the dirty
// pages a crashed process left are written: durable before anything is built on them), then drop_cache (the clean
// pages a failed fdatasync left, whose bytes never reached the device, are dropped: the next reads come from the
// device). Errors: io_error naming the file (recovery must not go on: what it would read cannot be trusted).
task<expected<void>> settle_file(io::engine& e, int fd, std::string path);
// The same for a directory recovery trusts: its entries and its own entry in its parent are made durable (a crashed
// process may have created files whose directory fsync never ran, or failed). Errors: io_error.
task<expected<void>> settle_dir(io::engine& e, std::string path);
// Test only, process-wide: a deliberate bug (the simulator's tests prove the checkers find it, review finding 2 of
// issue 38): settle_file does nothing, so recovery trusts whatever the page cache holds.
void set_bug_trust_page_cache(bool on) noexcept;
// Test only, process-wide: a deliberate bug (make_dirs as it was): make_dirs syncs only the parents of directories it
// created, so an entry whose parent's fsync failed once is never made durable.
void set_bug_dirs_trust_existing(bool on) noexcept;
task<expected<void>> truncate_file(io::engine& e, int fd, std::uint64_t length, std::string path);
task<expected<std::uint64_t>> size_of_file(io::engine& e, int fd, std::string path);
task<expected<void>> rename_file(io::engine& e, std::string from, std::string to);
// ENOENT is an error unless missing_ok.
task<expected<void>> unlink_file(io::engine& e, std::string path, bool missing_ok = false);
task<expected<void>> remove_dir(io::engine& e, std::string path);
task<expected<std::vector<std::string>>> list_dir(io::engine& e, std::string path);
// Makes the entries of directory `path` durable (open O_DIRECTORY, fsync, close).
task<expected<void>> sync_dir(io::engine& e, std::string path);
// mkdir -p with mode 0700: creates every missing directory of `path`, and syncs the parent of every directory on
// the way, found or created (an entry an earlier call created may not be durable yet; a found directory's parent
// this user cannot read is skipped: not one it made). Errors: io_error.
task<expected<void>> make_dirs(io::engine& e, std::string path);
// Deletes directory `path` and everything under it (a deleted partition, topic or stream): files larger than
// `step_bytes` are shrunk in steps first (one big unlink stalls other files' fdatasync), then everything is
// unlinked, the directories removed bottom-up and the parent synced. Missing `path` is not an error.
task<expected<void>> remove_tree(io::engine& e, std::string path, std::uint64_t step_bytes);

// Allocates the blocks of [offset, offset + length) of the file (fallocate, keeping its size and its content), so
// writes there never fail for space, nor does their fdatasync under delayed allocation. Returns false, reserving
// nothing, where the file system or the kernel cannot (EOPNOTSUPP: ZFS before 2.2, NFSv3, FUSE; EINVAL: a kernel
// without io_uring's fallocate); the caller decides whether writing zeros is safe there (it never is over data).
// Errors: no_space (nothing reserved), io_error.
task<expected<bool>> reserve_file(io::engine& e, int fd, std::uint64_t offset, std::uint64_t length, std::string path);

// Writes `length` zero bytes at `offset` in chunks (preallocation by writing).
task<expected<void>> write_zeros(io::engine& e, int fd, std::uint64_t offset, std::uint64_t length, std::string path);

// The iovecs that remain after the first `skip` bytes of `iov` were written (after a short write).
std::vector<::iovec> iovecs_after(std::span<const ::iovec> iov, std::uint64_t skip);

// "dir/name", tolerating a trailing slash on dir.
std::string join_path(const std::string& dir, const std::string& name);
// The directory part of a path ("." when there is none).
std::string parent_path(const std::string& path);

}  // namespace rill::storage
