// SPDX-License-Identifier: Apache-2.0
// The smallest use of gradcomp: sparsify one layer's gradient with error feedback, put it on
// the wire, decode it on the "receiver" and apply it. Needs only gradcomp::core.
#include <gradcomp/gradcomp.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr std::size_t n = 1 << 20; // one layer of 1 Mi parameters
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> grad(n);

  // One error-feedback state per layer; the compressor is a policy chosen at compile time.
  gradcomp::error_feedback<gradcomp::reused_threshold> layer(
      n, gradcomp::reused_threshold({.density = 0.01, .interval = 10}));
  gradcomp::sparse_message message;
  std::vector<std::byte> wire;
  std::vector<float> applied(n);

  for (int iteration = 0; iteration < 5; ++iteration) {
    for (float& g : grad) {
      g = normal(rng);
    }
    const gradcomp::selection_stats stats = layer.compress(grad, message);
    gradcomp::encode(message, gradcomp::index_encoding::delta_varint, wire);
    const gradcomp::sparse_message received = gradcomp::decode(wire);
    gradcomp::decompress(received, applied);
    std::printf("iteration %d: sent %zu of %zu (target %zu), threshold %.4f, %s, %zu bytes "
                "(dense: %zu)\n",
                iteration, stats.k_selected, stats.numel, stats.k_target, stats.threshold,
                stats.fallback ? "guard fallback" : (stats.exact ? "exact" : "reused"), wire.size(),
                n * sizeof(float));
  }
  return 0;
}
