// Crash tests of every atomic file replacement in storage/ and of the files the broker replaces with it: power is
// lost at each mutating operation of the replacement (and just after it), and the file must then hold its old
// content or its new one, the new one if the replacement was acknowledged (tests/storage/replace_crash.h). Covered:
//   - write_file_atomic itself;
//   - leader-epochs, replaced by set_leader_epoch, by a replicated append that carries a new epoch
//     (persist_group_epochs), by truncate_after (truncate_epochs) and by recovery (the entries past the recovered
//     end are trimmed at open);
//   - runtime/current_config.toml (the broker writes it at startup; the plain call is tested here).
// Consumer offsets and group state files are covered in tests/actors (partition_state_test, group_handlers_test).
#include <boost/test/unit_test.hpp>

#include "config/server_config.h"
#include "storage/atomic_file.h"
#include "storage/epoch_file.h"
#include "storage/file_ops.h"
#include "tests/storage/log_fixture.h"
#include "tests/storage/replace_crash.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  return std::vector<std::byte>(reinterpret_cast<const std::byte*>(s.data()),
                                reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

// Stops the disk if fail_stop_after has not already (the crash comes right after the replacement returned: nothing
// later, a close's syncs included, may make it durable), drives it until nothing is in flight, and loses power.
void lose_power(sim_disk& disk) {
  if (!disk.stopped()) {
    disk.halt();
  }
  io::run_until(disk, [] { return false; });
  disk.crash();
}

// One replacement of dir/name from `old_content` to `new_content` with write_file_atomic on a bare disk.
replacement_outcome replace_plain_file(std::uint64_t seed, const sim_disk_faults& faults,
                                       std::optional<std::uint64_t> stop_after, const std::string& dir,
                                       const std::string& name, const std::vector<std::byte>& old_content,
                                       const std::vector<std::byte>& new_content) {
  sim_disk disk(seed, faults);
  RILL_REQUIRE_OK(run(disk, make_dirs(disk, dir)));
  RILL_REQUIRE_OK(run(disk, write_file_atomic(disk, dir, name, old_content)));
  replacement_outcome o;
  const auto before = disk.mutating_ops();
  if (stop_after) {
    disk.fail_stop_after(*stop_after);
  }
  o.acknowledged = run(disk, write_file_atomic(disk, dir, name, new_content)).has_value();
  o.mutating_ops = disk.mutating_ops() - before;
  lose_power(disk);
  const auto content = disk.file_content(join_path(dir, name));
  o.is_old = content && *content == old_content;
  o.is_new = content && *content == new_content;
  return o;
}

// The leader-epochs file of the fixture's partition, as it is on the disk now (empty if missing).
std::vector<std::byte> epochs_file(const sim_log_fixture& f) {
  return f.disk.file_content(join_path(f.dir, epoch_history::file_name)).value_or(std::vector<std::byte>{});
}

// One replacement of leader-epochs by `replace` on an open log prepared by `setup`: the old content is the file after
// setup, the new one the log's epochs after `replace` on a disk that does not fail. After the crash the log must
// recover.
template <class Setup, class Replace>
replacement_outcome replace_epochs(std::uint64_t seed, const sim_disk_faults& faults,
                                   std::optional<std::uint64_t> stop_after, Setup&& setup, Replace&& replace,
                                   const epoch_history& expected_new) {
  sim_log_fixture f(seed, faults);
  f.options.auto_commit = false;
  f.open();
  setup(f);
  const auto old_content = epochs_file(f);
  BOOST_REQUIRE(!old_content.empty());
  const auto new_content = expected_new.encode();
  BOOST_REQUIRE(new_content != old_content);
  replacement_outcome o;
  const auto before = f.disk.mutating_ops();
  if (stop_after) {
    f.disk.fail_stop_after(*stop_after);
  }
  o.acknowledged = replace(f);
  o.mutating_ops = f.disk.mutating_ops() - before;
  if (!f.disk.stopped()) {
    f.disk.halt();
  }
  f.close();  // every operation fails now; close() completes anyway
  lose_power(f.disk);
  const auto content = epochs_file(f);
  o.is_old = content == old_content;
  o.is_new = content == new_content;
  f.open();  // recovery succeeds whatever the crash left
  return o;
}

