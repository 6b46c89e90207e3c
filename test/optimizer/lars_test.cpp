// SPDX-License-Identifier: Apache-2.0
// LARS (optimizer/lars.hpp) against its formula worked by hand and against an independent
// double-precision reference over several steps; S4's no-weight-decay rule, lambda = 1 without
// adaptation, and bad input named in the exception.
#include <gradcomp/optimizer/lars.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace optimizer_lars_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

// You et al. 2017, Algorithm 1, written out in double precision (the reference).
struct reference_lars {
  std::vector<double> w, v;
  double eta, beta, momentum;
  bool adapt = true;
  double step(const std::vector<float>& g, double lr) {
    double ww = 0, gg = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      ww += w[i] * w[i];
      gg += double(g[i]) * g[i];
    }
    const double denominator = std::sqrt(gg) + beta * std::sqrt(ww);
    const double lambda =
        !adapt || ww == 0 || denominator == 0 ? 1.0 : eta * std::sqrt(ww) / denominator;
    for (std::size_t i = 0; i < w.size(); ++i) {
      v[i] = momentum * v[i] + lr * lambda * (g[i] + beta * w[i]);
      w[i] -= v[i];
    }
    return lambda;
  }
};

} // namespace

TEST_CASE("lars: the trust ratio of a hand-worked layer", "[lars]") {
  const std::vector<float> w{3.0f, 4.0f}; // ||w|| = 5
  const std::vector<float> g{0.6f, 0.8f}; // ||g|| = 1 (in float: within 1e-7)
  // 0.001 * 5 / (1 + 0.01 * 5) = 0.005 / 1.05
  CHECK(lars_trust_ratio(w, g, 0.001, 0.01) == Approx(0.005 / 1.05).epsilon(1e-7));
  // no weight decay: 0.001 * 5 / 1
  CHECK(lars_trust_ratio(w, g, 0.001, 0.0) == Approx(0.005).epsilon(1e-7));
  // zero weights: 1; zero gradient with weight decay: eta / beta; with neither: 1
  const std::vector<float> zeros{0.0f, 0.0f};
  CHECK(lars_trust_ratio(zeros, g, 0.001, 0.01) == 1.0);
  CHECK(lars_trust_ratio(w, zeros, 0.001, 0.01) == Approx(0.1));
  CHECK(lars_trust_ratio(w, zeros, 0.001, 0.0) == 1.0);
}

TEST_CASE("lars: one step worked by hand, then momentum", "[lars]") {
  std::vector<float> w{3.0f, 4.0f};
  const std::vector<float> g{0.6f, 0.8f};
  std::vector<float> v{0.0f, 0.0f};
  const lars_options o{.momentum = 0.9, .weight_decay = 0.01, .trust_coefficient = 0.001};
  const double lambda = lars_step(w, g, v, 2.0, o);
  REQUIRE(lambda == Approx(0.005 / 1.05).epsilon(1e-7));
  // v = 2 lambda (g + 0.01 w): (0.6 + 0.03, 0.8 + 0.04)
  const double s = 2.0 * 0.005 / 1.05;
  CHECK(v[0] == Approx(s * 0.63).epsilon(1e-6));
  CHECK(v[1] == Approx(s * 0.84).epsilon(1e-6));
  CHECK(w[0] == Approx(3.0 - s * 0.63).epsilon(1e-6));
  CHECK(w[1] == Approx(4.0 - s * 0.84).epsilon(1e-6));
  // second step: v = 0.9 v + 2 lambda' (g + 0.01 w)
  const std::vector<float> v1 = v;
  const std::vector<float> w1 = w;
  const double lambda2 = lars_step(w, g, v, 2.0, o);
  const double s2 = 2.0 * lambda2;
  CHECK(v[0] == Approx(0.9 * v1[0] + s2 * (0.6 + 0.01 * w1[0])).epsilon(1e-6));
  CHECK(w[1] == Approx(w1[1] - (0.9 * v1[1] + s2 * (0.8 + 0.01 * w1[1]))).epsilon(1e-6));
}

TEST_CASE("lars: equals the double-precision reference over ten steps", "[lars]") {
  for (const bool decay : {true, false}) {
    for (const bool adapt : {true, false}) {
      CAPTURE(decay, adapt);
      const std::size_t n = 1000;
      std::vector<float> w = test::make_values(test::distribution::normal, n, 5, 0.1f);
      std::vector<float> v(n, 0.0f);
      const lars_options o{.momentum = 0.9, .weight_decay = 5e-4, .trust_coefficient = 0.001};
      reference_lars ref{
          {w.begin(), w.end()}, std::vector<double>(n, 0.0), 0.001, decay ? 5e-4 : 0.0, 0.9, adapt};
      for (int step = 0; step < 10; ++step) {
        const auto g = test::make_values(test::distribution::heavy_tailed, n, 100 + step, 0.01f);
        const double got = lars_step(w, g, v, 3.2, o, {.weight_decay = decay, .adapt = adapt});
        const double want = ref.step(g, 3.2);
        REQUIRE(got == Approx(want).epsilon(1e-6)); // w is float here, double there
      }
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(w[i] == Approx(ref.w[i]).epsilon(1e-4).margin(1e-6));
        REQUIRE(v[i] == Approx(ref.v[i]).epsilon(1e-4).margin(1e-7));
      }
    }
  }
}

TEST_CASE("lars: S4's rule leaves biases and batch-norm parameters undecayed", "[lars]") {
  // Zero gradient: a decayed layer still shrinks (the decay term), an undecayed one stays put.
  std::vector<float> w{1.0f, -2.0f};
  std::vector<float> v{0.0f, 0.0f};
  const std::vector<float> zero{0.0f, 0.0f};
  const lars_options o{.momentum = 0.0, .weight_decay = 0.1, .trust_coefficient = 0.01};
  lars_step(w, zero, v, 1.0, o, {.weight_decay = false});
  CHECK(w == std::vector<float>{1.0f, -2.0f});
  lars_step(w, zero, v, 1.0, o);
  // lambda = eta / beta = 0.1; v = 0.1 * 0.1 * w
  CHECK(w[0] == Approx(1.0 - 0.01).epsilon(1e-6));
  CHECK(w[1] == Approx(-2.0 + 0.02).epsilon(1e-6));
}

TEST_CASE("lars: bad input is named", "[lars][errors]") {
  std::vector<float> w(3, 1.0f), v(3, 0.0f), g(2, 1.0f), g3(3, 1.0f);
  CHECK_THROWS_WITH(lars_step(w, g, v, 0.1, {}), Contains("gradient has 2") && Contains("3"));
  std::vector<float> v2(2, 0.0f);
  CHECK_THROWS_WITH(lars_step(w, g3, v2, 0.1, {}), Contains("velocity has 2"));
  CHECK_THROWS_WITH(lars_step(w, g3, v, -1.0, {}), Contains("learning rate -1"));
  CHECK_THROWS_WITH(lars_step(w, g3, v, 0.1, {.momentum = 1.0}), Contains("momentum 1"));
  CHECK_THROWS_WITH(lars_step(w, g3, v, 0.1, {.trust_coefficient = 0.0}),
                    Contains("trust coefficient 0"));
  CHECK_THROWS_WITH(lars_trust_ratio(w, g, 0.001, 0.0), Contains("gradient 2"));
}

} // namespace optimizer_lars_test
