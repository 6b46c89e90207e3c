#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots benchmark/run_hybrid_fc.sh's JSON (S2 Figs. 14-16): per layer, communication time per
iteration against the local batch, data parallel (ring allreduce) and model parallel (both
exchanges), measured (solid) and predicted (dashed), one panel per layer.

    scripts/plot-hybrid-fc.py OUT.svg RUN.json [RUN.json ...]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    runs = [json.load(open(path)) for path in argv[2:]]
    layers = []
    for run in runs:
        for row in run["rows"]:
            if row["layer"] not in layers:
                layers.append(row["layer"])
    fig, axes = plt.subplots(len(runs), len(layers), figsize=(3.2 * len(layers), 3.0 * len(runs)),
                             squeeze=False)
    for i, run in enumerate(runs):
        for j, layer in enumerate(layers):
            ax = axes[i][j]
            rows = [r for r in run["rows"] if r["layer"] == layer]
            if not rows:
                ax.set_visible(False)
                continue
            m = [r["batch"] for r in rows]
            for key, label, color in (("dp", "data parallel (ring)", "tab:blue"),
                                      ("a2a", "model parallel (all-to-all)", "tab:orange"),
                                      ("s2", "model parallel (S2 allgather)", "tab:green")):
                ax.plot(m, [1e3 * r[f"{key}_seconds"] for r in rows], "-o", ms=3, color=color,
                        label=label)
                ax.plot(m, [1e3 * r[f"{key}_predicted"] for r in rows], "--", color=color,
                        alpha=0.6)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{layer} ({rows[0]['k']}->{rows[0]['n']}), P = {run['ranks']}",
                         fontsize=9)
            ax.set_xlabel("local batch M")
            if j == 0:
                ax.set_ylabel("ms per iteration")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Communication per FC layer, measured (solid) and alpha-beta (dashed)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[1])


if __name__ == "__main__":
    main(sys.argv)