epoch_history epochs_of(std::vector<std::pair<std::int32_t, std::int64_t>> entries) {
  epoch_history h;
  for (const auto& [epoch, start] : entries) {
    BOOST_REQUIRE(h.assign(epoch_t(epoch), offset_t(start)));
  }
  return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(replace_crash_suite)

BOOST_AUTO_TEST_CASE(write_file_atomic_is_old_or_new_and_durable_once_acknowledged) {
  const std::vector<std::byte> old_content(100, std::byte{1});
  const std::vector<std::byte> new_content(3000, std::byte{2});  // several sectors: a torn write would show
  crash_at_every_step_of_a_replacement([&](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    return replace_plain_file(seed, faults, stop_after, "/d", "f", old_content, new_content);
  });
}

BOOST_AUTO_TEST_CASE(current_config_toml_is_old_or_new_and_durable_once_acknowledged) {
  // The broker renders the effective configuration and replaces <data>/runtime/current_config.toml at each start.
  config::server_config before;
  before.data_dir = "/data";
  config::server_config after = before;
  after.tcp_address.port = 19092;  // as bound: the port 0 in the file replaced by the real one
  const auto old_content = bytes_of(config::render_toml(before));
  const auto new_content = bytes_of(config::render_toml(after));
  BOOST_REQUIRE(old_content != new_content);
  crash_at_every_step_of_a_replacement([&](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    return replace_plain_file(seed, faults, stop_after, "/data/runtime", "current_config.toml", old_content,
                              new_content);
  });
}

BOOST_AUTO_TEST_CASE(leader_epochs_replaced_by_set_leader_epoch) {
  crash_at_every_step_of_a_replacement([](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    return replace_epochs(
        seed, faults, stop_after,
        [](sim_log_fixture& f) {
          RILL_REQUIRE_OK(f.run_checked(f.log->set_leader_epoch(epoch_t(1))));
          RILL_REQUIRE_OK(f.append(make_batch("e1", 10)));
        },
        [](sim_log_fixture& f) { return run(f.disk, f.log->set_leader_epoch(epoch_t(2))).has_value(); },
        epochs_of({{1, 0}, {2, 10}}));
  });
}

BOOST_AUTO_TEST_CASE(leader_epochs_replaced_by_a_replicated_append_with_a_new_epoch) {
  crash_at_every_step_of_a_replacement([](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    return replace_epochs(
        seed, faults, stop_after,
        [](sim_log_fixture& f) {
          RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(0, 3, 10, 1, "a"))));
        },
        [](sim_log_fixture& f) {
          return run(f.disk, f.log->append_replicated(primary_batches(30, 1, 10, 2, "b"))).has_value();
        },
        epochs_of({{1, 0}, {2, 30}}));
  });
}

BOOST_AUTO_TEST_CASE(leader_epochs_replaced_by_truncate_after) {
  crash_at_every_step_of_a_replacement([](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    return replace_epochs(
        seed, faults, stop_after,
        [](sim_log_fixture& f) {
          RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(0, 3, 10, 1, "a"))));
          RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(30, 3, 10, 2, "b"))));
        },
        [](sim_log_fixture& f) { return run(f.disk, f.log->truncate_after(offset_t(29))).has_value(); },
        epochs_of({{1, 0}}));
  });
}

BOOST_AUTO_TEST_CASE(leader_epochs_trimmed_by_recovery) {
  // An epoch file that names an epoch past the log's end (its batches were lost in a crash after the file was
  // written, as a replicated append writes it first): recovery trims it at open.
  crash_at_every_step_of_a_replacement([](std::uint64_t seed, const sim_disk_faults& faults, auto stop_after) {
    sim_log_fixture f(seed, faults);
    f.options.auto_commit = false;
    f.open();
    RILL_REQUIRE_OK(f.run_checked(f.log->append_replicated(primary_batches(0, 3, 10, 1, "a"))));
    f.close();
    const auto old_content = epochs_of({{1, 0}, {3, 50}}).encode();
    const auto new_content = epochs_of({{1, 0}}).encode();
    RILL_REQUIRE_OK(run(f.disk, write_file_atomic(f.disk, f.dir, epoch_history::file_name, old_content)));
    replacement_outcome o;
    const auto before = f.disk.mutating_ops();
    if (stop_after) {
      f.disk.fail_stop_after(*stop_after);
    }
    auto opened = f.try_open();
    o.acknowledged = opened.has_value();
    o.mutating_ops = f.disk.mutating_ops() - before;
    if (!f.disk.stopped()) {
      f.disk.halt();
    }
    if (opened) {
      f.log = std::move(*opened);
      f.close();
    }
    lose_power(f.disk);
    const auto content = epochs_file(f);
    o.is_old = content == old_content;
    o.is_new = content == new_content;
    f.open();
    BOOST_TEST(f.log->epochs().entries() == epochs_of({{1, 0}}).entries());
    return o;
  });
}

BOOST_AUTO_TEST_SUITE_END()
