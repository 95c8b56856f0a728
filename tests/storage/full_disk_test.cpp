// A full disk and storage failures: the simulated disk's space model (sparse blocks, reservations, delayed
// allocation failing fdatasync with ENOSPC, as ext4 may), and a fenced partition log recovered in place, which
// trusts nothing above the synced end it had even when the page cache still holds valid-looking batches there.
#include <boost/test/unit_test.hpp>

#include "storage/errc.h"
#include "storage/file_ops.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {
constexpr std::uint64_t block = sim_disk::block_bytes;

int open_new(sim_disk& d, const std::string& path) {
  auto fd = run(d, open_file(d, path, io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  return *fd;
}

std::vector<std::byte> bytes(std::size_t n, std::uint8_t v = 7) {
  return std::vector<std::byte>(n, std::byte{v});
}

// Reopens a fenced log as partition_state::recover_log does: closed, then opened trusting only its synced end.
void reopen_trusting_synced_end(sim_log_fixture& f) {
  BOOST_REQUIRE(f.log->fenced());
  const offset_t trusted = f.log->synced_end();
  f.close();
  const offset_t untrusted = f.options.trusted_end;
  f.options.trusted_end = trusted;
  f.open();
  f.options.trusted_end = untrusted;
  BOOST_TEST(f.log->log_end() == trusted);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(full_disk)

BOOST_AUTO_TEST_CASE(the_simulated_disk_allocates_blocks_as_a_file_system_does) {
  sim_disk d(1, sim_disk_faults{.capacity_bytes = 8 * block});
  RILL_REQUIRE_OK(run(d, make_dirs(d, "/a")));
  const int fd = open_new(d, "/a/f");
  // Growing by truncate allocates nothing (sparse); a write allocates the blocks it touches.
  RILL_REQUIRE_OK(run(d, truncate_file(d, fd, 100 * block, "/a/f")));
  BOOST_TEST(d.used_bytes() == 0u);
  RILL_REQUIRE_OK(run(d, write_all(d, fd, block - 10, bytes(20), "/a/f")));
  BOOST_TEST(d.used_bytes() == 2 * block);
  // A reservation past the end of the file keeps the size and takes the space.
  RILL_REQUIRE_OK(run(d, reserve_file(d, fd, 200 * block, 3 * block, "/a/f")));
  BOOST_TEST(d.used_bytes() == 5 * block);
  BOOST_TEST(*run(d, size_of_file(d, fd, "/a/f")) == 100 * block);
  // Beyond the capacity: refused whole, nothing taken.
  auto too_much = run(d, reserve_file(d, fd, 0, 6 * block, "/a/f"));  // 4 holes, 3 blocks free
  BOOST_REQUIRE(!too_much.has_value());
  BOOST_TEST((too_much.error().code() == errc::no_space));
  BOOST_TEST(d.used_bytes() == 5 * block);
  auto w = run(d, write_all(d, fd, 50 * block, bytes(4 * block), "/a/f"));
  BOOST_REQUIRE(!w.has_value());
  BOOST_TEST((w.error().code() == errc::no_space));
  // Writes into reserved blocks need nothing more, even on a full disk.
  d.faults().capacity_bytes = d.used_bytes();
  RILL_REQUIRE_OK(run(d, write_all(d, fd, 200 * block, bytes(3 * block), "/a/f")));
  BOOST_TEST(d.used_bytes() == 5 * block);
  // A truncate frees every block past the new end (the reserved ones too); an unlinked file frees the rest once
  // closed.
  RILL_REQUIRE_OK(run(d, truncate_file(d, fd, block, "/a/f")));
  BOOST_TEST(d.used_bytes() == block);
  RILL_REQUIRE_OK(run(d, unlink_file(d, "/a/f", false)));
  BOOST_TEST(d.used_bytes() == block);
  RILL_REQUIRE_OK(run(d, close_file(d, fd, "/a/f")));
  BOOST_TEST(d.used_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(delayed_allocation_fails_the_fdatasync_with_enospc) {
  sim_disk d(2, sim_disk_faults{.capacity_bytes = 2 * block, .delayed_allocation = true});
  RILL_REQUIRE_OK(run(d, make_dirs(d, "/a")));
  const int fd = open_new(d, "/a/f");
  RILL_REQUIRE_OK(run(d, write_all(d, fd, 0, bytes(block), "/a/f")));
  RILL_REQUIRE_OK(run(d, datasync_file(d, fd, "/a/f")));
  BOOST_TEST(d.used_bytes() == block);
  // The write beyond the space succeeds (into the page cache); its sync cannot allocate and fails.
  RILL_REQUIRE_OK(run(d, write_all(d, fd, block, bytes(3 * block), "/a/f")));
  BOOST_TEST(d.delayed_bytes() == 3 * block);
  auto s = run(d, datasync_file(d, fd, "/a/f"));
  BOOST_REQUIRE(!s.has_value());
  BOOST_TEST((s.error().code() == errc::no_space));
  BOOST_TEST(d.unsynced_ops("/a/f") == 1u);  // nothing of it became durable
  // Once there is room, the same sync works.
  d.faults().capacity_bytes = 8 * block;
  RILL_REQUIRE_OK(run(d, datasync_file(d, fd, "/a/f")));
  BOOST_TEST(d.used_bytes() == 4 * block);
  BOOST_TEST(d.delayed_bytes() == 0u);
  RILL_REQUIRE_OK(run(d, close_file(d, fd, "/a/f")));
}

BOOST_AUTO_TEST_CASE(enospc_from_fdatasync_fences_and_the_log_recovers_in_place) {
  sim_log_fixture f(3, sim_disk_faults{.delayed_allocation = true});
  f.options.config.durability = config::durability_mode::every_ms;
  f.options.config.sync_every_ms = 1'000;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 3)));
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));
  BOOST_TEST(f.log->committed().value() == 3);
  f.disk.faults().capacity_bytes = f.disk.used_bytes();  // full
  // Relaxed durability acknowledges at write; the sync that follows cannot allocate.
  RILL_REQUIRE_OK(f.append(make_batch("b", 60, 100)));
  auto synced = f.run_checked(f.log->flush());
  BOOST_REQUIRE(!synced.has_value());
  BOOST_TEST((synced.error().code() == errc::fenced));
  BOOST_TEST(synced.error().message().find("No space") != std::string::npos, synced.error().message());
  BOOST_TEST(f.log->fenced());
  BOOST_TEST(f.log->committed().value() == 3);  // consumers never saw "b"
  auto refused = f.append(make_batch("c", 1));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST((refused.error().code() == errc::fenced));
  // Space returns; the log recovers without a restart and takes writes again after what it had synced.
  f.disk.faults().capacity_bytes = UINT64_MAX;
  reopen_trusting_synced_end(f);
  BOOST_TEST(!f.log->fenced());
  auto c = f.append(make_batch("c", 2));
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->base_offset.value() == 3);
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));
  const auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 5u);
  BOOST_TEST(all[2].second.rfind("a-2", 0) == 0);
  BOOST_TEST(all[3].second.rfind("c-0", 0) == 0);
}

