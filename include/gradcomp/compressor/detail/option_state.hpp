// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The compressor options a checkpoint records and checks on load (compressor_base's
//! save_state / load_state).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <bit>
#include <cstdint>
#include <string_view>

namespace gradcomp::detail {

//! Calls f(name, value as double) for every option of `o` that decides a compressor's
//! selections, in a fixed order: values, guard_factor, interval, sample_fraction, min_samples,
//! max_adjust_rounds, seed (the ones Options has). Not `threads` (results do not depend on it)
//! nor `density` (state: set_density() changes it; saved and restored, not checked).
template <class Options, class F>
void for_each_checked_option(const Options& o, F&& f) {
  if constexpr (requires { o.values; }) {
    f("values", static_cast<double>(static_cast<int>(o.values)));
  }
  if constexpr (requires { o.guard_factor; }) {
    f("guard_factor", static_cast<double>(o.guard_factor));
  }
  if constexpr (requires { o.interval; }) {
    f("interval", static_cast<double>(o.interval));
  }
  if constexpr (requires { o.sample_fraction; }) {
    f("sample_fraction", static_cast<double>(o.sample_fraction));
  }
  if constexpr (requires { o.min_samples; }) {
    f("min_samples", static_cast<double>(o.min_samples));
  }
  if constexpr (requires { o.max_adjust_rounds; }) {
    f("max_adjust_rounds", static_cast<double>(o.max_adjust_rounds));
  }
  if constexpr (requires { o.seed; }) {
    // the seed's bits, exactly (a double would round seeds above 2^53)
    f("seed", std::bit_cast<double>(static_cast<std::uint64_t>(o.seed)));
  }
}

//! Writes the checked options of `o` (name and value each).
template <class Options>
void write_checked_options(state_writer& w, const Options& o) {
  for_each_checked_option(o, [&](std::string_view name, double v) {
    w.tag(name);
    w.f64(v);
  });
}

//! Reads the checked options and compares each with `o`'s.
//! @throws state_error naming the compressor, the option and both values on a difference.
template <class Options>
void check_checked_options(state_reader& r, const Options& o, std::string_view compressor) {
  for_each_checked_option(o, [&](std::string_view name, double v) {
    r.expect_tag(name);
    const double got = r.f64(name);
    if (std::bit_cast<std::uint64_t>(got) != std::bit_cast<std::uint64_t>(v)) {
      throw state_error(concat("gradcomp state: ", compressor, " option '", name,
                               "' differs: the checkpoint has ", got, ", this compressor ", v));
    }
  });
}

} // namespace gradcomp::detail
