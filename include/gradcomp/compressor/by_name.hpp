// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Run-time choice of a host compressor by its name ("exact_topk", "reused_threshold",
//! ...): the names gradcomp-train's `--method` and the Python hooks' `method=` accept.
#pragma once

#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/compressor/qsgd.hpp>
#include <gradcomp/compressor/random_k.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/compressor/sampled_threshold.hpp>
#include <gradcomp/compressor/scaled_sign.hpp>
#include <gradcomp/compressor/terngrad.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace gradcomp {

//! @brief The settings a compressor chosen by name is built with; each compressor takes the
//! ones it has (density for all sparse ones, interval for reused_threshold, seed for
//! sampled_topk).
struct named_compressor_settings {
  double density = 0.01;       //!< fraction of the elements sent, (0, 1].
  std::uint64_t interval = 10; //!< reused_threshold: calls between exact selections, >= 1.
  std::uint64_t seed = 1;      //!< sampled_topk, random_k, terngrad, qsgd: seed of the draws.
  std::uint32_t levels = 15;   //!< qsgd: levels per sign, [1, 2^15].
  //! Quantizers: values per scale (their options' bucket_elements; 0: one scale per call);
  //! empty: each quantizer's default (qsgd 512, signsgd and terngrad 0).
  std::optional<std::uint32_t> bucket_elements = std::nullopt;
  unsigned threads = 1;                 //!< threads per compression call, [1, 1024].
  value_type values = value_type::fp32; //!< type of the sent values (fp32: exact).
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief The names of the sparse (top-k and threshold) host compressors, in the order the
//! tools list them: exact_topk (gradcomp::exact_top_k), sampled_topk (DGC's sampled threshold,
//! gradcomp::sampled_threshold), gaussian_threshold, lognormal_threshold
//! (gradcomp::gaussian_threshold / lognormal_threshold), reused_threshold and random_k
//! (gradcomp::random_k: k elements chosen uniformly).
inline constexpr std::array<std::string_view, 6> sparse_compressor_names = {
    "exact_topk",          "sampled_topk",     "gaussian_threshold",
    "lognormal_threshold", "reused_threshold", "random_k"};

namespace detail {
//! Whether `name` is one of `names`. O(|names|).
template <std::size_t N>
[[nodiscard]] constexpr bool is_one_of(const std::array<std::string_view, N>& names,
                                       std::string_view name) noexcept {
  for (const std::string_view n : names) {
    if (n == name) {
      return true;
    }
  }
  return false;
}
//! The error for an unknown `kind` called `name`, listing `names`.
template <std::size_t N>
[[nodiscard]] std::invalid_argument unknown_name(const char* kind,
                                                 std::string_view name,
                                                 const std::array<std::string_view, N>& names) {
  std::string list;
  for (const std::string_view n : names) {
    list += list.empty() ? "" : ", ";
    list += n;
  }
  return std::invalid_argument(
      concat("gradcomp: unknown ", kind, " '", name, "' (known: ", list, ")"));
}
} // namespace detail

//! @brief Whether `name` is one of sparse_compressor_names. O(1).
[[nodiscard]] constexpr bool is_sparse_compressor_name(std::string_view name) noexcept {
  return detail::is_one_of(sparse_compressor_names, name);
}

//! @brief Calls `fn(compressor)` with the sparse compressor called `name`, built from `s`, and
//! returns what fn returns (a generic lambda is instantiated once per compressor type).
//! @throws std::invalid_argument naming `name` and the accepted names when it is none of
//! sparse_compressor_names, and whatever the compressor's constructor throws for `s` (a density
//! outside (0, 1], an interval of 0, threads outside [1, 1024], each naming the value).
template <class Fn>
decltype(auto)
with_sparse_compressor(std::string_view name, const named_compressor_settings& s, Fn&& fn) {
  const double d = s.density;
  const unsigned t = s.threads;
  const value_type v = s.values;
  const nonfinite_policy nf = s.nonfinite;
  if (name == "exact_topk") {
    return std::forward<Fn>(fn)(
        exact_top_k({.density = d, .values = v, .threads = t, .nonfinite = nf}));
  }
  if (name == "sampled_topk") {
    return std::forward<Fn>(fn)(sampled_threshold(
        {.density = d, .seed = s.seed, .values = v, .threads = t, .nonfinite = nf}));
  }
  if (name == "gaussian_threshold") {
    return std::forward<Fn>(fn)(
        gaussian_threshold({.density = d, .values = v, .threads = t, .nonfinite = nf}));
  }
  if (name == "lognormal_threshold") {
    return std::forward<Fn>(fn)(
        lognormal_threshold({.density = d, .values = v, .threads = t, .nonfinite = nf}));
  }
  if (name == "reused_threshold") {
    return std::forward<Fn>(fn)(reused_threshold(
        {.density = d, .interval = s.interval, .values = v, .threads = t, .nonfinite = nf}));
  }
  if (name == "random_k") {
    return std::forward<Fn>(fn)(
        random_k({.density = d, .seed = s.seed, .values = v, .threads = t, .nonfinite = nf}));
  }
  throw detail::unknown_name("compressor", name, sparse_compressor_names);
}

//! @brief The names of the quantizing host compressors (every element sent, a few bits each), in
//! the order the tools list them: signsgd (gradcomp::scaled_sign, EF-signSGD's scale), terngrad
//! (gradcomp::terngrad) and qsgd (gradcomp::qsgd at named_compressor_settings::levels).
inline constexpr std::array<std::string_view, 3> quantizer_names = {"signsgd", "terngrad", "qsgd"};

//! @brief Whether `name` is one of quantizer_names. O(1).
[[nodiscard]] constexpr bool is_quantizer_name(std::string_view name) noexcept {
  return detail::is_one_of(quantizer_names, name);
}

//! @brief Calls `fn(compressor)` with the quantizing compressor called `name`, built from `s`
//! (seed, levels, threads, bucket_elements, nonfinite; not density or values), and returns what
//! fn returns.
//! @throws std::invalid_argument naming `name` and the accepted names when it is none of
//! quantizer_names, and naming the levels when qsgd's are outside [1, 2^15].
template <class Fn>
decltype(auto) with_quantizer(std::string_view name, const named_compressor_settings& s, Fn&& fn) {
  // the bucket when set, else the quantizer's own default
  const auto bucket = [&s](std::uint32_t fallback) { return s.bucket_elements.value_or(fallback); };
  if (name == "signsgd") {
    return std::forward<Fn>(fn)(
        scaled_sign({.threads = s.threads,
                     .bucket_elements = bucket(scaled_sign_options{}.bucket_elements),
                     .nonfinite = s.nonfinite}));
  }
  if (name == "terngrad") {
    return std::forward<Fn>(fn)(
        terngrad({.seed = s.seed,
                  .threads = s.threads,
                  .bucket_elements = bucket(terngrad_options{}.bucket_elements),
                  .nonfinite = s.nonfinite}));
  }
  if (name == "qsgd") {
    return std::forward<Fn>(fn)(qsgd({.levels = s.levels,
                                      .seed = s.seed,
                                      .threads = s.threads,
                                      .bucket_elements = bucket(qsgd_options{}.bucket_elements),
                                      .nonfinite = s.nonfinite}));
  }
  throw detail::unknown_name("quantizer", name, quantizer_names);
}

} // namespace gradcomp
