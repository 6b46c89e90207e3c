// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::pipeline: wait-free backward propagation with compression. Layer gradients
//! are compressed (per-layer error feedback) as backward produces them, merged into groups of
//! consecutive layers, and averaged by a transport on a communication thread that overlaps the
//! rest of backward. With a replanning grouping policy it measures each layer's backward time
//! from the hook timestamps and re-plans its grouping once, after a warm-up. With a multi-part
//! transport (S3's redundant placement) every rank reports the gradients of several parts.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/clock.hpp>
#include <gradcomp/pipeline/compression_scope.hpp>
#include <gradcomp/pipeline/detail/feedback_state.hpp>
#include <gradcomp/pipeline/detail/iteration_engine.hpp>
#include <gradcomp/pipeline/detail/layer_slots.hpp>
#include <gradcomp/pipeline/detail/pipeline_checkpoint.hpp>
#include <gradcomp/pipeline/detail/replanning.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/pipeline/iteration_stats.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief Compresses layer gradients as they become ready and averages them across workers
//! group by group on a communication thread (S1's WFBP with merged layers).
//!
//! Per iteration: call gradient_ready(layer, grad) once for every layer, in any order (the
//! backward hook); then finish(). Each layer is compressed at once, on the caller's thread,
//! with its own gradcomp::error_feedback (per-layer error feedback: one residual and one
//! compressor state per layer, copied from the prototype). When every layer of a group has
//! arrived, the group's message is the concatenation of its layers' messages in forward order,
//! each layer's indices shifted by its element offset in the group (so a group's average, cut
//! at the offsets, is the layers' averages). The communication thread (one std::thread per
//! pipeline) runs the transport on the groups strictly in group order (backward order), one at
//! a time, FIFO: a group that is ready waits for the previous ones, so every rank issues the
//! same sequence of collectives whatever the hook order. finish() waits for the last group and
//! leaves the averages in the pipeline (averaged()) or copies them into the caller's spans.
//!
//! Results are deterministic: the same gradients give bit-identical averages whatever the hook
//! order (the transport decides cross-rank identity; the MPI adapters give it).
//!
//! Uncompressed groups in place: with the lossless gradcomp::dense compressor (float32 values,
//! per-layer scope, no momentum correction) and a pipeline_policy::in_place_transport that
//! accepts it (mpi::dense_exchange and the other dense allreduces, loopback_exchange), no
//! message is built: gradient_ready() copies the layer's gradient straight into its group's
//! buffer (one pass of 4n bytes instead of error feedback, message, concatenation and
//! decompression: five) and the transport sums that buffer in place. The averages are
//! bit-identical to the message path's (its residual stays exactly 0, and each value is
//! copied as 0.0f + g, as error feedback adds it). The buffers are double: the averages of
//! the last finish() stay readable while the next iteration fills the other one.
//!
//! Several parts per rank (a pipeline_policy::multi_part_transport, e.g. S3's coded exchange,
//! where every part of the batch is computed by r ranks): the pipeline asks the transport's
//! parts_per_rank() P once and keeps P error feedbacks per layer (or per group), one per part.
//! Call gradient_ready(part, layer, grad) for every part and layer (any order, e.g. one
//! backward per part); a group is sent once every part's layers of it have arrived, as P
//! messages, one per part, and its average is the transport's mean over all parts. Backward of
//! the last part overlaps the communication of the groups it completes (WFBP). Every rank that
//! holds a part must report bit-identical gradients for it, so that its error feedbacks, and
//! so its messages, stay identical (the coded adapters check this where they can).
//!
//! Threads: gradient_ready() and finish() must be called from one thread at a time (the
//! training thread). With an MPI transport, MPI must be initialised with at least
//! MPI_THREAD_SERIALIZED and, between the first gradient_ready() and finish() of an iteration,
//! no other thread may call MPI on any communicator (the communication thread does);
//! MPI_THREAD_MULTIPLE lifts that restriction for other communicators. gradcomp's MPI transports
//! check the level in start(): below MPI_THREAD_SERIALIZED finish() rethrows their mpi_error.
//!
//! Collective (MPI transports): every rank must construct the pipeline with the same layer
//! sizes and grouping and run the same iterations; each group is one collective on the
//! transport's communicator.
//!
//! NaN and infinite gradients follow the prototype compressor's gradcomp::nonfinite_policy:
//! propagate (default) sends them; raise makes gradient_ready() throw nonfinite_error naming the
//! layer and index; skip_step drops them and counts them in last_stats().nonfinite, and the
//! caller agrees across ranks (mpi::any_rank) and, where any rank counted one, skips the update
//! and calls return_sent() on every rank.
//!
//! A pipeline_policy::selecting_transport (mpi::gtopk_exchange) sums only a global selection of
//! each group's elements: after the waits, finish() gives every sent value outside it back to
//! the residual it came from (per layer or per group; O(nnz + k) per group; counted in
//! last_stats().unselected), so error feedback conserves every value there too.
//!
//! Online re-planning: if Grouping models pipeline_policy::replanning_policy and its
//! warmup_iterations() W is > 0, the pipeline timestamps every gradient_ready() call of its
//! first W successful iterations (see gradient_ready() and begin_backward() for what is
//! measured), and at the end of the W-th successful finish() calls the policy's replan() once
//! with the per-layer medians (measured_backward_seconds()); from the next iteration on, the
//! groups are the new grouping (groups(), replanned()). Results stay bit-identical to
//! per-layer error feedback across the switch (the layers' compression does not depend on the
//! grouping); only the transport's per-group arithmetic may change with the groups. After
//! iteration W nothing is timestamped any more. Without a replanning policy, or with W = 0,
//! nothing of this happens. With a collective policy (mpi::agreed_grouping) every rank must
//! count the same successful iterations: a failure on some ranks only (a layer never reported,
//! a rank-local transport error) would make the ranks re-plan at different iterations, as it
//! already desynchronises the transport's collectives.
//!
//! @tparam Compressor a gradcomp::compressor, copyable (the prototype is copied per layer).
//! @tparam Transport  a pipeline_policy::pipeline_transport: a transport (loopback_exchange,
//!                    mpi::dense_exchange, mpi::sparse_exchange, mpi::gtopk_exchange, ...) or a
//!                    multi_part_transport
//!                    (mpi::coded_dense_exchange, mpi::coded_sparse_exchange).
//! @tparam Grouping   a pipeline_policy::grouping_policy (fixed_grouping, planned_grouping,
//!                    mpi::agreed_grouping<Policy>); a pipeline_policy::replanning_policy
//!                    (planned_grouping, mpi::agreed_grouping<planned_grouping>) may re-plan.
//! @tparam Clock      a pipeline_policy::monotonic_clock for every timestamp and the statistics'
//!                    seconds (std::chrono::steady_clock; tests inject a clock they advance).
template <compressor Compressor,
          pipeline_policy::pipeline_transport Transport,
          pipeline_policy::grouping_policy Grouping = pipeline_policy::fixed_grouping,
          pipeline_policy::monotonic_clock Clock = std::chrono::steady_clock>
