// SPDX-License-Identifier: Apache-2.0
// gradcomp_bench_cuda_compressors: every CUDA compressor on device memory for n = 2^lo .. 2^hi
// and densities 0.1 / 0.01 / 0.001, against the bandwidth floor measured in the same run (a
// device-to-device copy gives bytes per second; the floor of a call is the bytes it must move:
// 4n read + 8k written for top-k without error feedback; 12n (read gradient and residual, write
// residual) + 8k for the threshold compressors with error feedback). Prints a Markdown table;
// benchmark/cuda/run.sh adds torch.topk on the same GPU (results: docs/cuda.md). A
// second table compares, for many small layers, one single-layer call per layer with one
// batched call (batched_exact_top_k, batched_reused_threshold; both with error feedback and the
// messages' copy to the host).
//
//   gradcomp_bench_cuda_compressors [log2_lo=20] [log2_hi=28] [repeats=20]
#include <gradcomp/cuda/compressors.cuh>
#include <gradcomp/cuda/error.cuh>

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thrust/device_vector.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/random.h>
#include <thrust/transform.h>
#include <vector>

namespace {

using gradcomp::cuda::check;

struct normal_op {
  unsigned seed;
  __host__ __device__ float operator()(unsigned i) const {
    thrust::default_random_engine rng(seed);
    rng.discard(2 * i);
    thrust::normal_distribution<float> d(0.0f, 1.0f);
    return d(rng);
  }
};

// Median-free mean of `repeats` calls after 3 warm-up calls, in seconds (cudaEvents on stream 0).
double seconds_per_call(int repeats, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) {
    call();
  }
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < repeats; ++i) {
    call();
  }
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / repeats;
}

// One step of `layers` single-layer compressors against one batched compressor, both with error
// feedback and the copy of every message to the host; prints one table row.
template <class Single, class Batched, class Options>
void compare_batched(const char* name,
                     const Options& o,
                     const std::vector<std::size_t>& offsets,
                     float* rp,
                     const float* gp,
                     int repeats) {
  const std::size_t layers = offsets.size() - 1;
  const std::size_t n = offsets.back();
  std::vector<std::unique_ptr<Single>> single;
  for (std::size_t l = 0; l < layers; ++l) {
    single.push_back(std::make_unique<Single>(o));
  }
  gradcomp::cuda::device_message m;
  gradcomp::sparse_message host;
  const double per_layer_s = seconds_per_call(repeats, [&] {
    for (std::size_t l = 0; l < layers; ++l) {
      single[l]->compress_accumulate(rp + offsets[l], gp + offsets[l], offsets[l + 1] - offsets[l],
                                     m);
      m.copy_to(host);
    }
  });
  Batched batch(o);
  gradcomp::cuda::batched_device_message bm;
  std::vector<gradcomp::sparse_message> hosts;
  const double batched_s = seconds_per_call(repeats, [&] {
    batch.compress_accumulate(rp, gp, n, offsets, bm);
    bm.copy_to(hosts);
  });
  std::printf("| %zu | %zu | %g | %s | %.3f | %.3f | %.1f |\n", layers, n, o.density, name,
              per_layer_s * 1e3, batched_s * 1e3, per_layer_s / batched_s);
  std::fflush(stdout);
}

