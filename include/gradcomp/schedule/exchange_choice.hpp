// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::choose_exchange: per tensor (or merged group) and per phase of
//! training, what to send (dense fp32 through an allreduce, fp16 through an allreduce, or
//! top-k pairs at a density through the sparse allgather) from calibrated cost models, the
//! backward time that can hide the exchange, and whether training is in a critical regime.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/cost_model.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace gradcomp::schedule {

//! @brief What a group is sent as, from the least lossy to the most.
enum class exchange_method {
  dense,  //!< every value in fp32 through an allreduce (the ring): lossless.
  fp16,   //!< every value cast to fp16 (with error feedback) through an allreduce: half the bytes.
  sparse, //!< k = k_for_density(n, d) (index, value) pairs with error feedback through the
          //!< sparse allgather.
};

//! @brief The enumerator's name, e.g. "fp16". O(1).
[[nodiscard]] constexpr std::string_view name(exchange_method m) noexcept {
  switch (m) {
  case exchange_method::dense:
    return "dense";
  case exchange_method::fp16:
    return "fp16";
  case exchange_method::sparse:
    return "sparse";
  }
  return "unknown";
}

//! @brief The cost models the choice prices its candidates with, all in seconds: typically
//! cost::message_cost objects of the calibrated network (gradcomp::mpi::calibrate_ring_allreduce)
//! for the two exchanges and affine fits of measured compression times for the two kernels.
struct exchange_costs {
  //! Seconds of an allreduce of a dense message of the given bytes (4 n for fp32, 2 n for fp16),
  //! e.g. cost::message_cost(transport_kind::ring_allreduce, P, net).
  std::function<double(std::uint64_t bytes)> allreduce_seconds;
  //! Seconds of the sparse allgather when every rank sends a message of the given bytes, e.g.
  //! cost::message_cost(transport_kind::sparse_allgather, P, net).
  std::function<double(std::uint64_t bytes)> allgather_seconds;
  //! Seconds to cast n elements to fp16 with error feedback and back (units: elements).
  affine_cost cast_seconds;
  //! Seconds to select top-k of n elements with error feedback (units: elements), e.g. the
  //! reused threshold's mean per call.
  affine_cost select_seconds;
};

//! @brief The choice's parameters.
struct exchange_choice_settings {
  double density = 0.01; //!< the sparse candidate's density outside a critical regime, (0, 1].
  //! The sparse candidate's density in a critical regime, (0, 1]; 1 (the default) leaves sparse
  //! out there: only dense and fp16 compete (Accordion's low compression).
  double critical_density = 1.0;
  bool allow_fp16 = true; //!< whether fp16 is a candidate.
  //! A lossier candidate is chosen only if its exposed time is at most (1 - min_saving) times
  //! the less lossy choice's: compression must pay for its loss of information. [0, 1).
  double min_saving = 0.1;
  //! How the sparse candidate's pairs go on the wire (message_format::pairs; by default 8-byte
  //! (u32 index, fp32 value) pairs).
  sparse_pair_format sparse_pairs{};
};

//! @brief One priced candidate.
struct exchange_candidate {
  exchange_method method = exchange_method::dense; //!< what the group is sent as.
  double density = 1.0;                            //!< 1 for dense and fp16.
  std::uint64_t bytes = 0;                         //!< the message each rank sends.
  double compress_seconds = 0.0;                   //!< on the training thread (cast or selection).
  double communication_seconds = 0.0;              //!< the exchange from the cost model.
  //! compress_seconds + max(0, communication_seconds - overlap_seconds): what the iteration
  //! waits for; the quantity the choice minimises.
  double exposed_seconds = 0.0;
};

//! @brief The outcome of choose_exchange.
struct exchange_decision {
  exchange_candidate chosen; //!< the candidate the rule picked (one of `candidates`).
  //! Every candidate priced, least lossy first (dense, then fp16 if allowed, then sparse if it
  //! competes in this regime).
  std::vector<exchange_candidate> candidates;
};

