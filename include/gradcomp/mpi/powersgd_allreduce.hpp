// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::powersgd_allreduce: PowerSGD (Vogels et al., NeurIPS 2019) over a set
//! of layers: two ring allreduces of the low-rank factors per iteration, error feedback and warm
//! start per layer, identical results on every rank.
#pragma once

#include <gradcomp/compressor/powersgd.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/linalg/gemm.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/agreement.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>

#include <mpi.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

//! @brief The matrix view of one layer for PowerSGD: rows x cols elements (PyTorch's hook views a
//! tensor of shape (d0, d1, ...) as d0 x (d1 ...); a vector as n x 1, which never compresses).
struct powersgd_shape {
  std::size_t rows = 0; //!< the first dimension.
  std::size_t cols = 1; //!< the product of the others.
};

//! @brief Averages the gradients of a set of layers over all ranks with PowerSGD (Vogels,
//! Karimireddy and Jaggi, NeurIPS 2019; the scheme of PyTorch's powerSGD_hook on one bucket):
//! layers that compress (gradcomp::powersgd_compresses) go through their powersgd_layer,
//! the others uncompressed. Per call:
//! 1. every compressed layer's P = (residual + gradient) Q and every uncompressed layer's
//!    gradient, concatenated in layer order, are summed by one ring allreduce and divided by P
//!    ranks: the uncompressed layers' averages, and the mean P;
//! 2. each P is orthonormalised and Q = M^T P computed; all Q are averaged by a second ring
//!    allreduce;
//! 3. each compressed layer's average is P Q^T, its residual M - P Q^T (powersgd_layer::finish).
//! The ring allreduce's sums are bit-identical on every rank, so are the orthonormalised P, the
//! mean Q and every average. Bytes sent per rank: 2 (P-1)/P x 4 x (sum of rows r + the
//! uncompressed elements) + 2 (P-1)/P x 4 x (sum of cols r): bytes_sent().
//!
//! Collective: the constructor (one small allreduce that checks every rank passes the same
//! shapes and options, and carries each rank's own checks) and every call (one more, for the
//! spans' lengths, before the rings), with the same layers in the same order relative to other
//! collectives on the communicator. Blocking (every transfer completes through the ring's wait
//! policy). Not in checkpoints (residuals and Q start afresh).
//! @tparam G a gemm_backend (blas::cblas_gemm).
//! @throws mpi_error on every rank (detail::agree_arguments), naming the first rank with a
//! problem: options that check_powersgd_options rejects or a rate that is not finite, an empty
//! layer, ranks whose shapes or options differ; from a call, span counts or lengths that differ
//! from the shapes. mpi_error if MPI fails.
template <gemm_backend G>
class powersgd_allreduce {
public:
  //! @param comm   the communicator; must outlive this object.
  //! @param shapes each layer's matrix view, in the order of the calls' spans.
  //! @param o      PowerSGD's options (layer l's starting Q is seeded by (o.seed, l)).
  //! @param ring   the ring allreduce's options (tags, segments, wait policy).
  //! @param gemm   the GEMM backend.
  powersgd_allreduce(const communicator& comm,
                     std::span<const powersgd_shape> shapes,
                     const powersgd_options& o,
                     ring_allreduce_options ring = {},
                     G gemm = G{})
      : comm_(&comm), ring_(comm, ring), wait_(ring.wait) {
    std::string problem;
    try {
      check_powersgd_options(o);
      gradcomp::detail::require(std::isfinite(o.min_compression_rate),
                                "powersgd: min_compression_rate ", o.min_compression_rate,
                                " is not finite");
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
    std::uint64_t fingerprint = 1469598103934665603ull; // FNV-1a over shapes and options
    const auto mix = [&](std::uint64_t v) { fingerprint = (fingerprint ^ v) * 1099511628211ull; };
    mix(o.rank);
    mix(std::bit_cast<std::uint64_t>(o.min_compression_rate));
    mix(o.warm_start ? 1 : 0);
    mix(o.seed);
    for (std::size_t l = 0; l < shapes.size() && problem.empty(); ++l) {
      const powersgd_shape& s = shapes[l];
      if (s.rows < 1 || s.cols < 1) {
        problem = gradcomp::detail::concat("layer ", l, " is ", s.rows, " x ", s.cols);
        break;
      }
      mix(s.rows);
      mix(s.cols);
      layer_state& layer =
          layers_.emplace_back(layer_state{s, std::nullopt, p_total_, 0, q_total_});
      if (powersgd_compresses(s.rows, s.cols, o)) {
        layer.compressed.emplace(s.rows, s.cols, o, l, gemm);
        layer.first_elements = layer.compressed->p_elements();
        q_total_ += layer.compressed->q_elements();
      } else {
        layer.first_elements = s.rows * s.cols;
      }
      p_total_ += layer.first_elements;
    }
    detail::agree_arguments(comm, wait_, "powersgd_allreduce",
                            {{"layers", shapes.size()},
                             {"the fingerprint of the layer shapes and options", fingerprint >> 1}},
                            problem);
    first_.resize(p_total_);
    second_.resize(q_total_);
  }

  //! Averages `gradients[l]` (rows x cols of layer l) over the ranks into `averages[l]`.
  //! Collective: one small allreduce agreeing the spans are right on every rank, then the two
  //! ring allreduces. @throws as the class comment says.
  void operator()(std::span<const std::span<const float>> gradients,
                  std::span<const std::span<float>> averages) {
    std::string problem;
    if (gradients.size() != layers_.size() || averages.size() != layers_.size()) {
      problem = gradcomp::detail::concat(gradients.size(), " gradients and ", averages.size(),
                                         " averages for ", layers_.size(), " layers");
    }
    for (std::size_t l = 0; l < layers_.size() && problem.empty(); ++l) {
      const std::size_t n = layers_[l].shape.rows * layers_[l].shape.cols;
      if (gradients[l].size() != n || averages[l].size() != n) {
        problem =
            gradcomp::detail::concat("layer ", l, " has ", n, " elements, its gradient ",
                                     gradients[l].size(), ", its average ", averages[l].size());
      }
    }
    detail::agree_arguments(*comm_, wait_, "powersgd_allreduce", {}, problem);
    const auto inverse = 1.0f / static_cast<float>(comm_->size());
    for (std::size_t l = 0; l < layers_.size(); ++l) { // P, or the gradient itself
      layer_state& layer = layers_[l];
      if (layer.compressed) {
        layer.compressed->compute_p(gradients[l], first(layer));
      } else {
        std::copy(gradients[l].begin(), gradients[l].end(), first(layer).begin());
      }
    }
    ring_(std::span<float>(first_));
    for (float& v : first_) {
      v *= inverse;
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) { // Q, or the uncompressed average
      layer_state& layer = layers_[l];
      if (layer.compressed) {
        layer.compressed->compute_q(first(layer), second(layer));
      } else {
        std::copy(first(layer).begin(), first(layer).end(), averages[l].begin());
      }
    }
    ring_(std::span<float>(second_));
    for (float& v : second_) {
      v *= inverse;
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      layer_state& layer = layers_[l];
      if (layer.compressed) {
        layer.compressed->finish(first(layer), second(layer), averages[l]);
      }
    }
  }

  //! Layer l's PowerSGD state, or nullptr if it is averaged uncompressed. O(1).
  [[nodiscard]] const powersgd_layer<G>* layer(std::size_t l) const {
    return layers_.at(l).compressed ? &*layers_[l].compressed : nullptr;
  }
  //! Floats of the first allreduce (all P plus the uncompressed layers). O(1).
  [[nodiscard]] std::size_t first_elements() const noexcept { return p_total_; }
  //! Floats of the second allreduce (all Q). O(1).
  [[nodiscard]] std::size_t second_elements() const noexcept { return q_total_; }
  //! Bytes this rank sends per call: the two ring allreduces' (ring_allreduce::bytes_sent of
  //! the first and second elements; about 2 (P-1)/P x 4 x their sum). O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept {
    return ring_allreduce::bytes_sent(p_total_, comm_->size(), comm_->rank()) +
           ring_allreduce::bytes_sent(q_total_, comm_->size(), comm_->rank());
  }

private:
  struct layer_state {
    powersgd_shape shape;
    std::optional<powersgd_layer<G>> compressed;
    std::size_t first_offset = 0; // its share of the first allreduce: P, or its gradient
    std::size_t first_elements = 0;
    std::size_t second_offset = 0; // its Q in the second (compressed layers only)
  };

  std::span<float> first(const layer_state& layer) {
    return std::span<float>(first_).subspan(layer.first_offset, layer.first_elements);
  }
  std::span<float> second(const layer_state& layer) {
    return std::span<float>(second_).subspan(layer.second_offset, layer.compressed->q_elements());
  }

  const communicator* comm_;
  ring_allreduce ring_;
  wait_policy wait_;
  std::vector<layer_state> layers_;
  std::size_t p_total_ = 0;
  std::size_t q_total_ = 0;
  std::vector<float> first_;
  std::vector<float> second_;
};

} // namespace gradcomp::mpi
