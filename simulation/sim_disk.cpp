// Invariants
// - A file node's `unsynced` holds, in order, every content change since its last successful sync, each with what
//   it overwrote, so undoing them in reverse yields exactly the durable content.
// - A directory's `durable_entries` is the snapshot taken at its last successful fsync; the root is always durable.
// - used_bytes_ is block_bytes times the allocated blocks of all live file nodes, delayed_bytes_ the same for
//   blocks written under delayed allocation and not yet allocated; a node's blocks beyond its data may only be
//   allocated (reserved), never delayed.
// - Once stopped_, no operation has any effect until crash().
// - A lost change (a failed sync covered it) is never made durable: a later sync keeps it in `unsynced` (as one
//   change that turns the cache's bytes back into the durable ones), a crash undoes it and never lands it.
#include "simulation/sim_disk.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/assert.h"

namespace rill::simulation {

struct sim_disk::node_change {
  std::uint64_t offset = 0;          // start of the region whose old bytes are kept
  std::uint64_t old_size = 0;        // file size before the change
  std::vector<std::byte> old_bytes;  // bytes [offset, offset + old_bytes.size()) before the change
  bool truncate = false;
  std::uint64_t new_size = 0;        // truncate: the size set
  std::uint64_t write_offset = 0;    // write: where
  std::vector<std::byte> new_bytes;  // write: what
  // In the cache only: a failed sync covered it, so it never becomes durable (a crash never lands it).
  bool lost = false;
};

struct sim_disk::node {
  using change = node_change;

  enum block_state : std::uint8_t { hole = 0, allocated = 1, delayed = 2 };

  node(sim_disk* d, bool dir) : disk(d), is_dir(dir) {}
  ~node() { free_blocks_from(0); }
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Shrinking frees every block past the new end (reserved ones too, as truncate does); growing allocates none.
  void resize(std::uint64_t n) {
    data.resize(n);
    if (blocks.size() > (n + block_bytes - 1) / block_bytes) {
      free_blocks_from((n + block_bytes - 1) / block_bytes);
    }
  }
  void free_blocks_from(std::uint64_t first) {
    for (std::uint64_t b = first; b < blocks.size(); ++b) {
      if (blocks[b] == allocated) {
        disk->used_bytes_ -= block_bytes;
      } else if (blocks[b] == delayed) {
        disk->delayed_bytes_ -= block_bytes;
      }
    }
    if (first < blocks.size()) {
      blocks.resize(first);
    }
  }
  [[nodiscard]] std::uint64_t delayed_blocks() const {
    return static_cast<std::uint64_t>(std::count(blocks.begin(), blocks.end(), delayed));
  }

  sim_disk* disk;
  bool is_dir;
  std::vector<std::byte> data;
  std::vector<std::uint8_t> blocks;  // block_state of each block_bytes block (missing at the end: holes)
  std::vector<node_change> unsynced;
  std::uint64_t changes_made = 0;  // content changes ever pushed to unsynced
  std::map<std::string, std::shared_ptr<node>> entries;
  std::map<std::string, std::shared_ptr<node>> durable_entries;
};

namespace {
std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    const std::size_t j = path.find('/', i);
    const std::size_t end = j == std::string::npos ? path.size() : j;
    std::string part = path.substr(i, end - i);
    if (!part.empty() && part != ".") {
      parts.push_back(std::move(part));
    }
    i = end + 1;
  }
  return parts;
}

bool is_mutating(const io::request& r) {
  switch (r.op) {
    case io::opcode::open:
      return (r.flags & (io::open_create | io::open_truncate)) != 0;
    case io::opcode::close:
    case io::opcode::read:
    case io::opcode::list_dir:
    case io::opcode::file_size:
    case io::opcode::drop_cache:
    case io::opcode::accept:
    case io::opcode::recv:
    case io::opcode::send:
    case io::opcode::connect:
    case io::opcode::poll_readable:
    case io::opcode::cancel:
      return false;
    default:
      return true;
  }
}
}  // namespace

sim_disk::sim_disk(std::uint64_t seed, sim_disk_faults faults, manual_clock* clock)
    : rng_(seed), faults_(faults), clock_(clock), root_(std::make_shared<node>(this, true)) {
  RILL_ASSERT(faults_.latency_ns_min <= faults_.latency_ns_max);
}

sim_disk::~sim_disk() {
  RILL_ASSERT(queue_.empty(), "sim_disk destroyed with {} requests in flight", queue_.size());
  fds_.clear();
  root_.reset();
}

