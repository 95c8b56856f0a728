// partition_state::poll and ::info on the simulated disk: a poll reads from where read_request_for puts it and
// auto-commits a named consumer's offset only when batches came back.
#include <boost/test/unit_test.hpp>

#include "actors/partition_state.h"
#include "simulation/sim_disk.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::actors;
using storage::testing::run;

namespace {
std::vector<std::byte> batch_of(int records) {
  storage::batch_builder b;
  for (int i = 0; i < records; ++i) {
    b.add("k", "v" + std::to_string(i));
  }
  return *b.build();
}
// As the router hands a produce to the partition.
storage::validated_batches validated_batch_of(int records) {
  return storage::validated_batches::validate(batch_of(records), limits::batch_bytes_limit).value();
}

proto::PollRequest next_for(const std::string& consumer, bool auto_commit) {
  proto::PollRequest r;
  r.mutable_strategy()->set_kind(proto::PollStrategy::NEXT);
  r.mutable_consumer()->set_name(consumer);
  r.set_auto_commit(auto_commit);
  return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(partition_poll_suite)

BOOST_AUTO_TEST_CASE(polls_read_from_the_stored_offset_and_auto_commit_what_they_return) {
  manual_clock clk;
  simulation::sim_disk disk(5, simulation::sim_disk_faults{}, &clk);
  storage::buffer_pool pool;
  storage::collecting_reporter reporter;
  storage::log_options options;
  options.config.segment_bytes = 1 << 20;
  auto opened = run(disk, partition_state::open(disk, pool, clk, reporter, "/p", options));
  RILL_REQUIRE_OK(opened);
  auto& state = **opened;
  RILL_REQUIRE_OK(run(disk, state.produce(validated_batch_of(3))));
  RILL_REQUIRE_OK(run(disk, state.produce(validated_batch_of(2))));
  const auto info = state.info(4);
  BOOST_TEST(info.id() == 4u);
  BOOST_TEST(info.log_end() == 5u);
  BOOST_TEST(info.high_watermark() == static_cast<std::uint64_t>(state.log().committed().value()));
  BOOST_TEST(info.segments() == 1u);
  BOOST_REQUIRE(state.log().committed().value() == 5);

  // Without auto-commit nothing is stored.
  auto first = run(disk, state.poll(next_for("c", false), std::nullopt, 1 << 20));
  RILL_REQUIRE_OK(first);
  BOOST_TEST(first->batches == 2u);
  BOOST_TEST(!state.consumer_offset("c").has_value());
  // With it, the next offset is stored, and the next poll starts there and finds nothing (nothing is stored then).
  auto second = run(disk, state.poll(next_for("c", true), std::nullopt, 1 << 20));
  RILL_REQUIRE_OK(second);
  BOOST_TEST(second->batches == 2u);
  BOOST_TEST((state.consumer_offset("c") == std::optional<std::int64_t>(5)));
  auto third = run(disk, state.poll(next_for("c", true), std::nullopt, 1 << 20));
  RILL_REQUIRE_OK(third);
  BOOST_TEST(third->batches == 0u);
  BOOST_TEST(third->next_offset.value() == 5);
  // A group's position overrides the strategy; a one-batch limit returns the first batch only.
  auto limited = next_for("c", false);
  limited.set_max_bytes(1);
  auto resumed = run(disk, state.poll(limited, 0, 1 << 20));
  RILL_REQUIRE_OK(resumed);
  BOOST_TEST(resumed->batches == 1u);
  BOOST_TEST(resumed->records == 3u);
  RILL_REQUIRE_OK(run(disk, state.close()));
}

BOOST_AUTO_TEST_SUITE_END()
