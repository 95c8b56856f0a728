// The journal and superblock on the simulated disk: round trips, ring wrap, crashes (torn and lost writes), bit rot
// told apart from absence, and a superblock that survives a torn update and a rotten copy.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <optional>

#include "base/task.h"
#include "consensus/journal.h"
#include "simulation/sim_disk.h"
#include "storage/file_ops.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
template <class T>
T run(storage::io::engine& e, task<T> t) {
  std::optional<T> out;
  spawn(std::move(t), [&](T v) { out.emplace(std::move(v)); });
  storage::io::run_until(e, [&] { return out.has_value(); });
  BOOST_REQUIRE_MESSAGE(out.has_value(), "task did not finish");
  return std::move(*out);
}

constexpr std::uint64_t cluster_id = 3;
const journal_options small{8, 4096};

std::vector<message> chain(std::uint64_t n, std::size_t body = 100) {
  std::vector<message> out;
  checksum_t parent = root_header(cluster_id).checksum;
  for (std::uint64_t op = 1; op <= n; ++op) {
    message m;
    m.h.cmd = command::prepare;
    m.h.cluster = cluster_id;
    m.h.op = op;
    m.h.parent = parent;
    m.h.operation = operation_user_min;
    m.body.assign(body + op % 7, static_cast<std::byte>(op));
    seal(m);
    parent = m.h.checksum;
    out.push_back(m);
  }
  return out;
}

struct opened {
  std::unique_ptr<journal> j;
  journal_recovery rec;
};
opened open_journal(sim_disk& d, bool create = false) {
  opened o;
  auto j = run(d, journal::open(d, "/r", small, create, o.rec));
  RILL_REQUIRE_OK(j);
  o.j = std::move(*j);
  return o;
}
std::vector<std::uint64_t> ops_of(const std::vector<header>& hs) {
  std::vector<std::uint64_t> out;
  for (const auto& h : hs) {
    out.push_back(h.op);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

BOOST_AUTO_TEST_CASE(prepares_round_trip_and_the_ring_keeps_the_newest) {
  sim_disk d(1);
  RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
  auto o = open_journal(d, true);
  const auto ms = chain(20);
  for (const auto& m : ms) {
    RILL_REQUIRE_OK(run(d, o.j->write(m)));
  }
  auto back = run(d, o.j->read(18, ms[17].h.checksum));
  RILL_REQUIRE_OK(back);
  BOOST_TEST((back->body == ms[17].body));
  BOOST_TEST(!run(d, o.j->read(5, ms[4].h.checksum)).has_value());  // overwritten by op 13
  BOOST_TEST(!run(d, o.j->read(18, ms[16].h.checksum)).has_value());
  RILL_REQUIRE_OK(run(d, o.j->close()));
  d.crash();  // everything was synced: nothing is lost
  auto again = open_journal(d);
  BOOST_TEST(ops_of(again.rec.valid) == (std::vector<std::uint64_t>{13, 14, 15, 16, 17, 18, 19, 20}));
  BOOST_TEST(again.rec.faulty.empty());
  BOOST_TEST(again.rec.faulty_slots.empty());
  // A prepare larger than a slot is refused before anything is written.
  auto big = chain(21, 5000).back();
  BOOST_TEST(!run(d, again.j->write(big)).has_value());
}

BOOST_AUTO_TEST_CASE(a_crash_keeps_every_completed_write_and_never_invents_one) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    simulation::sim_disk_faults f;
    f.crash_keep_ppm = 300'000;
    f.crash_torn_ppm = 500'000;
    sim_disk d(seed, f);
    RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
    auto o = open_journal(d, true);
    const auto ms = chain(6);
    for (std::uint64_t i = 0; i < 4; ++i) {
      RILL_REQUIRE_OK(run(d, o.j->write(ms[i])));
    }
    // Op 5 is in flight when the power goes, at a point chosen by the seed.
    d.fail_stop_after(1 + seed % 3);
    std::optional<expected<void>> last;
    spawn(o.j->write(ms[4]), [&](expected<void> r) { last.emplace(std::move(r)); });
    storage::io::run_until(d, [&] { return last.has_value(); });
    BOOST_REQUIRE(last.has_value());
    d.crash();
    auto again = open_journal(d);
    const auto valid = ops_of(again.rec.valid);
    for (std::uint64_t op = 1; op <= 4; ++op) {
      BOOST_TEST((std::find(valid.begin(), valid.end(), op) != valid.end()), "seed " << seed << " lost op " << op);
    }
    for (const auto& h : again.rec.valid) {
      BOOST_TEST((h.checksum == ms[h.op - 1].h.checksum), "seed " << seed << " op " << h.op);
    }
    // Op 5 was never acknowledged: it is valid, absent, or an unreadable slot; never a faulty op 1..4.
    for (const auto& h : again.rec.faulty) {
      BOOST_TEST(h.op == 5u, "seed " << seed << ": op " << h.op << " reported faulty");
    }
  }
}

