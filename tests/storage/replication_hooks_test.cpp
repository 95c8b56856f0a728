// The replication-journal API of the partition log: externally assigned batches byte for byte, truncation after an
// offset across segments (and crash-safe), per-batch metadata beside the batches, external commit, and retention
// with readers inside the removed segments.
#include <boost/test/unit_test.hpp>

#include <map>

#include "base/endian.h"
#include "storage/errc.h"
#include "storage/file_cache.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {
batch_meta meta_with(std::uint64_t op) {
  batch_meta m;
  store_be<std::uint64_t>(m.payload.data(), op);
  m.payload[20] = std::byte{0xab};
  return m;
}

std::uint64_t op_of(const batch_meta& m) {
  return load_be<std::uint64_t>(m.payload.data());
}
}  // namespace

BOOST_AUTO_TEST_SUITE(replication_hooks_suite)

BOOST_AUTO_TEST_CASE(replicated_batches_are_stored_byte_for_byte) {
  sim_log_fixture f;
  f.options.auto_commit = false;
  f.open();
  auto sent = primary_batches(0, 30, 10, 4, "p");
  auto r = f.run_checked(f.log->append_replicated(sent));
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->base_offset.value() == 0);
  BOOST_TEST(r->last_offset.value() == 299);
  BOOST_TEST(f.log->log_end().value() == 300);
  BOOST_TEST(f.log->committed().value() == 0);  // external commit: invisible until commit_to
  BOOST_TEST(f.read_at(0)->batches == 0u);
  read_request repl;
  repl.offset = offset_t(0);
  repl.uncommitted = true;
  repl.max_bytes = 1 << 30;
  auto all = f.read(repl);
  RILL_REQUIRE_OK(all);
  BOOST_TEST(all->bytes.size() == sent.size());
  BOOST_TEST((std::equal(sent.begin(), sent.end(), all->bytes.data())));
  f.log->commit_to(offset_t(150));
  auto visible = f.read_all();
  BOOST_TEST(visible.size() == 150u);
  // Epochs carried by the batches are recorded.
  BOOST_TEST(f.log->epochs().latest()->epoch.value() == 4);
  // A batch that does not start at the log end is refused.
  auto gap = f.run_checked(f.log->append_replicated(primary_batches(301, 1, 1, 4, "g")));
  BOOST_REQUIRE(!gap.has_value());
  BOOST_TEST((gap.error().code() == errc::invalid_argument));
  // Byte for byte across a restart too.
  f.reopen();
  auto again = f.read(repl);
  RILL_REQUIRE_OK(again);
  BOOST_TEST((std::equal(sent.begin(), sent.end(), again->bytes.data())));
  BOOST_TEST(f.log->committed().value() >= 0);
}

BOOST_AUTO_TEST_CASE(metadata_is_kept_beside_the_batches_and_survives_restart) {
  sim_log_fixture f;
  f.options.auto_commit = false;
  f.open();
  std::int64_t base = 0;
  std::uint64_t op = 1;
  for (int i = 0; i < 200; ++i) {
    auto batch = primary_batches(base, 1, 10, 1, "m");
    auto r = f.run_checked(f.log->append_replicated(batch, {meta_with(op)}));
    RILL_REQUIRE_OK(r);
    base += 10;
    ++op;
  }
  BOOST_TEST(f.log->segment_bases().size() > 1u);
  BOOST_TEST(op_of(*f.log->meta_for(offset_t(0))) == 1u);
  BOOST_TEST(op_of(*f.log->meta_for(offset_t(1990))) == 200u);
  BOOST_TEST(!f.log->meta_for(offset_t(5)).has_value());  // not a batch start
  // The Kafka bytes are untouched by it.
  read_request repl;
  repl.offset = offset_t(0);
  repl.uncommitted = true;
  auto r = f.read(repl);
  RILL_REQUIRE_OK(r);
  for (const auto& v : split_batches(r->bytes.span())) {
    BOOST_TEST(v.magic() == 2);
  }
  f.reopen();
  for (std::int64_t b = 0; b < 2000; b += 10) {
    auto m = f.log->meta_for(offset_t(b));
    BOOST_REQUIRE_MESSAGE(m.has_value(), "offset " << b);
    BOOST_TEST(op_of(*m) == static_cast<std::uint64_t>(b / 10 + 1));
    BOOST_TEST((m->payload[20] == std::byte{0xab}));
  }
  // A metadata count that does not match the batches is refused.
  auto bad = f.run_checked(f.log->append_replicated(primary_batches(2000, 2, 1, 1, "x"), {meta_with(1)}));
  BOOST_TEST(!bad.has_value());
}

