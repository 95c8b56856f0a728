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
  t.record(1, 0, producer_batch{0, 2, 100, 7});
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
  t.record(1, 1, producer_batch{0, 0, 200, 8});
  BOOST_TEST(t.check(1, 0, 3, 1).verdict == producer_verdict::producer_fenced);
  BOOST_TEST(!t.check(1, 0, 3, 1).detail.empty());
}

BOOST_AUTO_TEST_CASE(only_the_last_batches_are_kept_and_older_retries_are_duplicate_sequences) {
  producer_table t;
  for (std::int32_t i = 0; i < 8; ++i) {
    t.record(3, 0, producer_batch{i, i, 10 + i, static_cast<std::uint64_t>(i)});
  }
  BOOST_TEST(t.find(3)->recent.size() == producer_table::batches_kept);
  BOOST_TEST(t.check(3, 0, 7, 1).verdict == producer_verdict::duplicate);
  BOOST_TEST(t.check(3, 0, 3, 1).verdict == producer_verdict::duplicate);
  BOOST_TEST(t.check(3, 0, 2, 1).verdict == producer_verdict::duplicate_sequence);
}

BOOST_AUTO_TEST_CASE(sequences_wrap_and_put_undoes) {
  producer_table t;
  t.record(4, 0, producer_batch{sequence_max - 1, sequence_max, 0, 1});
  BOOST_TEST(t.check(4, 0, 0, 2).verdict == producer_verdict::fresh);  // after INT32_MAX comes 0
  BOOST_TEST(t.check(4, 0, 1, 2).verdict == producer_verdict::sequence_gap);
  const auto before = t.find(4);
  t.record(4, 0, producer_batch{0, 1, -1, 2});
  t.set_offset(4, 0, 1, 55);
  BOOST_TEST(t.check(4, 0, 0, 2).original->base_offset == 55);
  t.put(4, before);
  BOOST_TEST((t.find(4) == before));
  t.put(4, std::nullopt);
  BOOST_TEST(!t.find(4).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
