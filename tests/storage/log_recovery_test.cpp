// Recovery: torn tails, bit flips, lost or corrupt index files, superblock damage, and the decision table rows
// (@A .. @H in storage/log_recovery.cpp).
#include <boost/test/unit_test.hpp>

#include "base/endian.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/superblock_format.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {
std::string seg_path(const sim_log_fixture& f, std::int64_t base, const char* ext) {
  return f.dir + "/" + segment_name(offset_t(base)) + ext;
}

// Fills several segments with 20-record batches of ~1 KiB values; returns the segment bases.
std::vector<offset_t> fill(sim_log_fixture& f, int batches) {
  for (int i = 0; i < batches; ++i) {
    auto r = f.append(make_batch("f" + std::to_string(i), 20, 1000));
    BOOST_REQUIRE(r.has_value());
  }
  return f.log->segment_bases();
}

bool reported(const sim_log_fixture& f, const std::string& file_part, const std::string& action_part) {
  for (const auto& c : f.reporter.corruptions) {
    if (c.file.find(file_part) != std::string::npos && c.action.find(action_part) != std::string::npos) {
      return true;
    }
  }
  return false;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(log_recovery_suite)

BOOST_AUTO_TEST_CASE(torn_tail_is_cut_and_offsets_continue) {  // @F, @G
  sim_log_fixture f;
  f.open();
  fill(f, 5);
  f.close();
  // Half a batch at the end of the active segment, as a crash mid-write leaves it.
  const std::string log0 = seg_path(f, 0, ".log");
  auto content = *f.disk.file_content(log0);
  auto extra = make_batch("torn", 20, 1000);
  const std::size_t good_size = content.size();
  content.insert(content.end(), extra.begin(), extra.begin() + static_cast<std::ptrdiff_t>(extra.size() / 2));
  f.disk.set_file_content(log0, content);
  f.open();
  BOOST_TEST(f.log->log_end().value() == 100);
  BOOST_TEST(f.disk.file_content(log0)->size() == good_size);
  BOOST_TEST(f.reporter.corruptions.empty());  // a torn tail is expected, not corruption
  BOOST_TEST(!f.reporter.notices.empty());
  auto r = f.append(make_batch("next", 1));
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offset.value() == 100);
}

BOOST_AUTO_TEST_CASE(preallocated_zeros_are_not_data) {
  sim_log_fixture f;
  f.options.config.preallocate_bytes = 256 * 1024;
  f.open();
  fill(f, 3);
  const std::string log0 = seg_path(f, 0, ".log");
  BOOST_TEST(f.disk.file_content(log0)->size() > 60'000u);  // the file was pre-written ahead of the data
  f.close();
  f.open();
  BOOST_TEST(f.log->log_end().value() == 60);
  BOOST_TEST(f.reporter.corruptions.empty());
  auto r = f.append(make_batch("next", 1));
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offset.value() == 60);
  BOOST_TEST(f.read_all().size() == 61u);
}