BOOST_AUTO_TEST_CASE(truncate_after_cuts_across_segments_and_appends_continue) {
  sim_log_fixture f;
  f.options.auto_commit = false;
  f.open();
  std::int64_t base = 0;
  for (int i = 0; i < 300; ++i) {
    RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(base, 1, 10, 1 + i / 100, "t"),
                                                           {meta_with(static_cast<std::uint64_t>(i))})));
    base += 10;
  }
  const auto bases = f.log->segment_bases();
  BOOST_REQUIRE(bases.size() >= 3u);
  f.log->commit_to(offset_t(500));
  // Not inside a batch, not below committed.
  BOOST_TEST(!f.run_checked(f.log->truncate_after(offset_t(1004))).has_value());
  BOOST_TEST(!f.run_checked(f.log->truncate_after(offset_t(398))).has_value());
  // Cut in the middle of the first segment: every later segment goes.
  const std::int64_t keep_last = 509;
  RILL_REQUIRE_OK(f.run_checked(f.log->truncate_after(offset_t(keep_last))));
  BOOST_TEST(f.log->log_end().value() == keep_last + 1);
  BOOST_TEST(f.log->segment_bases().size() == 1u);
  for (std::size_t i = 1; i < bases.size(); ++i) {
    io::run_until(f.disk, [] { return false; });
    BOOST_TEST(!f.disk.exists(f.dir + "/" + segment_name(bases[i]) + ".log"));
  }
  BOOST_TEST(!f.log->meta_for(offset_t(510)).has_value());
  BOOST_TEST(f.log->meta_for(offset_t(500)).has_value());
  // Epoch 2 started at 1000, after the cut: forgotten.
  BOOST_TEST(f.log->epochs().latest()->epoch.value() == 1);
  // A new primary's batches continue at the cut.
  RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(510, 5, 10, 5, "new"))));
  f.reopen();
  BOOST_TEST(f.log->log_end().value() == 560);
  f.log->commit_to(offset_t(560));
  auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 560u);
  BOOST_TEST(all[509].second.rfind("t-509", 0) == 0);
  BOOST_TEST(all[510].second.rfind("new-510", 0) == 0);
  BOOST_TEST(f.log->epochs().latest()->epoch.value() == 5);
}