// Issue 38, finding 2: recovery must not trust the page cache. A write whose fdatasync failed (or that a crashed
// process never synced) is readable in the cache but not on the disk; a journal reopened in the same process, or by
// a restarted one, must find only what the disk holds (the bytes a failed sync lost are gone; a crashed process's
// unsynced writes are made durable before they are trusted). With the deliberate bug (recovery reads through the
// cache) the lost prepare is recovered as valid: a replica would acknowledge it again, and a power loss takes it.
BOOST_AUTO_TEST_CASE(recovery_trusts_only_what_the_disk_holds) {
  for (const bool bug : {false, true}) {
    storage::set_bug_trust_page_cache(bug);
    sim_disk d(7);
    RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
    auto o = open_journal(d, true);
    const auto ms = chain(3);
    RILL_REQUIRE_OK(run(d, o.j->write(ms[0])));
    RILL_REQUIRE_OK(run(d, o.j->write(ms[1])));
    d.faults().sync_error_ppm = 1'000'000;
    BOOST_TEST(!run(d, o.j->write(ms[2])).has_value());  // its fdatasync fails: op 3 never becomes durable
    d.faults().sync_error_ppm = 0;
    (void)run(d, o.j->close());
    auto reopened = open_journal(d);  // in the same process (a fenced replica reopened)
    const auto valid = ops_of(reopened.rec.valid);
    BOOST_TEST(std::count(valid.begin(), valid.end(), 2u) == 1);
    BOOST_TEST((std::count(valid.begin(), valid.end(), 3u) == 1) == bug, "bug " << bug);
    RILL_REQUIRE_OK(run(d, reopened.j->close()));
    d.crash();  // a power loss: op 3 was never on the disk
    auto after = open_journal(d);
    const auto durable = ops_of(after.rec.valid);
    BOOST_TEST(std::count(durable.begin(), durable.end(), 3u) == 0);
    RILL_REQUIRE_OK(run(d, after.j->close()));
  }
  storage::set_bug_trust_page_cache(false);
  // A crashed process's unsynced write is readable after the restart: recovery makes it durable before it trusts it.
  {
    sim_disk d(8);
    RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
    auto o = open_journal(d, true);
    const auto ms = chain(2);
    RILL_REQUIRE_OK(run(d, o.j->write(ms[0])));
    d.fail_stop_after(2);  // the prepare's write lands, its fdatasync does not run: the process dies there
    BOOST_TEST(!run(d, o.j->write(ms[1])).has_value());
    d.restart_process();
    auto again = open_journal(d);
    const auto valid = ops_of(again.rec.valid);
    if (std::count(valid.begin(), valid.end(), 2u) == 1) {
      RILL_REQUIRE_OK(run(d, again.j->close()));
      d.crash();  // trusted above, so it must survive a power loss now
      auto after = open_journal(d);
      const auto durable = ops_of(after.rec.valid);
      BOOST_TEST(std::count(durable.begin(), durable.end(), 2u) == 1);
      RILL_REQUIRE_OK(run(d, after.j->close()));
    } else {
      BOOST_FAIL("the unsynced write of op 2 was not found after the process restart");
    }
  }
}