class pipeline {
public:
  //! @param layer_numel elements per layer, forward order; at least one layer.
  //! @param grouping    the grouping policy, asked once for the groups of these layers (kept,
  //!                    and asked once more to re-plan, if it is a replanning_policy with
  //!                    warmup_iterations() > 0; it must then stay usable: e.g. the
  //!                    communicator of mpi::agreed_grouping must outlive the pipeline).
  //! @param prototype   the compressor every layer's error feedback starts from.
  //! @param transport   the exchange; must outlive the pipeline and not be used elsewhere
  //!                    while the pipeline lives. A multi_part_transport is asked its
  //!                    parts_per_rank() P here.
  //! @param mc          DGC momentum correction for every layer's error feedback (off by
  //!                    default; see gradcomp::momentum_correction: the optimizer must then
  //!                    apply the averages without momentum).
  //! @param scope       per-layer (default) or per-group error feedback and selection (see
  //!                    compression_scope). Per group, a re-plan starts the new groups'
  //!                    compressors from the prototype (their state, e.g. a reused threshold,
  //!                    restarts); the residuals carry over element by element.
  //! Memory: 4n bytes of residual per layer and part (8n with momentum correction; per group
  //! add 4n of staging), message buffers, and one dense average buffer per group (4 bytes per
  //! element of the model; two on the in-place path, which builds no messages instead); with
  //! re-planning also 8 (W + 1) bytes per layer plus 8 W bytes for the timestamps (W =
  //! warmup_iterations(), allocated here: nothing is allocated per iteration for them). Starts the
  //! communication thread.
  //! @throws std::invalid_argument if there are no layers, the grouping is not a partition
  //! of the layers into consecutive groups in backward order, a multi-part transport reports
  //! 0 parts per rank (or so many that the state's size overflows), or mc is refused by
  //! gradcomp::error_feedback, or warmup_iterations() is so large that the timestamp record
  //! would not fit in memory; whatever the policy's groups() throws.
  pipeline(std::vector<std::size_t> layer_numel,
           Grouping grouping,
           Compressor prototype,
           Transport& transport,
           momentum_correction mc = {},
           compression_scope scope = compression_scope::per_layer)
      : slots_(std::move(layer_numel), transport), replan_(grouping, slots_.numel()),
        feedback_(slots_, prototype, mc, scope),
        iteration_(transport, slots_, feedback_, replan_.groups()) {}

  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  //! Stops the communication thread (after the operation it runs, if any). A started
  //! iteration is abandoned.
  ~pipeline() = default;

