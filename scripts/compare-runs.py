#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Side-by-side comparison of gradcomp-train reports (the main job's last step).

    scripts/compare-runs.py --out DIR REPORT.json [REPORT.json ...]

The first report is the dense baseline; the others are compared with it. Prints a Markdown
table (also written to DIR/comparison.md) with PyTorch DDP's figures from
docs/results.md / ddp-baseline.md beside ours, and writes DIR/accuracy-vs-time.svg (test accuracy
against training seconds for every run, DDP's and PowerSGD's epoch points as markers).
Standard library only.
"""
import argparse
import json
import math
import os
import sys

# PyTorch DDP on the same CNN, emulated cluster (4 hosts, 1 Gbit/s), measured by the project
# (ddp-baseline.md): ms per iteration (low, high), accuracy after epochs 1 and 2.
DDP_ITERATIONS_PER_EPOCH = 469  # 60000 samples / (4 ranks x 32)
PEERS = [
    {"label": "PyTorch DDP, dense allreduce", "ms": (133, 136), "acc": (0.875, 0.900),
     "bytes": 10.0e6},
    {"label": "PyTorch DDP, PowerSGD rank 2", "ms": (93, 95), "acc": (0.870, 0.890),
     "bytes": 0.19e6},
    {"label": "no communication (floor)", "ms": (50, 53), "acc": None, "bytes": 0},
]


def time_to_accuracy(report, target):
    """Training seconds at the first evaluation reaching `target`, or None."""
    for point in report["curve"]:
        if point["test_accuracy"] >= target:
            return point["train_seconds"]
    return None


def epoch_accuracy(report, epoch):
    for point in report["curve"]:
        if point["epoch"] == epoch and abs(point["epochs_done"] - epoch) < 1e-9:
            return point["test_accuracy"]
    return None


def fmt_seconds(s):
    return "not reached" if s is None else f"{s:.1f} s"


def fmt_pct(a):
    return "-" if a is None else f"{100 * a:.2f} %"


def table(reports, ddp_target):
    dense = reports[0]
    cols = [r["label"] for r in reports] + [p["label"] for p in PEERS]
    rows = []

    def row(name, ours, peers):
        rows.append([name] + ours + peers)

    it_ms = [r["per_iteration"]["iteration_ms"]["mean_over_ranks"] for r in reports]
    row("ms per iteration (mean over ranks)", [f"{v:.1f}" for v in it_ms],
        [f"{p['ms'][0]}-{p['ms'][1]}" for p in PEERS])
    epochs = dense["config"]["epochs"]
    for e in range(1, epochs + 1):
        row(f"test accuracy after epoch {e}", [fmt_pct(epoch_accuracy(r, e)) for r in reports],
            [fmt_pct(p["acc"][e - 1]) if p["acc"] and e <= 2 else "-" for p in PEERS])
    row(f"training seconds for {epochs} epochs", [f"{r['train_seconds']:.1f}" for r in reports],
        [f"{epochs * DDP_ITERATIONS_PER_EPOCH * p['ms'][0] / 1000:.0f}-"
         f"{epochs * DDP_ITERATIONS_PER_EPOCH * p['ms'][1] / 1000:.0f}" for p in PEERS])
    ddp_2ep = [2 * DDP_ITERATIONS_PER_EPOCH * m / 1000 for m in PEERS[0]["ms"]]
    psgd = PEERS[1]
    row(f"training seconds to reach {100 * ddp_target:.1f} % (DDP's 2-epoch accuracy)",
        [fmt_seconds(time_to_accuracy(r, ddp_target)) for r in reports],
        [f"{ddp_2ep[0]:.0f}-{ddp_2ep[1]:.0f} s", "not reached in 2 epochs", "-"])
    row("compute per iteration, ms", [
        f"{r['per_iteration']['forward_ms']['mean_over_ranks'] + r['per_iteration']['backward_ms']['mean_over_ranks']:.1f}"
        for r in reports], ["-"] * len(PEERS))
    row("compression per iteration, ms",
        [f"{r['per_iteration']['compression_ms']['mean_over_ranks']:.2f}" for r in reports],
        ["-"] * len(PEERS))
    row("communication not overlapped per iteration, ms",
        [f"{r['per_iteration']['exchange_wait_ms']['mean_over_ranks']:.2f}" for r in reports],
        ["-"] * len(PEERS))
    row("averages into .grad (copy, momentum masking) per iteration, ms",
        [f"{r['per_iteration'].get('gradient_apply_ms', {}).get('mean_over_ranks', 0.0):.2f}"
         for r in reports], ["-"] * len(PEERS))
    row("optimizer step per iteration, ms",
        [f"{r['per_iteration']['optimizer_step_ms']['mean_over_ranks']:.2f}" for r in reports],
        ["-"] * len(PEERS))
    row("bytes sent per rank per iteration",
        [f"{r['per_iteration']['bytes_sent']['mean_over_ranks'] / 1e6:.3f} MB" for r in reports],
        [f"{p['bytes'] / 1e6:.2f} MB" for p in PEERS])
    row("achieved density", [f"{r['achieved_density']:.4f}" for r in reports], ["-"] * len(PEERS))
    row("merge plan", [f"{r['config']['merge']}: {len(r['plan']['groups'])} groups" for r in reports],
        ["25 MiB buckets", "one bucket", "-"])
    row("replicas identical", ["independent (no exchange)" if r["config"]["transport"] == "none"
                               else "yes" if r["replicas_identical"] else "NO" for r in reports],
        ["-"] * len(PEERS))
    lines = ["| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n\n"

    base_s = dense["train_seconds"]
    base_acc = dense["final_test_accuracy"]
    for r in reports[1:]:
        acc = r["final_test_accuracy"]
        speedup = base_s / r["train_seconds"] if r["train_seconds"] > 0 else float("nan")
        text += (f"* **{r['label']}** vs **{dense['label']}**: {speedup:.2f}x faster "
                 f"({r['train_seconds']:.1f} s vs {base_s:.1f} s of training), final accuracy "
                 f"{100 * (acc - base_acc):+.2f} points ({100 * acc:.2f} % vs {100 * base_acc:.2f} %).\n")
        t = time_to_accuracy(r, ddp_target)
        if t is not None:
            text += (f"  It reaches DDP's 2-epoch accuracy ({100 * ddp_target:.1f} %) after {t:.1f} s: "
                     f"{t / ddp_2ep[0]:.2f}x of dense DDP's 2-epoch time ({ddp_2ep[0]:.0f} s) and "
                     f"{t / (2 * DDP_ITERATIONS_PER_EPOCH * psgd['ms'][0] / 1000):.2f}x of PowerSGD's.\n")
        else:
            text += f"  It does not reach DDP's 2-epoch accuracy ({100 * ddp_target:.1f} %) in this run.\n"
    floor = [r for r in reports if r["config"]["transport"] == "none"]
    if floor:
        f_ms = floor[0]["per_iteration"]["iteration_ms"]["mean_over_ranks"]
        for r in reports:
            if r["config"]["transport"] != "none":
                ms = r["per_iteration"]["iteration_ms"]["mean_over_ranks"]
                text += f"* {r['label']}: iteration {ms / f_ms:.2f}x of the measured no-communication floor ({f_ms:.1f} ms).\n"
    text += f"* BLAS: {dense['config']['blas']}\n"
    return text


def svg_plot(reports, path):
    w, h, ml, mr, mt, mb = 760, 440, 70, 230, 30, 50
    points = [(p["train_seconds"], p["test_accuracy"]) for r in reports for p in r["curve"]]
    peers = []
    for p in PEERS[:2]:
        ms = sum(p["ms"]) / 2
        peers.append((p["label"], [(e * DDP_ITERATIONS_PER_EPOCH * ms / 1000, p["acc"][e - 1])
                                   for e in (1, 2)]))
        points += peers[-1][1]
    xmax = max(x for x, _ in points) * 1.05 or 1
    ymin = max(0.0, math.floor(min(y for _, y in points if y > 0.5) * 20) / 20 if any(y > 0.5 for _, y in points) else 0)
    ymax = 1.0 if ymin < 0.8 else 0.95

    def X(x):
        return ml + (w - ml - mr) * x / xmax

    def Y(y):
        y = min(max(y, ymin), ymax)
        return mt + (h - mt - mb) * (1 - (y - ymin) / (ymax - ymin))

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{ml}" y="18" font-size="14">Test accuracy vs training time (4 ranks, Fashion-MNIST CNN)</text>']
    for i in range(6):
        y = ymin + (ymax - ymin) * i / 5
        out.append(f'<line x1="{ml}" x2="{w - mr}" y1="{Y(y):.1f}" y2="{Y(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{ml - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{100 * y:.0f} %</text>')
    for i in range(6):
        x = xmax * i / 5
        out.append(f'<line x1="{X(x):.1f}" x2="{X(x):.1f}" y1="{mt}" y2="{h - mb}" stroke="#eee"/>')
        out.append(f'<text x="{X(x):.1f}" y="{h - mb + 16}" text-anchor="middle">{x:.0f}</text>')
    out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 10}" text-anchor="middle">training seconds (evaluation excluded)</text>')
    out.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" stroke="#333"/>')
    legend_y = mt + 10
    for i, r in enumerate(reports):
        c = colors[i % len(colors)]
        pts = " ".join(f"{X(p['train_seconds']):.1f},{Y(p['test_accuracy']):.1f}" for p in r["curve"])
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for p in r["curve"]:
            out.append(f'<circle cx="{X(p["train_seconds"]):.1f}" cy="{Y(p["test_accuracy"]):.1f}" r="3" fill="{c}"/>')
        out.append(f'<line x1="{w - mr + 10}" x2="{w - mr + 30}" y1="{legend_y}" y2="{legend_y}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{w - mr + 35}" y="{legend_y + 4}">{r["label"]}</text>')
        legend_y += 18
    for (label, pts), shape in zip(peers, ["#000", "#888"]):
        for x, y in pts:
            out.append(f'<rect x="{X(x) - 4:.1f}" y="{Y(y) - 4:.1f}" width="8" height="8" fill="none" stroke="{shape}" stroke-width="2"/>')
        out.append(f'<rect x="{w - mr + 16}" y="{legend_y - 4}" width="8" height="8" fill="none" stroke="{shape}" stroke-width="2"/>')
        out.append(f'<text x="{w - mr + 35}" y="{legend_y + 4}">{label} (epochs 1, 2)</text>')
        legend_y += 18
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for comparison.md and accuracy-vs-time.svg")
    ap.add_argument("--ddp-target", type=float, default=0.900,
                    help="accuracy to time (default: DDP's 2-epoch accuracy, 0.900)")
    ap.add_argument("--title", default="", help="a line printed above the table")
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    reports = []
    for p in a.reports:
        try:
            with open(p) as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"compare-runs: cannot read {p}: {e}", file=sys.stderr)
            return 2
    os.makedirs(a.out, exist_ok=True)
    text = (a.title + "\n\n" if a.title else "") + table(reports, a.ddp_target)
    print(text, end="")
    with open(os.path.join(a.out, "comparison.md"), "w") as f:
        f.write(text)
    svg_plot(reports, os.path.join(a.out, "accuracy-vs-time.svg"))
    print(f"\n(written: {os.path.join(a.out, 'comparison.md')}, "
          f"{os.path.join(a.out, 'accuracy-vs-time.svg')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