//! @brief Chooses what a group of `elements` values is sent as.
//!
//! Prices dense (4 n bytes, no compression), fp16 (2 n bytes, cast_seconds(n)) and sparse at
//! density d (message_format{d, settings.sparse_pairs}.bytes(n): by default 8 k_for_density(n, d)
//! bytes; select_seconds(n)),
//! with d = settings.density, or settings.critical_density when `critical` (Accordion: a
//! critical_regime detector says so); sparse is left out when that density is 1. Each
//! candidate's exposed time is its compression plus the part of its communication that the
//! `overlap_seconds` of backward still to run cannot hide (wait-free backpropagation). Walking
//! from the least lossy candidate, a lossier one replaces the choice only when its exposed time
//! is below the choice's and at most (1 - min_saving) times it: dense wins wherever compression
//! costs more than it saves (fast links, small tensors, exchanges hidden by backward), sparse where
//! it saves. Deterministic: ranks with the same inputs choose the same. O(1) cost-model calls.
//! @throws std::invalid_argument naming the value if a density is outside (0, 1], min_saving
//! outside [0, 1), sparse_pairs.value_bytes not 1, 2 or 4 when a sparse candidate is priced,
//! overlap_seconds negative or not finite, a cost function missing, or a cost negative or not
//! finite.
[[nodiscard]] inline exchange_decision choose_exchange(std::uint64_t elements,
                                                       const exchange_costs& costs,
                                                       const exchange_choice_settings& settings,
                                                       bool critical,
                                                       double overlap_seconds = 0.0) {
  check_density(settings.density);
  check_density(settings.critical_density);
  gradcomp::detail::require(settings.min_saving >= 0 && settings.min_saving < 1,
                            "choose_exchange: min_saving ", settings.min_saving,
                            " is outside [0, 1)");
  gradcomp::detail::require(std::isfinite(overlap_seconds) && overlap_seconds >= 0,
                            "choose_exchange: overlap ", overlap_seconds,
                            " s is not a finite value >= 0");
  gradcomp::detail::require(static_cast<bool>(costs.allreduce_seconds) &&
                                static_cast<bool>(costs.allgather_seconds),
                            "choose_exchange: a communication cost function is missing");
  const auto price = [&](exchange_method m, double density, std::uint64_t bytes, double compress,
                         double communicate) {
    const double exposed = compress + std::max(0.0, communicate - overlap_seconds);
    gradcomp::detail::require(std::isfinite(exposed) && compress >= 0 && communicate >= 0,
                              "choose_exchange: the ", name(m), " candidate costs ", compress,
                              " s + ", communicate, " s (must be finite and >= 0)");
    return exchange_candidate{m, density, bytes, compress, communicate, exposed};
  };
  exchange_decision d;
  d.candidates.push_back(
      price(exchange_method::dense, 1.0, 4 * elements, 0.0, costs.allreduce_seconds(4 * elements)));
  if (settings.allow_fp16) {
    d.candidates.push_back(price(exchange_method::fp16, 1.0, 2 * elements,
                                 costs.cast_seconds(elements),
                                 costs.allreduce_seconds(2 * elements)));
  }
  const double density = critical ? settings.critical_density : settings.density;
  if (density < 1.0) {
    const std::uint64_t bytes =
        message_format{.density = density, .pairs = settings.sparse_pairs}.bytes(elements);
    d.candidates.push_back(price(exchange_method::sparse, density, bytes,
                                 costs.select_seconds(elements), costs.allgather_seconds(bytes)));
  }
  d.chosen = d.candidates.front();
  for (const exchange_candidate& c : d.candidates) {
    if (c.exposed_seconds < d.chosen.exposed_seconds &&
        c.exposed_seconds <= (1.0 - settings.min_saving) * d.chosen.exposed_seconds) {
      d.chosen = c;
    }
  }
  return d;
}

//! @brief The bound of a small-tensor bypass relative to the model: the element count below
//! which a tensor (or a bucket, or a merge group) is sent whole in every phase, so that the
//! tensors under it are the smallest ones that together hold at most `share` of all the
//! elements of `numel` (tensors of equal size go together, none of a size that does not fit).
//! It is the size of the smallest tensor not sent whole: 0 when every tensor is compressed (and
//! for no tensors), the largest size plus 1 when every tensor fits (only when all are empty). A
//! model's few large layers carry its bytes; its many small ones (biases, normalisation, the first
//! convolutions) cost little sent whole and gain most from it: gradcomp-train's CNN reached its
//! target accuracy 0.4-0.5 epoch sooner with its convolutions whole (3.5 % of its parameters).
//! Peers bypass absolutely (BytePS: tensors under 64 KiB; DGC's examples: one-dimensional tensors);
//! a share of the model bounds the extra bytes. Deterministic; O(L log L) for L tensors.
//! @throws std::invalid_argument naming `share` if it is outside [0, 1).
[[nodiscard]] inline std::size_t dense_below_elements(std::span<const std::size_t> numel,
                                                      double share) {
  gradcomp::detail::require(share >= 0.0 && share < 1.0, "dense share ", share,
                            " is outside [0, 1)");
  std::vector<std::size_t> sizes(numel.begin(), numel.end());
  std::sort(sizes.begin(), sizes.end());
  double total = 0;
  for (const std::size_t n : sizes) {
    total += static_cast<double>(n);
  }
  const double budget = share * total;
  double held = 0;
  std::size_t below = 0;
  for (std::size_t i = 0; i < sizes.size();) {
    std::size_t j = i; // the tensors of size sizes[i]: [i, j)
    double elements = 0;
    for (; j < sizes.size() && sizes[j] == sizes[i]; ++j) {
      elements += static_cast<double>(sizes[j]);
    }
    if (held + elements > budget) {
      return below == 0 ? 0 : sizes[i];
    }
    held += elements;
    below = sizes[i] + 1;
    i = j;
  }
  return below;
}

} // namespace gradcomp::schedule
