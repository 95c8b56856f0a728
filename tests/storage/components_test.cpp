// Unit tests of the small storage components: epoch history, sparse index, buffer pool and the
// simulated disk's crash semantics for directory entries.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/endian.h"
#include "storage/buffer_pool.h"
#include "storage/crc32c.h"
#include "storage/epoch_file.h"
#include "storage/file_ops.h"
#include "storage/meta_entry.h"
#include "storage/meta_entry_format.h"
#include "storage/segment_index.h"
#include "storage/segment_index_format.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

BOOST_AUTO_TEST_SUITE(components_suite)

BOOST_AUTO_TEST_CASE(epoch_history_assign_query_truncate_and_codec) {
  epoch_history h;
  BOOST_TEST(!h.epoch_for(offset_t(0)).has_value());
  BOOST_TEST(h.assign(epoch_t(1), offset_t(0)));
  BOOST_TEST(h.assign(epoch_t(1), offset_t(50)));  // same epoch: no-op
  BOOST_TEST(h.assign(epoch_t(3), offset_t(100)));
  BOOST_TEST(!h.assign(epoch_t(2), offset_t(200)));  // older epoch refused
  BOOST_TEST(!h.assign(epoch_t(4), offset_t(90)));   // start going back refused
  BOOST_TEST(h.assign(epoch_t(5), offset_t(100)));   // epoch 3 wrote nothing: replaced
  BOOST_TEST(h.entries().size() == 2u);
  BOOST_TEST(h.assign(epoch_t(6), offset_t(300)));
  BOOST_TEST(h.epoch_for(offset_t(99))->value() == 1);
  BOOST_TEST(h.epoch_for(offset_t(100))->value() == 5);
  BOOST_TEST(h.epoch_for(offset_t(1000))->value() == 6);
  BOOST_TEST(h.end_offset_for(epoch_t(1), offset_t(400))->value() == 100);
  BOOST_TEST(h.end_offset_for(epoch_t(4), offset_t(400))->value() == 100);  // between entries: the next one's start
  BOOST_TEST(h.end_offset_for(epoch_t(6), offset_t(400))->value() == 400);
  BOOST_TEST(!h.end_offset_for(epoch_t(0), offset_t(400)).has_value());

  auto bytes = h.encode();
  auto back = epoch_history::decode(bytes);
  RILL_REQUIRE_OK(back);
  BOOST_TEST((back->entries() == h.entries()));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= std::byte{0x20};
    BOOST_TEST(!epoch_history::decode(bad).has_value(), "byte " << i);
  }
  BOOST_TEST(!epoch_history::decode(std::span<const std::byte>(bytes).first(bytes.size() - 1)).has_value());

  epoch_history t = h;
  t.truncate_after(offset_t(299));
  BOOST_TEST(t.latest()->epoch.value() == 5);
  t.truncate_before(offset_t(150));
  BOOST_TEST(t.entries().size() == 1u);
  BOOST_TEST(t.epoch_for(offset_t(150))->value() == 5);
}

