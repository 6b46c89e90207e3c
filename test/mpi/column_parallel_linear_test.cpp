// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::column_parallel_linear (S2's model-parallel fully connected layer) against a
// single-process reference on the concatenated batch, computed here in double precision with
// plain loops: outputs, weight / bias gradients (the average over ranks of each rank's
// gradient) and input gradients, on 1-5 ranks, uneven N, M = 1; the values moved counted
// against S2's volume formula; bad arguments throwing on every rank.
#include <gradcomp/blas/cblas_gemm.hpp>
#include <gradcomp/cost/volume.hpp>
#include <gradcomp/mpi/column_parallel_linear.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_column_parallel_linear_test {

using namespace gradcomp;
using layer = mpi::column_parallel_linear<blas::cblas_gemm>;

namespace {

// The whole problem, identical on every rank: global batch P M x K, weight N x K, bias N,
// output gradient P M x N; and its reference results in double precision.
struct problem {
  std::size_t p, m, k, n;
  std::vector<float> x, w, b, dy;
  std::vector<double> y, dw, db, dx; // reference: y = x w^T + b; dw, db averaged over ranks

  problem(std::size_t ranks,
          std::size_t batch,
          std::size_t inputs,
          std::size_t outputs,
          std::uint64_t salt)
      : p(ranks), m(batch), k(inputs), n(outputs), x(test::rank_values(p * m * k, 0, salt)),
        w(test::rank_values(n * k, 1, salt)), b(test::rank_values(n, 2, salt)),
        dy(test::rank_values(p * m * n, 3, salt)), y(p * m * n), dw(n * k), db(n), dx(p * m * k) {
    for (std::size_t i = 0; i < p * m; ++i) {
      for (std::size_t o = 0; o < n; ++o) {
        double s = b[o];
        for (std::size_t j = 0; j < k; ++j) {
          s += double{x[i * k + j]} * w[o * k + j];
        }
        y[i * n + o] = s;
        db[o] += dy[i * n + o] / static_cast<double>(p);
        for (std::size_t j = 0; j < k; ++j) {
          dw[o * k + j] += double{dy[i * n + o]} * x[i * k + j] / static_cast<double>(p);
          dx[i * k + j] += double{dy[i * n + o]} * w[o * k + j];
        }
      }
    }
  }
  // rows [first, first + count) of a row-major matrix with `cols` columns
  template <class T>
  static std::vector<T>
  rows(const std::vector<T>& a, std::size_t cols, std::size_t first, std::size_t count) {
    return {a.begin() + static_cast<std::ptrdiff_t>(first * cols),
            a.begin() + static_cast<std::ptrdiff_t>((first + count) * cols)};
  }
};

// fp32 tolerance: each value is a sum of at most max(K, P M) products of N(0,1) draws, so its
// rounding error is below ~terms x 2^-24 x |terms|; 1e-5 x (terms + |ref|) bounds it.
void check_close(const std::vector<float>& got, const std::vector<double>& ref, std::size_t terms) {
  REQUIRE(got.size() == ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - ref[i]) <= 1e-5 * (static_cast<double>(terms) + std::abs(ref[i])));
  }
}

struct results {
  std::vector<float> y, dw, db, dx;
};

results run(layer& fc, const problem& pr, int rank) {
  const column_slice s = fc.slice();
  const auto r = static_cast<std::size_t>(rank);
  const auto x = problem::rows(pr.x, pr.k, r * pr.m, pr.m);
  const auto w = problem::rows(pr.w, pr.k, s.offset, s.rows);
  const auto b = problem::rows(pr.b, 1, s.offset, s.rows);
  const auto dy = problem::rows(pr.dy, pr.n, r * pr.m, pr.m);
  results out{std::vector<float>(pr.m * pr.n), std::vector<float>(s.rows * pr.k),
              std::vector<float>(s.rows), std::vector<float>(pr.m * pr.k)};
  fc.forward(x, w, b, out.y);
  fc.backward(dy, x, w, out.dw, out.db, out.dx);
  return out;
}

} // namespace