BOOST_AUTO_TEST_CASE(truncate_after_is_crash_safe_at_every_step) {
  // Crash at every mutating operation of (append across segments, truncate, append again); after recovery the
  // log is either the old one (truncation not yet durable) or cut and continued, never a mix.
  auto workload = [](sim_log_fixture& f, bool& truncated, bool& continued) {
    std::int64_t base = 0;
    for (int i = 0; i < 120; ++i) {
      if (!f.run_checked(f.log->append_replicated(primary_batches(base, 1, 10, 1, "old")))) {
        return;
      }
      base += 10;
    }
    f.log->commit_to(offset_t(300));
    if (!f.run_checked(f.log->truncate_after(offset_t(399)))) {
      return;
    }
    truncated = true;
    if (!f.run_checked(f.log->append_replicated(primary_batches(400, 3, 10, 2, "new")))) {
      return;
    }
    continued = true;
  };
  std::uint64_t total = 0;
  {
    sim_log_fixture f(5);
    f.options.auto_commit = false;
    f.open();
    bool t = false;
    bool c = false;
    workload(f, t, c);
    BOOST_REQUIRE(c);
    f.close();
    total = f.disk.mutating_ops();
  }
  int saw_old = 0;
  int saw_cut = 0;
  for (std::uint64_t k = 1; k <= total; ++k) {
    sim_log_fixture f(5);
    f.options.auto_commit = false;
    // A cache of the test's own, so that what the closed log still holds can be counted: nothing, whatever the
    // crash interrupted (a cut interrupted between its unlinks once left a descriptor behind).
    file_cache files(1000);
    f.options.files = &files;
    f.disk.fail_stop_after(k);
    bool truncated = false;
    bool continued = false;
    if (auto opened = f.try_open()) {
      f.log = std::move(*opened);
      workload(f, truncated, continued);
      f.close();
    }
    BOOST_TEST(files.open_count() == 0u, "crash point " << k << ": the closed log left descriptors held");
    f.options.files = nullptr;
    io::run_until(f.disk, [] { return false; });
    f.disk.crash();
    f.open();
    BOOST_TEST_CONTEXT("crash point " << k) {
      f.log->commit_to(f.log->log_end());
      auto all = f.read_all();
      for (const auto& [offset, value] : all) {
        if (offset < 400) {
          BOOST_TEST(value.rfind("old-" + std::to_string(offset), 0) == 0);
        }
      }
      const bool has_old_tail = !all.empty() && all.back().first >= 400 && all.back().second.rfind("old", 0) == 0;
      const bool has_new =
          std::any_of(all.begin(), all.end(), [](const auto& p) { return p.second.rfind("new", 0) == 0; });
      BOOST_TEST(!(has_old_tail && has_new));
      if (truncated) {
        BOOST_TEST(!has_old_tail, "truncation returned but old records past 399 came back");
        BOOST_TEST(f.log->log_end().value() >= 400);
      }
      if (continued) {
        BOOST_TEST(f.log->log_end().value() == 430);
      }
      saw_old += has_old_tail ? 1 : 0;
      saw_cut += (!has_old_tail && f.log->log_end().value() >= 400) ? 1 : 0;
    }
  }
  BOOST_TEST(saw_old > 0);
  BOOST_TEST(saw_cut > 0);
}

