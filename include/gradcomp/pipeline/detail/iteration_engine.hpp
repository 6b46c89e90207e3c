// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::iteration_engine: the pipeline's iteration state machine: which slots were
//! reported, each group's completion and hand-off to the communication thread, finish()'s wait
//! and accounting, the statistics, and the group state all this runs on.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/detail/backward_timer.hpp>
#include <gradcomp/pipeline/detail/communication_thread.hpp>
#include <gradcomp/pipeline/detail/feedback_state.hpp>
#include <gradcomp/pipeline/detail/group_exchange.hpp>
#include <gradcomp/pipeline/detail/group_layout.hpp>
#include <gradcomp/pipeline/detail/layer_slots.hpp>
#include <gradcomp/pipeline/iteration_stats.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief One pipeline's iterations: report() takes a slot's gradient (compressed by the
//! detail::feedback_state it is given, or copied in place) and hands each group it completes
//! to the communication thread; finish() waits for the groups, records the statistics and
//! starts the next iteration. Owns the groups' state (detail::group_layout: messages, averages,
//! per-group compressors), which only adopt() replaces, between iterations. The communication
//! thread reads a group only once it is marked ready; all else runs on the training thread.
//! @tparam Compressor the pipeline's gradcomp::compressor.
//! @tparam Transport  a pipeline_policy::pipeline_transport.
//! @tparam Clock      a pipeline_policy::monotonic_clock (timestamps and seconds).
template <compressor Compressor, pipeline_policy::pipeline_transport Transport, class Clock>
class iteration_engine {
  static constexpr bool in_place_types = in_place_capable<Compressor, Transport>;

public:
  using group_type = group_state<Compressor>;   //!< one group's state
  using layout_type = group_layout<Compressor>; //!< every group's state, and where layers are

  //! @brief Iterations over `transport` of the slots of `slots` (both must outlive this object)
  //! in groups `grouping` (valid), for `feedback`'s scope and prototype: decides the in-place
  //! path (detail::takes_in_place), builds the group state and starts the communication thread.
  //! Memory: one dense average buffer per group (two in place). O(total elements).
  //! @throws std::system_error if the thread cannot start; bad_alloc.
  iteration_engine(Transport& transport,
                   const layer_slots& slots,
                   const feedback_state<Compressor>& feedback,
                   const schedule::grouping& grouping)
      : slots_(slots), transport_(&transport),
        in_place_(takes_in_place(
            transport, feedback.prototype(), !feedback.per_group(), feedback.momentum())) {
    reported_.assign(slots.count(), false);
    layout_ = layout_of(grouping, feedback);
    current_.layers.assign(slots.count(), selection_stats{});
    clear_group_stats(feedback.per_group());
    for (const std::size_t n : slots.numel()) {
      current_.numel += n * slots.parts();
    }
    last_ = current_;
    comm_.start(layout_.groups.size(),
                [this](std::size_t group, bool skip) { return exchange(group, skip); });
  }
  iteration_engine(const iteration_engine&) = delete;
  iteration_engine& operator=(const iteration_engine&) = delete;
  //! Stops the communication thread (after the operation it runs, if any).
  ~iteration_engine() { comm_.stop(); }

  //! Whether groups are averaged in place, without messages. O(1).
  [[nodiscard]] bool in_place() const noexcept { return in_place_; }
  //! @throws std::logic_error naming `what` if a slot of this iteration was reported. O(1).
  void require_between_iterations(const char* what) const {
    if (started_) {
      throw std::logic_error(std::string("pipeline: ") + what +
                             "() while an iteration is under way");
    }
  }
  //! The groups' state, in sending order (for feedback_state, between iterations). O(1).
  [[nodiscard]] std::span<group_type> groups() noexcept { return layout_.groups; }
  //! The groups' state, read only. O(1).
  [[nodiscard]] std::span<const group_type> groups() const noexcept { return layout_.groups; }
  //! Statistics of the last finished iteration. O(1).
  [[nodiscard]] const pipeline_iteration_stats& last_stats() const noexcept { return last_; }

  //! @brief Marks the start of a backward pass on `timer` while it measures (one
  //! Clock::now()). O(1). @throws std::invalid_argument if a slot was reported in this
  //! iteration and there is one part per rank; nothing changes then.
  void begin_backward(backward_timer<Clock>& timer) {
    require(!started_ || slots_.parts() > 1, "pipeline: begin_backward() after "
                                             "gradient_ready() in the same iteration");
    if (timer.measuring()) {
      timer.mark(Clock::now());
    }
  }

