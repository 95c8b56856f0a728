// Issue 13, point 2, against the real rilld on a real full file system: a small tmpfs mounted in a mount namespace
// this test creates (so nothing outside it sees the mount). Producers get a clear no-space error and lose nothing,
// reads go on, the metadata keeps working (its journal and snapshot live in space reserved at creation), a delete
// works on the full disk and frees its space at once, writes resume by themselves, and a restart on the full disk
// starts and serves what was acknowledged.
//
// tmpfs fails the write itself with ENOSPC; ext4's delayed allocation can fail the fdatasync instead, which tmpfs
// never does: that case is covered on the simulated disk (tests/storage/full_disk_test.cpp).
#define BOOST_TEST_MODULE rill_full_disk_integration
#include <boost/test/unit_test.hpp>

#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "net/client.h"
#include "storage/record_batch_builder.h"
#include "tests/integration/rilld_process.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::net;
using rill::testing::rilld_process;
using rill::testing::temp_data_dir;

namespace {
constexpr std::uint64_t tmpfs_bytes = 160ull << 20;  // the metadata reserves about 72 MiB of it

status status_of(const rill::error& e) {
  return static_cast<status>(e.code().value());
}

std::uint64_t free_bytes(const std::string& path) {
  struct statvfs s {};
  BOOST_REQUIRE(::statvfs(path.c_str(), &s) == 0);
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

std::vector<std::byte> batch_of(const std::string& tag, int records, std::size_t value_bytes) {
  storage::batch_builder b;
  for (int i = 0; i < records; ++i) {
    std::string v = tag + "-" + std::to_string(i);
    v.resize(value_bytes, 'x');
    b.add("k", v);
  }
  return *b.build();
}

// Mounts a tmpfs of `bytes` at `dir` in a new mount namespace of this process (children inherit it). False, with
// the reason, where the process may not (no CAP_SYS_ADMIN and no user namespaces).
// Unmounts at the end of the test (before the directory holding the mount point is removed).
struct unmount_at_exit {
  std::string dir;
  ~unmount_at_exit() {
    if (!dir.empty()) {
      ::umount2(dir.c_str(), MNT_DETACH);
    }
  }
};

bool mount_small_tmpfs(const std::string& dir, std::uint64_t bytes, std::string& why) {
  if (::unshare(CLONE_NEWNS) != 0) {
    why = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    return false;
  }
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    why = std::string("making / private: ") + std::strerror(errno);
    return false;
  }
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    why = std::string("mount tmpfs: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// Takes what is left of the file system at `path` with a file of its own (to the last byte: no page left).
void take_the_rest(const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  const std::string chunk(4096, 'f');
  while (f.write(chunk.data(), static_cast<std::streamsize>(chunk.size())) && f.flush()) {
  }
  f.clear();
  while (f.put('f') && f.flush()) {
  }
}

// Produces `batch` to partition 0 until the disk refuses one; returns how many were acknowledged.
std::uint64_t fill(client& c, const std::string& topic, const std::vector<std::byte>& batch, rill::error& refusal) {
  for (std::uint64_t n = 0; n < 10'000; ++n) {
    auto r = c.produce(by_name("s"), by_name(topic), 0, batch);
    if (!r) {
      refusal = r.error();
      return n;
    }
  }
  BOOST_FAIL("the disk never filled");
  return 0;
}

// Every record of partition 0 of `topic`, from the first.
std::uint64_t records_in(client& c, const std::string& topic) {
  std::uint64_t records = 0;
  std::uint64_t next = 0;
  for (;;) {
    proto::PollRequest req;
    *req.mutable_stream() = by_name("s");
    *req.mutable_topic() = by_name(topic);
    req.set_partition_id(0);
    req.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
    req.mutable_strategy()->set_value(next);
    req.set_max_bytes(4 << 20);
    auto polled = c.poll(req);
    BOOST_REQUIRE_MESSAGE(polled.has_value(), (polled ? std::string() : polled.error().message()));
    auto decoded = decode_records(0, polled->batches);
    RILL_REQUIRE_OK(decoded);
    if (decoded->empty()) {
      return records;
    }
    records += decoded->size();
    next = decoded->back().offset + 1;
  }
}

std::unique_ptr<client> connect_to(const rilld_process& p) {
  client_options o;
  o.server = p.address();
  auto c = client::connect(o);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error().message()));
  return std::move(*c);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(full_disk_suite)

BOOST_AUTO_TEST_CASE(a_full_disk_refuses_writes_keeps_metadata_deletes_frees_and_restarts) {
  temp_data_dir outside;  // rilld's output goes here, off the full disk
  const std::string mount = outside.path() + "/small";
  std::filesystem::create_directory(mount);
  std::string why;
  if (!mount_small_tmpfs(mount, tmpfs_bytes, why)) {
    BOOST_WARN_MESSAGE(false, "SKIPPED: cannot mount a tmpfs in a mount namespace here (" << why << ")");
    return;
  }
  unmount_at_exit unmount{mount};  // after rilld (declared below) is gone
  const std::string data = mount + "/data";
  rilld_process p(data, {"--set", "storage.preallocate_bytes=1048576"});
  p.set_log_path(outside.path() + "/rilld.log");
  BOOST_REQUIRE_MESSAGE(p.start().has_value(), "rilld did not start:\n" << p.log());
  auto c = connect_to(p);
  RILL_REQUIRE_OK(c->create_stream("s"));
  proto::TopicConfig one;
  one.set_partitions(1);
  RILL_REQUIRE_OK(c->create_topic(by_name("s"), "big", one));
  RILL_REQUIRE_OK(c->create_topic(by_name("s"), "keep", one));
  const auto batch = batch_of("v", 64, 4000);  // about 256 KiB
  RILL_REQUIRE_OK(c->produce(by_name("s"), by_name("keep"), 0, batch));
  RILL_REQUIRE_OK(c->create_group(by_name("s"), by_name("keep"), "g"));

  // 1. The disk fills: a clear error, nothing acknowledged lost, reads go on.
  rill::error refusal;
  const std::uint64_t acknowledged = fill(*c, "big", batch, refusal);
  BOOST_TEST_MESSAGE("acknowledged " << acknowledged << " batches before the disk was full");
  BOOST_TEST(acknowledged > 10u);
  BOOST_TEST((status_of(refusal) == status::disk_full));
  BOOST_TEST(refusal.message().find("disk is full") != std::string::npos, refusal.message());
  BOOST_TEST(refusal.message().find(data) == std::string::npos, "no server path: " << refusal.message());
  // To the last page: small batches until even they are refused.
  const std::uint64_t small = fill(*c, "big", batch_of("w", 1, 1000), refusal);
  BOOST_TEST((status_of(refusal) == status::disk_full));
  BOOST_TEST(records_in(*c, "big") == acknowledged * 64 + small);
  // Another partition fits into its preallocated zeros for a while, then is refused the same way.
  const std::uint64_t kept_before = 1 + fill(*c, "keep", batch, refusal);
  BOOST_TEST((status_of(refusal) == status::disk_full));

  // 2. The metadata works on the full disk (its journal and snapshot are reserved): streams are created, renamed and
  // deleted; a consumer group is created and deleted.
  RILL_REQUIRE_OK(c->create_stream("meta"));
  RILL_REQUIRE_OK(c->update_stream(by_name("meta"), "renamed"));
  RILL_REQUIRE_OK(c->delete_stream(by_name("renamed")));
  // A consumer group's state file cannot be written: the join is refused (disk_full), the group is not fenced.
  take_the_rest(mount + "/filler");
  BOOST_TEST(free_bytes(mount) == 0u);
  auto refused_join = c->join_group(by_name("s"), by_name("keep"), by_name("g"));
  BOOST_TEST_MESSAGE("join on the full disk: " << (refused_join ? std::string("ok") : refused_join.error().message()));
  BOOST_TEST(!refused_join.has_value());
  if (!refused_join) {
    BOOST_TEST((status_of(refused_join.error()) == status::disk_full));
  }

  // 3. A delete works and frees its space at once; writes resume by themselves.
  std::filesystem::remove(mount + "/filler");
  const std::uint64_t free_before = free_bytes(mount);
  RILL_REQUIRE_OK(c->delete_topic(by_name("s"), by_name("big")));
  const std::uint64_t free_after = free_bytes(mount);
  BOOST_TEST(free_after > free_before + acknowledged * batch.size() / 2,
             "free " << free_before << " -> " << free_after);
  RILL_REQUIRE_OK(c->produce(by_name("s"), by_name("keep"), 0, batch));
  // The group works again with the first request once there is room.
  auto joined = c->join_group(by_name("s"), by_name("keep"), by_name("g"));
  RILL_REQUIRE_OK(joined);
  RILL_REQUIRE_OK(c->heartbeat_group(by_name("s"), by_name("keep"), by_name("g"), joined->member_id()));
  RILL_REQUIRE_OK(c->leave_group(by_name("s"), by_name("keep"), by_name("g"), joined->member_id()));
  RILL_REQUIRE_OK(c->delete_group(by_name("s"), by_name("keep"), by_name("g")));

  // 4. Full again, then a restart on the full disk: it starts, serves what was acknowledged, and a delete frees.
  const std::uint64_t kept = kept_before + 1 + fill(*c, "keep", batch, refusal);
  c.reset();
  BOOST_TEST(p.stop() == 0);
  BOOST_REQUIRE_MESSAGE(p.start().has_value(), "rilld did not restart on the full disk:\n" << p.log());
  c = connect_to(p);
  BOOST_TEST(records_in(*c, "keep") == kept * 64);
  RILL_REQUIRE_OK(c->create_topic(by_name("s"), "after", one));
  RILL_REQUIRE_OK(c->delete_topic(by_name("s"), by_name("keep")));
  RILL_REQUIRE_OK(c->produce(by_name("s"), by_name("after"), 0, batch));
  BOOST_TEST(records_in(*c, "after") == 64u);
  c.reset();
  BOOST_TEST(p.stop() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
