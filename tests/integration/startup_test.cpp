// The real rilld's start-up under hostile conditions (issue 13): a start that fails before recovery serves nobody and
// writes nothing; a restart right after SIGKILL binds its old port; configuration loose ends are refused by name.
// Every wait is for an event (a line in the log, a process exiting, a reply); the deadlines are generous bounds only.
#define BOOST_TEST_MODULE rill_startup
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <limits>
#include <thread>

#include "net/client.h"
#include "storage/record_batch_builder.h"
#include "tests/integration/rilld_process.h"
#include "tests/integration/taken_port.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::net;
using rill::testing::rilld_process;
using rill::testing::taken_port;
using rill::testing::temp_data_dir;

namespace {

// A loopback port that was free a moment ago (bound, then released).
std::string free_port() {
  taken_port p;
  return p.address();
}

// Every path under `dir`, relative to it.
std::set<std::string> tree_of(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    out.insert(std::filesystem::relative(it->path(), dir).string());
  }
  return out;
}

// Waits until `log()` contains `text` or the process has exited; true when the text appeared.
bool wait_for_line(const rilld_process& p, const std::string& text, const std::atomic<bool>& exited) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (p.log().find(text) != std::string::npos) {
      return true;
    }
    if (exited.load()) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

int exit_code(const rilld_process& p) {
  BOOST_REQUIRE(p.exit_status().has_value());
  return WIFEXITED(*p.exit_status()) ? WEXITSTATUS(*p.exit_status()) : -1;
}

std::vector<std::byte> one_batch(const std::string& value) {
  storage::batch_builder b;
  b.add("k", value);
  return *b.build();
}

// Runs rilld with exactly `args` (no defaults added), in `dir` (so a relative data directory lands there), and
// returns its exit code and its output. A rilld that is still running after a generous deadline (one that took a
// value it should have refused, and serves) is stopped with SIGTERM and reported as -1.
std::pair<int, std::string> run_rilld(const std::vector<std::string>& args, const std::string& dir) {
  const std::string log_path = dir + "/rilld.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::chdir(dir.c_str()) != 0) {
      ::_exit(126);
    }
    std::vector<std::string> all = {RILLD_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  bool stopped = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (!stopped && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGTERM);
      stopped = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(log_path);
  std::stringstream s;
  s << in.rdbuf();
  return {!stopped && WIFEXITED(status) ? WEXITSTATUS(status) : -1, s.str()};
}

}  // namespace

// The HTTP port is taken: rilld has bound the client port by then (it binds every listener before recovery), so a
// client can connect while rilld retries the HTTP bind; it must never get an answer, and rilld must write nothing.
BOOST_AUTO_TEST_CASE(http_port_taken_serves_no_client_and_writes_nothing) {
  temp_data_dir dir;
  taken_port http;
  const std::string data = dir.path() + "/data";  // does not exist yet
  const std::string tcp = free_port();
  rilld_process p(data, {}, tcp, http.address());
  std::atomic<bool> exited{false};
  std::atomic<bool> answered{false};
  std::atomic<bool> connected{false};
  std::thread prober([&] {
    // rilld says it is retrying the HTTP bind: the client listener is bound by then.
    if (!wait_for_line(p, "network.http_address = " + http.address() + ": address in use", exited)) {
      return;
    }
    client_options o;
    o.server = tcp;
    o.retries = 0;
    auto c = client::connect(o);
    if (!c) {
      return;  // rilld gave up already: nothing answered either
    }
    connected = true;
    answered = (*c)->create_stream("s").has_value();  // waits until rilld closes the socket
  });
  BOOST_TEST(!p.start().has_value());
  exited = true;
  prober.join();
  BOOST_TEST(exit_code(p) == 1);
  BOOST_TEST(p.log().find("cannot start") != std::string::npos, p.log());
  BOOST_TEST(p.log().find("network.http_address = " + http.address()) != std::string::npos, p.log());
  // The prober must have connected while rilld retried the HTTP bind, or the test saw nothing.
  BOOST_TEST(connected.load(), "no client connected while rilld was starting: nothing was checked");
  BOOST_TEST(!answered.load(), "a start that failed served a client");
  BOOST_TEST(!std::filesystem::exists(data), "a failed start on a missing directory left: " << data);
  BOOST_TEST(p.log().find("serving") == std::string::npos);
}

