// SPDX-License-Identifier: Apache-2.0
// PowerSGD (powersgd_layer, mpi::powersgd_allreduce) against a float64 single-process
// reference built from every rank's gradient (the paper's Algorithm 1 step by step: mean of
// M_r Q, Gram-Schmidt, mean of M_r^T P, P Q^T), within a stated tolerance, identical on every
// rank; a rank-1 gradient is recovered exactly after one power step; error feedback conserves
// every value up to one rounding; warm start keeps the mean Q; uncompressed layers get the
// plain mean; bytes are the two rings'; bad options and disagreeing ranks throw on every rank.
#include <gradcomp/blas/cblas_gemm.hpp>
#include <gradcomp/compressor/powersgd.hpp>
#include <gradcomp/mpi/powersgd_allreduce.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_powersgd_allreduce_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

using psgd = mpi::powersgd_allreduce<blas::cblas_gemm>;

// every rank's values, gathered on every rank (rank order)
std::vector<std::vector<float>> gather(std::span<const float> mine) {
  const auto p = static_cast<std::size_t>(test::world_size());
  std::vector<float> all(mine.size() * p);
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                static_cast<int>(mine.size()), MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<std::vector<float>> out(p);
  for (std::size_t r = 0; r < p; ++r) {
    out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                  all.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
  }
  return out;
}

// Algorithm 1 in float64 for one layer: `m` every rank's M (rows x cols), `q0` (cols x r)
std::vector<double> reference_average(const std::vector<std::vector<double>>& m,
                                      const std::vector<double>& q0,
                                      std::size_t rows,
                                      std::size_t cols,
                                      std::size_t r,
                                      std::vector<double>* q_mean = nullptr) {
  const double w = static_cast<double>(m.size());
  std::vector<double> p(rows * r, 0.0);
  for (const auto& mr : m) {
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < r; ++j) {
        for (std::size_t c = 0; c < cols; ++c) {
          p[i * r + j] += mr[i * cols + c] * q0[c * r + j] / w;
        }
      }
    }
  }
  for (std::size_t j = 0; j < r; ++j) { // Gram-Schmidt
    for (std::size_t i = 0; i < j; ++i) {
      double dot = 0.0;
      for (std::size_t x = 0; x < rows; ++x) {
        dot += p[x * r + i] * p[x * r + j];
      }
      for (std::size_t x = 0; x < rows; ++x) {
        p[x * r + j] -= dot * p[x * r + i];
      }
    }
    double norm = 0.0;
    for (std::size_t x = 0; x < rows; ++x) {
      norm += p[x * r + j] * p[x * r + j];
    }
    for (std::size_t x = 0; x < rows; ++x) {
      p[x * r + j] /= std::sqrt(norm);
    }
  }
  std::vector<double> q(cols * r, 0.0);
  for (const auto& mr : m) {
    for (std::size_t c = 0; c < cols; ++c) {
      for (std::size_t j = 0; j < r; ++j) {
        for (std::size_t i = 0; i < rows; ++i) {
          q[c * r + j] += mr[i * cols + c] * p[i * r + j] / w;
        }
      }
    }
  }
  std::vector<double> approx(rows * cols, 0.0);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t c = 0; c < cols; ++c) {
      for (std::size_t j = 0; j < r; ++j) {
        approx[i * cols + c] += p[i * r + j] * q[c * r + j];
      }
    }
  }
  if (q_mean != nullptr) {
    *q_mean = q;
  }
  return approx;
}

double max_abs(std::span<const float> v) {
  double m = 0.0;
  for (const float x : v) {
    m = std::max(m, std::abs(static_cast<double>(x)));
  }
  return m;
}

} // namespace

TEST_CASE("powersgd: Gram-Schmidt gives orthonormal columns of the same span", "[powersgd]") {
  // 4 x 3, third column = first + second: it becomes 0
  std::vector<float> a{1, 2, 3, 0, 1, 1, 2, 0, 2, 1, 1, 2};
  powersgd_layer<blas::cblas_gemm>::orthonormalize_columns(a, 4, 3);
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 2; ++j) {
      double dot = 0.0;
      for (std::size_t r = 0; r < 4; ++r) {
        dot += static_cast<double>(a[r * 3 + i]) * a[r * 3 + j];
      }
      CHECK(dot == Approx(i == j ? 1.0 : 0.0).margin(1e-6));
    }
  }
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(std::abs(a[r * 3 + 2]) < 1e-6f);
  }
  // the first column keeps its direction: (1, 0, 2, 1) / sqrt(6)
  CHECK(a[0] == Approx(1 / std::sqrt(6.0)));
  CHECK(a[6] == Approx(2 / std::sqrt(6.0)));
}

