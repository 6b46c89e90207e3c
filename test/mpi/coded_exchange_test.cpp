// SPDX-License-Identifier: Apache-2.0
// coded_allreduce (CSSGD's coded multicast exchange): for every r in 1..P-1, both codings, both
// schedules and several windows, the result equals a reference every rank computes locally
// from all parts' gradients (fixed point: the decoded exact integer sum of the encoded parts;
// XOR: the float sum in part order), bit for bit and identical on every rank; byte and message
// counts equal the cost model's; nonblocking progress; and faults (different lengths,
// malformed arguments, NaN) that every rank reports (bad options, and options that differ
// between ranks: test/mpi/coded_allreduce_options_test.cpp). The reduce-scatter form
// (coded_variant::reduce_scatter) against the full form bit for bit, against MPI_Allreduce within
// the quantisation bound, with its own byte counts. Collective: every rank runs every test. With
// one rank there is no valid r, and the tests check the rejection.
#include <gradcomp/coded.hpp>
#include <gradcomp/mpi.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "coded_test_util.hpp"
#include "mpi_test_util.hpp"

namespace mpi_coded_exchange_test {

using gradcomp::test::same_bits;
using namespace gradcomp::test::coded_helpers;

using namespace gradcomp;
using gradcomp::test::describe;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::world_rank;
using gradcomp::test::world_size;

TEST_CASE("coded_allreduce sums every part bit for bit for every r, coding and schedule",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  gradcomp::test::identity_batch sums; // compared across ranks once, at the end
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    for (const std::size_t d : std::initializer_list<std::size_t>{0, 1, 2, 3, 7, 1000, 4099}) {
      const std::vector<std::vector<float>> g =
          all_gradients(layout, d, d + 31 * static_cast<std::size_t>(r));
      const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
      const std::vector<float> fixed_expected = fixed_point_reference(g, d);
      const std::vector<float> float_expected = float_reference(g, d);
      const coded::exchange_load load =
          coded::coded_exchange_load(p, r, d, 4, coded::delivery::point_to_point);
      for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
        for (const auto schedule :
             {mpi::coded_schedule::concurrent, mpi::coded_schedule::serialized}) {
          for (const std::size_t window : std::initializer_list<std::size_t>{2, 3, 32}) {
            for (const bool uncoded : {false, true}) {
              CAPTURE(p, r, d, name(coding), name(schedule), window, uncoded);
              mpi::coded_allreduce op(comm, {.redundancy = r,
                                             .coding = coding,
                                             .schedule = schedule,
                                             .uncoded = uncoded,
                                             .max_requests = window});
              REQUIRE(op.placement().parts_of(comm.rank()).size() == mine.size());
              std::vector<float> sum(d, -1.0f);
              op(std::span<const std::span<const float>>(mine), std::span<float>(sum));
              CHECK(same_bits(sum, coding == mpi::packet_coding::fixed_point ? fixed_expected
                                                                             : float_expected));
              sums.add(sum, describe("r ", r, ", d ", d, ", ", name(coding), ", ", name(schedule),
                                     ", window ", window, ", uncoded ", uncoded));
              CHECK(static_cast<double>(op.bytes_sent()) == load.sent_bytes);
              CHECK(static_cast<double>(op.bytes_received()) == load.received_bytes);
              CHECK(op.messages_sent() == load.sent_messages);
              CHECK(op.messages_received() == load.received_messages);
              CHECK((op.scale() > 0.0) == (coding == mpi::packet_coding::fixed_point));
              if (uncoded) { // the uncoded baseline's model: slices padded to ceil(d / r)
                const coded::exchange_load plain = coded::uncoded_exchange_load(p, r, d, 4);
                CHECK(static_cast<double>(op.bytes_sent()) == plain.sent_bytes);
                CHECK(op.messages_sent() == plain.sent_messages);
                if (d % static_cast<std::size_t>(r) == 0) {
                  CHECK(static_cast<double>(op.bytes_received()) == plain.received_bytes);
                }
              }
            }
          }
        }
      }
    }
  }
  sums.check();
}

