// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Pipeline transports over MPI: dense exchanges (densify, allreduce in place: ring,
//! MPI's own, hierarchical; divide by P), sparse_exchange (sparse allgather, sum, divide by P),
//! parameter_server_exchange (push/pull), and the multi-part coded exchanges of S3's redundant
//! placement (coded_dense_exchange, coded_sparse_exchange; divide by C(P, r)). Needs
//! gradcomp::mpi.
//!
//! Threads: a pipeline calls its transport from its communication thread. Every transport here
//! therefore checks, first in start() and before any MPI call, that the calling thread may call
//! MPI (the thread that initialised MPI, or MPI_THREAD_SERIALIZED or more; O(1)), and throws
//! mpi_error naming the level MPI provides otherwise, on every rank alike.
#pragma once

#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_exchange.hpp>
#include <gradcomp/mpi/coded_sparse.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/hierarchical_allreduce.hpp>
#include <gradcomp/mpi/native_allreduce.hpp>
#include <gradcomp/mpi/parameter_server.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/sparse_allgather.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace gradcomp::mpi {

namespace pipeline_detail {

//! Divides every element by `count` (the ranks, or the parts: the mean of a sum). O(n).
inline void divide(std::span<float> values, std::size_t count) {
  const auto p = static_cast<float>(count);
  for (float& v : values) {
    v /= p;
  }
}

} // namespace pipeline_detail

//! @brief Averages compressed messages with a dense in-place allreduce: start() decompresses
//! the message into the output (O(n + nnz)), `Allreduce` sums it across ranks in place, and
//! completion divides by P (O(n)). Bit-identical results on every rank when the allreduce gives
//! them (ring_allreduce and hierarchical_allreduce do; native_allreduce does with MPICH), then
//! the same division.
//!
//! Bytes per rank reported (bytes_sent / bytes_received): the ring's exact traffic, about
//! 2 (P-1)/P x 4n each way (the length check's 16 bytes excluded). For the other allreduces
//! this is the bandwidth-optimal volume, a lower bound: MPI's and the hierarchical schedule's
//! own traffic is not observable from here.
//!
//! Collective: every rank must call start() with a message of the same dense length, in the
//! same order relative to other collectives on the communicator. One operation at a time.
//! @tparam Allreduce ring_allreduce, native_allreduce or hierarchical_allreduce (an in-place
//!                   nonblocking float sum constructed from (communicator, options)).
//! @throws mpi_error as the allreduce does; std::invalid_argument from start() if the output
//! length differs from the message's dense length.
template <class Allreduce>
class basic_dense_exchange {
public:
  using transport_concept = gradcomp::transport_tag; //!< opts in (pipeline_policy::transport).
  //! Builds the allreduce over `comm` (which must outlive this object) with options `o`. Local.
  explicit basic_dense_exchange(const communicator& comm, typename Allreduce::options o = {})
      : comm_(&comm), allreduce_(comm, o) {}

  //! Starts averaging `m` into `average` (n floats, m's dense length): decompresses it there
  //! and sums in place. Collective (see the class).
  void start(const sparse_message& m, std::span<float> average) {
    decompress(m, average);
    start_in_place(average);
  }

  //! Sums `values` (this rank's dense group, n floats) across ranks in place and divides by P
  //! on completion: start() without the decompression (pipeline_policy::in_place_transport).
  //! Collective, as start().
  void start_in_place(std::span<float> values) {
    detail::require_thread_level_here("a dense pipeline transport");
    average_ = values;
    done_ = false;
    allreduce_.start(values);
  }
  //! Always true: every allreduce here sums in place.
  [[nodiscard]] bool accepts_in_place() const noexcept { return true; }

  //! Progress without blocking; true once the average is complete (divided by P).
  bool test() {
    if (!done_ && allreduce_.test()) {
      complete();
    }
    return done_;
  }

  //! Completes the operation (returns at once when it already has).
  void wait() {
    if (!done_) {
      allreduce_.wait();
      complete();
    }
  }

  //! Bytes this rank sent in the last operation (see the class). O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Bytes this rank received in the last operation (see the class). O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  // Elements of ring block b (wrapped), as ring_allreduce splits n elements over P ranks.
  [[nodiscard]] std::size_t block(int b) const noexcept {
    const int p = comm_->size();
    const auto w = static_cast<std::size_t>(((b % p) + p) % p);
    const std::size_t n = average_.size();
    const auto pp = static_cast<std::size_t>(p);
    return n * (w + 1) / pp - n * w / pp;
  }