void sim_disk::submit(io::request& r) {
  RILL_ASSERT(r.on_complete != nullptr);
  const std::uint64_t latency = rng_.between(faults_.latency_ns_min, faults_.latency_ns_max);
  if (faults_.sync_covers_only_submitted && (r.op == io::opcode::fdatasync || r.op == io::opcode::fsync)) {
    if (node* n = file_for_fd(r.fd); n != nullptr && !n->is_dir) {
      sync_snapshots_[&r] = n->changes_made;
    }
  }
  queue_.push(pending{now_ns_ + latency, seq_++, &r});
}

std::size_t sim_disk::poll(bool wait) {
  RILL_ASSERT(!polling_, "sim_disk::poll is not reentrant");
  if (queue_.empty()) {
    return 0;
  }
  if (wait && queue_.top().due_ns > now_ns_) {
    const std::uint64_t step = queue_.top().due_ns - now_ns_;
    now_ns_ += step;
    if (clock_ != nullptr) {
      clock_->advance(std::chrono::nanoseconds(step));
    }
  }
  std::size_t n = 0;
  while (!queue_.empty() && queue_.top().due_ns <= now_ns_) {
    io::request* r = queue_.top().r;
    queue_.pop();
    polling_ = true;
    if (auto it = sync_snapshots_.find(r); it != sync_snapshots_.end()) {
      sync_snapshot_ = it->second;
      sync_snapshots_.erase(it);
    }
    apply(*r);
    sync_snapshot_.reset();
    polling_ = false;
    ++n;
    io::complete(*r);
  }
  return n;
}

void sim_disk::advance_time(std::uint64_t ns) {
  now_ns_ += ns;
  if (clock_ != nullptr) {
    clock_->advance(std::chrono::nanoseconds(ns));
  }
}

void sim_disk::fail_stop_after(std::uint64_t n) {
  RILL_ASSERT(n >= 1);
  stop_at_ = mutating_ops_ + n;
}

sim_disk::node* sim_disk::resolve(const std::string& path) const {
  node* n = root_.get();
  for (const auto& part : split(path)) {
    if (!n->is_dir) {
      return nullptr;
    }
    auto it = n->entries.find(part);
    if (it == n->entries.end()) {
      return nullptr;
    }
    n = it->second.get();
  }
  return n;
}

std::pair<sim_disk::node*, std::string> sim_disk::resolve_parent(const std::string& path) const {
  auto parts = split(path);
  if (parts.empty()) {
    return {nullptr, {}};
  }
  std::string last = parts.back();
  parts.pop_back();
  node* n = root_.get();
  for (const auto& part : parts) {
    auto it = n->entries.find(part);
    if (it == n->entries.end() || !it->second->is_dir) {
      return {nullptr, {}};
    }
    n = it->second.get();
  }
  return {n, last};
}

sim_disk::node* sim_disk::file_for_fd(int fd) const {
  auto it = fds_.find(fd);
  return it == fds_.end() ? nullptr : it->second.get();
}

