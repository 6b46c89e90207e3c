// SPDX-License-Identifier: Apache-2.0
// The MPI-free pieces of the sparse form of the coded exchange (gradcomp::coded, sparse.hpp and
// cost.hpp): the choice of one contributor per part (an owner, balanced), the union of index
// lists against std::set_union, the check of an untrusted list, the restriction of a message to
// the union against a dense reference (decompress), and the cost model of the union agreement
// against counts taken by simulating the ring; bad parameters.
#include <gradcomp/coded.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace coded_sparse_test {

using namespace gradcomp::coded;
using gradcomp::sparse_message;

namespace {

// strictly ascending indices below d: each index kept with probability `density`
std::vector<std::uint32_t> random_list(std::uint32_t d, double density, std::mt19937_64& rng) {
  std::bernoulli_distribution keep(density);
  std::vector<std::uint32_t> list;
  for (std::uint32_t i = 0; i < d; ++i) {
    if (keep(rng)) {
      list.push_back(i);
    }
  }
  return list;
}

std::vector<std::uint32_t> set_union_reference(const std::vector<std::vector<std::uint32_t>>& l) {
  std::vector<std::uint32_t> all;
  for (const std::vector<std::uint32_t>& list : l) {
    std::vector<std::uint32_t> merged;
    std::set_union(all.begin(), all.end(), list.begin(), list.end(), std::back_inserter(merged));
    all = std::move(merged);
  }
  return all;
}

sparse_message random_message(std::uint32_t d, double density, std::mt19937_64& rng) {
  sparse_message m;
  m.dense_length_elements = d;
  m.indices = random_list(d, density, rng);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < m.indices.size(); ++i) {
    m.values.push_back(normal(rng));
  }
  return m;
}

} // namespace

TEST_CASE("union_contributors gives every part to one of its owners, balanced", "[coded]") {
  for (int n = 2; n <= 10; ++n) {
    for (int r = 1; r < n; ++r) {
      const placement p(n, r);
      const std::vector<int> c = union_contributors(p);
      REQUIRE(c.size() == p.part_count());
      std::vector<std::size_t> given(static_cast<std::size_t>(n), 0);
      for (std::size_t t = 0; t < p.part_count(); ++t) {
        CHECK(p.owns(c[t], t));
        ++given[static_cast<std::size_t>(c[t])];
      }
      const auto [low, high] = std::minmax_element(given.begin(), given.end());
      CAPTURE(n, r);
      CHECK(*high - *low <= 1);
      CHECK(std::accumulate(given.begin(), given.end(), std::size_t{0}) == p.part_count());
      CHECK(union_contributors(p) == c); // deterministic
    }
  }
}

TEST_CASE("index_union equals std::set_union of the lists", "[coded]") {
  std::mt19937_64 rng(12);
  for (const std::size_t count : {0, 1, 2, 3, 5, 8}) {
    for (const std::uint32_t d : {0u, 1u, 7u, 300u}) {
      for (const double density : {0.0, 0.05, 0.5, 1.0}) {
        std::vector<std::vector<std::uint32_t>> lists;
        for (std::size_t l = 0; l < count; ++l) {
          // a mix of densities: overlapping, sparse, empty and full lists
          lists.push_back(random_list(d, l % 3 == 2 ? 0.0 : density, rng));
        }
        std::vector<std::span<const std::uint32_t>> spans(lists.begin(), lists.end());
        std::vector<std::uint32_t> out = {99, 98}; // replaced, not appended to
        index_union(spans, out);
        CAPTURE(count, d, density);
        CHECK(out == set_union_reference(lists));
      }
    }
  }
  // disjoint lists interleaved, and the largest index
  const std::vector<std::vector<std::uint32_t>> disjoint = {
      {0, 3, 6}, {1, 4, 7}, {2, 5, 4294967295u}};
  std::vector<std::span<const std::uint32_t>> spans(disjoint.begin(), disjoint.end());
  std::vector<std::uint32_t> out;
  index_union(spans, out);
  CHECK(out == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 4294967295u});
}