  void complete() {
    done_ = true;
    pipeline_detail::divide(average_, static_cast<std::size_t>(comm_->size()));
    const int r = comm_->rank();
    const std::size_t n = average_.size();
    if (comm_->size() == 1) {
      bytes_sent_ = bytes_received_ = 0;
      return;
    }
    // reduce-scatter sends every block but r+1 and receives every block but r; the allgather
    // sends every block but r+2 and receives every block but r+1
    bytes_sent_ = sizeof(float) * (2 * n - block(r + 1) - block(r + 2));
    bytes_received_ = sizeof(float) * (2 * n - block(r) - block(r + 1));
  }

  const communicator* comm_;
  Allreduce allreduce_;
  std::span<float> average_;
  bool done_ = true;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

//! gradcomp's ring allreduce of the densified group (S4's ring).
using dense_exchange = basic_dense_exchange<ring_allreduce>;
//! MPI_Iallreduce of the densified group: the dense baseline of MPI itself (with
//! schedule::strategy::size_threshold's 25 MiB buckets, what PyTorch DDP does).
using native_dense_exchange = basic_dense_exchange<native_allreduce>;
//! S4's hierarchical allreduce of the densified group.
using hierarchical_exchange = basic_dense_exchange<hierarchical_allreduce>;

//! @brief Averages compressed messages through gradcomp::mpi::parameter_server (S1's
//! push/pull): every worker pushes its message, the servers sum and average, every worker pulls
//! the average into `average`. The server's average is already divided by the worker count.
//! Bytes as parameter_server counts them. Only co-located servers make sense in a pipeline
//! (every rank is a worker with gradients to average); dedicated servers are rejected.
//!
//! Collective: every rank must call start() with a message of the same dense length, in the
//! same order relative to other collectives on the communicator. One operation at a time.
//! @throws std::invalid_argument at construction if the placement is not co-located; as
//! parameter_server does otherwise.
class parameter_server_exchange {
public:
  using transport_concept = gradcomp::transport_tag; //!< opts in (pipeline_policy::transport).
  //! Builds the parameter server over `comm` (which must outlive this object) with options `o`
  //! (co-located servers only). Local.
  explicit parameter_server_exchange(const communicator& comm, parameter_server_options o = {})
      : server_((require_colocated(o), comm), o) {}

  //! Pushes `m`; `average` (n floats) gets the pulled average. Collective (see the class).
  void start(const sparse_message& m, std::span<float> average) {
    detail::require_thread_level_here("parameter_server_exchange");
    server_.start(m, average);
  }
  //! Progress without blocking; true once `average` holds the average.
  bool test() { return server_.test(); }
  //! Completes the operation.
  void wait() { server_.wait(); }
  //! Bytes this rank sent in the last operation, as parameter_server counts them. O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return server_.bytes_sent(); }
  //! Bytes this rank received in the last operation, as parameter_server counts them. O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return server_.bytes_received(); }

private:
  static void require_colocated(const parameter_server_options& o) {
    gradcomp::detail::require(o.placement == server_placement::colocated,
                              "parameter_server_exchange: servers must be co-located with the "
                              "workers in a pipeline (every rank averages gradients)");
  }

  parameter_server server_;
};

//! @brief Averages compressed messages with sparse_allgather: every rank's message is gathered
//! and summed in rank order, then divided by P (O(n)). Bit-identical results on every rank.
//! Bytes as sparse_allgather reports them (headers excluded).
//!
//! Collective: as sparse_allgather (same dense length on every rank, same order).
//! @throws as sparse_allgather does.
class sparse_exchange {
public:
  using transport_concept = gradcomp::transport_tag; //!< opts in (pipeline_policy::transport).
  //! Builds the sparse allgather over `comm` (which must outlive this object) with options `o`.
  //! Local.
  explicit sparse_exchange(const communicator& comm, sparse_allgather_options o = {})
      : comm_(&comm), gather_(comm, o) {}

  //! Starts gathering `m`; `average` (n floats, m's dense length) gets the mean of every rank's
  //! message. Collective (see the class).
  void start(const sparse_message& m, std::span<float> average) {
    detail::require_thread_level_here("sparse_exchange");
    average_ = average;
    done_ = false;
    gather_.start(m, average);
  }

  //! Progress without blocking; true once `average` holds the mean.
  bool test() {
    if (!done_ && gather_.test()) {
      done_ = true;
      pipeline_detail::divide(average_, static_cast<std::size_t>(comm_->size()));
    }
    return done_;
  }