BOOST_AUTO_TEST_CASE(sparse_index_entries_lookups_and_sealed_codec) {
  segment_index idx(4096);
  // 100 batches of 1000 bytes, 10 offsets each, timestamps 1000 + 10 * i.
  for (std::uint32_t i = 0; i < 100; ++i) {
    idx.on_batch(i * 10, i * 1000, 1000, timestamp_ms_t(1000 + 10 * i));
  }
  // First batch, then one every >= 4 KiB: batches 0, 5, 10, ...
  BOOST_TEST(idx.size() == 20u);
  BOOST_TEST(idx.entries()[1].position == 5000u);
  BOOST_TEST(idx.floor(0)->position == 0u);
  BOOST_TEST(idx.floor(49)->position == 0u);
  BOOST_TEST(idx.floor(50)->position == 5000u);
  BOOST_TEST(idx.floor(999)->position == 95000u);
  BOOST_TEST(idx.scan_start_for_timestamp(timestamp_ms_t(0))->position == 0u);
  BOOST_TEST(idx.scan_start_for_timestamp(timestamp_ms_t(1100))->position == 5000u);  // batch 10 at 10000 is first >=
  BOOST_TEST(idx.scan_start_for_timestamp(timestamp_ms_t(99999))->position == 95000u);

  auto sealed = idx.encode_sealed();
  BOOST_TEST(sealed.size() == 21u * segment_index_format::entry_bytes);
  auto back = segment_index::decode_sealed(sealed, 100'000, 4096);
  RILL_REQUIRE_OK(back);
  BOOST_TEST((back->entries() == idx.entries()));
  // A position outside the log, an unsealed file, a flipped bit: each refused.
  BOOST_TEST(!segment_index::decode_sealed(sealed, 90'000, 4096).has_value());
  BOOST_TEST(!segment_index::decode_sealed(idx.encode(0), 100'000, 4096).has_value());
  auto flipped = sealed;
  flipped[37] ^= std::byte{1};
  BOOST_TEST(!segment_index::decode_sealed(flipped, 100'000, 4096).has_value());
  idx.truncate(50'000, 50'000);
  BOOST_TEST(idx.size() == 10u);
  BOOST_TEST(idx.entries().back().position == 45000u);
}

BOOST_AUTO_TEST_CASE(meta_entry_codec_layout_and_crc) {
  namespace mef = meta_entry_format;
  meta_entry e{offset_t(0x0102030405060708), {}};
  for (std::size_t i = 0; i < mef::payload_bytes; ++i) {
    e.meta.payload[i] = std::byte(i + 1);
  }
  const meta_entry second{offset_t(77), {}};
  const std::vector<meta_entry> both{e, second};
  const auto bytes = encode_meta_entries(both);
  BOOST_TEST(bytes.size() == 2 * mef::entry_bytes);
  // The layout of meta_entry_format.h, byte for byte: offset big-endian, payload, CRC-32C of the 60 bytes before.
  BOOST_TEST(load_be<std::int64_t>(bytes.data()) == 0x0102030405060708);
  BOOST_TEST(std::memcmp(bytes.data() + 8, e.meta.payload.data(), mef::payload_bytes) == 0);
  BOOST_TEST(load_be<std::uint32_t>(bytes.data() + 60) == crc32c(bytes.data(), 60));
  BOOST_TEST(load_be<std::int64_t>(bytes.data() + mef::entry_bytes) == 77);

  const auto first = std::span<const std::byte, mef::entry_bytes>(bytes.data(), mef::entry_bytes);
  auto back = decode_meta_entry(first);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->base_offset.value() == e.base_offset.value());
  BOOST_TEST((back->meta == e.meta));
  // Any flipped bit is refused (offset, payload or CRC).
  for (std::size_t at : {std::size_t{0}, std::size_t{8}, std::size_t{59}, std::size_t{63}}) {
    auto damaged = bytes;
    damaged[at] ^= std::byte{0x10};
    BOOST_TEST(
        !decode_meta_entry(std::span<const std::byte, mef::entry_bytes>(damaged.data(), mef::entry_bytes)).has_value());
  }
  // All zeros (a preallocated or cut tail) is not an entry.
  std::array<std::byte, mef::entry_bytes> zeros{};
  BOOST_TEST(!decode_meta_entry(zeros).has_value());
}

BOOST_AUTO_TEST_CASE(buffer_pool_reuses_aligned_buffers_and_bounds_its_cache) {
  buffer_pool pool(2);
  {
    auto a = pool.acquire(5000);
    BOOST_TEST(a.capacity() == 8192u);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(a.data()) % buffer_pool::alignment == 0u);
    a.set_size(5000);
    BOOST_TEST(a.span().size() == 5000u);
  }
  BOOST_TEST(pool.cached_bytes() == 8192u);
  const auto allocs = pool.allocations();
  {
    auto b = pool.acquire(8000);  // same class: reused
    BOOST_TEST(pool.allocations() == allocs);
    BOOST_TEST(pool.outstanding() == 1u);
  }
  {
    std::vector<pooled_buffer> many;
    for (int i = 0; i < 5; ++i) {
      many.push_back(pool.acquire(4096));
    }
  }
  BOOST_TEST(pool.cached_bytes() <= 8192u + 2 * 4096u);        // at most 2 cached per class
  auto huge = pool.acquire(buffer_pool::class_bytes_max + 1);  // one-off, not cached
  BOOST_TEST(huge.capacity() >= buffer_pool::class_bytes_max + 1);
  const auto cached = pool.cached_bytes();
  huge.release();
  BOOST_TEST(pool.cached_bytes() == cached);
  BOOST_TEST(pool.outstanding() == 0u);
}

// A poll's read buffer is released by the connection actor, which may run on another shard's thread: the release
// is queued to the owner instead of touching its free lists (before this, two shards raced on the lists, handed one
// buffer to two reads and corrupted poll replies; found by bench/compare).
BOOST_AUTO_TEST_CASE(buffer_pool_takes_back_buffers_released_on_other_threads) {
  buffer_pool pool(64);
  auto first = pool.acquire(4096);
  std::thread([b = std::move(first)]() mutable { b.release(); }).join();
  BOOST_TEST(pool.outstanding() == 1u);  // queued, not yet reclaimed
  const auto allocs = pool.allocations();
  {
    auto again = pool.acquire(4096);  // reclaims the queued buffer first, then reuses it
    BOOST_TEST(pool.allocations() == allocs);
    BOOST_TEST(pool.outstanding() == 1u);
  }
  BOOST_TEST(pool.outstanding() == 0u);

  // Many releasers at once against an owner that keeps acquiring: every buffer comes back exactly once, and no two
  // live buffers share memory.
  std::vector<std::thread> releasers;
  std::mutex mu;
  std::vector<pooled_buffer> handoff;
  std::atomic<bool> done{false};
  for (int t = 0; t < 3; ++t) {
    releasers.emplace_back([&] {
      for (;;) {
        pooled_buffer b;
        {
          std::lock_guard lock(mu);
          if (!handoff.empty()) {
            b = std::move(handoff.back());
            handoff.pop_back();
          } else if (done) {
            return;
          }
        }
        if (b) {
          BOOST_REQUIRE(b.data()[0] == b.data()[4095]);  // nobody else wrote into it while we held it
          b.release();
        }
      }
    });
  }
  for (int i = 0; i < 20'000; ++i) {
    auto b = pool.acquire(4096 << (i % 3));
    std::memset(b.data(), i & 0xff, 4096);
    std::lock_guard lock(mu);
    handoff.push_back(std::move(b));
  }
  done = true;
  for (auto& t : releasers) {
    t.join();
  }
  (void)pool.acquire(4096);  // reclaims everything queued
  BOOST_TEST(pool.outstanding() == 0u);
}

// The crash test of write_file_atomic and of its callers is in replace_crash_test.cpp.

BOOST_AUTO_TEST_CASE(sim_disk_undoes_unsynced_directory_entries_at_a_crash) {
  sim_disk disk(1);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/a")));  // make_dirs syncs the parent
  auto fd = run(disk, open_file(disk, "/a/x", io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 0, std::vector<std::byte>(10, std::byte{7}), "/a/x")));
  RILL_REQUIRE_OK(run(disk, datasync_file(disk, *fd, "/a/x")));  // content durable, the name is not
  disk.crash();
  BOOST_TEST(!disk.exists("/a/x"));
  BOOST_TEST(disk.exists("/a"));

  fd = run(disk, open_file(disk, "/a/y", io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 0, std::vector<std::byte>(10, std::byte{7}), "/a/y")));
  RILL_REQUIRE_OK(run(disk, datasync_file(disk, *fd, "/a/y")));
  RILL_REQUIRE_OK(run(disk, sync_dir(disk, "/a")));
  RILL_REQUIRE_OK(run(disk, rename_file(disk, "/a/y", "/a/z")));  // not synced: undone
  RILL_REQUIRE_OK(run(disk, unlink_file(disk, "/a/z")));
  disk.crash();
  BOOST_TEST(disk.exists("/a/y"));
  BOOST_TEST(!disk.exists("/a/z"));
  BOOST_TEST(disk.file_content("/a/y")->size() == 10u);
}

// A failed fdatasync as Linux has it since 4.13: what it covered stays readable in the page cache but never becomes
// durable, not even through a later fdatasync that succeeds; a power loss drops it; drop_cache (settle_file) makes
// reads return what the disk holds again. Dirty pages written after the failure are untouched by drop_cache and made
// durable by the next sync.
BOOST_AUTO_TEST_CASE(sim_disk_a_failed_sync_loses_what_it_covered_but_the_cache_still_shows_it) {
  const std::vector<std::byte> old_bytes(100, std::byte{1});
  const std::vector<std::byte> lost(50, std::byte{2});
  const std::vector<std::byte> later(10, std::byte{3});
  const auto make = [&](sim_disk& disk) {
    RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/a")));
    auto fd = run(disk, open_file(disk, "/a/x", io::open_create, 0600));
    RILL_REQUIRE_OK(fd);
    RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 0, old_bytes, "/a/x")));
    RILL_REQUIRE_OK(run(disk, datasync_file(disk, *fd, "/a/x")));
    RILL_REQUIRE_OK(run(disk, sync_dir(disk, "/a")));
    RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 80, lost, "/a/x")));  // overwrites 20 bytes, grows by 30
    disk.faults().sync_error_ppm = 1'000'000;
    BOOST_TEST(!run(disk, datasync_file(disk, *fd, "/a/x")).has_value());
    disk.faults().sync_error_ppm = 0;
    BOOST_TEST(disk.file_content("/a/x")->size() == 130u);  // still readable
    BOOST_TEST(!disk.durable_matches("/a/x", 80, 50));
    BOOST_TEST(disk.durable_matches("/a/x", 0, 80));
    return *fd;
  };
  {
    sim_disk disk(1);
    const int fd = make(disk);
    RILL_REQUIRE_OK(run(disk, datasync_file(disk, fd, "/a/x")));  // succeeds, and writes nothing of it
    BOOST_TEST(disk.file_content("/a/x")->size() == 130u);
    BOOST_TEST(!disk.durable_matches("/a/x", 80, 50));
    disk.crash();
    BOOST_TEST(*disk.file_content("/a/x") == old_bytes);
  }
  {
    sim_disk disk(2);
    const int fd = make(disk);
    RILL_REQUIRE_OK(run(disk, write_all(disk, fd, 200, later, "/a/x")));  // dirty, after the failure
    disk.restart_process();                                               // the cache survives a process crash
    BOOST_TEST(disk.file_content("/a/x")->size() == 210u);
    auto again = run(disk, open_file(disk, "/a/x", 0, 0));
    RILL_REQUIRE_OK(again);
    RILL_REQUIRE_OK(run(disk, settle_file(disk, *again, "/a/x")));  // what recovery does before it reads
    const auto content = *disk.file_content("/a/x");
    BOOST_REQUIRE(content.size() == 210u);
    BOOST_TEST(std::equal(old_bytes.begin(), old_bytes.end(), content.begin()));  // the lost bytes are gone...
    BOOST_TEST(
        std::all_of(content.begin() + 100, content.begin() + 200, [](std::byte b) { return b == std::byte{0}; }));
    BOOST_TEST(std::equal(later.begin(), later.end(), content.begin() + 200));  // ...the later write stays
    BOOST_TEST(disk.durable_matches("/a/x", 0, 210));                           // and settle made it durable
    disk.crash();
    BOOST_TEST(disk.file_content("/a/x")->size() == 210u);
  }
}

