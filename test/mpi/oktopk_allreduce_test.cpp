// SPDX-License-Identifier: Apache-2.0
// Ok-Topk (mpi::oktopk_allreduce) against a single-process reference built from every rank's
// selection gathered: the averaged boundary proposals, the sums in rank order, the exact k-th
// largest magnitude by a full sort where the threshold is evaluated and the previous one where
// it is reused (with the documented re-evaluation after a selection outside [k/1.25, 1.25k]), bit
// for bit and identical on every rank; error feedback on the global selection conserves every value
// exactly; counted bytes equal the bytes of the reference's blocks and, for balanced selections,
// cost::oktopk_bytes_sent; bad arguments on any one rank throw on every rank. Run on 1-5 ranks
// with the other MPI tests and on 8.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_oktopk_allreduce_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

// every rank's message (indices and values; any counts), gathered on every rank
std::vector<sparse_message> gather(const sparse_message& m) {
  const int p = test::world_size();
  int count = static_cast<int>(m.indices.size());
  std::vector<int> counts(static_cast<std::size_t>(p));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> offsets(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) {
    offsets[r] = offsets[r - 1] + counts[r - 1];
  }
  const auto total = static_cast<std::size_t>(offsets.back() + counts.back());
  std::vector<std::uint32_t> indices(total);
  std::vector<float> values(total);
  MPI_Allgatherv(m.indices.data(), count, MPI_UINT32_T, indices.data(), counts.data(),
                 offsets.data(), MPI_UINT32_T, MPI_COMM_WORLD);
  MPI_Allgatherv(m.values.data(), count, MPI_FLOAT, values.data(), counts.data(), offsets.data(),
                 MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<sparse_message> all(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    all[r].clear(m.dense_length_elements);
    const auto b = static_cast<std::size_t>(offsets[r]);
    all[r].indices.assign(indices.begin() + b, indices.begin() + b + counts[r]);
    all[r].values.assign(values.begin() + b, values.begin() + b + counts[r]);
  }
  return all;
}

std::size_t levels(int p) {
  std::size_t l = 0;
  for (int d = 1; d < p; d *= 2) {
    ++l;
  }
  return l;
}

// the reference of one call and the state it leaves (the class comment, step by step)
struct reference_state {
  std::vector<std::uint64_t> bounds;
  float threshold = 0.0f;
  std::uint64_t calls = 0;
  bool reevaluate_next = false;
};

struct reference_result {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::size_t bytes_sent = 0; // of this rank, u32 indices
  bool evaluated = false;
};

reference_result reference_call(const std::vector<sparse_message>& all,
                                std::size_t k,
                                int repartition_interval_calls,
                                int threshold_interval_calls,
                                reference_state& st) {
  const int p = static_cast<int>(all.size());
  const auto up = static_cast<std::size_t>(p);
  const int rank = test::world_rank();
  const std::uint64_t n = all[0].dense_length_elements;
  const bool repartition = st.calls % static_cast<std::uint64_t>(repartition_interval_calls) == 0;
  const bool evaluate =
      st.reevaluate_next || st.calls % static_cast<std::uint64_t>(threshold_interval_calls) == 0;
  ++st.calls;
  if (repartition) {
    std::vector<std::uint64_t> sum(up - 1, 0);
    for (const sparse_message& m : all) {
      for (std::size_t j = 1; j < up; ++j) {
        sum[j - 1] += m.indices.size() >= up ? m.indices[j * m.indices.size() / up] : n * j / up;
      }
    }
    st.bounds = {0};
    for (const std::uint64_t s : sum) {
      st.bounds.push_back(s / up);
    }
    st.bounds.push_back(n);
  }
  std::vector<float> sums(n, 0.0f);
  std::vector<bool> touched(n, false);
  for (const sparse_message& m : all) { // rank order
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      sums[m.indices[j]] += m.values[j];
      touched[m.indices[j]] = true;
    }
  }
  if (evaluate) {
    std::vector<float> magnitudes;
    for (std::size_t i = 0; i < n; ++i) {
      if (touched[i]) {
        magnitudes.push_back(std::abs(sums[i]));
      }
    }
    std::sort(magnitudes.begin(), magnitudes.end(), std::greater<>());
    st.threshold = magnitudes.size() < k ? 0.0f : magnitudes[k - 1];
  }
  reference_result out;
  out.evaluated = evaluate;
  std::vector<std::size_t> per_region(up, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (touched[i] && std::abs(sums[i]) >= st.threshold) {
      out.indices.push_back(static_cast<std::uint32_t>(i));
      out.values.push_back(sums[i]);
      const auto region = static_cast<std::size_t>(
          std::upper_bound(st.bounds.begin(), st.bounds.end(), i) - st.bounds.begin() - 1);
      ++per_region[region];
    }
  }
  const double selected = static_cast<double>(out.indices.size());
  st.reevaluate_next = selected * 1.25 < static_cast<double>(k) ||
                       selected > 1.25 * static_cast<double>(k); // the default tolerance
  // bytes: sizes; this rank's non-empty blocks to other regions; its selection to P - 1 ranks
  out.bytes_sent = 8 * (up - 1) + 16 * (up - 1);
  const sparse_message& mine = all[static_cast<std::size_t>(rank)];
  for (std::size_t j = 0; j < up; ++j) {
    const auto in_region = static_cast<std::size_t>(
        std::count_if(mine.indices.begin(), mine.indices.end(),
                      [&](std::uint32_t i) { return i >= st.bounds[j] && i < st.bounds[j + 1]; }));
    if (j != static_cast<std::size_t>(rank) && in_region != 0) {
      out.bytes_sent += wire_header_bytes + 8 * in_region;
    }
  }
  const std::size_t own = per_region[static_cast<std::size_t>(rank)];
  out.bytes_sent += own == 0 ? 0 : (up - 1) * (wire_header_bytes + 8 * own);
  out.bytes_sent +=
      (repartition ? 8 * (up - 1) * levels(p) : 0) + (evaluate ? 4096 * levels(p) : 0);
  return out;
}

} // namespace

