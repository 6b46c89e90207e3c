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
#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/clock.hpp>
#include <gradcomp/pipeline/compression_scope.hpp>
#include <gradcomp/pipeline/detail/communication_thread.hpp>
#include <gradcomp/pipeline/detail/group_exchange.hpp>
#include <gradcomp/pipeline/detail/group_feedback.hpp>
#include <gradcomp/pipeline/detail/group_layout.hpp>
#include <gradcomp/pipeline/detail/pipeline_checkpoint.hpp>
#include <gradcomp/pipeline/detail/replanning.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/pipeline/iteration_stats.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
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
//! MPI_THREAD_MULTIPLE lifts that restriction for other communicators.
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
  static constexpr bool multi_part = pipeline_policy::multi_part_transport<Transport>;
  // the in-place path (see the class): a lossless dense compressor over an in-place transport
  static constexpr bool in_place_capable = !multi_part &&
                                           pipeline_policy::in_place_transport<Transport> &&
                                           std::is_same_v<Compressor, dense>;

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
      : numel_(std::move(layer_numel)), transport_(&transport), policy_(grouping), scope_(scope),
        prototype_(prototype), momentum_(static_cast<float>(mc.momentum)),
        factor_masking_(mc.factor_masking) {
    gradcomp::detail::require(!numel_.empty(), "pipeline: no layers");
    const std::size_t layers = numel_.size();
    if constexpr (multi_part) {
      parts_ = static_cast<std::size_t>(transport.parts_per_rank());
      gradcomp::detail::require(parts_ >= 1, "pipeline: the transport takes ", parts_,
                                " parts per rank; at least 1 is needed");
      gradcomp::detail::require(parts_ <= std::numeric_limits<std::size_t>::max() / layers,
                                "pipeline: ", parts_, " parts per rank x ", layers,
                                " layers overflow std::size_t");
    }
    grouping_ = policy_.first_grouping(grouping, std::span<const std::size_t>(numel_));
    schedule::validate(grouping_, layers);
    policy_.start(replan_, layers);
    const std::size_t slots = parts_ * layers;
    if (scope_ == compression_scope::per_layer) {
      feedback_.reserve(slots);
      for (std::size_t part = 0; part < parts_; ++part) {
        for (const std::size_t n : numel_) {
          feedback_.emplace_back(n, prototype, mc);
        }
      }
    } else {
      gradcomp::detail::check_momentum_correction<Compressor>(mc);
      group_feedback_ = gradcomp::detail::group_feedback(std::span<const std::size_t>(numel_),
                                                         parts_, momentum_ > 0.0f);
    }
    if constexpr (in_place_capable) {
      in_place_ =
          scope_ == compression_scope::per_layer && momentum_ == 0.0f &&
          prototype_.get_options().values == value_type::fp32 &&
          gradcomp::detail::nonfinite_of(prototype_.get_options()) == nonfinite_policy::propagate &&
          transport.accepts_in_place();
    }
    layer_messages_.resize(slots);
    reported_.assign(slots, false);
    group_layout layout = layout_of(grouping_);
    groups_.swap(layout.groups);
    group_of_.swap(layout.group_of);
    offset_of_.swap(layout.offset_of);
    current_.layers.assign(slots, selection_stats{});
    if (scope_ == compression_scope::per_group) {
      current_.groups.assign(parts_ * groups_.size(), selection_stats{});
    }
    for (const std::size_t n : numel_) {
      current_.numel += n * parts_;
    }
    last_ = current_;
    comm_.start(groups_.size(),
                [this](std::size_t group, bool skip) { return exchange(group, skip); });
  }

  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  //! Stops the communication thread (after the operation it runs, if any). A started
  //! iteration is abandoned.
  ~pipeline() { comm_.stop(); }

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
  void begin_backward() {
    gradcomp::detail::require(!started_ || parts_ > 1, "pipeline: begin_backward() after "
                                                       "gradient_ready() in the same iteration");
    if (replan_.times.measuring()) {
      replan_.times.mark(clock::now());
    }
  }

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
    gradcomp::detail::require(parts_ == 1,
                              "pipeline: gradient_ready(layer, grad) with a "
                              "transport of ",
                              parts_,
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
    gradcomp::detail::require(part < parts_, "pipeline: part ", part, " is out of range (", parts_,
                              " parts per rank)");
    gradcomp::detail::require(layer < numel_.size(), "pipeline: layer ", layer,
                              " is out of range (", numel_.size(), " layers)");
    const std::size_t slot = part * numel_.size() + layer;
    gradcomp::detail::require(!reported_[slot], "pipeline: layer ", layer, part_text(part),
                              " reported twice in one iteration");
    const auto g = host_span(grad);
    gradcomp::detail::require(g.size() == numel_[layer], "pipeline: layer ", layer, part_text(part),
                              ": gradient has ", g.size(), " elements, the layer has ",
                              numel_[layer]);
    const auto t0 = clock::now();
    const bool measure = replan_.times.measuring();
    if (measure) {
      replan_.times.record(layer, t0);
    }
    if (in_place_) {
      current_.layers[slot] = copy_in_place(layer, g);
    } else if (scope_ == compression_scope::per_layer) {
      try {
        current_.layers[slot] = feedback_[slot].compress(g, layer_messages_[slot]);
      } catch (const nonfinite_error& e) {
        throw_nonfinite(e, part, layer, e.index());
      }
    } else {
      group_feedback_.stage(part, layer, g);
    }
    reported_[slot] = true;
    started_ = true;
    const std::size_t g_index = group_of_[layer];
    group_state& state = groups_[g_index];
    if (--state.pending == 0) {
      for (std::size_t p = 0; p < parts_ && !in_place_; ++p) {
        if (scope_ == compression_scope::per_layer) {
          gradcomp::detail::concatenate_layers(
              state.messages[p], state,
              std::span<const sparse_message>(layer_messages_).subspan(p * numel_.size()),
              offset_of_);
        } else {
          try {
            compress_group(p, g_index);
          } catch (const nonfinite_error& e) {
            ++state.pending; // the group is not complete: finish() names the layer
            reported_[slot] = false;
            const std::size_t l = gradcomp::detail::layer_at(state, offset_of_, e.index());
            throw_nonfinite(e, p, l, e.index() - static_cast<std::size_t>(offset_of_[l]));
          }
        }
      }
      comm_.mark_ready(g_index);
    }
    const auto t1 = clock::now();
    current_.compress_seconds += std::chrono::duration<double>(t1 - t0).count();
    if (measure) {
      replan_.times.mark(t1);
    }
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
    finish_iteration();
    maybe_replan();
  }

  //! @brief finish(), then copies every layer's average into `outputs` (one span per layer,
  //! forward order). O(total elements).
  //! @throws std::invalid_argument naming the counts or the layer and both lengths on a size
  //! mismatch (checked before waiting; nothing changes then), and whatever finish() throws
  //! (a re-planning failure only after the outputs were written).
  void finish(std::span<const std::span<float>> outputs) {
    gradcomp::detail::require(outputs.size() == numel_.size(),
                              "pipeline: finish(): ", outputs.size(), " outputs for ",
                              numel_.size(), " layers");
    for (std::size_t l = 0; l < outputs.size(); ++l) {
      gradcomp::detail::require(outputs[l].size() == numel_[l],
                                "pipeline: finish(): output of layer ", l, " has ",
                                outputs[l].size(), " elements, the layer has ", numel_[l]);
    }
    finish_iteration();
    for (std::size_t l = 0; l < outputs.size(); ++l) {
      const auto a = averaged(l);
      std::copy(a.begin(), a.end(), outputs[l].begin());
    }
    maybe_replan();
  }

  //! @brief The averaged gradient of `layer` (numel elements) from the last finish(). O(1).
  //! @throws std::invalid_argument if layer is out of range.
  [[nodiscard]] std::span<const float> averaged(std::size_t layer) const {
    gradcomp::detail::require(layer < numel_.size(), "pipeline: layer ", layer,
                              " is out of range (", numel_.size(), " layers)");
    const group_state& state = groups_[group_of_[layer]];
    return std::span<const float>(state.average)
        .subspan(static_cast<std::size_t>(offset_of_[layer]), numel_[layer]);
  }

  //! Statistics of the last finished iteration.
  [[nodiscard]] const pipeline_iteration_stats& last_stats() const noexcept { return last_; }
  //! The groups now in use (backward positions, in sending order): the policy's first grouping,
  //! or the re-planned one once replanned().
  [[nodiscard]] const schedule::grouping& groups() const noexcept { return grouping_; }
  //! The number of layers. O(1).
  [[nodiscard]] std::size_t layers() const noexcept { return numel_.size(); }
  //! True once the pipeline switched to a re-planned grouping (from the iteration after the
  //! warm-up on). O(1).
  [[nodiscard]] bool replanned() const noexcept { return replan_.replanned; }
  //! @brief The measured backward seconds per layer (forward order): for each layer, the
  //! median over the warm-up iterations (the mean of the two middle values for an even count)
  //! of its backward time as gradient_ready() defines it, on this rank's Clock. Empty until
  //! the warm-up ended (and always without re-planning); stays set after a failed replan().
  //! O(1).
  [[nodiscard]] std::span<const double> measured_backward_seconds() const noexcept {
    return replan_.times.medians();
  }
  //! Layer `layer`'s error feedback (its residual, its compressor), compression_scope::
  //! per_layer only, one part per rank. Not while an iteration runs.
  //! @throws std::out_of_range if layer is out of range, the scope is per_group or the
  //! transport takes several parts per rank (use feedback(part, layer)).
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t layer) {
    if (parts_ != 1) {
      throw std::out_of_range("pipeline: feedback(layer) with several parts per rank: use "
                              "feedback(part, layer)");
    }
    return feedback_.at(layer);
  }
  //! The error feedback of `layer` of `part`, compression_scope::per_layer only. Not while an
  //! iteration runs. @throws std::out_of_range if part or layer is out of range or the scope is
  //! per_group.
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t part, std::size_t layer) {
    if (part >= parts_ || layer >= numel_.size()) {
      throw std::out_of_range("pipeline: feedback(part, layer) out of range");
    }
    return feedback_.at(part * numel_.size() + layer);
  }
  //! The residual of `layer` (its elements, forward order), either scope, one part per rank.
  //! Not while an iteration runs. O(1). @throws std::invalid_argument if layer is out of range
  //! or the transport takes several parts per rank (use residual(part, layer)).
  [[nodiscard]] std::span<const float> residual(std::size_t layer) const {
    require_one_part("residual");
    return residual(0, layer);
  }
  //! The residual of `layer` of `part`, either scope. Not while an iteration runs. O(1).
  //! @throws std::invalid_argument if part or layer is out of range.
  [[nodiscard]] std::span<const float> residual(std::size_t part, std::size_t layer) const {
    require_slot(part, layer);
    if (scope_ == compression_scope::per_layer) {
      return feedback_[part * numel_.size() + layer].residual();
    }
    return group_feedback_.residual(part, layer, numel_[layer]);
  }
  //! The momentum-correction velocity of `layer` (empty without momentum correction), either
  //! scope, one part per rank. O(1). @throws std::invalid_argument if layer is out of range or
  //! the transport takes several parts per rank (use velocity(part, layer)).
  [[nodiscard]] std::span<const float> velocity(std::size_t layer) const {
    require_one_part("velocity");
    return velocity(0, layer);
  }
  //! The momentum-correction velocity of `layer` of `part` (empty without momentum
  //! correction), either scope. O(1). @throws std::invalid_argument if part or layer is out of
  //! range.
  [[nodiscard]] std::span<const float> velocity(std::size_t part, std::size_t layer) const {
    require_slot(part, layer);
    if (scope_ == compression_scope::per_layer) {
      return feedback_[part * numel_.size() + layer].velocity();
    }
    return group_feedback_.velocity(part, layer, numel_[layer]);
  }
  //! Multiplies every residual and velocity (every part and layer, either scope) by `factor`:
  //! after a loss-scale change (loss_scale_step::factor) they stay in the new scale's units.
  //! Exact for a power of two while the products stay normal floats. Call between iterations.
  //! O(total elements). @throws std::logic_error if an iteration is under way.
  void rescale_state(float factor) {
    require_between_iterations("rescale_state");
    for (auto& f : feedback_) {
      f.rescale(factor);
    }
    group_feedback_.rescale(factor);
  }
  //! Zeroes every NaN and infinity in the residuals and velocities (every part and layer, either
  //! scope) and returns how many there were: after a step skipped for overflow (loss_scale), so
  //! that they do not stay in the error feedback for good. Call between iterations.
  //! O(total elements). @throws std::logic_error if an iteration is under way.
  std::size_t drop_non_finite_state() {
    require_between_iterations("drop_non_finite_state");
    std::size_t count = group_feedback_.drop_non_finite();
    for (auto& f : feedback_) {
      count += f.drop_non_finite();
    }
    return count;
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
    require_between_iterations("return_sent");
    std::size_t count = 0;
    if (in_place_) {
      return 0;
    }
    if (scope_ == compression_scope::per_layer) {
      for (std::size_t slot = 0; slot < feedback_.size(); ++slot) {
        count += feedback_[slot].return_sent(layer_messages_[slot]);
      }
      return count;
    }
    for (const group_state& state : groups_) {
      for (std::size_t p = 0; p < parts_; ++p) {
        count += group_feedback_.add_sent(p, state.layers.front(),
                                          static_cast<std::size_t>(state.numel), state.messages[p]);
      }
    }
    return count;
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
    require_between_iterations("save_state");
    shape().save_state(w);
    prototype_.save_state(w);
    gradcomp::detail::save_grouping(w, grouping_);
    replan_.save_state(w);
    if (scope_ == compression_scope::per_layer) {
      for (const auto& f : feedback_) {
        f.save_state(w);
      }
    } else {
      for (const group_state& state : groups_) {
        for (const Compressor& c : state.compressors) {
          c.save_state(w);
        }
      }
      group_feedback_.save_state(w);
    }
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
    require_between_iterations("load_state");
    shape().expect(r);
    Compressor prototype = prototype_;
    prototype.load_state(r);
    schedule::grouping grouping = gradcomp::detail::load_grouping(r, numel_.size());
    gradcomp::detail::replan_status<Clock> replan = replan_;
    replan.load_state(r);
    std::vector<error_feedback<Compressor>> feedback = feedback_;
    for (auto& f : feedback) {
      f.load_state(r);
    }
    group_layout layout = layout_of(grouping);
    std::pair<std::vector<float>, std::vector<float>> buffers;
    if (scope_ == compression_scope::per_group) {
      for (group_state& state : layout.groups) {
        for (Compressor& c : state.compressors) {
          c = prototype_;
          c.load_state(r);
        }
      }
      buffers = group_feedback_.read_state(r);
    }
    r.require_end(); // a pipeline's state is a whole payload (gradcomp::load_state)
    // everything read: commit
    prototype_ = std::move(prototype);
    feedback_ = std::move(feedback);
    if (scope_ == compression_scope::per_group) {
      group_feedback_.adopt(std::move(buffers));
    }
    replan_ = std::move(replan);
    adopt(std::move(grouping), std::move(layout));
  }

  //! @brief Sets the density of every compressor (every part and layer, or every part and group
  //! with compression_scope::per_group, and the prototype that a re-plan copies): a density
  //! schedule's step, e.g. `pipe.set_density(warmup.at_iteration(i, I))` (gradcomp::
  //! density_warmup, DGC sec. 3.4). Takes effect from the next iteration; error feedback's
  //! conservation stays exact (the residuals are kept). Call between iterations. O(layers x parts).
  //! @throws std::invalid_argument naming `d` if it is outside (0, 1] (nothing changes), or
  //! std::logic_error if an iteration is under way.
  void set_density(double d) requires density_compressor<Compressor> {
    require_between_iterations("set_density");
    check_density(d);
    prototype_.set_density(d);
    for (auto& f : feedback_) {
      f.compressor().set_density(d);
    }
    for (group_state& state : groups_) {
      for (Compressor& c : state.compressors) {
        c.set_density(d);
      }
    }
  }
  //! @brief Switches DGC's momentum factor masking (gradcomp::momentum_correction::factor_masking)
  //! for every layer's (or group's) error feedback, e.g. on when a density warm-up ends. The
  //! velocities and residuals are kept: conservation stays exact. Takes effect from the next
  //! iteration; no effect without momentum correction. Call between iterations. O(layers x
  //! parts).
  //! @throws std::logic_error if an iteration is under way.
  void set_factor_masking(bool on) {
    require_between_iterations("set_factor_masking");
    factor_masking_ = on;
    for (auto& f : feedback_) {
      f.set_factor_masking(on);
    }
  }
  //! @brief Sets one density per layer (forward order; every part of a layer gets its layer's),
  //! e.g. from gradcomp::adaptive_densities. compression_scope::per_layer only. Call between
  //! iterations; takes effect from the next one. O(layers x parts).
  //! @throws std::invalid_argument if there is not one density per layer, naming the first
  //! density outside (0, 1], or if the scope is per_group (nothing changes then), or
  //! std::logic_error if an iteration is under way.
  void
  set_layer_densities(std::span<const double> densities) requires density_compressor<Compressor> {
    require_between_iterations("set_layer_densities");
    gradcomp::detail::require(scope_ == compression_scope::per_layer,
                              "pipeline: set_layer_densities() needs compression_scope::per_layer "
                              "(per group, use set_density)");
    gradcomp::detail::require(densities.size() == numel_.size(), "pipeline: ", densities.size(),
                              " densities for ", numel_.size(), " layers");
    for (const double d : densities) {
      check_density(d);
    }
    for (std::size_t slot = 0; slot < feedback_.size(); ++slot) {
      feedback_[slot].compressor().set_density(densities[slot % numel_.size()]);
    }
  }
  //! Messages per rank and operation: the transport's parts_per_rank() for a
  //! multi_part_transport, else 1. O(1).
  [[nodiscard]] std::size_t parts() const noexcept { return parts_; }
  //! The scope of error feedback and selection. O(1).
  [[nodiscard]] compression_scope scope() const noexcept { return scope_; }
  //! Whether groups are averaged in place, without messages (see the class). O(1).
  [[nodiscard]] bool in_place() const noexcept { return in_place_; }

