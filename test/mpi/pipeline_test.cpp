// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline over MPI: with dense_exchange and sparse_exchange the averaged gradients
// equal compressing with per-layer error feedback and exchanging without the pipeline, bit for
// bit, and are bit-identical on every rank, whatever order each rank's hooks arrive in.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/pipeline.hpp>
#include <gradcomp/pipeline/mpi_exchange.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "mpi_test_util.hpp"

using namespace gradcomp;

namespace {

const std::vector<std::size_t> sizes{300, 17, 1000, 1, 64, 5};
const schedule::grouping groups{{0, 2}, {2, 3}, {3, 6}};
constexpr int iterations = 4;

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::rank_values(sizes[layer], test::world_rank(),
                           100 * static_cast<std::uint64_t>(iteration) + layer);
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

// Every rank reports its layers in its own order (a rank-seeded shuffle).
template <class Pipeline>
void feed(Pipeline& p, int iteration) {
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(static_cast<unsigned>(test::world_rank() * 31 + iteration));
  std::shuffle(order.begin(), order.end(), rng);
  for (const std::size_t l : order) {
    p.gradient_ready(l, gradient(l, iteration));
  }
  p.finish();
}

void divide(std::span<float> v, int p) {
  for (float& x : v) {
    x /= static_cast<float>(p);
  }
}

// Group g's forward layers L-end .. L-1-begin and what the pipeline exchanges for it: each
// layer's gradient compressed by its reference error feedback, decompressed and concatenated
// in forward order.
struct group_input {
  std::size_t first = 0, last = 0;
  std::vector<float> values;
};

template <class Feedback>
group_input reference_group(const schedule::layer_group& g,
                            int iteration,
                            std::vector<Feedback>& reference) {
  group_input in{sizes.size() - g.end, sizes.size() - 1 - g.begin, {}};
  sparse_message m;
  for (std::size_t l = in.first; l <= in.last; ++l) {
    reference[l].compress(gradient(l, iteration), m);
    in.values.resize(in.values.size() + sizes[l]);
    decompress(m, std::span<float>(in.values).last(sizes[l]));
  }
  return in;
}

} // namespace

TEST_CASE("pipeline with dense_exchange equals a group-wise ring allreduce", "[pipeline]") {
  const int ranks = test::world_size();
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::communicator reference_comm(MPI_COMM_WORLD);
  mpi::dense_exchange exchange(comm);
  pipeline<exact_top_k, mpi::dense_exchange> p(sizes, pipeline_policy::fixed_grouping{groups},
                                               exact_top_k(0.1), exchange);
  std::vector<error_feedback<exact_top_k>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, exact_top_k(0.1));
  }
  mpi::ring_allreduce ring(reference_comm);
  for (int it = 0; it < iterations; ++it) {
    feed(p, it);
    for (const schedule::layer_group& g : groups) {
      auto [first, last, group] = reference_group(g, it, reference);
      ring(std::span<float>(group));
      divide(group, ranks);
      std::size_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        CAPTURE(it, l);
        REQUIRE(same_bits(p.averaged(l), std::span<const float>(group).subspan(offset, sizes[l])));
        REQUIRE(test::identical_on_all_ranks(p.averaged(l)));
        offset += sizes[l];
      }
    }
    const auto& stats = p.last_stats();
    CHECK(stats.bytes_reported);
    CHECK((ranks == 1) == (stats.bytes_sent == 0));
    CHECK(stats.selected > 0);
  }
}