BOOST_AUTO_TEST_CASE(an_in_process_reopen_never_trusts_bytes_above_the_synced_end) {
  // The sync fails and so does the cut that should remove what it did not cover: the page cache still holds whole,
  // valid batches above the synced end, which a plain recovery would take in (and a power loss could then take
  // back after consumers saw them).
  sim_log_fixture f(4);
  f.options.config.durability = config::durability_mode::every_ms;
  f.options.config.sync_every_ms = 1'000;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 3)));
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));
  RILL_REQUIRE_OK(f.append(make_batch("b", 4)));
  f.disk.halt();  // the sync fails, then the cut
  auto synced = f.run_checked(f.log->flush());
  BOOST_REQUIRE(!synced.has_value());
  BOOST_TEST(f.log->fenced());
  BOOST_TEST(f.log->log_end().value() == 7);  // not cut
  BOOST_TEST(f.log->synced_end().value() == 3);
  f.disk.restart_process();  // the device works again, the page cache kept "b"
  const std::string log_file = f.dir + "/00000000000000000000.log";
  BOOST_TEST(f.disk.unsynced_ops(log_file) > 0u, "the unsynced batch is still in the page cache");
  reopen_trusting_synced_end(f);
  BOOST_TEST(f.log->committed().value() == 3);
  const auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 3u);
  for (const auto& [offset, value] : all) {
    BOOST_TEST(value.rfind("a-", 0) == 0, "offset " << offset << " holds " << value);
  }
  auto c = f.append(make_batch("c", 1));
  RILL_REQUIRE_OK(c);
  BOOST_TEST(c->base_offset.value() == 3);
}

BOOST_AUTO_TEST_CASE(a_sync_before_ack_log_keeps_working_in_its_preallocated_space) {
  // Preallocated zeros ahead of the end: appends on a full disk still fit until the preallocation is used up; then
  // (tmpfs, or ext4 when the write itself finds no room) they fail with no_space, the log is not fenced, and writes
  // resume once there is room. (Where only the fdatasync finds no room, the log fences: the test above.)
  sim_log_fixture f(5);
  f.options.config.preallocate_bytes = 64 * 1024;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 1)));
  RILL_REQUIRE_OK(f.run_checked(f.log->flush()));  // after the append's follow-ups: its zeros are written
  f.disk.faults().capacity_bytes = f.disk.used_bytes();
  for (int i = 0; i < 10; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("p" + std::to_string(i), 10, 100)));
  }
  BOOST_TEST(f.log->committed().value() == 101);
  auto past = f.append(make_batch("q", 700, 100));  // beyond the zeros
  BOOST_REQUIRE(!past.has_value());
  BOOST_TEST((past.error().code() == errc::no_space));
  BOOST_TEST(!f.log->fenced());
  f.disk.faults().capacity_bytes = UINT64_MAX;
  RILL_REQUIRE_OK(f.append(make_batch("r", 1)));  // writes resume once there is room
}

BOOST_AUTO_TEST_SUITE_END()
