// SPDX-License-Identifier: Apache-2.0
// gradcomp::nonfinite_policy and nonfinite_error (compressor/nonfinite_policy.hpp): the names and
// their inverse, unknown names refused naming them, the error's fields; the bit test behind every
// policy against std::isfinite over every exponent and special pattern, the scan and zeroing of
// non-finite values counted by hand; and `raise` through a compressor naming the first element.
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/catch.hpp"

namespace compressor_nonfinite_policy_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

constexpr float inf_value = std::numeric_limits<float>::infinity();
constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

struct with_policy {
  nonfinite_policy nonfinite = nonfinite_policy::propagate;
};
struct without_policy {
  double density = 0.1;
};

} // namespace

TEST_CASE("nonfinite_policy: names and their inverse", "[nonfinite_policy]") {
  CHECK(to_string(nonfinite_policy::propagate) == "propagate");
  CHECK(to_string(nonfinite_policy::raise) == "raise");
  CHECK(to_string(nonfinite_policy::skip_step) == "skip_step");
  for (const nonfinite_policy p :
       {nonfinite_policy::propagate, nonfinite_policy::raise, nonfinite_policy::skip_step}) {
    CHECK(nonfinite_policy_from_string(to_string(p)) == p);
  }
  CHECK_THROWS_WITH(nonfinite_policy_from_string("skip"),
                    Contains("non-finite policy 'skip' is not one of propagate, raise, skip_step"));
  CHECK_THROWS_AS(nonfinite_policy_from_string("Raise"), std::invalid_argument);
  CHECK_THROWS_WITH(nonfinite_policy_from_string(""), Contains("policy ''"));
  // the default of an options struct, and of one without the member
  CHECK(detail::nonfinite_of(with_policy{}) == nonfinite_policy::propagate);
  CHECK(detail::nonfinite_of(with_policy{nonfinite_policy::raise}) == nonfinite_policy::raise);
  CHECK(detail::nonfinite_of(without_policy{}) == nonfinite_policy::propagate);
}

TEST_CASE("nonfinite_error: what() and the fields as given", "[nonfinite_policy]") {
  const nonfinite_error e("the message", 17, -inf_value, 2);
  CHECK(std::string(e.what()) == "the message");
  CHECK(e.index() == 17);
  CHECK(e.value() == -inf_value);
  CHECK(e.count() == 2);
  CHECK(e.layer() == nonfinite_error::no_layer);
  CHECK(nonfinite_error::no_layer == std::numeric_limits<std::size_t>::max());
  const nonfinite_error in_layer("m", 3, nan_value, 1, 5);
  CHECK(in_layer.layer() == 5);
  CHECK(std::isnan(in_layer.value()));
  const std::runtime_error& base = e; // caught as a runtime_error too
  CHECK(std::string(base.what()) == "the message");
}

TEST_CASE("nonfinite_policy: the bit test agrees with std::isfinite on every exponent",
          "[nonfinite_policy]") {
  // every exponent with several significands and both signs: 2 x 256 x 5 patterns
  for (std::uint32_t sign = 0; sign < 2; ++sign) {
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
      for (const std::uint32_t significand : {0u, 1u, 0x400000u, 0x7fffffu, 0x123456u}) {
        const std::uint32_t bits = sign << 31 | exponent << 23 | significand;
        const float v = std::bit_cast<float>(bits);
        CAPTURE(bits);
        REQUIRE((detail::nonfinite_bits(&v, 1) != 0) == !std::isfinite(v));
      }
    }
  }
  // a run: nonzero as soon as one value is not finite, wherever it is
  std::vector<float> x(37, 1.5f);
  CHECK(detail::nonfinite_bits(x.data(), x.size()) == 0);
  CHECK(detail::nonfinite_bits(x.data(), 0) == 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<float> y = x;
    y[i] = i % 2 ? nan_value : -inf_value;
    REQUIRE(detail::nonfinite_bits(y.data(), y.size()) != 0);
  }
  x[3] = std::numeric_limits<float>::max();
  x[4] = -std::numeric_limits<float>::denorm_min();
  CHECK(detail::nonfinite_bits(x.data(), x.size()) == 0);
}

TEST_CASE("nonfinite_policy: scan and zeroing count by hand", "[nonfinite_policy]") {
  std::vector<float> x{1.0f, -0.0f, inf_value, 2.0f, nan_value, -inf_value, 3.0f};
  const detail::nonfinite_scan s = detail::scan_nonfinite(x);
  CHECK(s.first == 2);
  CHECK(s.value == inf_value);
  CHECK(s.count == 3);
  const detail::nonfinite_scan none = detail::scan_nonfinite(std::vector<float>{1.0f, 2.0f});
  CHECK(none.count == 0);
  CHECK(detail::zero_non_finite(x) == 3);
  CHECK(x == std::vector<float>{1.0f, -0.0f, 0.0f, 2.0f, 0.0f, 0.0f, 3.0f});
  CHECK(detail::zero_non_finite(x) == 0);
}

TEST_CASE("nonfinite_policy: raise names the first element through a compressor",
          "[nonfinite_policy]") {
  std::vector<float> x(1000, 0.5f);
  x[17] = inf_value;
  x[400] = nan_value;
  exact_top_k c({.density = 0.01, .nonfinite = nonfinite_policy::raise});
  sparse_message m;
  try {
    c.compress(x, m);
    FAIL("no nonfinite_error");
  } catch (const nonfinite_error& e) {
    CHECK(e.index() == 17);
    CHECK(e.value() == inf_value);
    CHECK(e.count() == 2);
    CHECK(e.layer() == nonfinite_error::no_layer);
    CHECK_THAT(e.what(), Contains("non-finite value inf at index 17 of 1000") &&
                             Contains("2 non-finite values"));
  }
  CHECK(m.nnz() == 0); // nothing to send
  // propagate: no check, the infinity ranks above every finite magnitude and is sent
  x[400] = 0.5f;
  exact_top_k p({.density = 0.001});
  p.compress(x, m);
  REQUIRE(m.nnz() == 1);
  CHECK(m.indices[0] == 17);
  CHECK(m.values[0] == inf_value);
}

} // namespace compressor_nonfinite_policy_test
