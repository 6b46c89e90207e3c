// SPDX-License-Identifier: Apache-2.0
// The pipeline transports over MPI (mpi/pipeline_transports.hpp) in gradcomp::pipeline: with
// dense_exchange and sparse_exchange the averaged gradients equal compressing with per-layer
// error feedback and exchanging without the pipeline, bit for bit, and are bit-identical on every
// rank, whatever order each rank's hooks arrive in; native_dense_exchange, hierarchical_exchange
// and parameter_server_exchange equal the same exchange called directly on each group and MPI's
// average to rounding; parameter_server_exchange refuses dedicated servers; a pipeline over
// them (and over gtopk_exchange) resumes from a checkpoint bit for bit. The coded exchanges
// (coded_dense_exchange, coded_sparse_exchange): test/mpi/coded_pipeline_test.cpp.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_pipeline_transports_test {

using gradcomp::test::same_bits;

using namespace gradcomp;

// mpi::sparse_allgather has start/test/wait too but leaves the SUM over the ranks: without the
// opt-in tag it is not a pipeline transport (a pipeline over it does not compile), while
// its pipeline adapter, which divides by P, is.
static_assert(!pipeline_policy::transport<mpi::sparse_allgather>);
static_assert(pipeline_policy::transport<mpi::sparse_exchange>);

namespace {

const std::vector<std::size_t> sizes{300, 17, 1000, 1, 64, 5};
const schedule::grouping groups{{0, 2}, {2, 3}, {3, 6}};
constexpr int iterations = 4;

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::rank_values(sizes[layer], test::world_rank(),
                           100 * static_cast<std::uint64_t>(iteration) + layer);
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
group_input
reference_group(const schedule::layer_group& g, int iteration, std::vector<Feedback>& reference) {
  group_input in{sizes.size() - g.end, sizes.size() - 1 - g.begin, {}};
  sparse_message m;
  for (std::size_t l = in.first; l <= in.last; ++l) {
    reference[l].compress(gradient(l, iteration), m);
    in.values.resize(in.values.size() + sizes[l]);
    decompress(m, std::span<float>(in.values).last(sizes[l]));
  }
  return in;
}

// The pipeline over dense_exchange (the ring) equals compressing each layer with its own error
// feedback, concatenating each group and ring-allreducing it outside the pipeline, bit for bit;
// `in_place`: whether the pipeline must take its in-place path (gradcomp::dense, float32).
template <class Compressor>
void check_dense_exchange(const Compressor& prototype, bool in_place) {
  const int ranks = test::world_size();
  test::identity_batch averages; // compared across ranks once, at the end
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::communicator reference_comm(MPI_COMM_WORLD);
  mpi::dense_exchange exchange(comm);
  pipeline<Compressor, mpi::dense_exchange> p(sizes, pipeline_policy::fixed_grouping{groups},
                                              prototype, exchange);
  REQUIRE(p.in_place() == in_place);
  std::vector<error_feedback<Compressor>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, prototype);
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
        averages.add(p.averaged(l), test::describe("iteration ", it, ", layer ", l));
        offset += sizes[l];
      }
    }
    const auto& stats = p.last_stats();
    CHECK(stats.bytes_reported);
    CHECK((ranks == 1) == (stats.bytes_sent == 0));
    CHECK(stats.selected > 0);
  }
  averages.check();
}

} // namespace

TEST_CASE("pipeline with dense_exchange equals a group-wise ring allreduce", "[pipeline]") {
  check_dense_exchange(exact_top_k(0.1), false);
}

TEST_CASE("pipeline of uncompressed groups in place equals a group-wise ring allreduce",
          "[pipeline]") {
  check_dense_exchange(dense(), true);
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
  test::identity_batch averages; // compared across ranks once, at the end
  for (int it = 0; it < iterations; ++it) {
    feed(p, it);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      reference[l].compress(gradient(l, it), m);
      std::vector<float> expected(sizes[l]);
      gather(m, std::span<float>(expected));
      divide(expected, ranks);
      REQUIRE(same_bits(p.averaged(l), expected));
      averages.add(p.averaged(l), test::describe("iteration ", it, ", layer ", l));
    }
    CHECK(p.last_stats().bytes_reported);
  }
  averages.check();
}

