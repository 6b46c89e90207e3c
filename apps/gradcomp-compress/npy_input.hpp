// SPDX-License-Identifier: Apache-2.0
// gradcomp-compress's input reader: a validating reader of 1-D float32 .npy data from a stream,
// which refuses anything else with gradcomp_tools::npy_input_error and a short reason. Used by
// the tool (main.cpp) and by the fuzz target test/fuzz/npy_input_fuzz.cpp.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <xtensor/xnpy.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../common/tool_support.hpp"

namespace gradcomp_tools {

//! Longest .npy header accepted: NumPy's own default limit (np.load's max_header_size).
inline constexpr std::uint64_t max_header_bytes = 10000;

//! The input is not a 1-D float32 .npy file this reader accepts; what() is a short reason that
//! starts with "input '<name>' " (it may quote header bytes, line breaks included).
class npy_input_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

namespace detail {

//! Reads exactly `count` bytes into `out`. @throws npy_input_error naming `what` when short.
inline void read_exactly(std::istream& in,
                         char* out,
                         std::uint64_t count,
                         const std::string& path,
                         std::string_view what) {
  in.read(out, static_cast<std::streamsize>(count));
  if (!in || static_cast<std::uint64_t>(in.gcount()) != count) {
    throw npy_input_error(
        cat("input '", path, "' is not a valid .npy file (truncated ", what, ")"));
  }
}

//! `text` cut to at most `limit` characters (with "..." marking the cut) for an error message.
inline std::string abbreviate(std::string text, std::size_t limit = 60) {
  if (text.size() > limit) {
    text.resize(limit - 3);
    text += "...";
  }
  return text;
}

//! The shape as NumPy prints it, e.g. "(2, 3)" or "(5,)".
inline std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

} // namespace detail

//! @brief Reads a 1-D float32 .npy file in the host's byte order ('<f4' on little-endian
//! hosts), format version 1.0 or 2.0, from `in`.
//!
//! The header dictionary is parsed by xtensor (xt::detail::parse_header) and the dtype compared
//! with xtensor's own float typestring. The fixed-size preamble (magic, version, header length)
//! is read here because xtensor 0.24.3 sign-extends the header-length bytes and does not check
//! short reads; the data size is checked against the file size before anything is allocated.
//! Headers longer than NumPy's default limit are refused (they also bound the regex below:
//! libstdc++'s std::regex recurses per character, so a header at the limit needs about 4 MB of
//! stack in an optimized build, more in an unoptimized or sanitized one).
//! A 1-D array is stored identically in C and Fortran order, so fortran_order is accepted.
//!
//! @param in the file's bytes, read from the current position.
//! @param stream_bytes how many bytes `in` holds from its current position to its end (the
//!        file size): the whole file must be exactly one array, with nothing after its data.
//!        Only used to refuse inconsistent sizes before allocating; a wrong value cannot make
//!        the reader read out of bounds, but an overstated one can make it allocate up to that
//!        many bytes before it finds the stream short.
//! @param path the input's name in the error messages ("input 'PATH' ...").
//! @return the array's values, in order.
//! @throws npy_input_error with a short reason for anything but such a file, or for NaN
//!         values. Nothing else is thrown but std::bad_alloc (unless `in` has exceptions()
//!         enabled, when a short read throws std::ios_base::failure).
inline std::vector<float>
read_npy_float32_1d(std::istream& in, std::uint64_t stream_bytes, const std::string& path) {
  using detail::read_exactly;
  unsigned char major = 0;
  unsigned char minor = 0;
  try {
    xt::detail::read_magic(in, &major, &minor);
  } catch (const std::runtime_error&) {
    throw npy_input_error(cat("input '", path, "' is not a .npy file (no NumPy magic string)"));
  }
  if ((major != 1 && major != 2) || minor != 0) {
    throw npy_input_error(cat("input '", path, "' uses .npy format version ", int{major}, ".",
                              int{minor}, "; only 1.0 and 2.0 are supported"));
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::array<unsigned char, 4> length{};
  read_exactly(in, reinterpret_cast<char*>(length.data()), length_bytes, path, "header");
  std::uint64_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    header_length |= std::uint64_t{length[i]} << (8 * i);
  }
  const std::uint64_t preamble_bytes = xt::detail::magic_string_length + 2 + length_bytes;
  if (header_length > max_header_bytes) {
    throw npy_input_error(cat("input '", path, "' has a .npy header of ", header_length,
                              " bytes; at most ", max_header_bytes, " are accepted"));
  }
  // (the preamble was read, so stream_bytes < preamble_bytes only if the caller understated it)
  if (stream_bytes < preamble_bytes || header_length > stream_bytes - preamble_bytes) {
    throw npy_input_error(cat("input '", path, "' is not a valid .npy file (truncated header)"));
  }
  std::string header(header_length, '\0');
  read_exactly(in, header.data(), header_length, path, "header");

  // xtensor's parse_header needs a well-formed dictionary (it reads the back of strings that
  // may be empty otherwise), so check the form first; the values are parsed by xtensor.
  std::string compact = header;
  if (!compact.empty() && compact.back() == '\n') {
    compact.pop_back();
  }
  compact.erase(std::remove(compact.begin(), compact.end(), ' '), compact.end());
  static const std::regex header_form(
      R"(\{'descr':('[^']*'),'fortran_order':(True|False),'shape':\(([0-9]+(,[0-9]+)*,?)?\),?\})");
  std::smatch form;
  if (header.empty() || header.back() != '\n' || !std::regex_match(compact, form, header_form)) {
    throw npy_input_error(cat("input '", path, "' is not a valid .npy file (malformed header)"));
  }
  const std::string float32 = xt::detail::build_typestring<float>();
  if (form[1].str() != "'" + float32 + "'") {
    throw npy_input_error(cat("input '", path, "' has dtype ", detail::abbreviate(form[1].str()),
                              "; expected float32 ('", float32, "')"));
  }
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  try {
    xt::detail::parse_header(header, descr, &fortran_order, shape);
  } catch (const std::runtime_error& e) {
    throw npy_input_error(
        cat("input '", path, "' is not a valid .npy file (header: ", e.what(), ")"));
  }
  if (descr != float32) {
    throw npy_input_error(
        cat("input '", path, "' has dtype '", descr, "'; expected float32 ('", float32, "')"));
  }
  if (shape.size() != 1) {
    throw npy_input_error(cat("input '", path, "' has shape ",
                              detail::abbreviate(detail::shape_text(shape)), " (", shape.size(),
                              "-D); expected a 1-D array"));
  }

  const std::uint64_t n = shape[0];
  if (n > gradcomp::max_sparse_dense_length_elements) {
    throw npy_input_error(cat("input '", path, "' has ", n, " elements; at most ",
                              gradcomp::max_sparse_dense_length_elements,
                              " are supported (32-bit indices)"));
  }
  const std::uint64_t data_bytes = n * sizeof(float);
  const std::uint64_t available = stream_bytes - preamble_bytes - header_length;
  if (available < data_bytes) {
    throw npy_input_error(cat("input '", path, "' is truncated: its header declares ", n,
                              " float32 values (", data_bytes, " bytes) but only ", available,
                              " bytes of data follow"));
  }
  if (available > data_bytes) {
    throw npy_input_error(cat("input '", path, "' has ", available - data_bytes,
                              " unexpected bytes after its ", n, " float32 values"));
  }
  std::vector<float> values(n);
  read_exactly(in, reinterpret_cast<char*>(values.data()), data_bytes, path, "data");
  const auto nan =
      std::find_if(values.begin(), values.end(), [](float v) { return std::isnan(v); });
  if (nan != values.end()) {
    throw npy_input_error(
        cat("input '", path, "' contains NaN (first at index ", nan - values.begin(), ")"));
  }
  return values;
}

} // namespace gradcomp_tools
