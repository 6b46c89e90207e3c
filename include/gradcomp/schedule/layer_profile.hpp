// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::layer_profile: what the merge scheduler knows about a model (per
//! layer, in forward order: name, elements, backward seconds; plus the forward seconds).
#pragma once

#include <gradcomp/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gradcomp::schedule {

//! @brief Largest element count of one layer the scheduler accepts (2^40): message bytes
//! (8 per element at most) and group sums then stay exact in 64-bit integers and in doubles.
inline constexpr std::uint64_t max_layer_elements = std::uint64_t{1} << 40;

//! @brief Largest backward or forward time the scheduler accepts (1e6 s, 11.6 days): sums over
//! any model stay far from overflow.
inline constexpr double max_layer_seconds = 1e6;

//! @brief One gradient tensor ("layer" in S1: a unit of compression and communication).
struct layer {
  std::string name;              //!< for output only; may be empty.
  std::uint64_t numel = 0;       //!< elements of the gradient, in [1, max_layer_elements].
  double backward_seconds = 0.0; //!< t_b, in [0, max_layer_seconds]: the backward computation
                                 //!< between the previous gradient and this one.
};

//! @brief A model's layers in forward order (index 0 is the input side, S1's layer 1) and the
//! forward time t_f. Backward runs from the last entry to the first (S1: L down to 1).
//!
//! Convention for a module with several tensors (weight and bias): the module's backward time
//! goes on the tensor that comes first in backward order, the others get 0, so all of the
//! module's gradients are ready together when its backward ends (as autograd delivers them).
struct layer_profile {
  std::vector<layer> layers;    //!< forward order; at least one.
  double forward_seconds = 0.0; //!< t_f: the backward of the last layer starts at t_f.

  //! Number of layers, L. O(1).
  [[nodiscard]] std::size_t size() const noexcept { return layers.size(); }
};

//! @brief Checks a profile: at least one layer, every numel in [1, max_layer_elements], every
//! time in [0, max_layer_seconds] (NaN refused). O(L).
//! @throws std::invalid_argument naming the first offending layer (index and name) otherwise.
inline void validate(const layer_profile& profile) {
  gradcomp::detail::require(!profile.layers.empty(), "layer profile has no layers");
  gradcomp::detail::require(profile.forward_seconds >= 0.0 &&
                                profile.forward_seconds <= max_layer_seconds,
                            "forward_seconds ", profile.forward_seconds, " s is outside [0, 1e6]");
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    const layer& l = profile.layers[i];
    gradcomp::detail::require(l.numel >= 1 && l.numel <= max_layer_elements, "layer ", i, " ('",
                              l.name, "'): numel ", l.numel, " is outside [1, 2^40]");
    gradcomp::detail::require(l.backward_seconds >= 0.0 && l.backward_seconds <= max_layer_seconds,
                              "layer ", i, " ('", l.name, "'): backward_seconds ",
                              l.backward_seconds, " s is outside [0, 1e6]");
  }
}

} // namespace gradcomp::schedule
