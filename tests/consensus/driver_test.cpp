// consensus::driver over production's journal_storage, each replica on its own simulated disk, messages through a
// queue: a three-replica group commits and replies; a failed journal write fences that replica (it acknowledges
// nothing, the others go on) and a restart from its disk rejoins; a checkpoint waits for its gate; a driver
// destroyed with I/O in flight runs none of its callbacks.
#include <boost/test/unit_test.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/endian.h"
#include "consensus/driver.h"
#include "simulation/sim_disk.h"
#include "storage/errc.h"
#include "storage/io/run.h"
#include "tests/consensus/counter_machine.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;
using rill::simulation::sim_disk;

namespace {
constexpr std::uint64_t cluster_id = 5;

using counter = rill::consensus::testing::counter_machine;

struct envelope {
  replica_t from;
  replica_t to;
  message m;
};

struct group;

class queue_transport final : public transport {
 public:
  queue_transport(group& g, replica_t from) : group_(g), from_(from) {}
  void send(replica_t to, message m) override;

 private:
  group& group_;
  replica_t from_;
};

struct member {
  std::unique_ptr<sim_disk> disk;
  std::unique_ptr<journal_storage> storage;
  std::unique_ptr<counter> sm;
  std::unique_ptr<queue_transport> net;
  std::unique_ptr<driver> d;
  std::vector<message> replies;
  std::vector<std::uint64_t> applied;
  std::size_t fences = 0;
  std::uint64_t gate = UINT64_MAX;  // the checkpoint gate's answer
};

struct group {
  explicit group(std::uint8_t n, std::uint64_t checkpoint_interval = 0) : interval(checkpoint_interval) {
    for (std::uint8_t i = 0; i < n; ++i) {
      auto m = std::make_unique<member>();
      m->disk = std::make_unique<sim_disk>(100 + i);
      members.push_back(std::move(m));
    }
    for (std::uint8_t i = 0; i < n; ++i) {
      start(i);
    }
  }
  ~group() {
    for (auto& m : members) {
      stop(*m);
    }
  }
  void start(replica_t i) {
    member& m = *members.at(i);
    vsr_state initial;
    initial.cluster = cluster_id;
    initial.replica = i;
    initial.replica_count = static_cast<std::uint8_t>(members.size());
    journal_storage_options o;
    o.journal = journal_options{64, 4096};
    o.snapshot_bytes_max = 64 * 1024;
    recovered_state r;
    auto s = storage::io::run_task(*m.disk, journal_storage::open(*m.disk, "/g", o, initial, r));
    BOOST_REQUIRE(s.has_value() && s->has_value());
    m.storage = std::move(**s);
    m.sm = std::make_unique<counter>();
    m.net = std::make_unique<queue_transport>(*this, i);
    replica_options d;
    d.cluster = cluster_id;
    d.replica = i;
    d.replica_count = static_cast<std::uint8_t>(members.size());
    d.checkpoint_interval = interval;
    driver_hooks h;
    member* self = &m;
    h.reply = [self](message reply) { self->replies.push_back(std::move(reply)); };
    h.applied = [self](const header& prepare) { self->applied.push_back(prepare.op); };
    h.fenced = [self](const error&) { ++self->fences; };
    h.checkpoint_gate = [self] { return self->gate; };
    m.d = std::make_unique<driver>(d, *m.sm, std::move(r), *m.storage, m.net.get(), std::move(h));
  }
  // Drains the disks (a crash loses nothing synced, so a clean stop is a crash after settling).
  void stop(member& m) {
    if (!m.d) {
      return;
    }
    m.disk->halt();
    while (m.disk->in_flight() > 0) {
      m.disk->poll(true);
    }
    m.d.reset();
    m.storage.reset();
    m.disk->crash();
    m.disk->restart_process();
  }
  // One round: every disk's due I/O completes, every message queued is delivered, every replica ticks.
  void round() {
    for (auto& m : members) {
      if (m->d) {
        m->disk->advance_time(1'000'000);
        while (m->disk->poll(false) > 0) {
        }
      }
    }
    while (!queue.empty()) {
      envelope e = std::move(queue.front());
      queue.pop_front();
      if (members.at(e.to)->d) {
        members.at(e.to)->d->on_message(e.m);
      }
    }
    for (auto& m : members) {
      if (m->d) {
        m->d->on_tick();
      }
    }
  }
  void rounds(int n) {
    for (int i = 0; i < n; ++i) {
      round();
    }
  }
  void request(replica_t to, std::uint64_t number, std::size_t bytes) {
    message m;
    m.h.cmd = command::request;
    m.h.cluster = cluster_id;
    m.h.client = 1;
    m.h.request = number;
    m.h.operation = number == 0 ? operation_register : operation_user_min;
    m.body.resize(number == 0 ? 0 : bytes);
    seal(m);
    members.at(to)->d->on_message(m);
  }

