// SPDX-License-Identifier: Apache-2.0
// A consumer of the installed package: compress a gradient with error feedback, ship it
// through the wire format, and check what arrives.
#include <gradcomp/gradcomp.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<float> grad(1000);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    grad[i] = static_cast<float>(i % 7) - 3.0f + static_cast<float>(i) * 1e-3f;
  }
  gradcomp::error_feedback<gradcomp::exact_top_k> layer(grad.size(), gradcomp::exact_top_k(0.01));
  gradcomp::sparse_message message;
  const gradcomp::selection_stats stats = layer.compress(grad, message);
  const auto bytes = gradcomp::encode(message, gradcomp::index_encoding::delta_varint);
  const gradcomp::sparse_message received = gradcomp::decode(bytes);
  if (stats.k_selected != 10 || received.indices != message.indices) {
    std::puts("consumer: FAILED");
    return 1;
  }
  std::printf("consumer: ok (gradcomp %s, %zu of %zu sent in %zu bytes)\n",
              gradcomp::version_string, stats.k_selected, grad.size(), bytes.size());
  return 0;
}
