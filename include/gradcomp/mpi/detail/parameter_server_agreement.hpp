// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The agreement that opens a gradcomp::mpi::parameter_server round: the header alltoall
//! and the servers' verdict on the stated push sizes, after which every rank throws together
//! (or none does) before any payload moves.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/parameter_server_options.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief parameter_server's agreement (step 1 of its class comment): one MPI_Ialltoall of 64
//! bytes per rank pair (every rank's dense length, status and options, and the byte size of its
//! push part for the destination), checked the same way on every rank; then one 8-byte
//! MPI_Iallreduce (MAX) of every server's verdict on the push sizes stated to it.
class parameter_server_agreement {
public:
  //! Starts the alltoall: this rank's header to every rank j holds `length`, `status` (0: its
  //! push is valid), the options that must agree, and part_bytes(j), the size of its push part
  //! for rank j (0 when j is no server, is this rank, or the push is invalid). Collective.
  //! @throws mpi_error if posting fails.
  template <class PartBytes>
  void start(const communicator& comm,
             std::size_t length,
             std::int64_t status,
             const parameter_server_options& o,
             PartBytes part_bytes,
             MPI_Request& request) {
    const int p = comm.size();
    out_.assign(static_cast<std::size_t>(p) * fields, 0);
    in_.assign(static_cast<std::size_t>(p) * fields, 0);
    for (int j = 0; j < p; ++j) {
      std::int64_t* h = &out_[static_cast<std::size_t>(j) * fields];
      h[f_length] = static_cast<std::int64_t>(length);
      h[f_status] = status;
      h[f_servers] = o.servers;
      h[f_placement] = static_cast<std::int64_t>(o.placement);
      h[f_tag] = o.tag_base;
      h[f_max_bytes] = static_cast<std::int64_t>(o.max_message_bytes);
      h[f_pull] = static_cast<std::int64_t>(o.pull);
      h[f_part_bytes] = part_bytes(j);
    }
    check(MPI_Ialltoall(out_.data(), static_cast<int>(fields), MPI_INT64_T, in_.data(),
                        static_cast<int>(fields), MPI_INT64_T, comm.native(), &request),
          "MPI_Ialltoall");
  }

  //! Once the alltoall completed: the same checks, in the same order, on every rank's copy of
  //! every rank's header, so every rank throws mpi_error (or none does): different options,
  //! different lengths, a worker's invalid push (`problem`, on rank `rank`, says why).
  void check_headers(int rank, const std::string& problem) const {
    const std::size_t p = in_.size() / fields;
    const std::int64_t* first = in_.data();
    for (std::size_t j = 0; j < p; ++j) {
      const std::int64_t* h = &in_[j * fields];
      if (h[f_servers] != first[f_servers] || h[f_placement] != first[f_placement] ||
          h[f_tag] != first[f_tag] || h[f_max_bytes] != first[f_max_bytes] ||
          h[f_pull] != first[f_pull]) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: ranks pass different options (rank 0: ",
            describe(first), "; rank ", j, ": ", describe(h), ")"));
      }
    }
    for (std::size_t j = 0; j < p; ++j) {
      const std::int64_t length = in_[j * fields + f_length];
      if (length != first[f_length]) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: ranks pass different lengths (rank 0: ",
            first[f_length], ", rank ", j, ": ", length, " elements)"));
      }
    }
    for (std::size_t j = 0; j < p; ++j) {
      if (in_[j * fields + f_status] != 0) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: worker rank ", j, " passed an invalid push",
            static_cast<int>(j) == rank ? ": " + problem
                                        : std::string(" (its own exception says why)")));
      }
    }
  }

  //! The size of the push part rank `source` stated to this rank, bytes (after the alltoall).
  [[nodiscard]] std::int64_t stated_part_bytes(int source) const noexcept {
    return in_[static_cast<std::size_t>(source) * fields + f_part_bytes];
  }

  //! Starts the verdict: a server (`shard` elements; workers are ranks 0 .. workers - 1)
  //! validates the push sizes its workers stated (only it receives them) before they size any
  //! buffer, each within [wire_header_bytes, max_encoded_bytes(shard)], and all ranks learn
  //! every server's verdict through the MAX of a code naming the first server and worker at
  //! fault. Collective. @throws mpi_error if posting fails.
  void start_verdict(
      const communicator& comm, bool server, std::size_t shard, int workers, MPI_Request& request) {
    const int p = comm.size();
    const int me = comm.rank();
    verdict_ = 0;
    problem_.clear();
    if (server) {
      const std::uint64_t most = max_encoded_bytes(shard);
      for (int source = 0; source < workers && verdict_ == 0; ++source) {
        if (source == me) {
          continue;
        }
        const std::int64_t stated = stated_part_bytes(source);
        if (stated < static_cast<std::int64_t>(wire_header_bytes) ||
            static_cast<std::uint64_t>(stated) > most) {
          // largest code for the lowest server rank, then the lowest worker: the MAX names the
          // same culprit everywhere
          verdict_ = static_cast<std::int64_t>(p - me) * (p + 1) + (p - source);
          problem_ = gradcomp::detail::concat(
              "worker rank ", source, " states a push of ", stated, " bytes for a shard of ", shard,
              " elements, outside [", wire_header_bytes, ", ", most, "]");
        }
      }
    }
    check(MPI_Iallreduce(MPI_IN_PLACE, &verdict_, 1, MPI_INT64_T, MPI_MAX, comm.native(), &request),
          "MPI_Iallreduce");
  }

  //! Once the allreduce completed: throws gradcomp::wire_error on every rank if a server
  //! rejected a stated push size (the server's own message says why).
  void check_verdict(const communicator& comm) const {
    if (verdict_ == 0) {
      return;
    }
    const int p = comm.size();
    const auto server = static_cast<int>(p - verdict_ / (p + 1));
    const auto worker = static_cast<int>(p - verdict_ % (p + 1));
    throw wire_error(gradcomp::detail::concat(
        "gradcomp wire: parameter_server: server rank ", server,
        " rejected the push size stated by worker rank ", worker,
        server == comm.rank() ? ": " + problem_
                              : std::string(" (the server's exception says why)")));
  }

private:
  // Fields of the per-destination header (int64 each).
  static constexpr std::size_t f_length = 0, f_status = 1, f_servers = 2, f_placement = 3,
                               f_tag = 4, f_max_bytes = 5, f_pull = 6, f_part_bytes = 7, fields = 8;

  [[nodiscard]] static std::string describe(const std::int64_t* h) {
    return gradcomp::detail::concat(
        "servers ", h[f_servers],
        h[f_placement] == static_cast<std::int64_t>(server_placement::colocated) ? " co-located"
                                                                                 : " dedicated",
        ", tag_base ", h[f_tag], ", max_message_bytes ", h[f_max_bytes], ", pull ",
        h[f_pull] == static_cast<std::int64_t>(pull_format::dense) ? "dense" : "adaptive");
  }

  std::vector<std::int64_t> out_, in_; // the alltoall's headers, fields per rank
  std::int64_t verdict_ = 0;
  std::string problem_; // this server's reason for its verdict
};

} // namespace gradcomp::mpi::detail