TEST_CASE("column_parallel_linear equals a single-process linear layer on the whole batch",
          "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const auto p = static_cast<std::size_t>(comm.size());
  const int rank = comm.rank();
  struct shape {
    std::size_t m, k, n;
  };
  // M = 1; N = P (one output per rank); uneven N; larger K and M
  for (const shape sh :
       {shape{1, 5, p}, shape{3, 7, 2 * p + 1}, shape{4, 33, 3 * p + 2}, shape{1, 64, 13}}) {
    if (sh.n < p) {
      continue;
    }
    INFO("M " << sh.m << " K " << sh.k << " N " << sh.n << " P " << p);
    const problem pr(p, sh.m, sh.k, sh.n, 11 + sh.k);
    std::vector<results> by_exchange;
    for (const auto exchange : {mpi::fc_exchange::all_to_all, mpi::fc_exchange::s2_allgather}) {
      layer fc(comm, sh.k, sh.n, {}, {.exchange = exchange});
      const column_slice s = fc.slice();
      CHECK(s == column_split(sh.n, comm.size(), rank));
      results got = run(fc, pr, rank);
      const auto r = static_cast<std::size_t>(rank);
      check_close(got.y, problem::rows(pr.y, pr.n, r * sh.m, sh.m), sh.k);
      check_close(got.dw, problem::rows(pr.dw, sh.k, s.offset, s.rows), p * sh.m);
      check_close(got.db, problem::rows(pr.db, 1, s.offset, s.rows), p * sh.m);
      check_close(got.dx, problem::rows(pr.dx, sh.k, r * sh.m, sh.m), sh.n);
      by_exchange.push_back(std::move(got));
    }
    // the exchange changes how values travel, not what is computed
    CHECK(test::same_bits(by_exchange[0].y, by_exchange[1].y));
    CHECK(test::same_bits(by_exchange[0].dw, by_exchange[1].dw));
    CHECK(test::same_bits(by_exchange[0].dx, by_exchange[1].dx));
  }
}

TEST_CASE("column_parallel_linear moves exactly S2's volume", "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const auto p = static_cast<std::size_t>(comm.size());
  const std::size_t m = 3;
  const std::size_t k = 10;
  const std::size_t n = 2 * p + 1; // uneven
  const problem pr(p, m, k, n, 5);
  {
    layer fc(comm, k, n, {}, {.exchange = mpi::fc_exchange::s2_allgather});
    run(fc, pr, comm.rank());
    const auto& t = fc.traffic();
    CHECK(static_cast<double>(t.collective_values) ==
          cost::fc_model_parallel_values(static_cast<double>(m), static_cast<double>(k),
                                         static_cast<double>(n), static_cast<double>(p)));
    CHECK(t.collectives == 5);
    const std::size_t nr = fc.slice().rows;
    CHECK(t.sent_values == (p - 1) * (2 * m * k + p * m * nr + m * n + m * k));
  }
  {
    layer fc(comm, k, n, {}, {.exchange = mpi::fc_exchange::all_to_all});
    run(fc, pr, comm.rank());
    const auto& t = fc.traffic();
    const std::size_t nr = fc.slice().rows;
    CHECK(t.collective_values == 2 * m * k * p + m * n + m * p * nr);
    CHECK(t.collectives == 4);
    CHECK(t.sent_values == 2 * (p - 1) * m * k + (p - 1) * m * nr + m * (n - nr));
    fc.reset_traffic();
    CHECK(fc.traffic().collective_values == 0);
  }
}

TEST_CASE("column_parallel_linear gathers again when the backward input is not the forward's",
          "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const auto p = static_cast<std::size_t>(comm.size());
  const int rank = comm.rank();
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t m = 2;
  const std::size_t k = 6;
  const std::size_t n = p + 3;
  const problem first(p, m, k, n, 21);
  const problem second(p, m, k, n, 22);
  layer fc(comm, k, n);
  const column_slice s = fc.slice();
  // weights, bias and output gradient from `second`, forward with `first`'s input on rank 0 only
  const auto w = problem::rows(second.w, k, s.offset, s.rows);
  const auto b = problem::rows(second.b, 1, s.offset, s.rows);
  const auto x = problem::rows(second.x, k, r * m, m);
  auto x_forward = x;
  if (rank == 0) {
    x_forward = problem::rows(first.x, k, 0, m);
  }
  std::vector<float> y(m * n);
  fc.forward(x_forward, w, b, y);
  fc.reset_traffic();
  const auto dy = problem::rows(second.dy, n, r * m, m);
  std::vector<float> dw(s.rows * k), db(s.rows), dx(m * k);
  fc.backward(dy, x, w, dw, db, dx);
  CHECK(fc.traffic().collectives == 3); // the inputs were gathered again, on every rank
  check_close(dw, problem::rows(second.dw, k, s.offset, s.rows), p * m);
  check_close(dx, problem::rows(second.dx, k, r * m, m), n);
  // with the forward's input the cached gather is used
  fc.forward(x, w, b, y);
  fc.reset_traffic();
  fc.backward(dy, x, w, dw, db, dx);
  CHECK(fc.traffic().collectives == 2);
  check_close(dw, problem::rows(second.dw, k, s.offset, s.rows), p * m);
  // without the agreement no rank knows the others' inputs: every backward gathers again
  layer unchecked(comm, k, n, {}, {.check_arguments = false});
  unchecked.forward(x_forward, w, b, y);
  unchecked.reset_traffic();
  unchecked.backward(dy, x, w, dw, db, dx);
  CHECK(unchecked.traffic().collectives == 3);
  check_close(dw, problem::rows(second.dw, k, s.offset, s.rows), p * m);
  check_close(dx, problem::rows(second.dx, k, r * m, m), n);
}

