// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief How a pipeline group goes through its transport: detail::exchange_group (the
//! communication thread's start() to wait() of one group, by messages or in place),
//! detail::copy_in_place (the in-place path's copy of a gradient into the group's buffer) and
//! detail::transport_counts_bytes.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/pipeline/detail/communication_thread.hpp>
#include <gradcomp/pipeline/detail/group_layout.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::detail {

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
