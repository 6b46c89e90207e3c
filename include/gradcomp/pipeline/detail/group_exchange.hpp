// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief How a pipeline group goes through its transport: detail::exchange_group (the
//! communication thread's start() to wait() of one group, by messages or in place), whether a
//! pipeline takes the in-place path (detail::in_place_capable, detail::takes_in_place),
//! detail::copy_in_place (the in-place path's copy of a gradient into the group's buffer) and
//! detail::transport_counts_bytes.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/pipeline/detail/communication_thread.hpp>
#include <gradcomp/pipeline/detail/group_layout.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace gradcomp::detail {

//! @brief Whether a pipeline of Compressor over Transport can average its groups in place,
//! without messages (see gradcomp::pipeline): the lossless gradcomp::dense compressor over a
//! pipeline_policy::in_place_transport (one part per rank).
template <class Compressor, class Transport>
inline constexpr bool in_place_capable =
    !pipeline_policy::multi_part_transport<Transport> &&
    pipeline_policy::in_place_transport<Transport> && std::is_same_v<Compressor, dense>;

//! @brief Whether a pipeline takes the in-place path: the types allow it (in_place_capable),
//! its error feedback is per layer (`per_layer`) without momentum correction (`momentum` 0),
//! `prototype` sends float32 values under nonfinite_policy::propagate, and `transport`
//! accepts it (asked last, only if everything else holds). O(1).
template <class Compressor, class Transport>
[[nodiscard]] bool
takes_in_place(Transport& transport, const Compressor& prototype, bool per_layer, float momentum) {
  if constexpr (in_place_capable<Compressor, Transport>) {
    return per_layer && momentum == 0.0f && prototype.get_options().values == value_type::fp32 &&
           nonfinite_of(prototype.get_options()) == nonfinite_policy::propagate &&
           transport.accepts_in_place();
  } else {
    return false;
  }
}

//! @brief Whether `transport` reports its bytes: a pipeline_policy::byte_counting_transport,
//! and its counts_bytes() where it has one (gradcomp::any_transport over a transport without
//! counters says no).
template <class Transport>
[[nodiscard]] bool transport_counts_bytes(const Transport& transport) {
  if constexpr (pipeline_policy::byte_counting_transport<Transport>) {
    if constexpr (requires(const Transport& t) { t.counts_bytes(); }) {
      return transport.counts_bytes();
    } else {
      return true;
    }
  } else {
    return false;
  }
}

//! @brief One group's exchange (communication thread): the transport's start() on the group's
//! messages (all parts' for a multi_part_transport, else the one) into its average, or with
//! `in_place` start_in_place() on its staging buffer, which then becomes the average; then
//! wait(). Keeps a selecting transport's global selection in the group and sets the report's
//! bytes where the transport counts them. Throws whatever the transport throws.
//! @tparam InPlaceCapable whether the pipeline can take the in-place path (`in_place` is false
//! otherwise).
template <bool InPlaceCapable, class Transport, class Compressor>
void exchange_group(Transport& transport,
                    group_state<Compressor>& state,
                    bool in_place,
                    exchange_report& report) {
  if constexpr (pipeline_policy::multi_part_transport<Transport>) {
    transport.start(std::span<const sparse_message>(state.messages),
                    std::span<float>(state.average));
  } else if (in_place) {
    if constexpr (InPlaceCapable) {
      transport.start_in_place(std::span<float>(state.staging));
    }
  } else {
    transport.start(state.messages.front(), std::span<float>(state.average));
  }
  transport.wait();
  if (in_place) {
    state.average.swap(state.staging);
  }
  if constexpr (pipeline_policy::selecting_transport<Transport>) {
    if (const std::vector<std::uint32_t>* g = transport.selected_indices()) {
      state.selected.assign(g->begin(), g->end());
      state.has_selection = true;
    }
  }
  if constexpr (pipeline_policy::byte_counting_transport<Transport>) {
    report.bytes_sent = transport.bytes_sent();
    report.bytes_received = transport.bytes_received();
  }
}

//! @brief The in-place path: a layer's gradient `g` into `out` (its place in the group's
//! staging buffer) as 0.0f + g (error feedback's sum with its zero residual: the same bits,
//! -0.0f included), on up to `threads` threads (detail::parallel_chunks); returns the
//! statistics dense compression reports. O(n).
inline selection_stats copy_in_place(float* out, std::span<const float> g, unsigned threads) {
  parallel_chunks(g.size(), threads, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      out[i] = 0.0f + g[i];
    }
  });
  selection_stats s;
  s.numel = s.k_target = s.k_selected = g.size();
  return s;
}

} // namespace gradcomp::detail
