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

//! One checked option: its name, its value's exact bits (a double's bits, or an integer) and
//! whether it is an integer (for the message).
struct checked_option {
  std::string_view name;
  std::uint64_t bits = 0;
  bool integer = false;
};

//! Calls f(checked_option) for every option of `o` that decides a compressor's selections, in a
//! fixed order: values, guard_factor, interval, sample_fraction, min_samples, max_adjust_rounds,
//! seed, levels, scale, bucket_elements (the ones Options has). Not `threads` (results do not
//! depend on it) nor `density` (state: set_density() changes it; saved and restored, not checked).
//! Compared bit for bit.
template <class Options, class F>
void for_each_checked_option(const Options& o, F&& f) {
  const auto integer = [&](std::string_view name, std::uint64_t v) { f({name, v, true}); };
  const auto real = [&](std::string_view name, double v) {
    f({name, std::bit_cast<std::uint64_t>(v), false});
  };
  if constexpr (requires { o.values; }) {
    integer("values", static_cast<std::uint64_t>(o.values));
  }
  if constexpr (requires { o.guard_factor; }) {
    real("guard_factor", static_cast<double>(o.guard_factor));
  }
  if constexpr (requires { o.interval; }) {
    integer("interval", static_cast<std::uint64_t>(o.interval));
  }
  if constexpr (requires { o.sample_fraction; }) {
    real("sample_fraction", static_cast<double>(o.sample_fraction));
  }
  if constexpr (requires { o.min_samples; }) {
    integer("min_samples", static_cast<std::uint64_t>(o.min_samples));
  }
  if constexpr (requires { o.max_adjust_rounds; }) {
    integer("max_adjust_rounds", static_cast<std::uint64_t>(o.max_adjust_rounds));
  }
  if constexpr (requires { o.seed; }) {
    integer("seed", static_cast<std::uint64_t>(o.seed));
  }
  if constexpr (requires { o.levels; }) {
    integer("levels", static_cast<std::uint64_t>(o.levels));
  }
  if constexpr (requires { o.scale; }) {
    integer("scale", static_cast<std::uint64_t>(o.scale));
  }
  if constexpr (requires { o.bucket_elements; }) {
    integer("bucket_elements", static_cast<std::uint64_t>(o.bucket_elements));
  }
}

//! Writes the checked options of `o` (name and value bits each).
template <class Options>
void write_checked_options(state_writer& w, const Options& o) {
  for_each_checked_option(o, [&](const checked_option& c) {
    w.tag(c.name);
    w.u64(c.bits);
  });
}

//! Reads the checked options and compares each with `o`'s, bit for bit.
//! @throws state_error naming the compressor, the option and both values on a difference.
template <class Options>
void check_checked_options(state_reader& r, const Options& o, std::string_view compressor) {
  for_each_checked_option(o, [&](const checked_option& c) {
    r.expect_tag(c.name);
    const std::uint64_t got = r.u64(c.name);
    if (got != c.bits) {
      const auto shown = [&](std::uint64_t bits) {
        return c.integer ? concat(bits) : concat(std::bit_cast<double>(bits));
      };
      throw state_error(concat("gradcomp state: ", compressor, " option '", c.name,
                               "' differs: the checkpoint has ", shown(got), ", this compressor ",
                               shown(c.bits)));
    }
  });
}

} // namespace gradcomp::detail