BOOST_AUTO_TEST_CASE(replicated_appends_with_metas_and_epochs_at_every_crash_point) {
  // A replica's write path at the log: appends of batches stamped elsewhere, each with its .meta entry (a partition
  // group's op) and its view's leader epoch, across segment rolls; a cut where a new view's chain diverges; appends
  // of the new epoch. A crash at every mutating operation, with unsynced writes lost, kept or torn: every append
  // that returned is back with its entries (so no skipped fdatasync of a log with entries goes unnoticed), every
  // entry names a batch the log holds, the epochs are those of the batches, and past the cut the log is old or new,
  // never a mix. Batch k holds offsets 50k..50k+49 as op k + 1 (46 KB: a segment rolls every 23 batches); the cut
  // keeps ops 1..30 (offsets below 1500).
  constexpr std::int64_t r = 50;  // records per batch
  constexpr std::int64_t cut = 30 * r;
  struct outcome {
    std::int64_t old_acked_end = 0;  // appends that returned, before the cut
    bool truncating = false;         // the cut began (a crash may leave it done)
    bool truncated = false;
    std::int64_t new_acked_end = cut;
  };
  // Appends `pairs` appends of two batches of view `epoch` from `base`, each with its ops' entries; `acked_end`
  // follows every append that returned. False at the first that did not.
  auto appends = [](sim_log_fixture& f, std::int64_t base, int pairs, std::int32_t epoch, const char* tag,
                    std::int64_t& acked_end) {
    for (int i = 0; i < pairs; ++i, base += 2 * r) {
      const auto op = static_cast<std::uint64_t>(base / r + 1);
      if (!f.run_checked(
              f.log->append_replicated(primary_batches(base, 2, r, epoch, tag), {meta_with(op), meta_with(op + 1)}))) {
        return false;
      }
      acked_end = base + 2 * r;
    }
    return true;
  };
  auto workload = [&appends](sim_log_fixture& f, outcome& o) {  // (r and cut: constants, not captured)
    if (!appends(f, 0, 40, 1, "old", o.old_acked_end)) {
      return;
    }
    f.log->commit_to(offset_t(cut - 2 * r));
    o.truncating = true;
    if (!f.run_checked(f.log->truncate_after(offset_t(cut - 1)))) {
      return;
    }
    o.truncated = true;
    appends(f, cut, 5, 2, "new", o.new_acked_end);
  };
  auto configure = [](sim_log_fixture& f) {
    f.options.auto_commit = false;
    f.options.config.durability = config::durability_mode::sync_before_ack;
  };
  std::uint64_t total = 0;
  {
    sim_log_fixture f(11);
    configure(f);
    f.open();
    outcome o;
    workload(f, o);
    BOOST_REQUIRE(o.new_acked_end == cut + 10 * r);
    BOOST_REQUIRE(f.log->segment_bases().size() > 1);  // (there were 4 before the cut)
    f.close();
    total = f.disk.mutating_ops();
  }
  int saw_old_tail = 0;
  int saw_new = 0;
  for (std::uint64_t k = 1; k <= total; ++k) {
    sim_disk_faults faults;
    faults.crash_torn_ppm = 300'000;
    faults.crash_keep_ppm = 300'000;
    sim_log_fixture f(100 + k, faults);
    configure(f);
    f.disk.fail_stop_after(k);
    outcome o;
    if (auto opened = f.try_open()) {
      f.log = std::move(*opened);
      workload(f, o);
      f.close();
    }
    io::run_until(f.disk, [] { return false; });
    f.disk.crash();
    f.open();
    BOOST_TEST_CONTEXT("crash point " << k) {
      const std::int64_t end = f.log->log_end().value();
      f.log->commit_to(f.log->log_end());
      const auto all = f.read_all();
      BOOST_TEST(static_cast<std::int64_t>(all.size()) == end);  // contiguous from 0
      // What must be back: every append that returned, less what a cut that began may have taken.
      const std::int64_t acked_end = o.truncated    ? o.new_acked_end
                                     : o.truncating ? std::min(o.old_acked_end, cut)
                                                    : o.old_acked_end;
      BOOST_TEST(end >= acked_end, "acknowledged appends lost: the log ends at " << end << ", not below " << acked_end);
      bool old_tail = false;
      bool fresh = false;
      for (const auto& [offset, value] : all) {
        const bool is_old = value.rfind("old-" + std::to_string(offset) + ".", 0) == 0;
        const bool is_new = value.rfind("new-" + std::to_string(offset) + ".", 0) == 0;
        BOOST_TEST((offset < cut ? is_old : (is_old || is_new)), "offset " << offset << ": " << value.substr(0, 12));
        old_tail = old_tail || (offset >= cut && is_old);
        fresh = fresh || is_new;
      }
      BOOST_TEST(!(old_tail && fresh), "the old view's tail and the new view's batches mixed");
      BOOST_TEST(!(o.truncated && old_tail), "the cut returned, and the old tail came back");
      // Entries: in order, each naming its batch's op, none past the end, one for every acknowledged batch. Batches
      // past the last entry are an interrupted append's (never acknowledged): the replicated partition cuts them at
      // its open (partition_storage), the log keeps them.
      const auto metas = f.log->metas();
      for (std::size_t i = 0; i < metas.size(); ++i) {
        BOOST_TEST(metas[i].base_offset.value() == r * static_cast<std::int64_t>(i));
        BOOST_TEST(op_of(metas[i].meta) == i + 1);
      }
      const std::int64_t covered = static_cast<std::int64_t>(metas.size()) * r;
      BOOST_TEST(covered <= end, metas.size() << " entries, log end " << end);
      BOOST_TEST(covered >= acked_end, metas.size() << " entries for acknowledged appends through " << acked_end);
      // Epochs: 1 from offset 0, and 2 from the cut exactly when the new view's batches are there.
      BOOST_TEST((end == 0 || f.log->epochs().epoch_for(offset_t(0)) == std::optional<epoch_t>(epoch_t(1))));
      if (fresh) {
        BOOST_TEST((f.log->epochs().epoch_for(offset_t(cut)) == std::optional<epoch_t>(epoch_t(2))));
      } else if (end > 0) {
        BOOST_TEST((f.log->epochs().epoch_for(offset_t(end - 1)) == std::optional<epoch_t>(epoch_t(1))));
      }
      saw_old_tail += old_tail ? 1 : 0;
      saw_new += fresh ? 1 : 0;
    }
  }
  BOOST_TEST_MESSAGE(total << " crash points: " << saw_old_tail << " kept the old tail, " << saw_new
                           << " the new view's batches");
  BOOST_TEST(saw_old_tail > 0);
  BOOST_TEST(saw_new > 0);
}