void sim_disk::apply(io::request& r) {
  ++op_counts_[static_cast<std::size_t>(r.op)];
  if (is_mutating(r)) {
    ++mutating_ops_;
    if (stop_at_ && mutating_ops_ >= *stop_at_) {
      stopped_ = true;
    }
  }
  if (stopped_) {
    r.result = -EIO;
    r.sync_result = -ECANCELED;
    return;
  }
  switch (r.op) {
    case io::opcode::open:
      r.result = do_open(r);
      return;
    case io::opcode::close:
      fd_paths_.erase(r.fd);
      r.result = fds_.erase(r.fd) ? 0 : -EBADF;
      return;
    case io::opcode::read: {
      node* n = file_for_fd(r.fd);
      if (n == nullptr || n->is_dir) {
        r.result = n == nullptr ? -EBADF : -EISDIR;
        return;
      }
      if (rng_.chance_ppm(faults_.read_error_ppm)) {
        r.result = -EIO;
        return;
      }
      if (r.offset >= n->data.size()) {
        r.result = 0;
        return;
      }
      const std::uint64_t len = std::min<std::uint64_t>(r.length, n->data.size() - r.offset);
      std::memcpy(r.buffer, n->data.data() + r.offset, len);
      r.result = static_cast<std::int64_t>(len);
      return;
    }
    case io::opcode::write:
    case io::opcode::writev: {
      node* n = file_for_fd(r.fd);
      if (n == nullptr || n->is_dir) {
        r.result = n == nullptr ? -EBADF : -EISDIR;
        return;
      }
      std::vector<std::byte> data;
      if (r.op == io::opcode::write) {
        data.assign(r.cbuffer, r.cbuffer + r.length);
      } else {
        for (unsigned i = 0; i < r.iov_count; ++i) {
          const auto* b = static_cast<const std::byte*>(r.iov[i].iov_base);
          data.insert(data.end(), b, b + r.iov[i].iov_len);
        }
      }
      if (rng_.chance_ppm(faults_.write_error_ppm)) {
        // A failed write may have landed in part.
        if (!data.empty() && rng_.chance_ppm(500'000)) {
          data.resize(rng_.below(data.size()));
          if (!data.empty()) {
            do_write(*n, r.offset, data);
          }
        }
        r.result = -EIO;
        return;
      }
      r.result = do_write(*n, r.offset, data);
      if (r.result > 0 && write_observer_) {
        write_observer_(fd_paths_[r.fd], r.offset, data);
      }
      return;
    }
    case io::opcode::fdatasync:
    case io::opcode::fsync:
      r.result = do_sync(r.fd);
      return;
    case io::opcode::drop_cache:
      r.result = do_drop_cache(r.fd);
      return;
    case io::opcode::accept:
    case io::opcode::recv:
    case io::opcode::send:
    case io::opcode::connect:
    case io::opcode::poll_readable:
    case io::opcode::cancel:
      r.result = -EOPNOTSUPP;  // a disk: the network is simulated elsewhere
      return;
    case io::opcode::writev_datasync: {
      io::request write = r;
      write.op = io::opcode::writev;
      --mutating_ops_;  // the write half counts as itself below
      --op_counts_[static_cast<std::size_t>(r.op)];
      apply(write);
      r.result = write.result;
      std::uint64_t total = 0;
      for (unsigned i = 0; i < r.iov_count; ++i) {
        total += r.iov[i].iov_len;
      }
      if (r.result < 0 || static_cast<std::uint64_t>(r.result) != total) {
        r.sync_result = -ECANCELED;
        return;
      }
      // The sync half is a mutating operation of its own: a crash can fall between the two.
      io::request sync = r;
      sync.op = io::opcode::fdatasync;
      apply(sync);
      r.sync_result = sync.result;
      return;
    }
    case io::opcode::ftruncate: {
      node* n = file_for_fd(r.fd);
      if (n == nullptr || n->is_dir) {
        r.result = n == nullptr ? -EBADF : -EISDIR;
        return;
      }
      r.result = do_truncate(*n, r.offset);
      return;
    }
    case io::opcode::reserve: {
      node* n = file_for_fd(r.fd);
      if (n == nullptr || n->is_dir) {
        r.result = n == nullptr ? -EBADF : -EISDIR;
        return;
      }
      r.result = do_reserve(*n, r.offset, r.length);
      return;
    }
    case io::opcode::rename:
      r.result = do_rename(r.path, r.path2);
      return;
    case io::opcode::unlink:
      r.result = do_unlink(r.path, false);
      return;
    case io::opcode::rmdir:
      r.result = do_unlink(r.path, true);
      return;
    case io::opcode::mkdir:
      r.result = do_mkdir(r.path);
      return;
    case io::opcode::list_dir:
      r.result = do_list(r);
      return;
    case io::opcode::file_size: {
      node* n = file_for_fd(r.fd);
      r.result = n == nullptr ? -EBADF : static_cast<std::int64_t>(n->data.size());
      return;
    }
  }
  r.result = -EINVAL;
}

std::int64_t sim_disk::do_open(io::request& r) {
  auto parts = split(r.path);
  std::shared_ptr<node> target;
  if (parts.empty()) {
    target = root_;
  } else {
    auto [parent, name] = resolve_parent(r.path);
    if (parent == nullptr) {
      return -ENOENT;
    }
    auto it = parent->entries.find(name);
    if (it != parent->entries.end()) {
      if ((r.flags & io::open_create) && (r.flags & io::open_exclusive)) {
        return -EEXIST;
      }
      target = it->second;
    } else {
      if (!(r.flags & io::open_create) || (r.flags & io::open_directory)) {
        return -ENOENT;
      }
      target = std::make_shared<node>(this, false);
      parent->entries.emplace(name, target);
    }
  }
  if (r.flags & io::open_directory) {
    if (!target->is_dir) {
      return -ENOTDIR;
    }
  } else if (target->is_dir) {
    return -EISDIR;
  } else if ((r.flags & io::open_truncate) && !(r.flags & io::open_read_only)) {
    do_truncate(*target, 0);
  }
  const int fd = next_fd_++;
  fds_.emplace(fd, std::move(target));
  fd_paths_.emplace(fd, r.path);
  open_fds_max_ = std::max(open_fds_max_, fds_.size());
  return fd;
}

std::int64_t sim_disk::do_write(node& n, std::uint64_t offset, const std::vector<std::byte>& data) {
  const std::uint64_t end = offset + data.size();
  const std::uint64_t size = n.data.size();
  if (!data.empty() &&
      !allocate(n, offset / block_bytes, (end + block_bytes - 1) / block_bytes, faults_.delayed_allocation)) {
    return -ENOSPC;
  }
  node::change c;
  c.offset = std::min(offset, size);
  c.old_size = size;
  if (offset < size) {
    c.old_bytes.assign(n.data.begin() + static_cast<std::ptrdiff_t>(offset),
                       n.data.begin() + static_cast<std::ptrdiff_t>(std::min(end, size)));
  }
  c.write_offset = offset;
  c.new_bytes = data;
  if (end > size) {
    n.resize(end);
  }
  if (!data.empty()) {
    std::memcpy(n.data.data() + offset, data.data(), data.size());
  }
  n.unsynced.push_back(std::move(c));
  ++n.changes_made;
  return static_cast<std::int64_t>(data.size());
}

std::int64_t sim_disk::do_truncate(node& n, std::uint64_t size) {
  const std::uint64_t old = n.data.size();
  node::change c;
  c.truncate = true;
  c.old_size = old;
  c.new_size = size;
  c.offset = std::min(size, old);
  if (size < old) {
    c.old_bytes.assign(n.data.begin() + static_cast<std::ptrdiff_t>(size), n.data.end());
  }
  n.resize(size);
  n.unsynced.push_back(std::move(c));
  ++n.changes_made;
  return 0;
}

bool sim_disk::allocate(node& n, std::uint64_t first, std::uint64_t end, bool delayed) {
  RILL_ASSERT(first <= end);
  if (n.blocks.size() < end) {
    n.blocks.resize(end, node::hole);
  }
  std::uint64_t holes = 0;
  for (std::uint64_t b = first; b < end; ++b) {
    holes += n.blocks[b] == node::hole ? 1 : 0;
  }
  if (!delayed && holes * block_bytes > free_bytes()) {
    return false;
  }
  for (std::uint64_t b = first; b < end; ++b) {
    if (n.blocks[b] == node::hole) {
      n.blocks[b] = delayed ? node::delayed : node::allocated;
    }
  }
  (delayed ? delayed_bytes_ : used_bytes_) += holes * block_bytes;
  return true;
}

std::int64_t sim_disk::do_reserve(node& n, std::uint64_t offset, std::uint64_t length) {
  if (length == 0) {
    return -EINVAL;
  }
  // Delayed blocks in the range become allocated too (fallocate allocates what delayed allocation had pending).
  const std::uint64_t first = offset / block_bytes;
  const std::uint64_t end = (offset + length + block_bytes - 1) / block_bytes;
  std::uint64_t waiting = 0;
  for (std::uint64_t b = first; b < std::min<std::uint64_t>(end, n.blocks.size()); ++b) {
    waiting += n.blocks[b] == node::delayed ? 1 : 0;
  }
  std::uint64_t holes = 0;
  for (std::uint64_t b = first; b < end; ++b) {
    holes += b >= n.blocks.size() || n.blocks[b] == node::hole ? 1 : 0;
  }
  if ((holes + waiting) * block_bytes > free_bytes()) {
    return -ENOSPC;
  }
  if (n.blocks.size() < end) {
    n.blocks.resize(end, node::hole);
  }
  for (std::uint64_t b = first; b < end; ++b) {
    n.blocks[b] = node::allocated;
  }
  used_bytes_ += (holes + waiting) * block_bytes;
  delayed_bytes_ -= waiting * block_bytes;
  return 0;
}

std::int64_t sim_disk::do_sync(int fd) {
  node* n = file_for_fd(fd);
  if (n == nullptr) {
    return -EBADF;
  }
  if (rng_.chance_ppm(faults_.sync_error_ppm)) {
    ++sync_errors_;
    // Nothing became durable; the unsynced changes may still be lost at a crash, and with failed_sync_loses_writes
    // those the sync covered never become durable (their pages are clean now).
    if (!n->is_dir && faults_.failed_sync_loses_writes) {
      const std::size_t covered = sync_snapshot_
                                      ? n->unsynced.size() - static_cast<std::size_t>(std::min<std::uint64_t>(
                                                                 n->changes_made - *sync_snapshot_, n->unsynced.size()))
                                      : n->unsynced.size();
      for (std::size_t i = 0; i < covered; ++i) {
        n->unsynced[i].lost = true;
      }
    }
    return -EIO;
  }
  if (!n->is_dir) {
    // Delayed allocation: the written blocks get their space now, or the sync fails and nothing becomes durable.
    const std::uint64_t waiting = n->delayed_blocks();
    if (waiting * block_bytes > free_bytes()) {
      return -ENOSPC;
    }
    for (auto& b : n->blocks) {
      if (b == node::delayed) {
        b = node::allocated;
      }
    }
    used_bytes_ += waiting * block_bytes;
    delayed_bytes_ -= waiting * block_bytes;
  }
  const bool any_lost =
      std::any_of(n->unsynced.begin(), n->unsynced.end(), [](const node::change& c) { return c.lost; });
  if (n->is_dir) {
    n->durable_entries = n->entries;
  } else if (any_lost) {
    const std::size_t since =
        sync_snapshot_
            ? static_cast<std::size_t>(std::min<std::uint64_t>(n->changes_made - *sync_snapshot_, n->unsynced.size()))
            : 0;
    sync_around_lost(*n, n->unsynced.size() - since);
  } else if (sync_snapshot_) {
    // Only what was applied before the sync was submitted: the changes since stay unsynced (their undo records are
    // relative to the state before them, which is now durable).
    RILL_ASSERT(*sync_snapshot_ <= n->changes_made);
    const auto since =
        static_cast<std::size_t>(std::min<std::uint64_t>(n->changes_made - *sync_snapshot_, n->unsynced.size()));
    n->unsynced.erase(n->unsynced.begin(), n->unsynced.end() - static_cast<std::ptrdiff_t>(since));
  } else {
    n->unsynced.clear();
  }
  return 0;
}

namespace {
// Applies a change forward onto `d`: what it wrote, or the size it set.
void redo(std::vector<std::byte>& d, const sim_disk::node_change& c) {
  if (c.truncate) {
    d.resize(c.new_size);
    return;
  }
  if (d.size() < c.write_offset + c.new_bytes.size()) {
    d.resize(c.write_offset + c.new_bytes.size());
  }
  std::copy(c.new_bytes.begin(), c.new_bytes.end(), d.begin() + static_cast<std::ptrdiff_t>(c.write_offset));
}

// Undoes a change on `d` (it must be the state right after the change).
void undo(std::vector<std::byte>& d, const sim_disk::node_change& c) {
  const std::uint64_t need = c.offset + c.old_bytes.size();
  if (d.size() < need) {
    d.resize(need);
  }
  std::copy(c.old_bytes.begin(), c.old_bytes.end(), d.begin() + static_cast<std::ptrdiff_t>(c.offset));
  d.resize(c.old_size);
}
}  // namespace

std::vector<std::byte> sim_disk::durable_image(const node& n) {
  std::vector<std::byte> d = n.data;
  for (auto it = n.unsynced.rbegin(); it != n.unsynced.rend(); ++it) {
    undo(d, *it);
  }
  return d;
}

void sim_disk::sync_around_lost(node& n, std::size_t covered) {
  RILL_ASSERT(covered <= n.unsynced.size());
  // D1: durable after this sync (the durable content with the covered changes that are not lost applied).
  // S: the cache as it was after the covered changes (the later ones undone).
  std::vector<std::byte> d1 = durable_image(n);
  for (std::size_t i = 0; i < covered; ++i) {
    if (!n.unsynced[i].lost) {
      redo(d1, n.unsynced[i]);
    }
  }
  std::vector<std::byte> s = n.data;
  for (std::size_t i = n.unsynced.size(); i-- > covered;) {
    undo(s, n.unsynced[i]);
  }
  std::vector<node_change> kept(n.unsynced.begin() + static_cast<std::ptrdiff_t>(covered), n.unsynced.end());
  n.unsynced.clear();
  if (s != d1) {
    // One lost change that turns S back into D1, from their first differing byte on.
    std::uint64_t first = 0;
    const std::uint64_t common = std::min(s.size(), d1.size());
    while (first < common && s[first] == d1[first]) {
      ++first;
    }
    node_change c;
    c.lost = true;
    c.offset = first;
    c.old_size = d1.size();
    if (first < d1.size()) {
      c.old_bytes.assign(d1.begin() + static_cast<std::ptrdiff_t>(first), d1.end());
    }
    n.unsynced.push_back(std::move(c));
  }
  for (auto& c : kept) {
    n.unsynced.push_back(std::move(c));
  }
}

std::int64_t sim_disk::do_drop_cache(int fd) {
  node* n = file_for_fd(fd);
  if (n == nullptr) {
    return -EBADF;
  }
  if (n->is_dir || std::none_of(n->unsynced.begin(), n->unsynced.end(), [](const node_change& c) { return c.lost; })) {
    return 0;  // every cached page is durable or dirty: a read from the device gives what the cache holds
  }
  // The lost changes' pages are clean and go; the dirty ones stay: the cache becomes the durable content with the
  // changes that are not lost applied again, in order, each recorded against what it now overwrites.
  std::vector<node_change> changes = std::move(n->unsynced);
  n->unsynced.clear();
  std::vector<std::byte> d = n->data;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    undo(d, *it);
  }
  for (const auto& c : changes) {
    if (c.lost) {
      continue;
    }
    node_change again = c;
    again.old_size = d.size();
    again.old_bytes.clear();
    if (c.truncate) {
      again.offset = std::min<std::uint64_t>(c.new_size, d.size());
      if (c.new_size < d.size()) {
        again.old_bytes.assign(d.begin() + static_cast<std::ptrdiff_t>(c.new_size), d.end());
      }
    } else {
      const std::uint64_t end = c.write_offset + c.new_bytes.size();
      again.offset = std::min<std::uint64_t>(c.write_offset, d.size());
      if (c.write_offset < d.size()) {
        again.old_bytes.assign(d.begin() + static_cast<std::ptrdiff_t>(c.write_offset),
                               d.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(end, d.size())));
      }
    }
    redo(d, c);
    n->unsynced.push_back(std::move(again));
  }
  n->resize(d.size());
  n->data = std::move(d);
  return 0;
}