// Many small layers (sizes cycling 64 .. 65536 elements, as biases and batch-norm layers):
// exact top-k and the reused threshold (interval 10: the mean over the timed calls mixes exact
// and reuse steps), one single-layer call per layer against one batched call per step.
void many_small_layers(int repeats) {
  std::printf("\n| layers | elements | density | compressor | per-layer calls ms | batched ms | "
              "speed-up |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  const std::size_t cycle[] = {64, 256, 1024, 4096, 16384, 65536};
  for (const std::size_t layers : {16u, 64u, 256u}) {
    std::vector<std::size_t> offsets{0};
    for (std::size_t l = 0; l < layers; ++l) {
      offsets.push_back(offsets.back() + cycle[l % std::size(cycle)]);
    }
    const std::size_t n = offsets.back();
    thrust::device_vector<float> g(n), r(n);
    thrust::transform(thrust::counting_iterator<unsigned>(0),
                      thrust::counting_iterator<unsigned>(static_cast<unsigned>(n)), g.begin(),
                      normal_op{2});
    float* gp = thrust::raw_pointer_cast(g.data());
    float* rp = thrust::raw_pointer_cast(r.data());
    for (const double density : {0.01, 0.001}) {
      compare_batched<gradcomp::cuda::exact_top_k, gradcomp::cuda::batched_exact_top_k>(
          "exact_top_k", gradcomp::exact_top_k_options{.density = density}, offsets, rp, gp,
          repeats);
      compare_batched<gradcomp::cuda::reused_threshold, gradcomp::cuda::batched_reused_threshold>(
          "reused_threshold",
          gradcomp::reused_threshold_options{.density = density, .interval = 10}, offsets, rp, gp,
          repeats);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  const int lo = argc > 1 ? std::atoi(argv[1]) : 20;
  const int hi = argc > 2 ? std::atoi(argv[2]) : 28;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("GPU: %s (sm_%d%d, %zu MiB)\n\n", prop.name, prop.major, prop.minor,
              prop.totalGlobalMem >> 20);
  std::printf("| n | density | compressor | ms | floor ms | x floor | copy GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int e = lo; e <= hi; e += 2) {
    const std::size_t n = std::size_t{1} << e;
    thrust::device_vector<float> g(n), r(n), copy(n);
    thrust::transform(thrust::counting_iterator<unsigned>(0),
                      thrust::counting_iterator<unsigned>(static_cast<unsigned>(n)), g.begin(),
                      normal_op{1});
    float* gp = thrust::raw_pointer_cast(g.data());
    float* rp = thrust::raw_pointer_cast(r.data());
    float* cp = thrust::raw_pointer_cast(copy.data());
    // bytes moved per second by a device-to-device copy (read n x 4 + write n x 4)
    const double copy_s = seconds_per_call(repeats, [&] {
      check(cudaMemcpyAsync(cp, gp, n * 4, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    });
    const double rate = 8.0 * static_cast<double>(n) / copy_s;
    for (const double density : {0.1, 0.01, 0.001}) {
      const auto k = static_cast<double>(gradcomp::k_for_density(n, density));
      gradcomp::cuda::device_message m;
      auto row = [&](const char* name, double bytes, const std::function<void()>& call) {
        const double s = seconds_per_call(repeats, call);
        const double floor_s = bytes / rate;
        std::printf("| 2^%d | %g | %s | %.3f | %.3f | %.2f | %.0f |\n", e, density, name, s * 1e3,
                    floor_s * 1e3, s / floor_s, rate * 1e-9);
        std::fflush(stdout);
      };
      const double plain = 4.0 * n + 8.0 * k;
      const double feedback = 12.0 * n + 8.0 * k;
      gradcomp::cuda::exact_top_k exact(density);
      row("exact_top_k", plain, [&] { exact.compress(gp, n, m); });
      gradcomp::cuda::exact_top_k exact_ef(density);
      row("exact_top_k + EF", feedback, [&] { exact_ef.compress_accumulate(rp, gp, n, m); });
      gradcomp::cuda::sampled_threshold sampled(density);
      row("sampled_threshold + EF", feedback, [&] { sampled.compress_accumulate(rp, gp, n, m); });
      gradcomp::cuda::gaussian_threshold gaussian(density);
      row("gaussian_threshold + EF", feedback, [&] { gaussian.compress_accumulate(rp, gp, n, m); });
      gradcomp::cuda::lognormal_threshold lognormal(density);
      row("lognormal_threshold + EF", feedback,
          [&] { lognormal.compress_accumulate(rp, gp, n, m); });
      gradcomp::cuda::reused_threshold reused({.density = density, .interval = 10});
      row("reused_threshold + EF", feedback, [&] { reused.compress_accumulate(rp, gp, n, m); });
    }
  }
  many_small_layers(repeats);
  return 0;
}
