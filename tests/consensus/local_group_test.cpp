// local_group: a one-replica VSR group on the simulated disk. Commits, checkpoints and a wrapping ring, restart
// from the checkpoint, every crash point of a workload (nothing acknowledged is lost, nothing else appears but the
// one op in flight), fencing on a failed write, and a committed op lost to rot refused at open.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>

#include "base/endian.h"
#include "base/task.h"
#include "consensus/local_group.h"
#include "simulation/sim_disk.h"
#include "storage/errc.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
template <class T>
std::optional<T> run(storage::io::engine& e, task<T> t) {
  std::optional<T> out;
  spawn(std::move(t), [&](T v) { out.emplace(std::move(v)); });
  storage::io::run_until(e, [&] { return out.has_value(); });
  return out;
}

// The replicated state: the list of every body applied, in order.
class journal_of_bodies final : public state_machine {
 public:
  std::vector<std::byte> apply(const header&, std::span<const std::byte> body) override {
    items.emplace_back(reinterpret_cast<const char*>(body.data()), body.size());
    std::vector<std::byte> out(8);
    store_le<std::uint64_t>(out.data(), items.size());
    return out;
  }
  std::vector<std::byte> snapshot() const override {
    std::vector<std::byte> out;
    for (const auto& s : items) {
      std::byte n[4];
      store_le<std::uint32_t>(n, static_cast<std::uint32_t>(s.size()));
      out.insert(out.end(), n, n + 4);
      const auto* p = reinterpret_cast<const std::byte*>(s.data());
      out.insert(out.end(), p, p + s.size());
    }
    return out;
  }
  bool restore(std::span<const std::byte> bytes) override {
    std::vector<std::string> next;
    std::size_t at = 0;
    while (at < bytes.size()) {
      if (bytes.size() - at < 4) {
        return false;
      }
      const std::uint32_t n = load_le<std::uint32_t>(bytes.data() + at);
      at += 4;
      if (bytes.size() - at < n) {
        return false;
      }
      next.emplace_back(reinterpret_cast<const char*>(bytes.data() + at), n);
      at += n;
    }
    items = std::move(next);
    return true;
  }
  std::vector<std::string> items;
};

local_group_options small() {
  local_group_options o;
  o.journal = {16, 4096};  // a ring of 16: checkpoints every 4 ops
  o.snapshot_bytes_max = 64 * 1024;
  return o;
}

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

struct opened {
  std::unique_ptr<journal_of_bodies> sm = std::make_unique<journal_of_bodies>();
  std::unique_ptr<local_group> g;
};

expected<opened> open_group(sim_disk& d) {
  opened o;
  auto g = run(d, local_group::open(d, "/meta", *o.sm, small()));
  BOOST_REQUIRE(g.has_value());
  if (!*g) {
    return rill::unexpected(g->error());
  }
  o.g = std::move(**g);
  return o;
}

expected<void> close_group(sim_disk& d, local_group& g) {
  auto r = run(d, g.close());
  BOOST_REQUIRE(r.has_value());
  return std::move(*r);
}

expected<std::uint64_t> submit(sim_disk& d, local_group& g, const std::string& body) {
  auto r = run(d, g.submit(operation_user_min, bytes_of(body)));
  if (!r) {
    return rill::unexpected(make_error_code(storage::errc::io_error), "the submit did not finish");
  }
  if (!*r) {
    return rill::unexpected(r->error());
  }
  return load_le<std::uint64_t>((*r)->data());
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_local_group_commits_wraps_its_ring_and_restarts_from_its_checkpoint) {
  sim_disk d(1);
  {
    auto o = open_group(d);
    RILL_REQUIRE_OK(o);
    for (int i = 1; i <= 50; ++i) {
      auto n = submit(d, *o->g, "item-" + std::to_string(i));
      RILL_REQUIRE_OK(n);
      BOOST_TEST(*n == static_cast<std::uint64_t>(i));
    }
    BOOST_TEST(o->g->committed().value() == 51u);  // the session's register, then 50 items
    BOOST_TEST(o->g->checkpoint().value() >= 51u - 16u);
    RILL_REQUIRE_OK(close_group(d, *o->g));
  }
  d.restart_process();
  auto o = open_group(d);
  RILL_REQUIRE_OK(o);
  BOOST_REQUIRE(o->sm->items.size() == 50u);
  BOOST_TEST(o->sm->items.back() == "item-50");
  BOOST_TEST(o->g->replayed() < 16u);  // the rest came from the checkpoint
  auto n = submit(d, *o->g, "after");
  RILL_REQUIRE_OK(n);
  BOOST_TEST(*n == 51u);
  RILL_REQUIRE_OK(close_group(d, *o->g));
}

