// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::dense: no selection; every value is sent, optionally cast to fp16 / bf16.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace gradcomp {

//! @brief Options of gradcomp::dense: the type the values are sent as, and the threads.
struct dense_options {
  value_type values = value_type::fp32; //!< fp32 = no compression; fp16 / bf16 = casting.
  unsigned threads = 0;                 //!< threads to use; 0 = all hardware threads.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief No selection: the baselines a user would otherwise pick, the uncompressed gradient
//! (`fp32`), or the gradient cast to half precision (`fp16`, as DDP's fp16_compress_hook and
//! Horovod's Compression.fp16; `bf16`, as DDP's bf16 hook).
//!
//! Output: a dense message of all n values. With error feedback the rounding error of the cast
//! stays in the residual (fp16 saturates at +-65504, the excess stays too). O(n); deterministic.
//! Wire bytes: 32 + 4n (fp32) or 32 + 2n (fp16, bf16).
class dense : public compressor_base<dense, dense_options> {
public:
  //! The name its checkpoint state carries (compressor_base::save_state). No state of its own.
  static constexpr std::string_view state_name = "dense";
  //! A dense compressor with options `o` (default: fp32, all hardware threads). O(1); never
  //! throws (dense has no density to validate).
  explicit dense(options o = {}) : compressor_base(o) {}
  //! Shorthand for `dense(options{values})`: sends the values as `values`, all hardware threads.
  explicit dense(value_type values) : dense(options{values}) {}

  //! Every element is sent: k = n.
  [[nodiscard]] std::size_t target_k(std::size_t n) const noexcept { return n; }

  //! @brief compressor_base's selection hook: every element, in order, as a dense message
  //! (`out.dense`, n values; the base then casts them to fp16 / bf16 if asked). One parallel
  //! pass over `threads`: each chunk is materialized (the error-feedback sum, where there is
  //! one) and copied. Leaves stats' threshold at 0 and exact false. O(n); deterministic;
  //! throws only std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats&, sparse_message& out) {
    out.dense = true;
    out.values.resize(n);
    const float* const x = src.materialized();
    detail::parallel_chunks(n, options_.threads, [&](std::size_t, std::size_t b, std::size_t e) {
      src.materialize(b, e);
      std::copy(x + b, x + e, out.values.begin() + static_cast<std::ptrdiff_t>(b));
    });
  }
};

static_assert(momentum_compressor<dense>);
static_assert(!density_compressor<dense>);

} // namespace gradcomp