TEST_CASE("powersgd: the average is Algorithm 1's on the gathered gradients, on every rank",
          "[powersgd]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  // a conv-like 16 x 45 layer, a bias of 16 (uncompressed), a 30 x 20 layer and a 3 x 40 layer
  // that the rate rule leaves uncompressed (120 values < 2 x (3 + 40) x 2)
  const std::vector<mpi::powersgd_shape> shapes{{16, 45}, {16, 1}, {30, 20}, {3, 40}};
  const powersgd_options o{.rank = 2, .seed = 7};
  psgd exchange(comm, shapes, o);
  REQUIRE(exchange.layer(0) != nullptr);
  CHECK(exchange.layer(1) == nullptr);
  CHECK(exchange.layer(3) == nullptr); // 120 values < 2 x (3 + 40) x 2
  CHECK(exchange.first_elements() == 16 * 2 + 16 + 30 * 2 + 120);
  CHECK(exchange.second_elements() == 45 * 2 + 20 * 2);
  std::vector<std::vector<float>> residual_before(shapes.size());
  for (int it = 0; it < 3; ++it) {
    CAPTURE(it);
    std::vector<std::vector<float>> grads;
    std::vector<std::vector<float>> avgs;
    std::vector<std::vector<float>> q0;
    for (std::size_t l = 0; l < shapes.size(); ++l) {
      grads.push_back(test::rank_values(shapes[l].rows * shapes[l].cols, comm.rank(),
                                        50 + 10 * static_cast<unsigned>(it) + l));
      avgs.emplace_back(grads.back().size());
      const auto* layer = exchange.layer(l);
      q0.emplace_back();
      if (layer != nullptr) {
        q0.back().assign(layer->q().begin(), layer->q().end());
      }
      residual_before[l] =
          layer ? std::vector<float>(layer->residual().begin(), layer->residual().end())
                : std::vector<float>(grads.back().size(), 0.0f);
    }
    std::vector<std::span<const float>> g(grads.begin(), grads.end());
    std::vector<std::span<float>> a(avgs.begin(), avgs.end());
    exchange(g, a);
    for (std::size_t l = 0; l < shapes.size(); ++l) {
      CAPTURE(l);
      REQUIRE(test::identical_on_all_ranks(avgs[l]));
      const auto* layer = exchange.layer(l);
      // M_r = residual_r + gradient_r, gathered
      std::vector<float> m_mine(grads[l].size());
      for (std::size_t i = 0; i < m_mine.size(); ++i) {
        m_mine[i] = residual_before[l][i] + grads[l][i];
      }
      const auto gathered = gather(m_mine);
      std::vector<std::vector<double>> m(gathered.size());
      for (std::size_t r = 0; r < gathered.size(); ++r) {
        m[r].assign(gathered[r].begin(), gathered[r].end());
      }
      std::vector<double> expected(grads[l].size(), 0.0);
      std::vector<double> q_mean;
      if (layer == nullptr) { // the plain mean
        for (const auto& mr : m) {
          for (std::size_t i = 0; i < expected.size(); ++i) {
            expected[i] += mr[i] / p;
          }
        }
      } else {
        expected = reference_average(m, std::vector<double>(q0[l].begin(), q0[l].end()),
                                     shapes[l].rows, shapes[l].cols, layer->rank(), &q_mean);
      }
      const double scale = std::max(1.0, max_abs(avgs[l]));
      for (std::size_t i = 0; i < expected.size(); ++i) {
        REQUIRE(std::abs(avgs[l][i] - expected[i]) <= 2e-5 * scale);
      }
      if (layer != nullptr) {
        // warm start: the next start is the mean Q
        for (std::size_t i = 0; i < q_mean.size(); ++i) {
          REQUIRE(std::abs(layer->q()[i] - q_mean[i]) <= 2e-5 * std::max(1.0, std::abs(q_mean[i])));
        }
        // error feedback: residual = M - average, one rounding per element
        for (std::size_t i = 0; i < m_mine.size(); ++i) {
          REQUIRE(layer->residual()[i] == m_mine[i] - avgs[l][i]);
        }
      }
    }
  }
  // the bytes: what the two rings sent, step by step (ring_trace)
  mpi::ring_trace trace;
  psgd traced(comm, shapes, o, {.trace = &trace});
  {
    std::vector<std::vector<float>> grads;
    std::vector<std::vector<float>> avgs;
    for (const auto& shape : shapes) {
      grads.push_back(test::rank_values(shape.rows * shape.cols, comm.rank(), 9));
      avgs.emplace_back(grads.back().size());
    }
    std::vector<std::span<const float>> g(grads.begin(), grads.end());
    std::vector<std::span<float>> a(avgs.begin(), avgs.end());
    traced(g, a);
  }
  std::size_t traced_bytes = 0;
  for (const auto& step : trace.steps) {
    traced_bytes += step.bytes_sent;
  }
  CHECK(trace.operations == 2);
  CHECK(traced.bytes_sent() == traced_bytes);
  if (p > 1) {
    const double total =
        4.0 * static_cast<double>(exchange.first_elements() + exchange.second_elements());
    CHECK(static_cast<double>(exchange.bytes_sent()) ==
          Approx(2.0 * (p - 1) / p * total).margin(8));
  }
}

