// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The selection flows of the CUDA compressors, written once over a backend (see
//! backend.cuh) with Thrust algorithms: error-feedback accumulation, threshold filtering into a
//! capped output, counting, the sample-guided and radix exact top-k, and the guarded estimate.
//! They mirror compressor/detail/selection.hpp and share its decisions (sample plan, digit
//! choice, refinement, guard), so results equal the host compressors' bit for bit wherever the
//! host result does not depend on a floating-point reduction order.
//!
//! Memory traffic on a device (n elements, k selected): accumulation reads gradient and
//! residual and writes the residual (12n bytes; 20n with momentum); a filtering pass reads 8n
//! and writes 8 x selected; the exact top-k's sample path adds an 8n filter; its radix path a 4n
//! histogram and an 8n filter; candidate refinement touches only the candidates.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/estimated_select.hpp>
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/buffer.cuh>
#include <gradcomp/cuda/detail/filter_tiles.cuh>
#include <gradcomp/cuda/detail/functors.cuh>
#include <gradcomp/cuda/detail/thrust_config.cuh>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/transform_scan.h>

namespace gradcomp::cuda::detail {

//! Everything a compressor keeps between calls, in Backend's memory: the candidate list, tie
//! ranks, sample keys, one histogram, the filter's tile offsets, and Thrust's temporary storage.
template <class Backend>
struct workspace {
  buffer<std::uint32_t, Backend> list_indices;
  buffer<float, Backend> list_values;
  buffer<std::uint32_t, Backend> tie_ranks;
  buffer<float, Backend> sample_values;
  buffer<std::uint32_t, Backend> histogram;
  buffer<std::uint64_t, Backend> tile_offsets;
  caching_allocator<Backend> thrust_storage;
};

//! One call's view: the backend (with the caller's stream) and the object's workspace.
template <class Backend>
struct context {
  Backend backend;
  workspace<Backend>& ws;
  [[nodiscard]] auto policy() const { return backend.policy(ws.thrust_storage); }
};

//! Reads one element of Backend memory (waits for the stream).
template <class Backend, class T>
T read_one(const context<Backend>& ctx, const T* p) {
  T v{};
  ctx.backend.copy_to_host(&v, p, sizeof(T));
  return v;
}

//! Where a call's values come from: the gradient itself (read only), or error feedback
//! accumulated in place into the residual (with DGC's momentum correction when velocity is
//! set). values() is what the selection reads once materialize() (or a fused variant) ran.
struct value_source {
  const float* grad;
  float* residual; // null: no error feedback
  float* velocity; // null: no momentum correction
  float momentum;
  [[nodiscard]] const float* values() const noexcept {
    return residual != nullptr ? residual : grad;
  }
};

//! Error feedback in place (residual += grad, or the momentum-corrected form); nothing for a
//! read-only source. One pass: 12n bytes (20n with momentum).
template <class Backend>
void materialize(const context<Backend>& ctx, const value_source& src, std::size_t n) {
  const thrust::counting_iterator<std::size_t> first(0);
  if (src.velocity != nullptr) {
    thrust::for_each(ctx.policy(), first, first + n,
                     momentum_accumulate_op{src.residual, src.velocity, src.grad, src.momentum});
  } else if (src.residual != nullptr) {
    thrust::for_each(ctx.policy(), first, first + n, accumulate_op{src.residual, src.grad});
  }
}

//! The finishing pass over message positions [0, nnz): rounds values[j] to `type` and, at
//! element residual_indices[j] of src's residual and velocity (when set), leaves the rounding
//! error (0 when sent unchanged) and zeroes the velocity (finish_op). One launch; O(nnz).
template <class Backend>
void finish_selection(const context<Backend>& ctx,
                      const std::uint32_t* residual_indices,
                      float* values,
                      std::size_t nnz,
                      const value_source& src,
                      value_type type) {
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(ctx.policy(), first, first + nnz,
                   finish_op{residual_indices, values, src.residual, src.velocity, type});
}

//! Every (i, x[i]) with key >= `key`, ascending by i, into indices/values (room for cap + 1:
//! beyond cap the pairs all land in slot cap). Returns how many there are, also when > cap.
//! Per-tile counts (filter_tiles.cuh), their exclusive scan into tile offsets, and the scatter
//! of each tile's pairs from its offset: reads 8n bytes (two passes) and writes 8 x min(count,
//! cap); one wait for the stream (the count).
template <class Backend>
std::size_t select_at_least(const context<Backend>& ctx,
                            const float* x,
                            std::size_t n,
                            std::uint32_t key,
                            std::size_t cap,
                            std::uint32_t* indices,
                            float* values) {
  const std::size_t tiles = filter_tiles(n);
  std::uint64_t* offsets = ctx.ws.tile_offsets.reserve(tiles + 1);
  ctx.backend.filter_count(x, n, key, offsets);
  ctx.backend.fill_zero(offsets + tiles, sizeof(std::uint64_t));
  thrust::exclusive_scan(ctx.policy(), offsets, offsets + tiles + 1, offsets);
  ctx.backend.filter_scatter(x, n, key, offsets, cap, indices, values);
  return static_cast<std::size_t>(read_one(ctx, offsets + tiles));
}

//! Number of x[0, n) with key >= `key`: one 4n-byte read.
template <class Backend>
std::size_t
count_at_least(const context<Backend>& ctx, const float* x, std::size_t n, std::uint32_t key) {
  return static_cast<std::size_t>(thrust::count_if(ctx.policy(), x, x + n, key_at_least_op{key}));
}

//! The digit histogram (gradcomp::detail::digit_histogram's counts) of values[0, n) in Backend
//! memory, computed there and copied into host[0, 2^bits) (waits for the stream).
template <class Backend>
void histogram_to_host(const context<Backend>& ctx,
                       const float* values,
                       std::size_t n,
                       unsigned shift,
                       unsigned bits,
                       std::uint32_t prefix,
                       std::uint32_t* host) {
  const std::size_t bytes = (std::size_t{1} << bits) * sizeof(std::uint32_t);
  std::uint32_t* h = ctx.ws.histogram.reserve(gradcomp::detail::radix_top_buckets);
  ctx.backend.fill_zero(h, bytes);
  ctx.backend.digit_histogram(values, n, shift, bits, prefix, h);
  ctx.backend.copy_to_host(host, h, bytes);
}

//! gradcomp::detail::refine_kth_key_with over `count` candidate values in Backend memory: one
//! histogram_to_host per refined digit, the digit chosen on the host.
template <class Backend>
std::uint32_t refine_kth_key(const context<Backend>& ctx,
                             const float* values,
                             std::size_t count,
                             std::size_t rank,
                             std::uint32_t prefix,
                             unsigned known_bits,
                             std::size_t& ties) {
  std::array<std::uint32_t, gradcomp::detail::radix_top_buckets> host{};
  return gradcomp::detail::refine_kth_key_with(
      rank, prefix, known_bits, ties,
      [&](unsigned shift, unsigned bits, std::uint32_t p, std::size_t* out) {
        histogram_to_host(ctx, values, count, shift, bits, p, host.data());
        for (std::size_t d = 0; d < (std::size_t{1} << bits); ++d) {
          out[d] += host[d];
        }
      });
}

//! Keeps the top-k cut (key > T, plus the first `ties` with key == T) of the `count` listed
//! pairs, in order, into indices/values. Returns how many were kept (k). O(count).
template <class Backend>
std::size_t keep_top(const context<Backend>& ctx,
                     std::size_t count,
                     std::uint32_t threshold_key,
                     std::size_t ties,
                     std::uint32_t* indices,
                     float* values) {
  const std::uint32_t* li = ctx.ws.list_indices.data();
  const float* lv = ctx.ws.list_values.data();
  std::uint32_t* rank = ctx.ws.tie_ranks.reserve(count);
  thrust::transform_exclusive_scan(ctx.policy(), lv, lv + count, rank, is_tie_op{threshold_key},
                                   std::uint32_t{0}, thrust::plus<std::uint32_t>());
  const auto in = thrust::make_zip_iterator(thrust::make_tuple(li, lv));
  const auto stencil = thrust::make_zip_iterator(thrust::make_tuple(lv, rank));
  const auto out = thrust::make_zip_iterator(thrust::make_tuple(indices, values));
  const auto end = thrust::copy_if(ctx.policy(), in, in + static_cast<std::ptrdiff_t>(count),
                                   stencil, out, top_k_cut_op{threshold_key, ties});
  return static_cast<std::size_t>(end - out);
}

//! The `rank`-th largest key (1-based) among the m samples x[offset + j x stride], j < m: the
//! value std::nth_element gives the host compressors, found by radix refinement of the sample
//! (no sort). O(m) per digit.
template <class Backend>
std::uint32_t sample_kth_key(const context<Backend>& ctx,
                             const float* x,
                             std::size_t m,
                             std::size_t stride,
                             std::size_t offset,
                             std::size_t rank) {
  float* sample = ctx.ws.sample_values.reserve(m);
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::transform(ctx.policy(), first, first + m, sample, strided_value_op{x, stride, offset});
  std::size_t ties = 0;
  return refine_kth_key(ctx, sample, m, rank, 0, 0, ties);
}

//! Exact top-k of x[0, n) by magnitude, ties to the lower index, into indices/values (room for
//! k); returns the k-th largest key. 1 <= k <= n. Sample-guided when the host selection would
//! be (same plan, same sample, same lower key), else (or when the sample misled) radix select:
//! histogram of the top 11 key bits, filter of the k-th bucket and above, refinement of the
//! bucket, cut.
template <class Backend>
std::uint32_t exact_top_k_select(const context<Backend>& ctx,
                                 const float* x,
                                 std::size_t n,
                                 std::size_t k,
                                 std::uint32_t* indices,
                                 float* values) {
  auto& ws = ctx.ws;
  std::size_t ties = 0;
  if (const auto plan = gradcomp::detail::plan_sample_guided(n, k); plan.applies) {
    const std::uint32_t lower_key =
        sample_kth_key(ctx, x, plan.samples, plan.stride, plan.stride / 2, plan.rank);
    ws.list_indices.reserve(plan.cap + 1);
    ws.list_values.reserve(plan.cap + 1);
    const std::size_t count = select_at_least(ctx, x, n, lower_key, plan.cap,
                                              ws.list_indices.data(), ws.list_values.data());
    if (count >= k && count <= plan.cap) {
      const std::uint32_t t = refine_kth_key(ctx, ws.list_values.data(), count, k, 0, 0, ties);
      keep_top(ctx, count, t, ties, indices, values);
      return t;
    }
  }
  namespace g = gradcomp::detail;
  std::array<std::uint32_t, g::radix_top_buckets> top{};
  histogram_to_host(ctx, x, n, g::radix_top_shift, g::radix_top_bits, 0, top.data());
  const g::digit_choice choice = g::choose_digit(top.data(), g::radix_top_buckets, k);
  const std::size_t listed = choice.above + top[choice.digit];
  ws.list_indices.reserve(listed + 1);
  ws.list_values.reserve(listed + 1);
  const auto bucket_key = static_cast<std::uint32_t>(choice.digit) << g::radix_top_shift;
  const std::size_t count =
      select_at_least(ctx, x, n, bucket_key, listed, ws.list_indices.data(), ws.list_values.data());
  const std::uint32_t t = refine_kth_key(ctx, ws.list_values.data(), count, k - choice.above,
                                         bucket_key, g::radix_top_bits, ties);
  keep_top(ctx, count, t, ties, indices, values);
  return t;
}

//! One compression call as a compressor's run() sees it: the backend context, the source, the
//! length (n >= 1) and the message storage (room for max(k, guard capacity + 1) pairs).
template <class Backend>
struct call {
  const context<Backend>& ctx;
  value_source src;
  std::size_t n;
  std::uint32_t* indices;
  float* values;
};

//! An exact top-k call on the materialized source: fills stats (exact, threshold) and returns
//! the k-th largest key. Shared by every compressor that computes exact top-k.
template <class Backend>
std::uint32_t exact_run(const call<Backend>& c, selection_stats& stats) {
  const std::uint32_t key =
      exact_top_k_select(c.ctx, c.src.values(), c.n, stats.k_target, c.indices, c.values);
  stats.exact = true;
  stats.threshold = gradcomp::detail::key_magnitude(key);
  return key;
}

//! The estimated-threshold flow of gradcomp::detail::estimated_select on the materialized source
//! of call `c`: filter at `threshold` (k = stats.k_target), the guard's re-adjusting counts, and
//! the exact fallback. Fills stats (threshold, adjust_rounds, fallback, exact); returns the
//! accepted key (or the exact one) and, in `selected`, the pairs written.
template <class Backend>
std::uint32_t estimated_select(const call<Backend>& c,
                               float threshold,
                               const gradcomp::detail::estimate_policy& policy,
                               std::size_t& selected,
                               selection_stats& stats) {
  const context<Backend>& ctx = c.ctx;
  const float* x = c.src.values();
  const std::size_t n = c.n;
  const std::size_t k = stats.k_target;
  std::uint32_t* indices = c.indices;
  float* values = c.values;
  const std::size_t cap = guard_capacity(k, policy.guard_factor);
  std::uint32_t key = gradcomp::detail::key_at_least(threshold);
  selected = select_at_least(ctx, x, n, key, cap, indices, values);
  if (!in_guard_band(selected, k, policy.guard_factor)) {
    const bool accepted = gradcomp::detail::adjust_into_guard_band(
        key, selected, k, policy, stats,
        [&](std::uint32_t candidate) { return count_at_least(ctx, x, n, candidate); });
    if (accepted) {
      selected = select_at_least(ctx, x, n, key, cap, indices, values);
    } else {
      key = exact_run(c, stats);
      selected = k;
      stats.fallback = true;
    }
  }
  stats.threshold = gradcomp::detail::key_magnitude(key);
  return key;
}

//! materialize() fused with the sums of Fit::transform over the materialized values: one pass
//! (error feedback: 12n bytes, the same as materialize alone; read-only: 4n). Double
//! accumulators, so the sums differ from the host's float-lane sums only in the last bits.
template <class Fit, class Backend>
gradcomp::detail::fit_sums
materialize_and_fit(const context<Backend>& ctx, const value_source& src, std::size_t n) {
  const thrust::counting_iterator<std::size_t> first(0);
  if (src.velocity != nullptr) {
    return thrust::transform_reduce(
        ctx.policy(), first, first + n,
        fit_after_op<Fit, momentum_accumulate_op>{
            {src.residual, src.velocity, src.grad, src.momentum}, src.residual},
        gradcomp::detail::fit_sums{}, fit_plus_op{});
  }
  if (src.residual != nullptr) {
    return thrust::transform_reduce(
        ctx.policy(), first, first + n,
        fit_after_op<Fit, accumulate_op>{{src.residual, src.grad}, src.residual},
        gradcomp::detail::fit_sums{}, fit_plus_op{});
  }
  return thrust::transform_reduce(ctx.policy(), src.grad, src.grad + n, fit_terms_op<Fit>{},
                                  gradcomp::detail::fit_sums{}, fit_plus_op{});
}

} // namespace gradcomp::cuda::detail