TEST_CASE("oktopk: regions, reused threshold and sums as the reference, on every rank",
          "[oktopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 5000;
  const std::size_t k = 50;
  const mpi::oktopk_allreduce_options o{.indices = index_encoding::u32,
                                        .repartition_interval_calls = 3,
                                        .threshold_interval_calls = 4};
  mpi::oktopk_allreduce oktopk(comm, o);
  reference_state st;
  std::vector<float> residual(n, 0.0f);
  int by_rule = 0; // evaluations that the tolerance rule caused
  for (std::uint64_t round = 0; round < 8; ++round) {
    CAPTURE(round);
    // round 2: 3k values each, 10x larger (the reused threshold selects more); round 4
    // (evaluated): the same gradient on every rank; round 5: values 1000x smaller: the reused
    // threshold selects nothing, so round 6 evaluates again
    const float scale = round == 2 ? 10.0f : round == 5 ? 1e-3f : 1.0f;
    if (round == 2 || round == 5) {
      residual.assign(n, 0.0f);
    }
    std::vector<float> g = test::rank_values(n, round == 4 ? 0 : comm.rank(), 10 + round);
    for (float& v : g) {
      v *= scale;
    }
    exact_top_k local_top_k({.density = static_cast<double>(round == 2 ? 3 * k : k) / n});
    sparse_message local;
    local_top_k.compress_accumulate(residual, g, local);
    sparse_message global;
    oktopk(local, k, global);
    const reference_result expected = reference_call(gather(local), k, 3, 4, st);
    by_rule += expected.evaluated && round % 4 != 0 ? 1 : 0;
    CHECK(std::vector<std::uint64_t>(oktopk.boundaries().begin(), oktopk.boundaries().end()) ==
          st.bounds);
    CHECK(
        test::same_bits(std::vector<float>{oktopk.threshold()}, std::vector<float>{st.threshold}));
    CHECK(global.dense_length_elements == n);
    REQUIRE(global.indices == expected.indices);
    CHECK(test::same_bits(global.values, expected.values));
    CHECK(test::identical_on_all_ranks(global.values));
    CHECK(oktopk.selected() == expected.indices.size());
    CHECK(oktopk.bytes_sent() == expected.bytes_sent);
    CHECK(oktopk.threshold_evaluated() == expected.evaluated);
    if (expected.evaluated) { // P k selected values touch at least k elements
      CHECK(global.indices.size() >= k);
    }
    // error feedback on the global selection: each selected value is in a sum or back home
    const std::vector<float> before_return = residual;
    const std::size_t returned = mpi::return_unselected(residual, local, global);
    std::size_t in_g = 0;
    for (std::size_t j = 0; j < local.indices.size(); ++j) {
      const std::uint32_t i = local.indices[j];
      if (std::binary_search(expected.indices.begin(), expected.indices.end(), i)) {
        ++in_g;
        REQUIRE(residual[i] == before_return[i]); // sent
      } else {
        REQUIRE(residual[i] == before_return[i] + local.values[j]); // back
      }
    }
    CHECK(returned + in_g == local.nnz());
  }
  CHECK(by_rule >= 1);
}