// A file is durable only through durable directory entries: one whose directory fsync failed is not, until a later
// fsync of the directory (settle_dir, at recovery) succeeds.
BOOST_AUTO_TEST_CASE(sim_disk_durable_matches_needs_the_directory_entry) {
  sim_disk disk(3);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/a")));
  auto fd = run(disk, open_file(disk, "/a/x", io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 0, std::vector<std::byte>(10, std::byte{7}), "/a/x")));
  RILL_REQUIRE_OK(run(disk, datasync_file(disk, *fd, "/a/x")));
  BOOST_TEST(!disk.durable_matches("/a/x", 0, 10));
  disk.faults().sync_error_ppm = 1'000'000;
  BOOST_TEST(!run(disk, sync_dir(disk, "/a")).has_value());
  disk.faults().sync_error_ppm = 0;
  BOOST_TEST(!disk.durable_matches("/a/x", 0, 10));
  RILL_REQUIRE_OK(run(disk, settle_dir(disk, "/a")));  // (and its parent, /)
  BOOST_TEST(disk.durable_matches("/a/x", 0, 10));
  BOOST_TEST(!disk.durable_matches("/a/x", 0, 11));  // beyond the end
}

// make_dirs after one whose parent fsync failed (or whose process died before it) takes nothing that exists for
// durable: the directory the first call made is in the page cache only, and a power loss would take it with the tree
// built below it (rill-sim --node --seed 9580106533886807598: a partition replica's whole directory).
BOOST_AUTO_TEST_CASE(make_dirs_again_makes_durable_what_an_earlier_call_left_unsynced) {
  sim_disk disk(4);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d")));
  disk.faults().sync_error_ppm = 1'000'000;
  BOOST_TEST(!run(disk, make_dirs(disk, "/d/s")).has_value());  // /d/s made, /d's fsync failed
  disk.faults().sync_error_ppm = 0;
  disk.restart_process();  // (the cache keeps /d/s)
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d/s/t")));
  disk.crash();
  BOOST_TEST(disk.exists("/d/s/t"));
}