  std::uint64_t interval;
  std::vector<std::unique_ptr<member>> members;
  std::deque<envelope> queue;
};

void queue_transport::send(replica_t to, message m) {
  group_.queue.push_back({from_, to, std::move(m)});
}

bool replied(const member& m, std::uint64_t request) {
  for (const auto& r : m.replies) {
    if (r.h.cmd == command::reply && r.h.request == request) {
      return true;
    }
  }
  return false;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(driver_suite)

BOOST_AUTO_TEST_CASE(three_drivers_on_their_disks_commit_reply_and_apply_everywhere) {
  group g(3);
  g.request(0, 0, 0);
  g.rounds(20);
  BOOST_REQUIRE(replied(*g.members[0], 0));
  for (std::uint64_t n = 1; n <= 5; ++n) {
    g.request(0, n, 100);
    g.rounds(20);
    BOOST_TEST(replied(*g.members[0], n), "request " << n);
  }
  for (auto& m : g.members) {
    BOOST_TEST(m->sm->total == 500u);
    BOOST_TEST(m->fences == 0u);
    BOOST_TEST(!m->d->fenced());
    BOOST_TEST(m->d->replica().commit_min().value() == 6u);
  }
}

BOOST_AUTO_TEST_CASE(a_failed_journal_write_fences_the_replica_the_others_go_on_and_a_restart_rejoins) {
  group g(3);
  g.request(0, 0, 0);
  g.rounds(20);
  BOOST_REQUIRE(replied(*g.members[0], 0));
  // Every write of replica 2 fails from now on: its driver fences at the first one and acknowledges nothing.
  g.members[2]->disk->faults().write_error_ppm = 1'000'000;
  g.request(0, 1, 100);
  g.rounds(20);
  BOOST_TEST(replied(*g.members[0], 1), "replicas 0 and 1 are a quorum");
  BOOST_TEST(g.members[2]->d->fenced());
  BOOST_TEST(g.members[2]->fences == 1u);
  BOOST_TEST(g.members[2]->d->replica().commit_min().value() < 2u, "a fenced replica applies nothing more");
  BOOST_TEST(g.members[2]->d->in_flight() == 0u);
  // A fenced driver takes no input: another request changes nothing there.
  g.request(0, 2, 100);
  g.rounds(20);
  BOOST_TEST(replied(*g.members[0], 2));
  BOOST_TEST(g.members[2]->fences == 1u);
  // Restarted from its disk (writes work again), it catches up.
  g.stop(*g.members[2]);
  g.members[2]->disk->faults().write_error_ppm = 0;
  g.start(2);
  g.rounds(200);
  BOOST_TEST(!g.members[2]->d->fenced());
  BOOST_TEST(g.members[2]->d->replica().commit_min().value() == 3u);
  BOOST_TEST(g.members[2]->sm->total == 200u);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_waits_for_its_gate) {
  group g(1, 4);
  g.members[0]->gate = 0;  // the external state has nothing durable
  g.request(0, 0, 0);
  g.rounds(5);
  for (std::uint64_t n = 1; n <= 6; ++n) {
    g.request(0, n, 10);
    g.rounds(5);
    BOOST_REQUIRE(replied(*g.members[0], n));
  }
  const driver& d = *g.members[0]->d;
  BOOST_TEST(d.checkpoint_held());
  BOOST_TEST(d.replica().durable_state().checkpoint.op() == 0u, "nothing checkpointed past the gate");
  g.members[0]->gate = UINT64_MAX;
  g.members[0]->d->poke();
  g.rounds(10);
  BOOST_TEST(!d.checkpoint_held());
  BOOST_TEST(d.replica().durable_state().checkpoint.op() >= 4u);
}

BOOST_AUTO_TEST_CASE(a_driver_destroyed_with_io_in_flight_runs_none_of_its_callbacks) {
  group g(1);
  g.request(0, 0, 0);
  BOOST_REQUIRE(g.members[0]->d->in_flight() > 0u);
  member& m = *g.members[0];
  m.d.reset();  // as a simulated crash does: the storage's callbacks still come, and must do nothing
  while (m.disk->in_flight() > 0) {
    m.disk->advance_time(1'000'000);
    while (m.disk->poll(false) > 0) {
    }
  }
  BOOST_TEST(m.replies.empty());
  m.storage.reset();
}

// A storage that refuses before any I/O answers inside the call (group_storage allows it): the driver fences there,
// executes nothing after the refused effect, and its count of operations in flight stays balanced.
class refusing_storage final : public group_storage {
 public:
  void write(message, std::function<void(expected<void>)> done) override {
    ++writes;
    done(rill::unexpected(make_error_code(storage::errc::no_space), "refused before any I/O"));
  }
  void read(std::uint64_t, checksum_t, std::function<void(expected<message>)> done) override {
    done(rill::unexpected(make_error_code(storage::errc::io_error), "refused"));
  }
  void persist(const vsr_state&, std::function<void(expected<void>)> done) override {
    ++persists;
    done(expected<void>{});  // succeeds, synchronously too
  }
  void write_checkpoint(std::uint8_t, std::uint64_t, std::vector<std::byte>,
                        std::function<void(expected<void>)> done) override {
    done(expected<void>{});
  }
  int writes = 0;
  int persists = 0;
};

BOOST_AUTO_TEST_CASE(a_write_refused_inside_the_call_fences_at_once_and_nothing_after_it_runs) {
  refusing_storage storage;
  counter sm;
  recovered_state r;
  r.state.cluster = cluster_id;
  r.state.replica = 0;
  r.state.replica_count = 1;
  r.formatted = true;
  replica_options o;
  o.cluster = cluster_id;
  o.replica_count = 1;
  int fences = 0;
  std::vector<message> replies;
  driver_hooks h;
  h.fenced = [&](const error& e) {
    ++fences;
    BOOST_TEST((e == storage::errc::no_space));
  };
  h.reply = [&](message m) { replies.push_back(std::move(m)); };
  driver d(o, sm, std::move(r), storage, nullptr, std::move(h));
  message m;
  m.h.cmd = command::request;
  m.h.cluster = cluster_id;
  m.h.client = 1;
  m.h.operation = operation_register;
  seal(m);
  d.on_message(m);
  BOOST_TEST(d.fenced());
  BOOST_TEST(fences == 1);
  BOOST_TEST(storage.writes == 1);
  BOOST_TEST(d.in_flight() == 0u);
  BOOST_TEST(replies.empty(), "nothing acknowledged a write that never landed");
  d.on_tick();
  d.on_message(m);
  BOOST_TEST(storage.writes == 1, "a fenced driver starts nothing");
  BOOST_TEST(fences == 1);
}

BOOST_AUTO_TEST_SUITE_END()
