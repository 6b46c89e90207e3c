// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of valid wire messages (every value type and index encoding, dense and
// sparse, empty and boundary cases) into the directory given as the only argument. Run once by
// hand; the output is committed under test/fuzz/corpus/wire_decode.
#include <gradcomp/sparse/wire.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_wire_corpus DIR\n");
    return 2;
  }
  using namespace gradcomp;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  int written = 0;
  auto write = [&](const sparse_message& m, index_encoding enc) {
    const auto bytes = encode(m, enc);
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(written++),
                      std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  };
  for (value_type vt : {value_type::fp32, value_type::fp16, value_type::bf16}) {
    for (std::size_t n : {0u, 1u, 7u, 300u}) {
      sparse_message dense_message;
      dense_message.clear(n);
      dense_message.dense = true;
      dense_message.values_type = vt;
      for (std::size_t i = 0; i < n && n < 10; ++i) {
        dense_message.values.push_back(round_to(vt, normal(rng)));
      }
      if (n < 10) {
        write(dense_message, index_encoding::none);
      }
      for (index_encoding enc : {index_encoding::u32, index_encoding::delta_varint}) {
        sparse_message m;
        m.clear(n);
        m.values_type = vt;
        for (std::size_t i = 0; i < n; i += 1 + i % 5) {
          m.indices.push_back(static_cast<std::uint32_t>(i));
          m.values.push_back(round_to(vt, normal(rng)));
        }
        write(m, enc);
      }
    }
    sparse_message wide; // indices near 2^32 exercise 5-byte varints
    wide.clear(std::uint64_t{1} << 32);
    wide.values_type = vt;
    wide.indices = {0u, 200000u, 0xfffffffeu, 0xffffffffu};
    wide.values = {1.0f, -2.0f, 0.5f, 65504.0f};
    write(wide, index_encoding::delta_varint);
    write(wide, index_encoding::u32);
  }
  // quantized values (value type 4): 1-bit signs, 2-bit ternary, 5-bit QSGD codes, dense and
  // sparse, and an empty message
  for (const std::uint32_t levels : {1u, 15u}) {
    for (const bool with_zero : {false, true}) {
      for (std::size_t n : {0u, 9u, 70u}) {
        sparse_message q;
        q.clear(n);
        q.dense = true;
        q.values_type = value_type::quantized;
        q.quantization_scale = 0.75f;
        q.quantization_levels = levels;
        for (std::size_t i = 0; i < n; ++i) {
          auto j = static_cast<std::int32_t>(rng() % (2 * levels + 1)) -
                   static_cast<std::int32_t>(levels);
          if (!with_zero && j == 0) {
            j = 1;
          }
          q.values.push_back(quantized_value(q.quantization_scale, j, levels));
        }
        write(q, index_encoding::none);
        sparse_message sq = q;
        sq.dense = false;
        sq.clear(2 * n);
        sq.values_type = value_type::quantized;
        sq.quantization_scale = q.quantization_scale;
        sq.quantization_levels = levels;
        for (std::size_t i = 0; i < n; ++i) {
          sq.indices.push_back(static_cast<std::uint32_t>(2 * i + 1));
          sq.values.push_back(q.values[i]);
        }
        write(sq, index_encoding::delta_varint);
        if (n != 0) { // the same values in segments of 4 values, scales 0.75 and 1.5
          sparse_message seg = q;
          for (std::size_t first = 0; first < n; first += 4) {
            const float scale = first % 8 == 0 ? 0.75f : 1.5f;
            seg.quantization_segments.push_back({std::min<std::size_t>(4, n - first), scale});
            for (std::size_t i = first; i < std::min<std::size_t>(first + 4, n); ++i) {
              seg.values[i] = scale == 0.75f ? q.values[i] : 2.0f * q.values[i];
            }
          }
          seg.quantization_scale = 0.0f;
          write(seg, index_encoding::none);
        }
      }
    }
  }
  std::printf("wrote %d seeds\n", written);
  return 0;
}