// The client port is taken: the same, on a data directory that exists and is empty (it stays empty).
BOOST_AUTO_TEST_CASE(client_port_taken_writes_nothing) {
  temp_data_dir dir;
  taken_port tcp;
  const std::string data = dir.path() + "/data";
  std::filesystem::create_directory(data);
  rilld_process p(data, {}, tcp.address());
  BOOST_TEST(!p.start().has_value());
  BOOST_TEST(exit_code(p) == 1);
  BOOST_TEST(p.log().find("network.tcp_address = " + tcp.address()) != std::string::npos, p.log());
  BOOST_TEST(p.log().find("Address already in use") != std::string::npos, p.log());
  BOOST_TEST(tree_of(data).empty(), "a failed start left files in an empty directory");
  // A directory that had been used keeps its lock file (and everything else) and gains nothing.
  {
    rilld_process first(data);
    BOOST_REQUIRE_MESSAGE(first.start().has_value(), first.log());
    BOOST_TEST(first.stop() == 0);
  }
  std::filesystem::remove(data + "/runtime/current_config.toml");  // as rilld_process::start does, to await the new one
  const auto before = tree_of(data);
  BOOST_TEST(before.count("runtime/lock") == 1u);
  BOOST_TEST(before.count("metadata") == 1u);
  rilld_process again(data, {}, tcp.address());
  BOOST_TEST(!again.start().has_value());
  BOOST_TEST(tree_of(data) == before);
}

