// SPDX-License-Identifier: Apache-2.0
// coded_sparse_allreduce (CSSGD's coded exchange of top-k sparse part gradients on the agreed
// index union): for every r in 1..P-1, both codings and both variants, on overlapping and
// disjoint index sets, empty parts, a part with every index (sparse and dense layout) and
// d in {0, 1, 7, 5000}, the result's indices are the union of all parts' indices, its values
// equal the dense coded_allreduce run on the densified parts bit for bit and a reference every
// rank computes locally (fixed point: the decoded integer sum; XOR: the float sum in part order),
// identical on every rank; fixed point within its reported bound of the exact sum; bytes and
// messages equal coded::coded_sparse_load. Error feedback with exact_top_k conserves every part.
// Faults every rank reports together: different dense lengths, different r, malformed arguments
// of one rank, owners passing different messages. Collective: every rank runs every test. With
// one rank there is no valid r, and the tests check the rejection.
#include <gradcomp/coded.hpp>
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "coded_test_util.hpp"
#include "mpi_test_util.hpp"

namespace mpi_coded_sparse_test {

using namespace gradcomp;
using namespace gradcomp::test::coded_helpers;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::same_bits;

namespace {

// Which indices the parts select.
enum class selection {
  overlapping, // every part picks from the same first third of the indices
  disjoint,    // part t picks among the indices i with i % C(P, r) == t
  empty_parts, // every other part selects nothing
  none,        // no part selects anything: U is empty
  full_sparse, // part 0 selects every index (sparse layout), the others 5 %
  full_dense,  // part 0 is a dense-layout message, the others 5 %
};

constexpr selection all_selections[] = {selection::overlapping, selection::disjoint,
                                        selection::empty_parts, selection::none,
                                        selection::full_sparse, selection::full_dense};

// (beside coded_helpers' name() overloads, which this one would hide)
using gradcomp::test::coded_helpers::name;

const char* name(selection s) {
  switch (s) {
  case selection::overlapping:
    return "overlapping";
  case selection::disjoint:
    return "disjoint";
  case selection::empty_parts:
    return "empty_parts";
  case selection::none:
    return "none";
  case selection::full_sparse:
    return "full_sparse";
  case selection::full_dense:
    return "full_dense";
  }
  return "?";
}

// Part t's message: values from part_gradient(t, d, seed) at the indices `how` selects, chosen
// from (t, seed) alone, so every rank can compute every part.
sparse_message
part_message(std::size_t t, std::size_t parts, std::size_t d, std::uint64_t seed, selection how) {
  const std::vector<float> g = part_gradient(t, d, seed);
  std::mt19937_64 rng(seed * 7919 + t);
  std::bernoulli_distribution coin(0.3), rare(0.05);
  sparse_message m;
  m.dense_length_elements = d;
  if (how == selection::full_dense && t == 0) {
    m.dense = true;
    m.values = g;
    return m;
  }
  for (std::size_t i = 0; i < d; ++i) {
    bool keep = false;
    switch (how) {
    case selection::overlapping:
      keep = i < (d + 2) / 3 && coin(rng);
      break;
    case selection::disjoint:
      keep = i % parts == t && coin(rng);
      break;
    case selection::empty_parts:
      keep = t % 2 == 0 && coin(rng);
      break;
    case selection::none:
      break;
    case selection::full_sparse:
    case selection::full_dense:
      keep = t == 0 || rare(rng);
      break;
    }
    if (keep) {
      m.indices.push_back(static_cast<std::uint32_t>(i));
      m.values.push_back(g[i]);
    }
  }
  return m;
}

std::vector<sparse_message>
all_messages(const coded::placement& p, std::size_t d, std::uint64_t seed, selection how) {
  std::vector<sparse_message> m;
  for (std::size_t t = 0; t < p.part_count(); ++t) {
    m.push_back(part_message(t, p.part_count(), d, seed, how));
  }
  return m;
}

std::vector<sparse_message>
owned_messages(const coded::placement& p, const std::vector<sparse_message>& m, int rank) {
  std::vector<sparse_message> mine;
  for (const std::size_t t : p.parts_of(rank)) {
    mine.push_back(m[t]);
  }
  return mine;
}

std::vector<std::uint32_t> selected(const sparse_message& m) {
  std::vector<std::uint32_t> s;
  coded::append_selected_indices(m, s);
  return s;
}

// The union of every part's indices, by std::set_union.
std::vector<std::uint32_t> union_reference(const std::vector<sparse_message>& m) {
  std::vector<std::uint32_t> all;
  for (const sparse_message& part : m) {
    const std::vector<std::uint32_t> s = selected(part);
    std::vector<std::uint32_t> merged;
    std::set_union(all.begin(), all.end(), s.begin(), s.end(), std::back_inserter(merged));
    all = std::move(merged);
  }
  return all;
}

// What each rank contributes: the size of the union of its contributed parts' indices.
std::vector<std::uint64_t> contributions_reference(const coded::placement& p,
                                                   const std::vector<sparse_message>& m) {
  const std::vector<int> given = coded::union_contributors(p);
  std::vector<std::uint64_t> c;
  for (int k = 0; k < p.ranks(); ++k) {
    std::vector<sparse_message> mine;
    for (std::size_t t = 0; t < p.part_count(); ++t) {
      if (given[t] == k) {
        mine.push_back(m[t]);
      }
    }
    c.push_back(union_reference(mine).size());
  }
  return c;
}

std::vector<std::vector<float>> densified(const std::vector<sparse_message>& m, std::size_t d) {
  std::vector<std::vector<float>> g;
  for (const sparse_message& part : m) {
    g.emplace_back(d);
    decompress(part, g.back());
  }
  return g;
}

std::vector<float> as_floats(const std::vector<std::uint32_t>& indices) {
  std::vector<float> f;
  for (const std::uint32_t i : indices) {
    f.push_back(std::bit_cast<float>(i));
  }
  return f;
}

} // namespace

TEST_CASE("coded_sparse_allreduce equals the dense coded_allreduce on the densified parts",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    CHECK_THROWS_WITH(mpi::coded_sparse_allreduce(comm, {.redundancy = 1}),
                      Catch::Contains("redundancy r = 1 is not below the rank count P = 1"));
    return;
  }
  const int p = comm.size();
  gradcomp::test::identity_batch sums; // compared across ranks once, at the end
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    for (const std::size_t d : std::initializer_list<std::size_t>{0, 1, 7, 5000}) {
      for (const selection how : all_selections) {
        const std::uint64_t seed = d + 31 * static_cast<std::size_t>(r);
        const std::vector<sparse_message> m = all_messages(layout, d, seed, how);
        const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
        const std::vector<std::uint32_t> u = union_reference(m);
        const std::vector<std::uint64_t> c = contributions_reference(layout, m);
        const std::vector<std::vector<float>> g = densified(m, d);
        const std::vector<std::span<const float>> dense_mine = owned_parts(layout, g, comm.rank());
        for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
          const std::vector<float> expected = coding == mpi::packet_coding::fixed_point
                                                  ? fixed_point_reference(g, d)
                                                  : float_reference(g, d);
          for (const auto variant : both_variants) {
            CAPTURE(p, r, d, name(how), name(coding), name(variant));
            const mpi::coded_allreduce_options o{
                .redundancy = r, .coding = coding, .variant = variant};
            mpi::coded_sparse_allreduce op(comm, o);
            sparse_message sum;
            sum.indices = {1, 2, 3}; // replaced
            op(std::span<const sparse_message>(mine), sum);
            REQUIRE_NOTHROW(sum.validate());
            CHECK(sum.indices == u);
            CHECK(op.union_elements() == u.size());
            CHECK(sum.dense_length_elements == d);
            CHECK_FALSE(sum.dense);
            std::vector<float> from_sparse(d, -1.0f);
            decompress(sum, from_sparse);
            // the dense exchange of the densified parts, bit for bit
            mpi::coded_allreduce dense(comm, o);
            std::vector<float> dense_sum(d, -1.0f);
            dense(std::span<const std::span<const float>>(dense_mine), std::span<float>(dense_sum));
            CHECK(same_bits(from_sparse, dense_sum));
            CHECK(same_bits(from_sparse, expected));
            CHECK(op.scale() == dense.scale());
            const std::string combination = gradcomp::test::describe(
                "r ", r, ", d ", d, ", ", name(how), ", ", name(coding), ", ", name(variant));
            sums.add(sum.values, "values of " + combination);
            sums.add(as_floats(sum.indices), "indices of " + combination);
            // bytes and messages: the cost model's, from the contributions computed locally
            CHECK(op.contributed_elements() == c);
            const coded::exchange_load load = coded::coded_sparse_load(
                p, r, u.size(), c, 4, coded::delivery::point_to_point, variant, comm.rank());
            CHECK(static_cast<double>(op.bytes_sent()) == load.sent_bytes);
            CHECK(static_cast<double>(op.bytes_received()) == load.received_bytes);
            CHECK(op.messages_sent() == load.sent_messages);
            CHECK(op.messages_received() == load.received_messages);
            const coded::exchange_load agreement = coded::union_agreement_load(c, comm.rank());
            CHECK(static_cast<double>(op.union_bytes_sent()) == agreement.sent_bytes);
            CHECK(static_cast<double>(op.union_bytes_received()) == agreement.received_bytes);
          }
        }
      }
    }
  }
  sums.check();
}

