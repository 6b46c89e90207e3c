// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::gtopk_allreduce: gTop-k sparse allreduce (Shi et al. 2019), per-rank
//! traffic O(k log P) instead of the allgather's O(k P), with error feedback that stays exact.
#pragma once

#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/cost/gtopk.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/agreement.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! Options of gtopk_allreduce.
struct gtopk_allreduce_options {
  //! Tags used: tag_base .. tag_base + 2 (the selection tree, the sum tree, the broadcast).
  int tag_base = 4200;
  //! How every send and receive is completed (MPI_Test in a loop, pausing per the policy; its
  //! timeout_seconds bounds each wait: mpi::timeout_error).
  wait_policy wait{};
};

namespace detail {

//! The global top-k of `pairs` (indices ascending, no duplicates): the k largest magnitudes,
//! ties to the lower index (as gradcomp::exact_top_k), returned with indices ascending. O(m log m)
//! for m pairs. Deterministic.
inline void
keep_top_k(std::vector<std::uint32_t>& indices, std::vector<float>& values, std::size_t k) {
  if (indices.size() <= k) {
    return;
  }
  std::vector<std::size_t> order(indices.size());
  for (std::size_t j = 0; j < order.size(); ++j) {
    order[j] = j;
  }
  const auto key = [&](std::size_t j) {
    return std::bit_cast<std::uint32_t>(values[j]) & 0x7fffffffu;
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                   [&](std::size_t a, std::size_t b) {
                     return key(a) != key(b) ? key(a) > key(b) : indices[a] < indices[b];
                   });
  order.resize(k);
  std::sort(order.begin(), order.end()); // back to ascending index (positions are ascending)
  std::vector<std::uint32_t> kept_indices(k);
  std::vector<float> kept_values(k);
  for (std::size_t j = 0; j < k; ++j) {
    kept_indices[j] = indices[order[j]];
    kept_values[j] = values[order[j]];
  }
  indices.swap(kept_indices);
  values.swap(kept_values);
}

//! a + b for two sparse sets (indices ascending): the union of the indices, each value a's plus
//! b's where both have it (a's first). O(|a| + |b|).
inline void merge_sum(std::vector<std::uint32_t>& a_indices,
                      std::vector<float>& a_values,
                      std::span<const std::uint32_t> b_indices,
                      std::span<const float> b_values) {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  indices.reserve(a_indices.size() + b_indices.size());
  values.reserve(indices.capacity());
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a_indices.size() || j < b_indices.size()) {
    if (j == b_indices.size() || (i < a_indices.size() && a_indices[i] < b_indices[j])) {
      indices.push_back(a_indices[i]);
      values.push_back(a_values[i++]);
    } else if (i == a_indices.size() || b_indices[j] < a_indices[i]) {
      indices.push_back(b_indices[j]);
      values.push_back(b_values[j++]);
    } else {
      indices.push_back(a_indices[i]);
      values.push_back(a_values[i++] + b_values[j++]);
    }
  }
  a_indices.swap(indices);
  a_values.swap(values);
}

} // namespace detail

//! @brief gTop-k sparse allreduce (Shi et al., "A Distributed Synchronous SGD Algorithm with
//! Global Top-k Sparsification for Low Bandwidth Networks", ICDCS 2019): every rank passes its
//! local selection (e.g. exact_top_k's message) and gets the same global selection G of k
//! elements and, for each, the sum over all ranks of their selected values there.
//!
//! Three binomial trees over the ranks, ceil(log2 P) rounds each:
//! 1. **selection**: in round d = 1, 2, 4, ..., rank r with r mod 2d == d sends its current set
//!    to r - d, which adds it to its own (sum at equal indices) and keeps the top k by magnitude
//!    (ties to the lower index); rank 0 ends with G. As in the paper, G is the tree's top-k,
//!    which can differ from the exact top-k of the summed selections (a value dropped at one
//!    merge is not seen by the later ones).
//! 2. **broadcast of G** (indices) from rank 0 down the same tree.
//! 3. **sums on G**: every rank's selected values at G (0 where it selected nothing) are summed
//!    up the tree (own value first, then the child's, in round order) and the sums broadcast
//!    down with G. So the sum at each element of G holds every rank's selected value there,
//!    exactly once: unlike the paper's update, no selected value is silently dropped, and a
//!    rank's selected values outside G go back to its residual (return_unselected), so error
//!    feedback conserves every value.
//!
//! Results are bit-identical on every rank (rank 0 computes them; the others receive its
//! bytes) and deterministic. Bytes sent by rank r (4-byte indices and values, one 8-byte count
//! per set): selection: 8 + 8 |S_r| once (r > 0; S_r its set when it sends, at most max(k, its
//! nnz)); broadcast of G: (8 + 4 |G|) per child; sums: 4 |G| once (r > 0); final broadcast:
//! (8 + 8 |G|) per child. Rank 0 has ceil(log2 P) children, the most: cost::gtopk_bytes_sent.
//!
//! Collective: every rank must call it with a message of the same dense length n and the same k
//! (agreed first with one small allreduce, which also carries each rank's argument checks: a
//! mismatch or a bad argument on any rank throws on every rank), in the same order relative to
//! other collectives on the communicator. Blocking: the call runs to completion,
//! every send and receive posted nonblocking and completed through options.wait (so MPICH does
//! not busy-poll, and a deadline applies); mpi::gtopk_exchange is its pipeline transport.
//! @throws mpi_error on every rank naming the first rank with a problem (and the problem on that
//! rank) if a rank's k is 0 or above n or its n is above the 32-bit index range, naming both
//! values if the ranks disagree on n or k (detail::agree_arguments); mpi_error if MPI fails.
class gtopk_allreduce {
public:
  using options = gtopk_allreduce_options; //!< The options struct.