BOOST_AUTO_TEST_CASE(a_full_disk_does_not_stop_the_group_nor_its_restart) {
  // journal.wal is reserved whole at creation and snapshot.bin's regions ahead of the checkpoints: with not one
  // free block left (with and without delayed allocation, where the fdatasync is what fails for space), commits,
  // checkpoints, the ring's wrap and a restart all go on.
  for (const bool delayed : {false, true}) {
    BOOST_TEST_CONTEXT("delayed allocation " << delayed) {
      sim_disk d(21, rill::simulation::sim_disk_faults{.delayed_allocation = delayed});
      {
        auto o = open_group(d);
        RILL_REQUIRE_OK(o);
        d.faults().capacity_bytes = d.used_bytes();
        BOOST_TEST_REQUIRE(d.free_bytes() == 0u);
        for (int i = 1; i <= 40; ++i) {  // a ring of 16 wraps twice; checkpoints every 4 ops
          RILL_REQUIRE_OK(submit(d, *o->g, "item-" + std::to_string(i)));
        }
        RILL_REQUIRE_OK(close_group(d, *o->g));
      }
      d.restart_process();
      auto o = open_group(d);
      RILL_REQUIRE_OK(o);
      BOOST_TEST(o->sm->items.size() == 40u);
      RILL_REQUIRE_OK(submit(d, *o->g, "after the restart"));
      RILL_REQUIRE_OK(close_group(d, *o->g));
      BOOST_TEST(d.delayed_bytes() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_body_over_the_journal_slot_is_refused_and_nothing_is_lost) {
  sim_disk d(2);
  auto o = open_group(d);
  RILL_REQUIRE_OK(o);
  auto r = run(d, o->g->submit(operation_user_min, std::vector<std::byte>(5000)));
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST((!*r && r->error() == storage::errc::invalid_argument));
  auto reserved = run(d, o->g->submit(1, {}));
  BOOST_TEST((!*reserved && reserved->error() == storage::errc::invalid_argument));
  RILL_REQUIRE_OK(submit(d, *o->g, "fine"));
  RILL_REQUIRE_OK(close_group(d, *o->g));
}

BOOST_AUTO_TEST_CASE(at_every_crash_point_what_was_acknowledged_survives_and_nothing_else_appears) {
  // Count the mutating operations of the whole workload once, then crash at each of them.
  constexpr int items = 30;
  std::uint64_t total = 0;
  {
    sim_disk d(3);
    auto o = open_group(d);
    RILL_REQUIRE_OK(o);
    for (int i = 1; i <= items; ++i) {
      RILL_REQUIRE_OK(submit(d, *o->g, "x" + std::to_string(i)));
    }
    RILL_REQUIRE_OK(close_group(d, *o->g));
    total = d.mutating_ops();
  }
  BOOST_TEST_MESSAGE("the workload makes " << total << " mutating disk operations");
  BOOST_REQUIRE(total > 2u * items);
  for (std::uint64_t n = 1; n <= total; n += 3) {
    sim_disk d(100 + n);
    int acked = 0;
    d.fail_stop_after(n);
    {
      auto o = open_group(d);
      if (o) {
        for (int i = 1; i <= items; ++i) {
          if (!submit(d, *o->g, "x" + std::to_string(i))) {
            break;
          }
          acked = i;
        }
        // the group is fenced (or done); drop it without closing, as at a power loss
        d.halt();
        storage::io::run_until(d, [&] { return d.in_flight() == 0; });
      }
    }
    d.crash();
    auto again = open_group(d);
    RILL_REQUIRE_OK(again);
    const auto& got = again->sm->items;
    BOOST_TEST_CONTEXT("crash at mutating op " << n << " of " << total << ", acked " << acked) {
      BOOST_TEST(got.size() >= static_cast<std::size_t>(acked));
      BOOST_TEST(got.size() <= static_cast<std::size_t>(acked) + 1);  // at most the one in flight
      for (std::size_t i = 0; i < got.size(); ++i) {
        BOOST_TEST(got[i] == "x" + std::to_string(i + 1));
      }
      RILL_REQUIRE_OK(submit(d, *again->g, "next"));
      RILL_REQUIRE_OK(close_group(d, *again->g));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_failed_write_fences_the_group_and_a_restart_recovers) {
  sim_disk d(4);
  auto o = open_group(d);
  RILL_REQUIRE_OK(o);
  RILL_REQUIRE_OK(submit(d, *o->g, "one"));
  d.fail_stop_after(1);
  auto failed = submit(d, *o->g, "two");
  BOOST_REQUIRE(!failed);
  BOOST_TEST((failed.error() == storage::errc::fenced));
  auto again = submit(d, *o->g, "three");
  BOOST_TEST((!again && again.error() == storage::errc::fenced));
  storage::io::run_until(d, [&] { return d.in_flight() == 0; });
  o->g.reset();
  d.crash();
  auto back = open_group(d);
  RILL_REQUIRE_OK(back);
  BOOST_REQUIRE(back->sm->items.size() == 1u);
  BOOST_TEST(back->sm->items[0] == "one");
}

BOOST_AUTO_TEST_CASE(a_committed_op_lost_to_rot_is_refused_at_open_naming_it) {
  sim_disk d(5);
  {
    auto o = open_group(d);
    RILL_REQUIRE_OK(o);
    for (int i = 1; i <= 2; ++i) {
      RILL_REQUIRE_OK(submit(d, *o->g, "r" + std::to_string(i)));
    }
    RILL_REQUIRE_OK(close_group(d, *o->g));
  }
  // Op 2 (the first item; op 3 above it is readable) lives in slot 2: flip a bit of its stored header (the prepare
  // ring starts at 4096, after the header ring of 16 * 128 bytes padded to a page).
  d.flip_bits("/meta/journal.wal", 4096 + 2 * 4096 + 40, 0x10);
  d.restart_process();
  auto o = open_group(d);
  BOOST_REQUIRE(!o);
  BOOST_TEST((o.error() == storage::errc::corrupt_data));
  BOOST_TEST(o.error().message().find("op 2 was committed") != std::string::npos, o.error().message());
}

BOOST_AUTO_TEST_CASE(the_last_op_lost_to_rot_is_refused_too_its_header_proves_it_was_durable) {
  sim_disk d(6);
  {
    auto o = open_group(d);
    RILL_REQUIRE_OK(o);
    for (int i = 1; i <= 2; ++i) {
      RILL_REQUIRE_OK(submit(d, *o->g, "r" + std::to_string(i)));
    }
    RILL_REQUIRE_OK(close_group(d, *o->g));
  }
  // Op 3, the highest, in slot 3: its header was written after its prepare's sync, so it cannot be a torn write.
  d.flip_bits("/meta/journal.wal", 4096 + 3 * 4096 + 40, 0x10);
  d.restart_process();
  auto o = open_group(d);
  BOOST_REQUIRE(!o);
  BOOST_TEST((o.error() == storage::errc::corrupt_data));
  BOOST_TEST(o.error().message().find("op 3 was committed") != std::string::npos, o.error().message());
}

BOOST_AUTO_TEST_CASE(another_clusters_directory_is_refused_before_anything_is_created_in_it) {
  sim_disk d(6);
  {
    opened o;
    local_group_options other = small();
    other.cluster = 77;
    auto g = run(d, local_group::open(d, "/meta", *o.sm, other));
    BOOST_REQUIRE(g.has_value());
    RILL_REQUIRE_OK(*g);
    RILL_REQUIRE_OK(close_group(d, ***g));
  }
  d.remove_file("/meta/journal.wal");
  d.remove_file("/meta/snapshot.bin");
  auto refused = open_group(d);  // cluster 1
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error() == storage::errc::invalid_argument));
  BOOST_TEST(refused.error().message().find("belongs to replica 0 of 1 in cluster 77") != std::string::npos,
             refused.error().message());
  BOOST_TEST(!d.exists("/meta/journal.wal"), "nothing is created in another group's directory");
  BOOST_TEST(!d.exists("/meta/snapshot.bin"));
}
