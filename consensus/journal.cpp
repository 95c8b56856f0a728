#include "consensus/journal.h"

#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include "base/endian.h"
#include "storage/errc.h"
#include "storage/file_ops.h"

namespace rill::consensus {
namespace {
using storage::errc;
using storage::make_unexpected;

constexpr std::uint64_t page = 4096;
constexpr std::uint64_t sector = 512;
constexpr std::uint64_t scan_chunk_bytes =
    8 * 1024 * 1024;  // the recovery scan reads the prepare ring this much at once

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

constexpr std::uint32_t superblock_magic = 0x52534250;             // "RSBP"
constexpr std::size_t superblock_prefix = 4 + 4 + 8 + 4 + 4 + 16;  // magic, version, sequence, length, 0, checksum

static_assert(page % sector == 0);
static_assert(page % header::encoded_size == 0, "the prepare ring starts on a page after whole header slots");
static_assert(journal_options{}.message_size_max % sector == 0);
static_assert(journal_options{}.message_size_max >= sector);
static_assert(journal_options{}.slot_count >= 1);
static_assert(journal_options{}.slot_count <= journal_slot_count_max);
static_assert(scan_chunk_bytes % sector == 0);
// Each update writes two copies and never the two holding the previous update: four copies at least, in pairs.
static_assert(superblock::copies >= 4);
static_assert(superblock::copies % 2 == 0);
static_assert(superblock::copy_size % sector == 0);
// The largest vsr_state a replica persists (pipeline_max_limit + 1 view headers) fits one copy.
static_assert(superblock_prefix + vsr_state_fixed_size + (pipeline_max_limit + 1) * header::encoded_size <=
              superblock::copy_size);
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// journal

namespace {
// The header ring, padded to a page: where the prepare ring starts.
std::uint64_t header_ring_bytes(std::uint64_t slot_count) noexcept {
  return (slot_count * header::encoded_size + page - 1) / page * page;
}
}  // namespace

std::uint64_t journal_file_bytes(const journal_options& o) noexcept {
  return header_ring_bytes(o.slot_count) + o.slot_count * o.message_size_max;
}

std::optional<std::uint64_t> journal_slot_count_of(std::uint64_t file_bytes, std::uint32_t message_size_max) noexcept {
  // slots * message_size_max <= file_bytes < slots * (message_size_max + 128) + one page: a handful of candidates.
  const std::uint64_t lowest = std::max<std::uint64_t>(1, file_bytes / (message_size_max + header::encoded_size));
  for (std::uint64_t slots = lowest; slots <= file_bytes / message_size_max; ++slots) {
    if (journal_file_bytes(journal_options{slots, message_size_max}) == file_bytes) {
      return slots;
    }
  }
  return std::nullopt;
}

std::uint64_t journal::prepares_offset() const noexcept {
  const std::uint64_t offset = header_ring_bytes(options_.slot_count);
  RILL_ASSERT(offset % page == 0);
  RILL_ASSERT(offset >= options_.slot_count * header::encoded_size, "the header ring overlaps the prepare ring");
  return offset;
}

task<expected<std::unique_ptr<journal>>> journal::open(storage::io::engine& e, std::string dir, journal_options o,
                                                       bool create, journal_recovery& recovered,
                                                       storage::file_cache* files) {
  if (o.slot_count == 0 || o.slot_count > journal_slot_count_max) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("journal slot_count {}: allowed is 1..{}",
                                                                  o.slot_count, journal_slot_count_max));
  }
  if (o.message_size_max < sector || o.message_size_max % sector != 0 || o.message_size_max > 64 * 1024 * 1024) {
    co_return make_unexpected(
        errc::invalid_argument,
        fmt::format("journal message_size_max {}: allowed is a multiple of 512 in [512, 64 MiB]", o.message_size_max));
  }
  const std::string path = dir + "/journal.wal";
  std::uint32_t flags = 0;
  if (create) {
    flags |= storage::io::open_create;
  }
  std::unique_ptr<journal> j(new journal(e, path, o));
  if (files == nullptr) {
    j->own_files_ = std::make_unique<storage::file_cache>(storage::file_cache::files_unlimited);
    files = j->own_files_.get();
  }
  RILL_CO_TRY_VOID(co_await j->file_.create(e, *files, path, flags, 0));
  RILL_CO_TRY(pin, co_await j->file_.pin(e));
  const int fd = pin.fd();
  RILL_ASSERT(recovered.valid.empty(), "journal::open fills a fresh journal_recovery");
  RILL_ASSERT(recovered.faulty.empty());
  RILL_ASSERT(recovered.faulty_slots.empty());
  const std::uint64_t size = journal_file_bytes(o);
  RILL_CO_TRY(current, co_await storage::size_of_file(e, fd, path));
  if (current == 0 && create) {
    // Sized and reserved whole at creation (never sparse), so a full disk never fails a journal write or its sync.
    RILL_CO_TRY_VOID(co_await storage::truncate_file(e, fd, size, path));
    RILL_CO_TRY(reserved, co_await storage::reserve_file(e, fd, 0, size, path));
    if (!reserved) {
      // No fallocate here: the new file is all zeros, so writing them is the reservation.
      RILL_CO_TRY_VOID(co_await storage::write_zeros(e, fd, 0, size, path));
    }
    RILL_CO_TRY_VOID(co_await storage::datasync_file(e, fd, path));
    RILL_CO_TRY_VOID(co_await storage::sync_dir(e, dir));
    co_return j;  // all zero: nothing to recover
  }
  if (current != size) {
    co_return make_unexpected(errc::invalid_argument, fmt::format("{} is {} bytes; {} slots of {} bytes need {}", path,
                                                                  current, o.slot_count, o.message_size_max, size));
  }
  // A journal created sparse (by a build before the reservation) gets its blocks now; with the disk full, or no
  // fallocate, it stays as it was (never zero-filled: it holds data): not a reason to refuse the start.
  (void)co_await storage::reserve_file(e, fd, 0, size, path);
  // Recovery trusts what it reads below: it must be what the disk holds (storage::settle_file: the unsynced writes
  // of a crashed process made durable, the pages of a failed fdatasync dropped from the cache), or a slot this
  // replica acknowledges again could read as never written after a power loss.
  RILL_CO_TRY_VOID(co_await storage::settle_file(e, fd, path));
  // The header ring, whole.
  std::vector<std::byte> headers(o.slot_count * header::encoded_size);
  RILL_CO_TRY(got, co_await storage::read_at(e, fd, 0, headers, path));
  if (got != headers.size()) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: short read of the header ring", path));
  }
  // The prepare ring, in chunks of whole slots.
  const std::uint64_t slots_per_chunk = std::max<std::uint64_t>(1, scan_chunk_bytes / o.message_size_max);
  std::vector<std::byte> chunk;
  for (std::uint64_t first = 0; first < o.slot_count; first += slots_per_chunk) {
    const std::uint64_t n = std::min(slots_per_chunk, o.slot_count - first);
    chunk.resize(n * o.message_size_max);
    RILL_CO_TRY(read, co_await storage::read_at(e, fd, j->prepares_offset() + first * o.message_size_max, chunk, path));
    if (read != chunk.size()) {
      co_return make_unexpected(errc::corrupt_data, fmt::format("{}: short read of the prepare ring", path));
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t slot = first + i;
      const auto hbytes =
          std::span<const std::byte>(headers).subspan(slot * header::encoded_size, header::encoded_size);
      const auto pbytes = std::span<const std::byte>(chunk).subspan(i * o.message_size_max, o.message_size_max);
      auto h = decode_header(hbytes);
      const bool h_ok = h && h->cmd == command::prepare && h->op % o.slot_count == slot;
      std::optional<header> p;
      if (auto ph = decode_header(pbytes); ph && ph->cmd == command::prepare && ph->op % o.slot_count == slot) {
        if (o.detached_operation != operation_root && ph->operation == o.detached_operation) {
          p = *ph;  // its header alone (the body is the owner's)
        } else if (ph->size <= o.message_size_max) {
          if (auto m = decode(pbytes.first(ph->size)); m) {
            p = m->h;
          }
        }
      }
      const bool p_zero = !p && all_zero(pbytes.first(header::encoded_size));
      if (p) {
        recovered.valid.push_back(*p);
        if (h_ok && h->op > p->op) {
          recovered.faulty.push_back(*h);
        }
      } else if (h_ok) {
        recovered.faulty.push_back(*h);
      } else if (!p_zero) {
        recovered.faulty_slots.push_back(slot);
      }
    }
  }
  co_return j;
}

