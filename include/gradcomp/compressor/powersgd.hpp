// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::powersgd_layer: one layer's PowerSGD low-rank compression (Vogels et al.,
//! NeurIPS 2019) with warm start and error feedback, split into the three local steps around
//! its two allreduces, on any gemm backend.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/linalg/gemm.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace gradcomp {

//! @brief Options of PowerSGD (powersgd_layer, mpi::powersgd_allreduce).
struct powersgd_options {
  //! The approximation rank r >= 1 (PyTorch's matrix_approximation_rank; capped per layer at
  //! min(rows, cols)).
  std::size_t rank = 2;
  //! A layer is compressed only when its rows x cols values are more than min_compression_rate
  //! times the (rows + cols) x r values of its factors, >= 1 (PyTorch's min_compression_rate);
  //! other layers (vectors such as biases among them) are averaged uncompressed.
  double min_compression_rate = 2.0;
  //! Keep each layer's Q from the previous iteration as the next power iteration's start (the
  //! paper's warm start); else draw a new random Q every iteration.
  bool warm_start = true;
  //! Seed of the random starting Q (standard normal; the same on every rank for the same seed
  //! and layer index).
  std::uint64_t seed = 0;
};

//! @brief Whether a rows x cols layer is compressed under `o` (see powersgd_options). O(1).
[[nodiscard]] inline bool
powersgd_compresses(std::size_t rows, std::size_t cols, const powersgd_options& o) noexcept {
  const std::size_t r = std::min({o.rank, rows, cols});
  return r >= 1 &&
         static_cast<double>(rows) * static_cast<double>(cols) >
             o.min_compression_rate * static_cast<double>(rows + cols) * static_cast<double>(r);
}

//! @brief Checks `o`. @throws std::invalid_argument naming the value if rank is 0 or
//! min_compression_rate is below 1 (or NaN). O(1).
inline void check_powersgd_options(const powersgd_options& o) {
  detail::require(o.rank >= 1, "powersgd: rank ", o.rank, " is below 1");
  detail::require(o.min_compression_rate >= 1.0, "powersgd: min_compression_rate ",
                  o.min_compression_rate, " is below 1");
}

//! @brief One layer's PowerSGD state (Vogels, Karimireddy and Jaggi, "PowerSGD: Practical
//! Low-Rank Gradient Compression for Distributed Optimization", NeurIPS 2019, Algorithm 1 with
//! error feedback and warm start): the gradient is viewed as a row-major rows x cols matrix M
//! (a conv weight's output channels x the rest, as PyTorch's hook does), r = min(rank, rows,
//! cols), and per iteration
//! 1. compute_p: M = residual + gradient (kept); P = M Q (rows x r); the caller sums P over the
//!    W workers (an allreduce) and divides by W;
//! 2. compute_q: P's columns are orthonormalised in place (modified Gram-Schmidt; a column
//!    that is 0, or dependent on the earlier ones, becomes 0); Q = M^T P (cols x r); the caller
//!    averages Q;
//! 3. finish: the approximation P Q^T (the same on every worker, who all hold the same P and
//!    Q) is the average written out; residual = M - P Q^T; Q is kept as the next start.
//! Since P Q^T is linear in Q, it is exactly the mean over workers of each worker's P P^T M:
//! the projection of the mean gradient onto span(P). Error feedback: the residual keeps what
//! the approximation missed, fl(M - P Q^T), so sum over workers of (residual + gradient) equals
//! W x the average plus the new residuals up to that rounding (one rounding per element).
//!
//! Bytes on the wire per iteration: the caller's two allreduces of rows x r and cols x r
//! floats, against rows x cols uncompressed. Work: 4 rows cols r flops (two GEMMs) + O(rows r^2)
//! for the orthonormalisation + O(rows cols r) for the approximation. Deterministic for a given
//! gemm backend (its rounding is the BLAS's). Only for compressed layers
//! (powersgd_compresses); the others are averaged as they are.
//! @tparam G a gemm_backend (blas::cblas_gemm, or a framework's GEMM).
template <gemm_backend G>
class powersgd_layer {
public:
  //! @param rows, cols the matrix view of the layer's gradient (rows x cols elements).
  //! @param o      the options (checked).
  //! @param layer  the layer's index: the starting Q's stream is (o.seed, layer).
  //! @param gemm   the GEMM backend.
  //! @throws std::invalid_argument as check_powersgd_options, or if the layer is not
  //! compressed under `o` (powersgd_compresses).
  powersgd_layer(std::size_t rows,
                 std::size_t cols,
                 const powersgd_options& o,
                 std::size_t layer,
                 G gemm = G{})
      : rows_(rows), cols_(cols), rank_(std::min({o.rank, rows, cols})), options_(o),
        gemm_(std::move(gemm)), rng_(o.seed * 0x9e3779b97f4a7c15ull + layer),
        residual_(rows * cols, 0.0f), q_(cols * rank_) {
    check_powersgd_options(o);
    detail::require(powersgd_compresses(rows, cols, o), "powersgd_layer: a ", rows, " x ", cols,
                    " layer at rank ", rank_, " does not compress by min_compression_rate ",
                    o.min_compression_rate);
    draw_q();
  }