TEST_CASE("check_index_list rejects an index out of range and a list not strictly ascending",
          "[coded]") {
  const std::vector<std::uint32_t> good = {0, 4, 9};
  CHECK_NOTHROW(check_index_list(good, 10, 0));
  CHECK_NOTHROW(check_index_list({}, 0, 0));
  const std::vector<std::uint32_t> high = {0, 4, 10};
  CHECK_THROWS_AS(check_index_list(high, 10, 2), gradcomp::wire_error);
  CHECK_THROWS_WITH(check_index_list(high, 10, 2),
                    Catch::Contains("rank 2's index list holds index 10 at position 2, not below "
                                    "the dense length 10"));
  const std::vector<std::uint32_t> repeated = {1, 5, 5};
  CHECK_THROWS_WITH(check_index_list(repeated, 10, 3),
                    Catch::Contains("rank 3's index list is not strictly ascending at position 2: "
                                    "5 then 5"));
  const std::vector<std::uint32_t> descending = {6, 2};
  CHECK_THROWS_AS(check_index_list(descending, 10, 0), gradcomp::wire_error);
}

TEST_CASE("restrict_to_union equals the densified message at the union", "[coded]") {
  std::mt19937_64 rng(5);
  for (const std::uint32_t d : {0u, 1u, 7u, 500u}) {
    for (const double density : {0.0, 0.1, 1.0}) {
      const sparse_message m = random_message(d, density, rng);
      std::vector<float> dense(d);
      gradcomp::decompress(m, dense);
      // a union that contains m's indices and others
      const std::vector<std::uint32_t> other = random_list(d, 0.2, rng);
      std::vector<std::uint32_t> u;
      std::set_union(m.indices.begin(), m.indices.end(), other.begin(), other.end(),
                     std::back_inserter(u));
      std::vector<float> values(u.size(), -1.0f);
      CAPTURE(d, density);
      CHECK(restrict_to_union(m, u, values) == 0);
      for (std::size_t i = 0; i < u.size(); ++i) {
        CHECK(values[i] == dense[u[i]]);
      }
      // the same values from the dense layout
      sparse_message full;
      full.dense_length_elements = d;
      full.dense = true;
      full.values = dense;
      std::vector<float> from_dense(u.size());
      CHECK(restrict_to_union(full, u, from_dense) == d - u.size());
      CHECK(from_dense == values);
      // a union missing some of m's indices: the count of what would be lost
      std::vector<std::uint32_t> partial;
      for (std::size_t i = 0; i < u.size(); i += 2) {
        partial.push_back(u[i]);
      }
      std::vector<std::uint32_t> lost;
      std::set_difference(m.indices.begin(), m.indices.end(), partial.begin(), partial.end(),
                          std::back_inserter(lost));
      std::vector<float> fewer(partial.size());
      CHECK(restrict_to_union(m, partial, fewer) == lost.size());
    }
  }
  sparse_message m;
  m.dense_length_elements = 4;
  std::vector<float> wrong(2);
  const std::vector<std::uint32_t> u = {0, 1, 2};
  CHECK_THROWS_WITH(restrict_to_union(m, u, wrong),
                    Catch::Contains("the output has 2 elements, the union has 3"));
}