journal::~journal() = default;

task<expected<void>> journal::write(const message& prepare) {
  RILL_ASSERT(prepare.h.cmd == command::prepare);
  RILL_ASSERT(is_detached(prepare.h) || prepare.h.size == header::encoded_size + prepare.body.size());
  RILL_ASSERT(!is_detached(prepare.h) || prepare.body.empty(), "a detached prepare's body is not the journal's");
  RILL_ASSERT(prepare.h.op > 0, "op 0 is the root: never prepared, never written");
  RILL_ASSERT(file_.attached(), "a write after close()");
  const bool detached = is_detached(prepare.h);
  if (!detached && prepare.h.size > options_.message_size_max) {
    co_return make_unexpected(errc::invalid_argument,
                              fmt::format("prepare of op {} is {} bytes; the journal holds at most {}", prepare.h.op,
                                          prepare.h.size, options_.message_size_max));
  }
  const std::uint64_t slot = prepare.h.op % options_.slot_count;
  std::vector<std::byte> bytes;
  if (detached) {
    bytes.resize(header::encoded_size);
    encode_header(prepare.h, bytes.data());
  } else {
    bytes = encode(prepare);
  }
  RILL_CO_TRY(pin, co_await file_.pin(*engine_));
  const int fd = pin.fd();
  RILL_CO_TRY_VOID(
      co_await storage::write_all(*engine_, fd, prepares_offset() + slot * options_.message_size_max, bytes, path_));
  RILL_CO_TRY_VOID(co_await datasync(fd));
  // The redundant header only once the prepare is durable (the next write's sync covers it): a valid header beside
  // an unreadable prepare then always means a durable prepare lost, never a write torn by a crash. Until a sync
  // covers it, the descriptor stays open (the file is marked unsynced).
  ++headers_in_flight_;
  file_.mark_unsynced();
  auto written = co_await storage::write_all(*engine_, fd, slot * header::encoded_size,
                                             std::span(bytes).first(header::encoded_size), path_);
  --headers_in_flight_;
  if (written) {
    ++headers_written_;
  }
  settle_marks();
  co_return written;
}