// Preallocation keeps the window topped up in small steps (an eighth or less of it), never one large zero write
// behind a burst of appends: a fresh segment gets the whole window, then each top-up writes about one step.
BOOST_AUTO_TEST_CASE(preallocation_tops_up_in_steps) {
  sim_log_fixture f;
  const std::uint64_t ahead = 2 * 1024 * 1024;
  const std::uint64_t step = ahead / 32;
  f.options.config.preallocate_bytes = ahead;
  f.options.config.segment_bytes = 64 * 1024 * 1024;  // no roll and no cap in this test
  f.open();
  const std::string log0 = seg_path(f, 0, ".log");
  BOOST_TEST(f.disk.file_content(log0)->size() == 0u);  // nothing before the first write
  RILL_REQUIRE_OK(f.append(make_batch("first", 20, 1000)));
  io::run_until(f.disk, [] { return false; });  // the top-up follows the acknowledgement
  std::uint64_t file_before = f.disk.file_content(log0)->size();
  BOOST_TEST(file_before == f.log->stats().bytes + ahead);  // the first write's whole window
  for (int i = 0; i < 200; ++i) {
    auto r = f.append(make_batch("p" + std::to_string(i), 20, 1000));
    BOOST_REQUIRE(r.has_value());
    const std::uint64_t data = f.log->stats().bytes;
    const std::uint64_t file = f.disk.file_content(log0)->size();
    // Never more than a step behind the window (plus the batch just acknowledged: the top-up follows the ack).
    BOOST_TEST(file + step + 21'000 >= data + ahead);
    BOOST_TEST(file <= data + ahead);
    BOOST_TEST(file - file_before <= step + 21'000);  // each top-up about one step (plus one batch)
    file_before = file;
  }
}

// Issue 13: preallocation only for partitions being written. Creating and reopening many partitions writes no
// zeros; the first write to one starts its window, and the others stay empty.
BOOST_AUTO_TEST_CASE(idle_partitions_hold_no_preallocated_zeros) {
  sim_log_fixture f;
  f.options.config.preallocate_bytes = 256 * 1024;  // below segment_bytes: the window is not capped
  f.options.config.durability = config::durability_mode::sync_before_ack;
  constexpr int partitions = 64;
  auto dir_of = [](int p) { return "/parts/" + std::to_string(p); };
  auto log_of = [&](int p) { return dir_of(p) + "/" + segment_name(offset_t(0)) + ".log"; };
  auto open_all = [&] {
    std::vector<std::unique_ptr<partition_log>> logs;
    for (int p = 0; p < partitions; ++p) {
      auto l = run(f.disk, partition_log::open(f.disk, f.pool, f.clk, f.reporter, dir_of(p), f.options));
      RILL_REQUIRE_OK(l);
      logs.push_back(std::move(*l));
    }
    return logs;
  };
  auto close_all = [&](std::vector<std::unique_ptr<partition_log>>& logs) {
    for (auto& l : logs) {
      RILL_REQUIRE_OK(run(f.disk, l->close()));
    }
    logs.clear();
  };
  auto logs = open_all();
  for (int p = 0; p < partitions; ++p) {
    BOOST_TEST(f.disk.file_content(log_of(p))->size() == 0u);
  }
  close_all(logs);
  logs = open_all();  // and reopened
  for (int p = 0; p < partitions; ++p) {
    BOOST_TEST(f.disk.file_content(log_of(p))->size() == 0u);
  }
  auto r = run(f.disk, logs[7]->append(make_batch("w", 10, 100)));
  RILL_REQUIRE_OK(r);
  io::run_until(f.disk, [] { return false; });  // the window follows the acknowledgement
  BOOST_TEST(f.disk.file_content(log_of(7))->size() == logs[7]->stats().bytes + f.options.config.preallocate_bytes);
  for (int p = 0; p < partitions; ++p) {
    if (p != 7) {
      BOOST_TEST(f.disk.file_content(log_of(p))->size() == 0u);
    }
  }
  close_all(logs);
}

BOOST_AUTO_TEST_CASE(a_batch_that_is_valid_but_not_the_next_offset_is_not_accepted) {
  // Old bytes in recycled space: a whole, CRC-valid batch whose base offset is not the next expected one.
  sim_log_fixture f;
  f.open();
  fill(f, 2);
  f.close();
  const std::string log0 = seg_path(f, 0, ".log");
  auto content = *f.disk.file_content(log0);
  batch_builder b;
  b.base_offset(offset_t(7));  // would need 40
  b.add("k", "stale");
  auto stale = *b.build();
  content.insert(content.end(), stale.begin(), stale.end());
  f.disk.set_file_content(log0, content);
  f.open();
  BOOST_TEST(f.log->log_end().value() == 40);
  BOOST_TEST(f.read_all().size() == 40u);
}

BOOST_AUTO_TEST_CASE(bit_flip_in_a_sealed_segment_is_reported_and_the_rest_of_it_skipped) {  // @D, @H
  sim_log_fixture f;
  f.open();
  auto bases = fill(f, 150);
  BOOST_REQUIRE(bases.size() >= 3u);
  f.close();
  // Flip a bit in the last batch of segment 0 (the region the fast path verifies).
  const std::string log0 = seg_path(f, 0, ".log");
  const auto size = f.disk.file_content(log0)->size();
  f.disk.flip_bits(log0, size - 10, 0x04);
  f.open();
  BOOST_TEST(reported(f, ".log", "scanned in full"));
  BOOST_TEST(reported(f, ".log", "skipped the rest of this segment"));
  // The other segments are untouched, offsets continue, and reads skip the damaged tail.
  BOOST_TEST(f.log->log_end().value() == 3000);
  auto all = f.read_all();
  BOOST_TEST(all.size() == 3000u - 20u);
  BOOST_TEST(all.front().first == 0);
  // The damaged batch is gone from reads; the next segment starts where it always did.
  for (std::size_t i = 1; i < all.size(); ++i) {
    BOOST_TEST((all[i].first == all[i - 1].first + 1 || all[i].first == bases[1].value()));
  }
}

BOOST_AUTO_TEST_CASE(bit_flip_that_recovery_does_not_verify_is_caught_on_read) {
  sim_log_fixture f;
  f.open();
  auto bases = fill(f, 150);
  f.close();
  // A batch in the middle of segment 0: recovery's fast path only reads the first batch and the tail.
  const std::string log0 = seg_path(f, 0, ".log");
  f.disk.flip_bits(log0, 30 * 1024, 0x01);
  f.open();
  auto r = f.read_at(0, 64 * 1024);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.error().code() == errc::corrupt_data));
  BOOST_TEST(r.error().detail().find(segment_name(offset_t(0))) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_deleted_or_corrupt_index_is_rebuilt) {  // @D
  sim_log_fixture f;
  f.open();
  auto bases = fill(f, 150);
  BOOST_REQUIRE(bases.size() >= 3u);
  const auto before = f.read_all();
  f.close();
  const std::string idx0 = seg_path(f, bases[0].value(), ".index");
  const std::string idx1 = seg_path(f, bases[1].value(), ".index");
  const auto original = *f.disk.file_content(idx0);
  f.disk.remove_file(idx0);
  f.disk.flip_bits(idx1, 5, 0x80);
  f.open();
  BOOST_TEST(reported(f, segment_name(bases[0]) + ".index", "rebuilt"));
  BOOST_TEST(reported(f, segment_name(bases[1]) + ".index", "rebuilt"));
  BOOST_TEST(*f.disk.file_content(idx0) == original);  // rebuilt byte for byte
  BOOST_TEST(f.read_all() == before);
  // The next open trusts them again.
  f.reporter.corruptions.clear();
  f.reopen();
  BOOST_TEST(f.reporter.corruptions.empty());
}

BOOST_AUTO_TEST_CASE(one_damaged_superblock_copy_is_survived) {
  sim_log_fixture f;
  f.open();
  fill(f, 10);
  f.close();
  f.disk.flip_bits(f.dir + "/superblock.a", 20, 0x01);
  f.open();
  BOOST_TEST(reported(f, "superblock", "using the other"));
  BOOST_TEST(f.log->log_end().value() == 200);
  f.close();
  f.disk.flip_bits(f.dir + "/superblock.a", 20, 0x01);
  f.disk.flip_bits(f.dir + "/superblock.b", 20, 0x01);
  f.reporter.corruptions.clear();
  f.open();
  BOOST_TEST(reported(f, "superblock", "segments alone"));
  BOOST_TEST(f.log->log_end().value() == 200);
}

BOOST_AUTO_TEST_CASE(superblock_codec_round_trip_and_rejects_damage) {
  superblock_state s;
  s.sequence = 42;
  s.committed = offset_t(1000);
  s.log_start = offset_t(100);
  s.recovery_frontier = offset_t(900);
  s.truncate_from = offset_t(-1);
  std::array<std::byte, superblock_format::bytes> buf{};
  encode_superblock(s, buf.data());
  auto d = decode_superblock(buf.data());
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST((*d == s));
  for (std::size_t i = 0; i < buf.size(); ++i) {
    auto copy = buf;
    copy[i] ^= std::byte{0x10};
    BOOST_TEST(!decode_superblock(copy.data()).has_value(), "byte " << i);
  }
}

BOOST_AUTO_TEST_CASE(committed_data_lost_to_corruption_never_lets_offsets_be_reused) {
  sim_log_fixture f;
  f.open();
  fill(f, 10);
  BOOST_TEST(f.log->committed().value() == 200);
  f.close();
  // Destroy the active segment's data after offset 100 (not a torn tail: acknowledged, synced data).
  const std::string log0 = seg_path(f, 0, ".log");
  auto content = *f.disk.file_content(log0);
  std::size_t pos = 0;
  for (int i = 0; i < 5; ++i) {
    pos += *batch_view::size_from_prefix(std::span<const std::byte>(content).subspan(pos), 1u << 30);
  }
  f.disk.flip_bits(log0, pos + 30, 0x01);
  f.open();
  BOOST_TEST(reported(f, ".log", "are lost"));
  BOOST_TEST(reported(f, ".log", "no offset is reused"));
  BOOST_TEST(f.log->log_end().value() == 200);
  auto r = f.append(make_batch("after", 1));
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offset.value() == 200);
}