TEST_CASE("append_selected_indices lists a sparse message's indices and all of a dense one's",
          "[coded]") {
  sparse_message m;
  m.dense_length_elements = 6;
  m.indices = {1, 4};
  m.values = {1.0f, 2.0f};
  std::vector<std::uint32_t> out = {9};
  append_selected_indices(m, out);
  CHECK(out == std::vector<std::uint32_t>{9, 1, 4});
  m.dense = true;
  m.indices.clear();
  m.values.assign(6, 0.5f);
  out.clear();
  append_selected_indices(m, out);
  CHECK(out == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("union_agreement_load equals the counts of a simulated ring allgather", "[coded]") {
  std::mt19937_64 rng(3);
  for (int n = 1; n <= 6; ++n) {
    std::uniform_int_distribution<std::uint64_t> size(0, 50);
    std::vector<std::uint64_t> c(static_cast<std::size_t>(n));
    for (std::uint64_t& x : c) {
      x = size(rng);
    }
    // the ring: in step s rank k sends list k - s to k + 1 and receives list k - s - 1
    for (int k = 0; k < n; ++k) {
      std::uint64_t sent = 0, received = 0, sends = 0;
      for (int s = 0; s + 1 < n; ++s) {
        sent += c[static_cast<std::size_t>(((k - s) % n + n) % n)];
        received += c[static_cast<std::size_t>(((k - s - 1) % n + n) % n)];
        ++sends;
      }
      const exchange_load load = union_agreement_load(c, k);
      CAPTURE(n, k);
      CHECK(load.sent_messages == sends);
      CHECK(load.received_messages == sends);
      CHECK(load.sent_bytes == static_cast<double>(4 * sent));
      CHECK(load.received_bytes == static_cast<double>(4 * received));
      CHECK(load.reduced_bytes == 0.0);
    }
  }
  const std::vector<std::uint64_t> three = {1, 2, 3};
  CHECK_THROWS_WITH(union_agreement_load(three, 3),
                    Catch::Contains("rank 3 is outside [0, n = 3)"));
  CHECK_THROWS_WITH(union_agreement_load({}, 0), Catch::Contains("need n >= 1"));
}

TEST_CASE("coded_sparse_load is the union agreement plus the coded exchange on |U|", "[coded]") {
  const std::vector<std::uint64_t> c = {20, 0, 7, 13};
  for (int r = 1; r < 4; ++r) {
    for (const std::size_t u : {std::size_t{0}, std::size_t{1}, std::size_t{40}}) {
      for (int k = 0; k < 4; ++k) {
        const exchange_load agreement = union_agreement_load(c, k);
        for (const delivery mode : {delivery::point_to_point, delivery::multicast}) {
          CHECK(coded_sparse_load(4, r, u, c, 4, mode, exchange_variant::full_recovery, k) ==
                agreement + coded_exchange_load(4, r, u, 4, mode));
          CHECK(coded_sparse_load(4, r, u, c, 4, mode, exchange_variant::reduce_scatter, k) ==
                agreement + coded_reduce_scatter_load(4, r, u, 4, mode, k));
        }
      }
    }
  }
  CHECK_THROWS_WITH(coded_sparse_load(5, 2, 10, c, 4, delivery::point_to_point,
                                      exchange_variant::full_recovery, 0),
                    Catch::Contains("4 contributions given for n = 5 ranks"));
  CHECK_THROWS_WITH(coded_sparse_load(4, 4, 10, c, 4, delivery::point_to_point,
                                      exchange_variant::full_recovery, 0),
                    Catch::Contains("redundancy r = 4 is not below the rank count n = 4"));
}

TEST_CASE("the sparse form's examples of docs/coded.md", "[coded]") {
  // n = 4, r = 2, d = 10^6: 6 parts, union_contributors gives ranks 0..3 1, 2, 2, 1 parts
  const placement p(4, 2);
  std::vector<std::uint64_t> parts_given(4, 0);
  for (const int rank : union_contributors(p)) {
    ++parts_given[static_cast<std::size_t>(rank)];
  }
  CHECK(parts_given == std::vector<std::uint64_t>{1, 2, 2, 1});
  const std::size_t d = 1000000;
  const exchange_load dense = coded_exchange_load(4, 2, d, 4, delivery::point_to_point);
  CHECK(dense.sent_bytes == 12000000.0);
  CHECK(ring_allreduce_load(4, d, 4).sent_bytes == 6000000.0);
  // top-k at 1 % per part, disjoint: |U| = T = 6 10^4; rank 0 sends 4 (T - c_1) = 160000 bytes
  // of indices and 6 packets of 30000 codes
  const std::vector<std::uint64_t> disjoint = {10000, 20000, 20000, 10000};
  const exchange_load sparse = coded_sparse_load(4, 2, 60000, disjoint, 4, delivery::point_to_point,
                                                 exchange_variant::full_recovery, 0);
  CHECK(sparse.sent_bytes == 160000.0 + 720000.0);
  CHECK(sparse.received_bytes == 4.0 * 50000.0 + 720000.0);
  // 50 % per part, independent: |U| = d (1 - 2^-6) = 984375, a rank with two parts contributes
  // 3/4 d, with one part d / 2: T = 2.5 d; the index lists alone (7 MB) cost more than the
  // coded bytes saved
  const std::vector<std::uint64_t> half = {500000, 750000, 750000, 500000};
  const exchange_load worse = coded_sparse_load(4, 2, 984375, half, 4, delivery::point_to_point,
                                                exchange_variant::full_recovery, 0);
  CHECK(worse.sent_bytes == 7000000.0 + 6.0 * 492188.0 * 4.0);
  CHECK(worse.sent_bytes > dense.sent_bytes);
}

} // namespace coded_sparse_test