TEST_CASE("column_parallel_linear nonblocking form", "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  const std::size_t m = 2;
  const std::size_t k = 9;
  const std::size_t n = p + 1;
  const problem pr(p, m, k, n, 31);
  layer fc(comm, k, n, {}, {.wait = {.kind = mpi::wait_kind::sleep}});
  const column_slice s = fc.slice();
  const auto x = problem::rows(pr.x, k, r * m, m);
  const auto w = problem::rows(pr.w, k, s.offset, s.rows);
  std::vector<float> y(m * n);
  fc.start_forward(x, w, {}, y); // no bias
  while (!fc.test()) {
  }
  std::vector<double> ref = problem::rows(pr.y, n, r * m, m);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t o = 0; o < n; ++o) {
      ref[i * n + o] -= pr.b[o];
    }
  }
  check_close(y, ref, k);
  const auto dy = problem::rows(pr.dy, n, r * m, m);
  std::vector<float> dw(s.rows * k), dx(m * k);
  fc.start_backward(dy, x, w, dw, {}, dx);
  fc.wait();
  check_close(dw, problem::rows(pr.dw, k, s.offset, s.rows), p * m);
  check_close(dx, problem::rows(pr.dx, k, r * m, m), n);
}

TEST_CASE("column_parallel_linear rejects bad arguments on every rank",
          "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int rank = comm.rank();
  const std::size_t k = 4;
  const std::size_t n = static_cast<std::size_t>(p) + 2;
  const auto forward = [&](layer& fc, std::size_t m) {
    const column_slice s = fc.slice();
    std::vector<float> x(m * fc.inputs(), 1.0f), w(s.rows * fc.inputs(), 1.0f), y(m * fc.outputs());
    fc.forward(x, w, {}, y);
  };
  SECTION("batch 0") {
    layer fc(comm, k, n);
    REQUIRE_THROWS_WITH(forward(fc, rank == p - 1 ? 0 : 2),
                        Catch::Contains(p == 1 ? "batch M = 0" : "different batches"));
    REQUIRE_THROWS_WITH(forward(fc, 0), Catch::Contains("batch M = 0"));
    forward(fc, 2); // usable afterwards
  }
  SECTION("K or N disagree") {
    if (p > 1) {
      layer fc_k(comm, rank == 0 ? k + 1 : k, n);
      REQUIRE_THROWS_WITH(forward(fc_k, 2), Catch::Contains("different K"));
      layer fc_n(comm, k, rank == 0 ? n + 1 : n);
      REQUIRE_THROWS_WITH(forward(fc_n, 2), Catch::Contains("different N"));
    }
  }
  SECTION("different exchanges") {
    if (p > 1) {
      layer fc(
          comm, k, n, {},
          {.exchange = rank == 0 ? mpi::fc_exchange::s2_allgather : mpi::fc_exchange::all_to_all});
      REQUIRE_THROWS_WITH(forward(fc, 2), Catch::Contains("different exchange options"));
    }
  }
  SECTION("bad arguments in the backward pass") {
    layer fc(comm, k, n);
    forward(fc, 2);
    const column_slice s = fc.slice();
    std::vector<float> x(2 * k, 1.0f), w(s.rows * k, 1.0f), dy(2 * n, 1.0f), dw(s.rows * k),
        dx(2 * k + (rank == p - 1 ? 1 : 0));
    REQUIRE_THROWS_WITH(fc.backward(dy, x, w, dw, {}, dx),
                        Catch::Contains(rank == p - 1 ? "input gradient has" : "another rank"));
  }
  SECTION("N < P") {
    if (p > 1) {
      layer fc(comm, k, static_cast<std::size_t>(p) - 1);
      REQUIRE_THROWS_WITH(forward(fc, 1), Catch::Contains("N >= P"));
    }
  }
  SECTION("a buffer of the wrong size on one rank") {
    layer fc(comm, k, n);
    const column_slice s = fc.slice();
    std::vector<float> x(2 * k, 1.0f), w(s.rows * k + (rank == 0 ? 1 : 0), 1.0f), y(2 * n);
    REQUIRE_THROWS_WITH(fc.forward(x, w, {}, y),
                        Catch::Contains(rank == 0 ? "weight slice has" : "another rank"));
  }
  SECTION("forward on one rank, backward on another") {
    if (p > 1) {
      layer fc(comm, k, n);
      const column_slice s = fc.slice();
      std::vector<float> x(k, 1.0f), w(s.rows * k, 1.0f), y(n), dw(s.rows * k), dx(k);
      if (rank == 0) {
        REQUIRE_THROWS_WITH(fc.backward(y, x, w, dw, {}, dx), Catch::Contains("different passes"));
      } else {
        REQUIRE_THROWS_WITH(fc.forward(x, w, {}, y), Catch::Contains("different passes"));
      }
    }
  }
}

} // namespace mpi_column_parallel_linear_test
