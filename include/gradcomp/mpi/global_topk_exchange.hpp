// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::global_topk_exchange: a sparse allreduce that keeps a global selection
//! (gTop-k, Ok-Topk) as a pipeline transport with error feedback on the global selection.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::mpi {

//! @brief Averages one message per rank with a global-selection sparse allreduce `Allreduce`
//! (mpi::gtopk_allreduce or mpi::oktopk_allreduce: constructed from (communicator, options),
//! called as `allreduce(local, k, global)`, reporting bytes_sent() / bytes_received()): a
//! pipeline_policy::transport and pipeline_policy::selecting_transport. Each operation keeps the
//! global selection G of about k = k_for_density(n, density) of the group's n elements and
//! writes the sum of every rank's sent values there, divided by P, into the average (0
//! elsewhere; bit-identical on every rank). The pipeline gives each rank's sent values outside G
//! back to their residuals (selected_indices()), so error feedback stays exact. Pair it with a
//! sparse compressor at the same density (exact_top_k, reused_threshold, ...).
//!
//! start() runs the whole exchange (its transfers complete through the options' wait policy);
//! test() and wait() then return at once. Bytes per rank: the allreduce's. Collective: every rank
//! must call start() with messages of the same dense length and build the exchange with the same
//! density (checked: the ranks' k must agree), in the same order relative to other collectives
//! on the communicator. One operation at a time.
//! @throws std::invalid_argument from the constructor if density is outside (0, 1], from
//! start() if the average's length differs from the message's; mpi_error from start() on a
//! thread other than the one that initialised MPI when MPI provides less than
//! MPI_THREAD_SERIALIZED (checked before any MPI call); what the allreduce throws.
template <class Allreduce>
class global_topk_exchange {
public:
  using transport_concept = gradcomp::transport_tag; //!< opts in (pipeline_policy::transport).
  using options = typename Allreduce::options;       //!< The allreduce's options.
  using allreduce_type = Allreduce;                  //!< The sparse allreduce it runs.

  //! @param comm    the communicator; must outlive this object.
  //! @param density fraction of each message's elements kept globally, in (0, 1].
  //! @param o       the allreduce's options (tags, wait policy, ...).
  global_topk_exchange(const communicator& comm, double density, options o = {})
      : comm_(&comm), allreduce_(comm, o), density_(density) {
    gradcomp::detail::require(density > 0.0 && density <= 1.0, "global_topk_exchange: density ",
                              density, " is outside (0, 1]");
  }

  //! Runs the exchange of `m`; `average` (m's dense length) gets the mean over the ranks on the
  //! global selection, 0 elsewhere. Collective. O(n) to write the average, plus the exchange.
  void start(const sparse_message& m, std::span<float> average) {
    detail::require_thread_level_here("global_topk_exchange");
    gradcomp::detail::require(average.size() == m.dense_length_elements,
                              "global_topk_exchange: the average has ", average.size(),
                              " elements, the message ", m.dense_length_elements);
    selected_valid_ = false;
    const std::size_t n = average.size();
    std::fill(average.begin(), average.end(), 0.0f);
    if (n == 0) {
      global_.clear(0);
      selected_valid_ = true;
      return;
    }
    allreduce_(m, k_for_density(n, density_), global_);
    const auto p = static_cast<float>(comm_->size());
    for (std::size_t j = 0; j < global_.indices.size(); ++j) {
      average[global_.indices[j]] = global_.values[j] / p;
    }
    selected_valid_ = true;
  }
  //! True: start() completed the operation.
  bool test() { return true; }
  //! Returns at once (start() completed the operation).
  void wait() {}

  //! The global selection G of the last completed operation (indices ascending), or nullptr
  //! before one completed. O(1).
  [[nodiscard]] const std::vector<std::uint32_t>* selected_indices() const noexcept {
    return selected_valid_ ? &global_.indices : nullptr;
  }
  //! Bytes this rank sent in the last operation (the allreduce's count). O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return allreduce_.bytes_sent(); }
  //! Bytes this rank received in the last operation. O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return allreduce_.bytes_received(); }
  //! The allreduce (its diagnostics). O(1).
  [[nodiscard]] const Allreduce& allreduce() const noexcept { return allreduce_; }

private:
  const communicator* comm_;
  Allreduce allreduce_;
  double density_;
  sparse_message global_;
  bool selected_valid_ = false;
};

} // namespace gradcomp::mpi