TEST_CASE("coded_allreduce fixed point stays within the quantisation bound of the float sum",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const std::size_t d = 5000;
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    const std::vector<std::vector<float>> g = all_gradients(layout, d, 99);
    const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
    mpi::coded_allreduce op(comm, {.redundancy = r});
    std::vector<float> sum(d);
    op(std::span<const std::span<const float>>(mine), std::span<float>(sum));
    // |decoded - exact| <= C(P, r) 0.5 / scale, plus the rounding of the result to float
    double worst = 0.0;
    for (std::size_t i = 0; i < d; ++i) {
      double exact = 0.0;
      for (const std::vector<float>& part : g) {
        exact += part[i];
      }
      const double eps = std::numeric_limits<float>::epsilon();
      const double bound =
          static_cast<double>(layout.part_count()) * 0.5 / op.scale() * (1.0 + eps) +
          std::abs(exact) * eps;
      worst = std::max(worst, std::abs(static_cast<double>(sum[i]) - exact) / bound);
    }
    CAPTURE(p, r, op.scale());
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("coded_allreduce shares one tag between all groups and still matches every packet",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const std::size_t d = 333;
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    const std::vector<std::vector<float>> g = all_gradients(layout, d, 5);
    const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
    for (const int tag_range : {1, 2}) {
      for (const auto schedule :
           {mpi::coded_schedule::concurrent, mpi::coded_schedule::serialized}) {
        for (const auto variant : both_variants) { // reduce_scatter: the allgather shares tag 7
          CAPTURE(p, r, tag_range, name(schedule), name(variant));
          mpi::coded_allreduce op(comm, {.redundancy = r,
                                         .coding = mpi::packet_coding::xor_bits,
                                         .schedule = schedule,
                                         .variant = variant,
                                         .tag_base = 7,
                                         .tag_range = tag_range,
                                         .max_requests = 4});
          std::vector<float> sum(d);
          op(std::span<const std::span<const float>>(mine), std::span<float>(sum));
          CHECK(same_bits(sum, float_reference(g, d)));
        }
      }
    }
  }
}

TEST_CASE("coded_allreduce XOR delivers NaN and infinities exactly", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const int r = p > 2 ? 2 : 1;
  const coded::placement layout(p, r);
  const std::size_t d = 10;
  std::vector<std::vector<float>> g = all_gradients(layout, d, 3);
  g[0][1] = std::numeric_limits<float>::infinity();
  g[1][2] = -std::numeric_limits<float>::infinity();
  g[layout.part_count() - 1][3] = std::numeric_limits<float>::quiet_NaN();
  g[0][4] = -0.0f;
  const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
  for (const auto variant : both_variants) {
    CAPTURE(name(variant));
    mpi::coded_allreduce op(
        comm, {.redundancy = r, .coding = mpi::packet_coding::xor_bits, .variant = variant});
    std::vector<float> sum(d);
    op(std::span<const std::span<const float>>(mine), std::span<float>(sum));
    const std::vector<float> expected = float_reference(g, d);
    CHECK(same_bits(sum, expected));
    CHECK(std::isnan(sum[3]));
    CHECK(identical_on_all_ranks(sum));
  }
}

TEST_CASE("coded_allreduce progresses through test() and is reusable", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const int r = p / 2;
  const coded::placement layout(p, r);
  const std::size_t d = 100000;
  for (const auto variant : both_variants) {
    mpi::coded_allreduce op(comm, {.redundancy = r, .variant = variant, .max_requests = 4});
    for (const std::uint64_t seed : {1u, 2u}) {
      const std::vector<std::vector<float>> g = all_gradients(layout, d, seed);
      const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
      std::vector<float> sum(d);
      op.start(mine, sum);
      volatile double busy = 0.0;
      while (!op.test()) {
        for (int i = 0; i < 1000; ++i) {
          busy = busy + std::sqrt(static_cast<double>(i)); // work overlapped with communication
        }
        std::this_thread::yield();
      }
      CAPTURE(p, r, seed, name(variant));
      CHECK(same_bits(sum, fixed_point_reference(g, d)));
      CHECK(identical_on_all_ranks(sum));
    }
  }
}

