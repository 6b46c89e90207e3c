// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::native_allreduce: the MPI library's own allreduce (MPI_Iallreduce,
//! sum of floats, in place) behind gradcomp's nonblocking interface and wait policy. The dense
//! baseline of MPI itself (what PyTorch DDP's buckets become with an MPI backend).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <span>

namespace gradcomp::mpi {

//! @brief Options of native_allreduce. Every rank must pass the same options.
struct native_allreduce_options {
  //! Check first that every rank passes the same length (one 16-byte allreduce; a mismatch
  //! makes every rank throw instead of hanging, which MPI_Allreduce itself would not detect).
  bool check_lengths = true;
  //! Largest piece handed to one MPI_Iallreduce, bytes (>= 4; capped at INT_MAX floats since
  //! MPI counts are int). Pieces run one after another.
  std::size_t piece_bytes = std::size_t{1} << 30;
  //! How waits complete (see wait_policy.hpp): never MPICH's busy-polling blocking call.
  wait_policy wait{};
};

//! @brief In-place sum of a float vector over all ranks with MPI_Iallreduce (MPI_SUM), the
//! algorithm being the MPI library's choice (MPICH picks recursive doubling, Rabenseifner's
//! reduce-scatter + allgather, or a ring by size and rank count), completed by MPI_Test through
//! the wait policy.
//!
//! Collective: every rank of the communicator must call start() (or operator()) with a vector
//! of the same length, in the same order relative to other collectives on it. Any rank count
//! and length (0 included). Bytes per rank: the library's; at least the bandwidth-optimal
//! 2 (P-1)/P x 4n each way. Results are identical on every rank when the library reduces in
//! the same order on every rank, which MPI recommends but does not require (MPICH's algorithms
//! for commutative operations do); the order may differ from a ring's, so results can differ
//! from gradcomp::mpi::ring_allreduce in the last bits. Time: alpha-beta of the chosen
//! algorithm (S4's ring formula is a lower bound on the bandwidth term). Nonblocking use:
//! start(), then test() until true, or wait(); the vector must not be touched until then. One
//! operation at a time per object.
//! @throws std::invalid_argument if piece_bytes < 4; mpi_error on an MPI failure or when ranks
//! pass different lengths (on every rank).
class native_allreduce : public detail::phased_operation<native_allreduce> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "native_allreduce";
  //! The options struct (native_allreduce_options).
  using options = native_allreduce_options;

  //! Not collective (no MPI call): keeps `comm` (which must outlive the object) and `o`.
  //! @throws std::invalid_argument if o.piece_bytes < 4.
  explicit native_allreduce(const communicator& comm, options o = {}) : comm_(&comm), options_(o) {
    gradcomp::detail::require(o.piece_bytes >= sizeof(float), "native_allreduce: piece_bytes ",
                              o.piece_bytes, " is below the minimum 4");
    piece_elements_ = std::min<std::size_t>(o.piece_bytes / sizeof(float), INT_MAX);
  }
  native_allreduce(const native_allreduce&) = delete;
  native_allreduce& operator=(const native_allreduce&) = delete;
  // An operation dropped mid-way (an exception, or destruction) completes what is pending: the
  // length agreement, or the current piece's MPI_Iallreduce, collectives, waited for
  // (detail::abandon); each completes once every rank has posted it, as each rank does while it
  // runs the operation (a rank posts piece i + 1 right after piece i completed).
  ~native_allreduce() { reset(); }

  //! Starts the in-place sum of `data` (n floats).
  void start(std::span<float> data) {
    const auto starting = begin_operation();
    data_ = data;
    offset_ = 0;
    agree_lengths(*comm_, data.size(), options_.check_lengths, &native_allreduce::sum_piece);
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

private:
  [[nodiscard]] std::size_t piece_length() const noexcept {
    return std::min(piece_elements_, data_.size() - offset_);
  }

  // One MPI_Iallreduce per piece, one piece after the other.
  void sum_piece() {
    if (comm_->size() == 1 || offset_ >= data_.size()) {
      return;
    }
    detail::check(MPI_Iallreduce(MPI_IN_PLACE, data_.data() + offset_,
                                 static_cast<int>(piece_length()), MPI_FLOAT, MPI_SUM,
                                 comm_->native(), collective()),
                  "MPI_Iallreduce");
    then(&native_allreduce::next_piece);
  }

  void next_piece() {
    offset_ += piece_length();
    sum_piece();
  }

  const communicator* comm_;
  options options_;
  std::size_t piece_elements_ = 0;
  std::span<float> data_;
  std::size_t offset_ = 0;
};

} // namespace gradcomp::mpi
