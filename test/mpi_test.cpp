// SPDX-License-Identifier: Apache-2.0
// The umbrella header <gradcomp/mpi.hpp> alone gives what it promises: the core (gradcomp.hpp),
// communicator handling, wait policies, the MPI transports, the pipeline transports over them
// and plan agreement. One entity of each header it includes is named below (this file compiles
// only if the umbrella brings every one), and a few are used together on every rank: rank 0's
// grouping agreed, a dense message averaged by the ring's pipeline transport with its trace and
// a sleeping wait policy (against the exact mean every rank computes), a flag agreed by
// any_rank. The pieces' own tests are in test/mpi/. Built into gradcomp_mpi_tests (needs MPI).
#include <gradcomp/mpi.hpp>

#include <mpi.h>

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/catch.hpp"

namespace mpi_test {

using namespace gradcomp;

// gradcomp.hpp (the core)
static_assert(compressor<exact_top_k>);
// mpi/communicator.hpp, mpi/error.hpp, mpi/wait_policy.hpp, mpi/any_rank.hpp
static_assert(std::is_class_v<mpi::communicator> && std::is_class_v<mpi::environment>);
static_assert(std::is_base_of_v<mpi::mpi_error, mpi::timeout_error>);
static_assert(mpi::wait_policy{}.kind == mpi::wait_kind::yield);
static_assert(
    std::is_same_v<decltype(mpi::any_rank(true, std::declval<const mpi::communicator&>())), bool>);
// mpi/nonblocking_operation.hpp, mpi/ring_allreduce.hpp, mpi/ring_trace.hpp
static_assert(
    std::is_base_of_v<mpi::nonblocking_operation<mpi::ring_allreduce>, mpi::ring_allreduce>);
static_assert(std::is_same_v<decltype(mpi::ring_allreduce_options{}.trace), mpi::ring_trace*>);
// the other transports: mpi/sparse_allgather.hpp, native_allreduce.hpp,
// hierarchical_allreduce.hpp, parameter_server.hpp (and its options), async_parameter_server.hpp,
// coded_exchange.hpp (and coded_allreduce_options.hpp), coded_sparse.hpp,
// column_parallel_linear.hpp, gtopk_allreduce.hpp, oktopk_allreduce.hpp
static_assert(std::is_class_v<mpi::sparse_allgather>);
static_assert(std::is_class_v<mpi::native_allreduce>);
static_assert(std::is_class_v<mpi::hierarchical_allreduce>);
static_assert(std::is_same_v<mpi::parameter_server::options, mpi::parameter_server_options>);
static_assert(std::is_class_v<mpi::async_parameter_server>);
static_assert(std::is_aggregate_v<mpi::coded_allreduce_options>);
static_assert(std::is_class_v<mpi::coded_allreduce>);
static_assert(std::is_class_v<mpi::coded_sparse_allreduce>);
static_assert(std::is_class_v<mpi::column_parallel_linear<no_gemm>>);
static_assert(std::is_class_v<mpi::powersgd_allreduce<no_gemm>>); // mpi/powersgd_allreduce.hpp
static_assert(std::is_class_v<mpi::gtopk_allreduce> && std::is_class_v<mpi::oktopk_allreduce>);
// mpi/global_topk_exchange.hpp, mpi/gtopk_exchange.hpp, mpi/oktopk_exchange.hpp
static_assert(std::is_same_v<mpi::gtopk_exchange, mpi::global_topk_exchange<mpi::gtopk_allreduce>>);
static_assert(pipeline_policy::selecting_transport<mpi::oktopk_exchange>);
// mpi/pipeline_transports.hpp, mpi/agreed_grouping.hpp
static_assert(pipeline_policy::in_place_transport<mpi::dense_exchange>);
static_assert(pipeline_policy::multi_part_transport<mpi::coded_sparse_exchange>);
static_assert(
    pipeline_policy::grouping_policy<mpi::agreed_grouping<pipeline_policy::fixed_grouping>>);
// mpi/calibrate.hpp, mpi/calibrate_column_parallel.hpp
static_assert(std::is_same_v<
              decltype(mpi::calibrate_ring_allreduce(std::declval<const mpi::communicator&>())),
              mpi::calibration>);
static_assert(std::is_same_v<decltype(mpi::calibrate_model_parallel_fixed_seconds(
                                 std::declval<const mpi::communicator&>())),
                             double>);

TEST_CASE("mpi.hpp: an agreed grouping, the ring's pipeline transport and an agreed flag, with "
          "the umbrella header alone",
          "[mpi][umbrella]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int r = comm.rank();
  // rank 0's proposal wins, whatever the others propose
  const std::vector<std::size_t> sizes{5, 3};
  CHECK(mpi::agree_grouping(comm, sizes, r == 0 ? schedule::single(2) : schedule::per_layer(2)) ==
        schedule::single(2));
  // rank r sends (r + 1) (i + 1): the mean over the ranks, (P + 1) / 2 x (i + 1), is exact in
  // float (a multiple of 1/2 far below 2^24), whatever the order of the ring's sums
  const std::size_t n = 8;
  std::vector<float> gradient(n), expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    gradient[i] = static_cast<float>((r + 1) * static_cast<int>(i + 1));
    expected[i] = static_cast<float>(p + 1) / 2.0f * static_cast<float>(i + 1);
  }
  sparse_message m;
  dense().compress(gradient, m);
  mpi::ring_trace trace;
  mpi::dense_exchange exchange(comm, {.wait = {.kind = mpi::wait_kind::sleep}, .trace = &trace});
  std::vector<float> average(n);
  exchange.start(m, average);
  exchange.wait();
  CHECK(average == expected);
  CHECK(exchange.bytes_sent() == mpi::ring_allreduce::bytes_sent(n, p, r));
  CHECK(trace.operations == 1);
  CHECK(trace.steps.size() == static_cast<std::size_t>(2 * (p - 1)));
  // one rank's flag is every rank's
  CHECK(mpi::any_rank(r == p - 1, comm));
  CHECK_FALSE(mpi::any_rank(false, comm));
  CHECK_NOTHROW(mpi::check(MPI_SUCCESS, "MPI_Anything"));
}

} // namespace mpi_test