task<expected<void>> journal::datasync(int fd) {
  if (sync_failed_) {
    co_return rill::unexpected(*sync_failed_);
  }
  const std::uint64_t covered = headers_written_;  // header writes complete before the sync starts
  auto synced = co_await storage::datasync_file(*engine_, fd, path_);
  if (!synced && !sync_failed_) {
    sync_failed_ = synced.error();
  }
  if (sync_failed_) {
    co_return rill::unexpected(*sync_failed_);  // (this sync's own error, or one a concurrent sync was told)
  }
  headers_synced_ = std::max(headers_synced_, covered);
  settle_marks();
  co_return expected<void>{};
}

void journal::settle_marks() {
  RILL_ASSERT(headers_synced_ <= headers_written_);
  if (!sync_failed_ && headers_in_flight_ == 0 && headers_synced_ == headers_written_ && file_.attached()) {
    file_.mark_synced();
  }
}

task<expected<void>> journal::sync_headers() {
  if (!headers_unsynced() && headers_in_flight_ == 0) {
    co_return expected<void>{};
  }
  RILL_CO_TRY(pin, co_await file_.pin(*engine_));
  co_return co_await datasync(pin.fd());
}

task<expected<message>> journal::read(std::uint64_t op, checksum_t checksum) {
  RILL_ASSERT(op > 0, "op 0 is the root: never in the journal");
  RILL_ASSERT(!checksum.zero());
  RILL_ASSERT(file_.attached(), "a read after close()");
  const std::uint64_t slot = op % options_.slot_count;
  std::vector<std::byte> head(header::encoded_size);
  const std::uint64_t at = prepares_offset() + slot * options_.message_size_max;
  RILL_CO_TRY(pin, co_await file_.pin(*engine_));
  RILL_CO_TRY(got, co_await storage::read_at(*engine_, pin.fd(), at, head, path_));
  if (got != head.size()) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: short read at slot {}", path_, slot));
  }
  auto h = decode_header(head);
  if (!h || h->op != op || h->checksum != checksum || (!is_detached(*h) && h->size > options_.message_size_max)) {
    co_return make_unexpected(errc::corrupt_data,
                              fmt::format("{}: slot {} does not hold op {} {}", path_, slot, op, to_string(checksum)));
  }
  if (is_detached(*h)) {
    message m;
    m.h = *h;  // one read: the header is the whole of what the slot holds for it
    co_return m;
  }
  std::vector<std::byte> bytes(h->size);
  RILL_CO_TRY(got2, co_await storage::read_at(*engine_, pin.fd(), at, bytes, path_));
  if (got2 != bytes.size()) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: short read at slot {}", path_, slot));
  }
  RILL_CO_TRY(m, decode(bytes));
  // The slot is read twice (the header for the size, then the whole prepare): a write of the op a ring's length
  // above may land in between (the replica reads applied ops to serve peers while it writes new ones), and then
  // the bytes are another op's, valid on their own.
  if (m.h.op != op || m.h.checksum != checksum) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: slot {} was overwritten by op {} while op {} {} "
                                                              "was read",
                                                              path_, slot, m.h.op, op, to_string(checksum)));
  }
  RILL_ASSERT(m.h.size == bytes.size());
  co_return m;
}