private:
  using clock = Clock;
  using group_state = gradcomp::detail::group_state<Compressor>;
  using group_layout = gradcomp::detail::group_layout<Compressor>;

  //! @throws std::logic_error naming `what` if a layer of the current iteration was reported.
  void require_between_iterations(const char* what) const {
    if (started_) {
      throw std::logic_error(std::string("pipeline: ") + what +
                             "() while an iteration is under way");
    }
  }

  // The shape the checkpoint records (and checks on load).
  [[nodiscard]] gradcomp::detail::pipeline_shape shape() const noexcept {
    return {numel_, parts_, scope_ == compression_scope::per_group, momentum_};
  }

  // " of part p" with several parts per rank, else nothing (for error texts).
  [[nodiscard]] std::string part_text(std::size_t part) const {
    return parts_ == 1 ? std::string() : gradcomp::detail::concat(" of part ", part);
  }

  // Rethrows a compressor's nonfinite_error (nonfinite_policy::raise) with the layer (and part)
  // and the index within the layer.
  [[noreturn]] void throw_nonfinite(const nonfinite_error& e,
                                    std::size_t part,
                                    std::size_t layer,
                                    std::size_t index) const {
    throw nonfinite_error(gradcomp::detail::concat("gradcomp: pipeline: layer ", layer,
                                                   part_text(part), ": non-finite value ",
                                                   e.value(), " at index ", index, " of ",
                                                   numel_[layer], " (", e.count(),
                                                   " non-finite values in the compressed "
                                                   "gradient; nonfinite_policy::raise)"),
                          index, e.value(), e.count(), layer);
  }

  void require_one_part(const char* what) const {
    gradcomp::detail::require(parts_ == 1, "pipeline: ", what, "(layer) with ", parts_,
                              " parts per rank: use ", what, "(part, layer)");
  }

  void require_slot(std::size_t part, std::size_t layer) const {
    gradcomp::detail::require(part < parts_, "pipeline: part ", part, " is out of range (", parts_,
                              " parts per rank)");
    gradcomp::detail::require(layer < numel_.size(), "pipeline: layer ", layer,
                              " is out of range (", numel_.size(), " layers)");
  }

  // compression_scope::per_group: compresses part `part` of group g_index's staged gradient
  // with its residual (and velocity) into the group's message of that part; per-layer
  // statistics from the message.
  void compress_group(std::size_t part, std::size_t g_index) {
    group_state& state = groups_[g_index];
    sparse_message& message = state.messages[part];
    const selection_stats s = group_feedback_.compress(
        state.compressors[part], part, state.layers.front(), static_cast<std::size_t>(state.numel),
        momentum_, factor_masking_, message);
    current_.groups[part * groups_.size() + g_index] = s;
    gradcomp::detail::count_layer_selections(
        message, state, numel_, offset_of_,
        std::span<selection_stats>(current_.layers).subspan(part * numel_.size(), numel_.size()));
  }

  // The in-place path: layer `layer`'s gradient into its group's staging buffer
  // (detail::copy_in_place); the statistics dense compression reports.
  selection_stats copy_in_place(std::size_t layer, std::span<const float> g) {
    if constexpr (in_place_capable) {
      return gradcomp::detail::copy_in_place(groups_[group_of_[layer]].staging.data() +
                                                 offset_of_[layer],
                                             g, prototype_.get_options().threads);
    } else {
      return {}; // never called: in_place_ is false
    }
  }

  // pipeline_policy::selecting_transport: every group's sent values outside its global
  // selection go back to the residuals they came from (caller's thread, after the waits).
  std::size_t return_unselected() {
    std::size_t count = 0;
    if constexpr (pipeline_policy::selecting_transport<Transport> && !multi_part) {
      for (group_state& state : groups_) {
        if (!state.has_selection) {
          continue;
        }
        state.has_selection = false;
        const std::span<const std::uint32_t> g(state.selected);
        if (scope_ == compression_scope::per_layer) {
          for (const std::size_t l : state.layers) {
            count += feedback_[l].return_unselected(layer_messages_[l], g, offset_of_[l]);
          }
        } else {
          count += group_feedback_.add_unselected(state.layers.front(),
                                                  static_cast<std::size_t>(state.numel),
                                                  state.messages.front(), g);
        }
      }
    }
    return count;
  }

  // finish() without the re-planning step.
  void finish_iteration() {
    const auto t0 = clock::now();
    const gradcomp::detail::exchange_report sums = comm_.collect();
    const std::exception_ptr error = sums.error;
    current_.communicate_seconds = sums.seconds;
    current_.communicate_cpu_seconds = sums.cpu_seconds;
    current_.bytes_sent = sums.bytes_sent;
    current_.bytes_received = sums.bytes_received;
    current_.finish_wait_seconds = seconds_since(t0);
    current_.bytes_reported = gradcomp::detail::transport_counts_bytes(*transport_);
    const std::size_t slots = reported_.size();
    std::size_t missing = slots;
    current_.selected = 0;
    current_.nonfinite = 0;
    for (std::size_t slot = 0; slot < slots; ++slot) {
      if (!reported_[slot] && missing == slots) {
        missing = slot;
      }
      current_.selected += current_.layers[slot].k_selected;
      current_.nonfinite += current_.layers[slot].nonfinite;
    }
    for (const selection_stats& g : current_.groups) {
      current_.nonfinite += g.nonfinite;
    }
    current_.unselected = return_unselected();
    last_ = current_;
    reset_iteration();
    gradcomp::detail::require(missing == slots, "pipeline: finish(): layer ",
                              missing % numel_.size(), part_text(missing / numel_.size()),
                              " was never reported in this iteration");
    if (error) {
      std::rethrow_exception(error);
    }
    replan_.times.iteration_done();
  }

  // At the end of the warm-up: medians, replan(), validation, rebuild. Throws with the old
  // grouping kept.
  void maybe_replan() {
    std::optional<schedule::grouping> next =
        policy_.replan_if_due(replan_, std::span<const std::size_t>(numel_));
    if (!next) {
      return;
    }
    group_layout layout = layout_of(*next);
    for (std::size_t l = 0; l < numel_.size(); ++l) {
      const auto a = averaged(l);
      std::copy(a.begin(), a.end(),
                layout.groups[layout.group_of[l]].average.begin() +
                    static_cast<std::ptrdiff_t>(layout.offset_of[l]));
    }
    adopt(std::move(*next), std::move(layout));
    replan_.replanned = true;
  }

  // The group state of grouping `g` (valid for numel_): zeroed averages, all layers pending.
  [[nodiscard]] group_layout layout_of(const schedule::grouping& g) const {
    return gradcomp::detail::make_group_layout(g, std::span<const std::size_t>(numel_), parts_,
                                               in_place_, scope_ == compression_scope::per_group,
                                               prototype_);
  }

  // Makes `g` (with its `layout`) the grouping in use. Between iterations only: the
  // communication thread is idle (collect() returned, nothing ready since) and reads groups_
  // only for a group marked ready. Never throws but bad_alloc.
  void adopt(schedule::grouping g, group_layout layout) {
    comm_.restart(layout.groups.size());
    groups_.swap(layout.groups);
    group_of_.swap(layout.group_of);
    offset_of_.swap(layout.offset_of);
    grouping_.swap(g);
    if (scope_ == compression_scope::per_group) {
      current_.groups.assign(parts_ * groups_.size(), selection_stats{});
    }
  }

  static double seconds_since(typename clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  }

  void reset_iteration() {
    reported_.assign(reported_.size(), false);
    started_ = false;
    replan_.times.next_iteration();
    for (group_state& state : groups_) {
      state.pending = state.layers.size() * parts_;
    }
    current_.compress_seconds = 0.0;
    current_.layers.assign(reported_.size(), selection_stats{});
    if (scope_ == compression_scope::per_group) {
      current_.groups.assign(parts_ * groups_.size(), selection_stats{});
    }
  }

  // The communication thread's work for group `index` (skip: an earlier group of the iteration
  // failed): the transport's exchange of its messages, or of its buffer in place, timed.
  gradcomp::detail::exchange_report exchange(std::size_t index, bool skip) {
    group_state& state = groups_[index];
    state.has_selection = false;
    if (skip) {
      return {};
    }
    return gradcomp::detail::timed_exchange<clock>([&](gradcomp::detail::exchange_report& r) {
      gradcomp::detail::exchange_group<in_place_capable>(*transport_, state, in_place_, r);
    });
  }

  // fixed at construction
  std::vector<std::size_t> numel_;
  Transport* transport_;
  [[no_unique_address]] gradcomp::detail::kept_grouping_policy<Grouping> policy_;
  // set at construction, replaced once by a re-plan (caller's thread, comm thread idle)
  schedule::grouping grouping_;
  std::vector<std::size_t> group_of_;
  std::vector<std::uint64_t> offset_of_;
  compression_scope scope_;
  bool in_place_ = false; // the in-place path (see the class); fixed at construction
  Compressor prototype_;
  float momentum_;
  bool factor_masking_;   // momentum_correction::factor_masking
  std::size_t parts_ = 1; // messages per rank and operation
  // caller's thread; per (part, layer) state at index part x layers + layer
  std::vector<error_feedback<Compressor>> feedback_; // per_layer
  gradcomp::detail::group_feedback group_feedback_;  // per_group: parts x all layers
  bool started_ = false;                             // a layer was reported in this iteration
  gradcomp::detail::replan_status<Clock> replan_;    // re-planning warm-up and status
  std::vector<sparse_message> layer_messages_;
  std::vector<bool> reported_;
  pipeline_iteration_stats current_, last_;
  std::vector<group_state> groups_;             // read by the comm thread for a group marked ready
  gradcomp::detail::communication_thread comm_; // last: started after every other member exists
};

} // namespace gradcomp
