// SPDX-License-Identifier: Apache-2.0
// Builders of .npy test inputs shared by the gradcomp-compress tests and the npy_input fuzz
// corpus generator (test/fuzz/make_npy_corpus.cpp): xtensor's own serialization, raw float32
// data and hand-built files with any version, header dictionary and header length.
#pragma once

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradcomp_tool_tests {

//! The .npy serialization of a 1-D vector, by xtensor.
template <class T>
std::string npy_of(const std::vector<T>& v) {
  return xt::dump_npy(xt::adapt(v));
}

//! The raw bytes of `v` (the data section of a little-endian float32 .npy file).
inline std::string raw_bytes(const std::vector<float>& v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) {
    std::memcpy(bytes.data(), v.data(), bytes.size());
  }
  return bytes;
}

//! A .npy file built by hand: format version `major`.0, the header dictionary `dict` padded with
//! spaces and a newline to `header_length` bytes, then `data`.
//! @throws std::invalid_argument if `header_length` is below dict.size() + 1.
inline std::string make_npy(unsigned char major,
                            const std::string& dict,
                            std::size_t header_length,
                            const std::string& data) {
  if (dict.size() + 1 > header_length) {
    throw std::invalid_argument("make_npy: header length " + std::to_string(header_length) +
                                " is too short");
  }
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    bytes += static_cast<char>((header_length >> (8 * i)) & 0xff);
  }
  bytes += dict + std::string(header_length - 1 - dict.size(), ' ') + "\n";
  return bytes + data;
}

} // namespace gradcomp_tool_tests
