// SPDX-License-Identifier: Apache-2.0
// gradcomp::random_k: k distinct ascending indices carrying the source's values, chosen
// uniformly (every element's frequency over many calls within a binomial bound), the same
// choice for the same seed and call sequence and a different one for another seed, exact
// conservation under error feedback, a resumed checkpoint choosing what an uninterrupted run
// chooses, and bad densities named.
#include <gradcomp/gradcomp.hpp>

#include <cmath>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace compressor_random_k_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

TEST_CASE("random_k: k distinct ascending indices with the source's values", "[random_k]") {
  const std::vector<float> x = test::make_values(test::distribution::normal, 1000, 1);
  random_k c(0.05, 7);
  sparse_message m;
  for (int call = 0; call < 5; ++call) {
    const selection_stats s = c.compress(x, m);
    CHECK(s.k_selected == 50);
    REQUIRE(m.indices.size() == 50);
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      REQUIRE(m.indices[j] < 1000);
      if (j > 0) {
        REQUIRE(m.indices[j - 1] < m.indices[j]);
      }
      REQUIRE(m.values[j] == x[m.indices[j]]);
    }
  }
  // density 1: every element
  random_k all(1.0);
  all.compress(x, m);
  CHECK(m.indices.size() == 1000);
  CHECK(m.indices.back() == 999);
}

TEST_CASE("random_k: uniform over the elements", "[random_k]") {
  // 4000 calls choosing 10 of 100: each element is chosen Binomial(4000, 0.1) times, mean 400,
  // standard deviation 19; 6 standard deviations bound all 100 counts with room to spare
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 100, 2);
  random_k c(0.1, 3);
  sparse_message m;
  std::vector<int> count(100, 0);
  for (int call = 0; call < 4000; ++call) {
    c.compress(x, m);
    for (const std::uint32_t i : m.indices) {
      ++count[i];
    }
  }
  for (std::size_t i = 0; i < count.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(count[i] - 400) < 6 * 19);
  }
}

TEST_CASE("random_k: the seed decides the choice", "[random_k]") {
  const std::vector<float> x = test::make_values(test::distribution::normal, 5000, 3);
  random_k a(0.01, 11), b(0.01, 11), other(0.01, 12);
  sparse_message ma, mb, mo;
  bool differs_from_other = false;
  bool changes_between_calls = false;
  std::vector<std::uint32_t> first;
  for (int call = 0; call < 3; ++call) {
    a.compress(x, ma);
    b.compress(x, mb);
    other.compress(x, mo);
    REQUIRE(ma.indices == mb.indices);
    differs_from_other = differs_from_other || ma.indices != mo.indices;
    if (call == 0) {
      first = ma.indices;
    } else {
      changes_between_calls = changes_between_calls || ma.indices != first;
    }
  }
  CHECK(differs_from_other);
  CHECK(changes_between_calls);
}

TEST_CASE("random_k: error feedback conserves every value", "[random_k]") {
  error_feedback ef(3000, random_k({.density = 0.02, .seed = 5, .values = value_type::bf16}));
  sparse_message m;
  for (std::uint64_t call = 0; call < 6; ++call) {
    const std::vector<float> before(ef.residual().begin(), ef.residual().end());
    const std::vector<float> g = test::make_values(test::distribution::normal, 3000, 10 + call);
    ef.compress(g, m);
    std::vector<float> sent(3000, 0.0f);
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      sent[m.indices[j]] = m.values[j];
    }
    for (std::size_t i = 0; i < 3000; ++i) {
      REQUIRE(test::same_bits(std::vector<float>{sent[i] + ef.residual()[i]},
                              std::vector<float>{before[i] + g[i]}));
    }
  }
}

TEST_CASE("random_k: a resumed checkpoint chooses what an uninterrupted run does", "[random_k]") {
  const std::vector<float> x = test::make_values(test::distribution::normal, 2000, 4);
  error_feedback<random_k> whole(2000, random_k(0.01, 9));
  error_feedback<random_k> first(2000, random_k(0.01, 9));
  sparse_message m, n;
  whole.compress(x, m);
  first.compress(x, n);
  const std::vector<std::byte> saved = save_state(first);
  error_feedback<random_k> resumed(2000, random_k(0.01, 9));
  load_state(resumed, saved);
  for (int call = 0; call < 3; ++call) {
    whole.compress(x, m);
    resumed.compress(x, n);
    REQUIRE(m.indices == n.indices);
    REQUIRE(test::same_bits(m.values, n.values));
  }
  CHECK(test::same_bits(whole.residual(), resumed.residual()));
  error_feedback<random_k> other_seed(2000, random_k(0.01, 10));
  CHECK_THROWS_WITH(load_state(other_seed, saved), Contains("seed"));
}

TEST_CASE("random_k: bad densities are named", "[random_k]") {
  CHECK_THROWS_WITH(random_k(0.0), Contains("density 0 is outside (0, 1]"));
  CHECK_THROWS_WITH(random_k(1.5), Contains("1.5"));
  CHECK_THROWS_WITH(with_sparse_compressor("random_kk", {}, [](auto) { return 0; }),
                    Contains("random_k"));
}

} // namespace compressor_random_k_test
