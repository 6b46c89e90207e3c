#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a machine with an NVIDIA GPU: builds the CUDA component (sm_90 unless
# CMAKE_CUDA_ARCHITECTURES says otherwise), runs the GPU tests, then gradcomp's CUDA compressors
# and torch.topk on the same GPU one after the other, and prints both tables (Markdown) for
# docs/cuda.md.
#
#   benchmark/cuda/run.sh [log2_lo=20] [log2_hi=28] [repeats=20]
set -euo pipefail
cd "$(dirname "$0")/../.."
arch="${CMAKE_CUDA_ARCHITECTURES:-90}"
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADCOMP_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGRADCOMP_BUILD_EXAMPLES=OFF > /dev/null
cmake --build build-cuda -j "$(nproc)" --target gradcomp_cuda_device_tests \
  gradcomp_bench_cuda_compressors
echo "== GPU tests"
build-cuda/test/gradcomp_cuda_device_tests
echo "== gradcomp CUDA compressors"
build-cuda/benchmark/gradcomp_bench_cuda_compressors "$@"
echo
echo "== torch.topk"
if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  python3 benchmark/cuda/torch_topk.py "$@"
else
  echo "(PyTorch with CUDA not available here: torch.topk not measured)"
fi
