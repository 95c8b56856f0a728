#define BOOST_TEST_MODULE rill_consensus
#include <boost/test/unit_test.hpp>
