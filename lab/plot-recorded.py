#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the two plots of docs/benchmarks.md that their runs did not record, from the recorded data.

    lab/plot-recorded.py [--out docs/img]

* fidelity/cnn-step-seeds.svg: test accuracy against epochs of the dense ring and of the
  reused threshold at 1 % after a 1-epoch density warm-up with the velocity kept, seeds 1-3,
  learning rate x 0.1 from epoch 1.5 (the reports in lab/results/2026-12-02-fidelity-cnn-step/);
* cuda/h200-exact-top-k.svg: ms per call of gradcomp::cuda::exact_top_k and torch.topk against
  n at density 0.01, and the bandwidth floor (the tables in
  lab/results/2026-11-27-cuda-h200/h200-2026-11-27-run-sh.log).

Nothing is computed but the drawing: every point is a recorded value. Standard library only.
"""
import argparse
import json
import math
import os
import re

LAB = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(LAB)
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def svg_plot(series, title, xlabel, ylabel, xlog=False, ylog=False, xticks=None, yrange=None):
    """series: [(label, colour, dash, [(x, y), ...])] -> SVG text."""
    w, h, left, right, top, bottom = 720, 420, 70, 210, 40, 55
    fx = (lambda v: math.log2(v)) if xlog else (lambda v: v)
    fy = (lambda v: math.log10(v)) if ylog else (lambda v: v)
    xs = [fx(x) for _, _, _, pts in series for x, _ in pts]
    ys = [fy(y) for _, _, _, pts in series for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (fy(yrange[0]), fy(yrange[1])) if yrange else (min(ys), max(ys))
    if not ylog and not yrange:
        pad = (y1 - y0) * 0.05
        y0, y1 = y0 - pad, y1 + pad
    px = lambda v: left + (fx(v) - x0) / (x1 - x0) * (w - left - right)
    py = lambda v: top + (y1 - fy(v)) / (y1 - y0) * (h - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14">{title}</text>',
           f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" '
           f'fill="none" stroke="#444"/>']
    for x in (xticks or sorted(set(x for _, _, _, pts in series for x, _ in pts))):
        label = f"2^{int(math.log2(x))}" if xlog else f"{x:g}"
        out.append(f'<line x1="{px(x):.1f}" y1="{h - bottom}" x2="{px(x):.1f}" y2="{h - bottom + 4}" stroke="#444"/>')
        out.append(f'<text x="{px(x):.1f}" y="{h - bottom + 18}" text-anchor="middle">{label}</text>')
    if ylog:
        ticks = [10 ** e * m for e in range(math.floor(y0), math.ceil(y1) + 1) for m in (1, 2, 5)]
    else:
        step = 10 ** math.floor(math.log10((y1 - y0) / 4))
        step *= 2 if (y1 - y0) / step > 10 else 1
        ticks = [math.ceil(y0 / step) * step + i * step for i in range(20)]
    for t in ticks:
        if y0 <= fy(t) <= y1:
            out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{w - right}" y2="{py(t):.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="16" y="{(top + h - bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(top + h - bottom) / 2})">{ylabel}</text>')
    for i, (label, colour, dash, pts) in enumerate(series):
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"'
                   + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>')
        ly = top + 14 + 18 * i
        out.append(f'<line x1="{w - right + 12}" y1="{ly - 4}" x2="{w - right + 36}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        out.append(f'<text x="{w - right + 42}" y="{ly}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def fidelity(out):
    folder = os.path.join(LAB, "results", "2026-12-02-fidelity-cnn-step")
    series = []
    for s in (1, 2, 3):
        for name, label, dash in (("dense", "dense ring", None), ("kept", "warm-up, velocity kept", "5,3")):
            with open(os.path.join(folder, f"step-{name}-s{s}.json")) as f:
                curve = json.load(f)["curve"]
            pts = [(p["epochs_done"], 100 * p["test_accuracy"]) for p in curve if p["epochs_done"] >= 0.5]
            series.append((f"{label}, seed {s}", COLOURS[s - 1], dash, pts))
    svg = svg_plot(series, "CNN, 4 ranks, lr x 0.1 from epoch 1.5: test accuracy, seeds 1-3",
                   "epochs", "test accuracy, %", xticks=[0.5, 1, 1.5, 2])
    path = os.path.join(out, "fidelity", "cnn-step-seeds.svg")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(svg)
    return path


def cuda(out):
    log = os.path.join(LAB, "results", "2026-11-27-cuda-h200", "h200-2026-11-27-run-sh.log")
    ours, torch, floor = [], [], []
    row = re.compile(r"^\| 2\^(\d+) \| 0\.01 \| exact_top_k \| ([0-9.]+) \| ([0-9.]+) \|")
    torch_row = re.compile(r"^\| 2\^(\d+) \| 0\.01 \| ([0-9.]+) \|$")
    with open(log) as f:
        for line in f:
            m = row.match(line.strip())
            if m:
                n = 2 ** int(m.group(1))
                ours.append((n, float(m.group(2))))
                floor.append((n, float(m.group(3))))
            m = torch_row.match(line.strip())
            if m:
                torch.append((2 ** int(m.group(1)), float(m.group(2))))
    svg = svg_plot([("gradcomp exact_top_k", COLOURS[0], None, ours),
                    ("torch.topk", COLOURS[1], None, torch),
                    ("bandwidth floor", "#777", "4,3", floor)],
                   "NVIDIA H200, density 0.01: ms per call", "n (elements)", "ms per call (log)",
                   xlog=True, ylog=True)
    path = os.path.join(out, "cuda", "h200-exact-top-k.svg")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(svg)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "img"))
    args = ap.parse_args()
    for path in (fidelity(args.out), cuda(args.out)):
        print("wrote", os.path.relpath(path, REPO))


if __name__ == "__main__":
    main()