  //! @param comm the communicator; must outlive this object.
  //! @param o    tags and wait policy.
  //! @throws std::invalid_argument if tag_base is negative or above the MPI tag limit - 2;
  //! mpi_error if the tag limit cannot be read.
  explicit gtopk_allreduce(const communicator& comm, options o = {}) : comm_(&comm), options_(o) {
    const int tag_ub = detail::tag_upper_bound(comm);
    gradcomp::detail::require(o.tag_base >= 0 && o.tag_base <= tag_ub - 2,
                              "gtopk_allreduce: "
                              "tag_base ",
                              o.tag_base, " is outside [0, ", tag_ub - 2, "]");
  }

  //! @brief Runs the exchange: `local` is this rank's selection (sparse or dense, dense length
  //! n), `k` the global count; `global` receives G (indices ascending) with the sums over the
  //! ranks (values_type fp32). Collective. O(k log P) traffic and O((k + nnz) log k log P) work
  //! per rank (the root's merges).
  void operator()(const sparse_message& local, std::size_t k, sparse_message& global) {
    const std::uint64_t n = local.dense_length_elements;
    std::string problem;
    if (k < 1 || k > n) {
      problem = gradcomp::detail::concat("k ", k, " is outside [1, ", n, "]");
    } else if (n > UINT32_MAX) {
      problem = gradcomp::detail::concat("dense length ", n, " is above the 32-bit index range");
    }
    detail::agree_arguments(*comm_, options_.wait, "gtopk_allreduce",
                            {{"dense length", n}, {"k", k}}, problem);
    bytes_sent_ = 0;
    bytes_received_ = 0;
    const int p = comm_->size();
    const int rank = comm_->rank();
    // 1. selection up the tree
    std::vector<std::uint32_t> indices;
    std::vector<float> values;
    if (local.dense) {
      indices.resize(local.values.size());
      for (std::size_t i = 0; i < indices.size(); ++i) {
        indices[i] = static_cast<std::uint32_t>(i);
      }
    } else {
      indices = local.indices;
    }
    values = local.values;
    for (int d = 1; d < p; d *= 2) {
      if (rank % (2 * d) == d) {
        send_pairs(rank - d, options_.tag_base, indices, values);
        break;
      }
      if (rank % (2 * d) == 0 && rank + d < p) {
        std::vector<std::uint32_t> their_indices;
        std::vector<float> their_values;
        receive_pairs(rank + d, options_.tag_base, their_indices, &their_values);
        detail::merge_sum(indices, values, their_indices, their_values);
        detail::keep_top_k(indices, values, k);
      }
    }
    if (rank == 0) {
      detail::keep_top_k(indices, values, k);
    }
    // 2. G down the tree
    broadcast(options_.tag_base + 1, indices, nullptr);
    // 3. every rank's selected values at G, summed up the tree, then broadcast with G
    std::vector<float> sums = values_at(local, indices);
    for (int d = 1; d < p; d *= 2) {
      if (rank % (2 * d) == d) {
        send_floats(rank - d, options_.tag_base + 2, sums);
        break;
      }
      if (rank % (2 * d) == 0 && rank + d < p) {
        std::vector<float> theirs(sums.size());
        receive(theirs.data(), theirs.size(), MPI_FLOAT, rank + d, options_.tag_base + 2);
        for (std::size_t j = 0; j < sums.size(); ++j) {
          sums[j] += theirs[j];
        }
      }
    }
    broadcast(options_.tag_base + 2, indices, &sums);
    global.clear(n);
    global.values_type = value_type::fp32;
    global.indices = std::move(indices);
    global.values = std::move(sums);
  }

