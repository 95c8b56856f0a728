// consensus::partition_storage on the simulated disk, fed prepares as a replica's driver feeds them: a batch prepare
// is written once (its header in a journal whose slots are smaller than the batch, its batch in the partition log)
// and reads back whole; writes out of order wait for their chain and go in one append; the log is cut only where
// the chain diverges, keeping what is below byte for byte; an applied op commits its batch, and one the committed
// chain does not hold is cut; a header whose batch is gone is faulty after a restart, at every crash point of a
// workload too; a state transfer copies a peer's committed batches; close() answers what still waits.
#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "base/endian.h"
#include "consensus/partition_storage.h"
#include "simulation/sim_disk.h"
#include "storage/errc.h"
#include "storage/io/run.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
constexpr std::uint64_t cluster_id = 9;
constexpr std::uint8_t op_batch = operation_user_min;      // a produce: one stamped batch
constexpr std::uint8_t op_other = operation_user_min + 1;  // kept whole in the journal
constexpr std::uint32_t journal_slot_bytes = 512;          // smaller than every batch below

// A batch stamped as a primary stamps it: its base offset, `records` records of 300 bytes (so > 512 bytes).
std::vector<std::byte> stamped(std::int64_t base, std::uint32_t records, std::uint8_t tag) {
  storage::batch_builder b;
  b.base_offset(offset_t(base));
  b.leader_epoch(epoch_t(0));
  b.base_timestamp(timestamp_ms_t(1'000));
  for (std::uint32_t i = 0; i < records; ++i) {
    std::vector<std::byte> key{std::byte{tag}, static_cast<std::byte>(i)};
    std::vector<std::byte> value(300, static_cast<std::byte>(tag + i));
    b.add(std::span<const std::byte>(key), std::span<const std::byte>(value));
  }
  auto built = b.build();
  BOOST_REQUIRE(built.has_value());
  return std::move(*built);
}

// Prepares on a hash chain: op k's parent is the checksum of the op below it as this chain has it.
struct chain {
  std::map<std::uint64_t, message> ops;
  std::uint32_t view = 0;

  checksum_t checksum_below(std::uint64_t op) const {
    return op == 1 ? root_header(cluster_id).checksum : ops.at(op - 1).h.checksum;
  }
  const message& add(std::uint64_t op, std::uint8_t operation, std::vector<std::byte> body) {
    message m;
    m.h.cmd = command::prepare;
    m.h.cluster = cluster_id;
    m.h.op = op;
    m.h.view = view;
    m.h.client = 1;
    m.h.request = op;
    m.h.operation = operation;
    m.h.parent = checksum_below(op);
    m.body = std::move(body);
    seal(m);
    ops[op] = std::move(m);
    return ops[op];
  }
  const message& batch(std::uint64_t op, std::int64_t base, std::uint32_t records, std::uint8_t tag) {
    return add(op, op_batch, stamped(base, records, tag));
  }
  const message& other(std::uint64_t op, std::uint8_t tag) {
    return add(op, op_other, std::vector<std::byte>(16, std::byte{tag}));
  }
};

struct node {
  explicit node(std::uint64_t seed, simulation::sim_disk_faults faults = {}) : disk(seed, faults) {}

  sim_disk disk;
  storage::buffer_pool pool;
  manual_clock clk;
  storage::collecting_reporter reporter;
  std::unique_ptr<partition_storage> s;
  partition_storage_options opts = options();  // what open() uses
  recovered_state rec;
  std::map<std::uint64_t, std::optional<expected<void>>> results;  // by op: the newest write's answer

  static partition_storage_options options() {
    partition_storage_options o;
    o.files.journal = journal_options{64, journal_slot_bytes};
    o.files.snapshot_bytes_max = 64 * 1024;
    o.batch_operation = op_batch;
    o.log.config.segment_bytes = 1024 * 1024;
    o.log.config.preallocate_bytes = 0;
    return o;
  }
  void open() {
    vsr_state initial;
    initial.cluster = cluster_id;
    initial.replica = 0;
    initial.replica_count = 3;
    rec = recovered_state{};
    auto opened =
        storage::io::run_task(disk, partition_storage::open(disk, pool, clk, reporter, "/g", "/p", opts, initial, rec));
    BOOST_REQUIRE(opened.has_value());
    RILL_REQUIRE_OK(*opened);
    s = std::move(**opened);
  }
  void write(const message& m) {
    const std::uint64_t op = m.h.op;
    results[op].reset();
    s->write(m, [this, op](expected<void> r) { results[op] = std::move(r); });
  }
  // Every disk operation due completes, and what they start too.
  void run() {
    while (disk.poll(true) > 0) {
    }
  }
  bool ok(std::uint64_t op) const {
    auto it = results.find(op);
    return it != results.end() && it->second.has_value() && it->second->has_value();
  }
  bool waiting(std::uint64_t op) const {
    auto it = results.find(op);
    return it != results.end() && !it->second.has_value();
  }
  expected<message> read(std::uint64_t op, checksum_t checksum) {
    std::optional<expected<message>> got;
    s->read(op, checksum, [&](expected<message> r) { got.emplace(std::move(r)); });
    storage::io::run_until(disk, [&] { return got.has_value(); });
    BOOST_REQUIRE(got.has_value());
    return std::move(*got);
  }
  // The log's bytes from offset 0 to its end (uncommitted too).
  std::vector<std::byte> log_bytes() {
    std::vector<std::byte> out;
    std::int64_t at = s->log().log_start().value();
    while (at < s->log().log_end().value()) {
      storage::read_request rq;
      rq.offset = offset_t(at);
      rq.uncommitted = true;
      auto r = storage::io::run_task(disk, s->log().read(rq));
      BOOST_REQUIRE(r.has_value() && r->has_value() && (*r)->batches > 0);
      for (const auto& v : (*r)->batch_views()) {
        out.insert(out.end(), v.bytes().begin(), v.bytes().end());
        at = v.next_offset().value();
      }
    }
    return out;
  }
  // Writes every op of `chain` (a primary's log: they all land), then applies them: all committed here.
  void commit(const struct chain& c) {
    for (const auto& [op, m] : c.ops) {
      write(m);
    }
    run();
    for (const auto& [op, m] : c.ops) {
      s->applied(m.h);
    }
    s->poke();
  }
  // Power loss: the disk stops, what was in flight fails, unsynced writes survive, vanish or tear.
  void crash() {
    disk.halt();
    while (disk.in_flight() > 0) {
      disk.poll(true);
    }
    (void)storage::io::run_task(disk, s->abandon());
    s.reset();
    disk.crash();
    disk.restart_process();
  }
  void restart() {
    run();
    crash();
    open();
  }
  bool holds_batch_of(std::uint64_t op) const {
    for (const auto& e : s->log().metas()) {
      if (batch_op_of(e.meta).op == op) {
        return true;
      }
    }
    return false;
  }
  bool recovered_valid(std::uint64_t op, checksum_t c) const {
    for (const auto& h : rec.journal) {
      if (h.op == op && h.checksum == c) {
        return true;
      }
    }
    return false;
  }
  bool recovered_faulty(std::uint64_t op) const {
    for (const auto& h : rec.faulty) {
      if (h.op == op) {
        return true;
      }
    }
    return false;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(partition_storage_suite)

BOOST_AUTO_TEST_CASE(a_batch_prepare_is_written_once_header_in_the_journal_batch_in_the_log_and_reads_back_whole) {
  node n(1);
  n.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 3, 2);
  c.other(3, 3);
  c.batch(4, 3, 2, 4);
  BOOST_REQUIRE(c.ops.at(2).h.size > journal_slot_bytes);  // the journal could not hold it whole
  for (const auto& [op, m] : c.ops) {
    n.write(m);
  }
  n.run();
  for (std::uint64_t op = 1; op <= 4; ++op) {
    BOOST_TEST(n.ok(op), "op " << op);
  }
  BOOST_TEST(n.s->log().log_end().value() == 5);
  const auto metas = n.s->log().metas();
  BOOST_REQUIRE(metas.size() == 2u);
  BOOST_TEST(batch_op_of(metas[0].meta).op == 2u);
  BOOST_TEST((batch_op_of(metas[1].meta).checksum == c.ops.at(4).h.checksum));
  for (std::uint64_t op = 1; op <= 4; ++op) {
    auto m = n.read(op, c.ops.at(op).h.checksum);
    RILL_REQUIRE_OK(m);
    BOOST_TEST((m->h == c.ops.at(op).h));
    BOOST_TEST((m->body == c.ops.at(op).body), "op " << op);
  }
  // Nothing is committed before it is applied; consumers see nothing yet.
  BOOST_TEST(n.s->log().committed().value() == 0);
  BOOST_TEST(n.s->durable_through() == 0u);
  n.restart();
  BOOST_TEST(n.rec.faulty.empty());
  for (std::uint64_t op = 1; op <= 4; ++op) {
    BOOST_TEST(n.recovered_valid(op, c.ops.at(op).h.checksum), "op " << op);
  }
  for (std::uint64_t op = 1; op <= 4; ++op) {
    n.s->applied(c.ops.at(op).h);
  }
  n.s->poke();
  BOOST_TEST(n.s->log().committed().value() == 5);
  BOOST_TEST(n.s->durable_through() == 4u);
  auto m = n.read(4, c.ops.at(4).h.checksum);
  RILL_REQUIRE_OK(m);
  BOOST_TEST((m->body == c.ops.at(4).body));
  n.run();
  n.crash();
}

BOOST_AUTO_TEST_CASE(writes_out_of_order_wait_for_their_chain_and_go_in_one_append) {
  node n(2);
  n.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.other(3, 3);
  c.batch(4, 2, 2, 4);
  c.batch(5, 4, 1, 5);
  n.write(c.ops.at(1));
  n.run();
  n.write(c.ops.at(5));
  n.write(c.ops.at(4));
  n.write(c.ops.at(3));
  n.run();
  // Op 2 is missing: nothing after it can go into the log (its offsets follow op 2's batch).
  BOOST_TEST(n.ok(3));  // kept whole in the journal: it waits for nothing
  BOOST_TEST(n.waiting(4));
  BOOST_TEST(n.waiting(5));
  BOOST_TEST(n.s->log().log_end().value() == 0);
  const auto appends_before = n.s->log().stats().appends;
  n.write(c.ops.at(2));
  n.run();
  BOOST_TEST(n.ok(2));
  BOOST_TEST(n.ok(4));
  BOOST_TEST(n.ok(5));
  BOOST_TEST(n.s->log().log_end().value() == 5);
  BOOST_TEST(n.s->log().stats().appends - appends_before == 1u, "ops 2, 4 and 5 in one append");
  n.run();
  n.crash();
}

BOOST_AUTO_TEST_CASE(the_log_is_cut_only_where_the_chain_diverges_and_keeps_what_is_below_byte_for_byte) {
  node n(3);
  n.open();
  chain a;
  a.other(1, 1);
  a.batch(2, 0, 2, 2);
  a.batch(3, 2, 2, 3);
  a.batch(4, 4, 2, 4);
  for (const auto& [op, m] : a.ops) {
    n.write(m);
  }
  n.run();
  BOOST_REQUIRE(n.ok(4));
  const auto before = n.log_bytes();
  const auto first_batch = std::vector<std::byte>(a.ops.at(2).body);
  // A new view's log: ops 1 and 2 as before, op 3 without a batch, op 4 another batch at offset 2.
  chain b;
  b.view = 1;
  b.ops[1] = a.ops.at(1);
  b.ops[2] = a.ops.at(2);
  b.other(3, 33);
  b.batch(4, 2, 3, 44);
  // Op 2 written again (a repair): the same checksum, so the log is not touched.
  n.write(b.ops.at(2));
  n.run();
  BOOST_TEST(n.ok(2));
  BOOST_TEST(n.s->truncations() == 0u);
  BOOST_TEST((n.log_bytes() == before));
  // Op 3 without a batch: no evidence yet that the log's op 3 is stale for op 4 (nothing to place).
  n.write(b.ops.at(3));
  n.run();
  BOOST_TEST(n.ok(3));
  BOOST_TEST(n.s->log().log_end().value() == 6);
  // Op 4's chain runs through the new op 3 down to op 2, which the log holds: ops 3 and 4 of the log go, op 2 stays.
  n.write(b.ops.at(4));
  n.run();
  BOOST_TEST(n.ok(4));
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(n.s->log().log_end().value() == 5);
  const auto after = n.log_bytes();
  BOOST_REQUIRE(after.size() == first_batch.size() + b.ops.at(4).body.size());
  BOOST_TEST((std::vector<std::byte>(after.begin(), after.begin() + static_cast<std::ptrdiff_t>(first_batch.size())) ==
              first_batch));
  BOOST_TEST((std::vector<std::byte>(after.begin() + static_cast<std::ptrdiff_t>(first_batch.size()), after.end()) ==
              b.ops.at(4).body));
  auto m4 = n.read(4, b.ops.at(4).h.checksum);
  RILL_REQUIRE_OK(m4);
  BOOST_TEST((m4->body == b.ops.at(4).body));
  // A suffix the new chain does not reach: ops 1..4 of b, then op 5 of a third chain on b's op 4... the log's op 5
  // (none here) or any batch above the op a write attaches to goes; below it nothing moves.
  chain c = b;
  c.view = 2;
  c.batch(5, 5, 1, 55);
  n.write(c.ops.at(5));
  n.run();
  BOOST_TEST(n.ok(5));
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(n.s->log().log_end().value() == 6);
  n.crash();
}

BOOST_AUTO_TEST_CASE(a_batch_above_where_the_chain_attaches_is_cut) {
  node n(4);
  n.open();
  chain a;
  a.other(1, 1);
  a.batch(2, 0, 2, 2);
  a.batch(3, 2, 2, 3);
  a.batch(4, 4, 2, 4);
  for (const auto& [op, m] : a.ops) {
    n.write(m);
  }
  n.run();
  // The new view's log ends at op 3 (a's), then its own op 4: a's op 4 is not on it.
  chain b;
  b.view = 1;
  b.ops[1] = a.ops.at(1);
  b.ops[2] = a.ops.at(2);
  b.ops[3] = a.ops.at(3);
  b.batch(4, 4, 1, 40);
  n.write(b.ops.at(4));
  n.run();
  BOOST_TEST(n.ok(4));
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(n.s->log().log_end().value() == 5);
  BOOST_TEST(n.holds_batch_of(3));
  auto m = n.read(4, b.ops.at(4).h.checksum);
  RILL_REQUIRE_OK(m);
  BOOST_TEST((m->body == b.ops.at(4).body));
  // a's op 4 no longer reads back: its batch is gone.
  BOOST_TEST(!n.read(4, a.ops.at(4).h.checksum).has_value());
  n.crash();
}

// Ops 1 (no batch), 2 and 3 (batches) written and durable, 1 and 2 applied; then the committed op 3 turns out to be
// another one, without a batch (this replica's op 3 was stale), and is applied: its batch is cut. Returns the first
// chain.
chain cut_a_written_batch(node& n) {
  n.open();
  chain a;
  a.other(1, 1);
  a.batch(2, 0, 2, 2);
  a.batch(3, 2, 2, 3);
  for (const auto& [op, m] : a.ops) {
    n.write(m);
  }
  n.run();
  n.s->applied(a.ops.at(1).h);
  n.s->applied(a.ops.at(2).h);
  n.s->poke();
  BOOST_TEST(n.s->log().committed().value() == 2);
  BOOST_TEST(n.s->durable_through() == 2u);
  chain b;
  b.ops[1] = a.ops.at(1);
  b.ops[2] = a.ops.at(2);
  b.other(3, 33);
  n.s->applied(b.ops.at(3).h);
  n.s->poke();
  n.run();
  return a;
}

BOOST_AUTO_TEST_CASE(an_applied_op_commits_its_batch_and_one_the_committed_chain_does_not_hold_is_cut) {
  node n(5);
  const chain a = cut_a_written_batch(n);
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(n.s->log().log_end().value() == 2);
  BOOST_TEST(n.s->log().committed().value() == 2);
  BOOST_TEST(n.s->durable_through() == 3u);
  // The cut batch's write had completed, so the replica counted op 3 durable here: the cut is reported to it
  // (take_cut, which the driver turns into a failed write), or it would wait for good for a batch the log no longer
  // holds (issue 38, finding 6; bug_cuts_unreported plants that, below).
  const auto cut = n.s->take_cut();
  BOOST_REQUIRE_EQUAL(cut.size(), 1u);
  BOOST_TEST(cut[0].first == 3u);
  BOOST_TEST((cut[0].second == a.ops.at(3).h.checksum));
  BOOST_TEST(n.s->take_cut().empty());  // reported once
  n.crash();
}

BOOST_AUTO_TEST_CASE(with_bug_cuts_unreported_a_cut_of_a_written_batch_goes_unreported) {
  node n(15);
  n.opts.bug_cuts_unreported = true;
  (void)cut_a_written_batch(n);
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(n.s->take_cut().empty());  // the planted bug: the replica still counts the cut batch durable
  n.crash();
}

// Found by the replication cluster test (a primary paused mid-produce): its batch's append was still in flight when
// the new view's op at that number, without a batch, was applied. The committed base must not pass that op until
// the append has landed and been cut; else the stale batch stays in the log above the committed end and the next
// batch of the chain finds the log ending elsewhere than where it attaches.
BOOST_AUTO_TEST_CASE(an_applied_op_without_a_batch_waits_for_an_append_in_flight_at_its_op_and_cuts_it) {
  node n(6);
  n.open();
  chain a;
  a.other(1, 1);
  a.batch(2, 0, 2, 2);
  for (const auto& [op, m] : a.ops) {
    n.write(m);
  }
  n.run();
  n.s->applied(a.ops.at(1).h);
  n.s->applied(a.ops.at(2).h);
  n.s->poke();
  BOOST_TEST(n.s->log().committed().value() == 2);
  // Op 3 with a batch (the old view's), its append submitted but not done...
  a.batch(3, 2, 1, 3);
  n.write(a.ops.at(3));
  BOOST_TEST(n.s->log().log_end().value() == 2);
  // ...when the new view's op 3, without a batch, and its op 4, with one, arrive, and op 3 is applied.
  chain b;
  b.view = 1;
  b.ops[1] = a.ops.at(1);
  b.ops[2] = a.ops.at(2);
  b.other(3, 33);
  b.batch(4, 2, 1, 4);
  n.write(b.ops.at(3));
  n.s->applied(b.ops.at(3).h);
  n.write(b.ops.at(4));
  n.s->poke();
  n.run();
  BOOST_TEST(n.ok(4));
  BOOST_TEST(n.s->truncations() == 1u);
  BOOST_TEST(!n.holds_batch_of(3));
  BOOST_TEST(n.holds_batch_of(4));
  BOOST_TEST(n.s->log().log_end().value() == 3);
  n.s->applied(b.ops.at(4).h);
  n.s->poke();
  BOOST_TEST(n.s->log().committed().value() == 3);
  n.crash();
}

BOOST_AUTO_TEST_CASE(a_header_whose_batch_is_gone_is_faulty_after_a_restart_never_missing) {
  node n(6);
  n.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.other(3, 3);
  for (const auto& [op, m] : c.ops) {
    n.write(m);
  }
  n.run();
  BOOST_REQUIRE(n.ok(2));
  n.run();
  n.crash();
  // The batch is lost (the log's files emptied; its header in the journal is intact).
  n.disk.set_file_content("/p/00000000000000000000.log", {});
  n.disk.set_file_content("/p/00000000000000000000.meta", {});
  n.disk.set_file_content("/p/00000000000000000000.index", {});
  n.open();
  BOOST_TEST(n.s->log().log_end().value() == 0);
  BOOST_TEST(n.recovered_faulty(2), "a header without its batch is faulty");
  BOOST_TEST(!n.recovered_valid(2, c.ops.at(2).h.checksum));
  BOOST_TEST(n.recovered_valid(1, c.ops.at(1).h.checksum));
  BOOST_TEST(n.recovered_valid(3, c.ops.at(3).h.checksum));
  n.crash();
}

BOOST_AUTO_TEST_CASE(at_every_crash_point_an_acknowledged_write_survives_and_a_valid_header_has_its_batch) {
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.batch(3, 2, 1, 3);
  c.other(4, 4);
  c.batch(5, 3, 2, 5);
  auto workload = [&](node& n) {
    for (const auto& [op, m] : c.ops) {
      n.write(m);
    }
    n.run();
  };
  std::uint64_t ops_total = 0;
  {
    node dry(7);
    dry.open();
    const std::uint64_t start = dry.disk.mutating_ops();
    workload(dry);
    ops_total = dry.disk.mutating_ops() - start;
    dry.crash();
  }
  BOOST_REQUIRE(ops_total > 10);
  std::uint64_t faulty_seen = 0;
  for (std::uint64_t stop = 1; stop <= ops_total; ++stop) {
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
      simulation::sim_disk_faults f;
      f.crash_torn_ppm = 300'000;
      f.crash_keep_ppm = 300'000;
      node n(1000 * stop + seed, f);
      n.open();
      n.disk.fail_stop_after(stop);
      workload(n);
      std::map<std::uint64_t, bool> acked;
      for (const auto& [op, r] : n.results) {
        acked[op] = r.has_value() && r->has_value();
      }
      n.crash();
      n.open();
      BOOST_TEST_CONTEXT("crash at mutating operation " << stop << ", seed " << seed) {
        for (const auto& [op, m] : c.ops) {
          const bool valid = n.recovered_valid(op, m.h.checksum);
          if (acked[op]) {
            BOOST_TEST(valid, "acknowledged op " << op << " is lost");
          }
          if (valid && m.h.operation == op_batch) {
            auto back = n.read(op, m.h.checksum);
            BOOST_TEST(back.has_value(), "op " << op << " recovered valid without its batch");
            if (back) {
              BOOST_TEST((back->body == m.body));
            }
          }
          faulty_seen += n.recovered_faulty(op) ? 1 : 0;
        }
      }
      n.run();
      n.crash();
    }
  }
  BOOST_TEST_MESSAGE(ops_total << " crash points, " << faulty_seen << " faulty headers recovered");
  // The header goes to the journal once its batch is durable: a crash alone never leaves a header without it.
  BOOST_TEST(faulty_seen == 0u);
}

BOOST_AUTO_TEST_CASE(a_state_transfer_copies_the_committed_batches_of_a_peer) {
  node a(8);
  node b(9);
  a.open();
  b.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.batch(3, 2, 3, 3);
  c.other(4, 4);
  c.batch(5, 5, 1, 5);
  a.commit(c);
  BOOST_REQUIRE(a.s->durable_through() == 5u);
  // Beyond what a has committed, it refuses.
  {
    auto beyond = storage::io::run_task(a.disk, a.s->read_for_transfer(offset_t(0), 6, 1024));
    BOOST_REQUIRE(beyond.has_value());
    BOOST_TEST((!beyond->has_value() && beyond->error().code() == make_error_code(storage::errc::offset_out_of_range)));
  }
  // b wrote ops 1..3 itself (its log holds 2 and 3, uncommitted), then installed a checkpoint at op 5: nothing is
  // appended until the transfer, which keeps what b's log already holds of the committed chain.
  for (std::uint64_t op = 1; op <= 3; ++op) {
    b.write(c.ops.at(op));
  }
  b.run();
  BOOST_REQUIRE(b.ok(3));
  b.s->installed(c.ops.at(5).h);
  BOOST_REQUIRE(b.s->transfer_target().has_value());
  BOOST_TEST(b.s->durable_through() == 0u);
  auto source = [&a](offset_t from, std::uint64_t through) -> task<expected<transfer_chunk>> {
    co_return co_await a.s->read_for_transfer(from, through, 700);  // small chunks: several rounds
  };
  std::optional<expected<bool>> done;
  spawn(b.s->transfer(source), [&](expected<bool> r) { done.emplace(std::move(r)); });
  while (!done) {
    const std::size_t ran = a.disk.poll(false) + b.disk.poll(false);
    if (ran == 0 && !done) {
      a.disk.poll(true);
      b.disk.poll(true);
    }
  }
  RILL_REQUIRE_OK(*done);
  BOOST_TEST(**done);
  BOOST_TEST(!b.s->transfer_target().has_value());
  BOOST_TEST(b.s->durable_through() == 5u);
  BOOST_TEST(b.s->log().committed().value() == 6);
  BOOST_TEST((b.log_bytes() == a.log_bytes()));
  BOOST_TEST(b.s->transfers() == 1u);
  BOOST_TEST(b.s->truncations() == 0u, "what b held of the committed chain was kept, not cut and copied again");
  a.crash();
  b.crash();
}

BOOST_AUTO_TEST_CASE(a_state_transfer_cuts_a_batch_the_peer_has_none_for_at_or_below_the_target) {
  node a(11);
  node b(12);
  a.open();
  b.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.batch(3, 2, 3, 3);
  c.other(4, 4);
  a.commit(c);
  BOOST_REQUIRE(a.s->durable_through() == 4u);
  // b holds ops 1..3 and a stale op 4 with a batch (an old view's), then installs a checkpoint at a's op 4.
  chain stale = c;
  stale.view = 1;
  stale.batch(4, 5, 1, 40);
  for (std::uint64_t op = 1; op <= 4; ++op) {
    b.write(stale.ops.at(op));
  }
  b.run();
  BOOST_REQUIRE(b.ok(4));
  BOOST_REQUIRE(b.s->log().log_end().value() == 6);
  b.s->installed(c.ops.at(4).h);
  auto source = [&a](offset_t from, std::uint64_t through) -> task<expected<transfer_chunk>> {
    co_return co_await a.s->read_for_transfer(from, through, 64 * 1024);
  };
  std::optional<expected<bool>> done;
  spawn(b.s->transfer(source), [&](expected<bool> r) { done.emplace(std::move(r)); });
  while (!done) {
    if (a.disk.poll(false) + b.disk.poll(false) == 0) {
      a.disk.poll(true);
      b.disk.poll(true);
    }
  }
  RILL_REQUIRE_OK(*done);
  BOOST_TEST(b.s->durable_through() == 4u);
  BOOST_TEST(b.s->log().log_end().value() == 5, "the stale batch of op 4 is cut");
  BOOST_TEST(b.s->log().committed().value() == 5);
  BOOST_TEST(b.s->truncations() == 1u);
  BOOST_TEST((b.log_bytes() == a.log_bytes()));
  a.crash();
  b.crash();
}

BOOST_AUTO_TEST_CASE(a_state_transfer_from_a_peer_whose_log_starts_later_starts_this_log_over_there) {
  node a(13);
  node b(14);
  a.open();
  b.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.batch(3, 2, 3, 3);
  c.other(4, 4);
  c.batch(5, 5, 1, 5);
  a.commit(c);
  BOOST_REQUIRE(a.s->durable_through() == 5u);
  // a's log as if its retention had removed everything below offset 5 (the batch of op 5): asked from below, it
  // names its start.
  constexpr std::int64_t peer_start = 5;
  std::vector<std::int64_t> asked;
  auto source = [&](offset_t from, std::uint64_t through) -> task<expected<transfer_chunk>> {
    asked.push_back(from.value());
    if (from.value() < peer_start) {
      transfer_chunk moved;
      moved.starts_at = peer_start;
      co_return moved;
    }
    co_return co_await a.s->read_for_transfer(from, through, 64 * 1024);
  };
  auto transfer = [&](node& to) {
    std::optional<expected<bool>> done;
    spawn(to.s->transfer(source), [&](expected<bool> r) { done.emplace(std::move(r)); });
    while (!done) {
      if (a.disk.poll(false) + to.disk.poll(false) == 0) {
        a.disk.poll(true);
        to.disk.poll(true);
      }
    }
    RILL_REQUIRE_OK(*done);
    BOOST_TEST(**done);
  };
  // b holds ops 1..2 of the chain (uncommitted) and installs a's checkpoint at op 5.
  b.write(c.ops.at(1));
  b.write(c.ops.at(2));
  b.run();
  BOOST_REQUIRE(b.ok(2));
  b.s->installed(c.ops.at(5).h);
  transfer(b);
  BOOST_TEST((asked == std::vector<std::int64_t>{0, 5}));
  BOOST_TEST(b.s->log().log_start().value() == peer_start);
  BOOST_TEST(b.s->durable_through() == 5u);
  BOOST_TEST(b.s->committed_end() == 6);
  BOOST_TEST(b.s->log().committed().value() == 6);
  BOOST_TEST(b.s->log().metas().size() == 1u);
  BOOST_TEST(b.holds_batch_of(5));
  // The next op attaches after it.
  c.batch(6, 6, 2, 6);
  b.write(c.ops.at(6));
  b.run();
  BOOST_TEST(b.ok(6));
  BOOST_TEST(b.s->log().log_end().value() == 8);

  // A node that crashed after its log started over, before the checkpoint was durable: the chain's batches below
  // the new start cannot be placed; their writes wait (no assertion, nothing cut that was committed) until a later
  // checkpoint is installed and copied.
  node d(15);
  d.open();
  d.s->installed(c.ops.at(5).h);
  transfer(d);
  BOOST_REQUIRE(d.s->log().log_start().value() == peer_start);
  d.restart();
  BOOST_TEST(d.s->log().log_start().value() == peer_start);
  for (std::uint64_t op = 1; op <= 3; ++op) {
    d.write(c.ops.at(op));
  }
  d.run();
  BOOST_TEST(d.ok(1));
  BOOST_TEST(d.waiting(2));
  BOOST_TEST(d.waiting(3));
  d.s->installed(c.ops.at(5).h);
  transfer(d);
  BOOST_TEST(d.s->durable_through() == 5u);
  BOOST_TEST(d.s->log().committed().value() == 6);
  BOOST_TEST(d.holds_batch_of(5));
  a.crash();
  b.crash();
  d.crash();
}

// Ops 1..7 with batches at ops 2, 3, 5, 6 and 7 (offsets 0..9), written to `b` and acknowledged, none committed;
// then `b` installs a peer's checkpoint at op 5, whose retention removed everything below offset 6 (a transfer
// source that answers so, and asks nothing of it above).
chain acknowledged_then_checkpoint_at_5(node& b) {
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 2, 2);
  c.batch(3, 2, 3, 3);
  c.other(4, 4);
  c.batch(5, 5, 1, 5);
  c.batch(6, 6, 2, 6);
  c.batch(7, 8, 1, 7);
  for (const auto& [op, m] : c.ops) {
    b.write(m);
  }
  b.run();
  BOOST_REQUIRE(b.ok(7));
  b.s->installed(c.ops.at(5).h);
  return c;
}

// Runs b's transfer from a peer whose log starts at offset 6 (asked below, it names that start; above, it has
// nothing more); `asked` records each offset asked. Returns what the transfer answered.
expected<bool> transfer_from_peer_starting_at_6(node& b, std::vector<std::int64_t>& asked) {
  auto source = [&](offset_t from, std::uint64_t) -> task<expected<transfer_chunk>> {
    asked.push_back(from.value());
    transfer_chunk moved;
    if (from.value() < 6) {
      moved.starts_at = 6;
    }
    co_return moved;
  };
  std::optional<expected<bool>> done;
  spawn(b.s->transfer(source), [&](expected<bool> r) { done.emplace(std::move(r)); });
  storage::io::run_until(b.disk, [&] { return done.has_value(); });
  return std::move(*done);
}

BOOST_AUTO_TEST_CASE(a_log_that_holds_the_checkpoints_chain_copies_nothing_and_keeps_the_batches_above_it) {
  node b(16);
  b.open();
  // b acknowledged ops 1..7 and committed none; then it installs a peer's checkpoint at op 5. The peer's retention
  // removed everything below offset 6: asked, it would have b's log start over there, and the batches of ops 6 and
  // 7, which b acknowledged, would go with the rest (the simulator found a primary that then waited for them for
  // good). b's log holds op 5's chain: nothing is asked, nothing cut.
  const chain c = acknowledged_then_checkpoint_at_5(b);
  std::vector<std::int64_t> asked;
  const auto done = transfer_from_peer_starting_at_6(b, asked);
  RILL_REQUIRE_OK(done);
  BOOST_TEST(*done);
  BOOST_TEST(asked.empty());
  BOOST_TEST(b.s->durable_through() == 5u);
  BOOST_TEST(b.s->committed_end() == 6);
  BOOST_TEST(b.s->log().log_start().value() == 0);
  BOOST_TEST(b.s->log().log_end().value() == 9);
  BOOST_TEST(b.s->restarts() == 0u);
  BOOST_TEST(b.s->truncations() == 0u);
  BOOST_TEST(b.holds_batch_of(6));
  BOOST_TEST(b.holds_batch_of(7));
  // The ops above the checkpoint commit from what the log holds.
  b.s->applied(c.ops.at(6).h);
  b.s->applied(c.ops.at(7).h);
  b.s->poke();
  b.run();
  BOOST_TEST(b.s->durable_through() == 7u);
  BOOST_TEST(b.s->log().committed().value() == 9);
  b.crash();
}

// The same with bug_restart_drops_acked planted (the storage asks the peer although its log holds the checkpoint's
// chain): the peer's later start has the log start over, and the batches of ops 6 and 7, which b acknowledged, are
// gone. The replica swarm rarely finds it (the 2,336th seed of master seed 7 once, none in 4,000 after a schedule
// change): this test is what plants it for sure.
BOOST_AUTO_TEST_CASE(with_bug_restart_drops_acked_a_transfer_drops_the_acknowledged_batches_above_the_checkpoint) {
  node b(17);
  b.opts.bug_restart_drops_acked = true;
  b.open();
  (void)acknowledged_then_checkpoint_at_5(b);
  std::vector<std::int64_t> asked;
  (void)transfer_from_peer_starting_at_6(b, asked);  // (it fails after the start-over: the peer sends nothing)
  BOOST_TEST(!asked.empty());
  BOOST_TEST(b.s->restarts() == 1u);
  BOOST_TEST(b.s->log().log_start().value() == 6);
  BOOST_TEST(!b.holds_batch_of(6));
  BOOST_TEST(!b.holds_batch_of(7));
  b.crash();
}

BOOST_AUTO_TEST_CASE(a_peer_past_its_index_names_its_log_start_for_a_checkpoint_it_recorded_the_end_of) {
  node a(17);
  a.opts.log.config.retention_bytes = 1;  // every sealed segment nothing needs goes (about 30 batches a segment)
  a.open();
  chain c;
  for (std::uint64_t op = 1; op <= 130; ++op) {
    c.batch(op, static_cast<std::int64_t>(op - 1) * 100, 100, static_cast<std::uint8_t>(op));
  }
  auto commit_through = [&](std::uint64_t last) {
    for (std::uint64_t op = a.s->durable_through() + 1; op <= last; ++op) {
      a.write(c.ops.at(op));
    }
    a.run();
    for (std::uint64_t op = a.s->durable_through() + 1; op <= last; ++op) {
      a.s->applied(c.ops.at(op).h);
    }
    a.s->poke();
    a.run();
    BOOST_REQUIRE(a.s->durable_through() == last);
  };
  commit_through(40);
  // A durable checkpoint at op 40: retention may remove batches up to its end (offset 4000).
  const std::vector<std::byte> snapshot(16, std::byte{7});
  std::optional<expected<void>> wrote;
  a.s->write_checkpoint(0, 40, snapshot, [&](expected<void> r) { wrote.emplace(std::move(r)); });
  a.run();
  BOOST_REQUIRE(wrote.has_value());
  RILL_REQUIRE_OK(*wrote);
  vsr_state state;
  state.cluster = cluster_id;
  state.replica = 0;
  state.replica_count = 3;
  state.commit = op_t(40);
  state.checkpoint =
      checkpoint_ref{c.ops.at(40).h, 0, snapshot.size(), checksum_of(snapshot, checkpoint_checksum_domain)};
  std::optional<expected<void>> persisted;
  a.s->persist(state, [&](expected<void> r) { persisted.emplace(std::move(r)); });
  a.run();
  BOOST_REQUIRE(persisted.has_value());
  RILL_REQUIRE_OK(*persisted);
  // 90 ops later the index (the journal's window, 64 ops) no longer knows where op 40's batches end.
  commit_through(130);
  auto retained = storage::io::run_task(a.disk, a.s->enforce_retention());
  BOOST_REQUIRE(retained.has_value());
  RILL_REQUIRE_OK(*retained);
  const std::int64_t start = a.s->log().log_start().value();
  BOOST_TEST(start > 0);
  BOOST_TEST(start <= 4000);
  // Asked from below its start through op 40, a names its start: what it removed lies at or below op 40's end.
  auto through_40 = storage::io::run_task(a.disk, a.s->read_for_transfer(offset_t(0), 40, 64 * 1024));
  BOOST_REQUIRE(through_40.has_value());
  RILL_REQUIRE_OK(*through_40);
  BOOST_REQUIRE((*through_40)->starts_at.has_value());
  BOOST_TEST(*(*through_40)->starts_at == start);
  // Through an earlier op it cannot tell: a newer checkpoint is needed.
  auto through_39 = storage::io::run_task(a.disk, a.s->read_for_transfer(offset_t(0), 39, 64 * 1024));
  BOOST_REQUIRE(through_39.has_value());
  BOOST_TEST((!through_39->has_value() && through_39->error().code() == make_error_code(storage::errc::unavailable)));
  a.crash();
}

BOOST_AUTO_TEST_CASE(close_answers_the_writes_still_waiting) {
  node n(10);
  n.open();
  chain c;
  c.other(1, 1);
  c.batch(2, 0, 1, 2);
  c.batch(3, 1, 1, 3);
  n.write(c.ops.at(1));
  n.write(c.ops.at(3));  // waits for op 2
  n.run();
  BOOST_TEST(n.waiting(3));
  auto closed = storage::io::run_task(n.disk, n.s->close());
  BOOST_REQUIRE(closed.has_value());
  RILL_REQUIRE_OK(*closed);
  BOOST_REQUIRE(n.results[3].has_value());
  BOOST_TEST(!n.results[3]->has_value());
  BOOST_TEST((n.results[3]->error().code() == make_error_code(storage::errc::closed)));
  n.s.reset();
}

BOOST_AUTO_TEST_SUITE_END()
