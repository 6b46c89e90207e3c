// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exception types of gradcomp and the helper that builds their messages.
//!
//! Bad arguments throw std::invalid_argument whose message names the offending value and the
//! limit it broke; malformed wire bytes throw gradcomp::wire_error. Nothing in the library
//! reports errors through return codes.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace gradcomp {

//! @brief Thrown by every decoder of untrusted bytes (the sparse-message wire format) when the
//! input is truncated, oversized, inconsistent or otherwise malformed. The message says which
//! field failed and why; the decoder's output is left unspecified (never partially trusted).
class wire_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

namespace detail {

//! Concatenates the streamable arguments into one string (g++ 12 has no std::format).
template <class... Args>
[[nodiscard]] std::string concat(Args&&... args) {
  std::ostringstream out;
  out.precision(9);
  (out << ... << std::forward<Args>(args));
  return out.str();
}

//! Throws std::invalid_argument with the concatenated message unless `condition` holds.
template <class... Args>
void require(bool condition, Args&&... message) {
  if (!condition) {
    throw std::invalid_argument(concat("gradcomp: ", std::forward<Args>(message)...));
  }
}

//! Throws gradcomp::wire_error with the concatenated message unless `condition` holds.
template <class... Args>
void require_wire(bool condition, Args&&... message) {
  if (!condition) {
    throw wire_error(concat("gradcomp wire: ", std::forward<Args>(message)...));
  }
}

} // namespace detail
} // namespace gradcomp
