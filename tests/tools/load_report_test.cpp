// The load harness's measurement and option checks, without a server: series merging (per second, across
// threads), percentiles from the merged histograms, the CSV, and the refusals of bad combinations.
#define BOOST_TEST_MODULE load_report
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/load/load.h"
#include "tools/load/load_report.h"

using namespace rill;
using namespace rill::bench;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(writers_merge_per_second_and_in_total) {
  series s;
  {
    series::writer a(s);
    series::writer b(s);
    a.record(100ms, 10, 1000, 5'000);
    a.record(900ms, 10, 1000, 7'000);
    b.record(500ms, 5, 500, 1'000'000);
    a.record(1500ms, 1, 100, 3'000);  // the second changes: a's first second is merged now
    b.latency(2100ms, 9'000);
    a.record(-5ms, 1, 1, std::nullopt);  // negative times count in second 0
  }
  BOOST_TEST(s.messages() == 27u);
  BOOST_TEST(s.bytes() == 2601u);
  BOOST_REQUIRE(s.seconds().size() == 3u);
  BOOST_TEST(s.seconds()[0]->messages == 26u);
  BOOST_TEST(s.seconds()[0]->latency.count() == 3u);
  BOOST_TEST(s.seconds()[1]->messages == 1u);
  BOOST_TEST(s.seconds()[2]->messages == 0u);
  BOOST_TEST(s.seconds()[2]->latency.count() == 1u);
  BOOST_TEST(s.latency().count() == 5u);
  BOOST_TEST(s.latency().max() == 1'000'000u);
  BOOST_TEST(s.latency().min() == 3'000u);
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(s.last_at()).count() == 2100);
}

BOOST_AUTO_TEST_CASE(threads_record_concurrently_without_losing_counts) {
  series s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      series::writer w(s);
      for (int i = 0; i < 10'000; ++i) {
        w.record(std::chrono::milliseconds(i % 3000), 1, 10, static_cast<std::uint64_t>(1000 + t));
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  BOOST_TEST(s.messages() == 40'000u);
  BOOST_TEST(s.bytes() == 400'000u);
  BOOST_TEST(s.latency().count() == 40'000u);
  std::uint64_t per_second = 0;
  for (const auto& sec : s.seconds()) {
    per_second += sec->messages;
  }
  BOOST_TEST(per_second == 40'000u);
  BOOST_TEST(s.latency().percentile(50) >= 1000u);
  BOOST_TEST(s.latency().percentile(100) == 1003u);
}

BOOST_AUTO_TEST_CASE(csv_has_a_row_per_second_and_role) {
  series produced;
  series consumed;
  {
    series::writer p(produced);
    series::writer c(consumed);
    p.record(0ms, 100, 100'000, 2'000'000);
    p.record(1200ms, 50, 50'000, 4'000'000);
    c.record(300ms, 150, 150'000, 1'000);
  }
  load_options o;
  report r;
  r.system = "test";
  r.options = &o;
  r.roles.push_back(role_result{"produce", "per batch", 2, &produced});
  r.roles.push_back(role_result{"consume", "per poll", 1, &consumed});
  const auto path = std::filesystem::temp_directory_path() / "rill_load_report_test.csv";
  BOOST_REQUIRE(write_csv(r, path.string()));
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  std::filesystem::remove(path);
  const auto csv = text.str();
  BOOST_TEST(csv.find("second,role,messages,msgs_per_s,mb_per_s,p50_us,p90_us,p99_us,p99_9_us,max_us\n") == 0u);
  BOOST_TEST(csv.find("0,produce,100,100,0.100,2000.0,") != std::string::npos, csv);
  BOOST_TEST(csv.find("1,produce,50,50,0.050,4000.0,") != std::string::npos, csv);
  BOOST_TEST(csv.find("0,consume,150,150,0.150,1.0,") != std::string::npos, csv);
  BOOST_TEST(!write_csv(r, "/nonexistent-dir/x.csv"));
}

BOOST_AUTO_TEST_CASE(bad_combinations_are_refused_by_name) {
  load_options o;
  o.partitions = 2;
  o.consumers = 3;
  auto r = check_options(o, load_mode::consume);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().detail().find("--consumers (3)") != std::string::npos);
  BOOST_TEST(static_cast<bool>(check_options(o, load_mode::produce)));  // consumers do not matter to produce

  load_options small;
  small.message_size = 7;
  r = check_options(small, load_mode::produce_consume);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().detail().find("--message-size") != std::string::npos);

  load_options keyed;
  keyed.partitioning = "key";
  r = check_options(keyed, load_mode::produce);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().detail().find("--keys") != std::string::npos);

  load_options many;
  many.streams = 1000;
  many.partitions = 101;
  r = check_options(many, load_mode::produce);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().detail().find("at most 100000") != std::string::npos);

  load_options warm;
  warm.warmup_s = 1;
  BOOST_TEST(!check_options(warm, load_mode::consume));
  BOOST_TEST(static_cast<bool>(check_options(warm, load_mode::produce)));
}

BOOST_AUTO_TEST_CASE(without_keys_every_unit_gets_batches_whatever_the_producer_count) {
  // One producer, three partitions: the fixed partitioning writes all three in turn (it wrote unit 0 only).
  load_options o;
  o.partitions = 3;
  o.producers = 1;
  std::vector<std::uint32_t> seen;
  for (std::uint64_t k = 0; k < 6; ++k) {
    seen.push_back(unit_of_batch(o, 0, k));
  }
  BOOST_TEST(seen == (std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2}), boost::test_tools::per_element());
  // Two producers, five units: producer 0 owns 0, 2, 4 and producer 1 owns 1, 3; together every unit.
  o.partitions = 5;
  o.producers = 2;
  std::vector<std::uint32_t> p0;
  std::vector<std::uint32_t> p1;
  for (std::uint64_t k = 0; k < 3; ++k) {
    p0.push_back(unit_of_batch(o, 0, k));
    p1.push_back(unit_of_batch(o, 1, k));
  }
  BOOST_TEST(p0 == (std::vector<std::uint32_t>{0, 2, 4}), boost::test_tools::per_element());
  BOOST_TEST(p1 == (std::vector<std::uint32_t>{1, 3, 1}), boost::test_tools::per_element());
  // As many producers as units or more: producer i stays on unit i % units (unchanged).
  o.partitions = 2;
  o.producers = 3;
  for (std::uint64_t k = 0; k < 4; ++k) {
    BOOST_TEST(unit_of_batch(o, 2, k) == 0u);
    BOOST_TEST(unit_of_batch(o, 1, k) == 1u);
  }
  // Round robin: every unit in turn from the producer's own.
  o.partitioning = "round-robin";
  o.partitions = 3;
  o.producers = 2;
  BOOST_TEST(unit_of_batch(o, 1, 0) == 1u);
  BOOST_TEST(unit_of_batch(o, 1, 1) == 2u);
  BOOST_TEST(unit_of_batch(o, 1, 2) == 0u);
}