BOOST_AUTO_TEST_CASE(retention_waits_for_readers_who_finish_from_the_same_bytes) {
  sim_log_fixture f;
  f.options.config.retention_bytes = 1;  // every sealed segment goes when retention runs
  f.open();
  for (int i = 0; i < 150; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("keep" + std::to_string(i), 20, 1000)));
  }
  const auto bases = f.log->segment_bases();
  BOOST_REQUIRE(bases.size() >= 3u);
  const std::string seg0 = f.dir + "/" + segment_name(bases[0]) + ".log";
  const std::string seg1 = f.dir + "/" + segment_name(bases[1]) + ".log";
  {
    // A consumer positioned in the first segment, one read done.
    log_cursor cursor(*f.log, offset_t(0));
    auto first = f.run_checked(cursor.next(UINT32_MAX, 4096));
    RILL_REQUIRE_OK(first);
    BOOST_TEST(first->first_offset.value() == 0);

    auto removed = f.run_checked(f.log->enforce_retention());
    RILL_REQUIRE_OK(removed);
    BOOST_TEST(removed->segments_removed == bases.size() - 1);
    BOOST_TEST(f.log->log_start() == bases.back());
    io::run_until(f.disk, [] { return false; });
    BOOST_TEST(f.disk.exists(seg0));   // the cursor is inside it
    BOOST_TEST(!f.disk.exists(seg1));  // nobody is inside this one

    // A new reader cannot start below the log start...
    auto late = f.read_at(0);
    BOOST_REQUIRE(!late.has_value());
    BOOST_TEST((late.error().code() == errc::offset_out_of_range));
    // ...but the positioned one finishes its segment from the same bytes, and no further: its reads (64 KiB, more
    // than a segment) stop where the removed segments begin, never skipping to the log start as if the log went on
    // there.
    std::int64_t expected = 20;
    while (cursor.position() < bases[1]) {
      auto r = f.run_checked(cursor.next(UINT32_MAX, 64 * 1024));
      RILL_REQUIRE_OK(r);
      BOOST_REQUIRE(r->batches > 0u);
      for (const auto& b : split_batches(r->bytes.span())) {
        BOOST_REQUIRE(b.base_offset() < bases[1]);
        BOOST_TEST(b.base_offset().value() == expected);
        BOOST_TEST(values_of(b)[0].rfind("keep" + std::to_string(expected / 20) + "-0", 0) == 0);
        expected += 20;
      }
    }
    BOOST_TEST(expected == bases[1].value());
    auto past = f.run_checked(cursor.next(UINT32_MAX, 64 * 1024));
    BOOST_REQUIRE(!past.has_value());
    BOOST_TEST((past.error().code() == errc::offset_out_of_range));
    io::run_until(f.disk, [] { return false; });
    BOOST_TEST(!f.disk.exists(seg0));  // it left: the files are gone
  }
  f.reopen();
  BOOST_TEST(f.log->log_start() == bases.back());
}

