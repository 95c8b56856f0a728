// The shard runtime with real threads: actors run on their home shard, messages cross shards and arrive from
// outside threads (waking a sleeping shard), storage I/O completes as a message inside the actor's handler, and
// the per-shard deadline heap fires timers.
#define BOOST_TEST_MODULE rill_actors
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <filesystem>
#include <thread>

#include "actors/runtime/actor_io.hpp"
#include "actors/runtime/homed.h"
#include "actors/runtime/metered.hpp"
#include "actors/runtime/runtime.h"
#include "actors/runtime/shard.h"
#include "storage/file_ops.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::actors;

namespace {
using where_atom = caf::atom_constant<caf::atom("where")>;
using relay_atom = caf::atom_constant<caf::atom("relay")>;
using write_atom = caf::atom_constant<caf::atom("write")>;
using timer_atom = caf::atom_constant<caf::atom("timer")>;
using fired_atom = caf::atom_constant<caf::atom("fired")>;

runtime_options two_shards() {
  runtime_options o;
  const auto topo = config::machine_topology::detect();
  // Two shards even on a one-CPU machine (both on CPU 0 then): the routing is what is tested.
  o.cpus = {topo.cpus.front(), topo.cpus.size() > 1 ? topo.cpus[1] : topo.cpus.front()};
  o.pin = true;
  return o;
}

// Answers with the shard it runs on; relays to another actor and reports both shards.
class probe final : public metered<>, public homed {
 public:
  probe(caf::actor_config& cfg, std::size_t home) : metered<>(cfg, "probe", home), homed(home) {}

  caf::behavior make_behavior() override {
    return {
        [](where_atom) -> std::uint64_t { return current_shard() ? current_shard()->index() : 999; },
        [this](relay_atom, caf::actor other) -> caf::result<std::uint64_t, std::uint64_t> {
          auto rp = make_response_promise<std::uint64_t, std::uint64_t>();
          const std::uint64_t mine = current_shard()->index();
          request(other, caf::infinite, where_atom::value).then([rp, mine](std::uint64_t theirs) mutable {
            rp.deliver(mine, theirs);
          });
          return rp;
        },
    };
  }
};

// Writes a file through its actor_io with storage coroutines; reports whether the completion ran inside its
// handler on its home shard.
class writer final : public caf::event_based_actor, public homed {
 public:
  writer(caf::actor_config& cfg, std::size_t home) : caf::event_based_actor(cfg), homed(home) {}

  caf::behavior make_behavior() override {
    io_ = std::make_unique<actor_io>(this);
    caf::message_handler own{
        [this](write_atom, std::string path) -> caf::result<bool> {
          auto rp = make_response_promise<bool>();
          auto job = [](actor_io& io, std::string p) -> task<expected<std::uint64_t>> {
            RILL_CO_TRY(fd, co_await storage::open_file(io, p, storage::io::open_create, 0600));
            std::vector<std::byte> data(10000, std::byte{7});
            RILL_CO_TRY_VOID(co_await storage::write_all(io, fd, 0, data, p));
            RILL_CO_TRY_VOID(co_await storage::datasync_file(io, fd, p));
            RILL_CO_TRY(size, co_await storage::size_of_file(io, fd, p));
            RILL_CO_TRY_VOID(co_await storage::close_file(io, fd, p));
            co_return size;
          };
          const std::size_t home = home_shard();
          rill::spawn(job(*io_, std::move(path)), [this, rp, home](expected<std::uint64_t> size) mutable {
            const bool on_home = current_shard() != nullptr && current_shard()->index() == home;
            const bool in_handler = in_handler_;
            rp.deliver(size.has_value() && *size == 10000 && on_home && in_handler);
          });
          return rp;
        },
    };
    // Completions arrive as messages; mark the handler so the test can tell where the coroutine resumed.
    caf::message_handler io_done{[this](io_done_atom, std::uint64_t request) {
      in_handler_ = true;
      io_->deliver(*reinterpret_cast<storage::io::request*>(static_cast<std::uintptr_t>(request)));
      in_handler_ = false;
    }};
    return caf::behavior{own.or_else(io_done)};
  }

 private:
  std::unique_ptr<actor_io> io_;
  bool in_handler_ = false;
};

// Schedules a timer on its shard's deadline heap and reports when it fired.
class sleeper final : public caf::event_based_actor, public homed {
 public:
  sleeper(caf::actor_config& cfg, std::size_t home) : caf::event_based_actor(cfg), homed(home) {}

  caf::behavior make_behavior() override {
    return {
        [this](timer_atom, std::uint64_t delay_us) -> caf::result<bool> {
          auto rp = make_response_promise<bool>();
          const auto deadline = monotonic_now() + std::chrono::microseconds(delay_us);
          auto self = caf::actor_cast<caf::actor>(this);
          current_shard()->timers().schedule(deadline, [self] { caf::anon_send(self, fired_atom::value); });
          pending_ = rp;
          deadline_ = deadline;
          return rp;
        },
        [this](fired_atom) {
          pending_.deliver(monotonic_now() >= deadline_ && current_shard()->index() == home_shard());
        },
    };
  }

