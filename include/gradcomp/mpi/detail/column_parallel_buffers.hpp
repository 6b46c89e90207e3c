// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::column_parallel_buffers: one rank's side of a
//! gradcomp::mpi::column_parallel_linear pass without the MPI calls: the buffers its collectives
//! read and fill, their counts and displacements, and the work between the collectives (the
//! slice's GEMMs and bias, the output gradient's columns packed for the all-to-all, the output
//! assembled from the exchanged blocks). MPI-free.
#pragma once

#include <gradcomp/hybrid/column_split.hpp>
#include <gradcomp/linalg/gemm.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief The buffers of column_parallel_linear's passes on one rank, kept between calls, and
//! the computations on them (steps of its class comment; row-major, P ranks of batch M, K
//! inputs, N outputs, this rank's slice `mine` of n_r rows, the P slices `slices` in rank
//! order). The collectives that move data between them are the layer's.
struct column_parallel_buffers {
  std::vector<float> gathered;   //!< P M x K inputs
  std::vector<float> local_out;  //!< P M x n_r outputs of this slice
  std::vector<float> exchange;   //!< receive (forward) or send / gather (backward) buffer
  std::vector<float> grad_slice; //!< P M x n_r output gradient of this slice
  std::vector<float> partial;    //!< P M x K partial input gradient
  //! @{
  //! Counts and displacements, elements, of the pending MPI_Ialltoallv or MPI_Iallgatherv.
  std::vector<int> counts, displs, send_counts, send_displs;
  //! @}

  //! Forward 2: Y_r = X W_r^T + b_r (`rows` = P M rows of the gathered inputs X) into
  //! local_out, P M x n_r; `bias` empty: no bias.
  template <gemm_backend Gemm>
  void forward(Gemm& gemm,
               std::size_t rows,
               std::size_t k,
               column_slice mine,
               std::span<const float> weight,
               std::span<const float> bias) {
    local_out.resize(rows * mine.rows);
    if (!bias.empty()) {
      for (std::size_t i = 0; i < rows; ++i) {
        std::copy(bias.begin(), bias.end(), local_out.begin() + i * mine.rows);
      }
    }
    gemm(gemm_call{transpose::no, transpose::yes, rows, mine.rows, k, 1.0f, gathered.data(), k,
                   weight.data(), k, bias.empty() ? 0.0f : 1.0f, local_out.data(), mine.rows});
  }

  //! Forward 3's layout: counts and displacements of the output exchange, and `exchange` sized
  //! to receive it (M x N with `all_to_all`, else P M x N).
  void lay_out_outputs(bool all_to_all,
                       std::size_t batch,
                       std::size_t n,
                       column_slice mine,
                       std::span<const column_slice> slices) {
    const std::size_t p = slices.size();
    counts.assign(p, 0);
    displs.assign(p, 0);
    if (all_to_all) {
      // send rows [s M, s M + M) of Y_r to rank s; receive M x n_s from each rank s
      send_counts.assign(p, static_cast<int>(batch * mine.rows));
      send_displs.resize(p);
      for (std::size_t s = 0; s < p; ++s) {
        send_displs[s] = static_cast<int>(s * batch * mine.rows);
        counts[s] = static_cast<int>(batch * slices[s].rows);
        displs[s] = static_cast<int>(batch * slices[s].offset);
      }
      exchange.resize(batch * n);
    } else {
      // every rank gathers every slice (P M x n_s each) and reads its own rows
      for (std::size_t s = 0; s < p; ++s) {
        counts[s] = static_cast<int>(p * batch * slices[s].rows);
        displs[s] = static_cast<int>(p * batch * slices[s].offset);
      }
      exchange.resize(p * batch * n);
    }
  }