  //! Rows of the matrix view. O(1).
  [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
  //! Columns of the matrix view. O(1).
  [[nodiscard]] std::size_t cols() const noexcept { return cols_; }
  //! The approximation rank r. O(1).
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  //! Elements of P (rows x r), the first allreduce's share of this layer. O(1).
  [[nodiscard]] std::size_t p_elements() const noexcept { return rows_ * rank_; }
  //! Elements of Q (cols x r), the second allreduce's share. O(1).
  [[nodiscard]] std::size_t q_elements() const noexcept { return cols_ * rank_; }
  //! The error-feedback residual (rows x cols). O(1).
  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }
  //! Q (cols x r): the next iteration's start. O(1).
  [[nodiscard]] std::span<const float> q() const noexcept { return q_; }

  //! Step 1: M = residual + gradient (kept in the residual's place); `p` (rows x r) = M Q.
  //! @throws std::invalid_argument if a length differs.
  void compute_p(std::span<const float> gradient, std::span<float> p) {
    detail::require(gradient.size() == residual_.size() && p.size() == p_elements(),
                    "powersgd_layer: gradient of ", gradient.size(), " and P of ", p.size(),
                    " elements for a ", rows_, " x ", cols_, " layer at rank ", rank_);
    for (std::size_t i = 0; i < residual_.size(); ++i) {
      residual_[i] += gradient[i];
    }
    gemm_({.m = rows_,
           .n = rank_,
           .k = cols_,
           .a = residual_.data(),
           .lda = cols_,
           .b = q_.data(),
           .ldb = rank_,
           .c = p.data(),
           .ldc = rank_});
  }

  //! Step 2: `p` holds the mean of P over the workers: orthonormalises its columns in place;
  //! `q` (cols x r) = M^T P. @throws std::invalid_argument if a length differs.
  void compute_q(std::span<float> p, std::span<float> q) {
    detail::require(p.size() == p_elements() && q.size() == q_elements(), "powersgd_layer: P of ",
                    p.size(), " and Q of ", q.size(), " elements for a ", rows_, " x ", cols_,
                    " layer at rank ", rank_);
    orthonormalize_columns(p, rows_, rank_);
    gemm_({.trans_a = transpose::yes,
           .m = cols_,
           .n = rank_,
           .k = rows_,
           .a = residual_.data(),
           .lda = cols_,
           .b = p.data(),
           .ldb = rank_,
           .c = q.data(),
           .ldc = rank_});
  }

  //! Step 3: `p` (orthonormalised) and `q` (the mean of Q over the workers) give the
  //! approximation P Q^T, written to `average` (rows x cols); residual = M - P Q^T; Q is kept
  //! (warm start) or drawn anew. @throws std::invalid_argument if a length differs.
  void finish(std::span<const float> p, std::span<const float> q, std::span<float> average) {
    detail::require(
        p.size() == p_elements() && q.size() == q_elements() && average.size() == residual_.size(),
        "powersgd_layer: P of ", p.size(), ", Q of ", q.size(), " and average of ", average.size(),
        " elements for a ", rows_, " x ", cols_, " layer at rank ", rank_);
    gemm_({.trans_b = transpose::yes,
           .m = rows_,
           .n = cols_,
           .k = rank_,
           .a = p.data(),
           .lda = rank_,
           .b = q.data(),
           .ldb = rank_,
           .c = average.data(),
           .ldc = cols_});
    for (std::size_t i = 0; i < residual_.size(); ++i) {
      residual_[i] -= average[i];
    }
    if (options_.warm_start) {
      std::copy(q.begin(), q.end(), q_.begin());
    } else {
      draw_q();
    }
  }

  //! Orthonormalises the `cols` columns of the row-major rows x cols matrix `a` in place by
  //! modified Gram-Schmidt (left to right). A column whose norm after removing the earlier ones
  //! is at most 1e-5 of its norm before (dependent on them up to float rounding), or 0, becomes
  //! 0 rather than normalised rounding noise. O(rows cols^2). Deterministic.
  static void orthonormalize_columns(std::span<float> a, std::size_t rows, std::size_t cols) {
    const auto column_norm = [&](std::size_t j) {
      double sum = 0.0;
      for (std::size_t r = 0; r < rows; ++r) {
        sum += static_cast<double>(a[r * cols + j]) * a[r * cols + j];
      }
      return std::sqrt(sum);
    };
    for (std::size_t j = 0; j < cols; ++j) {
      const double before = column_norm(j);
      for (std::size_t i = 0; i < j; ++i) {
        double dot = 0.0;
        for (std::size_t r = 0; r < rows; ++r) {
          dot += static_cast<double>(a[r * cols + i]) * a[r * cols + j];
        }
        for (std::size_t r = 0; r < rows; ++r) {
          a[r * cols + j] -= static_cast<float>(dot) * a[r * cols + i];
        }
      }
      const double norm = column_norm(j);
      const float scale = norm > 1e-5 * before ? static_cast<float>(1.0 / norm) : 0.0f;
      for (std::size_t r = 0; r < rows; ++r) {
        a[r * cols + j] *= scale;
      }
    }
  }

private:
  void draw_q() {
    std::normal_distribution<float> normal;
    for (float& v : q_) {
      v = normal(rng_);
    }
  }

  std::size_t rows_;
  std::size_t cols_;
  std::size_t rank_;
  powersgd_options options_;
  G gemm_;
  std::mt19937_64 rng_;
  std::vector<float> residual_;
  std::vector<float> q_;
};

} // namespace gradcomp
