#include <boost/test/unit_test.hpp>

#include <string_view>
#include <vector>

#include "base/random.h"
#include "storage/crc32c.h"

using namespace rill;
using namespace rill::storage;

BOOST_AUTO_TEST_SUITE(crc32c_suite)

BOOST_AUTO_TEST_CASE(known_answers) {
  // The CRC-32C check value, and vectors from RFC 3720 (iSCSI) appendix B.4.
  const std::string_view check = "123456789";
  BOOST_TEST(crc32c(check.data(), check.size()) == 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0);
  BOOST_TEST(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  std::vector<unsigned char> ones(32, 0xff);
  BOOST_TEST(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  std::vector<unsigned char> inc(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<unsigned char>(i);
  }
  BOOST_TEST(crc32c(inc.data(), inc.size()) == 0x46DD794Eu);
  BOOST_TEST(crc32c(nullptr, 0) == 0u);
}

BOOST_AUTO_TEST_CASE(hardware_and_portable_agree_on_random_inputs) {
  prng rng(7);
  std::vector<unsigned char> buf(64 * 1024);
  for (auto& b : buf) {
    b = static_cast<unsigned char>(rng.next());
  }
  // Lengths around the three-lane threshold (3 * 4096) and odd alignments.
  for (std::size_t len : {0ul, 1ul, 7ul, 8ul, 9ul, 4095ul, 12287ul, 12288ul, 12289ul, 24576ul, 40000ul, 65535ul}) {
    for (std::size_t shift : {0ul, 1ul, 3ul}) {
      if (shift + len > buf.size()) {
        continue;
      }
      const auto* p = buf.data() + shift;
      BOOST_TEST(crc32c_extend_portable(0, p, len) == crc32c_extend_hardware(0, p, len), "len " << len);
      BOOST_TEST(crc32c_extend_portable(0x12345678u, p, len) == crc32c_extend_hardware(0x12345678u, p, len));
    }
  }
  BOOST_TEST_MESSAGE("crc32c hardware available: " << crc32c_hardware_available());
}

BOOST_AUTO_TEST_CASE(extend_and_combine_equal_one_pass) {
  prng rng(11);
  std::vector<unsigned char> buf(20000);
  for (auto& b : buf) {
    b = static_cast<unsigned char>(rng.next());
  }
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t split = rng.below(buf.size() + 1);
    const std::uint32_t whole = crc32c(buf.data(), buf.size());
    const std::uint32_t a = crc32c(buf.data(), split);
    const std::uint32_t b = crc32c(buf.data() + split, buf.size() - split);
    BOOST_TEST(crc32c_extend(a, buf.data() + split, buf.size() - split) == whole);
    BOOST_TEST(crc32c_combine(a, b, buf.size() - split) == whole);
  }
}

BOOST_AUTO_TEST_SUITE_END()
