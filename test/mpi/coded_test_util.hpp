// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers shared by the MPI tests of the coded exchanges (coded_exchange_test.cpp,
//! coded_sparse_test.cpp): the references every rank computes locally from all parts' gradients,
//! option names for CAPTURE, and the single-rank rejection.
#pragma once

#include <gradcomp/coded.hpp>
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace gradcomp::test::coded_helpers {

// The gradient of part `part`: d values from (part, seed) alone, so every rank can compute every
// part. Magnitudes differ between parts (0.01, 1, 100) to exercise the agreed scale.
inline std::vector<float> part_gradient(std::size_t part, std::size_t d, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + part);
  std::normal_distribution<float> normal;
  const float magnitude = part % 3 == 0 ? 0.01f : part % 3 == 1 ? 1.0f : 100.0f;
  std::vector<float> g(d);
  for (float& v : g) {
    v = magnitude * normal(rng);
  }
  return g;
}

inline std::vector<std::vector<float>>
all_gradients(const coded::placement& p, std::size_t d, std::uint64_t seed) {
  std::vector<std::vector<float>> g;
  for (std::size_t t = 0; t < p.part_count(); ++t) {
    g.push_back(part_gradient(t, d, seed));
  }
  return g;
}

// This rank's inputs: the gradients of its parts, in the order of parts_of(rank).
inline std::vector<std::span<const float>>
owned_parts(const coded::placement& p, const std::vector<std::vector<float>>& g, int rank) {
  std::vector<std::span<const float>> mine;
  for (const std::size_t t : p.parts_of(rank)) {
    mine.emplace_back(g[t]);
  }
  return mine;
}

// Fixed point: every part encoded with the scale of the largest |value| of all parts and
// C(P, r) summed terms, the codes summed exactly (wrapping int32), decoded once.
inline std::vector<float> fixed_point_reference(const std::vector<std::vector<float>>& g,
                                                std::size_t d) {
  double largest = 0.0;
  for (const std::vector<float>& part : g) {
    for (const float v : part) {
      largest = std::max(largest, static_cast<double>(std::fabs(v)));
    }
  }
  const double scale = coded::fixed_point_scale(largest, g.size());
  std::vector<std::int32_t> total(d, 0);
  std::vector<std::int32_t> codes(d);
  for (const std::vector<float>& part : g) {
    coded::encode_fixed_point(part, scale, codes);
    coded::add_fixed_point(codes, total);
  }
  std::vector<float> sum(d);
  coded::decode_fixed_point(total, scale, std::span<float>(sum));
  return sum;
}

// XOR delivers the floats exactly; the sum is ((g_0 + g_1) + g_2) + ... in part order.
inline std::vector<float> float_reference(const std::vector<std::vector<float>>& g, std::size_t d) {
  std::vector<float> sum = g.empty() ? std::vector<float>(d) : g[0];
  for (std::size_t t = 1; t < g.size(); ++t) {
    for (std::size_t i = 0; i < d; ++i) {
      sum[i] += g[t][i];
    }
  }
  return sum;
}

inline const char* name(mpi::packet_coding c) {
  return c == mpi::packet_coding::fixed_point ? "fixed_point" : "xor_bits";
}
inline const char* name(mpi::coded_schedule s) {
  return s == mpi::coded_schedule::concurrent ? "concurrent" : "serialized";
}
inline const char* name(mpi::coded_variant v) {
  return v == mpi::coded_variant::full_recovery ? "full_recovery" : "reduce_scatter";
}

inline constexpr mpi::coded_variant both_variants[] = {mpi::coded_variant::full_recovery,
                                                       mpi::coded_variant::reduce_scatter};

// With one rank no redundancy is valid: the constructor rejects every r.
inline bool single_rank_rejects(const mpi::communicator& comm) {
  if (comm.size() >= 2) {
    return false;
  }
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.redundancy = 1}),
                    Catch::Contains("redundancy r = 1 is not below the rank count P = 1"));
  return true;
}

} // namespace gradcomp::test::coded_helpers
