// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Plan agreement across ranks: every rank checks that all ranks have
//! the same layer layout, then takes rank 0's grouping, at construction and, for a re-planning
//! policy, again when the pipeline re-plans from measured backward times. Needs gradcomp::mpi.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

namespace pipeline_detail {

//! FNV-1a (64 bit) over the layer sizes as little-endian 64-bit words: a fingerprint of the
//! layout. O(L).
[[nodiscard]] inline std::uint64_t layout_fingerprint(std::span<const std::size_t> numel) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const std::size_t n : numel) {
    auto v = static_cast<std::uint64_t>(n);
    for (int byte = 0; byte < 8; ++byte) {
      h ^= v & 0xffu;
      h *= 0x100000001b3ull;
      v >>= 8;
    }
  }
  return h;
}

//! @brief Checks that every rank of `comm` passed the same warm-up length (one MPI_Iallreduce,
//! MPI_MIN over {w, ~w}: 16 bytes). Collective. O(1).
//! @throws mpi_error on every rank if the values differ (naming the smallest and largest), or
//! on an MPI failure.
inline void agree_warmup(const communicator& comm, std::size_t warmup, const wait_policy& wait) {
  const auto w = static_cast<std::uint64_t>(warmup);
  std::array<std::uint64_t, 2> values = {w, ~w};
  MPI_Request request = MPI_REQUEST_NULL;
  detail::check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), 2, MPI_UINT64_T, MPI_MIN, comm.native(),
                               &request),
                "MPI_Iallreduce");
  mpi::wait(request, wait);
  if (values[0] != ~values[1]) {
    throw mpi_error(gradcomp::detail::concat(
        "gradcomp mpi: agreed_grouping: ranks have different warm-up iterations (from ", values[0],
        " to ", ~values[1], "; this rank has ", w,
        "): they would re-plan at different iterations"));
  }
}

} // namespace pipeline_detail

//! @brief The grouping every rank will use: rank 0's `proposal`, after checking that every rank
//! passed the same layer layout.
//!
//! 1. One MPI_Iallreduce (MPI_MIN over 4 uint64: layer count, layout fingerprint, and their
//!    complements, which yields both the minimum and the maximum) tells every rank whether all
//!    layouts agree; if not, every rank throws (no rank hangs in a later collective).
//! 2. MPI_Ibcast of rank 0's group count, then of its group end positions (8 bytes per group).
//! Every rank validates what it received as a grouping of its layers before returning it.
//!
//! @collective
//!
//! Only rank 0's `proposal` is read (the others may pass an empty one). Waits through `wait`.
//! O(L + G).
//! @wirebytes 32 per rank in the check, 8 + 8 G broadcast.
//! @throws std::invalid_argument on rank 0 if its proposal is not a valid grouping of the
//! layers (checked after step 1, so every rank throws: the others get mpi_error naming the
//! refusal); mpi_error on every rank if the layouts differ (naming the smallest and largest
//! layer count, or "same count, different sizes"), on an MPI failure, or if the grouping
//! received is not valid for this rank's layers.
[[nodiscard]] inline schedule::grouping agree_grouping(const communicator& comm,
                                                       std::span<const std::size_t> layer_numel,
                                                       const schedule::grouping& proposal,
                                                       const wait_policy& wait = {}) {
  const auto layers = static_cast<std::uint64_t>(layer_numel.size());
  const std::uint64_t fingerprint = pipeline_detail::layout_fingerprint(layer_numel);
  std::array<std::uint64_t, 4> check_values = {layers, fingerprint, ~layers, ~fingerprint};
  MPI_Request request = MPI_REQUEST_NULL;
  detail::check(MPI_Iallreduce(MPI_IN_PLACE, check_values.data(), 4, MPI_UINT64_T, MPI_MIN,
                               comm.native(), &request),
                "MPI_Iallreduce");
  mpi::wait(request, wait);
  const std::uint64_t min_layers = check_values[0];
  const std::uint64_t max_layers = ~check_values[2];
  if (min_layers != max_layers) {
    throw mpi_error(gradcomp::detail::concat(
        "gradcomp mpi: agree_grouping: ranks have different layer layouts (from ", min_layers,
        " to ", max_layers, " layers; this rank has ", layers, ")"));
  }
  if (check_values[1] != ~check_values[3]) {
    throw mpi_error(gradcomp::detail::concat(
        "gradcomp mpi: agree_grouping: ranks have different layer layouts (", layers,
        " layers on every rank, but different layer sizes)"));
  }

  // rank 0 sends its group ends; a count of 0 means its proposal was invalid
  std::uint64_t count = 0;
  std::vector<std::uint64_t> ends;
  const bool root = comm.rank() == 0;
  if (root && schedule::is_valid_grouping(proposal, layer_numel.size())) {
    count = proposal.size();
    for (const schedule::layer_group& g : proposal) {
      ends.push_back(g.end);
    }
  }
  detail::check(MPI_Ibcast(&count, 1, MPI_UINT64_T, 0, comm.native(), &request), "MPI_Ibcast");
  mpi::wait(request, wait);
  if (count == 0) {
    if (root) {
      schedule::validate(proposal, layer_numel.size()); // throws std::invalid_argument
    }
    throw mpi_error(
        "gradcomp mpi: agree_grouping: rank 0's proposed grouping is not valid for the layers");
  }
  if (count > layers) {
    throw mpi_error(gradcomp::detail::concat("gradcomp mpi: agree_grouping: received ", count,
                                             " groups for ", layers, " layers"));
  }
  ends.resize(static_cast<std::size_t>(count));
  detail::check(
      MPI_Ibcast(ends.data(), static_cast<int>(count), MPI_UINT64_T, 0, comm.native(), &request),
      "MPI_Ibcast");
  mpi::wait(request, wait);
  schedule::grouping agreed;
  std::uint64_t begin = 0;
  for (const std::uint64_t end : ends) {
    agreed.push_back({static_cast<std::size_t>(begin), static_cast<std::size_t>(end)});
    begin = end;
  }
  if (!schedule::is_valid_grouping(agreed, layer_numel.size())) {
    throw mpi_error("gradcomp mpi: agree_grouping: the grouping received from rank 0 is not "
                    "valid for this rank's layers");
  }
  return agreed;
}