// SIGKILL with a client producing, then a restart on the same port at once, again and again: every restart binds
// (at once, or within the bounded retry of a bind that finds the old socket still closing), and nothing
// acknowledged is lost. A consumer offset is stored, so every recovery meets the partition's offsets/ directory.
BOOST_AUTO_TEST_CASE(restart_right_after_sigkill_binds_the_same_port) {
  temp_data_dir dir;
  const std::string data = dir.path() + "/data";
  std::string tcp;
  {
    rilld_process first(data);
    auto a = first.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), first.log());
    tcp = *a;
    client_options o;
    o.server = tcp;
    auto c = client::connect(o);
    RILL_REQUIRE_OK(c);
    RILL_REQUIRE_OK((*c)->create_stream("s"));
    RILL_REQUIRE_OK((*c)->create_topic(by_name("s"), "t", proto::TopicConfig{}));
    RILL_REQUIRE_OK((*c)->produce(by_name("s"), by_name("t"), 0, one_batch("first")));
    RILL_REQUIRE_OK((*c)->store_offset(by_name("s"), by_name("t"), 0, "reader", 1));
    first.kill_hard();
  }
  constexpr int cycles = 30;
  std::uint64_t acked = 1;
  int retried = 0;
  std::size_t log_seen = 0;  // every life appends to the same log
  for (int cycle = 0; cycle < cycles; ++cycle) {
    rilld_process p(data, {}, tcp);
    auto a = p.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "cycle " << cycle << ": rilld did not restart:\n" << p.log());
    BOOST_REQUIRE(*a == tcp);
    const auto whole = p.log();
    const auto log = whole.substr(std::min(log_seen, whole.size()));
    log_seen = whole.size();
    BOOST_TEST(log.find("Address already in use") == std::string::npos, log);
    BOOST_TEST(log.find("unknown file offsets") == std::string::npos, log);
    retried += log.find("address in use") != std::string::npos ? 1 : 0;
    // A client produces; once it has an acknowledgement from this life, rilld is killed while it goes on producing.
    std::atomic<std::uint64_t> acked_here{0};
    std::thread producer([&] {
      client_options o;
      o.server = tcp;
      o.retries = 0;
      auto c = client::connect(o);
      if (!c) {
        return;
      }
      for (int i = 0;; ++i) {
        if (!(*c)->produce(by_name("s"), by_name("t"), 0, one_batch(std::to_string(cycle) + "-" + std::to_string(i)))) {
          return;  // killed
        }
        acked_here.fetch_add(1);
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (acked_here.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    BOOST_REQUIRE(acked_here.load() > 0);
    p.kill_hard();
    producer.join();
    acked += acked_here.load();
  }
  BOOST_TEST_MESSAGE(cycles << " restarts after SIGKILL; " << retried << " of them retried their bind");
  // Everything acknowledged is there, and the consumer's offset.
  rilld_process last(data, {}, tcp);
  BOOST_REQUIRE_MESSAGE(last.start().has_value(), last.log());
  client_options o;
  o.server = tcp;
  auto c = client::connect(o);
  RILL_REQUIRE_OK(c);
  auto t = (*c)->get_topic(by_name("s"), by_name("t"));
  RILL_REQUIRE_OK(t);
  auto stored = (*c)->get_offset(by_name("s"), by_name("t"), 0, "reader");
  RILL_REQUIRE_OK(stored);
  BOOST_TEST(stored->value_or(0) == 1u);
  proto::PollRequest poll;
  *poll.mutable_stream() = by_name("s");
  *poll.mutable_topic() = by_name("t");
  poll.set_partition_id(0);
  poll.mutable_strategy()->set_kind(proto::PollStrategy::LAST);
  auto r = (*c)->poll(poll);
  RILL_REQUIRE_OK(r);
  BOOST_TEST(r->header.next_offset() >= acked);
  BOOST_TEST(last.stop() == 0);
}

// Loose ends: an empty data directory, a boolean spelt "yes", a poll at offset 2^64-1 (shown unsigned, and without
// the server's path).
BOOST_AUTO_TEST_CASE(loose_ends_are_refused_by_name) {
  temp_data_dir dir;
  auto [empty_code, empty_out] =
      run_rilld({"--data-dir", "", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, dir.path());
  BOOST_TEST(empty_code == 2, empty_out);
  BOOST_TEST(empty_out.find("server.data_dir = ''") != std::string::npos, empty_out);
  BOOST_TEST(!std::filesystem::exists(dir.path() + "/rill-data"));
  auto [yes_code, yes_out] = run_rilld({"--data-dir", dir.path() + "/d", "--tcp", "127.0.0.1:0", "--http",
                                        "127.0.0.1:0", "--set", "runtime.pin_cores=yes"},
                                       dir.path());
  BOOST_TEST(yes_code == 2, yes_out);
  BOOST_TEST(yes_out.find("runtime.pin_cores = 'yes'") != std::string::npos, yes_out);
  BOOST_TEST(yes_out.find("true or false") != std::string::npos, yes_out);
  BOOST_TEST(!std::filesystem::exists(dir.path() + "/d"));

  rilld_process p(dir.path() + "/data");
  auto a = p.start();
  BOOST_REQUIRE_MESSAGE(a.has_value(), p.log());
  client_options o;
  o.server = *a;
  auto c = client::connect(o);
  RILL_REQUIRE_OK(c);
  RILL_REQUIRE_OK((*c)->create_stream("s"));
  RILL_REQUIRE_OK((*c)->create_topic(by_name("s"), "t", proto::TopicConfig{}));
  proto::PollRequest poll;
  *poll.mutable_stream() = by_name("s");
  *poll.mutable_topic() = by_name("t");
  poll.set_partition_id(0);
  poll.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
  poll.mutable_strategy()->set_value(std::numeric_limits<std::uint64_t>::max());
  auto far = (*c)->poll(poll);
  BOOST_REQUIRE(!far.has_value());
  BOOST_TEST(far.error().code().value() == static_cast<int>(status::offset_out_of_range));
  const std::string message = far.error().detail();
  BOOST_TEST(message.find("18446744073709551615") != std::string::npos, message);
  BOOST_TEST(message.find("-1") == std::string::npos, message);
  BOOST_TEST(message.find(dir.path()) == std::string::npos, message);
  BOOST_TEST(p.stop() == 0);
}

BOOST_AUTO_TEST_CASE(a_data_directory_keeps_its_identity_and_a_member_starts_only_once_formatted) {
  temp_data_dir dir;
  const std::string member_dir = dir.path() + "/member";
  const std::vector<std::string> as_node_2 = {
      "--data-dir", member_dir,
      "--set",      "cluster.id=7",
      "--set",      "cluster.node_id=2",
      "--set",      "cluster.members=1@127.0.0.1:9422,2@127.0.0.1:9432,3@127.0.0.1:9442",
      "--tcp",      "127.0.0.1:0",
      "--http",     "127.0.0.1:0",
      "--set",      "network.replica_address=127.0.0.1:9432"};
  auto with = [&](std::vector<std::string> head, std::vector<std::string> tail = {}) {
    head.insert(head.end(), as_node_2.begin(), as_node_2.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  auto says = [](const std::string& out, const std::string& part) { return out.find(part) != std::string::npos; };
  // A member never starts from an unformatted directory (an empty one cannot tell a new node from one that lost its
  // disk), and the refused start leaves nothing behind.
  auto [unformatted, unformatted_out] = run_rilld(with({}), dir.path());
  BOOST_TEST(unformatted == 1, unformatted_out);
  BOOST_TEST(says(unformatted_out, "rilld format"), unformatted_out);
  BOOST_TEST(says(unformatted_out, "rilld recover"), unformatted_out);
  BOOST_TEST(!std::filesystem::exists(member_dir));
  // rilld format writes the identity; a formatted directory is never formatted again.
  auto [formatted, formatted_out] = run_rilld(with({"format"}), dir.path());
  BOOST_TEST(formatted == 0, formatted_out);
  BOOST_TEST(says(formatted_out, "formatted as node 2 of cluster 7 (members 1, 2, 3)"), formatted_out);
  BOOST_TEST(std::filesystem::exists(member_dir + "/identity"));
  auto [again, again_out] = run_rilld(with({"format"}), dir.path());
  BOOST_TEST(again == 1, again_out);
  BOOST_TEST(says(again_out, "already node 2 of cluster 7"), again_out);
  // Another cluster, node or members list is refused by name.
  auto [other_cluster, other_cluster_out] = run_rilld(with({}, {"--set", "cluster.id=8"}), dir.path());
  BOOST_TEST(other_cluster == 1, other_cluster_out);
  BOOST_TEST(says(other_cluster_out, "cluster.id = 8: this data directory belongs to cluster 7"), other_cluster_out);
  auto [other_node, other_node_out] = run_rilld(
      with({}, {"--set", "cluster.node_id=3", "--set", "network.replica_address=127.0.0.1:9442"}), dir.path());
  BOOST_TEST(other_node == 1, other_node_out);
  BOOST_TEST(says(other_node_out, "cluster.node_id = 3: this data directory is node 2's"), other_node_out);
  auto [other_members, other_members_out] =
      run_rilld(with({}, {"--set", "cluster.members=1@127.0.0.1:9422,2@127.0.0.1:9432,4@127.0.0.1:9442"}), dir.path());
  BOOST_TEST(other_members == 1, other_members_out);
  BOOST_TEST(says(other_members_out, "formatted for a cluster of nodes 1, 2, 3"), other_members_out);
  // With its own configuration it starts (tests/cluster run such clusters).
  // rilld recover needs members to recover from.
  auto [alone_recover, alone_recover_out] = run_rilld(
      {"recover", "--data-dir", dir.path() + "/r", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, dir.path());
  BOOST_TEST(alone_recover == 1, alone_recover_out);
  BOOST_TEST(says(alone_recover_out, "no peers to recover its data from"), alone_recover_out);
  BOOST_TEST(!std::filesystem::exists(dir.path() + "/r"));

  // A node alone formats itself at its first start, keeps its identity, and refuses another cluster id after.
  const std::string alone_dir = dir.path() + "/alone";
  {
    rilld_process p(alone_dir);
    auto a = p.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), p.log());
    BOOST_TEST(p.stop() == 0);
  }
  BOOST_TEST(std::filesystem::exists(alone_dir + "/identity"));
  {
    rilld_process p(alone_dir);
    auto a = p.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), p.log());
    BOOST_TEST(p.stop() == 0);
  }
  auto [alone_other, alone_other_out] = run_rilld(
      {"--data-dir", alone_dir, "--set", "cluster.id=5", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"}, dir.path());
  BOOST_TEST(alone_other == 1, alone_other_out);
  BOOST_TEST(says(alone_other_out, "cluster.id = 5: this data directory belongs to cluster"), alone_other_out);
}
