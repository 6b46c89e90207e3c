// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::column_parallel_linear: a fully connected layer model-parallel over the
//! ranks of a communicator, weights split by output dimension (S2's scheme for the large FC
//! layers of a CNN whose convolutions stay data-parallel).
#pragma once

#include <gradcomp/cost/fc_exchange.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/hybrid/column_split.hpp>
#include <gradcomp/linalg/gemm.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/column_parallel_agreement.hpp>
#include <gradcomp/mpi/detail/column_parallel_buffers.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

//! The exchange choice (gradcomp/cost/fc_exchange.hpp), also spelled mpi::fc_exchange.
using gradcomp::fc_exchange;

//! @brief Options of column_parallel_linear. Every rank must pass the same options.
struct column_parallel_linear_options {
  fc_exchange exchange = fc_exchange::all_to_all; //!< see fc_exchange.
  //! Agree on (batch, K, N, pass, exchange) and on every rank's local checks with one 96-byte
  //! MPI_Iallreduce before each pass, so that bad or mismatched arguments throw on every rank
  //! instead of hanging. Off (saves one latency per pass): a local error throws
  //! std::invalid_argument on that rank only and the OTHER RANKS HANG in the first collective,
  //! and the backward pass always gathers the inputs again (no rank can know whether the
  //! others' inputs changed). Leave it on unless the arguments are known to agree.
  bool check_arguments = true;
  //! Scale the weight and bias gradients by 1 / P, so that they equal the average over ranks of
  //! each rank's gradient of its own loss: what a data-parallel allreduce average gives. Off:
  //! the plain sum over the global batch (S2's weight_diff).
  bool average_over_ranks = true;
  wait_policy wait{}; //!< how waits complete (wait_policy.hpp).
};

//! @brief Values this rank moved through column_parallel_linear's collectives, counted from the
//! counts handed to MPI (not estimated).
struct fc_traffic {
  //! S2's accounting: per collective the whole result (allgather: the gathered buffer; all-to-all:
  //! this rank's receive buffer) or the whole input (reduce-scatter: P M K). For
  //! fc_exchange::s2_allgather one forward + backward is exactly 3 M K P + 2 M N P
  //! (cost::fc_model_parallel_values); for all_to_all 2 M K P + M N + M P n_r, plus P M K when
  //! the backward pass gathers the inputs again.
  std::uint64_t collective_values = 0;
  //! Values this rank sends to other ranks when each collective runs as a direct exchange
  //! (allgather(v): its own block to each of the P - 1 others; reduce-scatter: P - 1 blocks;
  //! all-to-all: every block meant for another rank). A ring allgatherv of uneven blocks
  //! forwards the others' blocks instead, the same total over all ranks. The agreement's 96
  //! bytes are not counted.
  std::uint64_t sent_values = 0;
  unsigned collectives = 0; //!< data collectives started (agreements not counted).
};

