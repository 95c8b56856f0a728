// Consumer groups against the real rilld over real sockets: spread and sticky rebalances with library members, a
// member process SIGKILLed mid-stream (its partitions move, nothing is lost, no partition is read by two members
// under one generation), stale generations refused, and offsets surviving a SIGKILL of the server and a restart.
#define BOOST_TEST_MODULE rill_group_integration
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "net/client.h"
#include "net/group_consumer.h"
#include "tests/integration/rilld_process.h"
#include "tests/test_util.h"

#ifndef RILL_CLI_PATH
#error "RILL_CLI_PATH must name the rill binary"
#endif

using namespace rill;
using namespace rill::net;
using namespace std::chrono_literals;
using rill::testing::rilld_process;
using rill::testing::temp_data_dir;

namespace {

struct server {
  server() : proc(dir.path() + "/data") { start(); }
  void start() {
    auto a = proc.start();
    BOOST_REQUIRE_MESSAGE(a.has_value(), "rilld did not start:\n" << proc.log());
    options.server = proc.address();
    auto c = client::connect(options);
    BOOST_REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error().message()));
    cli = std::move(*c);
  }
  temp_data_dir dir;
  rilld_process proc;
  client_options options;
  std::unique_ptr<client> cli;
};

status status_of(const rill::error& e) {
  return static_cast<status>(e.code().value());
}

// Waits for `done` (checked every 25 ms); returns whether it came true. The tests wait for events, never for a
// time: this deadline only keeps a broken server from hanging them, however loaded the machine.
constexpr std::chrono::seconds hang_guard{60};
template <class F>
bool eventually(F&& done) {
  const auto until = std::chrono::steady_clock::now() + hang_guard;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(25ms);
  }
  return done();
}

struct seen {
  std::uint32_t partition;
  std::int64_t offset;
  std::uint64_t generation;
  std::string member;
};

// A group member in a thread of this process, polling until stopped, keeping what it read.
class member_thread {
 public:
  // `heartbeat_every` 0: a third of the group's session timeout.
  member_thread(const client_options& c, const std::string& topic, std::chrono::milliseconds commit_every,
                std::chrono::milliseconds heartbeat_every = 0ms) {
    group_consumer_options o;
    o.connection = c;
    o.group = "g";
    o.topics.push_back(group_subscription{by_name("s"), by_name(topic)});
    o.create_group = false;
    o.auto_commit_interval = commit_every;
    o.heartbeat_interval = heartbeat_every;
    o.max_wait = 100ms;
    o.max_records = 50;
    auto g = group_consumer::create(o);
    BOOST_REQUIRE_MESSAGE(g.has_value(), (g ? std::string() : g.error().message()));
    consumer_ = std::move(*g);
    id_ = consumer_->assignments()[0].member_id;
    thread_ = std::thread([this] {
      while (!stop_) {
        auto r = consumer_->poll();
        if (!r) {
          ++errors_;
          std::this_thread::sleep_for(20ms);
          continue;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& rec : *r) {
          records_.push_back(seen{rec.partition, rec.offset, rec.generation, id_});
        }
      }
    });
  }
  ~member_thread() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
      BOOST_TEST(consumer_->close().has_value());
    }
  }
  std::vector<seen> records() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return records_;
  }
  const std::string& id() const { return id_; }
  int errors() const { return errors_; }

 private:
  std::unique_ptr<group_consumer> consumer_;
  std::string id_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> errors_{0};
  mutable std::mutex mutex_;
  std::vector<seen> records_;
};

proto::GroupInfo describe(client& c, const std::string& topic) {
  auto g = c.get_group(by_name("s"), by_name(topic), by_name("g"));
  BOOST_REQUIRE_MESSAGE(g.has_value(), (g ? std::string() : g.error().message()));
  return *g;
}

std::map<std::string, std::size_t> shares(const proto::GroupInfo& g) {
  std::map<std::string, std::size_t> out;
  for (const auto& m : g.members()) {
    out[m.member_id()] = static_cast<std::size_t>(m.owned_size());
  }
  return out;
}

bool balanced(const proto::GroupInfo& g, int members, std::uint32_t partitions) {
  if (!g.stable() || g.members_size() != members) {
    return false;
  }
  for (const auto& [id, n] : shares(g)) {
    if (n != partitions / members && n != (partitions + members - 1) / members) {
      return false;
    }
  }
  return true;
}