BOOST_AUTO_TEST_CASE(remove_tree_deletes_nested_files_and_directories) {
  sim_disk disk(1);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d/t/p0/offsets")));
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, "/d/t/p1")));
  for (const char* f : {"/d/t/p0/a.log", "/d/t/p0/offsets/c", "/d/t/p1/b.log"}) {
    auto fd = run(disk, open_file(disk, f, io::open_create, 0600));
    RILL_REQUIRE_OK(fd);
    RILL_REQUIRE_OK(run(disk, write_all(disk, *fd, 0, std::vector<std::byte>(3 << 20), f)));
    RILL_REQUIRE_OK(run(disk, close_file(disk, *fd, f)));
  }
  const auto truncates = disk.ops_of(io::opcode::ftruncate);
  RILL_REQUIRE_OK(run(disk, remove_tree(disk, "/d/t", 1 << 20)));
  BOOST_TEST(!disk.exists("/d/t"));
  BOOST_TEST(disk.exists("/d"));
  BOOST_TEST(disk.ops_of(io::opcode::ftruncate) - truncates == 6u);  // 3 MiB files shrunk in 1 MiB steps
  RILL_REQUIRE_OK(run(disk, remove_tree(disk, "/d/missing", 1 << 20)));
}

BOOST_AUTO_TEST_SUITE_END()