  //! Once the output exchange completed: output[m][offset_s + c] (M x N) from rank s's block
  //! (M x n_s with `all_to_all`, or P M x n_s read at the rows of rank `rank`).
  void assemble_output(bool all_to_all,
                       std::size_t rank,
                       std::size_t batch,
                       std::size_t n,
                       std::span<const column_slice> slices,
                       std::span<float> output) const {
    for (std::size_t s = 0; s < slices.size(); ++s) {
      const column_slice sl = slices[s];
      const std::size_t first_row = all_to_all ? 0 : rank * batch;
      const float* block = exchange.data() + static_cast<std::size_t>(displs[s]);
      for (std::size_t m = 0; m < batch; ++m) {
        const float* from = block + (first_row + m) * sl.rows;
        std::copy(from, from + sl.rows, output.begin() + m * n + sl.offset);
      }
    }
  }

  //! Backward 1 (all_to_all): columns [offset_s, offset_s + n_s) of dY (`output_grad`, M x N)
  //! packed into `exchange` for rank s, with the counts and displacements; grad_slice sized to
  //! receive M x n_r from each rank s, which stacks into dY_r (P M x n_r) in global sample order.
  void pack_output_grad(std::size_t batch,
                        std::size_t n,
                        column_slice mine,
                        std::span<const column_slice> slices,
                        std::span<const float> output_grad) {
    const std::size_t p = slices.size();
    exchange.resize(batch * n);
    send_counts.resize(p);
    send_displs.resize(p);
    counts.assign(p, static_cast<int>(batch * mine.rows));
    displs.resize(p);
    for (std::size_t s = 0; s < p; ++s) {
      const column_slice sl = slices[s];
      send_counts[s] = static_cast<int>(batch * sl.rows);
      send_displs[s] = static_cast<int>(batch * sl.offset);
      displs[s] = static_cast<int>(s * batch * mine.rows);
      for (std::size_t m = 0; m < batch; ++m) {
        const float* from = output_grad.data() + m * n + sl.offset;
        std::copy(from, from + sl.rows, exchange.begin() + batch * sl.offset + m * sl.rows);
      }
    }
    grad_slice.resize(p * batch * mine.rows);
  }

  //! s2_allgather, once the output gradient is gathered: dY_r = columns [offset_r, offset_r +
  //! n_r) of the gathered `rows` (P M) x N gradient, into grad_slice.
  void extract_grad_slice(std::size_t rows, std::size_t n, column_slice mine) {
    grad_slice.resize(rows * mine.rows);
    for (std::size_t i = 0; i < rows; ++i) {
      const float* from = exchange.data() + i * n + mine.offset;
      std::copy(from, from + mine.rows, grad_slice.begin() + i * mine.rows);
    }
  }

  //! Backward 3: dW_r = s dY_r^T X (n_r x K) into `weight_grad`, db_r = s column sums of dY_r
  //! into `bias_grad` (empty: none), with s = `scale`, and the partial input gradient dY_r W_r
  //! (`rows` = P M rows x K) into partial.
  template <gemm_backend Gemm>
  void backward(Gemm& gemm,
                std::size_t rows,
                std::size_t k,
                column_slice mine,
                float scale,
                std::span<const float> weight,
                std::span<float> weight_grad,
                std::span<float> bias_grad) {
    // dW_r = s dY_r^T X: (n_r x PM) (PM x K)
    gemm(gemm_call{transpose::yes, transpose::no, mine.rows, k, rows, scale, grad_slice.data(),
                   mine.rows, gathered.data(), k, 0.0f, weight_grad.data(), k});
    if (!bias_grad.empty()) {
      std::fill(bias_grad.begin(), bias_grad.end(), 0.0f);
      for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t c = 0; c < mine.rows; ++c) {
          bias_grad[c] += grad_slice[i * mine.rows + c];
        }
      }
      for (float& v : bias_grad) {
        v *= scale;
      }
    }
    // partial dX = dY_r W_r: (PM x n_r) (n_r x K), summed over ranks into each rank's samples
    partial.resize(rows * k);
    gemm(gemm_call{transpose::no, transpose::no, rows, k, mine.rows, 1.0f, grad_slice.data(),
                   mine.rows, weight.data(), k, 0.0f, partial.data(), k});
  }
};

} // namespace gradcomp::mpi::detail