TEST_CASE("pipeline with sparse_exchange equals a per-layer sparse allgather", "[pipeline]") {
  const int ranks = test::world_size();
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::communicator reference_comm(MPI_COMM_WORLD);
  mpi::sparse_allgather_options options;
  options.dense_switch = false; // sums in rank order per element, whatever the grouping
  mpi::sparse_exchange exchange(comm, options);
  pipeline<exact_top_k, mpi::sparse_exchange> p(sizes, pipeline_policy::fixed_grouping{groups},
                                                exact_top_k(0.05), exchange);
  std::vector<error_feedback<exact_top_k>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, exact_top_k(0.05));
  }
  mpi::sparse_allgather gather(reference_comm, options);
  sparse_message m;
  for (int it = 0; it < iterations; ++it) {
    feed(p, it);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      reference[l].compress(gradient(l, it), m);
      std::vector<float> expected(sizes[l]);
      gather(m, std::span<float>(expected));
      divide(expected, ranks);
      REQUIRE(same_bits(p.averaged(l), expected));
      REQUIRE(test::identical_on_all_ranks(p.averaged(l)));
    }
    CHECK(p.last_stats().bytes_reported);
  }
}

namespace {

// A pipeline over `Exchange` against the same exchange called directly on each group's
// concatenated message (bit for bit), against MPI_Allreduce's average (to rounding), and
// bit-identical on every rank.
template <class Exchange, class Options>
void check_groupwise(const Options& options, float tolerance) {
  const int ranks = test::world_size();
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::communicator reference_comm(MPI_COMM_WORLD);
  Exchange exchange(comm, options);
  Exchange direct(reference_comm, options);
  pipeline<exact_top_k, Exchange> p(sizes, pipeline_policy::fixed_grouping{groups},
                                    exact_top_k(0.2), exchange);
  std::vector<error_feedback<exact_top_k>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, exact_top_k(0.2));
  }
  for (int it = 0; it < iterations; ++it) {
    feed(p, it);
    for (const schedule::layer_group& g : groups) {
      const auto [first, last, group] = reference_group(g, it, reference);
      const std::size_t numel = group.size();
      std::vector<float> summed(numel);
      MPI_Allreduce(group.data(), summed.data(), static_cast<int>(numel), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      divide(summed, ranks);
      sparse_message whole;
      dense().compress(group, whole);
      std::vector<float> expected(numel);
      direct.start(whole, std::span<float>(expected));
      direct.wait();
      std::size_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        CAPTURE(it, l);
        const auto mine = std::span<const float>(expected).subspan(offset, sizes[l]);
        REQUIRE(same_bits(p.averaged(l), mine));
        REQUIRE(test::identical_on_all_ranks(p.averaged(l)));
        for (std::size_t i = 0; i < sizes[l]; ++i) {
          REQUIRE(p.averaged(l)[i] == Approx(summed[offset + i]).margin(tolerance));
        }
        offset += sizes[l];
      }
    }
    CHECK(p.last_stats().bytes_reported);
  }
}

} // namespace

TEST_CASE("pipeline with native_dense_exchange (MPI_Iallreduce) averages like MPI_Allreduce",
          "[pipeline]") {
  check_groupwise<mpi::native_dense_exchange>(mpi::native_allreduce_options{}, 0.0f);
}

TEST_CASE("pipeline with hierarchical_exchange averages like MPI_Allreduce", "[pipeline]") {
  mpi::hierarchical_allreduce_options o;
  o.group_size = 2;
  check_groupwise<mpi::hierarchical_exchange>(o, 1e-5f);
  o.variant = mpi::hierarchical_variant::reduce_scatter;
  check_groupwise<mpi::hierarchical_exchange>(o, 1e-5f);
}

TEST_CASE("pipeline with parameter_server_exchange averages like MPI_Allreduce", "[pipeline]") {
  mpi::parameter_server_options o;
  o.servers = test::world_size();
  check_groupwise<mpi::parameter_server_exchange>(o, 1e-5f);
  o.servers = 1;
  check_groupwise<mpi::parameter_server_exchange>(o, 1e-5f);
}

TEST_CASE("parameter_server_exchange refuses dedicated servers", "[pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::parameter_server_options o;
  o.placement = mpi::server_placement::dedicated;
  REQUIRE_THROWS_WITH(mpi::parameter_server_exchange(comm, o), Catch::Contains("co-located"));
}