TEST_CASE("coded_sparse_allreduce fixed point stays within its reported bound of the exact sum",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const int p = comm.size();
  const std::size_t d = 5000;
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    const std::vector<sparse_message> m = all_messages(layout, d, 99, selection::overlapping);
    const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
    const std::vector<std::vector<float>> g = densified(m, d);
    mpi::coded_sparse_allreduce op(comm, {.redundancy = r});
    sparse_message sum;
    op(std::span<const sparse_message>(mine), sum);
    REQUIRE(op.quantisation_bound() > 0.0);
    CHECK(op.quantisation_bound() == static_cast<double>(layout.part_count()) * 0.5 / op.scale());
    double worst = 0.0;
    for (std::size_t j = 0; j < sum.indices.size(); ++j) {
      double exact = 0.0;
      for (const std::vector<float>& part : g) {
        exact += part[sum.indices[j]];
      }
      const double eps = std::numeric_limits<float>::epsilon();
      const double bound = op.quantisation_bound() * (1.0 + eps) + std::abs(exact) * eps;
      worst = std::max(worst, std::abs(static_cast<double>(sum.values[j]) - exact) / bound);
    }
    CAPTURE(p, r, op.scale());
    CHECK(worst <= 1.0);
    mpi::coded_sparse_allreduce xor_op(comm,
                                       {.redundancy = r, .coding = mpi::packet_coding::xor_bits});
    xor_op(std::span<const sparse_message>(mine), sum);
    CHECK(xor_op.quantisation_bound() == 0.0);
  }
}