BOOST_AUTO_TEST_CASE(retention_by_age_and_stepwise_deletion_of_large_files) {
  sim_log_fixture f;
  f.options.config.segment_bytes = 4 * 1024 * 1024;
  f.options.config.delete_step_bytes = 1024 * 1024;
  f.options.config.retention_ms = 3600'000;
  f.open();
  for (int i = 0; i < 300; ++i) {
    RILL_REQUIRE_OK(f.append(make_batch("age" + std::to_string(i), 20, 1000)));
  }
  const auto bases = f.log->segment_bases();
  BOOST_REQUIRE(bases.size() >= 2u);
  // Young data stays.
  auto none = f.run_checked(f.log->enforce_retention());
  RILL_REQUIRE_OK(none);
  BOOST_TEST(none->segments_removed == 0u);
  f.clk.advance(std::chrono::hours(2));
  RILL_REQUIRE_OK(f.append(make_batch("fresh", 1)));
  const auto truncates_before = f.disk.ops_of(io::opcode::ftruncate);
  auto aged = f.run_checked(f.log->enforce_retention());
  RILL_REQUIRE_OK(aged);
  BOOST_TEST(aged->segments_removed == bases.size() - 1);
  io::run_until(f.disk, [] { return false; });
  // Each ~4 MiB file was shrunk in 1 MiB steps before the unlink: 3 truncates per removed segment.
  BOOST_TEST(f.disk.ops_of(io::opcode::ftruncate) - truncates_before == 3 * aged->segments_removed);
  for (std::size_t i = 0; i + 1 < bases.size(); ++i) {
    BOOST_TEST(!f.disk.exists(f.dir + "/" + segment_name(bases[i]) + ".log"));
  }
  BOOST_TEST(f.read_all().front().first == bases.back().value());
}

BOOST_AUTO_TEST_CASE(retention_stays_below_the_callers_ceiling) {
  sim_log_fixture f;
  f.options.auto_commit = false;
  f.options.config.retention_bytes = 1;  // every sealed, committed segment may go, as far as the topic goes
  f.open();
  std::int64_t base = 0;
  for (int i = 0; i < 60; ++i) {
    RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(base, 1, 100, 1, "r"))));
    base += 100;
  }
  f.log->commit_to(f.log->log_end());
  const auto bases = f.log->segment_bases();
  BOOST_REQUIRE(bases.size() >= 4u);
  // Only segments ending at or below the ceiling go: the ceiling inside the third segment keeps it and what follows.
  auto some = f.run_checked(f.log->enforce_retention(bases[2] + 1));
  RILL_REQUIRE_OK(some);
  BOOST_TEST(some->segments_removed == 2u);
  BOOST_TEST(f.log->log_start() == bases[2]);
  auto rest = f.run_checked(f.log->enforce_retention());
  RILL_REQUIRE_OK(rest);
  BOOST_TEST(f.log->log_start() == bases.back());
}

BOOST_AUTO_TEST_CASE(restart_at_drops_the_log_and_continues_empty_at_the_start) {
  sim_log_fixture f;
  f.options.auto_commit = false;
  f.open();
  std::int64_t base = 0;
  for (int i = 0; i < 30; ++i) {
    RILL_REQUIRE_OK(
        f.run_checked(f.log->append_replicated(primary_batches(base, 1, 100, 1, "old"), {meta_with(i + 1)})));
    base += 100;
  }
  // Refused with uncommitted data, or below the end.
  auto uncommitted = f.run_checked(f.log->restart_at(offset_t(10000)));
  BOOST_REQUIRE(!uncommitted.has_value());
  BOOST_TEST((uncommitted.error().code() == errc::invalid_argument));
  f.log->commit_to(f.log->log_end());
  auto below = f.run_checked(f.log->restart_at(offset_t(1000)));
  BOOST_REQUIRE(!below.has_value());
  BOOST_TEST((below.error().code() == errc::invalid_argument));
  BOOST_TEST(!f.log->fenced());

  RILL_REQUIRE_OK(f.run_checked(f.log->restart_at(offset_t(10000))));
  BOOST_TEST(f.log->log_start().value() == 10000);
  BOOST_TEST(f.log->log_end().value() == 10000);
  BOOST_TEST(f.log->committed().value() == 10000);
  BOOST_TEST(f.log->segment_bases().size() == 1u);
  BOOST_TEST(f.log->metas().empty());
  auto gone = f.read_at(0);
  BOOST_REQUIRE(!gone.has_value());
  BOOST_TEST((gone.error().code() == errc::offset_out_of_range));
  RILL_REQUIRE_OK(f.run_checked(
      f.log->append_replicated(primary_batches(10000, 2, 100, 2, "new"), {meta_with(90), meta_with(91)})));
  f.log->commit_to(f.log->log_end());
  f.reopen();
  BOOST_TEST(f.log->log_start().value() == 10000);
  BOOST_TEST(f.log->metas().size() == 2u);
  auto all = f.read_all();
  BOOST_REQUIRE(all.size() == 200u);
  BOOST_TEST(all.front().first == 10000);
  BOOST_TEST(all.front().second.rfind("new", 0) == 0);
  io::run_until(f.disk, [] { return false; });
  BOOST_TEST(!f.disk.exists(f.dir + "/" + segment_name(offset_t(0)) + ".log"));
}