  //! @brief Optional: marks the start of this iteration's backward pass (call it right before
  //! loss.backward()). Only used while the pipeline measures backward times (a replanning
  //! policy, during its warm-up): the first reported layer's backward time is then measured
  //! from this call; without it, the first reported layer of an iteration counts 0 s. Calling
  //! it again before the first gradient_ready() moves the mark. With several parts per rank,
  //! call it before each part's backward: each call moves the mark (a layer's time is then
  //! taken from its last part, see gradient_ready()). O(1): one Clock::now() while measuring,
  //! nothing otherwise. Training thread, as gradient_ready(); not collective.
  //! @throws std::invalid_argument if a layer was already reported in this iteration and the
  //! transport takes one part per rank; nothing changes then.
  void begin_backward() { iteration_.begin_backward(replan_.timer()); }

  //! @brief Reports the gradient of `layer` (forward index) for this iteration: compresses it
  //! with the layer's error feedback (O(n) plus the compressor's cost) and, if it completes its
  //! group, assembles the group's message and hands it to the communication thread. `grad` is
  //! read during the call only.
  //!
  //! While measuring (re-planning warm-up), the call's ready time t0 is taken after the
  //! argument checks, before compressing, and its end t1 after the hand-off; the gaps between
  //! calls (t0 minus the previous call's t1 in this iteration, or the begin_backward() mark, or
  //! t0 itself for the first call without one) add up to the layer's ready time, so the
  //! caller-thread compression and assembly are not counted as backward; the iteration's ready
  //! times become per-layer backward times in backward order (detail::backward_timer).
  //! @throws std::invalid_argument naming the layer if it is out of range or was already
  //! reported in this iteration, or naming both lengths if grad's length differs from the
  //! layer's, or if the transport takes several parts per rank (call the three-argument
  //! form); nothing changes then.
  template <host_float_tensor Grad>
  void gradient_ready(std::size_t layer, const Grad& grad) {
    gradcomp::detail::require(parts() == 1,
                              "pipeline: gradient_ready(layer, grad) with a "
                              "transport of ",
                              parts(),
                              " parts per rank: name the part, gradient_ready(part, "
                              "layer, grad)");
    gradient_ready(0, layer, grad);
  }

  //! @brief Reports the gradient of `layer` (forward index) of `part` (0 .. parts() - 1, the
  //! transport's order of this rank's parts) for this iteration: as gradient_ready(layer,
  //! grad), with the error feedback of that part and layer. A group is handed to the
  //! communication thread once every part's layers of it have arrived. While measuring, a
  //! layer's backward time is taken from its last report in the iteration (the last part's
  //! backward, the one the communication overlaps).
  //! @throws std::invalid_argument naming the part if it is out of range (>= parts()), naming
  //! the layer (and part) if it is out of range or was already reported for that part in this
  //! iteration, or naming both lengths if grad's length differs from the layer's; nothing
  //! changes then. gradcomp::nonfinite_error (nonfinite_policy::raise) naming the layer, the
  //! part, the index within the layer and the value: the layer (its group, per group) then
  //! counts as not reported, its residual holds the accumulation, and finish() names it.
  template <host_float_tensor Grad>
  void gradient_ready(std::size_t part, std::size_t layer, const Grad& grad) {
    iteration_.report(part, layer, grad, feedback_, replan_.timer());
  }

