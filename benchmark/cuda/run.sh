#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a machine with an NVIDIA GPU: builds the CUDA component (sm_90 unless
# CMAKE_CUDA_ARCHITECTURES says otherwise), runs the GPU tests, then gradcomp's CUDA compressors
# and torch.topk on the same GPU one after the other, and prints both tables (Markdown) for
# docs/cuda.md.
#
#   benchmark/cuda/run.sh [log2_lo=20] [log2_hi=28] [repeats=20]
#
# Where the GPU machine lacks the build's dependencies (Catch2), build here with
# `cmake --preset cuda && cmake --build build-cuda --target gradcomp_cuda_device_tests
# gradcomp_bench_cuda_compressors`, copy both programs (and libcudart.so.13) into one folder, and
# run there `GRADCOMP_CUDA_BIN=folder benchmark/cuda/run.sh`: no build, the same steps, plus
# compute-sanitizer's memcheck over the GPU tests when compute-sanitizer is on the PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -n "${GRADCOMP_CUDA_BIN:-}" ]]; then
  tests="$GRADCOMP_CUDA_BIN/gradcomp_cuda_device_tests"
  bench="$GRADCOMP_CUDA_BIN/gradcomp_bench_cuda_compressors"
  export LD_LIBRARY_PATH="$GRADCOMP_CUDA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  arch="${CMAKE_CUDA_ARCHITECTURES:-90}"
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADCOMP_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGRADCOMP_BUILD_EXAMPLES=OFF -DGRADCOMP_BUILD_APPS=OFF > /dev/null
  cmake --build build-cuda -j "$(nproc)" --target gradcomp_cuda_device_tests \
    gradcomp_bench_cuda_compressors
  tests=build-cuda/test/gradcomp_cuda_device_tests
  bench=build-cuda/benchmark/gradcomp_bench_cuda_compressors
fi
echo "== GPU tests"
"$tests"
if [[ -n "${GRADCOMP_CUDA_BIN:-}" ]] && command -v compute-sanitizer > /dev/null; then
  echo "== GPU tests under compute-sanitizer (memcheck)"
  compute-sanitizer --tool memcheck "$tests" | tail -3
fi
echo "== gradcomp CUDA compressors"
"$bench" "$@"
echo
echo "== torch.topk"
if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  python3 benchmark/cuda/torch_topk.py "$@"
else
  echo "(PyTorch with CUDA not available here: torch.topk not measured)"
fi
