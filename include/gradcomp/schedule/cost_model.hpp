// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::cost_model: the cost functions the iteration-time simulator and
//! the merge strategies use (communication time of a message, compression time of a group,
//! message size, and where compression runs).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/detail/varint.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>

namespace gradcomp::schedule {

//! @brief t = fixed_seconds + seconds_per_unit * units: the alpha-beta model of a transport
//! (units = bytes; S4's t = alpha + beta M) or an affine compression cost (units = elements).
struct affine_cost {
  double fixed_seconds = 0.0;    //!< alpha (communication) or a (compression), seconds.
  double seconds_per_unit = 0.0; //!< beta (seconds per byte) or b (seconds per element).

  //! fixed_seconds + seconds_per_unit x units, seconds. O(1).
  [[nodiscard]] double operator()(std::uint64_t units) const noexcept {
    return fixed_seconds + seconds_per_unit * static_cast<double>(units);
  }
};

//! @brief How a sparse message's (index, value) pairs go on the wire, for pricing it before it
//! exists: bytes per value and the index encoding. The default, fp32 values with u32 indices,
//! is 8 bytes a pair; fp16 values with delta + varint indices at density 0.05 are 3.0.
struct sparse_pair_format {
  unsigned value_bytes = 4; //!< bytes per sent value: 4 (fp32), 2 (fp16 or bf16) or 1.
  //! u32 or delta_varint, priced by gradcomp::expected_index_bytes (uniformly spread indices).
  index_encoding indices = index_encoding::u32;
};

//! @brief Size of a group's message: 4 bytes per element (dense fp32), or, with a density D,
//! pairs.value_bytes + gradcomp::expected_index_bytes(pairs.indices, D) bytes per selected
//! element (by default 8: (u32 index, fp32 value) pairs; fp16 values with delta + varint
//! indices at D = 0.05: 3.0) for k = ceil(D x numel) elements, rounded up to whole bytes, k
//! computed as gradcomp::k_for_density does for the compressors, or, with
//! quantized_bits b, 9 + ceil(numel x b / 8) bytes (every element quantized: the wire's
//! value_type::quantized section), plus the segment table when quantized_bucket_elements d is
//! not 0 and below numel (4 bytes and, per bucket, a varint count and a 4-byte scale).
struct message_format {
  std::optional<double> density = std::nullopt; //!< empty: dense fp32; else D in (0, 1].
  //! Bits per element of a quantizing compressor's dense message (gradcomp::scaled_sign 1,
  //! terngrad 2, qsgd 1 + bit_width(levels)); takes precedence over density.
  std::optional<unsigned> quantized_bits = std::nullopt;
  //! With quantized_bits: values per scale (the quantizer's bucket_elements; 0: one scale).
  std::uint64_t quantized_bucket_elements = 0;
  //! With density: how the pairs go on the wire (by default 8 bytes a pair).
  sparse_pair_format pairs{};

