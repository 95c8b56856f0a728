#define BOOST_TEST_MODULE rill_storage
#include <boost/test/unit_test.hpp>
