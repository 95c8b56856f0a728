// validated_batches: the one validation of a produce request's batches (good, bad CRC, truncated, bad producer
// fields, bad last_offset_delta, oversize, several batches, where the failing one is), and the one copy.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/errc.h"
#include "storage/record_batch_builder.h"
#include "storage/validated_batches.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::storage;
namespace bf = rill::storage::batch_format;

namespace {
constexpr std::uint64_t limit = 1 << 20;

std::vector<std::byte> batch(std::int64_t pid, std::int16_t epoch, std::int32_t seq, int records,
                             const std::string& value = "v") {
  batch_builder b;
  b.producer(pid, epoch, seq);
  for (int i = 0; i < records; ++i) {
    b.add("k" + std::to_string(i), value);
  }
  return *b.build();
}

void fix_crc(std::vector<std::byte>& b) {
  store_be<std::uint32_t>(b.data() + bf::crc_at, crc32c(b.data() + bf::attributes_at, b.size() - bf::attributes_at));
}

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::error_code code_of(const expected<validated_batches>& v) {
  BOOST_REQUIRE(!v.has_value());
  return v.error().code();
}

bool says(const expected<validated_batches>& v, const std::string& what) {
  BOOST_REQUIRE(!v.has_value());
  const bool found = v.error().detail().find(what) != std::string::npos;
  BOOST_TEST(found, v.error().detail() << " does not say " << what);
  return found;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(validated_batches_suite)

BOOST_AUTO_TEST_CASE(a_good_batch_is_listed_with_its_fields_and_copied_once) {
  const auto bytes = batch(7, 2, 40, 3);
  auto v = validated_batches::validate(std::span<const std::byte>(bytes), limit);
  RILL_REQUIRE_OK(v);
  BOOST_TEST(v->bytes().data() != bytes.data());  // the copy
  BOOST_TEST((std::vector<std::byte>(v->bytes().begin(), v->bytes().end()) == bytes));
  BOOST_REQUIRE(v->batches().size() == 1u);
  const auto& b = v->batches()[0];
  BOOST_TEST(b.position == 0u);
  BOOST_TEST(b.size == bytes.size());
  BOOST_TEST(b.records == 3u);
  BOOST_TEST(b.producer_id == 7);
  BOOST_TEST(b.producer_epoch == 2);
  BOOST_TEST(b.base_sequence == 40);
  BOOST_TEST(v->records() == 3u);
  // crc_tail is the CRC of [producer_id_at, end): what stamping derives the new CRC from.
  BOOST_TEST(b.crc_tail == crc32c(bytes.data() + bf::producer_id_at, bytes.size() - bf::producer_id_at));
  v->check_invariants();
}

BOOST_AUTO_TEST_CASE(a_vector_is_validated_and_kept_without_a_copy) {
  auto bytes = batch(-1, -1, -1, 2);
  const std::byte* data = bytes.data();
  auto v = validated_batches::validate(std::move(bytes), limit);
  RILL_REQUIRE_OK(v);
  BOOST_TEST(v->bytes().data() == data);
  BOOST_TEST(v->batches()[0].producer_id == -1);
  auto parts = std::move(*v).release();
  BOOST_TEST(parts.bytes.data() == data);
  BOOST_TEST(parts.batches.size() == 1u);
  BOOST_TEST(parts.records == 2u);
}

BOOST_AUTO_TEST_CASE(a_bad_crc_is_refused_before_any_header_field_is_believed) {
  auto bad = batch(-1, -1, -1, 1);
  bad.back() ^= std::byte{1};
  BOOST_TEST((code_of(validated_batches::validate(std::span<const std::byte>(bad), limit)) == errc::crc_mismatch));
  // Producer fields that would be refused, written over a good batch without its CRC: the CRC decides.
  auto forged = batch(-1, -1, -1, 1);
  store_be<std::int64_t>(forged.data() + bf::producer_id_at, 9);
  BOOST_TEST((code_of(validated_batches::validate(std::span<const std::byte>(forged), limit)) == errc::crc_mismatch));
}

BOOST_AUTO_TEST_CASE(truncated_and_empty_requests_are_invalid) {
  const auto good = batch(-1, -1, -1, 2);
  const auto cut = std::span<const std::byte>(good).first(good.size() - 3);
  const auto t = validated_batches::validate(cut, limit);
  BOOST_TEST((code_of(t) == errc::invalid_batch));
  says(t, "truncated");
  const auto header_only = std::span<const std::byte>(good).first(bf::header_bytes - 1);
  BOOST_TEST((code_of(validated_batches::validate(header_only, limit)) == errc::invalid_batch));
  const auto empty = validated_batches::validate(std::span<const std::byte>(), limit);
  BOOST_TEST((code_of(empty) == errc::invalid_batch));
  says(empty, "no batch");
}

BOOST_AUTO_TEST_CASE(producer_fields_that_disagree_are_refused) {
  const auto epoch = validated_batches::validate(batch(5, -1, 0, 1), limit);
  BOOST_TEST((code_of(epoch) == errc::invalid_producer_fields));
  says(epoch, "producer_id 5 with producer_epoch -1");
  const auto seq = validated_batches::validate(batch(-1, -1, 3, 1), limit);
  BOOST_TEST((code_of(seq) == errc::invalid_producer_fields));
  says(seq, "producer_id -1 (not idempotent) with base_sequence 3");
  auto transactional = batch(5, 0, 0, 1);
  store_be<std::uint16_t>(transactional.data() + bf::attributes_at, bf::transactional);
  fix_crc(transactional);
  BOOST_TEST((code_of(validated_batches::validate(std::move(transactional), limit)) == errc::unsupported_attributes));
}

BOOST_AUTO_TEST_CASE(a_producer_batch_needs_dense_offsets) {
  auto gap = batch(-1, -1, -1, 2);
  store_be<std::int32_t>(gap.data() + bf::last_offset_delta_at, 5);  // two records over six offsets
  fix_crc(gap);
  const auto v = validated_batches::validate(std::move(gap), limit);
  BOOST_TEST((code_of(v) == errc::invalid_batch));
  says(v, "a producer batch needs records and last_offset_delta = records_count - 1");
}

BOOST_AUTO_TEST_CASE(a_batch_over_the_limit_is_too_large) {
  const auto big = batch(-1, -1, -1, 1, std::string(5000, 'x'));
  const auto v = validated_batches::validate(std::span<const std::byte>(big), 4096);
  BOOST_TEST((code_of(v) == errc::batch_too_large));
  says(v, "exceeds the limit of 4096 bytes");
  RILL_REQUIRE_OK(validated_batches::validate(std::span<const std::byte>(big), big.size()));
}

BOOST_AUTO_TEST_CASE(several_batches_are_listed_in_order_and_the_failing_one_is_named_with_its_byte) {
  const auto a = batch(3, 0, 0, 2);
  const auto b = batch(-1, -1, -1, 1, "plain");
  const auto c = batch(3, 0, 2, 4);
  const auto all = concat(concat(a, b), c);
  auto v = validated_batches::validate(std::span<const std::byte>(all), limit);
  RILL_REQUIRE_OK(v);
  BOOST_REQUIRE(v->batches().size() == 3u);
  BOOST_TEST(v->batches()[1].position == a.size());
  BOOST_TEST(v->batches()[2].position == a.size() + b.size());
  BOOST_TEST(v->batches()[2].base_sequence == 2);
  BOOST_TEST(v->records() == 7u);
  // The subset a request of retries and new batches writes: copied, positions from 0.
  const std::size_t keep[] = {0, 2};
  const auto s = v->subset(keep);
  BOOST_REQUIRE(s.batches().size() == 2u);
  BOOST_TEST(s.batches()[1].position == a.size());
  BOOST_TEST(s.bytes().size() == a.size() + c.size());
  BOOST_TEST(s.records() == 6u);
  // The third bad: nothing of the request is accepted, and the error names batch 2 and its byte.
  auto bad_c = c;
  bad_c.back() ^= std::byte{1};
  const auto refused = validated_batches::validate(concat(concat(a, b), bad_c), limit);
  BOOST_TEST((code_of(refused) == errc::crc_mismatch));
  says(refused, "batch 2 (byte " + std::to_string(a.size() + b.size()) + " of the request): ");
  // Trailing bytes that are no batch.
  auto trailing = concat(a, std::vector<std::byte>(10, std::byte{0}));
  const auto t = validated_batches::validate(std::move(trailing), limit);
  BOOST_TEST((code_of(t) == errc::invalid_batch));
  says(t, "batch 1 (byte " + std::to_string(a.size()) + " of the request): ");
}

BOOST_AUTO_TEST_SUITE_END()