std::int64_t sim_disk::do_rename(const std::string& from, const std::string& to) {
  auto [src_dir, src_name] = resolve_parent(from);
  auto [dst_dir, dst_name] = resolve_parent(to);
  if (src_dir == nullptr || dst_dir == nullptr) {
    return -ENOENT;
  }
  auto it = src_dir->entries.find(src_name);
  if (it == src_dir->entries.end()) {
    return -ENOENT;
  }
  std::shared_ptr<node> moving = it->second;
  auto existing = dst_dir->entries.find(dst_name);
  if (existing != dst_dir->entries.end() && existing->second->is_dir != moving->is_dir) {
    return moving->is_dir ? -ENOTDIR : -EISDIR;
  }
  src_dir->entries.erase(it);
  dst_dir->entries[dst_name] = std::move(moving);
  return 0;
}

std::int64_t sim_disk::do_unlink(const std::string& path, bool dir) {
  auto [parent, name] = resolve_parent(path);
  if (parent == nullptr) {
    return -ENOENT;
  }
  auto it = parent->entries.find(name);
  if (it == parent->entries.end()) {
    return -ENOENT;
  }
  if (it->second->is_dir != dir) {
    return dir ? -ENOTDIR : -EISDIR;
  }
  if (dir && !it->second->entries.empty()) {
    return -ENOTEMPTY;
  }
  parent->entries.erase(it);
  return 0;
}

