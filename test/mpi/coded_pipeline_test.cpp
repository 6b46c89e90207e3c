// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline with the coded multi-part transports (coded_dense_exchange,
// coded_sparse_exchange): every rank reports the gradients of its C(P-1, r-1) parts, each part's
// gradient a function of (part, layer, iteration) alone, so that the owners of a part agree and
// every rank can compute the reference for all C(P, r) parts: one error feedback per
// (part, layer), each group's part messages densified, summed exactly as the coded exchange
// sums (fixed point with the agreed scale, or floats in part order for XOR), divided by C(P, r).
// The averages must equal it bit for bit and be identical on every rank; bytes must equal the
// cost model; a part whose owners report different gradients makes every rank throw.
#include <gradcomp/coded.hpp>
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
#include "coded_test_util.hpp"
#include "mpi_test_util.hpp"

namespace mpi_coded_pipeline_test {

using gradcomp::test::same_bits;

using namespace gradcomp;
namespace ch = gradcomp::test::coded_helpers;

namespace {

const std::vector<std::size_t> sizes{300, 17, 1000, 1, 64, 5};
const schedule::grouping groups{{0, 2}, {2, 3}, {3, 6}};
constexpr int iterations = 3;

// Part t's gradient of `layer` at `iteration`: the same on every owner of t.
std::vector<float> part_gradient(std::size_t part, std::size_t layer, int iteration) {
  return ch::part_gradient(part, sizes[layer],
                           1000 * static_cast<std::uint64_t>(iteration) + 10 * layer + 1);
}

// Forward layers [first, last] of group g.
std::pair<std::size_t, std::size_t> forward_range(const schedule::layer_group& g) {
  return {sizes.size() - g.end, sizes.size() - 1 - g.begin};
}

// `comm`: the test case's (the exchange and the pipeline are new); the averages go to `averages`,
// which the test case compares across ranks once, under `label` (the compressor) and o.
template <class Compressor, class Exchange>
void check_coded_pipeline(const mpi::communicator& comm,
                          const Compressor& prototype,
                          mpi::coded_allreduce_options o,
                          test::identity_batch& averages,
                          const char* label) {
  const int rank = comm.rank();
  Exchange exchange(comm, o);
  const coded::placement& layout = exchange.placement();
  const std::span<const std::size_t> owned = layout.parts_of(rank);
  pipeline<Compressor, Exchange> p(sizes, pipeline_policy::fixed_grouping{groups}, prototype,
                                   exchange);
  REQUIRE(p.parts() == layout.parts_per_rank());
  // the reference: every part's error feedback per layer, on every rank
  std::vector<std::vector<error_feedback<Compressor>>> reference(layout.part_count());
  for (auto& part : reference) {
    for (const std::size_t n : sizes) {
      part.emplace_back(n, prototype);
    }
  }
  sparse_message m;
  for (int it = 0; it < iterations; ++it) {
    // one backward per owned part, layers in backward order (as autograd delivers)
    for (std::size_t k = 0; k < owned.size(); ++k) {
      p.begin_backward();
      for (std::size_t i = sizes.size(); i-- > 0;) {
        p.gradient_ready(k, i, part_gradient(owned[k], i, it));
      }
    }
    p.finish();
    // reference: per layer, every part's decompressed message
    std::vector<std::vector<std::vector<float>>> sent(layout.part_count());
    for (std::size_t t = 0; t < layout.part_count(); ++t) {
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        reference[t][l].compress(part_gradient(t, l, it), m);
        sent[t].emplace_back(sizes[l]);
        decompress(m, sent[t].back());
      }
    }
    double expected_sent = 0.0;
    for (const schedule::layer_group& g : groups) {
      const auto [first, last] = forward_range(g);
      std::vector<std::vector<float>> group_parts(layout.part_count());
      for (std::size_t t = 0; t < layout.part_count(); ++t) {
        for (std::size_t l = first; l <= last; ++l) {
          group_parts[t].insert(group_parts[t].end(), sent[t][l].begin(), sent[t][l].end());
        }
      }
      const std::size_t d = group_parts[0].size();
      std::vector<float> expected = o.coding == mpi::packet_coding::fixed_point
                                        ? ch::fixed_point_reference(group_parts, d)
                                        : ch::float_reference(group_parts, d);
      for (float& v : expected) {
        v /= static_cast<float>(layout.part_count());
      }
      std::size_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        CAPTURE(it, l);
        REQUIRE(
            same_bits(p.averaged(l), std::span<const float>(expected).subspan(offset, sizes[l])));
        averages.add(p.averaged(l),
                     test::describe(label, ", r ", o.redundancy, ", ", ch::name(o.coding), ", ",
                                    ch::name(o.variant), ", iteration ", it, ", layer ", l));
        offset += sizes[l];
      }
      const int ranks = comm.size();
      expected_sent += o.variant == mpi::coded_variant::full_recovery
                           ? coded::coded_exchange_load(ranks, o.redundancy, d, 4,
                                                        coded::delivery::point_to_point)
                                 .sent_bytes
                           : coded::coded_reduce_scatter_load(ranks, o.redundancy, d, 4,
                                                              coded::delivery::point_to_point, rank)
                                 .sent_bytes;
    }
    const auto& stats = p.last_stats();
    CHECK(stats.bytes_reported);
    CHECK(stats.numel ==
          std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}) * owned.size());
    if constexpr (std::is_same_v<Exchange, mpi::coded_dense_exchange>) {
      CHECK(static_cast<double>(stats.bytes_sent) == expected_sent);
    } else {
      CHECK(stats.bytes_sent > 0);
    }
  }
}

} // namespace