//! @brief A grouping policy that plans on rank 0 only (with the wrapped policy) and gives every
//! rank that plan through agree_grouping(): use it whenever the wrapped policy could decide
//! differently on different ranks (planned_grouping with per-rank measured times).
//!
//! Collective: groups() is called by the pipeline's constructor, so every rank must construct
//! its pipeline at the same point relative to other collectives on `comm`.
//!
//! Re-planning: if Policy models pipeline_policy::replanning_policy, so does agreed_grouping.
//! groups() then first checks (one more 16-byte allreduce) that every rank's
//! warmup_iterations() is the same, and replan() plans on rank 0 from rank 0's measured times
//! and gives every rank that grouping through agree_grouping(): a collective, called by every
//! rank's pipeline at the end of the same finish() (the W-th successful iteration, W being the
//! same everywhere), so the ranks switch groupings together. `comm` must then outlive the
//! pipeline, and no other thread may use MPI on `comm` during that finish().
//! @throws as agree_grouping and the wrapped policy do; mpi_error on every rank if the ranks'
//! warm-up lengths differ.
template <gradcomp::pipeline_policy::grouping_policy Policy>
struct agreed_grouping {
  using grouping_concept = gradcomp::grouping_policy_tag; //!< opts in (grouping_policy).
  const communicator* comm = nullptr; //!< required; must outlive the calls (the pipeline).
  //! The wrapped grouping policy: only rank 0's plans it (the other ranks' copies are asked
  //! for their warm-up length only).
  Policy policy{};
  //! How the collective's waits complete (see wait_policy.hpp).
  wait_policy wait{};

  //! Rank 0's `policy.groups(numel)` on every rank. Collective (see the struct). O(plan + L).
  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    gradcomp::detail::require(comm != nullptr, "agreed_grouping: no communicator");
    if constexpr (gradcomp::pipeline_policy::replanning_policy<Policy>) {
      pipeline_detail::agree_warmup(*comm, static_cast<std::size_t>(policy.warmup_iterations()),
                                    wait);
    }
    return agree_on_root(numel, [&] { return policy.groups(numel); });
  }

  //! @brief Rank 0's `policy.replan(numel, backward_seconds)` (its own measured times; the
  //! other ranks' are not read) on every rank. Collective (see the struct). O(plan + L).
  //! @throws as groups(): if rank 0's replan() throws, rank 0 rethrows it and the others
  //! throw mpi_error (nobody hangs).
  [[nodiscard]] schedule::grouping replan(std::span<const std::size_t> numel,
                                          std::span<const double> backward_seconds)
      const requires gradcomp::pipeline_policy::replanning_policy<Policy> {
    gradcomp::detail::require(comm != nullptr, "agreed_grouping: no communicator");
    return agree_on_root(numel, [&] { return policy.replan(numel, backward_seconds); });
  }

  //! The wrapped policy's warm-up length (this rank's; groups() checked it is the same on
  //! every rank). Not collective. O(1).
  [[nodiscard]] std::size_t
  warmup_iterations() const requires gradcomp::pipeline_policy::replanning_policy<Policy> {
    return static_cast<std::size_t>(policy.warmup_iterations());
  }

private:
  // `plan()` on rank 0, agreed on every rank; a failure on rank 0 makes every rank throw.
  template <class Plan>
  [[nodiscard]] schedule::grouping agree_on_root(std::span<const std::size_t> numel,
                                                 Plan&& plan) const {
    schedule::grouping proposal;
    std::exception_ptr error;
    if (comm->rank() == 0) {
      try {
        proposal = std::forward<Plan>(plan)();
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (error) {
      // every rank must still take part: the empty proposal makes all of them throw, rank 0
      // then rethrows the planner's own error
      try {
        (void)agree_grouping(*comm, numel, schedule::grouping{}, wait);
      } catch (...) {
      }
      std::rethrow_exception(error);
    }
    return agree_grouping(*comm, numel, proposal, wait);
  }
};

static_assert(gradcomp::pipeline_policy::replanning_policy<
              agreed_grouping<gradcomp::pipeline_policy::planned_grouping>>);
static_assert(!gradcomp::pipeline_policy::replanning_policy<
              agreed_grouping<gradcomp::pipeline_policy::fixed_grouping>>);

} // namespace gradcomp::mpi
