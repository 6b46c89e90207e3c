// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The MPI-free pieces of the sparse (top-k) form of CSSGD's coded exchange (S3
//! "Exchange", applied to top-k part gradients; docs/coded.md, "Send rule and decoding" for the
//! exchange, "The sparse form: coded_sparse_allreduce" for the ring allgather of index lists):
//! which owner of each part contributes the part's indices to the union agreement, the union of
//! ascending index lists, the check of an index list received from a peer, and the restriction
//! of a part's sparse message to the agreed union U. The exchange that uses them is
//! gradcomp::mpi::coded_sparse_allreduce (<gradcomp/mpi/coded_sparse.hpp>); its cost model is
//! coded::coded_sparse_load (cost.hpp). Needs only the C++20 standard library and gradcomp's
//! core (sparse_message).
#pragma once

#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::coded {

//! @brief For every part of `p`, the one owner that contributes the part's selected indices to
//! the union agreement (the r owners hold the same message, so one copy suffices), balanced over
//! the ranks. First greedily, parts in ascending index, each to its owner with the fewest parts
//! so far (the lowest rank among ties); then, while some chain of moves (a part of rank a handed
//! to another owner b, a part of b to c, ...) leads from a rank with the most parts to a rank
//! with at least two fewer, the first such chain a breadth-first search finds is applied (the
//! busiest rank loses one part, the other end gains one, the ranks between keep their count).
//! Each rank ends with floor(C(n, r) / n) or ceil(C(n, r) / n) parts for every n <= 10 (the
//! tests check it). Every rank computes the same vector locally (no communication).
//! Returns C(n, r) ranks, entry t one of owners(t). O(C(n, r) r) per move; each move lowers the
//! sum of the squared counts, so the moves end (fewer than 20 for n <= 10); O(C(n, r) + n)
//! memory. Deterministic. Source: S3's placement
//! (every part owned by r ranks); the choice of one contributor per part is gradcomp's.
[[nodiscard]] inline std::vector<int> union_contributors(const placement& p) {
  const auto n = static_cast<std::size_t>(p.ranks());
  std::vector<std::size_t> given(n, 0);
  std::vector<int> contributor(p.part_count());
  for (std::size_t t = 0; t < p.part_count(); ++t) {
    const std::span<const int> owners = p.owners(t);
    int best = owners[0];
    for (const int o : owners) {
      if (given[static_cast<std::size_t>(o)] < given[static_cast<std::size_t>(best)]) {
        best = o;
      }
    }
    contributor[t] = best;
    ++given[static_cast<std::size_t>(best)];
  }
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  for (;;) {
    const std::size_t most = *std::max_element(given.begin(), given.end());
    std::vector<std::vector<std::size_t>> parts_given(n);
    for (std::size_t t = 0; t < contributor.size(); ++t) {
      parts_given[static_cast<std::size_t>(contributor[t])].push_back(t);
    }
    // breadth-first from every busiest rank; via[b] = the part handed to b on the chain
    std::vector<std::size_t> via(n, none);
    std::vector<unsigned char> seen(n, 0);
    std::vector<std::size_t> queue;
    for (std::size_t a = 0; a < n; ++a) {
      if (given[a] == most) {
        seen[a] = 1;
        queue.push_back(a);
      }
    }
    std::size_t end = none;
    for (std::size_t q = 0; q < queue.size() && end == none; ++q) {
      for (const std::size_t t : parts_given[queue[q]]) {
        for (const int o : p.owners(t)) {
          const auto b = static_cast<std::size_t>(o);
          if (seen[b] != 0) {
            continue;
          }
          seen[b] = 1;
          via[b] = t;
          if (given[b] + 2 <= most) {
            end = b;
            break;
          }
          queue.push_back(b);
        }
        if (end != none) {
          break;
        }
      }
    }
    if (end == none) {
      return contributor;
    }
    ++given[end];
    for (std::size_t b = end; via[b] != none;) {
      const std::size_t t = via[b];
      const auto a = static_cast<std::size_t>(contributor[t]);
      contributor[t] = static_cast<int>(b);
      b = a;
      if (via[b] == none) {
        --given[b];
      }
    }
  }
}

