#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.topk(x.abs(), k) on the GPU for the sizes and densities of
gradcomp_bench_cuda_compressors, timed the same way (3 warm-up calls, CUDA events over
`repeats` calls); prints the same Markdown rows (no floor columns).

    python3 benchmark/cuda/torch_topk.py [log2_lo=20] [log2_hi=28] [repeats=20]
"""
import math
import sys

import torch


def main() -> None:
    lo = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    hi = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}\n")
    print("| n | density | torch.topk ms |")
    print("|---|---|---|")
    gen = torch.Generator(device="cuda").manual_seed(1)
    for e in range(lo, hi + 1, 2):
        n = 1 << e
        x = torch.randn(n, device="cuda", generator=gen)
        for density in (0.1, 0.01, 0.001):
            k = max(1, min(n, math.ceil(density * n)))
            for _ in range(3):
                torch.topk(x.abs(), k, sorted=False)
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeats):
                torch.topk(x.abs(), k, sorted=False)
            stop.record()
            stop.synchronize()
            print(f"| 2^{e} | {density:g} | {start.elapsed_time(stop) / repeats:.3f} |", flush=True)


if __name__ == "__main__":
    main()
