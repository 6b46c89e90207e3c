// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Checkpoint form of a compressor's std::mt19937_64 (sampled_threshold, random_k): a tag
//! and the engine's standard text form.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>

#include <istream>
#include <locale>
#include <random>
#include <sstream>
#include <string>

namespace gradcomp::detail {

//! Writes `tag` and `rng`'s state (its standard text form, classic locale). O(1).
inline void save_rng(state_writer& w, const char* tag, const std::mt19937_64& rng) {
  std::ostringstream text;
  text.imbue(std::locale::classic()); // no digit grouping, whatever the global locale
  text << rng;
  w.tag(tag);
  w.string(text.str());
}

//! Reads what save_rng wrote under `tag`. @throws state_error if the tag differs or the stored
//! state is not a std::mt19937_64 state.
[[nodiscard]] inline std::mt19937_64 load_rng(state_reader& r, const char* tag) {
  r.expect_tag(tag);
  std::istringstream text(r.string(tag, 1 << 14));
  text.imbue(std::locale::classic());
  std::mt19937_64 rng;
  text >> rng;
  if (text.fail() || !(text >> std::ws).eof()) {
    throw state_error(std::string("gradcomp state: the RNG state under '") + tag +
                      "' is not valid");
  }
  return rng;
}

} // namespace gradcomp::detail