TEST_CASE("powersgd: a rank-1 gradient comes back exactly after one power step", "[powersgd]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t rows = 24;
  const std::size_t cols = 40;
  std::vector<float> g(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t c = 0; c < cols; ++c) { // u v^T, the same on every rank
      g[i * cols + c] = static_cast<float>(i + 1) * static_cast<float>(static_cast<int>(c % 7) - 3);
    }
  }
  const std::vector<mpi::powersgd_shape> shapes{{rows, cols}};
  psgd exchange(comm, shapes, {.rank = 1});
  std::vector<float> avg(g.size());
  std::vector<std::span<const float>> gs{g};
  std::vector<std::span<float>> as{avg};
  exchange(gs, as);
  for (std::size_t i = 0; i < g.size(); ++i) {
    REQUIRE(avg[i] == Approx(g[i]).margin(1e-3));
  }
  CHECK(max_abs(exchange.layer(0)->residual()) < 1e-3);
}

TEST_CASE("powersgd: bad options and disagreeing ranks throw on every rank", "[powersgd]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const std::vector<mpi::powersgd_shape> shapes{{16, 16}};
  CHECK_THROWS_WITH(psgd(comm, shapes, {.rank = 0}), Contains("rank 0 is below 1"));
  CHECK_THROWS_WITH(psgd(comm, shapes, {.min_compression_rate = 0.5}),
                    Contains("min_compression_rate 0.5 is below 1"));
  // the last rank alone passes a bad option or an empty layer: every rank throws, naming it
  const bool last = comm.rank() == comm.size() - 1;
  const std::string last_rank = "rank " + std::to_string(comm.size() - 1) + "'s arguments";
  CHECK_THROWS_WITH(
      psgd(comm, shapes,
           {.min_compression_rate = last ? std::numeric_limits<double>::infinity() : 2.0}),
      Contains(last_rank));
  const std::vector<mpi::powersgd_shape> empty{{16, 0}};
  CHECK_THROWS_WITH(psgd(comm, last ? empty : shapes, {}), Contains(last_rank));
  if (comm.size() > 1) {
    const std::vector<mpi::powersgd_shape> mine{{16, comm.rank() == 0 ? 17u : 16u}};
    CHECK_THROWS_WITH(psgd(comm, mine, {}),
                      Contains("the ranks disagree: the fingerprint of the layer shapes"));
    CHECK_THROWS_WITH(psgd(comm, shapes, {.rank = comm.rank() == 0 ? 2u : 3u}),
                      Contains("the ranks disagree: the fingerprint of the layer shapes"));
  }
  psgd ok(comm, shapes, {});
  std::vector<float> g(16 * 16, 1.0f);
  std::vector<float> avg(g.size());
  std::vector<std::span<const float>> gs{g};
  std::vector<std::span<float>> as{avg};
  std::vector<std::span<float>> short_avg{std::span<float>(avg).first(10)};
  // only the last rank's average is short: every rank throws, before any ring
  CHECK_THROWS_WITH(ok(gs, last ? short_avg : as), Contains(last_rank));
  if (last) {
    CHECK_THROWS_WITH(ok(gs, short_avg), Contains("layer 0 has 256 elements"));
  } else {
    CHECK_THROWS(ok(gs, as));
  }
  ok(gs, as); // and the next call works
  CHECK(test::identical_on_all_ranks(avg));
  CHECK_THROWS_WITH(powersgd_layer<blas::cblas_gemm>(2, 3, {}, 0), Contains("does not compress"));
}

} // namespace mpi_powersgd_allreduce_test