  //! Bytes this rank sent in the last call (counts and payloads, as documented above; not the
  //! agreement's allreduce). O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Bytes this rank received in the last call (counted as bytes_sent). O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  // this rank's selected values at the indices `g` (ascending), 0 where it selected none
  static std::vector<float> values_at(const sparse_message& local,
                                      const std::vector<std::uint32_t>& g) {
    std::vector<float> out(g.size(), 0.0f);
    if (local.dense) {
      for (std::size_t j = 0; j < g.size(); ++j) {
        out[j] = local.values[g[j]];
      }
      return out;
    }
    std::size_t i = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      while (i < local.indices.size() && local.indices[i] < g[j]) {
        ++i;
      }
      if (i < local.indices.size() && local.indices[i] == g[j]) {
        out[j] = local.values[i];
      }
    }
    return out;
  }

  // one nonblocking send, completed through the wait policy; counted
  void send(const void* data, std::size_t count, MPI_Datatype type, int to, int tag) {
    int size = 0;
    MPI_Type_size(type, &size);
    MPI_Request request = MPI_REQUEST_NULL;
    detail::check(
        MPI_Isend(data, static_cast<int>(count), type, to, tag, comm_->native(), &request),
        "MPI_Isend (gtopk_allreduce)");
    mpi::wait(request, options_.wait);
    bytes_sent_ += static_cast<std::size_t>(size) * count;
  }
  // one nonblocking receive of exactly `count` elements, completed through the wait policy
  void receive(void* data, std::size_t count, MPI_Datatype type, int from, int tag) {
    int size = 0;
    MPI_Type_size(type, &size);
    MPI_Request request = MPI_REQUEST_NULL;
    detail::check(
        MPI_Irecv(data, static_cast<int>(count), type, from, tag, comm_->native(), &request),
        "MPI_Irecv (gtopk_allreduce)");
    mpi::wait(request, options_.wait);
    bytes_received_ += static_cast<std::size_t>(size) * count;
  }
  void send_count(int to, int tag, std::uint64_t count) { send(&count, 1, MPI_UINT64_T, to, tag); }
  void send_floats(int to, int tag, const std::vector<float>& v) {
    send(v.data(), v.size(), MPI_FLOAT, to, tag);
  }
  void send_pairs(int to,
                  int tag,
                  const std::vector<std::uint32_t>& indices,
                  const std::vector<float>& values) {
    send_count(to, tag, indices.size());
    send(indices.data(), indices.size(), MPI_UINT32_T, to, tag);
    send_floats(to, tag, values);
  }
  // receives what send_pairs sent (values only if `values` is given)
  void receive_pairs(int from,
                     int tag,
                     std::vector<std::uint32_t>& indices,
                     std::vector<float>* values) {
    std::uint64_t count = 0;
    receive(&count, 1, MPI_UINT64_T, from, tag);
    gradcomp::detail::require(count <= INT_MAX, "gtopk_allreduce: rank ", from, " sends ", count,
                              " pairs, above the MPI count limit");
    indices.resize(count);
    receive(indices.data(), count, MPI_UINT32_T, from, tag);
    if (values != nullptr) {
      values->resize(count);
      receive(values->data(), count, MPI_FLOAT, from, tag);
    }
  }
  // binomial broadcast from rank 0 of `indices` (and `values`, same length, if given)
  void broadcast(int tag, std::vector<std::uint32_t>& indices, std::vector<float>* values) {
    const int p = comm_->size();
    const int rank = comm_->rank();
    int top = 1;
    while (top < p) {
      top *= 2;
    }
    for (int d = top / 2; d >= 1; d /= 2) {
      if (rank % (2 * d) == 0 && rank + d < p) {
        send_count(rank + d, tag, indices.size());
        send(indices.data(), indices.size(), MPI_UINT32_T, rank + d, tag);
        if (values != nullptr) {
          send_floats(rank + d, tag, *values);
        }
      } else if (rank % (2 * d) == d) {
        receive_pairs(rank - d, tag, indices, values);
      }
    }
  }

  const communicator* comm_;
  options options_;
  std::size_t bytes_sent_ = 0;
  std::size_t bytes_received_ = 0;
};

//! @brief Error feedback on the global selection: gives `local`'s values at elements not in
//! `global` (gtopk_allreduce's G) back to `residual` (residual[i] += value), since only the
//! values at G were summed; the ones at G were sent. With the residual that compressed `local`,
//! every value is then either in a global sum or back in the residual, exactly. O(nnz + |G|).
//! @throws std::invalid_argument if the lengths differ.
inline std::size_t return_unselected(std::span<float> residual,
                                     const sparse_message& local,
                                     const sparse_message& global) {
  gradcomp::detail::require(residual.size() == local.dense_length_elements &&
                                residual.size() == global.dense_length_elements,
                            "return_unselected: residual of ", residual.size(),
                            " elements, messages of ", local.dense_length_elements, " and ",
                            global.dense_length_elements);
  return gradcomp::detail::add_unselected(residual, local, global.indices, 0);
}

} // namespace gradcomp::mpi
