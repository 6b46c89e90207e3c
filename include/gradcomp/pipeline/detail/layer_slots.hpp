// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::layer_slots: the pipeline's (part, layer) slots: the layer sizes, the parts
//! per rank, the index of a slot, the range checks on them and how errors name a slot.
#pragma once

#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/transport.hpp>

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief The pipeline's (part, layer) slots: every layer (forward order) of every part this
//! rank reports (one, or a pipeline_policy::multi_part_transport's parts_per_rank()). Slot
//! part x layers + layer holds that part's layer: the index of every per-slot state. Fixed at
//! construction; the checks only read, and every error text starts with "pipeline: ".
class layer_slots {
public:
  //! @brief The slots of layers of `numel` elements (forward order) and of `transport`'s
  //! parts per rank (asked once, here, after the layers are checked; 1 for a transport).
  //! O(1) but the move.
  //! @throws std::invalid_argument if there are no layers, or a multi-part transport reports 0
  //! parts per rank or so many that parts x layers overflows std::size_t.
  template <class Transport>
  layer_slots(std::vector<std::size_t> numel, const Transport& transport)
      : numel_(std::move(numel)) {
    require(!numel_.empty(), "pipeline: no layers");
    if constexpr (pipeline_policy::multi_part_transport<Transport>) {
      parts_ = static_cast<std::size_t>(transport.parts_per_rank());
      require(parts_ >= 1, "pipeline: the transport takes ", parts_,
              " parts per rank; at least 1 is needed");
      require(parts_ <= std::numeric_limits<std::size_t>::max() / numel_.size(),
              "pipeline: ", parts_, " parts per rank x ", numel_.size(),
              " layers overflow std::size_t");
    }
  }

  //! The layer sizes, forward order. O(1).
  [[nodiscard]] std::span<const std::size_t> numel() const noexcept { return numel_; }
  //! The elements of layer `layer` (in range). O(1).
  [[nodiscard]] std::size_t numel(std::size_t layer) const noexcept { return numel_[layer]; }
  //! The number of layers (at least 1). O(1).
  [[nodiscard]] std::size_t layers() const noexcept { return numel_.size(); }
  //! Messages per rank and operation (at least 1). O(1).
  [[nodiscard]] std::size_t parts() const noexcept { return parts_; }
  //! The number of slots, parts x layers. O(1).
  [[nodiscard]] std::size_t count() const noexcept { return parts_ * numel_.size(); }
  //! The slot of `layer` of `part` (both in range). O(1).
  [[nodiscard]] std::size_t slot(std::size_t part, std::size_t layer) const noexcept {
    return part * numel_.size() + layer;
  }

  //! @throws std::invalid_argument naming the part, then the layer, if either is out of range.
  //! O(1).
  void require_slot(std::size_t part, std::size_t layer) const {
    require(part < parts_, "pipeline: part ", part, " is out of range (", parts_,
            " parts per rank)");
    require_layer(layer);
  }
  //! @throws std::invalid_argument naming the layer if it is out of range. O(1).
  void require_layer(std::size_t layer) const {
    require(layer < numel_.size(), "pipeline: layer ", layer, " is out of range (", numel_.size(),
            " layers)");
  }
  //! @throws std::invalid_argument if there are several parts per rank, telling the caller of
  //! `what`(layer) to use `what`(part, layer). O(1).
  void require_one_part(const char* what) const {
    require(parts_ == 1, "pipeline: ", what, "(layer) with ", parts_, " parts per rank: use ", what,
            "(part, layer)");
  }

  //! " of part p" with several parts per rank, else nothing (for error texts). O(1).
  [[nodiscard]] std::string part_text(std::size_t part) const {
    return parts_ == 1 ? std::string() : concat(" of part ", part);
  }

  //! @brief Rethrows a compressor's nonfinite_error (nonfinite_policy::raise) naming the layer
  //! (and part) and `index`, the offending element's index within the layer. O(1).
  //! @throws nonfinite_error always.
  [[noreturn]] void throw_nonfinite(const nonfinite_error& e,
                                    std::size_t part,
                                    std::size_t layer,
                                    std::size_t index) const {
    throw nonfinite_error(concat("gradcomp: pipeline: layer ", layer, part_text(part),
                                 ": non-finite value ", e.value(), " at index ", index, " of ",
                                 numel_[layer], " (", e.count(),
                                 " non-finite values in the compressed "
                                 "gradient; nonfinite_policy::raise)"),
                          index, e.value(), e.count(), layer);
  }

private:
  std::vector<std::size_t> numel_; // per layer, forward order
  std::size_t parts_ = 1;          // messages per rank and operation
};

} // namespace gradcomp::detail
