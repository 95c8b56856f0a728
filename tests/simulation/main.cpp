#define BOOST_TEST_MODULE rill_simulation
#include <boost/test/unit_test.hpp>