//! @brief Writes into `out` the union of strictly ascending index lists, strictly ascending
//! (each index once). A k-way merge with a heap: O(T log L) time for T indices in L lists,
//! |out| <= T. `out`'s capacity is kept. Deterministic.
//! @pre every list is strictly ascending (check_index_list checks a list from a peer); the
//! result is unspecified otherwise.
inline void index_union(std::span<const std::span<const std::uint32_t>> lists,
                        std::vector<std::uint32_t>& out) {
  out.clear();
  using head = std::pair<std::uint32_t, std::size_t>; // (next index, list)
  std::priority_queue<head, std::vector<head>, std::greater<>> heads;
  std::vector<std::size_t> next(lists.size(), 0);
  for (std::size_t l = 0; l < lists.size(); ++l) {
    if (!lists[l].empty()) {
      heads.emplace(lists[l][0], l);
    }
  }
  while (!heads.empty()) {
    const auto [index, l] = heads.top();
    heads.pop();
    if (out.empty() || out.back() != index) {
      out.push_back(index);
    }
    if (++next[l] < lists[l].size()) {
      heads.emplace(lists[l][next[l]], l);
    }
  }
}

//! @brief Checks an index list received from rank `rank` (untrusted): every index below
//! `dense_length_elements` and the list strictly ascending. O(|list|).
//! @throws gradcomp::wire_error naming `rank`, the position, the index and the limit it broke.
inline void check_index_list(std::span<const std::uint32_t> list,
                             std::uint64_t dense_length_elements,
                             int rank) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    gradcomp::detail::require_wire(list[i] < dense_length_elements, "coded sparse exchange: rank ",
                                   rank, "'s index list holds index ", list[i], " at position ", i,
                                   ", not below the dense length ", dense_length_elements);
    gradcomp::detail::require_wire(i == 0 || list[i - 1] < list[i], "coded sparse exchange: rank ",
                                   rank, "'s index list is not strictly ascending at position ", i,
                                   ": ", i == 0 ? 0 : list[i - 1], " then ", list[i]);
  }
}

//! @brief Appends the selected indices of `m` to `out`: its indices (sparse layout), or every
//! index 0 .. dense length - 1 (dense layout: every element is selected). O(nnz) or O(d).
//! @pre m is valid (sparse_message::validate).
inline void append_selected_indices(const sparse_message& m, std::vector<std::uint32_t>& out) {
  if (!m.dense) {
    out.insert(out.end(), m.indices.begin(), m.indices.end());
    return;
  }
  for (std::uint64_t i = 0; i < m.dense_length_elements; ++i) {
    out.push_back(static_cast<std::uint32_t>(i));
  }
}

//! @brief Restricts part message `m` to the union `union_indices`: values[i] = m's value at
//! union_indices[i] where m selected that index, +0.0 where it did not. This is the |U|-element
//! vector the coded exchange carries for the part. Returns how many of m's selected indices are
//! NOT in the union (they would be lost): 0 whenever the union contains m's indices, which the
//! exchange checks (a non-zero count means the part's owners passed different messages).
//! O(|U| + nnz) for the sparse layout, O(|U| + d) for the dense layout. Deterministic.
//! @pre m is valid and union_indices strictly ascending and below m's dense length (as
//! index_union of checked lists gives).
//! @throws std::invalid_argument naming both lengths if values.size() != union_indices.size().
[[nodiscard]] inline std::size_t restrict_to_union(const sparse_message& m,
                                                   std::span<const std::uint32_t> union_indices,
                                                   std::span<float> values) {
  gradcomp::detail::require(values.size() == union_indices.size(),
                            "restrict_to_union: the output has ", values.size(),
                            " elements, the union has ", union_indices.size());
  if (m.dense) {
    std::size_t inside = 0;
    for (std::size_t i = 0; i < union_indices.size(); ++i) {
      const bool in_range = union_indices[i] < m.values.size();
      values[i] = in_range ? m.values[union_indices[i]] : 0.0f;
      inside += in_range ? 1 : 0;
    }
    return m.values.size() - inside;
  }
  std::size_t j = 0;
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < union_indices.size(); ++i) {
    while (j < m.indices.size() && m.indices[j] < union_indices[i]) {
      ++dropped;
      ++j;
    }
    if (j < m.indices.size() && m.indices[j] == union_indices[i]) {
      values[i] = m.values[j++];
    } else {
      values[i] = 0.0f;
    }
  }
  return dropped + (m.indices.size() - j);
}

} // namespace gradcomp::coded