  //! Completes the operation (returns at once when it already has).
  void wait() {
    if (!done_) {
      gather_.wait();
      done_ = true;
      pipeline_detail::divide(average_, static_cast<std::size_t>(comm_->size()));
    }
  }

  //! Bytes this rank sent in the last operation, as sparse_allgather reports them. O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return gather_.bytes_sent(); }
  //! Bytes this rank received in the last operation, as sparse_allgather reports them. O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return gather_.bytes_received(); }
  //! Whether the last exchange switched to the dense ring allreduce.
  [[nodiscard]] bool used_dense() const noexcept { return gather_.used_dense(); }

private:
  const communicator* comm_;
  sparse_allgather gather_;
  std::span<float> average_;
  bool done_ = true;
};

//! @brief Averages the parts of S3's redundant placement (CSSGD) by coded multicast: a
//! pipeline_policy::multi_part_transport. Every rank passes the messages of its
//! C(P - 1, r - 1) parts (placement().parts_of(rank), in that order; parts_per_rank() of them)
//! and gets the mean over all C(P, r) parts, bit-identical on every rank: the sum from
//! `Coded`, divided by C(P, r) (O(n)).
//! * coded_dense_exchange (Coded = coded_allreduce): start() decompresses every part into a
//!   buffer of n floats (O(parts (n + nnz)); kept between calls) and runs the coded exchange on
//!   them. For dense messages (gradcomp::dense); a sparse message is sent densified.
//! * coded_sparse_exchange (Coded = coded_sparse_allreduce): the parts' top-k messages are
//!   exchanged on the agreed union U of their indices; completion scatters the sum into the
//!   average (O(n + |U|)). For sparse (top-k) messages; the owners of a part must pass
//!   identical messages, which holds when they report bit-identical gradients to the pipeline
//!   (its error feedback per part is then identical on every owner). Owners that differ are
//!   detected when an owner's selected index falls outside the union (every rank throws); other
//!   differences (values at the same indices) are not: the ranks' averages then differ.
//!
//! Fixed-point coding (the default) quantises each part to within 0.5 / scale() and the sum to
//! within C(P, r) 0.5 / scale() per element before the division (coded_allreduce); the
//! pipeline's residuals hold exactly what was not selected, so that rounding is not fed back.
//! XOR coding delivers the float bits exactly.
//!
//! Bytes per rank reported (bytes_sent / bytes_received): the coded exchange's (point-to-point
//! multicast: r copies of each packet; docs/coded.md "Cost model"), agreement and headers
//! excluded. Model: coded::coded_exchange_load (dense, full form), coded::
//! coded_reduce_scatter_load, coded::coded_sparse_load.
//!
//! Collective: every rank must call start() with messages of the same dense length and the
//! same options, in the same order relative to other collectives on the communicator. One
//! operation at a time. P = 1 is refused (as coded_allreduce: nothing to exchange).
//! @throws std::invalid_argument at construction as coded_allreduce (r outside [1, P), bad
//! tags or window); from test()/wait(): on the rank whose arguments are malformed (the wrong
//! number of messages, an invalid message, a dense length other than the average's; that rank
//! names its own check, the others throw mpi_error), and as the coded exchange does (NaN or an
//! infinity with fixed point, different lengths or options, owners that disagree, MPI
//! failures). coded_sparse_exchange checks the average's length against the agreed dense
//! length only after the exchange: a mismatch then throws std::invalid_argument on that rank
//! alone (the other ranks completed normally).
template <class Coded>
class basic_coded_exchange {
  static constexpr bool dense = std::is_same_v<Coded, coded_allreduce>;
  static_assert(dense || std::is_same_v<Coded, coded_sparse_allreduce>,
                "basic_coded_exchange: Coded must be coded_allreduce or coded_sparse_allreduce");

public:
  using transport_concept = gradcomp::transport_tag; //!< opts in (pipeline_policy::transport).
  using options = coded_allreduce_options;           //!< the options of the coded exchange.

  //! Builds the coded exchange of P = comm.size() ranks with options `o` (redundancy r, coding,
  //! schedule, variant, tags, window). Local. `comm` must outlive this object.
  explicit basic_coded_exchange(const communicator& comm, options o = {}) : exchange_(comm, o) {}

  //! C(P - 1, r - 1): the messages start() takes on this rank. O(1).
  [[nodiscard]] std::size_t parts_per_rank() const noexcept {
    return exchange_.placement().parts_per_rank();
  }
  //! The placement: which parts (and so which samples) this rank computes. O(1).
  [[nodiscard]] const coded::placement& placement() const noexcept { return exchange_.placement(); }

