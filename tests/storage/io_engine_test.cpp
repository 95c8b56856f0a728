// The real-file backends (io_uring, and the synchronous one for tools) on temporary directories, and the
// partition log running on io_uring.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "storage/file_ops.h"
#include "storage/io/sync_engine.h"
#include "storage/io/uring_engine.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {
struct temp_dir {
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rill-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string path;
};

enum class backend { uring, uring_fallbacks, sync };

std::unique_ptr<io::engine> make_engine(backend b) {
  if (b == backend::sync) {
    return std::make_unique<io::sync_engine>();
  }
  auto e = io::uring_engine::create(64, b == backend::uring);
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e ? std::string() : e.error().message()));
  return std::move(*e);
}

void exercise_engine(io::engine& e, const std::string& dir) {
  const std::string sub = dir + "/a/b/c";
  RILL_REQUIRE_OK(run(e, make_dirs(e, sub)));
  struct stat st {};
  BOOST_REQUIRE(::stat(sub.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  const std::string file = sub + "/f.bin";
  auto fd = run(e, open_file(e, file, io::open_create | io::open_exclusive, 0600));
  RILL_REQUIRE_OK(fd);
  BOOST_REQUIRE(::stat(file.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  // A second exclusive create fails with the errno named.
  auto again = run(e, open_file(e, file, io::open_create | io::open_exclusive, 0600));
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST(again.error().detail().find("exists") != std::string::npos);

  std::vector<std::byte> a(10000, std::byte{1});
  std::vector<std::byte> b(5000, std::byte{2});
  ::iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  RILL_REQUIRE_OK(run(e, writev_all(e, *fd, 100, iov, file)));
  RILL_REQUIRE_OK(run(e, datasync_file(e, *fd, file)));
  auto size = run(e, size_of_file(e, *fd, file));
  RILL_REQUIRE_OK(size);
  BOOST_TEST(*size == 15100u);
  std::vector<std::byte> back(20000);
  auto got = run(e, read_at(e, *fd, 0, back, file));
  RILL_REQUIRE_OK(got);
  BOOST_TEST(*got == 15100u);
  BOOST_TEST((back[99] == std::byte{0}));
  BOOST_TEST((back[100] == std::byte{1}));
  BOOST_TEST((back[10100] == std::byte{2}));
  // A write and its fdatasync submitted together.
  {
    std::vector<std::byte> c(3000, std::byte{3});
    ::iovec one[1] = {{c.data(), c.size()}};
    bool done = false;
    io::request r;
    r.op = io::opcode::writev_datasync;
    r.fd = *fd;
    r.offset = 15100;
    r.iov = one;
    r.iov_count = 1;
    r.user = &done;
    r.on_complete = [](io::request& q) { *static_cast<bool*>(q.user) = true; };
    e.submit(r);
    io::run_until(e, [&] { return done; });
    BOOST_TEST(r.result == 3000);
    BOOST_TEST(r.sync_result == 0);
    BOOST_TEST(*run(e, size_of_file(e, *fd, file)) == 18100u);
  }
  RILL_REQUIRE_OK(run(e, truncate_file(e, *fd, 4096, file)));
  BOOST_TEST(*run(e, size_of_file(e, *fd, file)) == 4096u);
  RILL_REQUIRE_OK(run(e, close_file(e, *fd, file)));

  RILL_REQUIRE_OK(run(e, rename_file(e, file, sub + "/g.bin")));
  auto names = run(e, list_dir(e, sub));
  RILL_REQUIRE_OK(names);
  BOOST_TEST(*names == std::vector<std::string>{"g.bin"});
  RILL_REQUIRE_OK(run(e, sync_dir(e, sub)));
  RILL_REQUIRE_OK(run(e, unlink_file(e, sub + "/g.bin")));
  BOOST_TEST(!run(e, unlink_file(e, sub + "/g.bin")).has_value());
  RILL_REQUIRE_OK(run(e, unlink_file(e, sub + "/g.bin", true)));
  RILL_REQUIRE_OK(run(e, remove_dir(e, sub)));
  auto missing = run(e, list_dir(e, sub));
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().detail().find(sub) != std::string::npos);
  BOOST_TEST(e.in_flight() == 0u);
}

void exercise_log(io::engine& e, const std::string& dir) {
  manual_clock clk;
  buffer_pool pool;
  collecting_reporter reporter;
  log_options options;
  options.config.segment_bytes = 1024 * 1024;
  options.config.retention_bytes = 1024 * 1024;
  auto opened = run(e, partition_log::open(e, pool, clk, reporter, dir + "/p0", options));
  RILL_REQUIRE_OK(opened);
  auto log = std::move(*opened);
  // Concurrent appends: group commit through the real ring.
  int done = 0;
  for (int i = 0; i < 400; ++i) {
    spawn(log->append(make_batch("u" + std::to_string(i), 10, 500)), [&](expected<append_result> r) {
      BOOST_REQUIRE(r.has_value());
      ++done;
    });
  }
  io::run_until(e, [&] { return done == 400; });
  BOOST_TEST(done == 400);
  BOOST_TEST(log->log_end().value() == 4000);
  BOOST_TEST(log->stats().syncs < 400u);
  BOOST_TEST(log->segment_bases().size() > 1u);
  auto retained = run(e, log->enforce_retention());
  RILL_REQUIRE_OK(retained);
  BOOST_TEST(retained->segments_removed > 0u);
  RILL_REQUIRE_OK(run(e, log->close()));
  log.reset();
  // Reopen and read everything that was kept, in order.
  opened = run(e, partition_log::open(e, pool, clk, reporter, dir + "/p0", options));
  RILL_REQUIRE_OK(opened);
  log = std::move(*opened);
  BOOST_TEST(log->log_end().value() == 4000);
  offset_t at = log->log_start();
  std::int64_t records = 0;
  for (;;) {
    read_request req;
    req.offset = at;
    auto r = run(e, log->read(req));
    RILL_REQUIRE_OK(r);
    if (r->batches == 0) {
      break;
    }
    for (const auto& b : split_batches(r->bytes.span())) {
      BOOST_TEST(b.base_offset().value() == at.value() + 0);
      at = b.next_offset();
      records += b.records_count();
    }
  }
  BOOST_TEST(at.value() == 4000);
  BOOST_TEST(records == 4000 - log->log_start().value());
  BOOST_TEST(reporter.corruptions.empty());
  RILL_REQUIRE_OK(run(e, log->close()));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(io_engine_suite)

BOOST_AUTO_TEST_CASE(uring_engine_file_operations) {
  temp_dir d;
  auto e = make_engine(backend::uring);
  exercise_engine(*e, d.path);
  auto* u = static_cast<io::uring_engine*>(e.get());
  BOOST_TEST_MESSAGE("native ftruncate: " << u->native_ftruncate() << ", submissions " << u->submissions()
                                          << ", enters " << u->enters());
}

BOOST_AUTO_TEST_CASE(uring_engine_helper_thread_fallbacks) {
  temp_dir d;
  auto e = make_engine(backend::uring_fallbacks);
  BOOST_TEST(!static_cast<io::uring_engine*>(e.get())->native_ftruncate());
  exercise_engine(*e, d.path);
}

BOOST_AUTO_TEST_CASE(uring_engine_blocking_writes_complete_inside_poll) {
  // A write marked blocking_ok runs as pwritev on the owner's thread, and like any request completes from poll(),
  // never from submit().
  temp_dir d;
  auto made = io::uring_engine::create(64);
  BOOST_REQUIRE(made.has_value());
  auto& e = **made;
  const std::string file = d.path + "/f.bin";
  auto fd = run(e, open_file(e, file, io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  std::vector<std::byte> a(5000, std::byte{4});
  std::vector<std::byte> b(7000, std::byte{5});
  ::iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  bool done = false;
  io::request r;
  r.op = io::opcode::writev;
  r.blocking_ok = true;
  r.fd = *fd;
  r.offset = 10;
  r.iov = iov;
  r.iov_count = 2;
  r.user = &done;
  r.on_complete = [](io::request& q) { *static_cast<bool*>(q.user) = true; };
  e.submit(r);
  BOOST_TEST(!done);
  BOOST_TEST(e.in_flight() == 1u);
  BOOST_TEST(e.poll(false) == 1u);
  BOOST_TEST(done);
  BOOST_TEST(r.result == 12000);
  BOOST_TEST(e.blocking_writes() == 1u);
  BOOST_TEST(e.in_flight() == 0u);
  std::vector<std::byte> back(12010);
  BOOST_TEST(*run(e, read_at(e, *fd, 0, back, file)) == 12010u);
  BOOST_TEST((back[10] == std::byte{4}));
  BOOST_TEST((back[5010] == std::byte{5}));
  // writev_all passes the mark on; without it the write goes through the ring.
  RILL_REQUIRE_OK(run(e, writev_all(e, *fd, 0, iov, file, true)));
  BOOST_TEST(e.blocking_writes() == 2u);
  RILL_REQUIRE_OK(run(e, writev_all(e, *fd, 0, iov, file)));
  BOOST_TEST(e.blocking_writes() == 2u);
  // A failed blocking write reports its errno like any other.
  RILL_REQUIRE_OK(run(e, close_file(e, *fd, file)));
  auto bad = run(e, writev_all(e, 1'000'000, 0, iov, file, true));
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().detail().find("writev") != std::string::npos);
}

namespace {
// A write + fdatasync request of `iov` at `offset` that sets *done when it completes.
io::request datasync_request(int fd, std::uint64_t offset, const ::iovec* iov, unsigned count, bool* done) {
  io::request r;
  r.op = io::opcode::writev_datasync;
  r.fd = fd;
  r.offset = offset;
  r.iov = iov;
  r.iov_count = count;
  r.user = done;
  r.on_complete = [](io::request& q) { *static_cast<bool*>(q.user) = true; };
  return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(uring_engine_inline_idle_syncs) {
  // With inline idle syncs on, a lone write + fdatasync is kept back by poll(false) and run on the owner's thread by
  // poll_wait() (the owner would sleep otherwise); submit_deferred() hands it to the ring instead; company (two at
  // once, or a sync of another file) backs inlining off; sockets in flight are not company.
  temp_dir d;
  auto made = io::uring_engine::create(64);
  BOOST_REQUIRE(made.has_value());
  auto& e = **made;
  e.set_inline_idle_syncs(true);
  const std::string file = d.path + "/f.bin";
  auto fd = run(e, open_file(e, file, io::open_create, 0600));
  RILL_REQUIRE_OK(fd);
  std::vector<std::byte> a(5000, std::byte{4});
  std::vector<std::byte> b(7000, std::byte{5});
  ::iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};

  // A socket receive stays in flight throughout: it is not file I/O, so it does not stop a sync from running inline.
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  std::byte got[1];
  bool received = false;
  io::request recv;
  recv.op = io::opcode::recv;
  recv.fd = pair[0];
  recv.buffer = got;
  recv.length = 1;
  recv.user = &received;
  recv.on_complete = [](io::request& q) { *static_cast<bool*>(q.user) = true; };
  e.submit(recv);
  BOOST_TEST(e.poll(false) == 0u);

  bool done1 = false;
  io::request r1 = datasync_request(*fd, 10, iov, 2, &done1);
  e.submit(r1);
  BOOST_TEST(e.poll(false) == 0u);  // kept back: the owner may yet find other work
  BOOST_TEST(!done1);
  BOOST_TEST(e.poll_wait(std::chrono::seconds(5)) == 1u);
  BOOST_TEST(done1);
  BOOST_TEST(r1.result == 12000);
  BOOST_TEST(r1.sync_result == 0);
  BOOST_TEST(e.inline_syncs() == 1u);
  BOOST_TEST(e.in_flight() == 1u);  // the receive
  std::vector<std::byte> back(12010);
  BOOST_TEST(*run(e, read_at(e, *fd, 0, back, file)) == 12010u);
  BOOST_TEST((back[10] == std::byte{4}));
  BOOST_TEST((back[5010] == std::byte{5}));

  // The owner found work after all: submit_deferred() gives the request to the ring.
  bool done2 = false;
  io::request r2 = datasync_request(*fd, 12010, iov, 2, &done2);
  e.submit(r2);
  BOOST_TEST(e.poll(false) == 0u);
  e.submit_deferred();
  while (!done2) {
    e.poll(true);
  }
  BOOST_TEST(r2.result == 12000);
  BOOST_TEST(r2.sync_result == 0);
  BOOST_TEST(e.inline_syncs() == 1u);
  BOOST_TEST(e.inline_backoffs() == 0u);

  // A failed write run inline reports its errno, and its fdatasync did not run.
  ::iovec bad_iov[1] = {{nullptr, 100}};
  bool done5 = false;
  io::request r5 = datasync_request(*fd, 0, bad_iov, 1, &done5);
  e.submit(r5);
  BOOST_TEST(e.poll(false) == 0u);
  BOOST_TEST(e.poll_wait(std::chrono::seconds(5)) == 1u);
  BOOST_TEST(done5);
  BOOST_TEST(r5.result == -EFAULT);
  BOOST_TEST(r5.sync_result == -ECANCELED);
  BOOST_TEST(e.inline_syncs() == 2u);

  // A sync of another file: more than one log syncs here, whose fdatasyncs would overlap in the ring. Company:
  // inlining backs off, and this one goes to the ring at poll(false).
  const std::string file2 = d.path + "/g.bin";
  auto fd2 = run(e, open_file(e, file2, io::open_create, 0600));
  RILL_REQUIRE_OK(fd2);
  bool done6 = false;
  io::request r6 = datasync_request(*fd2, 0, iov, 2, &done6);
  e.submit(r6);
  BOOST_TEST(e.inline_backoffs() == 1u);
  const auto submissions_before = e.submissions();
  e.poll(false);
  BOOST_TEST(e.submissions() == submissions_before + 2);  // the linked write + fdatasync, at once
  while (!done6) {
    e.poll_wait(std::chrono::seconds(5));  // would run it inline had it been kept back
  }
  BOOST_TEST(r6.sync_result == 0);
  BOOST_TEST(e.inline_syncs() == 2u);

  // Two at once: both go to the ring at the first poll(false), so their fdatasyncs can overlap.
  bool done3 = false;
  bool done4 = false;
  io::request r3 = datasync_request(*fd, 36010, iov, 2, &done3);
  io::request r4 = datasync_request(*fd, 48010, iov, 2, &done4);
  e.submit(r3);
  BOOST_TEST(e.inline_backoffs() == 2u);  // back to the first file
  e.submit(r4);
  BOOST_TEST(e.inline_backoffs() == 3u);  // while r3 is in flight
  e.poll(false);
  while (!done3 || !done4) {
    e.poll_wait(std::chrono::seconds(5));
  }
  BOOST_TEST(r3.sync_result == 0);
  BOOST_TEST(r4.sync_result == 0);
  BOOST_TEST(e.inline_syncs() == 2u);

  // A timer due within inline_timeout_min: poll_wait does not run the sync inline (the timer must not wait for it).
  // r3 and r4 were two at once; an idle stretch of other syncs on this file would lift the back-off, so start over.
  auto fresh = io::uring_engine::create(64);
  BOOST_REQUIRE(fresh.has_value());
  auto& f = **fresh;
  f.set_inline_idle_syncs(true);
  bool done8 = false;
  io::request r8 = datasync_request(*fd, 72010, iov, 2, &done8);
  f.submit(r8);
  BOOST_TEST(f.poll(false) == 0u);
  f.poll_wait(std::chrono::microseconds(100));
  while (!done8) {
    f.poll_wait(std::chrono::microseconds(100));
  }
  BOOST_TEST(r8.sync_result == 0);
  BOOST_TEST(f.inline_syncs() == 0u);

  // Off (the default): poll(false) submits at once.
  e.set_inline_idle_syncs(false);
  bool done7 = false;
  io::request r7 = datasync_request(*fd, 60010, iov, 2, &done7);
  e.submit(r7);
  e.poll(false);
  while (!done7) {
    e.poll_wait(std::chrono::seconds(5));
  }
  BOOST_TEST(r7.sync_result == 0);
  BOOST_TEST(e.inline_syncs() == 2u);

  const std::byte one{1};
  BOOST_REQUIRE(::write(pair[1], &one, 1) == 1);
  while (!received) {
    e.poll(true);
  }
  BOOST_TEST(recv.result == 1);
  ::close(pair[0]);
  ::close(pair[1]);
  RILL_REQUIRE_OK(run(e, close_file(e, *fd, file)));
  RILL_REQUIRE_OK(run(e, close_file(e, *fd2, file2)));
}

BOOST_AUTO_TEST_CASE(sync_engine_file_operations) {
  temp_dir d;
  auto e = make_engine(backend::sync);
  exercise_engine(*e, d.path);
}

BOOST_AUTO_TEST_CASE(partition_log_on_io_uring) {
  temp_dir d;
  auto e = make_engine(backend::uring);
  exercise_log(*e, d.path);
}

BOOST_AUTO_TEST_CASE(partition_log_on_the_sync_engine) {
  temp_dir d;
  auto e = make_engine(backend::sync);
  exercise_log(*e, d.path);
}

BOOST_AUTO_TEST_CASE(files_are_0600_and_directories_0700) {
  temp_dir d;
  auto e = make_engine(backend::uring);
  manual_clock clk;
  buffer_pool pool;
  collecting_reporter reporter;
  auto opened = run(*e, partition_log::open(*e, pool, clk, reporter, d.path + "/s/0/p/1", log_options{}));
  RILL_REQUIRE_OK(opened);
  RILL_REQUIRE_OK(run(*e, (*opened)->set_leader_epoch(epoch_t(1))));
  RILL_REQUIRE_OK(run(*e, (*opened)->close()));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(d.path + "/s")) {
    struct stat st {};
    BOOST_REQUIRE(::stat(entry.path().c_str(), &st) == 0);
    const auto mode = st.st_mode & 0777;
    if (entry.is_directory()) {
      BOOST_TEST(mode == 0700u, entry.path());
    } else {
      BOOST_TEST(mode == 0600u, entry.path());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// connect (the replica plane dials its peers): a non-blocking socket connects to a listening one, bytes go through,
// and a port nobody listens on is refused with -ECONNREFUSED; on io_uring and on the blocking backend alike.
BOOST_AUTO_TEST_CASE(connect_reaches_a_listener_and_a_closed_port_is_refused) {
  for (const backend b : {backend::uring, backend::sync}) {
    auto e = make_engine(b);
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(listener, reinterpret_cast<::sockaddr*>(&at), sizeof at) == 0);
    BOOST_REQUIRE(::listen(listener, 4) == 0);
    ::socklen_t len = sizeof at;
    BOOST_REQUIRE(::getsockname(listener, reinterpret_cast<::sockaddr*>(&at), &len) == 0);
    auto dial = [&](const ::sockaddr_in& to) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      io::request r;
      r.op = io::opcode::connect;
      r.fd = fd;
      r.cbuffer = reinterpret_cast<const std::byte*>(&to);
      r.length = sizeof to;
      bool done = false;
      r.user = &done;
      r.on_complete = [](io::request& q) { *static_cast<bool*>(q.user) = true; };
      e->submit(r);
      while (!done) {
        e->poll(true);
      }
      return std::pair{fd, r.result};
    };
    auto [fd, result] = dial(at);
    BOOST_TEST(result == 0, "connect: " << result);
    const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    BOOST_REQUIRE(accepted >= 0);
    BOOST_TEST(::send(fd, "hi", 2, MSG_NOSIGNAL) == 2);
    char got[2] = {};
    BOOST_TEST(::recv(accepted, got, 2, MSG_WAITALL) == 2);
    BOOST_TEST((got[0] == 'h' && got[1] == 'i'));
    ::close(accepted);
    ::close(fd);
    // The same port once nobody listens there.
    ::close(listener);
    auto [refused_fd, refused] = dial(at);
    BOOST_TEST(refused == -ECONNREFUSED, "connect to a closed port: " << refused);
    ::close(refused_fd);
  }
}
