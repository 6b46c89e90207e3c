// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::part_codes: the codes of the parts one rank of a
//! coded_allreduce holds and S3's packet arithmetic on them (docs/coded.md, "Send rule and
//! decoding" and "Exact coding"); coded_allreduce only moves the packets. MPI-free.
#pragma once

#include <gradcomp/coded/detail/combinatorics.hpp>
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief The codes of every part one rank of a coded_allreduce stores, as slices of L words
//! (coded::placement::slice_elements, zero-padded), and the arithmetic of the coded exchange on
//! them: encoding the owned parts, building this rank's packet of a group, cancelling the known
//! terms of a received packet, and summing a block over all C(P, r) parts.
//!
//! Storage, in units of r slices of L words (one block of a part): full form, every part one
//! unit (its whole gradient); reduce-scatter form, an owned part P units (block b at its first
//! unit + b), a missing part one unit (block `rank` only). Memory: as coded_allreduce says.
//! Not thread-safe; keeps a reference to the placement, which must outlive it.
class part_codes {
public:
  //! Plans the storage of rank `rank` (O(C(P, r))). `o` must be the options coded_allreduce
  //! checked; only their coding, variant, redundancy and uncoded flag are kept.
  part_codes(const coded::placement& placement, int rank, const coded_allreduce_options& o)
      : placement_(&placement), rank_(rank), redundancy_(o.redundancy),
        fixed_point_(o.coding == packet_coding::fixed_point),
        reduce_scatter_(o.variant == coded_variant::reduce_scatter), uncoded_(o.uncoded) {
    const std::size_t owned_units =
        reduce_scatter_ ? static_cast<std::size_t>(placement.ranks()) : 1;
    first_unit_.resize(placement.part_count());
    all_blocks_.resize(placement.part_count());
    std::size_t unit = 0;
    for (std::size_t part = 0; part < placement.part_count(); ++part) {
      first_unit_[part] = unit;
      all_blocks_[part] = reduce_scatter_ && placement.owns(rank, part) ? 1 : 0;
      unit += all_blocks_[part] != 0 ? owned_units : 1;
    }
    units_ = unit;
  }

  //! Sizes the codes for gradients of d elements: L = ceil(d / r) words (reduce-scatter:
  //! ceil(ceil(d / P) / r)). Allocates nothing (encode() does).
  //! @throws std::invalid_argument if a packet (or, reduce-scatter form, an allgather block)
  //! exceeds MPI's int counts, or the codes do not fit in memory.
  void resize(std::size_t d) {
    d_ = d;
    packet_ =
        reduce_scatter_ ? placement_->block_packet_elements(d) : placement_->packet_elements(d);
    gradcomp::detail::require(packet_ <= static_cast<std::size_t>(INT_MAX),
                              "coded_allreduce: packets of ", packet_,
                              " elements exceed MPI's int count limit ", INT_MAX);
    if (reduce_scatter_) {
      const std::size_t longest_block = placement_->block_elements(d, 0).size();
      gradcomp::detail::require(longest_block <= static_cast<std::size_t>(INT_MAX),
                                "coded_allreduce: allgather blocks of ", longest_block,
                                " elements exceed MPI's int count limit ", INT_MAX);
    }
    const auto words =
        coded::detail::checked_product(units_ * static_cast<std::size_t>(redundancy_), packet_);
    gradcomp::detail::require(words.has_value() && *words <= words_.max_size(),
                              "coded_allreduce: the codes of C(P, r) = ", placement_->part_count(),
                              " parts of ", d, " elements do not fit in memory");
    word_count_ = static_cast<std::size_t>(*words);
  }

  //! L: the words of a packet.
  [[nodiscard]] std::size_t packet_words() const noexcept { return packet_; }