  //! Starts the exchange of this rank's part messages; `average` (n floats) gets the mean over
  //! all C(P, r) parts on completion. Collective (see the class).
  void start(std::span<const sparse_message> parts, std::span<float> average) {
    detail::require_thread_level_here("a coded pipeline transport");
    average_ = average;
    done_ = false;
    own_error_.clear();
    if constexpr (dense) {
      densify(parts, average.size());
      exchange_.start(std::span<const std::span<const float>>(spans_), average);
    } else {
      exchange_.start(parts, sum_);
    }
  }

  //! Progress without blocking; true once `average` holds the mean.
  bool test() {
    if (!done_ && checked([this] { return exchange_.test(); })) {
      complete();
    }
    return done_;
  }

  //! Completes the operation.
  void wait() {
    if (!done_) {
      checked([this] {
        exchange_.wait();
        return true;
      });
      complete();
    }
  }

  //! Payload bytes this rank sent in the last operation (see the class).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return exchange_.bytes_sent(); }
  //! Payload bytes this rank received in the last operation (see the class).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return exchange_.bytes_received(); }
  //! The coded exchange itself (its scale(), message counts, settings()).
  [[nodiscard]] const Coded& exchange() const noexcept { return exchange_; }

private:
  // Decompresses each part into its buffer. A part that is invalid or of another dense length
  // is passed as a span of the wrong length, so that the coded exchange reports malformed
  // arguments on every rank; this rank then throws its own reason (checked()).
  void densify(std::span<const sparse_message> parts, std::size_t n) {
    buffers_.resize(parts.size());
    spans_.clear();
    for (std::size_t i = 0; i < parts.size(); ++i) {
      try {
        parts[i].validate();
        gradcomp::detail::require(parts[i].dense_length_elements == n, "dense length ",
                                  parts[i].dense_length_elements, ", the average has ", n,
                                  " elements");
        buffers_[i].resize(n);
        decompress(parts[i], buffers_[i]);
        spans_.emplace_back(buffers_[i]);
      } catch (const std::invalid_argument& e) {
        if (own_error_.empty()) {
          own_error_ =
              gradcomp::detail::concat("coded_dense_exchange: part message ", i, ": ", e.what());
        }
        spans_.emplace_back(&pad_, n == 0 ? 1 : 0);
      }
    }
  }

  // Runs `step`; if it throws std::invalid_argument for this rank's malformed arguments and
  // densify() knows the reason, throws that reason instead.
  template <class Step>
  bool checked(Step&& step) {
    try {
      return step();
    } catch (const std::invalid_argument&) {
      if (!own_error_.empty()) {
        throw std::invalid_argument(own_error_);
      }
      throw;
    }
  }

  void complete() {
    done_ = true;
    if constexpr (!dense) {
      gradcomp::detail::require(
          sum_.dense_length_elements == average_.size(), "coded_sparse_exchange: the average has ",
          average_.size(), " elements, the parts' dense length is ", sum_.dense_length_elements);
      decompress(sum_, average_);
    }
    pipeline_detail::divide(average_, exchange_.placement().part_count());
  }

  Coded exchange_;
  std::span<float> average_;
  bool done_ = true;
  std::string own_error_;                   // densify()'s reason for malformed arguments
  std::vector<std::vector<float>> buffers_; // dense: the densified parts
  std::vector<std::span<const float>> spans_;
  float pad_ = 0.0f;   // dense: the wrong-length stand-in of a malformed part (n == 0)
  sparse_message sum_; // sparse: the sum on the union
};

//! S3's coded multicast of densified parts (coded_allreduce); see basic_coded_exchange.
using coded_dense_exchange = basic_coded_exchange<coded_allreduce>;
//! S3's coded multicast of top-k parts on the agreed index union (coded_sparse_allreduce); see
//! basic_coded_exchange.
using coded_sparse_exchange = basic_coded_exchange<coded_sparse_allreduce>;

static_assert(gradcomp::pipeline_policy::byte_counting_transport<dense_exchange>);
static_assert(gradcomp::pipeline_policy::in_place_transport<dense_exchange>);
static_assert(gradcomp::pipeline_policy::in_place_transport<native_dense_exchange>);
static_assert(gradcomp::pipeline_policy::in_place_transport<hierarchical_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<native_dense_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<hierarchical_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<parameter_server_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<sparse_exchange>);
static_assert(gradcomp::pipeline_policy::multi_part_transport<coded_dense_exchange>);
static_assert(gradcomp::pipeline_policy::multi_part_transport<coded_sparse_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<coded_dense_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<coded_sparse_exchange>);

} // namespace gradcomp::mpi