TEST_CASE("coded_allreduce rejects different lengths on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const coded::placement layout(p, 1);
  mpi::coded_allreduce op(comm, {.redundancy = 1});
  const std::size_t d = comm.rank() == 0 ? 11 : 10;
  const std::vector<std::vector<float>> g = all_gradients(layout, d, 8);
  const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
  std::vector<float> sum(d);
  REQUIRE_THROWS_AS(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                    mpi::mpi_error);
  // usable again afterwards
  const std::vector<std::vector<float>> same = all_gradients(layout, 10, 8);
  const std::vector<std::span<const float>> again = owned_parts(layout, same, comm.rank());
  std::vector<float> result(10);
  op(std::span<const std::span<const float>>(again), std::span<float>(result));
  CHECK(same_bits(result, fixed_point_reference(same, 10)));
}

TEST_CASE("coded_allreduce rejects malformed arguments of one rank on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const int culprit = p - 1;
  const coded::placement layout(p, 1);
  mpi::coded_allreduce op(comm, {.redundancy = 1});
  const std::size_t d = 16;
  const std::vector<std::vector<float>> g = all_gradients(layout, d, 4);
  std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
  std::vector<float> sum(d);
  SECTION("a missing part gradient") {
    if (comm.rank() == culprit) {
      mine.pop_back();
    }
  }
  SECTION("a part gradient shorter than the output") {
    if (comm.rank() == culprit) {
      mine[0] = mine[0].first(d - 1);
    }
  }
  if (comm.rank() == culprit) {
    REQUIRE_THROWS_AS(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                      std::invalid_argument);
  } else {
    REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                        Catch::Contains("another rank passed malformed arguments"));
  }
}

TEST_CASE("coded_allreduce fixed point rejects NaN on any rank on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const coded::placement layout(p, 1);
  const std::size_t d = 8;
  std::vector<std::vector<float>> g = all_gradients(layout, d, 2);
  // part p - 1 is owned by rank p - 1 only
  std::vector<std::vector<float>> bad = g;
  bad[layout.part_count() - 1][3] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::span<const float>> mine = owned_parts(layout, bad, comm.rank());
  mpi::coded_allreduce op(comm, {.redundancy = 1});
  std::vector<float> sum(d);
  REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                      Catch::Contains("NaN or an infinity"));
  const std::vector<std::span<const float>> good = owned_parts(layout, g, comm.rank());
  op(std::span<const std::span<const float>>(good), std::span<float>(sum));
  CHECK(same_bits(sum, fixed_point_reference(g, d)));
}

// ---- the reduce-scatter form ------------------------------------------------------------------

