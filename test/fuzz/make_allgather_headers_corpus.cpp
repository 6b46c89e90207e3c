// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of the allgather_headers fuzz target into the directory given as the
// only argument: the headers real sparse allgathers gather (sizes of real wire encodings, 1 to 5
// ranks, sparse and dense, empty messages, with and without the dense switch). Run once by hand;
// the output is committed under test/fuzz/corpus/allgather_headers.
#include <gradcomp/sparse/wire.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_allgather_headers_corpus DIR\n");
    return 2;
  }
  using namespace gradcomp;
  int written = 0;
  for (const bool dense_switch : {false, true}) {
    for (int ranks = 1; ranks <= 5; ++ranks) {
      for (const std::size_t n : {0u, 10u, 5000u}) {
        std::vector<std::int64_t> headers;
        for (int r = 0; r < ranks; ++r) {
          sparse_message m;
          m.clear(n);
          const std::size_t k = n == 0 ? 0 : (n / 100 + static_cast<std::size_t>(r)) % (n + 1);
          for (std::size_t i = 0; i < k; ++i) {
            m.indices.push_back(static_cast<std::uint32_t>(i * (n / k))); // ascending, < n
            m.values.push_back(0.5f + static_cast<float>(i));
          }
          if (r == ranks - 1 && n == 10) { // one dense message among sparse ones
            m.clear(n);
            m.dense = true;
            m.values.assign(n, 1.0f);
          }
          const auto enc = m.dense
                               ? index_encoding::none
                               : (r % 2 == 0 ? index_encoding::delta_varint : index_encoding::u32);
          const auto bytes = encode(m, enc);
          headers.push_back(static_cast<std::int64_t>(bytes.size()));
          headers.push_back(static_cast<std::int64_t>(n));
          headers.push_back(static_cast<std::int64_t>(m.nnz()));
        }
        std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(written++),
                          std::ios::binary);
        const char flag = dense_switch ? 1 : 0;
        out.write(&flag, 1);
        for (const std::int64_t v : headers) {
          for (int b = 0; b < 8; ++b) {
            const auto c = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xffu);
            out.write(&c, 1);
          }
        }
      }
    }
  }
  std::printf("wrote %d seeds\n", written);
  return 0;
}