 private:
  caf::response_promise pending_;
  std::chrono::nanoseconds deadline_{0};
};
// Waits until `s`'s worker sleeps in its ring (nothing left to run); the deadline only keeps a broken runtime from
// hanging the test.
void wait_until_asleep(shard& s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!s.stats().asleep.load(std::memory_order_acquire)) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "shard " << s.index() << " never fell asleep with nothing to run");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
}  // namespace

BOOST_AUTO_TEST_CASE(actors_run_on_their_home_shard_and_messages_cross_shards) {
  runtime rt(two_shards());
  auto& sys = rt.system();
  auto a = sys.spawn<probe>(std::size_t{0});
  auto b = sys.spawn<probe>(std::size_t{1});
  caf::scoped_actor self{sys};
  for (int i = 0; i < 50; ++i) {
    self->request(a, caf::infinite, where_atom::value)
        .receive([](std::uint64_t s) { BOOST_TEST(s == 0u); }, [](caf::error&) { BOOST_FAIL("no reply"); });
    self->request(b, caf::infinite, where_atom::value)
        .receive([](std::uint64_t s) { BOOST_TEST(s == 1u); }, [](caf::error&) { BOOST_FAIL("no reply"); });
    self->request(a, caf::infinite, relay_atom::value, b)
        .receive(
            [](std::uint64_t mine, std::uint64_t theirs) {
              BOOST_TEST(mine == 0u);
              BOOST_TEST(theirs == 1u);
            },
            [](caf::error&) { BOOST_FAIL("no reply"); });
    // Now and then both shards fall asleep (waited for: the shard shows it, however long a loaded machine takes to
    // get there): the next request must wake them.
    if (i % 10 == 0) {
      wait_until_asleep(rt.shard_at(0));
      wait_until_asleep(rt.shard_at(1));
    }
  }
  BOOST_TEST(rt.shard_at(0).stats().sleeps.load() >= 5u);
  // Every actor is metered: b handled 50 where requests and 50 relayed ones.
  bool found = false;
  for (const auto& m : metrics_registry::instance().snapshot()) {
    if (m.id == b.id()) {
      found = true;
      BOOST_TEST(m.kind == "probe");
      BOOST_TEST(m.shard == 1u);
      BOOST_TEST(m.processed >= 100u);
      BOOST_TEST(m.received >= m.processed);
      BOOST_TEST(m.busy_ns > 0u);
    }
  }
  BOOST_TEST(found);
  BOOST_TEST(rt.shard_at(0).stats().wakes_sent.load() > 0u);
  self->send_exit(a, caf::exit_reason::user_shutdown);
  self->send_exit(b, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(storage_io_completes_inside_the_actor_on_its_shard) {
  const auto dir = std::filesystem::temp_directory_path() / ("rill-actor-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    runtime rt(two_shards());
    auto& sys = rt.system();
    caf::scoped_actor self{sys};
    for (std::size_t home : {0u, 1u}) {
      auto w = sys.spawn<writer>(home);
      self->request(w, caf::infinite, write_atom::value, (dir / ("f" + std::to_string(home))).string())
          .receive([](bool ok) { BOOST_TEST(ok); }, [](caf::error&) { BOOST_FAIL("no reply"); });
      self->send_exit(w, caf::exit_reason::user_shutdown);
    }
  }
  BOOST_TEST(std::filesystem::file_size(dir / "f0") == 10000u);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(shard_timers_fire_after_their_deadline_on_the_home_shard) {
  runtime rt(two_shards());
  auto& sys = rt.system();
  caf::scoped_actor self{sys};
  auto s = sys.spawn<sleeper>(std::size_t{1});
  for (std::uint64_t delay : {0u, 100u, 2000u, 20000u}) {
    self->request(s, caf::infinite, timer_atom::value, delay)
        .receive([](bool ok) { BOOST_TEST(ok); }, [](caf::error&) { BOOST_FAIL("no reply"); });
  }
  BOOST_TEST(rt.shard_at(1).stats().timers_fired.load() == 4u);
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(deadline_heap_orders_and_cancels) {
  deadline_heap h;
  std::vector<int> fired;
  using ns = std::chrono::nanoseconds;
  h.schedule(ns(30), [&] { fired.push_back(3); });
  const auto two = h.schedule(ns(20), [&] { fired.push_back(2); });
  h.schedule(ns(10), [&] { fired.push_back(1); });
  h.schedule(ns(10), [&] { fired.push_back(11); });  // same deadline: scheduling order
  BOOST_TEST(h.next_deadline()->count() == 10);
  BOOST_TEST(h.cancel(two));
  BOOST_TEST(!h.cancel(two));
  BOOST_TEST(h.fire_due(ns(25)) == 2u);
  BOOST_TEST(fired == (std::vector<int>{1, 11}));
  // A callback may schedule another timer, due at once.
  h.schedule(ns(26), [&] {
    fired.push_back(4);
    h.schedule(ns(27), [&] { fired.push_back(5); });
  });
  BOOST_TEST(h.fire_due(ns(100)) == 3u);
  BOOST_TEST(fired == (std::vector<int>{1, 11, 4, 5, 3}));
  BOOST_TEST(!h.next_deadline().has_value());
}