  //! @brief Waits for every group's exchange, records the iteration's statistics and starts a
  //! new iteration. The averages are then readable through averaged() until the next iteration
  //! completes the layer's group. Collective with an MPI transport.
  //!
  //! Re-planning: the W-th successful finish() (W = the policy's warmup_iterations() > 0; an
  //! iteration counts when finish() throws nothing of the kinds below) then computes the
  //! per-layer medians of the W iterations' backward times (O(W L)), calls the policy's
  //! replan() (collective for mpi::agreed_grouping: every rank must reach it at the same
  //! iteration), validates the result and rebuilds the group state (O(total elements): the
  //! just-finished averages are copied, so averaged() still returns them). The communication
  //! thread is idle meanwhile.
  //! @throws std::invalid_argument naming the first layer never reported (after waiting for
  //! the groups in flight; the iteration is dropped, residuals keep their updates), or
  //! rethrows the first exception of the communication thread (later groups of that iteration
  //! are skipped). Either way the pipeline is ready for a new iteration. At the re-planning
  //! iteration, whatever replan() throws, or std::invalid_argument if its grouping is not valid
  //! for the layers, after the iteration's results are in place (averaged(), last_stats());
  //! the pipeline then keeps its grouping and never re-plans again (replanned() stays false).
  void finish() {
    iteration_.finish(feedback_, replan_.timer());
    maybe_replan();
  }

  //! @brief finish(), then copies every layer's average into `outputs` (one span per layer,
  //! forward order). O(total elements).
  //! @throws std::invalid_argument naming the counts or the layer and both lengths on a size
  //! mismatch (checked before waiting; nothing changes then), and whatever finish() throws
  //! (a re-planning failure only after the outputs were written).
  void finish(std::span<const std::span<float>> outputs) {
    gradcomp::detail::require(outputs.size() == layers(), "pipeline: finish(): ", outputs.size(),
                              " outputs for ", layers(), " layers");
    for (std::size_t l = 0; l < outputs.size(); ++l) {
      gradcomp::detail::require(outputs[l].size() == slots_.numel(l),
                                "pipeline: finish(): output of layer ", l, " has ",
                                outputs[l].size(), " elements, the layer has ", slots_.numel(l));
    }
    iteration_.finish(feedback_, replan_.timer());
    for (std::size_t l = 0; l < outputs.size(); ++l) {
      const auto a = averaged(l);
      std::copy(a.begin(), a.end(), outputs[l].begin());
    }
    maybe_replan();
  }

  //! @brief The averaged gradient of `layer` (numel elements) from the last finish(). O(1).
  //! @throws std::invalid_argument if layer is out of range.
  [[nodiscard]] std::span<const float> averaged(std::size_t layer) const {
    return iteration_.averaged(layer);
  }

