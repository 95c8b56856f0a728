// consensus::node_identity: the file round-trips and refuses every damaged byte; a start is judged against the
// configuration (another cluster, node or members list refused by name, a member never started from an
// unformatted directory, a node alone formats itself); format and recover refuse what they must.
#include <boost/test/unit_test.hpp>

#include "consensus/node_identity.h"
#include "simulation/sim_disk.h"
#include "storage/errc.h"
#include "storage/file_ops.h"
#include "storage/io/run.h"
#include "tests/test_util.h"

using namespace rill;
using namespace rill::consensus;

namespace {
bool says(const expected<identity_verdict>& r, const std::string& part) {
  return !r && r.error().detail().find(part) != std::string::npos;
}
bool says(const expected<node_identity>& r, const std::string& part) {
  return !r && r.error().detail().find(part) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(node_identity_suite)

BOOST_AUTO_TEST_CASE(the_file_round_trips_and_every_damaged_byte_is_refused) {
  const node_identity id{77, 2, {1, 2, 3}, true, std::nullopt};
  const auto bytes = encode(id);
  auto back = decode_node_identity(bytes);
  RILL_REQUIRE_OK(back);
  BOOST_TEST((*back == id));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] ^= std::byte{0x04};
    BOOST_TEST(!decode_node_identity(damaged).has_value(), "byte " << i);
  }
  BOOST_TEST(!decode_node_identity(std::span(bytes).first(bytes.size() - 1)).has_value());
  // With the time through which its topics may have lost data (written once a recovered node saw all metadata).
  node_identity caught_up = id;
  caught_up.topics_lost_through_ms = 1'700'000'000'123;
  const auto longer = encode(caught_up);
  BOOST_TEST(longer.size() == bytes.size() + 8);
  auto back_longer = decode_node_identity(longer);
  RILL_REQUIRE_OK(back_longer);
  BOOST_TEST((*back_longer == caught_up));
  for (std::size_t i = 0; i < longer.size(); ++i) {
    auto damaged = longer;
    damaged[i] ^= std::byte{0x10};
    BOOST_TEST(!decode_node_identity(damaged).has_value(), "byte " << i);
  }
  // On disk, atomically; absent is not an error.
  simulation::sim_disk disk(1);
  const auto made = storage::io::run_task(disk, storage::make_dirs(disk, "/data"));
  BOOST_REQUIRE(made.has_value() && made->has_value());
  auto none = storage::io::run_task(disk, read_node_identity(disk, "/data"));
  RILL_REQUIRE_OK(*none);
  BOOST_TEST(!none->value().has_value());
  const auto written = storage::io::run_task(disk, write_node_identity(disk, "/data", id));
  BOOST_REQUIRE(written.has_value() && written->has_value());
  auto read = storage::io::run_task(disk, read_node_identity(disk, "/data"));
  RILL_REQUIRE_OK(*read);
  BOOST_TEST((read->value() == id));
  disk.flip_bits("/data/identity", 20, 0x01);
  auto rotten = storage::io::run_task(disk, read_node_identity(disk, "/data"));
  BOOST_TEST((!rotten->has_value() && rotten->error().detail().find("/data/identity") != std::string::npos));
}

BOOST_AUTO_TEST_CASE(a_start_is_judged_against_the_configuration) {
  const node_identity member{77, 2, {1, 2, 3}, false, std::nullopt};
  // The same cluster, node and members (in any order): started with what was found.
  auto same = judge_identity(member, wanted_identity{77, 2, {3, 1, 2}}, true, 999);
  RILL_REQUIRE_OK(same);
  BOOST_TEST((same->use == member));
  BOOST_TEST(!same->format_alone);
  RILL_REQUIRE_OK(judge_identity(member, wanted_identity{0, 2, {1, 2, 3}}, true, 999));  // no id given: found one
  BOOST_TEST(says(judge_identity(member, wanted_identity{78, 2, {1, 2, 3}}, true, 999),
                  "cluster.id = 78: this data directory belongs to cluster 77"));
  BOOST_TEST(says(judge_identity(member, wanted_identity{77, 3, {1, 2, 3}}, true, 999),
                  "cluster.node_id = 3: this data directory is node 2's"));
  BOOST_TEST(says(judge_identity(member, wanted_identity{77, 2, {1, 2, 4}}, true, 999),
                  "cluster.members names nodes 1, 2, 4; this data directory was formatted for a cluster of nodes 1, "
                  "2, 3"));
  BOOST_TEST(says(judge_identity(member, wanted_identity{77, 2, {}}, true, 999), "configure its members"));
  // A member never starts from a directory without an identity, empty or not.
  BOOST_TEST(says(judge_identity(std::nullopt, wanted_identity{77, 2, {1, 2, 3}}, false, 999), "rilld format"));
  BOOST_TEST(says(judge_identity(std::nullopt, wanted_identity{77, 2, {1, 2, 3}}, true, 999), "holds data but"));
  // A node alone formats itself: with the cluster id given, or a new one.
  auto alone = judge_identity(std::nullopt, wanted_identity{0, 1, {}}, false, 999);
  RILL_REQUIRE_OK(alone);
  BOOST_TEST(alone->format_alone);
  BOOST_TEST(alone->use.cluster_id == 999u);
  BOOST_TEST(alone->use.members.empty());
  auto named = judge_identity(std::nullopt, wanted_identity{5, 1, {}}, true, 999);
  RILL_REQUIRE_OK(named);
  BOOST_TEST(named->use.cluster_id == 5u);
  // ... and later starts alone find it.
  RILL_REQUIRE_OK(judge_identity(alone->use, wanted_identity{0, 1, {}}, true, 1000));
  BOOST_TEST(says(judge_identity(alone->use, wanted_identity{5, 1, {}}, true, 1000), "belongs to cluster 999"));
}

BOOST_AUTO_TEST_CASE(format_and_recover_refuse_what_they_must) {
  auto fresh = identity_to_format(std::nullopt, wanted_identity{77, 2, {3, 2, 1}}, false, false, 999);
  RILL_REQUIRE_OK(fresh);
  BOOST_TEST((*fresh == node_identity{77, 2, {1, 2, 3}, false, std::nullopt}));
  auto recovering = identity_to_format(std::nullopt, wanted_identity{77, 2, {1, 2, 3}}, false, true, 999);
  RILL_REQUIRE_OK(recovering);
  BOOST_TEST(recovering->recovering);
  BOOST_TEST(says(identity_to_format(*fresh, wanted_identity{77, 2, {1, 2, 3}}, true, false, 999),
                  "already node 2 of cluster 77"));
  BOOST_TEST(says(identity_to_format(std::nullopt, wanted_identity{77, 2, {1, 2, 3}}, true, false, 999),
                  "holds data but no identity"));
  BOOST_TEST(says(identity_to_format(std::nullopt, wanted_identity{0, 1, {}}, false, true, 999),
                  "no peers to recover its data from"));
  BOOST_TEST(
      says(identity_to_format(std::nullopt, wanted_identity{0, 2, {1, 2, 3}}, false, true, 999), "cluster.id = 0"));
  auto alone = identity_to_format(std::nullopt, wanted_identity{0, 1, {}}, false, false, 999);
  RILL_REQUIRE_OK(alone);
  BOOST_TEST(alone->cluster_id == 999u);
}

BOOST_AUTO_TEST_SUITE_END()