TEST_CASE("coded_allreduce reduce_scatter equals full_recovery bit for bit, with its own counts",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const auto up = static_cast<std::size_t>(p);
  gradcomp::test::identity_batch sums; // compared across ranks once, at the end
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    // d < P (empty blocks), d = 0, blocks of unequal length, slices of unequal length
    for (const std::size_t d :
         {std::size_t{0}, std::size_t{1}, up - 1, up + 1, 2 * up * static_cast<std::size_t>(r) + 1,
          std::size_t{1000}, std::size_t{4099}}) {
      const std::vector<std::vector<float>> g =
          all_gradients(layout, d, 7 * d + 13 * static_cast<std::size_t>(r));
      const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
      const coded::exchange_load load = coded::coded_reduce_scatter_load(
          p, r, d, 4, coded::delivery::point_to_point, comm.rank());
      for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
        for (const auto schedule :
             {mpi::coded_schedule::concurrent, mpi::coded_schedule::serialized}) {
          for (const std::size_t window : std::initializer_list<std::size_t>{3, 32}) {
            CAPTURE(p, r, d, name(coding), name(schedule), window);
            const mpi::coded_allreduce_options o{.redundancy = r,
                                                 .coding = coding,
                                                 .schedule = schedule,
                                                 .uncoded = window == 3,
                                                 .max_requests = window};
            mpi::coded_allreduce full(comm, o);
            mpi::coded_allreduce_options rs_options = o;
            rs_options.variant = mpi::coded_variant::reduce_scatter;
            mpi::coded_allreduce rs(comm, rs_options);
            std::vector<float> full_sum(d, -1.0f);
            full(std::span<const std::span<const float>>(mine), std::span<float>(full_sum));
            std::vector<float> sum(d, std::numeric_limits<float>::quiet_NaN());
            rs(std::span<const std::span<const float>>(mine), std::span<float>(sum));
            CHECK(same_bits(sum, full_sum));
            CHECK(same_bits(sum, coding == mpi::packet_coding::fixed_point
                                     ? fixed_point_reference(g, d)
                                     : float_reference(g, d)));
            sums.add(sum, describe("r ", r, ", d ", d, ", ", name(coding), ", ", name(schedule),
                                   ", window ", window));
            CHECK(rs.scale() == full.scale());
            CHECK(static_cast<double>(rs.bytes_sent()) == load.sent_bytes);
            CHECK(static_cast<double>(rs.bytes_received()) == load.received_bytes);
            CHECK(rs.messages_sent() == load.sent_messages);
            CHECK(rs.messages_received() == load.received_messages);
            // r C(P - 1, r) packets and P - 1 allgather blocks, each way
            CHECK(rs.messages_sent() ==
                  static_cast<std::size_t>(r) * layout.groups_per_rank() + up - 1);
          }
        }
      }
    }
  }
  sums.check();
}

TEST_CASE("coded_allreduce reduce_scatter agrees with MPI_Allreduce within the documented bound",
          "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const std::size_t d = 3001;
  for (int r = 1; r < p; ++r) {
    const coded::placement layout(p, r);
    const std::vector<std::vector<float>> g = all_gradients(layout, d, 17);
    const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
    // every part counted once, by its first owner, summed in double by MPI_Allreduce
    std::vector<double> contribution(d, 0.0);
    std::vector<double> magnitude(d, 0.0);
    for (std::size_t t = 0; t < layout.part_count(); ++t) {
      for (std::size_t i = 0; i < d; ++i) {
        magnitude[i] += std::abs(static_cast<double>(g[t][i]));
      }
      if (layout.owners(t)[0] == comm.rank()) {
        for (std::size_t i = 0; i < d; ++i) {
          contribution[i] += g[t][i];
        }
      }
    }
    std::vector<double> exact(d);
    REQUIRE(MPI_Allreduce(contribution.data(), exact.data(), static_cast<int>(d), MPI_DOUBLE,
                          MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (const auto coding : {mpi::packet_coding::fixed_point, mpi::packet_coding::xor_bits}) {
      CAPTURE(p, r, name(coding));
      mpi::coded_allreduce op(
          comm, {.redundancy = r, .coding = coding, .variant = mpi::coded_variant::reduce_scatter});
      std::vector<float> sum(d);
      op(std::span<const std::span<const float>>(mine), std::span<float>(sum));
      const double m = static_cast<double>(layout.part_count());
      const double eps = std::numeric_limits<float>::epsilon();
      double worst = 0.0;
      for (std::size_t i = 0; i < d; ++i) {
        // fixed point: C(P, r) 0.5 / scale plus the rounding to float (docs/coded.md); XOR: the
        // float additions in part order, at most C(P, r) eps sum |g_t|; both plus the double
        // rounding of the MPI_Allreduce reference
        const double bound = (coding == mpi::packet_coding::fixed_point
                                  ? m * 0.5 / op.scale() * (1.0 + eps) + std::abs(exact[i]) * eps
                                  : m * eps * magnitude[i]) +
                             m * 1e-15 * magnitude[i];
        worst = std::max(worst, std::abs(static_cast<double>(sum[i]) - exact[i]) / bound);
      }
      CHECK(worst <= 1.0);
      CHECK(identical_on_all_ranks(sum));
    }
  }
}

} // namespace mpi_coded_exchange_test
