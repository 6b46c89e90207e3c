// SPDX-License-Identifier: Apache-2.0
// gradcomp's CUDA compressors (docs/cuda.md) on device memory, each checked bit for bit against
// the host compressor with error feedback on the same gradients, over three calls:
//  1. exact top-k of one layer of 2^20 elements, its message copied to the host and encoded;
//  2. the batched exact top-k: 40 layers of 1-3000 elements packed in one buffer, one call;
//  3. the batched reused threshold (S1's threshold reuse) on the same layers.
// Without a CUDA device it says so and exits 77 (ctest: skipped). Exits 1 on a mismatch.
// Needs gradcomp::cuda (nvcc). Run: build-cuda/examples/12_cuda_compressors/...
#include <gradcomp/cuda/compressors.cuh> // nvcc
#include <gradcomp/gradcomp.hpp>         // the host compressors, the wire format

#include <cstdint>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

void check(cudaError_t status) {
  if (status != cudaSuccess) {
    throw std::runtime_error(cudaGetErrorString(status));
  }
}

//! n floats in device memory, zeroed.
struct device_floats {
  explicit device_floats(std::size_t elements) : n(elements) {
    check(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)));
    check(cudaMemset(data, 0, n * sizeof(float)));
  }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  ~device_floats() { cudaFree(data); }
  void upload(const std::vector<float>& host) {
    check(cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  float* data = nullptr;
  std::size_t n;
};

std::vector<float> random_gradient(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& v : g) {
    v = normal(rng);
  }
  return g;
}

bool same(const gradcomp::sparse_message& a, const gradcomp::sparse_message& b) {
  return a.indices == b.indices && a.values == b.values;
}

//! 1. One layer: compress_accumulate on the device, the message to the host, encoded.
bool one_layer(cudaStream_t stream) {
  const std::size_t n = std::size_t{1} << 20;
  std::mt19937 rng(1);
  device_floats residual_buffer(n), grad_buffer(n);
  gradcomp::error_feedback<gradcomp::exact_top_k> host_layer(n, gradcomp::exact_top_k(0.01));
  bool ok = true;
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> gradient = random_gradient(n, rng);
    grad_buffer.upload(gradient);
    float* residual = residual_buffer.data;
    const float* grad = grad_buffer.data;
    gradcomp::cuda::exact_top_k topk(0.01); // or sampled_threshold, gaussian_threshold,
    gradcomp::cuda::device_message msg;     //    lognormal_threshold, reused_threshold
    // residual, grad: float* in device memory, n elements; stream: the caller's cudaStream_t
    gradcomp::selection_stats s = topk.compress_accumulate(residual, grad, n, msg, stream);
    gradcomp::sparse_message host;
    msg.copy_to(host, stream);          // 8 x nnz bytes to the host
    auto wire = gradcomp::encode(host); // the same wire format as the host compressors

    gradcomp::sparse_message expected;
    host_layer.compress(gradient, expected);
    ok = ok && same(host, expected) && s.k_selected == host.indices.size() &&
         gradcomp::encode(expected) == wire;
  }
  return ok;
}

//! The layout of 2 and 3: 40 layers of 1-3000 elements, packed (offsets[0] = 0).
std::vector<std::size_t> layer_offsets() {
  std::vector<std::size_t> offsets = {0};
  for (std::size_t l = 0; l < 40; ++l) {
    offsets.push_back(offsets.back() + 1 + (l * 977) % 3000);
  }
  return offsets;
}

//! 2. and 3.: `call(residual, grad, n, offsets)`, a batched compressor's call on device memory
//! that returns the layers' messages, against one host error feedback per layer, three calls.
template <class Call, class HostCompressor>
bool batched(Call call, const HostCompressor& host_prototype) {
  const std::vector<std::size_t> offsets = layer_offsets();
  const std::size_t n = offsets.back();
  std::mt19937 rng(2);
  device_floats residual_buffer(n), grad_buffer(n);
  std::vector<gradcomp::error_feedback<HostCompressor>> host_layers;
  for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
    host_layers.emplace_back(offsets[l + 1] - offsets[l], host_prototype);
  }
  bool ok = true;
  for (int c = 0; c < 3; ++c) {
    const std::vector<float> gradient = random_gradient(n, rng);
    grad_buffer.upload(gradient);
    const std::vector<gradcomp::sparse_message> layers =
        call(residual_buffer.data, grad_buffer.data, n, std::span<const std::size_t>(offsets));
    for (std::size_t l = 0; l < host_layers.size(); ++l) {
      gradcomp::sparse_message expected;
      const std::vector<float> layer(gradient.begin() + static_cast<std::ptrdiff_t>(offsets[l]),
                                     gradient.begin() +
                                         static_cast<std::ptrdiff_t>(offsets[l + 1]));
      host_layers[l].compress(layer, expected);
      ok = ok && same(layers[l], expected);
    }
  }
  return ok;
}

bool batched_exact_top_k(cudaStream_t stream) {
  // residual, grad: float* in device memory, n elements, the layers packed as in a DDP bucket;
  // offsets: L + 1 host offsets (offsets[0] = 0, non-decreasing, offsets[L] <= n)
  gradcomp::cuda::batched_exact_top_k topk(0.01); // exact_top_k_options as well
  gradcomp::cuda::batched_device_message msg;
  const auto call = [&](float* residual, const float* grad, std::size_t n,
                        std::span<const std::size_t> offsets) {
    // also compress() and compress_accumulate_momentum(), as the single-layer compressors
    topk.compress_accumulate(residual, grad, n, offsets, msg, stream);
    std::vector<gradcomp::sparse_message> layers; // one per layer, layer-local indices
    std::vector<gradcomp::selection_stats> stats; // optional
    msg.copy_to(layers, stats, stream);           // one transfer, 8K + 4L bytes
    return layers;
  };
  return batched(call, gradcomp::exact_top_k(0.01));
}

bool batched_reused_threshold(cudaStream_t stream) {
  const gradcomp::reused_threshold_options o{.density = 0.01, .interval = 10, .guard_factor = 2};
  gradcomp::cuda::batched_reused_threshold rt(o);
  gradcomp::cuda::batched_device_message msg;
  const auto call = [&](float* residual, const float* grad, std::size_t n,
                        std::span<const std::size_t> offsets) {
    rt.compress_accumulate(residual, grad, n, offsets, msg, stream); // or compress(), *_momentum()
    std::vector<gradcomp::sparse_message> layers;
    std::vector<gradcomp::selection_stats> stats;
    msg.copy_to(layers, stats, stream); // stats[l].exact / .fallback / .threshold per layer
    return layers;
  };
  bool ok = batched(call, gradcomp::reused_threshold(o));
  for (std::size_t l = 0; l + 1 < layer_offsets().size(); ++l) {
    const std::uint64_t calls = rt.calls(l); // calls that counted for layer l's interval
    ok = ok && calls == 3;
  }
  return ok;
}

} // namespace

int main() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipped\n", cudaGetErrorString(status));
    return 77;
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream));
  bool ok = true;
  const auto report = [&](const char* what, bool passed) {
    std::printf("%s: %s\n", passed ? "ok" : "FAILED", what);
    ok = ok && passed;
  };
  report("exact_top_k, one layer of 2^20 elements, equals the host's", one_layer(stream));
  report("batched_exact_top_k, 40 layers, equals the host's per layer",
         batched_exact_top_k(stream));
  report("batched_reused_threshold, 40 layers, equals the host's per layer",
         batched_reused_threshold(stream));
  check(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
}
