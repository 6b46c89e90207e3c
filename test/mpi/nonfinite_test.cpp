// SPDX-License-Identifier: Apache-2.0
// Non-finite gradients over MPI (nonfinite_policy): with skip_step, one rank's NaN / infinity
// at one step is counted there, agreed by mpi::any_rank, and every rank skips that step and
// returns its sent values (pipeline::return_sent): the replicas stay bit-identical and no finite
// value is lost (the sum of every rank's finite gradients equals P x the applied averages plus
// every rank's residual), over the sparse allgather and the fp16 ring. With raise on every rank
// at the same layer, every rank refuses the same group and the next iteration goes on; with
// propagate, every rank's average shows the NaN at the same element.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_nonfinite_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

const std::vector<std::size_t> sizes{300, 120};
constexpr int steps = 5;
constexpr int bad_step = 2;

std::vector<float> gradient(std::size_t layer, int step) {
  return test::rank_values(sizes[layer], test::world_rank(),
                           100 * static_cast<std::uint64_t>(step) + layer);
}

// Sums `v` over the ranks (double).
std::vector<double> sum_over_ranks(std::vector<double> v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  return v;
}

template <class Transport, class Compressor>
void check_skip_step(Transport& transport, Compressor c, double tolerance) {
  const mpi::communicator agree(MPI_COMM_WORLD);
  const int ranks = agree.size();
  const bool injector = agree.rank() == ranks - 1;
  pipeline p(sizes, pipeline_policy::fixed_grouping{}, c, transport);
  REQUIRE_FALSE(p.in_place());
  std::vector<std::vector<float>> w{test::rank_values(sizes[0], 0, 7),
                                    test::rank_values(sizes[1], 0, 8)};
  std::vector<std::vector<double>> gradient_total(2), applied_total(2);
  for (std::size_t l = 0; l < 2; ++l) {
    gradient_total[l].assign(sizes[l], 0.0);
    applied_total[l].assign(sizes[l], 0.0);
  }
  for (int t = 0; t < steps; ++t) {
    for (std::size_t l = 2; l-- > 0;) {
      std::vector<float> g = gradient(l, t);
      if (t == bad_step && injector) {
        g[l == 0 ? 5 : 0] = l == 0 ? std::numeric_limits<float>::quiet_NaN()
                                   : -std::numeric_limits<float>::infinity();
      }
      for (std::size_t i = 0; i < g.size(); ++i) {
        gradient_total[l][i] += std::isfinite(g[i]) ? g[i] : 0.0;
      }
      p.gradient_ready(l, g);
    }
    p.finish();
    CHECK(p.last_stats().nonfinite == (t == bad_step && injector ? 2u : 0u));
    const bool skip = mpi::any_rank(p.last_stats().nonfinite > 0, agree);
    REQUIRE(skip == (t == bad_step));
    if (skip) {
      CHECK(p.return_sent() == p.last_stats().selected);
    } else {
      for (std::size_t l = 0; l < 2; ++l) {
        const auto a = p.averaged(l);
        for (std::size_t i = 0; i < a.size(); ++i) {
          w[l][i] -= 0.1f * a[i];
          applied_total[l][i] += a[i];
        }
      }
    }
    for (std::size_t l = 0; l < 2; ++l) {
      REQUIRE(test::identical_on_all_ranks(w[l]));
    }
  }
  // nothing finite is lost: sum of gradients == P x applied averages + residuals (up to the
  // transport's rounding)
  for (std::size_t l = 0; l < 2; ++l) {
    std::vector<double> residual(p.residual(l).begin(), p.residual(l).end());
    const std::vector<double> gradients = sum_over_ranks(gradient_total[l]);
    const std::vector<double> residuals = sum_over_ranks(residual);
    for (std::size_t i = 0; i < sizes[l]; ++i) {
      CAPTURE(l, i);
      REQUIRE(std::abs(gradients[i] - (ranks * applied_total[l][i] + residuals[i])) < tolerance);
    }
  }
}

} // namespace

TEST_CASE("nonfinite: skip_step over the sparse allgather", "[nonfinite]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_exchange exchange(comm);
  check_skip_step(exchange,
                  exact_top_k({.density = 0.05, .nonfinite = nonfinite_policy::skip_step}), 1e-3);
}

TEST_CASE("nonfinite: skip_step over the fp16 ring", "[nonfinite]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::dense_exchange exchange(comm);
  check_skip_step(exchange,
                  dense({.values = value_type::fp16, .nonfinite = nonfinite_policy::skip_step}),
                  0.02); // the ring's partial sums are rounded to fp16 on the wire
}

TEST_CASE("nonfinite: raise on every rank refuses the same group", "[nonfinite]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_exchange exchange(comm);
  pipeline p(sizes, pipeline_policy::fixed_grouping{},
             exact_top_k({.density = 0.05, .nonfinite = nonfinite_policy::raise}), exchange);
  p.gradient_ready(1, gradient(1, 0)); // its group goes out on every rank
  std::vector<float> g0 = gradient(0, 0);
  g0[9] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(p.gradient_ready(0, g0), Contains("layer 0: non-finite value inf at index 9"));
  CHECK_THROWS_WITH(p.finish(), Contains("layer 0 was never reported"));
  CHECK(p.drop_non_finite_state() == 1);
  p.gradient_ready(1, gradient(1, 1));
  p.gradient_ready(0, gradient(0, 1));
  p.finish();
  CHECK(test::identical_on_all_ranks(p.averaged(0)));
  CHECK(test::identical_on_all_ranks(p.averaged(1)));
}

TEST_CASE("nonfinite: propagate shows one rank's NaN in every average", "[nonfinite]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::dense_exchange exchange(comm);
  pipeline p(sizes, pipeline_policy::fixed_grouping{}, dense(), exchange);
  std::vector<float> g1 = gradient(1, 0);
  if (test::world_rank() == test::world_size() - 1) {
    g1[3] = std::numeric_limits<float>::quiet_NaN();
  }
  p.gradient_ready(1, g1);
  p.gradient_ready(0, gradient(0, 0));
  p.finish();
  CHECK(std::isnan(p.averaged(1)[3]));
  CHECK(p.last_stats().nonfinite == 0);
}

} // namespace mpi_nonfinite_test
