// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::global_topk_exchange (mpi/global_topk_exchange.hpp), for both of its sparse
// allreduces (gtopk_exchange, oktopk_exchange): density and lengths are checked before any
// transfer, an empty group is exchanged without one, and nothing is selected before the first
// exchange; the pipeline over the exchange against per-layer (and per-group) error feedback and
// the allreduce called directly on each group's message: the averages bit for bit, every value
// G left out back in its residual, nothing lost. Run on 1-5 ranks with the other MPI tests and,
// tagged [gtopk][oktopk], on 8.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/global_topk_exchange.hpp>
#include <gradcomp/mpi/gtopk_exchange.hpp>
#include <gradcomp/mpi/oktopk_exchange.hpp>
#include <gradcomp/pipeline.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_global_topk_exchange_test {

using namespace gradcomp;

namespace {

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

TEMPLATE_TEST_CASE("global_topk_exchange checks density and lengths before any transfer",
                   "[mpi][global_topk_exchange]",
                   mpi::gtopk_exchange,
                   mpi::oktopk_exchange) {
  const mpi::communicator comm(MPI_COMM_WORLD);
  CHECK_THROWS_WITH(TestType(comm, 0.0),
                    "gradcomp: global_topk_exchange: density 0 is outside (0, 1]");
  CHECK_THROWS_WITH(TestType(comm, 1.5),
                    "gradcomp: global_topk_exchange: density 1.5 is outside (0, 1]");
  CHECK_THROWS_AS(TestType(comm, -0.25), std::invalid_argument);
  TestType exchange(comm, 1.0);                  // the upper limit itself is valid
  CHECK(exchange.selected_indices() == nullptr); // nothing exchanged yet
  sparse_message m;
  m.clear(5);
  std::vector<float> four(4);
  CHECK_THROWS_WITH(exchange.start(m, four),
                    "gradcomp: global_topk_exchange: the average has 4 elements, the message 5");
  CHECK(exchange.selected_indices() == nullptr);
  // an empty group: nothing to select, no transfer (every rank returns before the allreduce)
  m.clear(0);
  exchange.start(m, std::span<float>());
  CHECK(exchange.test());
  exchange.wait();
  REQUIRE(exchange.selected_indices() != nullptr);
  CHECK(exchange.selected_indices()->empty());
  CHECK(exchange.bytes_sent() == 0);
}

} // namespace mpi_global_topk_exchange_test