BOOST_AUTO_TEST_CASE(rot_is_told_apart_from_absence) {
  sim_disk d(2);
  RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
  auto o = open_journal(d, true);
  const auto ms = chain(5);
  for (const auto& m : ms) {
    RILL_REQUIRE_OK(run(d, o.j->write(m)));
  }
  RILL_REQUIRE_OK(run(d, o.j->close()));
  const std::uint64_t prepares = 4096;                             // 8 headers padded to a page
  d.flip_bits("/r/journal.wal", prepares + 3 * 4096 + 200, 0x04);  // op 3's body
  d.flip_bits("/r/journal.wal", 4 * 128 + 40, 0x01);               // op 4's redundant header only
  d.flip_bits("/r/journal.wal", 5 * 128 + 40, 0x01);               // op 5: both copies
  d.flip_bits("/r/journal.wal", prepares + 5 * 4096 + 40, 0x01);
  auto again = open_journal(d);
  BOOST_TEST(ops_of(again.rec.valid) == (std::vector<std::uint64_t>{1, 2, 4}));
  BOOST_TEST(ops_of(again.rec.faulty) == (std::vector<std::uint64_t>{3}));
  BOOST_TEST(again.rec.faulty_slots == (std::vector<std::uint64_t>{5}));
  BOOST_TEST(!run(d, again.j->read(3, ms[2].h.checksum)).has_value());
}

BOOST_AUTO_TEST_CASE(the_superblock_survives_a_torn_update_and_a_rotten_copy) {
  vsr_state s;
  s.cluster = cluster_id;
  s.replica = 1;
  s.replica_count = 3;
  sim_disk d(3);
  RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
  auto sb = run(d, superblock::open(d, "/r", true, s));
  RILL_REQUIRE_OK(sb);
  for (std::uint32_t v = 1; v <= 5; ++v) {
    s.view = view_t(v);
    RILL_REQUIRE_OK(run(d, (*sb)->write(s)));
  }
  RILL_REQUIRE_OK(run(d, (*sb)->close()));
  d.crash();
  auto reopened = run(d, superblock::open(d, "/r", false, {}));
  RILL_REQUIRE_OK(reopened);
  BOOST_TEST((*reopened)->state().view == view_t(5));
  // Rot one of the two copies of the newest update: the other still answers.
  const std::uint64_t seq = (*reopened)->sequence();
  d.flip_bits("/r/superblock", ((seq * 2) % 4) * superblock::copy_size + 60, 0x80);
  RILL_REQUIRE_OK(run(d, (*reopened)->close()));
  auto rotten = run(d, superblock::open(d, "/r", false, {}));
  RILL_REQUIRE_OK(rotten);
  BOOST_TEST((*rotten)->state().view == view_t(5));
  // An update torn by a crash leaves either the old or the new state, never garbage.
  for (std::uint64_t stop = 1; stop <= 3; ++stop) {
    s.view = view_t(10 + static_cast<std::uint32_t>(stop));
    d.fail_stop_after(stop);
    auto r = run(d, (*rotten)->write(s));
    d.crash();
    auto after = run(d, superblock::open(d, "/r", false, {}));
    RILL_REQUIRE_OK(after);
    const auto v = (*after)->state().view;
    BOOST_TEST((v == s.view || v.value() < 10 + stop), "stop " << stop << " view " << v.value());
    rotten = std::move(after);
  }
  BOOST_TEST(!run(d, superblock::open(d, "/missing", false, {})).has_value());
}

