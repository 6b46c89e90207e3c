// SPDX-License-Identifier: Apache-2.0
// gradcomp::dense (compressor/dense.hpp): every value in order as a dense message, fp32 bit for
// bit, fp16 and bf16 rounded to the nearest representable value (hand-worked values, ties to
// even, fp16's saturation at 65504); with error feedback the rounding error and the saturation
// excess stay in the residual exactly; the wire bytes are 32 + 4n or 32 + 2n.
#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <bit>
#include <cstddef>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace compressor_dense_test {

using namespace gradcomp;

TEST_CASE("dense: fp32 sends every value in order, bit for bit", "[compressor][dense]") {
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 1001, 4);
  dense c;
  CHECK(c.values_type() == value_type::fp32);
  CHECK(c.target_k(1001) == 1001);
  sparse_message m;
  const selection_stats s = c.compress(x, m);
  CHECK(m.dense);
  CHECK(m.indices.empty());
  CHECK(m.dense_length_elements == 1001);
  CHECK(m.values_type == value_type::fp32);
  CHECK(test::same_bits(m.values, x));
  CHECK(s.numel == 1001);
  CHECK(s.k_target == 1001);
  CHECK(s.k_selected == 1001);
  CHECK(s.threshold == 0.0f);
  CHECK_FALSE(s.exact);
  CHECK(encoded_size_bytes(m) == 32 + 4 * 1001);
  // the thread count changes nothing
  sparse_message threaded;
  dense({.threads = 3}).compress(x, threaded);
  CHECK(test::same_bits(threaded.values, m.values));
  // an empty gradient: an empty dense message
  c.compress(std::vector<float>{}, m);
  CHECK(m.nnz() == 0);
  CHECK(m.dense_length_elements == 0);
}

TEST_CASE("dense: fp16 and bf16 round to the nearest value, worked by hand",
          "[compressor][dense]") {
  const std::vector<float> x{1.0f,        0.1f,        -2.5f, 70000.0f, -1e6f,
                             1.00390625f, 1.01171875f, 1e-8f, 65504.0f};
  sparse_message m;
  dense(value_type::fp16).compress(x, m);
  CHECK(m.values_type == value_type::fp16);
  // 0.1 -> 0x2E66 = 1638 x 2^-14; 1 + 2^-8 and 1 + 3 x 2^-8 are representable in fp16 (10
  // significand bits); 1e-8 is below half the smallest subnormal 2^-24; beyond 65504 saturates
  CHECK(m.values == std::vector<float>{1.0f, 0.0999755859375f, -2.5f, 65504.0f, -65504.0f,
                                       1.00390625f, 1.01171875f, 0.0f, 65504.0f});
  CHECK(encoded_size_bytes(m) == 32 + 2 * x.size());

  dense(value_type::bf16).compress(x, m);
  CHECK(m.values_type == value_type::bf16);
  // bf16 keeps 7 significand bits: 0.1 -> 0x3DCD = 0.10009765625; 1 + 2^-8 is half way between
  // 1 and 1 + 2^-7 (ties to even: 1); 1 + 3 x 2^-8 half way between 1 + 2^-7 and 1 + 2^-6 (ties
  // to even: 1 + 2^-6); 70000 -> 70144 (0x4789); fp32's exponent range: no saturation, and
  // 1e-8 (0x322BCC77) rounds up to 0x322C; 65504 (0x477FE000) up to 0x4780 = 65536
  CHECK(m.values == std::vector<float>{1.0f, 0.10009765625f, -2.5f, 70144.0f, -999424.0f, 1.0f,
                                       1.015625f, std::bit_cast<float>(0x322C0000u), 65536.0f});
  CHECK(encoded_size_bytes(m) == 32 + 2 * x.size());
}

TEST_CASE("dense: with error feedback the rounding error and the saturation excess stay",
          "[compressor][dense]") {
  const std::vector<float> g{0.1f, 70000.0f, -3.0f};
  error_feedback<dense> ef(3, dense(value_type::fp16));
  sparse_message m;
  ef.compress(g, m);
  CHECK(m.values == std::vector<float>{0.0999755859375f, 65504.0f, -3.0f});
  // residual = acc - sent, exactly (each difference is representable)
  CHECK(ef.residual()[0] == 0.1f - 0.0999755859375f);
  CHECK(ef.residual()[1] == 4496.0f);
  CHECK(ef.residual()[2] == 0.0f);
  // the next call sends what was kept: 0 + 4496 -> 4496 exactly in fp16
  ef.compress(std::vector<float>{0.0f, 0.0f, 0.0f}, m);
  CHECK(m.values[1] == 4496.0f);
  CHECK(ef.residual()[1] == 0.0f);
  // sent + new residual == old residual + grad, bit for bit, on many values
  error_feedback<dense> big(2000, dense(value_type::bf16));
  for (int t = 0; t < 3; ++t) {
    const std::vector<float> grad = test::make_values(test::distribution::normal, 2000, 10 + t);
    const std::vector<float> before(big.residual().begin(), big.residual().end());
    big.compress(grad, m);
    for (std::size_t i = 0; i < grad.size(); ++i) {
      REQUIRE(m.values[i] + big.residual()[i] == before[i] + grad[i]);
    }
  }
}

} // namespace compressor_dense_test