task<expected<void>> journal::close() {
  if (!file_.attached()) {
    co_return expected<void>{};
  }
  co_return co_await file_.close(*engine_);
}

// ---------------------------------------------------------------------------------------------------------------
// superblock

namespace {
std::vector<std::byte> encode_copy(std::uint64_t sequence, const vsr_state& s) {
  RILL_ASSERT(sequence >= 1, "sequence 0 is never written (open takes the highest)");
  const auto payload = encode(s);
  RILL_ASSERT(superblock_prefix + payload.size() <= superblock::copy_size, "vsr_state of {} bytes", payload.size());
  std::vector<std::byte> out(superblock::copy_size);
  store_le<std::uint32_t>(out.data(), superblock_magic);
  store_le<std::uint32_t>(out.data() + 4, 1);
  store_le<std::uint64_t>(out.data() + 8, sequence);
  store_le<std::uint32_t>(out.data() + 16, static_cast<std::uint32_t>(payload.size()));
  std::memcpy(out.data() + superblock_prefix, payload.data(), payload.size());
  std::vector<std::byte> covered(out.begin() + 8, out.begin() + 24);
  covered.insert(covered.end(), payload.begin(), payload.end());
  const checksum_t c = checksum_of(covered, 3);
  store_le<std::uint64_t>(out.data() + 24, c.low);
  store_le<std::uint64_t>(out.data() + 32, c.high);
  RILL_ASSERT(out.size() == superblock::copy_size);
  return out;
}

std::optional<std::pair<std::uint64_t, vsr_state>> decode_copy(std::span<const std::byte> in) {
  if (load_le<std::uint32_t>(in.data()) != superblock_magic || load_le<std::uint32_t>(in.data() + 4) != 1) {
    return std::nullopt;
  }
  const std::uint64_t sequence = load_le<std::uint64_t>(in.data() + 8);
  const std::uint32_t length = load_le<std::uint32_t>(in.data() + 16);
  if (superblock_prefix + length > in.size()) {
    return std::nullopt;
  }
  std::vector<std::byte> covered(in.begin() + 8, in.begin() + 24);
  covered.insert(covered.end(), in.begin() + superblock_prefix, in.begin() + superblock_prefix + length);
  const checksum_t c = checksum_of(covered, 3);
  if (c.low != load_le<std::uint64_t>(in.data() + 24) || c.high != load_le<std::uint64_t>(in.data() + 32)) {
    return std::nullopt;
  }
  auto s = decode_vsr_state(in.subspan(superblock_prefix, length));
  if (!s) {
    return std::nullopt;
  }
  return std::make_pair(sequence, std::move(*s));
}
}  // namespace