  //! @brief pipeline::gradient_ready(part, layer, grad) with `feedback`'s error feedback and
  //! `timer` measuring: checks the slot, compresses (or copies in place, or stages) the
  //! gradient and, if that completes its group, builds the group's messages and marks it ready.
  //! O(n) plus the compressor's cost (and the group's assembly).
  //! @throws as pipeline::gradient_ready(part, layer, grad).
  template <host_float_tensor Grad>
  void report(std::size_t part,
              std::size_t layer,
              const Grad& grad,
              feedback_state<Compressor>& feedback,
              backward_timer<Clock>& timer) {
    slots_.require_slot(part, layer);
    const std::size_t slot = slots_.slot(part, layer);
    require(!reported_[slot], "pipeline: layer ", layer, slots_.part_text(part),
            " reported twice in one iteration");
    const auto g = host_span(grad);
    require(g.size() == slots_.numel(layer), "pipeline: layer ", layer, slots_.part_text(part),
            ": gradient has ", g.size(), " elements, the layer has ", slots_.numel(layer));
    const auto t0 = Clock::now();
    const bool measure = timer.measuring();
    if (measure) {
      timer.record(layer, t0);
    }
    if (in_place_) {
      current_.layers[slot] = copy_in_place(layer, g, feedback.prototype());
    } else if (!feedback.per_group()) {
      current_.layers[slot] = feedback.compress_layer(part, layer, g);
    } else {
      feedback.stage(part, layer, g);
    }
    reported_[slot] = true;
    started_ = true;
    const std::size_t g_index = layout_.group_of[layer];
    group_type& state = layout_.groups[g_index];
    if (--state.pending == 0) {
      for (std::size_t p = 0; p < slots_.parts() && !in_place_; ++p) {
        if (!feedback.per_group()) {
          feedback.concatenate(state, p, layout_.offset_of);
        } else {
          try {
            compress_group(feedback, p, g_index);
          } catch (const nonfinite_error& e) {
            ++state.pending; // the group is not complete: finish() names the layer
            reported_[slot] = false;
            const std::size_t l = layer_at(state, layout_.offset_of, e.index());
            slots_.throw_nonfinite(e, p, l,
                                   e.index() - static_cast<std::size_t>(layout_.offset_of[l]));
          }
        }
      }
      comm_.mark_ready(g_index);
    }
    const auto t1 = Clock::now();
    current_.compress_seconds += std::chrono::duration<double>(t1 - t0).count();
    if (measure) {
      timer.mark(t1);
    }
  }

  //! @brief pipeline::finish() without the re-planning step: waits for every group's exchange,
  //! gives `feedback` the values a selecting transport left out, records the statistics,
  //! starts a new iteration (on `timer` too) and, if this one succeeded, counts it on `timer`.
  //! O(slots + groups) plus the waits.
  //! @throws std::invalid_argument naming the first slot never reported, or rethrows the first
  //! exception of the communication thread; either way a new iteration has started.
  void finish(feedback_state<Compressor>& feedback, backward_timer<Clock>& timer) {
    const auto t0 = Clock::now();
    const exchange_report sums = comm_.collect();
    const std::exception_ptr error = sums.error;
    current_.communicate_seconds = sums.seconds;
    current_.communicate_cpu_seconds = sums.cpu_seconds;
    current_.bytes_sent = sums.bytes_sent;
    current_.bytes_received = sums.bytes_received;
    current_.finish_wait_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    current_.bytes_reported = transport_counts_bytes(*transport_);
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
    current_.unselected = 0;
    if constexpr (pipeline_policy::selecting_transport<Transport> &&
                  !pipeline_policy::multi_part_transport<Transport>) {
      current_.unselected = feedback.return_unselected(layout_.groups, layout_.offset_of);
    }
    last_ = current_;
    reported_.assign(slots, false);
    started_ = false;
    timer.next_iteration();
    for (group_type& state : layout_.groups) {
      state.pending = state.layers.size() * slots_.parts();
    }
    current_.compress_seconds = 0.0;
    current_.layers.assign(slots, selection_stats{});
    clear_group_stats(feedback.per_group());
    require(missing == slots, "pipeline: finish(): layer ", missing % slots_.layers(),
            slots_.part_text(missing / slots_.layers()), " was never reported in this iteration");
    if (error) {
      std::rethrow_exception(error);
    }
    timer.iteration_done();
  }

