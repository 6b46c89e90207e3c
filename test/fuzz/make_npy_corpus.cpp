// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of the npy_input fuzz target into the directory given as the only
// argument: small 1-D float32 .npy files written by xt::dump_npy (empty, one value, special
// values), hand-built valid layouts (Fortran order, format 2.0, a 182-byte header, compact and
// comma-free dictionaries) and near misses the reader must refuse (NaN, other dtypes and shapes,
// truncated or trailing data, version 3.0, an oversized header length). Run once by hand; the
// output is committed under test/fuzz/corpus/npy_input.
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../tools/npy_builder.hpp"

namespace {

using gradcomp_tool_tests::make_npy;
using gradcomp_tool_tests::npy_of;
using gradcomp_tool_tests::raw_bytes;

//! `s` with its first occurrence of `from` replaced by `to` (which must occur).
std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const std::size_t pos = s.find(from);
  if (pos == std::string::npos) {
    std::fprintf(stderr, "make_npy_corpus: '%s' not found\n", from.c_str());
    std::exit(1);
  }
  return s.replace(pos, from.size(), to);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_npy_corpus DIR\n");
    return 2;
  }
  int written = 0;
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream out(std::string(argv[1]) + "/" + name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ++written;
  };
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> seven(7);
  for (float& x : seven) {
    x = normal(rng);
  }
  std::vector<float> many(256);
  for (float& x : many) {
    x = normal(rng);
  }
  using limits = std::numeric_limits<float>;
  const std::vector<float> special{
      0.0f,          -0.0f,         limits::infinity(), -limits::infinity(), limits::denorm_min(),
      limits::min(), limits::max(), limits::lowest(),   limits::epsilon()};
  const std::string dict7 = "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }";

  // valid: xtensor's own files
  write("valid-empty", npy_of(std::vector<float>{}));
  write("valid-one", npy_of(std::vector<float>{1.5f}));
  write("valid-seven", npy_of(seven));
  write("valid-special-values", npy_of(special));
  write("valid-256", npy_of(many));
  // valid: other layouts of the same array
  write("valid-fortran-order", replace_once(npy_of(seven), "False", "True "));
  write("valid-fortran-order-empty", replace_once(npy_of(std::vector<float>{}), "False", "True "));
  write("valid-header-182", make_npy(1, dict7, 182, raw_bytes(seven)));
  write("valid-version-2", make_npy(2, dict7, 128 - 12, raw_bytes(seven)));
  write("valid-compact-dict",
        make_npy(1, "{'descr':'<f4','fortran_order':False,'shape':(7,)}", 118, raw_bytes(seven)));
  write("valid-no-trailing-comma",
        make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}", 118,
                 raw_bytes(seven)));
  // refused: one detail away from a valid file
  std::vector<float> with_nan = seven;
  with_nan[3] = limits::quiet_NaN();
  write("refused-nan", npy_of(with_nan));
  write("refused-float64", npy_of(std::vector<double>{1.0, 2.0, 3.0}));
  write("refused-big-endian", replace_once(npy_of(seven), "<f4", ">f4"));
  xt::xarray<float> matrix = {{1.0f, 2.0f}, {3.0f, 4.0f}};
  write("refused-2d", xt::dump_npy(matrix));
  write("refused-0d", make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 118,
                               raw_bytes({1.0f})));
  const std::string good = npy_of(seven);
  write("refused-truncated-data", good.substr(0, good.size() - 1));
  write("refused-trailing-bytes", good + "junk");
  std::string version3 = good;
  version3[6] = '\x03';
  write("refused-version-3", version3);
  std::string huge_header = good;
  huge_header[8] = '\xff';
  huge_header[9] = '\xff';
  write("refused-header-length-65535", huge_header);
  std::printf("wrote %d seeds\n", written);
  return 0;
}