BOOST_AUTO_TEST_CASE(leftovers_of_deletions_and_temp_files_are_removed) {  // @A
  sim_log_fixture f;
  f.options.config.retention_bytes = 1;  // keep only the active segment
  f.open();
  auto bases = fill(f, 150);
  const auto log0 = *f.disk.file_content(seg_path(f, 0, ".log"));
  const auto idx0 = *f.disk.file_content(seg_path(f, 0, ".index"));
  auto kept = f.run_checked(f.log->enforce_retention());
  RILL_REQUIRE_OK(kept);
  BOOST_TEST(kept->segments_removed == bases.size() - 1);
  f.close();
  BOOST_TEST(!f.disk.exists(seg_path(f, 0, ".log")));
  // Put segment 0 back, as a crash before its unlink would have left it, plus a stale temp file.
  f.disk.set_file_content(seg_path(f, 0, ".log"), log0);
  f.disk.set_file_content(seg_path(f, 0, ".index"), idx0);
  f.disk.set_file_content(f.dir + "/leader-epochs.tmp", std::vector<std::byte>(10));
  f.open();
  BOOST_TEST(!f.disk.exists(seg_path(f, 0, ".log")));
  BOOST_TEST(!f.disk.exists(f.dir + "/leader-epochs.tmp"));
  BOOST_TEST(f.log->log_start() == bases.back());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(recovery_is_quiet_about_its_owners_entries_and_reports_unknown_ones) {
  sim_log_fixture f;
  f.options.owner_entries = {"offsets"};
  f.open();
  fill(f, 2);
  f.close();
  RILL_REQUIRE_OK(run(f.disk, make_dirs(f.disk, join_path(f.dir, "offsets/consumers"))));
  f.disk.set_file_content(join_path(f.dir, "stray"), std::vector<std::byte>(3));
  f.reporter.notices.clear();
  f.open();
  bool stray = false;
  for (const auto& n : f.reporter.notices) {
    BOOST_TEST(n.find("unknown file offsets") == std::string::npos, n);
    stray = stray || n.find("ignoring unknown file stray") != std::string::npos;
  }
  BOOST_TEST(stray, "an unknown file goes unreported");
  BOOST_TEST(f.log->log_end().value() == 40);
  // Without the owner's word, the same directory is an unknown entry like any other.
  f.close();
  f.options.owner_entries.clear();
  f.reporter.notices.clear();
  f.open();
  bool offsets = false;
  for (const auto& n : f.reporter.notices) {
    offsets = offsets || n.find("ignoring unknown file offsets") != std::string::npos;
  }
  BOOST_TEST(offsets);
}