task<expected<std::unique_ptr<superblock>>> superblock::open(storage::io::engine& e, std::string dir, bool create,
                                                             const vsr_state& initial, storage::file_cache* files) {
  const std::string path = dir + "/superblock";
  std::unique_ptr<superblock> sb(new superblock(e, path));
  if (files == nullptr) {
    sb->own_files_ = std::make_unique<storage::file_cache>(storage::file_cache::files_unlimited);
    files = sb->own_files_.get();
  }
  RILL_CO_TRY_VOID(co_await sb->file_.create(e, *files, path, create ? storage::io::open_create : 0u, 0));
  RILL_CO_TRY(pin, co_await sb->file_.pin(e));
  const int fd = pin.fd();
  RILL_CO_TRY(size, co_await storage::size_of_file(e, fd, path));
  if (size == 0) {
    if (!create) {
      co_return make_unexpected(errc::not_found, fmt::format("{} is empty", path));
    }
    std::vector<std::byte> all;
    for (std::size_t i = 0; i < copies; ++i) {
      auto c = encode_copy(1, initial);
      all.insert(all.end(), c.begin(), c.end());
    }
    RILL_CO_TRY_VOID(co_await storage::write_all(e, fd, 0, all, path));
    RILL_CO_TRY_VOID(co_await storage::datasync_file(e, fd, path));
    RILL_CO_TRY_VOID(co_await storage::sync_dir(e, dir));
    sb->state_ = initial;
    sb->sequence_ = 1;
    sb->created_ = true;
    co_return sb;
  }
  std::vector<std::byte> all(copies * copy_size);
  RILL_CO_TRY_VOID(co_await storage::settle_file(e, fd, path));  // (as the journal's: what is trusted is on disk)
  RILL_CO_TRY(got, co_await storage::read_at(e, fd, 0, all, path));
  std::optional<std::pair<std::uint64_t, vsr_state>> best;
  for (std::size_t i = 0; i < copies && (i + 1) * copy_size <= got; ++i) {
    auto c = decode_copy(std::span<const std::byte>(all).subspan(i * copy_size, copy_size));
    if (c && (!best || c->first > best->first)) {
      best = std::move(c);
    }
  }
  if (!best) {
    co_return make_unexpected(errc::corrupt_data, fmt::format("{}: no valid copy of the vsr state", path));
  }
  RILL_ASSERT(best->first >= 1, "a valid copy has a sequence of 1 or more");
  sb->sequence_ = best->first;
  sb->state_ = std::move(best->second);
  co_return sb;
}

superblock::~superblock() = default;

task<expected<void>> superblock::write(vsr_state next) {
  // A superblock belongs to one replica, and what it records never goes back (vsr_state.h).
  RILL_ASSERT(next.cluster == state_.cluster, "superblock of cluster {} written for cluster {}", state_.cluster,
              next.cluster);
  RILL_ASSERT(next.replica == state_.replica);
  RILL_ASSERT(next.replica_count == state_.replica_count);
  RILL_ASSERT(next.view >= state_.view, "view {} would go back to {}", state_.view.value(), next.view.value());
  RILL_ASSERT(next.log_view >= state_.log_view);
  RILL_ASSERT(next.checkpoint.op() >= state_.checkpoint.op());
  RILL_ASSERT(sequence_ >= 1);
  // ... and it is valid: what decode_vsr_state would refuse at the next open is never written.
  RILL_ASSERT(next.replica < next.replica_count);
  RILL_ASSERT(next.log_view <= next.view, "log view {} above view {}", next.log_view.value(), next.view.value());
  RILL_ASSERT(next.checkpoint.slot <= 1);
  RILL_ASSERT(next.checkpoint.op() <= next.commit.value(), "checkpoint op {} above commit {}", next.checkpoint.op(),
              next.commit.value());
  RILL_ASSERT(next.view_headers.size() <= view_headers_max);
  RILL_ASSERT(headers_chained(next.view_headers), "the view headers are not a hash-chained run of ops");
  const std::uint64_t sequence = sequence_ + 1;
  const auto bytes = encode_copy(sequence, next);
  // Two copies per update, rotating: copies (2s, 2s+1) mod 4, never the two holding the previous update.
  const std::size_t first = static_cast<std::size_t>((sequence * 2) % copies);
  RILL_CO_TRY(pin, co_await file_.pin(*engine_));  // (held through the sync: the writes reach it)
  RILL_CO_TRY_VOID(co_await storage::write_all(*engine_, pin.fd(), first * copy_size, bytes, path_));
  RILL_CO_TRY_VOID(co_await storage::write_all(*engine_, pin.fd(), ((first + 1) % copies) * copy_size, bytes, path_));
  RILL_CO_TRY_VOID(co_await storage::datasync_file(*engine_, pin.fd(), path_));
  sequence_ = sequence;
  state_ = std::move(next);
  co_return expected<void>{};
}

task<expected<void>> superblock::close() {
  if (!file_.attached()) {
    co_return expected<void>{};
  }
  co_return co_await file_.close(*engine_);
}

}  // namespace rill::consensus
