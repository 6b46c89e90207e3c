// SPDX-License-Identifier: Apache-2.0
// gradcomp::loopback_exchange (pipeline/loopback.hpp): one worker's average is its message
// decompressed (zeros elsewhere), complete within start(); in place it leaves the values as they
// are; 0 bytes either way; an output of another length is refused naming both lengths.
#include <gradcomp/pipeline/loopback.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"

namespace pipeline_loopback_test {

using namespace gradcomp;

TEST_CASE("loopback_exchange: the average of one worker is its message", "[pipeline][loopback]") {
  loopback_exchange t;
  sparse_message m;
  m.clear(6);
  m.indices = {1, 4};
  m.values = {2.5f, -3.0f};
  std::vector<float> average(6, 9.0f);
  t.start(m, average);
  CHECK(t.test());
  t.wait();
  CHECK(average == std::vector<float>{0.0f, 2.5f, 0.0f, 0.0f, -3.0f, 0.0f});
  CHECK(t.bytes_sent() == 0);
  CHECK(t.bytes_received() == 0);
  // a dense message: every value as sent
  sparse_message d;
  d.clear(3);
  d.dense = true;
  d.values = {1.0f, -0.5f, 4.0f};
  std::vector<float> dense_average(3, 9.0f);
  t.start(d, dense_average);
  CHECK(dense_average == d.values);
  // in place: the values are their own mean
  CHECK(t.accepts_in_place());
  std::vector<float> values{1.5f, -2.0f};
  t.start_in_place(values);
  CHECK(t.test());
  CHECK(values == std::vector<float>{1.5f, -2.0f});
  STATIC_REQUIRE(pipeline_policy::in_place_transport<loopback_exchange>);
  STATIC_REQUIRE(pipeline_policy::byte_counting_transport<loopback_exchange>);
}

TEST_CASE("loopback_exchange: an output of another length is refused", "[pipeline][loopback]") {
  loopback_exchange t;
  sparse_message m;
  m.clear(6);
  std::vector<float> short_average(5, 9.0f);
  CHECK_THROWS_AS(t.start(m, short_average), std::invalid_argument);
  CHECK_THROWS_WITH(t.start(m, short_average),
                    Catch::Contains("output has 5 elements, message dense length is 6"));
}

} // namespace pipeline_loopback_test
