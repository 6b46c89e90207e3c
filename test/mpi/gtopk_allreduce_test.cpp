// SPDX-License-Identifier: Apache-2.0
// gTop-k (mpi::gtopk_allreduce) against a single-process reference built from every rank's
// selection gathered: the binomial tree's selection (sums at equal indices, top k by magnitude,
// ties to the lower index, with std::map and a full sort) and the sums on G in the documented
// tree order, bit for bit and identical on every rank; error feedback on the global selection
// conserves every value exactly; rank 0's counted bytes equal cost::gtopk_bytes_sent; bad k and
// disagreeing ranks throw on every rank; the pipeline over gtopk_exchange and oktopk_exchange
// against per-layer error feedback and the allreduce called directly. Run on 1-5 ranks with the
// other MPI tests and on 8.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/gtopk_allreduce.hpp>
#include <gradcomp/mpi/gtopk_exchange.hpp>
#include <gradcomp/mpi/oktopk_exchange.hpp>
#include <gradcomp/pipeline.hpp>

#include "../common/catch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

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

// The pipeline cases: six layers in three groups (backward positions), gTop-k's density.
const std::vector<std::size_t> case_sizes{300, 17, 1000, 1, 64, 5};
const schedule::grouping case_groups{{0, 2}, {2, 3}, {3, 6}};
constexpr double case_density = 0.05;

// A pipeline case's communicators (the exchange's, and the reference's own) and exchange.
template <class Exchange>
struct pipeline_case {
  mpi::communicator comm{MPI_COMM_WORLD};
  mpi::communicator reference_comm{MPI_COMM_WORLD};
  int p = comm.size();
  Exchange exchange{comm, case_density};
};

// Iteration `it`'s layer gradients on `rank` (forward order), reported to `pipe` in backward
// order, then finish(); returns them.
template <class Pipeline>
std::vector<std::vector<float>> run_iteration(Pipeline& pipe, int rank, int it) {
  std::vector<std::vector<float>> grads;
  for (std::size_t l = 0; l < case_sizes.size(); ++l) {
    grads.push_back(test::rank_values(case_sizes[l], rank, 100 * static_cast<unsigned>(it) + l));
  }
  for (std::size_t l = case_sizes.size(); l-- > 0;) {
    pipe.gradient_ready(l, grads[l]);
  }
  pipe.finish();
  return grads;
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

TEMPLATE_TEST_CASE("gtopk, oktopk: the pipeline over the exchange returns what G left out",
                   "[gtopk][oktopk]",
                   mpi::gtopk_exchange,
                   mpi::oktopk_exchange) {
  // per layer: each layer's error feedback (exact top-k), the group's message their
  // concatenation, gTop-k on it, and every layer's values outside G back in its residual
  const std::vector<std::size_t>& sizes = case_sizes;
  const schedule::grouping& groups = case_groups;
  const double density = case_density;
  pipeline_case<TestType> c;
  const mpi::communicator& comm = c.comm;
  const int p = c.p;
  pipeline<exact_top_k, TestType> pipe(sizes, pipeline_policy::fixed_grouping{groups},
                                       exact_top_k(density), c.exchange);
  std::vector<error_feedback<exact_top_k>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, exact_top_k(density));
  }
  typename TestType::allreduce_type reference_allreduce(c.reference_comm);
  std::vector<double> gradient_total, applied_total;
  for (int it = 0; it < 4; ++it) {
    CAPTURE(it);
    const std::vector<std::vector<float>> grads = run_iteration(pipe, comm.rank(), it);
    for (const auto& g : grads) {
      gradient_total.insert(gradient_total.end(), g.begin(), g.end());
    }
    std::size_t returned = 0;
    for (const auto& g : groups) {
      const std::size_t first = sizes.size() - g.end;
      const std::size_t last = sizes.size() - 1 - g.begin;
      sparse_message group;
      std::vector<sparse_message> layer(last - first + 1);
      std::uint64_t total = 0;
      for (std::size_t l = first; l <= last; ++l) {
        reference[l].compress(grads[l], layer[l - first]);
        total += sizes[l];
      }
      group.clear(total);
      std::uint64_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        const sparse_message& m = layer[l - first];
        for (std::size_t j = 0; j < m.indices.size(); ++j) {
          group.indices.push_back(static_cast<std::uint32_t>(offset + m.indices[j]));
          group.values.push_back(m.values[j]);
        }
        offset += sizes[l];
      }
      sparse_message global;
      reference_allreduce(group, k_for_density(total, density), global);
      std::vector<float> average(total, 0.0f);
      for (std::size_t j = 0; j < global.indices.size(); ++j) {
        average[global.indices[j]] = global.values[j] / static_cast<float>(p);
      }
      offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        returned += reference[l].return_unselected(layer[l - first], global.indices, offset);
        const std::span<const float> got = pipe.averaged(l);
        REQUIRE(test::same_bits(got, std::span<const float>(average).subspan(offset, sizes[l])));
        offset += sizes[l];
      }
    }
    CHECK(pipe.last_stats().unselected == returned);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      REQUIRE(test::same_bits(pipe.residual(l), reference[l].residual()));
      REQUIRE(test::identical_on_all_ranks(pipe.averaged(l)));
      const auto a = pipe.averaged(l);
      applied_total.insert(applied_total.end(), a.begin(), a.end());
    }
  }
  // nothing lost: sum over ranks of the gradients == P x the averages + the residuals
  std::vector<double> grads_sum(gradient_total.size() / 4, 0.0);
  std::vector<double> applied_sum(grads_sum.size(), 0.0);
  for (std::size_t i = 0; i < gradient_total.size(); ++i) {
    grads_sum[i % grads_sum.size()] += gradient_total[i];
    applied_sum[i % grads_sum.size()] += applied_total[i];
  }
  std::vector<double> residual;
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    residual.insert(residual.end(), pipe.residual(l).begin(), pipe.residual(l).end());
  }
  MPI_Allreduce(MPI_IN_PLACE, grads_sum.data(), static_cast<int>(grads_sum.size()), MPI_DOUBLE,
                MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, residual.data(), static_cast<int>(residual.size()), MPI_DOUBLE,
                MPI_SUM, MPI_COMM_WORLD);
  for (std::size_t i = 0; i < grads_sum.size(); ++i) {
    REQUIRE(std::abs(grads_sum[i] - (p * applied_sum[i] + residual[i])) < 1e-3);
  }
}

