// SPDX-License-Identifier: Apache-2.0
// The umbrella header <gradcomp/gradcomp.hpp> alone gives the core it promises: tensors, a
// compressor with error feedback, the sparse message and its wire format, the compressors by
// name, the checkpoint state and the version, used together on a small gradient worked by hand.
// Each header's own test is in the folder of the same name.
#include <gradcomp/gradcomp.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/catch.hpp"

namespace gradcomp_test {

TEST_CASE("gradcomp.hpp: compress, send and resume with the umbrella header alone",
          "[gradcomp][umbrella]") {
  using namespace gradcomp;
  const std::vector<float> g{0.5f, -4.0f, 1.0f, 3.0f, -0.25f, 2.0f, 0.0f, -1.5f};
  // exact top-k at density 0.25: k = 2, the magnitudes 4 and 3
  error_feedback<exact_top_k> ef(g.size(), exact_top_k({.density = 0.25}));
  sparse_message m;
  const selection_stats s = ef.compress(host_view<const float>(g.data(), g.size()), m);
  CHECK(s.k_selected == 2);
  CHECK(m.indices == std::vector<std::uint32_t>{1, 3});
  CHECK(m.values == std::vector<float>{-4.0f, 3.0f});
  CHECK(ef.residual()[1] == 0.0f);
  CHECK(ef.residual()[5] == 2.0f);
  // the wire: 32 header bytes and 8 per pair (u32 indices), decoded back as sent
  const std::vector<std::byte> wire = encode(m, index_encoding::u32);
  CHECK(wire.size() == 32 + 2 * 8);
  const sparse_message back = decode(wire);
  CHECK(back.indices == m.indices);
  CHECK(back.values == m.values);
  std::vector<float> dense_out(g.size());
  decompress(back, dense_out);
  CHECK(dense_out == std::vector<float>{0, -4.0f, 0, 3.0f, 0, 0, 0, 0});
  // a checkpoint of the residual, resumed into a fresh object: the next call sends 2 and -1.5
  error_feedback<exact_top_k> resumed(g.size(), exact_top_k({.density = 0.25}));
  load_state(resumed, save_state(ef));
  resumed.compress(std::vector<float>(g.size(), 0.0f), m);
  CHECK(m.indices == std::vector<std::uint32_t>{5, 7});
  CHECK_THROWS_AS(load_state(resumed, std::vector<std::byte>(3)), state_error);
  // by name, and the version
  CHECK(is_sparse_compressor_name("random_k"));
  CHECK(with_quantizer("signsgd", {}, [&](auto c) {
          c.compress(g, m);
          return m.quantization_levels;
        }) == 1u);
  CHECK(std::string(version_string) == GRADCOMP_VERSION_STRING);
  CHECK(k_for_density(1000, 0.01) == 10);
}

} // namespace gradcomp_test