//! @brief A fully connected layer y = x W^T + b (K inputs, N outputs) whose weight rows are
//! split over the P ranks of a communicator (column_split: rank r holds n_r = N/P or N/P + 1
//! consecutive rows and the matching bias entries), each rank feeding its own M samples.
//! S2 (seeds.md; Zhu et al.): model parallelism for the large FC layers, data parallelism for
//! the rest.
//!
//! Forward (per rank, local batch M, all ranks the same M):
//!  1. MPI_Iallgather of the inputs: P M x K (rank s's samples are rows s M .. s M + M - 1);
//!  2. local GEMM: Y_r = X W_r^T + b_r, P M x n_r;
//!  3. exchange so that each rank has the full N outputs of its own M samples (fc_exchange).
//! Backward (after a forward of the same input):
//!  1. exchange the output gradient so that each rank has its n_r columns for all P M samples;
//!  2. (s2_allgather only, or when the input changed since the forward) gather the inputs again;
//!  3. local GEMMs: dW_r = s dY_r^T X (n_r x K), db_r = s column sums of dY_r, with s = 1/P when
//!     average_over_ranks (else 1), and the partial input gradient dY_r W_r (P M x K);
//!  4. MPI_Ireduce_scatter_block (sum) of the partial input gradients: each rank gets the
//!     M x K input gradient of its own samples.
//! The GEMMs run through the gemm_backend (2 P M K n_r flops each: the same total as the
//! data-parallel layer's M K N per rank).
//!
//! Collective: every rank of the communicator must call the same pass (start_forward or
//! start_backward, or their blocking forms), in the same order relative to other collectives on
//! the communicator, with the same K, N and batch M. Nonblocking use: start_...(), then test()
//! until true, or wait(); the arguments' buffers must stay valid and unchanged (outputs
//! untouched) until then. One pass at a time per object. Results: the output and input gradient
//! are bit-identical whichever exchange is used; they depend on the BLAS's summation order
//! only (and on MPI's reduce-scatter order for the input gradient, which MPICH keeps the same
//! on every rank). Memory: buffers of about 2 P M K + P M n_r + M N floats per rank with
//! all_to_all (2 P M K + 2 P M n_r + P M N with s2_allgather), kept between calls.
//!
//! Errors: with check_arguments, every rank throws mpi_error (naming what disagreed, or the
//! failing rank's message) when ranks pass different K, N, M or exchange options, when any
//! rank's batch is 0, when N < P, when one rank runs forward and another backward, or when a
//! rank's buffers have the wrong sizes or P M max(K, N) exceeds INT_MAX (MPI's counts). With
//! P = 1 or check_arguments off, a local error throws std::invalid_argument on that rank. After
//! any exception the object is ready for a new pass. An exception raised after the agreement
//! (the GEMM backend throwing, memory exhausted while growing a buffer) is local to its rank:
//! the other ranks then wait in the pass's next collective, as in any MPI program whose rank
//! fails mid-way; use a GEMM backend that does not throw for valid sizes.
//! @tparam Gemm a gradcomp::gemm_backend (e.g. gradcomp::blas::cblas_gemm).
template <gemm_backend Gemm>
class column_parallel_linear : public detail::phased_operation<column_parallel_linear<Gemm>> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "column_parallel_linear";
  //! The options struct (column_parallel_linear_options).
  using options = column_parallel_linear_options;

  //! @param comm      the ranks that share the layer (all of them hold a slice).
  //! @param inputs_k  K, inputs per sample (>= 1).
  //! @param outputs_n N, outputs per sample (N >= P is checked when a pass starts, on every rank).
  //! @param gemm      runs this rank's GEMMs (kept by value).
  //! @param o         the options (see column_parallel_linear_options).
  //! @throws std::invalid_argument if inputs_k or outputs_n is 0.
  column_parallel_linear(const communicator& comm,
                         std::size_t inputs_k,
                         std::size_t outputs_n,
                         Gemm gemm = Gemm{},
                         options o = {})
      : comm_(&comm), k_(inputs_k), n_(outputs_n), gemm_(std::move(gemm)), options_(o),
        slices_(static_cast<std::size_t>(comm.size())) {
    gradcomp::detail::require(inputs_k >= 1, "column_parallel_linear: K = 0 inputs");
    gradcomp::detail::require(outputs_n >= 1, "column_parallel_linear: N = 0 outputs");
    for (int r = 0; r < comm.size(); ++r) {
      slices_[static_cast<std::size_t>(r)] = column_split(outputs_n, comm.size(), r);
    }
  }
  column_parallel_linear(const column_parallel_linear&) = delete;
  column_parallel_linear& operator=(const column_parallel_linear&) = delete;
  // A pass dropped mid-way: every pending request is a collective, waited for (see
  // detail::abandon); each completes because every rank posts it while running the pass.
  ~column_parallel_linear() { this->reset(); }

  [[nodiscard]] std::size_t inputs() const noexcept { return k_; }  //!< K.
  [[nodiscard]] std::size_t outputs() const noexcept { return n_; } //!< N.
  //! This rank's weight rows / bias entries: [slice().offset, slice().offset + slice().rows).
  [[nodiscard]] column_slice slice() const noexcept { return slice_of(comm_->rank()); }
  //! Rank r's slice (column_split). Precondition: 0 <= r < P.
  [[nodiscard]] column_slice slice_of(int r) const noexcept {
    return slices_[static_cast<std::size_t>(r)];
  }
  //! Values moved since construction or the last reset_traffic().
  [[nodiscard]] const fc_traffic& traffic() const noexcept { return traffic_; }
  //! Sets traffic() back to zero. Local (no communication).
  void reset_traffic() noexcept { traffic_ = {}; }

  //! @brief Starts the forward pass. Shapes (row-major): input M x K (this rank's samples),
  //! weight n_r x K (this rank's rows), bias n_r or empty (no bias), output M x N. Collective
  //! (see the class). @throws as the class says (Errors); std::invalid_argument if a pass is
  //! already in progress on this object.
  void start_forward(std::span<const float> input,
                     std::span<const float> weight,
                     std::span<const float> bias,
                     std::span<float> output) {
    const auto starting = begin_pass(pass::forward, input, weight);
    bias_ = bias;
    output_ = output;
    const std::size_t rows = slice().rows;
    local_check(weight.size() == rows * k_, "weight slice has ", weight.size(),
                " elements, expected n_r x K = ", rows, " x ", k_);
    local_check(bias.empty() || bias.size() == rows, "bias slice has ", bias.size(),
                " elements, expected 0 or n_r = ", rows);
    local_check(output.size() == batch_ * n_, "output has ", output.size(),
                " elements, expected M x N = ", batch_, " x ", n_);
    check_int_limits();
    agree(/*cache_valid=*/true);
  }

  //! @brief Starts the backward pass after a forward pass of the same input. Shapes
  //! (row-major): output_grad M x N (dL/dy of this rank's samples), input M x K (the forward's
  //! input), weight n_r x K, weight_grad n_r x K and bias_grad n_r or empty (written, not
  //! accumulated), input_grad M x K (written). Collective (see the class). @throws as
  //! start_forward.
  void start_backward(std::span<const float> output_grad,
                      std::span<const float> input,
                      std::span<const float> weight,
                      std::span<float> weight_grad,
                      std::span<float> bias_grad,
                      std::span<float> input_grad) {
    const auto starting = begin_pass(pass::backward, input, weight);
    output_grad_ = output_grad;
    weight_grad_ = weight_grad;
    bias_grad_ = bias_grad;
    input_grad_ = input_grad;
    const std::size_t rows = slice().rows;
    local_check(output_grad.size() == batch_ * n_, "output gradient has ", output_grad.size(),
                " elements, expected M x N = ", batch_, " x ", n_);
    local_check(weight.size() == rows * k_ && weight_grad.size() == rows * k_,
                "weight slice / weight gradient have ", weight.size(), " / ", weight_grad.size(),
                " elements, expected n_r x K = ", rows, " x ", k_);
    local_check(bias_grad.empty() || bias_grad.size() == rows, "bias gradient has ",
                bias_grad.size(), " elements, expected 0 or n_r = ", rows);
    local_check(input_grad.size() == batch_ * k_, "input gradient has ", input_grad.size(),
                " elements, expected M x K = ", batch_, " x ", k_);
    check_int_limits();
    // the forward's gathered inputs can be reused when this rank's block is still this input
    const bool cache_valid =
        options_.check_arguments && options_.exchange == fc_exchange::all_to_all &&
        cached_batch_ == batch_ && input.size() == batch_ * k_ && !buffers_.gathered.empty() &&
        std::equal(input.begin(), input.end(), own_block().begin());
    agree(cache_valid);
  }

  //! Blocking forward pass (start_forward, then wait()). Collective.
  void forward(std::span<const float> input,
               std::span<const float> weight,
               std::span<const float> bias,
               std::span<float> output) {
    start_forward(input, weight, bias, output);
    this->wait();
  }

  //! Blocking backward pass (start_backward, then wait()). Collective.
  void backward(std::span<const float> output_grad,
                std::span<const float> input,
                std::span<const float> weight,
                std::span<float> weight_grad,
                std::span<float> bias_grad,
                std::span<float> input_grad) {
    start_backward(output_grad, input, weight, weight_grad, bias_grad, input_grad);
    this->wait();
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

private:
  enum class pass { forward = 0, backward = 1 };

  [[nodiscard]] std::size_t ranks() const noexcept {
    return static_cast<std::size_t>(comm_->size());
  }
  [[nodiscard]] std::size_t rank() const noexcept {
    return static_cast<std::size_t>(comm_->rank());
  }
  [[nodiscard]] std::span<const float> own_block() const noexcept {
    return std::span<const float>(buffers_.gathered)
        .subspan(rank() * cached_batch_ * k_, cached_batch_ * k_);
  }

  // The arguments both passes share: the pass, the input (M x K) and the weight slice; the
  // batch M from the input's length.
  [[nodiscard]] auto
  begin_pass(pass p, std::span<const float> input, std::span<const float> weight) {
    gradcomp::detail::require(!this->running(),
                              "column_parallel_linear: a pass started while another is in "
                              "progress");
    auto starting = this->begin_operation();
    pass_ = p;
    local_error_.clear();
    input_ = input;
    weight_ = weight;
    batch_ = input.size() / k_;
    local_check(input.size() % k_ == 0, "input has ", input.size(),
                " elements, not a multiple of K = ", k_);
    return starting;
  }

  template <class... Parts>
  void local_check(bool ok, const Parts&... parts) {
    if (!ok && local_error_.empty()) {
      local_error_ = gradcomp::detail::concat(parts...);
    }
  }

  void check_int_limits() {
    const std::size_t big = ranks() * batch_ * std::max(k_, n_);
    local_check(big <= static_cast<std::size_t>(INT_MAX), "P x M x max(K, N) = ", big,
                " exceeds MPI's int count limit ", INT_MAX);
  }

  // Starts the agreement (or, without check_arguments, throws a local error at once and goes
  // straight to the first collective).
  void agree(bool cache_valid) {
    if (!options_.check_arguments || ranks() == 1) {
      if (!local_error_.empty()) {
        throw std::invalid_argument("gradcomp mpi: column_parallel_linear: " + local_error_);
      }
      agreement_.set_local(batch_, k_, n_, static_cast<int>(pass_),
                           static_cast<int>(options_.exchange), true, cache_valid && ranks() == 1);
      this->then(&column_parallel_linear::agreed); // nothing to wait for
      return;
    }
    agreement_.set_local(batch_, k_, n_, static_cast<int>(pass_),
                         static_cast<int>(options_.exchange), local_error_.empty(), cache_valid);
    agreement_.start(*comm_, *this->collective());
    this->then(&column_parallel_linear::agreed);
  }

  // Forward 1 / backward 1, once the arguments agree.
  void agreed() {
    agreement_.verify(local_error_, ranks());
    if (pass_ == pass::forward) {
      gather_input();
    } else {
      exchange_grad();
    }
  }

  // Forward 2 and 3 / backward 3 and 4, once the inputs are gathered.
  void input_gathered() {
    if (pass_ == pass::forward) {
      cached_batch_ = batch_;
      compute_forward();
      exchange_output();
    } else {
      compute_backward();
    }
  }

  // Backward 2 (when needed), once the output gradient is exchanged.
  void grad_exchanged() {
    extract_grad_slice();
    if (options_.exchange == fc_exchange::s2_allgather || !agreement_.cache_valid()) {
      gather_input();
    } else {
      compute_backward();
    }
  }

  void count(std::uint64_t collective_values, std::uint64_t sent_values) noexcept {
    traffic_.collective_values += collective_values;
    traffic_.sent_values += sent_values;
    ++traffic_.collectives;
  }

  void gather_input() {
    const std::size_t block = batch_ * k_;
    buffers_.gathered.resize(ranks() * block);
    cached_batch_ = 0; // valid again once the gather completed (forward)
    detail::check(MPI_Iallgather(input_.data(), static_cast<int>(block), MPI_FLOAT,
                                 buffers_.gathered.data(), static_cast<int>(block), MPI_FLOAT,
                                 comm_->native(), this->collective()),
                  "MPI_Iallgather (column_parallel_linear inputs)");
    count(ranks() * block, (ranks() - 1) * block);
    this->then(&column_parallel_linear::input_gathered);
  }

  // Y_r = X W_r^T + b_r: P M x n_r.
  void compute_forward() { buffers_.forward(gemm_, ranks() * batch_, k_, slice(), weight_, bias_); }

  void exchange_output() {
    const std::size_t p = ranks();
    const column_slice mine = slice();
    const bool a2a = options_.exchange == fc_exchange::all_to_all;
    buffers_.lay_out_outputs(a2a, batch_, n_, mine, slices_);
    if (a2a) {
      detail::check(MPI_Ialltoallv(buffers_.local_out.data(), buffers_.send_counts.data(),
                                   buffers_.send_displs.data(), MPI_FLOAT, buffers_.exchange.data(),
                                   buffers_.counts.data(), buffers_.displs.data(), MPI_FLOAT,
                                   comm_->native(), this->collective()),
                    "MPI_Ialltoallv (column_parallel_linear outputs)");
      count(batch_ * n_, (p - 1) * batch_ * mine.rows);
    } else {
      detail::check(MPI_Iallgatherv(buffers_.local_out.data(), buffers_.counts[rank()], MPI_FLOAT,
                                    buffers_.exchange.data(), buffers_.counts.data(),
                                    buffers_.displs.data(), MPI_FLOAT, comm_->native(),
                                    this->collective()),
                    "MPI_Iallgatherv (column_parallel_linear outputs)");
      count(p * batch_ * n_, (p - 1) * p * batch_ * mine.rows);
    }
    this->then(&column_parallel_linear::assemble_output); // then the forward pass is complete
  }

  // output[m][offset_s + c] from rank s's block (M x n_s, or P M x n_s read at this rank's rows)
  void assemble_output() {
    buffers_.assemble_output(options_.exchange == fc_exchange::all_to_all, rank(), batch_, n_,
                             slices_, output_);
  }

  void exchange_grad() {
    const std::size_t p = ranks();
    const column_slice mine = slice();
    if (options_.exchange == fc_exchange::all_to_all) {
      // columns [offset_s, offset_s + n_s) of dY (M x N) to rank s, packed; receive M x n_r
      // from each rank s, which stacks into dY_r (P M x n_r) in global sample order
      buffers_.pack_output_grad(batch_, n_, mine, slices_, output_grad_);
      detail::check(MPI_Ialltoallv(buffers_.exchange.data(), buffers_.send_counts.data(),
                                   buffers_.send_displs.data(), MPI_FLOAT,
                                   buffers_.grad_slice.data(), buffers_.counts.data(),
                                   buffers_.displs.data(), MPI_FLOAT, comm_->native(),
                                   this->collective()),
                    "MPI_Ialltoallv (column_parallel_linear output gradients)");
      count(p * batch_ * mine.rows, batch_ * (n_ - mine.rows));
    } else {
      buffers_.exchange.resize(p * batch_ * n_);
      const std::size_t block = batch_ * n_;
      detail::check(MPI_Iallgather(output_grad_.data(), static_cast<int>(block), MPI_FLOAT,
                                   buffers_.exchange.data(), static_cast<int>(block), MPI_FLOAT,
                                   comm_->native(), this->collective()),
                    "MPI_Iallgather (column_parallel_linear output gradients)");
      count(p * block, (p - 1) * block);
    }
    this->then(&column_parallel_linear::grad_exchanged);
  }

  // s2_allgather: dY_r = columns [offset_r, offset_r + n_r) of the gathered P M x N gradient
  void extract_grad_slice() {
    if (options_.exchange != fc_exchange::s2_allgather) {
      return;
    }
    buffers_.extract_grad_slice(ranks() * batch_, n_, slice());
  }

  void compute_backward() {
    cached_batch_ = batch_;
    const float scale = options_.average_over_ranks ? 1.0f / static_cast<float>(ranks()) : 1.0f;
    buffers_.backward(gemm_, ranks() * batch_, k_, slice(), scale, weight_, weight_grad_,
                      bias_grad_);
    const std::size_t block = batch_ * k_;
    detail::check(MPI_Ireduce_scatter_block(buffers_.partial.data(), input_grad_.data(),
                                            static_cast<int>(block), MPI_FLOAT, MPI_SUM,
                                            comm_->native(), this->collective()),
                  "MPI_Ireduce_scatter_block (column_parallel_linear input gradients)");
    count(ranks() * block, (ranks() - 1) * block);
    this->then(); // then the backward pass is complete
  }

  const communicator* comm_;
  std::size_t k_;
  std::size_t n_;
  Gemm gemm_;
  options options_;
  std::vector<column_slice> slices_;
  fc_traffic traffic_;

  pass pass_ = pass::forward;
  detail::column_parallel_agreement agreement_;
  std::string local_error_;
  std::size_t batch_ = 0;
  std::size_t cached_batch_ = 0; // batch of the inputs in buffers_.gathered (0: none)

  std::span<const float> input_, weight_, bias_, output_grad_;
  std::span<float> output_, weight_grad_, bias_grad_, input_grad_;

  detail::column_parallel_buffers buffers_; // the passes' buffers and local work
};

} // namespace gradcomp::mpi