TEST_CASE("oktopk: balanced selections cost cost::oktopk_bytes_sent", "[oktopk]") {
  // every rank selects 20 elements in each of P equal regions: the proposals are the region
  // starts, every region receives 20 P pairs and, with k = 20 P, the global selection is
  // everything, 20 elements per region
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const auto up = static_cast<std::size_t>(p);
  sparse_message local;
  local.clear(1000 * up);
  for (std::size_t j = 0; j < up; ++j) {
    for (std::uint32_t t = 0; t < 20; ++t) {
      const auto i = static_cast<std::uint32_t>(1000 * j + 10 * t);
      local.indices.push_back(i);
      local.values.push_back(static_cast<float>(1 + i) * static_cast<float>(comm.rank() + 1));
    }
  }
  mpi::oktopk_allreduce oktopk(comm, {.indices = index_encoding::u32});
  sparse_message global;
  const double k = 20.0 * p;
  oktopk(local, 20 * up, global);
  CHECK(global.indices == local.indices);
  CHECK(static_cast<double>(oktopk.bytes_sent()) ==
        cost::oktopk_bytes_sent(k, k, p, 8.0, true, true));
  oktopk(local, 20 * up, global); // regions and threshold reused
  CHECK_FALSE(oktopk.threshold_evaluated());
  CHECK(global.indices == local.indices);
  CHECK(static_cast<double>(oktopk.bytes_sent()) == cost::oktopk_bytes_sent(k, k, p));
  CHECK(oktopk.bytes_received() == oktopk.bytes_sent()); // symmetric
}

TEST_CASE("oktopk: bad arguments on any rank throw on every rank", "[oktopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  mpi::oktopk_allreduce oktopk(comm);
  sparse_message local;
  exact_top_k(0.1).compress(test::rank_values(100, comm.rank(), 3), local);
  sparse_message global;
  CHECK_THROWS_WITH(oktopk(local, 0, global), Contains("k 0 is outside [1, 100]"));
  // rank 0 alone passes a bad k: every rank throws, naming rank 0
  CHECK_THROWS_WITH(oktopk(local, comm.rank() == 0 ? 101 : 10, global),
                    Contains("rank 0's arguments are invalid"));
  if (comm.size() > 1) {
    CHECK_THROWS_WITH(oktopk(local, comm.rank() == 0 ? 11 : 10, global),
                      Contains("the ranks disagree"));
    // the last rank's message is malformed (indices not ascending)
    sparse_message bad = local;
    if (comm.rank() == comm.size() - 1) {
      std::swap(bad.indices[0], bad.indices[1]);
    }
    CHECK_THROWS_WITH(oktopk(bad, 10, global),
                      Contains("rank " + std::to_string(comm.size() - 1) + "'s arguments"));
  }
  oktopk(local, 10, global); // and the next call works
  CHECK(global.indices.size() >= 10);
  CHECK(test::identical_on_all_ranks(global.values));
  CHECK_THROWS_WITH(mpi::oktopk_allreduce(comm, {.threshold_interval_calls = 0}),
                    Contains("threshold_interval_calls 0 is below 1"));
  CHECK_THROWS_WITH(mpi::oktopk_allreduce(comm, {.repartition_interval_calls = -2}),
                    Contains("repartition_interval_calls -2 is below 1"));
  CHECK_THROWS_WITH(mpi::oktopk_allreduce(comm, {.threshold_tolerance = 0.5}),
                    Contains("threshold_tolerance 0.5 is below 1"));
}

} // namespace mpi_oktopk_allreduce_test