TEST_CASE("coded_sparse_allreduce with exact_top_k error feedback carries every selected value",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const int p = comm.size();
  const std::size_t d = 2000;
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    // every rank runs the error feedback of every part (the owners' states are identical)
    std::vector<error_feedback<exact_top_k>> feedback;
    for (std::size_t t = 0; t < layout.part_count(); ++t) {
      feedback.emplace_back(d, exact_top_k(0.01));
    }
    mpi::coded_sparse_allreduce op(comm, {.redundancy = r, .coding = mpi::packet_coding::xor_bits});
    for (std::uint64_t step = 0; step < 3; ++step) {
      std::vector<sparse_message> m(layout.part_count());
      std::vector<std::vector<float>> accumulated; // gradient + residual before the step
      for (std::size_t t = 0; t < layout.part_count(); ++t) {
        const std::vector<float> grad = part_gradient(t, d, 50 + step);
        std::vector<float> acc(d);
        for (std::size_t i = 0; i < d; ++i) {
          acc[i] = grad[i] + feedback[t].residual()[i];
        }
        accumulated.push_back(acc);
        (void)feedback[t].compress(grad, m[t]);
      }
      const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
      sparse_message sum;
      op(std::span<const sparse_message>(mine), sum);
      const std::vector<std::vector<float>> g = densified(m, d);
      CAPTURE(p, r, step);
      // conservation: what was sent plus what stays in the residual is what was accumulated
      for (std::size_t t = 0; t < layout.part_count(); ++t) {
        std::vector<float> back(d);
        for (std::size_t i = 0; i < d; ++i) {
          back[i] = g[t][i] + feedback[t].residual()[i];
        }
        CHECK(same_bits(back, accumulated[t]));
      }
      // and the exchange delivered exactly the selected values, summed in part order
      std::vector<float> from_sparse(d);
      decompress(sum, from_sparse);
      CHECK(same_bits(from_sparse, float_reference(g, d)));
      CHECK(sum.indices == union_reference(m));
    }
  }
}