  //! Bytes of the message of a group of `numel` elements. O(1).
  //! @throws std::invalid_argument if the density is outside (0, 1], or pairs.value_bytes is
  //! not 1, 2 or 4.
  [[nodiscard]] std::uint64_t bytes(std::uint64_t numel) const {
    if (quantized_bits) {
      const std::uint64_t d = quantized_bucket_elements;
      std::uint64_t table = 0;
      if (d != 0 && d < numel) { // full buckets of d, then the rest
        const auto count_bytes = [](std::uint64_t c) {
          return static_cast<std::uint64_t>(gradcomp::detail::varint_size(
              static_cast<std::uint32_t>(std::min<std::uint64_t>(c, UINT32_MAX))));
        };
        table = 4 + numel / d * (count_bytes(d) + 4) +
                (numel % d == 0 ? 0 : count_bytes(numel % d) + 4);
      }
      return 9 + table + (numel * *quantized_bits + 7) / 8;
    }
    if (!density) {
      return 4 * numel;
    }
    const auto k = static_cast<double>(k_for_density(static_cast<std::size_t>(numel), *density));
    if (pairs.value_bytes == 4 && pairs.indices == index_encoding::u32) {
      return 8 * static_cast<std::uint64_t>(k); // exact (no rounding of a product)
    }
    gradcomp::detail::require(
        pairs.value_bytes == 1 || pairs.value_bytes == 2 || pairs.value_bytes == 4,
        "message_format: pairs.value_bytes ", pairs.value_bytes, " is not 1, 2 or 4");
    return static_cast<std::uint64_t>(
        std::ceil(k * (pairs.value_bytes + expected_index_bytes(pairs.indices, *density))));
  }
};

//! @brief Where compression runs.
enum class compression_placement {
  //! Compressions run one at a time, in group order, on their own stream: a group's compression
  //! starts at max(end of its backward, end of the previous compression); backward goes on.
  off_compute_stream,
  //! S1 (DLGS, OMGS): compression runs on the compute stream, the next layer's backward waits
  //! for it (S1 eqs. 2-5).
  on_compute_stream,
};

//! @brief Everything the simulator needs besides the profile.
//!
//! Requirements: both functions return finite values >= 0 (checked where they are called, with
//! std::invalid_argument); they need not be monotone or affine for the simulator nor for the
//! exact planner (gradcomp::schedule::optimal), only deterministic.
struct cost_model {
  //! T(bytes): seconds to communicate one message of `bytes` bytes (while the backward pass
  //! runs, when communication_seconds_after_backward is given). Required.
  std::function<double(std::uint64_t bytes)> communication_seconds;
  //! @brief T'(bytes): seconds of a message of `bytes` bytes on cores that the backward pass has
  //! left, once it has ended. Empty (the default): T throughout.
  //!
  //! Where compute and communication share cores (CPU training, more ranks than cores), a
  //! message overlapping backward waits for its turn on a core at each step, and one sent after
  //! backward does not: on the 2-core emulated cluster a ring sweep measured alpha 7-9 ms under
  //! backward's load, and the convolutions' ring after backward took 2.3-3.6 ms for its 6 steps.
  //! A message that starts at s before backward ends (at K = t_f + the sum of the backward
  //! seconds; compressions are not counted in K) progresses at rate 1 / T until K and at
  //! 1 / T' after: it ends at s + T if that is <= K, else at K + (1 - (K - s) / T) T'; one
  //! that starts at or after K ends at s + T'. The end is non-decreasing in s, so the exact
  //! planner (optimal) stays exact.
  std::function<double(std::uint64_t bytes)> communication_seconds_after_backward;
  //! s(numel): seconds to compress one group of `numel` elements. Empty: no compression step
  //! (0 seconds, and the planner's exact algorithm needs only one state per prefix).
  std::function<double(std::uint64_t numel)> compression_seconds;
  //! How many bytes a group's message has (dense fp32, or pairs at a density).
  message_format message;
  //! Where compression runs: on its own stream (the default) or on the compute stream (S1).
  compression_placement placement = compression_placement::off_compute_stream;

  //! @brief The planner's model (gradcomp-plan): T = alpha + beta * bytes, s = a + b * numel if
  //! `compression` is given, messages per `density`.
  [[nodiscard]] static cost_model
  affine(double alpha_seconds,
         double beta_seconds_per_byte,
         std::optional<affine_cost> compression = std::nullopt,
         std::optional<double> density = std::nullopt,
         compression_placement placement = compression_placement::off_compute_stream) {
    gradcomp::detail::require(std::isfinite(alpha_seconds) && alpha_seconds >= 0.0, "alpha ",
                              alpha_seconds, " s is not a finite value >= 0");
    gradcomp::detail::require(std::isfinite(beta_seconds_per_byte) && beta_seconds_per_byte >= 0.0,
                              "beta ", beta_seconds_per_byte, " s/B is not a finite value >= 0");
    if (density) {
      check_density(*density);
    }
    cost_model m;
    m.communication_seconds = affine_cost{alpha_seconds, beta_seconds_per_byte};
    if (compression) {
      gradcomp::detail::require(
          std::isfinite(compression->fixed_seconds) && compression->fixed_seconds >= 0.0 &&
              std::isfinite(compression->seconds_per_unit) && compression->seconds_per_unit >= 0.0,
          "compression cost (", compression->fixed_seconds, ", ", compression->seconds_per_unit,
          ") is not finite and >= 0");
      m.compression_seconds = *compression;
    }
    m.message.density = density;
    m.placement = placement;
    return m;
  }
};

namespace detail {

//! A cost function's value, checked to be finite and >= 0.
//! @throws std::invalid_argument naming `what` and the argument otherwise.
[[nodiscard]] inline double checked_cost(double seconds, const char* what, std::uint64_t arg) {
  gradcomp::detail::require(std::isfinite(seconds) && seconds >= 0.0, what, "(", arg,
                            ") = ", seconds, " s is not a finite value >= 0");
  return seconds;
}

//! @throws std::invalid_argument if the model has no communication cost function.
inline void validate(const cost_model& model) {
  gradcomp::detail::require(static_cast<bool>(model.communication_seconds),
                            "cost_model: communication_seconds is empty");
  if (model.message.density) {
    check_density(*model.message.density);
  }
}

} // namespace detail
} // namespace gradcomp::schedule
