// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::nonfinite_policy (what a host compressor does with a NaN or an infinity in
//! the values it compresses) and gradcomp::nonfinite_error (what `raise` throws).
#pragma once

#include <gradcomp/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gradcomp {

//! @brief What a host compressor (every gradcomp::compressor_base compressor) does when a value
//! it compresses, the gradient or with error feedback residual + gradient (+ the DGC velocity),
//! is a NaN or an infinity. Chosen per compressor by the optional options member
//! `nonfinite_policy nonfinite` (every compressor of the library has it; default propagate).
//!
//! * `propagate` (default): no check. Non-finite values rank above every finite magnitude in the
//!   library's selections, so they are sent and show up in every rank's average; a non-finite
//!   value that is not sent stays in the residual (and a NaN compares false against any
//!   threshold). Zero cost. gradcomp's sparse wire format refuses a NaN (gradcomp::decode), so a
//!   transport that sends it (the sparse allgather, for one) ends the exchange with an error on
//!   every rank instead (a gradcomp::wire_error naming the position on the rank whose message
//!   holds the NaN); infinities pass. Use `raise` to name the layer and element instead.
//! * `raise`: the compression call throws gradcomp::nonfinite_error naming the first non-finite
//!   element (index, value) and how many there are, before anything is sent (the message is
//!   left empty). With error feedback the residual then holds residual + gradient, non-finite
//!   values included (nothing is lost; call drop_non_finite() or reset() before going on).
//!   Fatal for a collective exchange: the other ranks are left waiting in it (let the job end,
//!   e.g. MPI_Abort, or set a deadline: mpi::wait_policy::timeout_seconds).
//! * `skip_step`: a non-finite gradient value is accumulated as 0 (the residual and the DGC
//!   velocity keep their finite values), an accumulated value that still is not finite (a sum
//!   that overflows, a residual that already was) is dropped (0 in the residual, the velocity
//!   and the message); both are counted in selection_stats::nonfinite, nothing non-finite is
//!   kept or sent, and the exchange completes on every rank. The
//!   caller then agrees across ranks whether any rank counted one (mpi::any_rank on
//!   pipeline_iteration_stats::nonfinite > 0; every rank must call it), and where one did, every
//!   rank skips the update and returns its sent values to its residuals
//!   (error_feedback::return_sent, pipeline::return_sent), so no finite value is lost and the
//!   replicas stay identical.
//!
//! Cost of the check (raise, skip_step): with error feedback it is fused into the compressor's
//! first pass (each tile is checked right after it is accumulated, while it is in L1: no extra
//! pass over memory; benchmark/bench_nonfinite.cpp measures it); without error feedback
//! (compress()) the gradient is read once more. Handling a detection costs one more pass, on
//! that call only.
enum class nonfinite_policy : std::uint8_t { propagate, raise, skip_step };

//! The policy's name as written here ("propagate", "raise", "skip_step"). O(1).
[[nodiscard]] constexpr std::string_view to_string(nonfinite_policy p) noexcept {
  switch (p) {
  case nonfinite_policy::raise:
    return "raise";
  case nonfinite_policy::skip_step:
    return "skip_step";
  case nonfinite_policy::propagate:
    break;
  }
  return "propagate";
}

//! The policy named `name` (the inverse of to_string). O(1).
//! @throws std::invalid_argument naming `name` and the accepted names.
[[nodiscard]] inline nonfinite_policy nonfinite_policy_from_string(std::string_view name) {
  for (const nonfinite_policy p :
       {nonfinite_policy::propagate, nonfinite_policy::raise, nonfinite_policy::skip_step}) {
    if (name == to_string(p)) {
      return p;
    }
  }
  throw std::invalid_argument(detail::concat("gradcomp: non-finite policy '", name,
                                             "' is not one of propagate, raise, skip_step"));
}

//! @brief Thrown by a compressor with nonfinite_policy::raise when a value it compresses is a
//! NaN or an infinity. what() names the element and the count ("non-finite value inf at index
//! 17 of 1000 (2 non-finite values)"); gradcomp::pipeline adds the layer (and part) and the index
//! within the layer.
class nonfinite_error : public std::runtime_error {
public:
  //! No layer known (a compressor alone).
  static constexpr std::size_t no_layer = std::numeric_limits<std::size_t>::max();

  //! @param message what() (complete).
  //! @param index   the first non-finite element, within the compressed gradient (the layer's
  //!                index where `layer` is set).
  //! @param value   its value (NaN or +-infinity).
  //! @param count   how many elements were non-finite (>= 1).
  //! @param layer   the layer (forward index) or no_layer.
  nonfinite_error(const std::string& message,
                  std::size_t index,
                  float value,
                  std::size_t count,
                  std::size_t layer = no_layer)
      : std::runtime_error(message), index_(index), value_(value), count_(count), layer_(layer) {}

  //! The first non-finite element's index (within the layer where layer() is set). O(1).
  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  //! Its value. O(1).
  [[nodiscard]] float value() const noexcept { return value_; }
  //! How many elements of the call were non-finite. O(1).
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  //! The layer (forward index), or no_layer when thrown by a compressor used alone. O(1).
  [[nodiscard]] std::size_t layer() const noexcept { return layer_; }

private:
  std::size_t index_;
  float value_;
  std::size_t count_;
  std::size_t layer_;
};

namespace detail {

//! Nonzero iff one of x[0 .. n) is a NaN or an infinity (exponent bits all ones). Branch-free
//! AND / ADD / OR on the bits, which the compiler vectorises with SSE2. O(n).
[[nodiscard]] inline std::uint32_t nonfinite_bits(const float* x, std::size_t n) noexcept {
  std::uint32_t seen = 0;
  for (std::size_t i = 0; i < n; ++i) {
    seen |= (std::bit_cast<std::uint32_t>(x[i]) & 0x7f800000u) + 0x00800000u;
  }
  return seen & 0x80000000u;
}

//! The first non-finite element of `x` and how many there are (error path only). O(n).
struct nonfinite_scan {
  std::size_t first = 0;
  float value = 0.0f;
  std::size_t count = 0;
};
[[nodiscard]] inline nonfinite_scan scan_nonfinite(std::span<const float> x) noexcept {
  nonfinite_scan s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (nonfinite_bits(x.data() + i, 1) != 0) {
      if (s.count++ == 0) {
        s.first = i;
        s.value = x[i];
      }
    }
  }
  return s;
}

//! Zeroes the NaNs and infinities of `values`; returns how many. O(n).
inline std::size_t zero_non_finite(std::span<float> values) noexcept {
  std::size_t count = 0;
  for (float& v : values) {
    if (nonfinite_bits(&v, 1) != 0) {
      v = 0.0f;
      ++count;
    }
  }
  return count;
}

//! The policy of compressor options `o`: its `nonfinite` member, propagate without one.
template <class Options>
[[nodiscard]] constexpr nonfinite_policy nonfinite_of(const Options& o) noexcept {
  if constexpr (requires { o.nonfinite; }) {
    return o.nonfinite;
  } else {
    return nonfinite_policy::propagate;
  }
}

} // namespace detail
} // namespace gradcomp
