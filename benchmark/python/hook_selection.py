#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The selection inside gradcomp.torch's sparse_allgather_hook against torch.topk, per bucket.

    PYTHONPATH=<build>/python /usr/bin/python3 benchmark/python/hook_selection.py \\
        [--repeats N] [--threads 1,2] [--density D] [--json FILE]

For buckets of DDP's sizes (1 MiB: DDP's first bucket, 6.65 MB: the ddp-baseline CNN, 25 MiB:
DDP's default bucket cap), filled with normal random float32 values (fixed seed), it times

  gradcomp   gradcomp._core.Compressor(method, density, threads=T).compress(residual, grad):
             what the hook runs per bucket: acc = residual + grad, the method's selection, the
             residual update and the encoding into gradcomp's wire format (the residual, zeros,
             is refreshed outside the timed call)
  torch      torch.topk(acc.abs(), k, sorted=False) and the gather acc[indices], acc = the
             bucket (selection only: no error feedback, no encoding), torch.set_num_threads(T)

for every sparse method, with the same k = density x n and the same thread count T, the calls
taking turns (torch, then each method, --repeats rounds after 3 warm-up rounds), and prints the
median and mean of each one's calls and the ratios torch / gradcomp.
reused_threshold selects exactly once every --interval calls and reuses the threshold in
between: its median is a reusing call, its mean includes the exact ones.
"""
import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np
import torch

try:
    from gradcomp import _core
except ImportError as e:
    sys.exit(f"hook_selection: cannot import gradcomp._core ({e}): build the gradcomp_python "
             "target and put <build>/python on PYTHONPATH")

BUCKETS = [("1 MiB", 262_144), ("6.65 MB", 1_663_370), ("25 MiB", 6_553_600)]


def timed(calls, repeats, before):
    """Seconds of `repeats` calls of each of `calls` (a dict), after 3 warm-up rounds; the calls
    take turns, so a change in the machine's load reaches all of them alike. `before(name)` runs
    untimed before each call."""
    out = {name: [] for name in calls}
    for i in range(3 + repeats):
        for name, call in calls.items():
            before(name)
            t0 = time.perf_counter()
            call()
            if i >= 3:
                out[name].append(time.perf_counter() - t0)
    return out


def measure(n, threads, a):
    grad = np.random.default_rng(a.seed).standard_normal(n, dtype=np.float32)
    residual = np.zeros(n, dtype=np.float32)
    acc = torch.from_numpy(grad)
    k = max(1, round(a.density * n))
    torch.set_num_threads(threads)
    stats = {}

    def torch_select():
        idx = torch.topk(acc.abs(), k, sorted=False).indices
        return acc[idx]

    def compress_call(method):
        c = _core.Compressor(method, a.density, a.interval, 1, threads)

        def call():
            stats[method] = c.compress(residual, grad)[1]
        return call

    calls = {"torch": torch_select}
    calls.update({m: compress_call(m) for m in _core.sparse_methods})
    secs = timed(calls, a.repeats, lambda name: residual.fill(0.0))
    ref = secs.pop("torch")
    rows = []
    for method, t in secs.items():
        r = {"numel": n, "threads": threads, "method": method, "k_target": k,
             "k_selected_last": stats[method]["k_selected"],
             "gradcomp_median_ms": 1e3 * statistics.median(t),
             "gradcomp_mean_ms": 1e3 * statistics.fmean(t),
             "torch_topk_median_ms": 1e3 * statistics.median(ref),
             "torch_topk_mean_ms": 1e3 * statistics.fmean(ref)}
        r["speedup_median"] = r["torch_topk_median_ms"] / r["gradcomp_median_ms"]
        r["speedup_mean"] = r["torch_topk_mean_ms"] / r["gradcomp_mean_ms"]
        rows.append(r)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--interval", type=int, default=10, help="reused_threshold's interval")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="", help="also write the rows to this file")
    a = ap.parse_args()
    if a.repeats < 1 or not 0 < a.density <= 1:
        ap.error("--repeats must be >= 1 and --density in (0, 1]")
    rows = []
    for threads in (int(t) for t in a.threads.split(",")):
        for name, n in BUCKETS:
            for r in measure(n, threads, a):
                rows.append(dict(r, bucket=name))
    print(f"Selection per bucket at density {a.density:g}: median (mean) of {a.repeats} calls, "
          f"ms; torch = torch.topk(acc.abs(), k, sorted=False) + gather\n")
    print("| bucket | threads | method | gradcomp compress ms | torch.topk ms | "
          "torch.topk / gradcomp |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bucket']} ({r['numel']:,} floats) | {r['threads']} | {r['method']} | "
              f"{r['gradcomp_median_ms']:.3f} ({r['gradcomp_mean_ms']:.3f}) | "
              f"{r['torch_topk_median_ms']:.3f} ({r['torch_topk_mean_ms']:.3f}) | "
              f"{r['speedup_median']:.1f}x ({r['speedup_mean']:.1f}x) |")
    if a.json:
        meta = {"density": a.density, "interval": a.interval, "repeats": a.repeats,
                "seed": a.seed, "torch_version": torch.__version__, "numpy_version": np.__version__,
                "gradcomp_version": _core.version, "machine": platform.processor() or
                platform.machine(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with open(a.json, "w") as f:
            json.dump({"config": meta, "rows": rows}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