TEST_CASE("coded_sparse_allreduce progresses through test() and is reusable", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const int p = comm.size();
  const int r = p / 2;
  const coded::placement layout(p, r);
  const std::size_t d = 50000;
  mpi::coded_sparse_allreduce op(comm, {.redundancy = r, .max_requests = 4});
  for (const std::uint64_t seed : {1u, 2u}) {
    const std::vector<sparse_message> m = all_messages(layout, d, seed, selection::overlapping);
    const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
    sparse_message sum;
    op.start(mine, sum);
    while (!op.test()) {
      std::this_thread::yield();
    }
    std::vector<float> from_sparse(d);
    decompress(sum, from_sparse);
    CAPTURE(p, r, seed);
    CHECK(same_bits(from_sparse, fixed_point_reference(densified(m, d), d)));
    CHECK(identical_on_all_ranks(sum.values));
  }
}

TEST_CASE("coded_sparse_allreduce rejects different dense lengths on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const coded::placement layout(comm.size(), 1);
  mpi::coded_sparse_allreduce op(comm, {.redundancy = 1});
  const std::size_t d = comm.rank() == 0 ? 11 : 10;
  const std::vector<sparse_message> m = all_messages(layout, d, 8, selection::overlapping);
  const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
  sparse_message sum;
  REQUIRE_THROWS_WITH(op(std::span<const sparse_message>(mine), sum),
                      Catch::Contains("different dense lengths (from 10 to 11 elements)"));
  // usable again afterwards
  const std::vector<sparse_message> same = all_messages(layout, 10, 8, selection::overlapping);
  const std::vector<sparse_message> again = owned_messages(layout, same, comm.rank());
  op(std::span<const sparse_message>(again), sum);
  std::vector<float> from_sparse(10);
  decompress(sum, from_sparse);
  CHECK(same_bits(from_sparse, fixed_point_reference(densified(same, 10), 10)));
}

TEST_CASE("coded_sparse_allreduce rejects a different redundancy on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 3) {
    return;
  }
  const int r = comm.rank() == 0 ? 1 : 2;
  const coded::placement layout(comm.size(), r);
  mpi::coded_sparse_allreduce op(comm, {.redundancy = r});
  const std::vector<sparse_message> m = all_messages(layout, 20, 3, selection::overlapping);
  const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
  sparse_message sum;
  REQUIRE_THROWS_AS(op(std::span<const sparse_message>(mine), sum), mpi::mpi_error);
  CHECK_THROWS_WITH(op(std::span<const sparse_message>(mine), sum),
                    Catch::Contains("different options: redundancy from 1 to 2"));
  // the communicator is usable afterwards
  const coded::placement agreed(comm.size(), 1);
  mpi::coded_sparse_allreduce agreeing(comm, {.redundancy = 1});
  const std::vector<sparse_message> m1 = all_messages(agreed, 20, 3, selection::overlapping);
  const std::vector<sparse_message> mine1 = owned_messages(agreed, m1, comm.rank());
  agreeing(std::span<const sparse_message>(mine1), sum);
  std::vector<float> from_sparse(20);
  decompress(sum, from_sparse);
  CHECK(same_bits(from_sparse, fixed_point_reference(densified(m1, 20), 20)));
}

TEST_CASE("coded_sparse_allreduce rejects a different tag_base on every rank, before the union's "
          "ring allgather",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const coded::placement layout(comm.size(), 1);
  const int tag_base = comm.rank() == comm.size() - 1 ? 100 : 0;
  mpi::coded_sparse_allreduce op(comm, {.redundancy = 1, .tag_base = tag_base});
  const std::vector<sparse_message> m = all_messages(layout, 20, 3, selection::overlapping);
  const std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
  sparse_message sum;
  CHECK_THROWS_WITH(op(std::span<const sparse_message>(mine), sum),
                    Catch::Contains("different options: tag_base 0 on rank 0, 100 on rank " +
                                    std::to_string(comm.size() - 1)));
  // the failed header round leaves nothing behind: an agreeing object works afterwards
  mpi::coded_sparse_allreduce agreeing(comm, {.redundancy = 1});
  agreeing(std::span<const sparse_message>(mine), sum);
  std::vector<float> from_sparse(20);
  decompress(sum, from_sparse);
  CHECK(same_bits(from_sparse, fixed_point_reference(densified(m, 20), 20)));
}

