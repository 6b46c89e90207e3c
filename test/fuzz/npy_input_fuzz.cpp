// SPDX-License-Identifier: Apache-2.0
// Fuzz target for gradcomp-compress's .npy input reader (libFuzzer entry point; also replayed over
// the committed corpus by replay_main.cpp in every test run). Property: the reader either throws
// gradcomp_tools::npy_input_error naming the input, or returns values that are exactly the
// input's data section, whose count is the header's 1-D shape, none of them NaN, and which
// xt::dump_npy writes as a file the reader accepts and reads back bit for bit. Anything else
// (another exception, a crash, a sanitizer report) is a finding.
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "npy_input.hpp"

namespace {

const std::string input_name = "fuzz-input";

//! The reader's result for `bytes`, or false in `accepted` when it throws npy_input_error
//! (whose message must name the input).
std::vector<float> read_input(const std::string& bytes, bool& accepted) {
  std::istringstream in(bytes);
  try {
    std::vector<float> values = gradcomp_tools::read_npy_float32_1d(in, bytes.size(), input_name);
    accepted = true;
    return values;
  } catch (const gradcomp_tools::npy_input_error& e) {
    if (std::string(e.what()).rfind("input '" + input_name + "' ", 0) != 0) {
      std::abort(); // a rejection that does not say which input it is about
    }
    accepted = false;
    return {};
  }
}

//! True when the `count` bytes at `a` and at `b` are equal (either may be null when `count` is 0).
bool same_bytes(const void* a, const void* b, std::size_t count) {
  return count == 0 || std::memcmp(a, b, count) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  bool accepted = false;
  const std::vector<float> values = read_input(bytes, accepted);
  if (!accepted) {
    return 0; // the documented rejection
  }

  // Accepted: find the header and the data section independently of the reader.
  const std::size_t length_bytes = bytes.at(6) == 1 ? 2 : 4;
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    header_length |= std::size_t{static_cast<unsigned char>(bytes.at(8 + i))} << (8 * i);
  }
  const std::size_t data_offset = 8 + length_bytes + header_length;
  if (data_offset > size || size - data_offset != values.size() * sizeof(float) ||
      !same_bytes(values.data(), bytes.data() + data_offset, size - data_offset)) {
    std::abort(); // the values are not exactly the bytes after the header
  }
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  xt::detail::parse_header(bytes.substr(8 + length_bytes, header_length), descr, &fortran_order,
                           shape); // throws (and so fails the run) on a header it let through
  if (descr != xt::detail::build_typestring<float>() || shape.size() != 1 ||
      shape[0] != values.size()) {
    std::abort(); // the count or the dtype does not match the header
  }
  for (const float v : values) {
    if (std::isnan(v)) {
      std::abort(); // NaN is documented as rejected
    }
  }

  // Written again in the reader's format, the values must read back bit for bit.
  const std::string again = xt::dump_npy(xt::adapt(values));
  bool reaccepted = false;
  const std::vector<float> reread = read_input(again, reaccepted);
  if (!reaccepted || reread.size() != values.size() ||
      !same_bytes(reread.data(), values.data(), values.size() * sizeof(float))) {
    std::abort(); // xtensor's serialization of an accepted array is refused or reads differently
  }
  return 0;
}
