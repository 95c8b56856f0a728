// storage::producer_table: Kafka's idempotent-producer verdicts, and the wrap of sequences.
#include <boost/test/unit_test.hpp>

#include <ostream>

#include "storage/producer_sequence.h"
#include "storage/producer_table.h"

using namespace rill::storage;

namespace rill::storage {
std::ostream& operator<<(std::ostream& os, producer_verdict v) {
  return os << to_string(v);
}
}  // namespace rill::storage

BOOST_AUTO_TEST_SUITE(producer_table_suite)

BOOST_AUTO_TEST_CASE(each_verdict_for_its_case) {
  producer_table t;
  BOOST_TEST(t.check(1, 0, 0, 3).verdict == producer_verdict::fresh);
  BOOST_TEST(t.check(1, 0, 5, 3).verdict == producer_verdict::unknown_producer_id);
  t.record(1, 0, producer_batch{0, 2, 100, 7}, 0);
  const auto dup = t.check(1, 0, 0, 3);
  BOOST_TEST(dup.verdict == producer_verdict::duplicate);
  BOOST_REQUIRE(dup.original.has_value());
  BOOST_TEST(dup.original->base_offset == 100);
  BOOST_TEST(dup.original->tag == 7u);
  BOOST_TEST(t.check(1, 0, 3, 1).verdict == producer_verdict::fresh);
  BOOST_TEST(t.check(1, 0, 4, 1).verdict == producer_verdict::sequence_gap);
  BOOST_TEST(t.check(1, 0, 1, 1).verdict == producer_verdict::duplicate_sequence);  // inside a kept batch, not it
  BOOST_TEST(t.check(1, 1, 0, 1).verdict == producer_verdict::fresh);               // a new epoch at 0
  BOOST_TEST(t.check(1, 1, 3, 1).verdict == producer_verdict::sequence_gap);
  t.record(1, 1, producer_batch{0, 0, 200, 8}, 0);
  BOOST_TEST(t.check(1, 0, 3, 1).verdict == producer_verdict::producer_fenced);
  BOOST_TEST(!t.check(1, 0, 3, 1).detail.empty());
}

BOOST_AUTO_TEST_CASE(only_the_last_batches_are_kept_and_older_retries_are_duplicate_sequences) {
  producer_table t;
  for (std::int32_t i = 0; i < 8; ++i) {
    t.record(3, 0, producer_batch{i, i, 10 + i, static_cast<std::uint64_t>(i)}, 0);
  }
  BOOST_TEST(t.find(3)->recent.size() == producer_table::batches_kept);
  BOOST_TEST(t.check(3, 0, 7, 1).verdict == producer_verdict::duplicate);
  BOOST_TEST(t.check(3, 0, 3, 1).verdict == producer_verdict::duplicate);
  BOOST_TEST(t.check(3, 0, 2, 1).verdict == producer_verdict::duplicate_sequence);
}

BOOST_AUTO_TEST_CASE(sequences_wrap_and_put_undoes) {
  producer_table t;
  t.record(4, 0, producer_batch{sequence_max - 1, sequence_max, 0, 1}, 0);
  BOOST_TEST(t.check(4, 0, 0, 2).verdict == producer_verdict::fresh);  // after INT32_MAX comes 0
  BOOST_TEST(t.check(4, 0, 1, 2).verdict == producer_verdict::sequence_gap);
  const auto before = t.find(4);
  t.record(4, 0, producer_batch{0, 1, -1, 2}, 0);
  t.set_offset(4, 0, 1, 55);
  BOOST_TEST(t.check(4, 0, 0, 2).original->base_offset == 55);
  t.put(4, before);
  BOOST_TEST((t.find(4) == before));
  t.put(4, std::nullopt);
  BOOST_TEST(!t.find(4).has_value());
}

// Issue 38, finding 4: producers expire by the time of their newest batch, and beyond a count the one idle longest
// goes (ties by id); a forgotten producer is unknown again.
BOOST_AUTO_TEST_CASE(trim_forgets_expired_producers_then_the_idle_longest_beyond_the_bound) {
  producer_table t;
  t.record(1, 0, producer_batch{0, 0, 0, 1}, 100);
  t.record(2, 0, producer_batch{0, 0, 1, 2}, 200);
  t.record(3, 0, producer_batch{0, 0, 2, 3}, 200);
  t.record(4, 0, producer_batch{0, 0, 3, 4}, 300);
  t.record(1, 0, producer_batch{1, 1, 4, 5}, 400);  // producer 1 is the newest now
  // Nothing is older than 150 any more; beyond 2 producers, 2 and 3 (both at 200: by id) go.
  auto gone = t.trim(150, 2);
  BOOST_REQUIRE(gone.size() == 2u);
  BOOST_TEST(gone[0].producer_id == 2);
  BOOST_TEST(gone[1].producer_id == 3);
  BOOST_TEST(gone[0].state.last_timestamp_ms == 200);
  BOOST_TEST(t.size() == 2u);
  BOOST_TEST(t.check(2, 0, 1, 1).verdict == producer_verdict::unknown_producer_id);
  BOOST_TEST(t.check(2, 0, 0, 1).verdict == producer_verdict::fresh);  // starts again at 0
  // By time: 4 (at 300) is older than 350; `keep` is spared whatever its time.
  gone = t.trim(350, 10, 4);
  BOOST_TEST(gone.empty());
  gone = t.trim(350, 10);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].producer_id == 4);
  BOOST_TEST(t.find(1)->last_timestamp_ms == 400);
  // The index follows put() and clear().
  t.put(9, gone[0].state);
  BOOST_TEST(t.trim(350, 10).size() == 1u);
  t.clear();
  BOOST_TEST(t.trim(1'000, 0).empty());
}

BOOST_AUTO_TEST_SUITE_END()
