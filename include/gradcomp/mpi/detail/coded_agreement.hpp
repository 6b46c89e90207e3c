// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The agreement that starts gradcomp::mpi::coded_allreduce: two nonblocking allreduces,
//! started together, after which every rank knows whether any rank passed malformed arguments,
//! other lengths or other options, so that all of them throw together, and the largest |value|
//! that sizes the fixed-point scale.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

namespace gradcomp::mpi::detail {

//! @brief coded_allreduce's agreement (docs/coded.md; step 1 of coded_allreduce): the lengths
//! (length_agreement, 16 bytes) and, in one MPI_MAX allreduce of 18 doubles, the largest |value|
//! over this rank's parts (fixed point only), a malformed-arguments flag and every option as
//! (x, -x).
class coded_agreement {
public:
  //! Largest |value| over the parts, +inf if any value is NaN or infinite (so that every rank
  //! learns it from the MAX allreduce). O(total elements); never throws.
  [[nodiscard]] static double
  largest_magnitude(std::span<const std::span<const float>> parts) noexcept {
    float largest = 0.0f;
    for (const std::span<const float> part : parts) {
      for (const float v : part) {
        const float a = std::fabs(v);
        if (!(a <= std::numeric_limits<float>::max())) {
          return std::numeric_limits<double>::infinity();
        }
        largest = std::max(largest, a);
      }
    }
    return static_cast<double>(largest);
  }

  //! Starts both allreduces, the lengths' into `lengths` first, then the rest into `values`,
  //! with this rank's length `d`, options, largest |value| and whether its arguments are
  //! malformed. Collective. @throws mpi_error if posting fails.
  void start(const communicator& comm,
             std::size_t d,
             const coded_allreduce_options& o,
             double max_abs,
             bool malformed,
             MPI_Request& lengths,
             MPI_Request& values) {
    agreed_[0] = max_abs;
    agreed_[1] = malformed ? 1.0 : 0.0;
    const std::array<double, setting_pairs> mine = {
        static_cast<double>(o.redundancy),
        static_cast<double>(static_cast<int>(o.coding)),
        static_cast<double>(static_cast<int>(o.schedule)),
        static_cast<double>(static_cast<int>(o.variant)),
        static_cast<double>(o.tag_base),
        static_cast<double>(o.tag_range),
        static_cast<double>(o.max_requests),
        o.uncoded ? 1.0 : 0.0};
    for (std::size_t k = 0; k < setting_pairs; ++k) {
      agreed_[2 + 2 * k] = mine[k];
      agreed_[3 + 2 * k] = -mine[k];
    }
    lengths_.start(comm, d, lengths);
    check(MPI_Iallreduce(MPI_IN_PLACE, agreed_.data(), static_cast<int>(agreed_.size()), MPI_DOUBLE,
                         MPI_MAX, comm.native(), &values),
          "MPI_Iallreduce");
  }

  //! Once both completed, the checks that fail on every rank together, in this order: this
  //! rank's malformed arguments (`local_error`, not empty: std::invalid_argument naming them),
  //! another rank's (mpi_error), different lengths, different options (mpi_error naming the
  //! first option that differs and its range).
  void verify(const std::string& local_error) const {
    if (!local_error.empty()) {
      throw std::invalid_argument("gradcomp: " + local_error);
    }
    if (agreed_[1] != 0.0) {
      throw mpi_error(
          "gradcomp mpi: coded_allreduce: another rank passed malformed arguments (a wrong "
          "number of part gradients, or a part whose length differs from its output); that rank "
          "throws std::invalid_argument naming them");
    }
    lengths_.verify("coded_allreduce");
    static constexpr std::array<const char*, setting_pairs> names = {
        "redundancy", "coding",    "schedule",     "variant",
        "tag_base",   "tag_range", "max_requests", "uncoded"};
    for (std::size_t k = 0; k < setting_pairs; ++k) {
      const double largest = agreed_[2 + 2 * k];
      const double smallest = -agreed_[3 + 2 * k];
      if (largest != smallest) {
        throw mpi_error(gradcomp::detail::concat("gradcomp mpi: coded_allreduce: ranks pass "
                                                 "different options: ",
                                                 names[k], " from ", smallest, " to ", largest));
      }
    }
  }

  //! The largest |value| over every rank's parts (+inf if any holds NaN or an infinity), once
  //! the allreduce completed.
  [[nodiscard]] double largest() const noexcept { return agreed_[0]; }

private:
  // agreed_: [max |value|, malformed flag, then (x, -x) for each option], all under MPI_MAX
  static constexpr std::size_t setting_pairs = 8;
  length_agreement lengths_;
  std::array<double, 2 + 2 * setting_pairs> agreed_{};
};

} // namespace gradcomp::mpi::detail