TEST_CASE("coded_sparse_allreduce rejects malformed arguments of one rank on every rank",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return;
  }
  const int culprit = comm.size() - 1;
  const coded::placement layout(comm.size(), 1);
  mpi::coded_sparse_allreduce op(comm, {.redundancy = 1});
  const std::size_t d = 16;
  const std::vector<sparse_message> m = all_messages(layout, d, 4, selection::full_sparse);
  std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
  sparse_message sum;
  const char* expected = "";
  SECTION("a missing message") {
    if (comm.rank() == culprit) {
      mine.pop_back();
    }
    expected = "passed 0 part messages, but it owns 1 parts";
  }
  SECTION("indices not ascending") {
    if (comm.rank() == culprit) {
      mine[0].indices = {3, 2};
      mine[0].values = {1.0f, 2.0f};
    }
    expected = "is invalid";
  }
  SECTION("an index beyond the dense length") {
    if (comm.rank() == culprit) {
      mine[0].indices = {2, 16};
      mine[0].values = {1.0f, 2.0f};
    }
    expected = "is not below the dense length 16";
  }
  if (comm.rank() == culprit) {
    REQUIRE_THROWS_AS(op(std::span<const sparse_message>(mine), sum), std::invalid_argument);
    CHECK_THROWS_WITH(op(std::span<const sparse_message>(mine), sum), Catch::Contains(expected));
  } else {
    REQUIRE_THROWS_AS(op(std::span<const sparse_message>(mine), sum), mpi::mpi_error);
    CHECK_THROWS_WITH(
        op(std::span<const sparse_message>(mine), sum),
        Catch::Contains("rank " + std::to_string(culprit) + " passed malformed arguments"));
  }
}

TEST_CASE("coded_sparse_allreduce rejects owners that pass different messages on every rank",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 3) {
    return; // r >= 2 needs P >= 3
  }
  const coded::placement layout(comm.size(), 2);
  mpi::coded_sparse_allreduce op(comm, {.redundancy = 2});
  const std::size_t d = 12;
  const std::vector<sparse_message> m = all_messages(layout, d, 4, selection::none);
  // part 0's owner that does not contribute its indices selects index 5 anyway
  const std::span<const int> owners = layout.owners(0);
  const int contributor = op.contributors()[0];
  const int other = owners[0] == contributor ? owners[1] : owners[0];
  std::vector<sparse_message> mine = owned_messages(layout, m, comm.rank());
  if (comm.rank() == other) {
    mine[0].indices = {5};
    mine[0].values = {1.0f};
  }
  sparse_message sum;
  if (comm.rank() == other) {
    REQUIRE_THROWS_WITH(op(std::span<const sparse_message>(mine), sum),
                        Catch::Contains("select 1 indices outside the agreed union"));
  } else {
    REQUIRE_THROWS_WITH(op(std::span<const sparse_message>(mine), sum),
                        Catch::Contains("another rank passed malformed arguments"));
  }
  // usable again afterwards
  const std::vector<sparse_message> good = owned_messages(layout, m, comm.rank());
  op(std::span<const sparse_message>(good), sum);
  CHECK(sum.indices.empty());
  CHECK(sum.dense_length_elements == d);
}

TEST_CASE("coded_sparse_allreduce rejects a bad redundancy", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  CHECK_THROWS_WITH(mpi::coded_sparse_allreduce(comm, {.redundancy = 0}),
                    Catch::Contains("redundancy r = 0 is below 1"));
  CHECK_THROWS_WITH(mpi::coded_sparse_allreduce(comm, {.redundancy = p}),
                    Catch::Contains("is not below the rank count"));
}

} // namespace mpi_coded_sparse_test