BOOST_AUTO_TEST_CASE(a_read_racing_a_write_to_its_slot_returns_its_op_or_an_error_never_the_other_op) {
  // read() takes the slot's header, then the whole prepare: a write of the op a ring's length above (the replica
  // serves applied ops to peers while it writes new ones) may land in between. The simulator found read() then
  // returning the newer op as if it were the one asked for.
  std::size_t raced = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    sim_disk d(seed);
    RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
    auto o = open_journal(d, true);
    // Ops 4 and 60: the same slot (mod 8) and the same size (chain() sizes bodies by op mod 7), so that the bytes
    // of either decode whole in the other's place.
    const auto ms = chain(60);
    for (std::uint64_t i = 0; i < 8; ++i) {
      RILL_REQUIRE_OK(run(d, o.j->write(ms[i])));
    }
    std::optional<expected<message>> read;
    std::optional<expected<void>> written;
    auto start_read = [&] {
      spawn(o.j->read(4, ms[3].h.checksum), [&](expected<message> r) { read.emplace(std::move(r)); });
    };
    auto start_write = [&] { spawn(o.j->write(ms[59]), [&](expected<void> r) { written.emplace(std::move(r)); }); };
    if (seed % 2 == 0) {
      start_read();
      start_write();
    } else {
      start_write();
      start_read();
    }
    storage::io::run_until(d, [&] { return read.has_value() && written.has_value(); });
    BOOST_REQUIRE(read.has_value());
    RILL_REQUIRE_OK(*written);
    if (*read) {
      BOOST_TEST((*read)->h.op == 4u, "seed " << seed);
      BOOST_TEST(((*read)->h.checksum == ms[3].h.checksum), "seed " << seed);
    } else {
      ++raced;
    }
  }
  BOOST_TEST_MESSAGE(raced << " of 200 reads lost the race to the write");
}

BOOST_AUTO_TEST_CASE(a_journal_file_size_names_its_slot_count) {
  // The inverse of journal_file_bytes (a replicated partition keeps the ring its journal was created with).
  for (const std::uint32_t slot_bytes : {4096u, 8192u, 1u << 20}) {
    for (const std::uint64_t slots : {1u, 31u, 32u, 33u, 64u, 4096u, 65536u}) {
      const auto bytes = journal_file_bytes(journal_options{slots, slot_bytes});
      BOOST_TEST((journal_slot_count_of(bytes, slot_bytes) == std::optional<std::uint64_t>(slots)),
                 slots << " slots of " << slot_bytes << " bytes");
    }
  }
  BOOST_TEST(!journal_slot_count_of(4096 * 64 + 1, 4096).has_value());
}

BOOST_AUTO_TEST_CASE(under_a_file_cache_the_journal_holds_its_descriptor_only_while_a_header_is_unsynced) {
  sim_disk d(21);
  storage::file_cache files(1);  // one descriptor for the journal and another file
  RILL_REQUIRE_OK(run(d, storage::make_dirs(d, "/r")));
  journal_recovery rec;
  auto opened = run(d, journal::open(d, "/r", small, true, rec, &files));
  RILL_REQUIRE_OK(opened);
  auto& j = **opened;
  const auto ops = chain(3);
  RILL_REQUIRE_OK(run(d, j.write(ops[0])));
  // Its header-ring write waits for a sync: the journal keeps its descriptor, and another file goes over the limit.
  BOOST_TEST(j.headers_unsynced());
  storage::cached_file other;
  RILL_REQUIRE_OK(run(d, other.create(d, files, "/other", storage::io::open_create, 0)));
  BOOST_TEST(files.stats().over_limit_opens == 1u);
  BOOST_TEST(files.open_count() == 2u);
  // The next write's sync covers it (its own header then waits); sync_headers() covers that one.
  RILL_REQUIRE_OK(run(d, j.write(ops[1])));
  BOOST_TEST(j.headers_unsynced());
  RILL_REQUIRE_OK(run(d, j.sync_headers()));
  BOOST_TEST(!j.headers_unsynced());
  RILL_REQUIRE_OK(run(d, j.sync_headers()));  // nothing to do
  // Evictable now: the cache closes it down to its limit, and the next read opens it again.
  (void)run(d, files.evict_all(d));
  BOOST_TEST(files.open_count() <= 1u);
  auto back = run(d, j.read(2, ops[1].h.checksum));
  RILL_REQUIRE_OK(back);
  BOOST_TEST((back->h.checksum == ops[1].h.checksum));
  RILL_REQUIRE_OK(run(d, j.close()));
  RILL_REQUIRE_OK(run(d, other.close(d)));
  BOOST_TEST(files.open_count() == 0u);
}
