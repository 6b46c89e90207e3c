#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots benchmark/run_sparse_bytes.sh's JSON: bytes sent per rank per exchange against the rank
count, counted (markers, mean over ranks; gTop-k's busiest rank) and the cost models extended to
1024 ranks (lines, from the run with the most ranks), log-log.

    scripts/plot-sparse-bytes.py OUT.svg RUN.json [RUN.json ...]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [("allgather", "sparse allgather", "C0"), ("gtopk", "gTop-k (busiest rank)", "C1"),
          ("oktopk", "Ok-Topk", "C2"), ("ring", "dense ring", "C7")]


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    runs = sorted((json.load(open(path)) for path in argv[2:]), key=lambda r: r["ranks"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    model = runs[-1]["model"]
    for key, label, color in SERIES:
        ax.plot([m["ranks"] for m in model], [m[key] for m in model], color=color,
                linestyle="--" if key != "ring" else ":", linewidth=1)
        if key == "ring":
            counted = [r["ring_bytes"] for r in runs]
        elif key == "gtopk":
            counted = [r[key]["max_bytes"] for r in runs]
        else:
            counted = [r[key]["mean_bytes"] for r in runs]
        ax.plot([r["ranks"] for r in runs], counted, "o", color=color, label=label, markersize=4)
    last = runs[-1]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks P")
    ax.set_ylabel("bytes sent per rank per exchange")
    ax.set_title(f"n = {last['elements']:,}, density {last['density']}: counted (points), "
                 "models (lines)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(argv[1])


if __name__ == "__main__":
    main(sys.argv)