std::int64_t sim_disk::do_mkdir(const std::string& path) {
  auto [parent, name] = resolve_parent(path);
  if (parent == nullptr) {
    return split(path).empty() ? -EEXIST : -ENOENT;
  }
  if (parent->entries.count(name)) {
    return -EEXIST;
  }
  parent->entries.emplace(name, std::make_shared<node>(this, true));
  return 0;
}

std::int64_t sim_disk::do_list(io::request& r) {
  node* n = resolve(r.path);
  if (n == nullptr) {
    return -ENOENT;
  }
  if (!n->is_dir) {
    return -ENOTDIR;
  }
  r.names->clear();
  for (const auto& [name, child] : n->entries) {
    r.names->push_back(name);
  }
  return static_cast<std::int64_t>(r.names->size());
}

void sim_disk::crash_file(node& f) {
  // Blocks waiting for delayed allocation were never durable: their space goes (whatever of their bytes lands
  // below is kept in the content without a block of its own, an undercount a simulation can live with).
  for (auto& b : f.blocks) {
    if (b == node::delayed) {
      b = node::hole;
      delayed_bytes_ -= block_bytes;
    }
  }
  if (f.unsynced.empty()) {
    return;
  }
  // Allocation survives the crash (fallocate's reservations, blocks of what was written): the content goes back
  // below, the blocks are put back after it.
  const std::vector<std::uint8_t> blocks = f.blocks;
  for (auto it = f.unsynced.rbegin(); it != f.unsynced.rend(); ++it) {
    const auto& c = *it;
    const std::uint64_t need = c.offset + c.old_bytes.size();
    if (f.data.size() < need) {
      f.resize(need);
    }
    if (!c.old_bytes.empty()) {
      std::memcpy(f.data.data() + c.offset, c.old_bytes.data(), c.old_bytes.size());
    }
    f.resize(c.old_size);
  }
  // ...then some of what was not synced lands anyway, whole or torn, in order.
  constexpr std::uint64_t sector = 512;
  for (const auto& c : f.unsynced) {
    if (c.lost) {
      continue;  // its writeback failed: the device never got it
    }
    const std::uint32_t roll = static_cast<std::uint32_t>(rng_.below(1'000'000));
    const bool keep = roll < faults_.crash_keep_ppm;
    const bool torn = !keep && roll < faults_.crash_keep_ppm + faults_.crash_torn_ppm;
    if (c.truncate) {
      if (keep || torn) {
        f.resize(c.new_size);
      }
      continue;
    }
    if (!keep && !torn) {
      continue;
    }
    std::uint64_t pos = c.write_offset;
    const std::uint64_t end = c.write_offset + c.new_bytes.size();
    while (pos < end) {
      const std::uint64_t chunk_end = std::min(end, (pos / sector + 1) * sector);
      if (keep || rng_.chance_ppm(500'000)) {
        if (f.data.size() < chunk_end) {
          f.resize(chunk_end);
        }
        std::memcpy(f.data.data() + pos, c.new_bytes.data() + (pos - c.write_offset), chunk_end - pos);
      }
      pos = chunk_end;
    }
  }
  f.unsynced.clear();
  std::uint64_t before = 0;
  for (auto b : f.blocks) {
    before += b == node::allocated ? 1 : 0;
  }
  std::uint64_t after = 0;
  for (auto b : blocks) {
    after += b == node::allocated ? 1 : 0;
  }
  f.blocks = blocks;
  used_bytes_ = used_bytes_ - before * block_bytes + after * block_bytes;
}

void sim_disk::crash_dir(node& dir) {
  dir.entries = dir.durable_entries;
  for (auto& [name, child] : dir.entries) {
    if (child->is_dir) {
      crash_dir(*child);
    } else {
      crash_file(*child);
    }
  }
}

void sim_disk::crash() {
  RILL_ASSERT(queue_.empty(), "crash() with {} requests in flight: stop the disk and drain first", queue_.size());
  fds_.clear();
  fd_paths_.clear();
  // Files reachable only through non-durable entries vanish with them; the others lose unsynced content.
  crash_dir(*root_);
  stopped_ = false;
  stop_at_.reset();
}

void sim_disk::wipe() {
  RILL_ASSERT(queue_.empty(), "wipe() with {} requests in flight", queue_.size());
  fds_.clear();
  fd_paths_.clear();
  root_ = std::make_shared<node>(this, true);  // the old tree's blocks are freed with it
  RILL_ASSERT(used_bytes_ == 0 && delayed_bytes_ == 0, "a wiped disk still counts {} bytes used, {} delayed",
              used_bytes_, delayed_bytes_);
  stopped_ = false;
  stop_at_.reset();
}

void sim_disk::restart_process() {
  RILL_ASSERT(queue_.empty(), "restart_process() with {} requests in flight", queue_.size());
  fds_.clear();
  fd_paths_.clear();
  stopped_ = false;
  stop_at_.reset();
}

void sim_disk::flip_bits(const std::string& path, std::uint64_t byte_offset, std::uint8_t mask) {
  node* n = resolve(path);
  RILL_ASSERT(n != nullptr && !n->is_dir, "flip_bits: no file {}", path);
  RILL_ASSERT(byte_offset < n->data.size(), "flip_bits: byte {} beyond {} bytes of {}", byte_offset, n->data.size(),
              path);
  n->data[byte_offset] ^= static_cast<std::byte>(mask);
}

void sim_disk::set_file_content(const std::string& path, std::vector<std::byte> content) {
  auto [parent, name] = resolve_parent(path);
  RILL_ASSERT(parent != nullptr, "set_file_content: no directory for {}", path);
  auto& slot = parent->entries[name];
  if (!slot) {
    slot = std::make_shared<node>(this, false);
  }
  RILL_ASSERT(!slot->is_dir);
  slot->resize(content.size());
  std::copy(content.begin(), content.end(), slot->data.begin());
  slot->unsynced.clear();
  parent->durable_entries[name] = slot;
}

void sim_disk::remove_file(const std::string& path) {
  auto [parent, name] = resolve_parent(path);
  RILL_ASSERT(parent != nullptr && parent->entries.count(name), "remove_file: no file {}", path);
  parent->entries.erase(name);
  parent->durable_entries.erase(name);
}

std::optional<std::vector<std::byte>> sim_disk::file_content(const std::string& path) const {
  node* n = resolve(path);
  if (n == nullptr || n->is_dir) {
    return std::nullopt;
  }
  return n->data;
}

bool sim_disk::exists(const std::string& path) const {
  return resolve(path) != nullptr;
}

std::vector<std::string> sim_disk::list(const std::string& dir) const {
  std::vector<std::string> out;
  node* n = resolve(dir);
  if (n != nullptr && n->is_dir) {
    for (const auto& [name, child] : n->entries) {
      out.push_back(name);
    }
  }
  return out;
}

bool sim_disk::durable_matches(const std::string& path, std::uint64_t offset, std::uint64_t length) const {
  // Reachable through durable entries: each directory on the way (and the file) must be there after a crash.
  const node* n = root_.get();
  const node* durable = root_.get();
  for (const auto& part : split(path)) {
    if (n == nullptr || !n->is_dir) {
      return false;
    }
    auto it = n->entries.find(part);
    auto dt = durable->durable_entries.find(part);
    if (it == n->entries.end() || dt == durable->durable_entries.end() || it->second != dt->second) {
      return false;
    }
    n = it->second.get();
    durable = dt->second.get();
  }
  if (n == nullptr || n->is_dir || offset + length > n->data.size()) {
    return false;
  }
  // The durable content of the window: the cache's, with every unsynced change undone within it.
  std::vector<std::byte> window(n->data.begin() + static_cast<std::ptrdiff_t>(offset),
                                n->data.begin() + static_cast<std::ptrdiff_t>(offset + length));
  // Undone newest first, each change's old bytes restore what it overwrote or cut; the durable size is the one
  // before the oldest unsynced change (every byte of a window within it is restored by some undo, or never changed).
  for (auto it = n->unsynced.rbegin(); it != n->unsynced.rend(); ++it) {
    const auto& c = *it;
    for (std::uint64_t i = 0; i < c.old_bytes.size(); ++i) {
      const std::uint64_t at = c.offset + i;
      if (at >= offset && at < offset + length) {
        window[at - offset] = c.old_bytes[i];
      }
    }
  }
  const std::uint64_t durable_size = n->unsynced.empty() ? n->data.size() : n->unsynced.front().old_size;
  if (durable_size < offset + length) {
    return false;  // the durable file ends inside the window
  }
  return std::equal(window.begin(), window.end(), n->data.begin() + static_cast<std::ptrdiff_t>(offset));
}

std::optional<std::vector<std::byte>> sim_disk::read_range(const std::string& path, std::uint64_t offset,
                                                           std::uint64_t length) const {
  const node* n = resolve(path);
  if (n == nullptr || n->is_dir || offset + length > n->data.size()) {
    return std::nullopt;
  }
  return std::vector<std::byte>(n->data.begin() + static_cast<std::ptrdiff_t>(offset),
                                n->data.begin() + static_cast<std::ptrdiff_t>(offset + length));
}

std::size_t sim_disk::unsynced_ops(const std::string& path) const {
  node* n = resolve(path);
  return n == nullptr ? 0 : n->unsynced.size();
}

}  // namespace rill::simulation