  //! Statistics of the last finished iteration.
  [[nodiscard]] const pipeline_iteration_stats& last_stats() const noexcept {
    return iteration_.last_stats();
  }
  //! The groups now in use (backward positions, in sending order): the policy's first grouping,
  //! or the re-planned one once replanned().
  [[nodiscard]] const schedule::grouping& groups() const noexcept { return replan_.groups(); }
  //! The number of layers. O(1).
  [[nodiscard]] std::size_t layers() const noexcept { return slots_.layers(); }
  //! True once the pipeline switched to a re-planned grouping (from the iteration after the
  //! warm-up on). O(1).
  [[nodiscard]] bool replanned() const noexcept { return replan_.replanned(); }
  //! @brief The measured backward seconds per layer (forward order): for each layer, the
  //! median over the warm-up iterations (the mean of the two middle values for an even count)
  //! of its backward time as gradient_ready() defines it, on this rank's Clock. Empty until
  //! the warm-up ended (and always without re-planning); stays set after a failed replan().
  //! O(1).
  [[nodiscard]] std::span<const double> measured_backward_seconds() const noexcept {
    return replan_.medians();
  }
  //! Layer `layer`'s error feedback (its residual, its compressor), compression_scope::
  //! per_layer only, one part per rank. Not while an iteration runs.
  //! @throws std::out_of_range if layer is out of range, the scope is per_group or the
  //! transport takes several parts per rank (use feedback(part, layer)).
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t layer) {
    return feedback_.feedback(layer);
  }
  //! The error feedback of `layer` of `part`, compression_scope::per_layer only. Not while an
  //! iteration runs. @throws std::out_of_range if part or layer is out of range or the scope is
  //! per_group.
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t part, std::size_t layer) {
    return feedback_.feedback(part, layer);
  }
  //! The residual of `layer` (its elements, forward order), either scope, one part per rank.
  //! Not while an iteration runs. O(1). @throws std::invalid_argument if layer is out of range
  //! or the transport takes several parts per rank (use residual(part, layer)).
  [[nodiscard]] std::span<const float> residual(std::size_t layer) const {
    slots_.require_one_part("residual");
    return residual(0, layer);
  }
  //! The residual of `layer` of `part`, either scope. Not while an iteration runs. O(1).
  //! @throws std::invalid_argument if part or layer is out of range.
  [[nodiscard]] std::span<const float> residual(std::size_t part, std::size_t layer) const {
    return feedback_.residual(part, layer);
  }
  //! The momentum-correction velocity of `layer` (empty without momentum correction), either
  //! scope, one part per rank. O(1). @throws std::invalid_argument if layer is out of range or
  //! the transport takes several parts per rank (use velocity(part, layer)).
  [[nodiscard]] std::span<const float> velocity(std::size_t layer) const {
    slots_.require_one_part("velocity");
    return velocity(0, layer);
  }
  //! The momentum-correction velocity of `layer` of `part` (empty without momentum
  //! correction), either scope. O(1). @throws std::invalid_argument if part or layer is out of
  //! range.
  [[nodiscard]] std::span<const float> velocity(std::size_t part, std::size_t layer) const {
    return feedback_.velocity(part, layer);
  }
  //! Multiplies every residual and velocity (every part and layer, either scope) by `factor`:
  //! after a loss-scale change (loss_scale_step::factor) they stay in the new scale's units.
  //! Exact for a power of two while the products stay normal floats. Call between iterations.
  //! O(total elements). @throws std::logic_error if an iteration is under way.
  void rescale_state(float factor) {
    iteration_.require_between_iterations("rescale_state");
    feedback_.rescale(factor);
  }
  //! Zeroes every NaN and infinity in the residuals and velocities (every part and layer, either
  //! scope) and returns how many there were: after a step skipped for overflow (loss_scale), so
  //! that they do not stay in the error feedback for good. Call between iterations.
  //! O(total elements). @throws std::logic_error if an iteration is under way.
  std::size_t drop_non_finite_state() {
    iteration_.require_between_iterations("drop_non_finite_state");
    return feedback_.drop_non_finite();
  }
  //! @brief Gives every value the last iteration sent back to the residual it came from (every
  //! part and layer, or group): for a step that every rank skips (nonfinite_policy::skip_step
  //! after mpi::any_rank agreed on last_stats().nonfinite > 0, or a loss-scale overflow), so that
  //! nothing finite is lost: each residual is again the accumulation it held before sending
  //! (exactly). With momentum correction the sent elements' velocities stay as the iteration left
  //! them (0 with factor masking).
  //! Call once, between iterations, after a finish() that did not throw; calling it twice gives
  //! the values back twice. O(elements sent). Not collective.
  //! @returns the number of elements given back; 0 on the in-place path (see the class), which
  //! keeps no residual: there the skipped step's gradient is discarded, as in PyTorch's AMP
  //! (the in-place path is off under nonfinite_policy::raise and skip_step).
  //! @throws std::logic_error if an iteration is under way.
  std::size_t return_sent() {
    iteration_.require_between_iterations("return_sent");
    return iteration_.in_place() ? 0 : feedback_.return_sent(iteration_.groups());
  }
  //! @brief Checkpoint state (gradcomp::has_binary_state, where the compressor has one; write it
  //! with gradcomp::save_state(pipe)): the layer sizes, parts, scope and momentum (checked on
  //! load), the prototype compressor, the grouping in use and the re-planning status (with the
  //! warm-up's measurements so far), and every part's and layer's (or group's) error feedback:
  //! residuals, velocities and compressor state, bit for bit. A pipeline built like this one
  //! (same layers, compressor type and options, transport kind, scope, momentum, grouping
  //! policy) that loads it continues exactly as this one would have: the same messages, the same
  //! averages (given the same gradients on every rank). The averages of the last finish() are
  //! not saved. Call between iterations. O(total elements).
  //! @throws std::logic_error if an iteration is under way.
  void save_state(state_writer& w) const requires has_binary_state<Compressor> {
    iteration_.require_between_iterations("save_state");
    gradcomp::detail::save_pipeline(w, slots_, feedback_, replan_, iteration_);
  }

  //! @brief Restores what save_state() wrote (gradcomp::load_state(pipe, bytes)): checks the
  //! layer sizes, parts, scope and momentum, validates the grouping, then takes the saved
  //! grouping, re-planning status and every error-feedback state. The state must end the
  //! reader's payload (a pipeline is not copied to load, so it checks that itself before it
  //! changes anything; gradcomp::load_state(pipe, bytes) is the way). All or nothing. averaged()
  //! holds zeros until the next finish(). Call between iterations. O(total elements) time; the
  //! error feedback is read into copies first, so the peak memory is about twice the residuals
  //! and velocities (plus the new group buffers).
  //! @throws state_error naming what differs or is invalid (the pipeline is then unchanged), or
  //! std::logic_error if an iteration is under way.
  void load_state(state_reader& r) requires has_binary_state<Compressor> {
    iteration_.require_between_iterations("load_state");
    gradcomp::detail::load_pipeline(r, slots_, feedback_, replan_, iteration_);
  }

  //! @brief Sets the density of every compressor (every part and layer, or every part and group
  //! with compression_scope::per_group, and the prototype that a re-plan copies): a density
  //! schedule's step, e.g. `pipe.set_density(warmup.at_iteration(i, I))` (gradcomp::
  //! density_warmup, DGC sec. 3.4). Takes effect from the next iteration; error feedback's
  //! conservation stays exact (the residuals are kept). Call between iterations. O(layers x parts).
  //! @throws std::invalid_argument naming `d` if it is outside (0, 1] (nothing changes), or
  //! std::logic_error if an iteration is under way.
  void set_density(double d) requires density_compressor<Compressor> {
    iteration_.require_between_iterations("set_density");
    feedback_.set_density(d, iteration_.groups());
  }
  //! @brief Switches DGC's momentum factor masking (gradcomp::momentum_correction::factor_masking)
  //! for every layer's (or group's) error feedback, e.g. on when a density warm-up ends. The
  //! velocities and residuals are kept: conservation stays exact. Takes effect from the next
  //! iteration; no effect without momentum correction. Call between iterations. O(layers x
  //! parts).
  //! @throws std::logic_error if an iteration is under way.
  void set_factor_masking(bool on) {
    iteration_.require_between_iterations("set_factor_masking");
    feedback_.set_factor_masking(on);
  }
  //! @brief Sets one density per layer (forward order; every part of a layer gets its layer's),
  //! e.g. from gradcomp::adaptive_densities. compression_scope::per_layer only. Call between
  //! iterations; takes effect from the next one. O(layers x parts).
  //! @throws std::invalid_argument if there is not one density per layer, naming the first
  //! density outside (0, 1], or if the scope is per_group (nothing changes then), or
  //! std::logic_error if an iteration is under way.
  void
  set_layer_densities(std::span<const double> densities) requires density_compressor<Compressor> {
    iteration_.require_between_iterations("set_layer_densities");
    feedback_.set_layer_densities(densities);
  }
  //! Messages per rank and operation: the transport's parts_per_rank() for a
  //! multi_part_transport, else 1. O(1).
  [[nodiscard]] std::size_t parts() const noexcept { return slots_.parts(); }
  //! The scope of error feedback and selection. O(1).
  [[nodiscard]] compression_scope scope() const noexcept { return feedback_.scope(); }
  //! Whether groups are averaged in place, without messages (see the class). O(1).
  [[nodiscard]] bool in_place() const noexcept { return iteration_.in_place(); }

private:
  // At the end of the warm-up: the policy's new grouping (validated) in use from the next
  // iteration, the just-finished averages copied into its groups. Throws with the old kept.
  void maybe_replan() {
    if (std::optional<schedule::grouping> next = replan_.replan_if_due(slots_.numel())) {
      auto layout = iteration_.layout_of(*next, feedback_, true);
      iteration_.adopt(std::move(layout), feedback_.per_group());
      replan_.switch_to(std::move(*next));
    }
  }

  // Composition (declaration order is construction order; see detail/ for each part):
  gradcomp::detail::layer_slots slots_;                   // layers and parts; fixed
  gradcomp::detail::replanning<Grouping, Clock> replan_;  // the grouping and its re-planning
  gradcomp::detail::feedback_state<Compressor> feedback_; // error feedback, prototype
  // reports, groups, statistics, communication thread (last: its thread starts last)
  gradcomp::detail::iteration_engine<Compressor, Transport, Clock> iteration_;
};

} // namespace gradcomp