  //! Encodes this rank's parts (placement().parts_of(rank), ascending; d floats each) with
  //! `scale` (fixed point: coded::fixed_point_scale; ignored with xor_bits): every slice this
  //! rank sends or sums. O(C(P - 1, r - 1) d).
  void encode(std::span<const std::span<const float>> parts, double scale) {
    scale_ = scale;
    words_.assign(word_count_, 0u);
    const std::span<const std::size_t> owned = placement_->parts_of(rank_);
    const int blocks = reduce_scatter_ ? placement_->ranks() : 1;
    for (std::size_t i = 0; i < owned.size(); ++i) {
      for (int block = 0; block < blocks; ++block) {
        // reduce-scatter: the other owners' blocks of an owned part are never sent or summed here
        if (reduce_scatter_ && block != rank_ && placement_->owns(block, owned[i])) {
          continue;
        }
        for (int s = 0; s < redundancy_; ++s) {
          const coded::index_range e = slice_range(block, s);
          const std::span<const float> values = parts[i].subspan(e.begin, e.size());
          const std::span<std::uint32_t> target = slice(owned[i], block, s).first(e.size());
          if (fixed_point_) {
            coded::encode_fixed_point(values, scale_, as_codes(target));
          } else {
            coded::encode_bits(values, target);
          }
        }
      }
    }
    const std::size_t groups = placement_->groups_per_rank();
    packets_.assign(uncoded_ ? 0 : groups * packet_, 0u);
    packet_ready_.assign(groups, 0);
  }

  //! The L words this rank sends to `peer` in its group groups_of(rank)[slot]: its packet
  //! (S3 "Exchange": built when first asked for), or, uncoded, the one slice `peer` lacks.
  [[nodiscard]] const std::uint32_t* outgoing(std::size_t slot, int peer) {
    if (uncoded_) { // the one term of the packet that peer needs, unicast as is
      const std::uint32_t* data = nullptr;
      for (const coded::coding_term& term : placement_->coding_terms(group(slot), rank_)) {
        if (term.receiver == peer) {
          data = slice(term.part, block_of(term.receiver), term.slice).data();
        }
      }
      return data;
    }
    build_packet(slot);
    return packets_.data() + slot * packet_;
  }

  //! Where the L words of `peer`'s packet in this rank's group groups_of(rank)[slot] land: the
  //! slice of the part this rank lacks that `peer` holds.
  [[nodiscard]] std::uint32_t* incoming(std::size_t slot, int peer) {
    const std::size_t part = placement_->missing_part(group(slot), rank_);
    return slice(part, block_of(rank_), owner_position(part, peer)).data();
  }

  //! S3: "Receiver j subtracts the terms it already knows and is left with one slice", once
  //! `peer`'s packet is in incoming(slot, peer). Uncoded: the slice arrived as is.
  void decode(std::size_t slot, int peer) {
    if (uncoded_) {
      return;
    }
    const std::vector<coded::coding_term> terms = placement_->coding_terms(group(slot), peer);
    std::span<std::uint32_t> received;
    code_slices_.clear();
    word_slices_.clear();
    for (const coded::coding_term& term : terms) {
      const int block = block_of(term.receiver);
      const std::span<std::uint32_t> s =
          slice(term.part, block, term.slice).first(slice_range(block, term.slice).size());
      if (term.receiver == rank_) {
        received = slice(term.part, block, term.slice);
      } else if (fixed_point_) {
        code_slices_.push_back(as_codes(s));
      } else {
        word_slices_.push_back(s);
      }
    }
    if (fixed_point_) {
      coded::cancel_fixed_point(code_slices_, as_codes(received));
    } else {
      coded::cancel_xor(word_slices_, received);
    }
  }

  //! Once every part's codes of this rank's block are in place (the whole gradient in the full
  //! form): the sum of that block into `sum` (d floats), per coordinate the same additions on
  //! every rank and in both forms: fixed point, the wrapping int32 sum of every part's codes
  //! decoded once; XOR, the parts decoded and added in part-index order. O(C(P, r) d / blocks).
  void sum(std::span<float> sum) {
    const int block = block_of(rank_);
    const coded::index_range mine = block_range(block);
    if (fixed_point_) {
      total_.assign(mine.size(), 0);
      for (std::size_t part = 0; part < placement_->part_count(); ++part) {
        for (int s = 0; s < redundancy_; ++s) {
          const coded::index_range e = slice_range(block, s);
          coded::add_fixed_point(
              as_codes(slice(part, block, s)).first(e.size()),
              std::span<std::int32_t>(total_).subspan(e.begin - mine.begin, e.size()));
        }
      }
      coded::decode_fixed_point(total_, scale_, sum.subspan(mine.begin, mine.size()));
      return;
    }
    floats_.resize(packet_);
    for (std::size_t part = 0; part < placement_->part_count(); ++part) {
      for (int s = 0; s < redundancy_; ++s) {
        const coded::index_range e = slice_range(block, s);
        const std::span<float> out = sum.subspan(e.begin, e.size());
        if (part == 0) {
          coded::decode_bits(slice(part, block, s).first(e.size()), out);
          continue;
        }
        const std::span<float> values = std::span<float>(floats_).first(e.size());
        coded::decode_bits(slice(part, block, s).first(e.size()), values);
        for (std::size_t i = 0; i < e.size(); ++i) {
          out[i] += values[i];
        }
      }
    }
  }

private:
  [[nodiscard]] std::size_t group(std::size_t slot) const {
    return placement_->groups_of(rank_)[slot];
  }