TEMPLATE_TEST_CASE("gtopk, oktopk: per group, the values outside G go back to the group's residual",
                   "[gtopk][oktopk]",
                   mpi::gtopk_exchange,
                   mpi::oktopk_exchange) {
  // compression_scope::per_group: one error feedback per group on its layers' concatenated
  // gradient (forward order), gTop-k on its message, and the values outside G back in the
  // group's residual; the pipeline's per-layer residuals are slices of it
  pipeline_case<TestType> c;
  pipeline<exact_top_k, TestType> pipe(case_sizes, pipeline_policy::fixed_grouping{case_groups},
                                       exact_top_k(case_density), c.exchange, {},
                                       compression_scope::per_group);
  std::vector<error_feedback<exact_top_k>> reference; // one per group, sending order
  for (const auto& g : case_groups) {
    std::size_t total = 0;
    for (std::size_t b = g.begin; b < g.end; ++b) {
      total += case_sizes[case_sizes.size() - 1 - b];
    }
    reference.emplace_back(total, exact_top_k(case_density));
  }
  typename TestType::allreduce_type reference_allreduce(c.reference_comm);
  std::size_t returned_total = 0;
  for (int it = 0; it < 4; ++it) {
    CAPTURE(it);
    const std::vector<std::vector<float>> grads = run_iteration(pipe, c.comm.rank(), it);
    std::size_t returned = 0;
    for (std::size_t gi = 0; gi < case_groups.size(); ++gi) {
      const std::size_t first = case_sizes.size() - case_groups[gi].end;
      const std::size_t last = case_sizes.size() - 1 - case_groups[gi].begin;
      std::vector<float> concatenated;
      for (std::size_t l = first; l <= last; ++l) {
        concatenated.insert(concatenated.end(), grads[l].begin(), grads[l].end());
      }
      sparse_message message;
      reference[gi].compress(concatenated, message);
      sparse_message global;
      reference_allreduce(message, k_for_density(concatenated.size(), case_density), global);
      returned += reference[gi].return_unselected(message, global.indices, 0);
      std::vector<float> average(concatenated.size(), 0.0f);
      for (std::size_t j = 0; j < global.indices.size(); ++j) {
        average[global.indices[j]] = global.values[j] / static_cast<float>(c.p);
      }
      std::size_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        const auto want = [&](std::span<const float> all) {
          return all.subspan(offset, case_sizes[l]);
        };
        REQUIRE(test::same_bits(pipe.averaged(l), want(average)));
        REQUIRE(test::same_bits(pipe.residual(l), want(reference[gi].residual())));
        offset += case_sizes[l];
      }
    }
    CHECK(pipe.last_stats().unselected == returned);
    returned_total += returned;
  }
  if (c.p > 1) {
    CHECK(returned_total > 0); // G left some sent values out: the path ran
  }
}