TEST_CASE("pipeline with coded_dense_exchange averages all parts like the exact coded sum",
          "[mpi][coded][pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (ch::single_rank_rejects(comm)) {
    CHECK_THROWS_WITH(mpi::coded_dense_exchange(comm, {.redundancy = 1}),
                      Catch::Contains("redundancy r = 1 is not below the rank count P = 1"));
    return;
  }
  test::identity_batch averages; // compared across ranks once, at the end
  for (int r = 1; r < comm.size(); ++r) {
    for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
      for (const auto variant : ch::both_variants) {
        CAPTURE(r, ch::name(coding), ch::name(variant));
        const mpi::coded_allreduce_options o{.redundancy = r, .coding = coding, .variant = variant};
        check_coded_pipeline<dense, mpi::coded_dense_exchange>(comm, dense(), o, averages, "dense");
        check_coded_pipeline<exact_top_k, mpi::coded_dense_exchange>(comm, exact_top_k(0.1), o,
                                                                     averages, "exact_top_k");
      }
    }
  }
  averages.check();
}

TEST_CASE("pipeline with coded_sparse_exchange averages all parts like the exact coded sum",
          "[mpi][coded][pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (ch::single_rank_rejects(comm)) {
    return;
  }
  test::identity_batch averages; // compared across ranks once, at the end
  for (int r = 1; r < comm.size(); ++r) {
    for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
      CAPTURE(r, ch::name(coding));
      const mpi::coded_allreduce_options o{.redundancy = r, .coding = coding};
      check_coded_pipeline<exact_top_k, mpi::coded_sparse_exchange>(comm, exact_top_k(0.1), o,
                                                                    averages, "exact_top_k");
      check_coded_pipeline<reused_threshold, mpi::coded_sparse_exchange>(
          comm, reused_threshold({.density = 0.05, .interval = 2}), o, averages,
          "reused_threshold");
    }
  }
  averages.check();
}

TEST_CASE("pipeline with coded_sparse_exchange throws on every rank when a part's owners differ",
          "[mpi][coded][pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 3) {
    return; // r >= 2 needs P >= 3
  }
  const int rank = comm.rank();
  mpi::coded_sparse_exchange exchange(comm, {.redundancy = 2});
  const coded::placement& layout = exchange.placement();
  const std::span<const std::size_t> owned = layout.parts_of(rank);
  // part 0's owner that does not contribute its indices to the union reports a different
  // gradient: layer 2 gets a huge value at an index no part selects, so its top-k holds an
  // index outside the union
  const int contributor = exchange.exchange().contributors()[0];
  const std::span<const int> owners = layout.owners(0);
  const int deviant = owners[0] == contributor ? owners[1] : owners[0];
  constexpr std::size_t layer = 2;
  std::vector<bool> selected(sizes[layer], false);
  for (std::size_t t = 0; t < layout.part_count(); ++t) {
    error_feedback<exact_top_k> fresh(sizes[layer], exact_top_k(0.1));
    sparse_message m;
    fresh.compress(part_gradient(t, layer, 0), m);
    for (const std::uint32_t i : m.indices) {
      selected[i] = true;
    }
  }
  const auto outside = static_cast<std::size_t>(std::find(selected.begin(), selected.end(), false) -
                                                selected.begin());
  REQUIRE(outside < sizes[layer]);
  pipeline<exact_top_k, mpi::coded_sparse_exchange> p(
      sizes, pipeline_policy::fixed_grouping{schedule::single(sizes.size())}, exact_top_k(0.1),
      exchange);
  for (std::size_t k = 0; k < owned.size(); ++k) {
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      std::vector<float> g = part_gradient(owned[k], l, 0);
      if (rank == deviant && owned[k] == 0 && l == layer) {
        g[outside] = 1e6f;
      }
      p.gradient_ready(k, l, g);
    }
  }
  if (rank == deviant) {
    CHECK_THROWS_AS(p.finish(), std::invalid_argument);
  } else {
    CHECK_THROWS_AS(p.finish(), mpi::mpi_error);
  }
}

TEST_CASE("coded_dense_exchange names a malformed part on its rank and fails every rank",
          "[mpi][coded][pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  mpi::coded_dense_exchange exchange(comm, {.redundancy = 1});
  REQUIRE(exchange.parts_per_rank() == 1);
  std::vector<float> average(10, 0.0f);
  sparse_message part;
  part.clear(comm.rank() == 0 ? 11 : 10); // rank 0's part has the wrong dense length
  part.dense = true;
  part.values.assign(static_cast<std::size_t>(part.dense_length_elements), 1.0f);
  exchange.start(std::span<const sparse_message>(&part, 1), average);
  if (comm.rank() == 0) {
    CHECK_THROWS_WITH(exchange.wait(), Catch::Contains("coded_dense_exchange: part message 0") &&
                                           Catch::Contains("dense length 11"));
  } else {
    CHECK_THROWS_AS(exchange.wait(), mpi::mpi_error);
  }
  // usable again afterwards
  part.clear(10);
  part.dense = true;
  part.values.assign(10, 1.0f);
  exchange.start(std::span<const sparse_message>(&part, 1), average);
  exchange.wait();
  CHECK(std::all_of(average.begin(), average.end(), [](float v) { return v == 1.0f; }));
}

} // namespace mpi_coded_pipeline_test