BOOST_AUTO_TEST_CASE(restart_at_is_crash_safe_at_every_step) {
  // Crash at every mutating operation of (appends across segments, restart at 10000, append there): after recovery
  // the log is the old one whole, or empty from 10000 on (with the new batches once they were acknowledged).
  auto workload = [](sim_log_fixture& f, bool& restarted, bool& continued) {
    std::int64_t base = 0;
    for (int i = 0; i < 30; ++i) {
      if (!f.run_checked(f.log->append_replicated(primary_batches(base, 1, 100, 1, "old"), {meta_with(i + 1)}))) {
        return;
      }
      base += 100;
    }
    f.log->commit_to(f.log->log_end());
    if (!f.run_checked(f.log->restart_at(offset_t(10000)))) {
      return;
    }
    restarted = true;
    if (!f.run_checked(f.log->append_replicated(primary_batches(10000, 1, 100, 2, "new"), {meta_with(90)}))) {
      return;
    }
    continued = true;
  };
  auto configure = [](sim_log_fixture& f) { f.options.auto_commit = false; };
  std::uint64_t total = 0;
  {
    sim_log_fixture f(7);
    configure(f);
    f.open();
    bool r = false;
    bool c = false;
    workload(f, r, c);
    BOOST_REQUIRE(c);
    f.close();
    total = f.disk.mutating_ops();
  }
  int saw_old = 0;
  int saw_restarted = 0;
  for (std::uint64_t k = 1; k <= total; ++k) {
    sim_log_fixture f(7);
    configure(f);
    f.disk.fail_stop_after(k);
    bool restarted = false;
    bool continued = false;
    if (auto opened = f.try_open()) {
      f.log = std::move(*opened);
      workload(f, restarted, continued);
      f.close();
    }
    io::run_until(f.disk, [] { return false; });
    f.disk.crash();
    f.open();
    BOOST_TEST_CONTEXT("crash point " << k) {
      f.log->check_invariants();
      const bool moved = f.log->log_start().value() == 10000;
      if (restarted) {
        BOOST_TEST(moved, "restart_at returned but the log starts at " << f.log->log_start().value());
      }
      if (moved) {
        ++saw_restarted;
        BOOST_TEST(f.log->log_end().value() >= 10000);
        BOOST_TEST(f.log->segment_bases().front().value() == 10000);
        for (const auto& m : f.log->metas()) {
          BOOST_TEST(m.base_offset.value() >= 10000);
        }
        if (continued) {
          BOOST_TEST(f.log->log_end().value() == 10100);
          BOOST_TEST(f.log->metas().size() == 1u);
        }
      } else {
        ++saw_old;
        BOOST_TEST(f.log->log_start().value() == 0);
        f.log->commit_to(f.log->log_end());
        const auto all = f.read_all();
        for (const auto& [offset, value] : all) {
          BOOST_TEST(value.rfind("old-" + std::to_string(offset), 0) == 0);
        }
      }
    }
  }
  BOOST_TEST(saw_old > 0);
  BOOST_TEST(saw_restarted > 0);
}

BOOST_AUTO_TEST_SUITE_END()