  // Slice `s` of block `block` of part `part`'s codes: packet_ words, zero-padded beyond the
  // slice's length. Full form: block 0; reduce-scatter form: any block of an owned part, block
  // `rank` of a missing part.
  [[nodiscard]] std::span<std::uint32_t> slice(std::size_t part, int block, int s) noexcept {
    const auto r = static_cast<std::size_t>(redundancy_);
    const std::size_t unit =
        first_unit_[part] + (all_blocks_[part] != 0 ? static_cast<std::size_t>(block) : 0);
    return {words_.data() + (unit * r + static_cast<std::size_t>(s)) * packet_, packet_};
  }

  // int32 view of code words (a signed type may alias its unsigned counterpart).
  [[nodiscard]] static std::span<std::int32_t> as_codes(std::span<std::uint32_t> w) noexcept {
    return {reinterpret_cast<std::int32_t*>(w.data()), w.size()};
  }

  [[nodiscard]] int owner_position(std::size_t part, int rank) const {
    const std::span<const int> o = placement_->owners(part);
    return static_cast<int>(std::find(o.begin(), o.end(), rank) - o.begin());
  }

  // The block of the coordinates that `receiver` recovers: its own in the reduce-scatter form,
  // the whole gradient (block 0) in the full form.
  [[nodiscard]] int block_of(int receiver) const noexcept { return reduce_scatter_ ? receiver : 0; }

  // The elements of slice `s` of block `block` of a gradient (absolute indices).
  [[nodiscard]] coded::index_range slice_range(int block, int s) const {
    return reduce_scatter_ ? placement_->block_slice_elements(d_, block, s)
                           : placement_->slice_elements(d_, s);
  }

  // The elements of block `block` ([0, d) in the full form).
  [[nodiscard]] coded::index_range block_range(int block) const {
    return reduce_scatter_ ? placement_->block_elements(d_, block) : coded::index_range{0, d_};
  }

  // This rank's packet for its group `slot` (S3 "Exchange"): built once, when first sent.
  void build_packet(std::size_t slot) {
    if (packet_ready_[slot] != 0) {
      return;
    }
    const std::span<std::uint32_t> packet(packets_.data() + slot * packet_, packet_);
    const std::vector<coded::coding_term> terms = placement_->coding_terms(group(slot), rank_);
    if (fixed_point_) {
      code_slices_.clear();
      for (const coded::coding_term& term : terms) {
        const int block = block_of(term.receiver);
        code_slices_.push_back(as_codes(slice(term.part, block, term.slice))
                                   .first(slice_range(block, term.slice).size()));
      }
      coded::combine_fixed_point(code_slices_, as_codes(packet));
    } else {
      word_slices_.clear();
      for (const coded::coding_term& term : terms) {
        const int block = block_of(term.receiver);
        word_slices_.push_back(
            slice(term.part, block, term.slice).first(slice_range(block, term.slice).size()));
      }
      coded::combine_xor(word_slices_, packet);
    }
    packet_ready_[slot] = 1;
  }

  const coded::placement* placement_;
  int rank_;
  int redundancy_;
  bool fixed_point_, reduce_scatter_, uncoded_;
  std::vector<std::size_t> first_unit_;   // per part: its first unit (r slices of L words)
  std::vector<unsigned char> all_blocks_; // per part: 1 if it stores all P blocks (see slice())
  std::size_t units_ = 0;                 // units in words_
  std::size_t d_ = 0;                     // gradient elements
  std::size_t packet_ = 0;                // L
  std::size_t word_count_ = 0;            // words_ once encoded: units_ r L
  double scale_ = 0.0;
  std::vector<std::uint32_t> words_;   // the parts' codes, part-major, units of r slices of L words
  std::vector<std::uint32_t> packets_; // this rank's packet of each of its groups
  std::vector<unsigned char> packet_ready_;
  std::vector<std::span<const std::int32_t>> code_slices_;
  std::vector<std::span<const std::uint32_t>> word_slices_;
  std::vector<std::int32_t> total_;
  std::vector<float> floats_;
};

} // namespace gradcomp::mpi::detail
