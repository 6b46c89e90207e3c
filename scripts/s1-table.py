#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""S1's Tables 1-2 and Figs 11-13 from gradcomp-train reports of one invocation
(scripts/reproduce.sh s1).

    /usr/bin/python3 scripts/s1-table.py --out DIR [--since UNIX_SECONDS] [--title T] REPORT.json...

Each report is classified from its config: dense (method dense), global top-k (exact_topk, one
merge group: one selection over the whole model, S1's "Top-K"), LAGS (exact_topk, per-layer
messages: Shi et al. 2020), DLGS (reused_threshold, S1's greedy merge, Algorithm 2) and DLGS with
the optimal merge (gradcomp's exact planner). Writes DIR/s1.md (one table per transport: final
test accuracy and its difference to dense over the same transport, time per iteration split as
S1 splits it into computation, sparsification and non-overlapped communication, bytes sent, and
the speedup of the iteration over dense on the same transport and over the best dense run) and
DIR/s1-breakdown.svg (S1's Figs 11-13: stacked bars of that split). matplotlib (Debian's
python3-matplotlib) draws the plot; without it only the table is written.
"""
import argparse
import json
import os
import sys

METHODS = ["dense", "global top-k", "LAGS", "DLGS", "DLGS optimal merge"]


def method_of(r):
    c = r["config"]
    if c["method"] == "dense":
        return "dense"
    if c["method"] == "exact_topk":
        return "global top-k" if c["merge"] == "single" else "LAGS"
    if c["method"] == "reused_threshold":
        return "DLGS" if c["merge"] == "dlgs_greedy" else "DLGS optimal merge"
    return None


def ms(r, key):
    return r["per_iteration"].get(key, {}).get("mean_over_ranks", 0.0)


def split(r):
    """(compute, sparsification, non-overlapped communication, rest) ms per iteration."""
    it = ms(r, "iteration_ms")
    compute = ms(r, "forward_ms") + ms(r, "backward_ms")
    sparsify = ms(r, "compression_ms")
    comm = ms(r, "exchange_wait_ms")
    return compute, sparsify, comm, max(0.0, it - compute - sparsify - comm)


def transport_name(t):
    return {"ps": "parameter server (one server)", "allgather": "sparse allgather",
            "ring": "ring allreduce"}.get(t, t)


def tables(reports):
    dense_runs = [r for r in reports if method_of(r) == "dense"]
    best_dense = min(dense_runs, key=lambda r: ms(r, "iteration_ms")) if dense_runs else None
    text = ""
    for transport in ["ps", "allgather"]:
        rows = [r for r in reports if r["config"]["transport"] == transport and method_of(r)]
        dense_here = next((r for r in rows if method_of(r) == "dense"), None)
        if not rows:
            continue
        base = dense_here or best_dense
        text += f"\n#### Over the {transport_name(transport)}\n\n"
        text += ("| method | density | test accuracy | vs dense | ms per iteration | computation | "
                 "sparsification | communication not overlapped | other (step, averaging) | "
                 "bytes sent per rank | speedup over dense" +
                 (f" ({base['config']['transport']})" if base else "") +
                 " | speedup over the best dense |\n")
        text += "|---" * 12 + "|\n"
        rows.sort(key=lambda r: (-r["config"].get("density", 1.0) if method_of(r) != "dense" else -2,
                                 METHODS.index(method_of(r))))
        if dense_here is None and best_dense is not None:
            rows.insert(0, best_dense)
        for r in rows:
            m = method_of(r)
            c, s, w, o = split(r)
            it = ms(r, "iteration_ms")
            acc = r["final_test_accuracy"]
            density = "1" if m == "dense" else f"{r['config']['density']:g}"
            vs = "-" if base is None or r is base else f"{100 * (acc - base['final_test_accuracy']):+.2f}"
            speed = "-" if base is None or r is base else f"{ms(base, 'iteration_ms') / it:.2f}x"
            best = "-" if best_dense is None or r is best_dense else f"{ms(best_dense, 'iteration_ms') / it:.2f}x"
            label = m if r["config"]["transport"] == transport else f"{m} ({r['config']['transport']})"
            sent = r["per_iteration"].get("bytes_sent", {}).get("mean_over_ranks", 0.0) / 1e6
            text += (f"| {label} | {density} | {100 * acc:.2f} % | {vs} | {it:.1f} | {c:.1f} | {s:.2f} | "
                     f"{w:.2f} | {o:.2f} | {sent:.3f} MB | {speed} | {best} |\n")
    return text


def plot(reports, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("s1-table: matplotlib missing (apt-get install python3-matplotlib): no plot",
              file=sys.stderr)
        return False
    groups = []
    for transport in ["ps", "allgather"]:
        for density in [0.1, 0.01]:
            rows = [r for r in reports if r["config"]["transport"] == transport and method_of(r)
                    and method_of(r) != "dense" and abs(r["config"]["density"] - density) < 1e-12]
            rows.sort(key=lambda r: METHODS.index(method_of(r)))
            if rows:
                groups.append((f"{transport}, d = {density:g}", rows))
    dense = [r for r in reports if method_of(r) == "dense"]
    if dense:
        groups.insert(0, ("dense", dense))
    labels, parts = [], [[], [], [], []]
    for name, rows in groups:
        for r in rows:
            m = method_of(r)
            labels.append(f"{m}\n{name}" if m != "dense" else f"dense\n{r['config']['transport']}")
            for i, v in enumerate(split(r)):
                parts[i].append(v)
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(labels)), 5))
    bottom = [0.0] * len(labels)
    colors = ["#4c72b0", "#dd8452", "#c44e52", "#8c8c8c"]
    names = ["computation", "sparsification", "communication not overlapped", "other"]
    for values, color, name in zip(parts, colors, names):
        ax.bar(range(len(labels)), values, bottom=bottom, color=color, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per iteration (mean over ranks)")
    ax.set_title("Time per iteration, split as in S1's Figs 11-13 (CNN, 4 ranks)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--since", type=float, default=None,
                    help="refuse reports written before this moment (seconds since the epoch)")
    ap.add_argument("--title", default="")
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    reports = []
    for p in a.reports:
        if a.since is not None and os.path.getmtime(p) < a.since:
            print(f"s1-table: {p} was written before this invocation started", file=sys.stderr)
            return 2
        with open(p) as f:
            reports.append(json.load(f))
    text = (f"### {a.title}\n" if a.title else "") + tables(reports)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "s1.md"), "w") as f:
        f.write(text)
    print(text, end="")
    if plot(reports, os.path.join(a.out, "s1-breakdown.svg")):
        print(f"\n(written: {os.path.join(a.out, 's1.md')}, {os.path.join(a.out, 's1-breakdown.svg')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
