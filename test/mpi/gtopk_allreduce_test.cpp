// SPDX-License-Identifier: Apache-2.0
// gTop-k (mpi::gtopk_allreduce) against a single-process reference built from every rank's
// selection gathered: the binomial tree's selection (sums at equal indices, top k by magnitude,
// ties to the lower index, with std::map and a full sort) and the sums on G in the documented
// tree order, bit for bit and identical on every rank; error feedback on the global selection
// conserves every value exactly; rank 0's counted bytes equal cost::gtopk_bytes_sent; bad k and
// disagreeing ranks throw on every rank (the pipeline over gtopk_exchange and oktopk_exchange:
// test/mpi/global_topk_exchange_test.cpp). Run on 1-5 ranks with the other MPI tests and on 8.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/gtopk_allreduce.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_gtopk_allreduce_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

using sparse_set = std::map<std::uint32_t, float>;

// the k largest magnitudes of `s`, ties to the lower index (full sort)
sparse_set top_k(const sparse_set& s, std::size_t k) {
  std::vector<std::pair<std::uint32_t, float>> v(s.begin(), s.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    const float ma = std::abs(a.second);
    const float mb = std::abs(b.second);
    return ma != mb ? ma > mb : a.first < b.first;
  });
  v.resize(std::min(k, v.size()));
  return {v.begin(), v.end()};
}

// every rank's selection (exactly `k` pairs each), gathered on every rank
std::vector<sparse_set> gather(const sparse_message& m, std::size_t k) {
  const int p = test::world_size();
  std::vector<std::uint32_t> indices(k * static_cast<std::size_t>(p));
  std::vector<float> values(indices.size());
  MPI_Allgather(m.indices.data(), static_cast<int>(k), MPI_UINT32_T, indices.data(),
                static_cast<int>(k), MPI_UINT32_T, MPI_COMM_WORLD);
  MPI_Allgather(m.values.data(), static_cast<int>(k), MPI_FLOAT, values.data(), static_cast<int>(k),
                MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<sparse_set> sets(static_cast<std::size_t>(p));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    sets[j / k][indices[j]] = values[j];
  }
  return sets;
}

} // namespace

TEST_CASE("gtopk: the tree's global top-k and its sums, on every rank", "[gtopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 5000;
  const std::size_t k = 50;
  mpi::gtopk_allreduce gtopk(comm);
  for (std::uint64_t round = 0; round < 3; ++round) {
    CAPTURE(round);
    std::vector<float> residual(n, 0.0f);
    // round 2: the same gradient on every rank (every set alike, sums of equal values)
    const std::vector<float> g = test::rank_values(n, round == 2 ? 0 : comm.rank(), 10 + round);
    exact_top_k local_top_k({.density = static_cast<double>(k) / n});
    sparse_message local;
    local_top_k.compress_accumulate(residual, g, local);
    REQUIRE(local.indices.size() == k);
    sparse_message global;
    gtopk(local, k, global);

    // reference: the selection tree, then the sums in tree order
    const std::vector<sparse_set> sets = gather(local, k);
    std::vector<sparse_set> current = sets;
    for (int d = 1; d < p; d *= 2) {
      for (int r = 0; r + d < p; r += 2 * d) {
        sparse_set merged = current[static_cast<std::size_t>(r)];
        for (const auto& [i, v] : current[static_cast<std::size_t>(r + d)]) {
          merged[i] = merged.count(i) != 0 ? merged[i] + v : v;
        }
        current[static_cast<std::size_t>(r)] = top_k(merged, k);
      }
    }
    const sparse_set g_set = top_k(current[0], k);
    std::vector<std::vector<float>> at_g(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      for (const auto& [i, v] : g_set) {
        const auto it = sets[static_cast<std::size_t>(r)].find(i);
        at_g[static_cast<std::size_t>(r)].push_back(
            it == sets[static_cast<std::size_t>(r)].end() ? 0.0f : it->second);
      }
    }
    for (int d = 1; d < p; d *= 2) {
      for (int r = 0; r + d < p; r += 2 * d) {
        for (std::size_t j = 0; j < g_set.size(); ++j) {
          at_g[static_cast<std::size_t>(r)][j] += at_g[static_cast<std::size_t>(r + d)][j];
        }
      }
    }
    std::vector<std::uint32_t> expected_indices;
    for (const auto& [i, v] : g_set) {
      expected_indices.push_back(i);
    }
    CHECK(global.dense_length_elements == n);
    CHECK(global.indices == expected_indices);
    CHECK(test::same_bits(global.values, at_g[0]));
    CHECK(test::identical_on_all_ranks(global.values));

    // error feedback on the global selection: each selected value is in a sum or back home
    const std::vector<float> before_return = residual;
    const std::size_t returned = mpi::return_unselected(residual, local, global);
    std::size_t in_g = 0;
    for (std::size_t j = 0; j < local.indices.size(); ++j) {
      const std::uint32_t i = local.indices[j];
      if (std::binary_search(expected_indices.begin(), expected_indices.end(), i)) {
        ++in_g;
        REQUIRE(residual[i] == before_return[i]); // sent
      } else {
        REQUIRE(residual[i] == before_return[i] + local.values[j]); // back
      }
    }
    CHECK(returned + in_g == k);
    if (p == 1) {
      CHECK(returned == 0);
    }

    // bytes: rank 0, every set of k elements
    if (comm.rank() == 0) {
      CHECK(static_cast<double>(gtopk.bytes_sent()) ==
            cost::gtopk_bytes_sent(static_cast<double>(k), p));
    }
  }
}

TEST_CASE("gtopk: bad k and disagreeing ranks throw on every rank", "[gtopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  mpi::gtopk_allreduce gtopk(comm);
  sparse_message local;
  exact_top_k(0.1).compress(test::rank_values(100, comm.rank(), 3), local);
  sparse_message global;
  CHECK_THROWS_WITH(gtopk(local, 0, global), Contains("k 0 is outside [1, 100]"));
  CHECK_THROWS_WITH(gtopk(local, 101, global), Contains("k 101 is outside [1, 100]"));
  // rank 0 alone passes a bad k: every rank throws, naming rank 0
  CHECK_THROWS_WITH(gtopk(local, comm.rank() == 0 ? 0 : 10, global),
                    Contains("rank 0's arguments are invalid"));
  if (comm.size() > 1) {
    const std::size_t k = comm.rank() == 0 ? 11 : 10;
    CHECK_THROWS_WITH(gtopk(local, k, global), Contains("the ranks disagree"));
  }
  gtopk(local, 10, global); // and the next call works
  CHECK(global.indices.size() == 10);
  CHECK(test::identical_on_all_ranks(global.values));
}

} // namespace mpi_gtopk_allreduce_test