  //! @brief The averaged gradient of `layer` from the last finish() (zeros before). O(1).
  //! @throws std::invalid_argument if layer is out of range.
  [[nodiscard]] std::span<const float> averaged(std::size_t layer) const {
    slots_.require_layer(layer);
    const group_type& state = layout_.groups[layout_.group_of[layer]];
    return std::span<const float>(state.average)
        .subspan(static_cast<std::size_t>(layout_.offset_of[layer]), slots_.numel(layer));
  }

  //! @brief The group state of grouping `g` (valid for the layers) for `feedback`'s scope and
  //! prototype: zeroed averages, every slot pending (detail::make_group_layout); with
  //! `keep_averages`, each layer's averaged() copied in. O(total elements).
  [[nodiscard]] layout_type layout_of(const schedule::grouping& g,
                                      const feedback_state<Compressor>& feedback,
                                      bool keep_averages = false) const {
    layout_type layout = make_group_layout(g, slots_.numel(), slots_.parts(), in_place_,
                                           feedback.per_group(), feedback.prototype());
    for (std::size_t l = 0; keep_averages && l < slots_.layers(); ++l) {
      const auto a = averaged(l);
      std::copy(a.begin(), a.end(),
                layout.groups[layout.group_of[l]].average.begin() +
                    static_cast<std::ptrdiff_t>(layout.offset_of[l]));
    }
    return layout;
  }
  //! @brief Uses `layout` (from layout_of(); `per_group`: the feedback's scope) from the next
  //! iteration on. Between iterations only: the communication thread is idle (collect()
  //! returned, nothing ready since) and reads the groups only for a group marked ready. Never
  //! throws but bad_alloc.
  void adopt(layout_type layout, bool per_group) {
    comm_.restart(layout.groups.size());
    std::swap(layout_, layout);
    clear_group_stats(per_group);
  }

private:
  // per_group: the iteration's statistics of every part's groups, cleared.
  void clear_group_stats(bool per_group) {
    if (per_group) {
      current_.groups.assign(slots_.parts() * layout_.groups.size(), selection_stats{});
    }
  }

  // per_group: compresses part `part` of group g_index; its statistics, per group and (from the
  // message) per layer.
  void compress_group(feedback_state<Compressor>& feedback, std::size_t part, std::size_t g_index) {
    group_type& state = layout_.groups[g_index];
    current_.groups[part * layout_.groups.size() + g_index] = feedback.compress_group(state, part);
    count_layer_selections(state.messages[part], state, slots_.numel(), layout_.offset_of,
                           std::span<selection_stats>(current_.layers)
                               .subspan(part * slots_.layers(), slots_.layers()));
  }

  // The in-place path: layer `layer`'s gradient into its group's staging buffer
  // (detail::copy_in_place, on the prototype's threads); the statistics dense compression
  // reports.
  selection_stats
  copy_in_place(std::size_t layer, std::span<const float> g, const Compressor& prototype) {
    if constexpr (in_place_types) {
      return detail::copy_in_place(layout_.groups[layout_.group_of[layer]].staging.data() +
                                       layout_.offset_of[layer],
                                   g, prototype.get_options().threads);
    } else {
      return {}; // never called: in_place_ is false
    }
  }

  // The communication thread's work for group `index` (skip: an earlier group of the iteration
  // failed): the transport's exchange of its messages, or of its buffer in place, timed.
  exchange_report exchange(std::size_t index, bool skip) {
    group_type& state = layout_.groups[index];
    state.has_selection = false;
    if (skip) {
      return {};
    }
    return timed_exchange<Clock>([&](exchange_report& r) {
      exchange_group<in_place_types>(*transport_, state, in_place_, r);
    });
  }

  const layer_slots& slots_;
  Transport* transport_;
  bool in_place_; // the in-place path; fixed at construction
  // training thread
  std::vector<bool> reported_; // per slot: reported in this iteration
  bool started_ = false;       // a slot was reported in this iteration
  pipeline_iteration_stats current_, last_;
  layout_type layout_;        // replaced by adopt(); the comm thread reads groups marked ready
  communication_thread comm_; // last: started after every other member exists
};

} // namespace gradcomp::detail