namespace {

// A pipeline over `Exchange` against the same exchange called directly on each group's
// concatenated message (bit for bit), against MPI's average (MPI_Iallreduce's sum divided by P,
// to rounding), and bit-identical on every rank.
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
  test::identity_batch averages; // compared across ranks once, at the end
  for (int it = 0; it < iterations; ++it) {
    feed(p, it);
    for (const schedule::layer_group& g : groups) {
      const auto [first, last, group] = reference_group(g, it, reference);
      const std::size_t numel = group.size();
      std::vector<float> summed = test::sum_on_all_ranks(group); // MPI's sum
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
        averages.add(p.averaged(l), test::describe("iteration ", it, ", layer ", l));
        for (std::size_t i = 0; i < sizes[l]; ++i) {
          REQUIRE(p.averaged(l)[i] == Approx(summed[offset + i]).margin(tolerance));
        }
        offset += sizes[l];
      }
    }
    CHECK(p.last_stats().bytes_reported);
  }
  averages.check();
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

namespace {

// K iterations, save_state, a new pipeline (as a restarted job builds it) load_state, K more:
// the averages of every iteration equal the uninterrupted run's on every rank, bit for bit.
template <class Compressor>
void check_resume(const mpi::communicator& comm,
                  const Compressor& prototype,
                  const char* transport_name) {
  constexpr int k = 3;
  const auto make = [&] {
    if (std::string(transport_name) == "ring") {
      return any_transport::make<mpi::dense_exchange>(comm);
    }
    if (std::string(transport_name) == "ps") {
      return any_transport::make<mpi::parameter_server_exchange>(comm);
    }
    if (std::string(transport_name) == "gtopk") {
      return any_transport::make<mpi::gtopk_exchange>(comm, 0.05);
    }
    return any_transport::make<mpi::sparse_exchange>(comm);
  };
  using pipe = pipeline<Compressor, any_transport>;
  const pipeline_policy::fixed_grouping grouping{groups};
  const auto averages = [](pipe& p) {
    std::vector<float> out;
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      const auto a = p.averaged(l);
      out.insert(out.end(), a.begin(), a.end());
    }
    return out;
  };
  std::vector<float> expected, got;
  {
    any_transport t = make();
    pipe whole(sizes, grouping, prototype, t);
    for (int it = 0; it < 2 * k; ++it) {
      feed(whole, it);
      const auto a = averages(whole);
      expected.insert(expected.end(), a.begin(), a.end());
    }
  }
  std::vector<std::byte> bytes;
  {
    any_transport t = make();
    pipe first(sizes, grouping, prototype, t);
    for (int it = 0; it < k; ++it) {
      feed(first, it);
      const auto a = averages(first);
      got.insert(got.end(), a.begin(), a.end());
    }
    bytes = save_state(first);
  }
  any_transport t = make();
  pipe resumed(sizes, grouping, prototype, t);
  load_state(resumed, bytes);
  for (int it = k; it < 2 * k; ++it) {
    feed(resumed, it);
    const auto a = averages(resumed);
    got.insert(got.end(), a.begin(), a.end());
  }
  INFO(transport_name);
  REQUIRE(got.size() == expected.size());
  CHECK(same_bits(got, expected));
}

} // namespace

TEST_CASE("pipeline checkpoint: every method over allgather, ring and ps (and gtopk) resumes bit "
          "for bit",
          "[pipeline][checkpoint]") {
  mpi::communicator comm(MPI_COMM_WORLD); // every run's transports are new, on this communicator
  for (const char* transport : {"allgather", "ring", "ps"}) {
    check_resume(comm, dense(), transport);
    check_resume(comm, dense(value_type::fp16), transport);
    check_resume(comm, exact_top_k(0.05), transport);
    check_resume(comm, sampled_threshold({.density = 0.05, .seed = 11}), transport);
    check_resume(comm, gaussian_threshold(0.05), transport);
    check_resume(comm, lognormal_threshold(0.05), transport);
    check_resume(comm, reused_threshold({.density = 0.05, .interval = 2}), transport);
    check_resume(comm, random_k(0.05, 11), transport);
  }
  // gTop-k returns what its global selection left out to the residuals: in the state too
  check_resume(comm, exact_top_k(0.05), "gtopk");
  check_resume(comm, random_k(0.05, 11), "gtopk");
}

} // namespace mpi_pipeline_transports_test