void make_topic(client& c, const std::string& topic, std::uint32_t partitions, std::uint32_t session_ms) {
  proto::TopicConfig tc;
  tc.set_partitions(partitions);
  BOOST_REQUIRE(c.create_topic(by_name("s"), topic, tc).has_value());
  proto::GroupConfig gc;
  gc.set_session_timeout_ms(session_ms);
  BOOST_REQUIRE(c.create_group(by_name("s"), by_name(topic), "g", gc).has_value());
}

// A rill CLI process reading as member `member` of group g, printing what it reads as JSON lines to `out_path`.
pid_t spawn_cli_member(const std::string& server, const std::string& topic, const std::string& member,
                       const std::string& out_path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    std::vector<std::string> args = {RILL_CLI_PATH, "--server", server, "--json",   "consume", "s",
                                     topic,         "--group",  "g",    "--member", member,    "--follow"};
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

BOOST_AUTO_TEST_CASE(three_members_spread_evenly_and_a_fourth_moves_as_few_partitions_as_it_can) {
  server srv;
  BOOST_REQUIRE(srv.cli->create_stream("s").has_value());
  make_topic(*srv.cli, "t", 12, 5000);
  std::vector<std::unique_ptr<member_thread>> members;
  for (int i = 0; i < 3; ++i) {
    members.push_back(std::make_unique<member_thread>(srv.options, "t", 500ms));
  }
  BOOST_REQUIRE(eventually([&] { return balanced(describe(*srv.cli, "t"), 3, 12); }));
  const auto before = describe(*srv.cli, "t");
  for (const auto& [id, n] : shares(before)) {
    BOOST_TEST(n == 4u);
  }
  members.push_back(std::make_unique<member_thread>(srv.options, "t", 500ms));
  BOOST_REQUIRE(eventually([&] { return balanced(describe(*srv.cli, "t"), 4, 12); }));
  const auto after = describe(*srv.cli, "t");
  int moved = 0;
  for (int p = 0; p < 12; ++p) {
    moved += before.partitions(p).owner() != after.partitions(p).owner() ? 1 : 0;
  }
  BOOST_TEST(moved == 3);  // 4,4,4 -> 3,3,3,3: each old member gives exactly one
  BOOST_TEST(after.generation() > before.generation());
  for (auto& m : members) {
    m->finish();
  }
  BOOST_TEST(describe(*srv.cli, "t").members_size() == 0);  // they left
}

BOOST_AUTO_TEST_CASE(a_sigkilled_member_loses_its_partitions_and_nothing_is_lost) {
  server srv;
  BOOST_REQUIRE(srv.cli->create_stream("s").has_value());
  constexpr std::uint32_t partitions = 6;
  // Far longer than any wait here (hang_guard): whatever moves the victim's partitions, it is not its session ending.
  constexpr std::uint32_t session_ms = 600'000;
  static_assert(std::chrono::milliseconds(session_ms) > 4 * hang_guard);
  make_topic(*srv.cli, "k", partitions, session_ms);

  // Producing goes on through the whole test.
  constexpr int total = 6000;
  std::atomic<int> produced{0};
  std::thread producing([&] {
    auto c = client::connect(srv.options);
    BOOST_REQUIRE(c.has_value());
    auto p = producer::create(**c, by_name("s"), by_name("k"));
    BOOST_REQUIRE(p.has_value());
    for (int i = 0; i < total; ++i) {
      message m;
      m.value = std::to_string(i);
      m.partition = static_cast<std::uint32_t>(i) % partitions;
      BOOST_REQUIRE((*p)->send(m).has_value());
      if (i % 60 == 59) {
        BOOST_REQUIRE((*p)->flush().has_value());
        produced = i + 1;
        std::this_thread::sleep_for(5ms);
      }
    }
    BOOST_REQUIRE((*p)->flush().has_value());
    produced = total;
  });

  // The victim: a rill CLI process, printing as JSON what it reads.
  const std::string out_path = srv.dir.path() + "/victim.jsonl";
  const pid_t victim = spawn_cli_member(srv.options.server, "k", "victim", out_path);
  BOOST_REQUIRE(victim > 0);
  auto victim_lines = [&] {
    std::ifstream in(out_path);
    std::vector<nlohmann::json> lines;
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded()) {  // a line cut by the kill is not a record
        lines.push_back(std::move(j));
      }
    }
    return lines;
  };
  BOOST_REQUIRE_MESSAGE(eventually([&] { return victim_lines().size() >= 30; }), "the victim read nothing");
  // They heartbeat often (a third of this session would be 200 s): each learns its share when the group changes.
  member_thread a(srv.options, "k", 100ms, 100ms);
  member_thread b(srv.options, "k", 100ms, 100ms);
  BOOST_REQUIRE(eventually([&] { return balanced(describe(*srv.cli, "k"), 3, partitions); }));

  // The victim's session as the group sees it just before the kill: the earliest it could end is this far away.
  const auto looked_at = std::chrono::steady_clock::now();
  std::optional<std::chrono::milliseconds> victim_session_left;
  const auto before_kill = describe(*srv.cli, "k");
  for (const auto& m : before_kill.members()) {
    if (m.member_id() == "victim") {
      victim_session_left = std::chrono::milliseconds(m.session_left_ms());
    }
  }
  BOOST_REQUIRE(victim_session_left.has_value());
  ::kill(victim, SIGKILL);
  int status = 0;
  ::waitpid(victim, &status, 0);
  const auto killed_at = std::chrono::steady_clock::now();
  // The others come to own everything, and before the victim's session could have ended: its closed connection,
  // not its silence, told the group (the order of the two events is what is checked, not how long it took).
  BOOST_REQUIRE_MESSAGE(eventually([&] {
                          const auto g = describe(*srv.cli, "k");
                          if (!balanced(g, 2, partitions)) {
                            return false;
                          }
                          for (const auto& p : g.partitions()) {
                            if (!p.has_owner() || p.owner() == "victim") {
                              return false;
                            }
                          }
                          return true;
                        }),
                        "the victim's partitions did not move to the others");
  const auto moved_at = std::chrono::steady_clock::now();
  BOOST_TEST_MESSAGE("the others owned the victim's partitions "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(moved_at - killed_at).count()
                     << " ms after the kill");
  BOOST_TEST((moved_at - looked_at < *victim_session_left),
             "moved only after the victim's session could have ended: the disconnect went unnoticed");
  producing.join();

  // Everything produced is read at least once, by someone.
  std::set<std::pair<std::uint32_t, std::int64_t>> read;
  auto collect = [&] {
    read.clear();
    for (const auto& j : victim_lines()) {
      read.emplace(j["partition"].get<std::uint32_t>(), j["offset"].get<std::int64_t>());
    }
    for (const auto* m : {&a, &b}) {
      for (const auto& s : m->records()) {
        read.emplace(s.partition, s.offset);
      }
    }
    return read.size() == static_cast<std::size_t>(total);
  };
  BOOST_REQUIRE_MESSAGE(eventually(collect), "read " << read.size() << " of " << total);
  a.finish();
  b.finish();
  BOOST_TEST(a.errors() == 0);
  BOOST_TEST(b.errors() == 0);

  // No partition was read by two members under one generation; duplicates are the victim's uncommitted work.
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::string> reader;
  std::map<std::pair<std::uint32_t, std::int64_t>, int> times;
  auto check = [&](std::uint64_t generation, std::uint32_t partition, std::int64_t offset, const std::string& who) {
    auto [it, fresh] = reader.emplace(std::make_pair(generation, partition), who);
    BOOST_TEST(it->second == who, "partition " << partition << " read by " << it->second << " and " << who
                                               << " in generation " << generation);
    ++times[{partition, offset}];
  };
  for (const auto& j : victim_lines()) {
    check(j["generation"].get<std::uint64_t>(), j["partition"].get<std::uint32_t>(), j["offset"].get<std::int64_t>(),
          j["member"].get<std::string>());
  }
  for (const auto* m : {&a, &b}) {
    for (const auto& s : m->records()) {
      check(s.generation, s.partition, s.offset, s.member);
    }
  }
  int duplicates = 0;
  for (const auto& [k, n] : times) {
    duplicates += n - 1;
  }
  BOOST_TEST_MESSAGE(total << " messages, " << duplicates << " read twice");
  BOOST_TEST(duplicates < total / 2);
  // The group's offsets are at the end of every partition.
  const auto g = describe(*srv.cli, "k");
  for (const auto& p : g.partitions()) {
    BOOST_TEST(p.committed() == p.high_watermark());
    BOOST_TEST(p.lag() == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_frozen_member_is_removed_when_its_session_ends) {
  // SIGSTOP: the member's connection stays open but it sends nothing: only its session timeout can tell.
  server srv;
  BOOST_REQUIRE(srv.cli->create_stream("s").has_value());
  constexpr std::uint32_t session_ms = 1500;
  make_topic(*srv.cli, "f", 4, session_ms);
  const pid_t frozen = spawn_cli_member(srv.options.server, "f", "frozen", srv.dir.path() + "/frozen.jsonl");
  BOOST_REQUIRE(frozen > 0);
  member_thread a(srv.options, "f", 100ms);
  BOOST_REQUIRE(eventually([&] { return balanced(describe(*srv.cli, "f"), 2, 4); }));
  // The frozen member's session as the group sees it, just before the stop: it cannot end sooner than this (a
  // heartbeat sent before the stop may only make it end later).
  const auto looked_at = std::chrono::steady_clock::now();
  std::optional<std::chrono::milliseconds> session_left;
  const auto before_stop = describe(*srv.cli, "f");
  for (const auto& m : before_stop.members()) {
    if (m.member_id() == "frozen") {
      session_left = std::chrono::milliseconds(m.session_left_ms());
    }
  }
  BOOST_REQUIRE(session_left.has_value());
  ::kill(frozen, SIGSTOP);
  // Removed, and the other member owns everything...
  BOOST_REQUIRE_MESSAGE(eventually([&] { return balanced(describe(*srv.cli, "f"), 1, 4); }),
                        "the frozen member was never removed");
  const auto removed_seen_at = std::chrono::steady_clock::now();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(removed_seen_at - looked_at);
  BOOST_TEST_MESSAGE("the frozen member was removed " << took.count() << " ms after its session had "
                                                      << session_left->count() << " ms left");
  // ...but not before its session ended (the order of the two events: a load that slows the test only delays
  // the removal's sighting, never makes it come earlier).
  BOOST_TEST(took >= *session_left, "removed before its session ended: its connection was still open");
  ::kill(frozen, SIGKILL);
  int status = 0;
  ::waitpid(frozen, &status, 0);
  a.finish();
}

BOOST_AUTO_TEST_CASE(stale_generations_are_refused_and_offsets_survive_a_server_kill_and_restart) {
  server srv;
  BOOST_REQUIRE(srv.cli->create_stream("s").has_value());
  make_topic(*srv.cli, "r", 2, 60'000);
  const auto S = by_name("s");
  const auto T = by_name("r");
  const auto G = by_name("g");
  auto m1 = srv.cli->join_group(S, T, G);
  BOOST_REQUIRE(m1.has_value());
  auto commit = [&](const std::string& member, std::uint64_t generation,
                    std::vector<std::pair<std::uint32_t, std::uint64_t>> offsets) {
    proto::GroupMember m;
    m.set_member_id(member);
    m.set_generation(generation);
    return srv.cli->commit_group(S, T, G, m, offsets);
  };
  BOOST_REQUIRE(commit(m1->member_id(), m1->generation(), {{0, 5}, {1, 7}}).has_value());
  auto m2 = srv.cli->join_group(S, T, G, std::string("second"));
  BOOST_REQUIRE(m2.has_value());
  BOOST_TEST(m2->member_id() == "second");
  BOOST_TEST(m2->generation() > m1->generation());
  auto stale = commit(m1->member_id(), m1->generation(), {{0, 6}});
  BOOST_REQUIRE(!stale);
  BOOST_TEST((status_of(stale.error()) == status::stale_generation));
  auto back = commit(m1->member_id(), m2->generation(), {{0, 3}});
  BOOST_REQUIRE(!back);
  BOOST_TEST((status_of(back.error()) == status::offset_regression));
  auto ghost = commit("ghost", m2->generation(), {{0, 9}});
  BOOST_REQUIRE(!ghost);
  BOOST_TEST((status_of(ghost.error()) == status::unknown_member));
  // A poll with the old generation is refused too, and so is one for a partition the member does not own yet.
  proto::PollRequest poll;
  *poll.mutable_stream() = S;
  *poll.mutable_topic() = T;
  poll.set_partition_id(0);
  poll.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  poll.mutable_consumer()->set_group("g");
  poll.mutable_member()->set_member_id(m1->member_id());
  poll.mutable_member()->set_generation(m1->generation());
  auto old = srv.cli->poll(poll);
  BOOST_REQUIRE(!old);
  BOOST_TEST((status_of(old.error()) == status::stale_generation));
  poll.mutable_member()->set_member_id("second");
  poll.mutable_member()->set_generation(m2->generation());
  auto early = srv.cli->poll(poll);
  BOOST_REQUIRE(!early);
  BOOST_TEST((status_of(early.error()) == status::not_owner));
  // m1 gives partition 1 back; "second" owns it under a new generation and commits there.
  auto beat = srv.cli->heartbeat_group(S, T, G, m1->member_id());
  BOOST_REQUIRE(beat.has_value());
  BOOST_REQUIRE(beat->revoking_size() == 1);
  const std::vector<std::uint32_t> released{beat->revoking(0)};
  auto after = srv.cli->heartbeat_group(S, T, G, m1->member_id(), released);
  BOOST_REQUIRE(after.has_value());
  BOOST_TEST(after->generation() > beat->generation());
  BOOST_REQUIRE(commit("second", after->generation(), {{released[0], 9}}).has_value());
  // A partition named twice may not go down within one commit (refused, nothing taken, the server unharmed).
  auto twice = commit("second", after->generation(), {{released[0], 12}, {released[0], 10}});
  BOOST_REQUIRE(!twice);
  BOOST_TEST((status_of(twice.error()) == status::offset_regression));
  BOOST_REQUIRE(srv.cli->ping().has_value());
  // The committed offset (9) is beyond this empty partition's end: a NEXT poll reads from the end, not an error.
  poll.set_partition_id(released[0]);
  poll.mutable_member()->set_member_id("second");
  poll.mutable_member()->set_generation(after->generation());
  auto clamped = srv.cli->poll(poll);
  BOOST_REQUIRE_MESSAGE(clamped.has_value(), (clamped ? std::string() : clamped.error().message()));
  BOOST_TEST(clamped->header.batches() == 0u);
  const std::uint32_t kept = 1 - released[0];
  const auto want = describe(*srv.cli, "r");

  // SIGKILL (before this client's connection closes, which would remove the members it joined): what was
  // acknowledged is on disk.
  srv.proc.kill_hard();
  srv.cli.reset();
  srv.start();
  auto got = describe(*srv.cli, "r");
  BOOST_TEST(got.generation() >= want.generation());
  BOOST_TEST(got.partitions(kept).committed() == (kept == 0 ? 5u : 7u));
  BOOST_TEST(got.partitions(released[0]).committed() == 9u);
  BOOST_TEST(got.members_size() == 2);  // restored, with fresh sessions
  auto stale_again = commit(m1->member_id(), m1->generation(), {{kept, 50}});
  BOOST_REQUIRE(!stale_again);
  BOOST_TEST((status_of(stale_again.error()) == status::stale_generation));
  auto offsets = srv.cli->group_offsets(S, T, G);
  BOOST_REQUIRE(offsets.has_value());
  BOOST_TEST(offsets->at(released[0]).committed() == 9u);

  // A graceful restart, too; then the group is deleted with its offsets.
  srv.cli.reset();
  BOOST_TEST(srv.proc.stop() == 0);
  srv.start();
  BOOST_TEST(describe(*srv.cli, "r").partitions(released[0]).committed() == 9u);
  auto listed = srv.cli->list_groups(S, T);
  BOOST_REQUIRE(listed.has_value());
  BOOST_TEST(listed->size() == 1u);
  BOOST_REQUIRE(srv.cli->delete_group(S, T, G).has_value());
  auto gone = srv.cli->get_group(S, T, G);
  BOOST_REQUIRE(!gone);
  BOOST_TEST((status_of(gone.error()) == status::group_not_found));
  BOOST_REQUIRE(srv.cli->create_group(S, T, "g").has_value());
  BOOST_TEST(!describe(*srv.cli, "r").partitions(0).has_committed());
}
