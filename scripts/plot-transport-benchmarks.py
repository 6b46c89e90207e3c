#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots and model/measured tables for docs/transport-benchmarks.md, from recorded runs.

    scripts/plot-transport-benchmarks.py [--data DIR] [--out DIR] [--tables]

Reads the JSON files that `gradcomp_bench_transports --json` wrote (one per configuration:
local2, local4, emu2-1g, emu4-1g, emu2-10g; default DIR docs/img/transport-benchmarks/data)
and writes, into --out (default docs/img/transport-benchmarks):

* dense-CONFIG.svg: median time of one dense allreduce against message size (log-log) for
  gradcomp's ring_allreduce, MPI_Iallreduce + yield and the blocking MPI_Allreduce, the best of
  N as a thin bar down from each median, the calibrated ring model and, on emulated links, the
  link bound 2 (P-1)/P M / bandwidth;
* sparse-CONFIG.svg: time to exchange the 2^24-float gradient at density 0.001, 0.01 and 0.1
  (sparse_allgather of exact top-k) with its model, against the dense 64 MiB ring and MPI
  allreduces of the same tensor (drawn at density 1);
* model-ratios.svg: measured / model for every row of >= 1 MiB of every configuration, per
  operation, with the 0.75-1.25 band, for the parameter server and the hierarchical leader
  variant both under the models before and after the correction of issue 4.

With --tables it prints the Markdown tables of the doc (measured / model per row and the count
within 25 %). Nothing is measured here: the runs' own calibrated alpha and beta (gamma folded
into beta, so gamma = 0) and median times are used. The models are those of
include/gradcomp/cost/alpha_beta.hpp, written out again below; test/core/cost_test.cpp checks the
C++ side against the same hand-computed figures (4.4953826 s and 2.2402440 s for 4 emulated
hosts at 64 MiB). Standard library only.
"""
import argparse
import json
import math
import os
import sys

CONFIGS = [("local2", "2 local ranks"), ("local4", "4 local ranks"),
           ("emu2-1g", "2 hosts, 1 Gbit/s"), ("emu4-1g", "4 hosts, 1 Gbit/s"),
           ("emu2-10g", "2 hosts, 10 Gbit/s")]
MIB = 1 << 20
RING, IALL, ALL = "gradcomp ring_allreduce", "MPI_Iallreduce + yield", "MPI_Allreduce (blocking)"
PS, LEADER, RS = ("parameter_server S=1 (dense push)", "hierarchical G=2 leader",
                  "hierarchical G=2 reduce_scatter")
GROUP = 2  # the benchmark's hierarchical group size


# ---- the models of cost/alpha_beta.hpp (alpha a, beta b; gamma 0 as calibrated) -------------

def ring(m, p, a, b):
    """ring_allreduce_seconds: 2 (P-1) alpha + 2 (P-1) beta M / P."""
    return 2 * (p - 1) * a + 2 * (p - 1) * b * m / p


def allgather(m, p, a, b):
    """allgather_seconds: (P-1) (alpha + beta M)."""
    return (p - 1) * (a + b * m)


def sparse(wire, p, a, b):
    """sparse_allgather_seconds with the largest encoded message: count exchange + messages."""
    return allgather(24, p, a, b) + allgather(wire, p, a, b)


def ps_new(push, pull, w, s, a, b, dedicated=False):
    """parameter_server_seconds (issue 4): header alltoall, push phase, pull phase in sequence."""
    others = w + s - 1 if dedicated else w - 1
    pushes = max(w, s) if dedicated else w - 1
    return others * a + pushes * (a + b * push / s) + others * (2 * a + b * pull / s)


def ps_old(push, pull, w, s, a, b):
    """The model before issue 4: 2 alpha W + W beta (push + pull) / S."""
    return 2 * w * a + w * b * (push + pull) / s


def hier(m, p, g, a, b, variant):
    """hierarchical_allreduce_seconds, one network for both levels (issue 4)."""
    if g == 1:
        return ring(m, p, a, b)
    groups = -(-p // g)
    if variant == "leader":
        return 2 * ((g - 1) * a + m * b) + ring(m, groups, a, b)
    shards = g if p % g == 0 else p % g
    share = (g - 1) / g if shards == g else 1.0
    return ((g - 1) * a + (g - 1) / shards * m * b) + ring(m / shards, groups, a, b) + \
        ((g - 1) * a + share * m * b)


def hier_old_leader(m, p, g, a, b):
    """The leader model before issue 4: intra-group terms (g-1)/g M each way."""
    groups = -(-p // g)
    return 2 * ((g - 1) * a + (g - 1) / g * m * b) + ring(m, groups, a, b)


def model(row, p, a, b, old=False):
    """The model seconds of a benchmark row."""
    op, m = row["op"], row["bytes"]
    if row["section"] == "sparse":  # from calibrate_sparse_allgather where the run has it
        return row.get("sparse_model_s") or sparse(row["wire_bytes"], p, a, b)
    if op == PS:
        return ps_old(m, m, p, 1, a, b) if old else ps_new(m, m, p, 1, a, b)
    if op == LEADER:
        return hier_old_leader(m, p, GROUP, a, b) if old else hier(m, p, GROUP, a, b, "leader")
    if op == RS:
        return hier(m, p, GROUP, a, b, "reduce_scatter")
    return ring(m, p, a, b)


# ---- data ---------------------------------------------------------------------------------

def load(folder):
    runs = {}
    for key, label in CONFIGS:
        path = os.path.join(folder, key + ".json")
        if os.path.exists(path):
            with open(path) as f:
                d = json.load(f)
            if "sparse_calibrated" in d:  # the sparse rows' model, from their own calibration
                sa, sb = sparse_params(d)
                for r in d["rows"]:
                    if r["section"] == "sparse":
                        r["sparse_model_s"] = sparse(r["wire_bytes"], d["ranks"], sa, sb)
            runs[key] = (label, d)
    return runs


def params(d):
    return d["ranks"], d["calibrated"]["alpha_s"], d["calibrated"]["beta_s_per_byte"]


def sparse_params(d):
    """alpha and beta for the sparse rows: calibrate_sparse_allgather's, else the ring's."""
    cal = d.get("sparse_calibrated") or d["calibrated"]
    return cal["alpha_s"], cal["beta_s_per_byte"]


def find(d, section, op, nbytes):
    for r in d["rows"]:
        if r["section"] == section and r["op"] == op and r["bytes"] == nbytes:
            return r
    return None


def large_rows(d):
    """The rows of >= 1 MiB on the wire, in the doc's column order."""
    rows = [r for r in d["rows"] if r["wire_bytes"] >= MIB]
    order = {RING: 0, IALL: 1, ALL: 2, PS: 4, LEADER: 5, RS: 6}
    return sorted(rows, key=lambda r: (3 if r["section"] == "sparse" else order[r["op"]],
                                       r["section"] == "others", r["bytes"]))


def column(r):
    if r["section"] == "sparse":
        return "sparse"
    return {RING: "ring", IALL: "iallreduce", ALL: "allreduce", PS: "ps", LEADER: "leader",
            RS: "rs"}[r["op"]]


def within(ratio):
    return abs(ratio - 1.0) <= 0.25


def fmt_ratio(ratio):
    """Two decimals (three where two would round across the 25 % limit), bold when outside."""
    text = f"{ratio:.2f}"
    if within(float(text)) != within(ratio):
        text = f"{ratio:.3f}"
    return text if within(ratio) else f"**{text}**"


def plain(ratio):
    """fmt_ratio without the bold."""
    return fmt_ratio(ratio).strip("*")


# ---- tables -------------------------------------------------------------------------------

def tables(runs):
    cols = ["ring", "iallreduce", "allreduce", "sparse", "ps", "leader", "rs"]
    heads = ["ring", "MPI_Iallreduce", "MPI_Allreduce", "sparse d=0.1", "parameter_server",
             "hier. leader", "hier. reduce_scatter"]
    out = ["| set-up | " + " | ".join(heads) + " | within 25 % |", "|---" * (len(heads) + 2) + "|"]
    for key, (label, d) in runs.items():
        p, a, b = params(d)
        cells = {c: [] for c in cols}
        ok = n = 0
        for r in large_rows(d):
            ratio = r["median_s"] / model(r, p, a, b)
            cells[column(r)].append(fmt_ratio(ratio))
            ok += within(ratio)
            n += 1
        out.append(f"| {label} | " + " | ".join(", ".join(cells[c]) for c in cols) +
                   f" | {ok}/{n} |")
    out.append("")
    out.append("| set-up | size | parameter_server S=1: before | after | model s | "
               "hier. leader: before | after | model s | hier. reduce_scatter | model s |")
    out.append("|---" * 10 + "|")
    for key, (label, d) in runs.items():
        p, a, b = params(d)
        for m in (4 * MIB, 64 * MIB):
            cells = []
            for op in (PS, LEADER):
                r = find(d, "others", op, m)
                cells += [plain(r["median_s"] / model(r, p, a, b, old=True)),
                          plain(r["median_s"] / model(r, p, a, b)), f"{model(r, p, a, b):.3f}"]
            r = find(d, "others", RS, m)
            cells += [plain(r["median_s"] / model(r, p, a, b)), f"{model(r, p, a, b):.3f}"]
            out.append(f"| {label} | {m // MIB} MiB | " + " | ".join(cells) + " |")
    out.append("")
    # the full-duplex alternative for the parameter server: push and pull overlapped
    out.append("| set-up | size | parameter_server: max(push, pull) model s | measured / that |")
    out.append("|---|---|---|---|")
    for key, (label, d) in runs.items():
        p, a, b = params(d)
        for m in (4 * MIB, 64 * MIB):
            r = find(d, "others", PS, m)
            t = (p - 1) * a + (p - 1) * a + (p - 1) * 2 * a + (p - 1) * b * m
            out.append(f"| {label} | {m // MIB} MiB | {t:.3f} | {r['median_s'] / t:.2f} |")
    return "\n".join(out) + "\n"


# ---- SVG ----------------------------------------------------------------------------------

COLORS = {RING: "#1f77b4", IALL: "#ff7f0e", ALL: "#d62728", "model": "#1f77b4",
          "bound": "#555555", "sparse": "#2ca02c"}


class LogLog:
    """A log-log frame: data to pixel coordinates, decades as grid lines."""

    def __init__(self, xr, yr, w=760, h=440, ml=70, mr=240, mt=34, mb=50):
        self.w, self.h, self.ml, self.mr, self.mt, self.mb = w, h, ml, mr, mt, mb
        self.x0, self.x1 = math.floor(math.log10(xr[0])), math.ceil(math.log10(xr[1]))
        self.y0, self.y1 = math.floor(math.log10(yr[0])), math.ceil(math.log10(yr[1]))

    def X(self, x):
        return self.ml + (self.w - self.ml - self.mr) * (math.log10(x) - self.x0) / (self.x1 - self.x0)

    def Y(self, y):
        return self.mt + (self.h - self.mt - self.mb) * (1 - (math.log10(y) - self.y0) / (self.y1 - self.y0))

    def frame(self, title, xlabel, ylabel, xtick):
        w, h, ml, mr, mt, mb = self.w, self.h, self.ml, self.mr, self.mt, self.mb
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
               f'font-family="sans-serif" font-size="12">',
               f'<rect width="{w}" height="{h}" fill="white"/>',
               f'<text x="{ml}" y="20" font-size="14">{title}</text>']
        for e in range(self.y0, self.y1 + 1):
            y = self.Y(10.0 ** e)
            out.append(f'<line x1="{ml}" x2="{w - mr}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end">{seconds_label(10.0 ** e)}</text>')
        for e in range(self.x0, self.x1 + 1):
            x = self.X(10.0 ** e)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{h - mb}" stroke="#eee"/>')
            out.append(f'<text x="{x:.1f}" y="{h - mb + 16}" text-anchor="middle">{xtick(10.0 ** e)}</text>')
        out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 10}" text-anchor="middle">{xlabel}</text>')
        out.append(f'<text x="16" y="{(mt + h - mb) / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 16 {(mt + h - mb) / 2})">{ylabel}</text>')
        out.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" stroke="#333"/>')
        return out

    def legend(self, out, entries):
        y = self.mt + 10
        x = self.w - self.mr + 10
        for kind, color, label in entries:
            if kind == "point":
                out.append(f'<circle cx="{x + 10}" cy="{y}" r="4" fill="{color}"/>')
            elif kind == "text":
                pass
            elif kind == "dash":
                out.append(f'<line x1="{x}" x2="{x + 20}" y1="{y}" y2="{y}" stroke="{color}" '
                           f'stroke-width="1.5" stroke-dasharray="5,3"/>')
            else:
                out.append(f'<line x1="{x}" x2="{x + 20}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"/>')
            out.append(f'<text x="{x + 26}" y="{y + 4}">{label}</text>')
            y += 18


def seconds_label(s):
    if s >= 1:
        return f"{s:g} s"
    if s >= 1e-3:
        return f"{s * 1e3:g} ms"
    return f"{s * 1e6:g} us"


def bytes_label(b):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:g} {unit}"
    return f"{b:g} B"


def polyline(out, frame, pts, color, dash=False, width=1.5):
    if len(pts) < 2:
        return
    coords = " ".join(f"{frame.X(x):.1f},{frame.Y(y):.1f}" for x, y in pts)
    style = ' stroke-dasharray="5,3"' if dash else ""
    out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{width}"{style}/>')


def points(out, frame, rows, color, dx=0.0):
    for r in rows:
        x = frame.X(r["bytes"]) + dx
        yb, ym = frame.Y(r["best_s"]), frame.Y(r["median_s"])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ym:.1f}" y2="{yb:.1f}" stroke="{color}" stroke-width="1"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{ym:.1f}" r="4" fill="{color}"/>')


def dense_plot(label, d, path):
    p, a, b = params(d)
    rows = {op: sorted((r for r in d["rows"] if r["section"] == "dense" and r["op"] == op),
                       key=lambda r: r["bytes"]) for op in (RING, IALL, ALL)}
    sizes = [r["bytes"] for r in rows[RING]]
    link = d.get("link_bits_per_s", 0) or 0
    bound = (lambda m: 2 * (p - 1) / p * m * 8 / link) if link > 0 else None
    ys = [r[k] for op in rows for r in rows[op] for k in ("best_s", "median_s")]
    ys += [ring(m, p, a, b) for m in sizes] + ([bound(m) for m in sizes] if bound else [])
    f = LogLog((min(sizes), max(sizes)), (min(ys), max(ys)))
    out = f.frame(f"Dense allreduce, {label} ({p} ranks)", "message size per rank (bytes)",
                  "median time (bar: best)", bytes_label)
    grid = [min(sizes) * 2 ** (i / 4) for i in range(0, 4 * int(round(math.log2(max(sizes) / min(sizes)))) + 1)]
    polyline(out, f, [(m, ring(m, p, a, b)) for m in grid], COLORS["model"], dash=True)
    if bound:
        polyline(out, f, [(m, bound(m)) for m in grid], COLORS["bound"], dash=True, width=1)
    for i, op in enumerate((RING, IALL, ALL)):
        points(out, f, rows[op], COLORS[op], dx=(i - 1) * 5)
        polyline(out, f, [(r["bytes"], r["median_s"]) for r in rows[op]], COLORS[op], width=1)
    entries = [("point", COLORS[RING], "gradcomp ring_allreduce"),
               ("point", COLORS[IALL], "MPI_Iallreduce + yield"),
               ("point", COLORS[ALL], "MPI_Allreduce (blocking)"),
               ("dash", COLORS["model"], "ring model (calibrated)")]
    if bound:
        entries.append(("dash", COLORS["bound"], f"link bound ({link / 1e9:g} Gbit/s)"))
    f.legend(out, entries)
    out.append(f'<text x="{f.w - f.mr + 10}" y="{f.h - f.mb - 20}" font-size="11">alpha {a * 1e3:.2f} ms, '
               f'beta {b * 1e9:.2f} ns/B</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def sparse_plot(label, d, path):
    p, a, b = params(d)
    sa, sb = sparse_params(d)
    density = lambda r: float(r["op"].split("d=")[1])
    rows = sorted((r for r in d["rows"] if r["section"] == "sparse" and "Iallgatherv" not in r["op"]),
                  key=density)
    # the MPI_Iallgatherv algorithm, measured alternately with the pairwise one (newer runs)
    gatherv = sorted((r for r in d["rows"] if r["section"] == "sparse" and "Iallgatherv" in r["op"]),
                     key=density)
    dens = [float(r["op"].split("d=")[1]) for r in rows]
    full = 64 * MIB
    dense = {op: find(d, "dense", op, full) for op in (RING, IALL, ALL)}
    ys = [r[k] for r in rows + gatherv for k in ("best_s", "median_s")] + \
        [r["median_s"] for r in dense.values()]
    # bytes per (index, value) pair of the encoded messages, for the model line
    per_pair = sum(r["wire_bytes"] / (dn * full / 4) for r, dn in zip(rows, dens)) / len(rows)
    # the transport's dense switch: a ring allreduce once a rank would receive more than the
    # ring's 2 (P-1)/P x 64 MiB, i.e. (P-1) x message > 2 (P-1)/P x 4 n: density 8 / (P per_pair)
    switch = 8 / (p * per_pair)
    grid = [10 ** (-3 + i / 8) for i in range(0, 25) if 10 ** (-3 + i / 8) < switch] + [switch]
    line = [(dn, sparse(dn * full / 4 * per_pair, p, sa, sb)) for dn in grid]
    if switch < 1:
        line += [(switch, ring(full, p, a, b)), (1.0, ring(full, p, a, b))]
    ys += [y for _, y in line]
    f = LogLog((min(dens), 1.0), (min(ys), max(ys)))
    out = f.frame(f"Sparse allgather vs dense allreduce, 2^24 floats, {label}",
                  "density (1 = dense 64 MiB)", "median time (bar: best)", lambda x: f"{x:g}")
    polyline(out, f, line, COLORS["sparse"], dash=True)
    if switch < 1:
        x = f.X(switch)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.mt}" y2="{f.h - f.mb}" stroke="#999" '
                   f'stroke-dasharray="1,3"/>')
        out.append(f'<text x="{x - 4:.1f}" y="{f.h - f.mb - 6}" text-anchor="end" font-size="11" '
                   f'fill="#666">dense switch (d = {switch:.2f})</text>')
    for r, dn in zip(rows, dens):
        x, yb, ym = f.X(dn), f.Y(r["best_s"]), f.Y(r["median_s"])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ym:.1f}" y2="{yb:.1f}" stroke="{COLORS["sparse"]}"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{ym:.1f}" r="4" fill="{COLORS["sparse"]}"/>')
    polyline(out, f, [(dn, r["median_s"]) for r, dn in zip(rows, dens)], COLORS["sparse"], width=1)
    for r in gatherv:
        out.append(f'<circle cx="{f.X(density(r)):.1f}" cy="{f.Y(r["median_s"]):.1f}" r="4" '
                   f'fill="none" stroke="{COLORS["sparse"]}"/>')
    for i, (op, r) in enumerate(dense.items()):
        y = f.Y(r["median_s"])
        out.append(f'<line x1="{f.ml}" x2="{f.w - f.mr}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS[op]}" '
                   f'stroke-width="1" stroke-dasharray="2,3"/>')
        x = f.X(1.0) + (i - 1) * 5
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{COLORS[op]}"/>')
    ar = dense[ALL]["median_s"]
    for r, dn in zip(rows, dens):
        out.append(f'<text x="{f.X(dn) + 7:.1f}" y="{f.Y(r["median_s"]) - 7:.1f}" font-size="11">'
                   f'{ar / r["median_s"]:.1f}x</text>')
    f.legend(out, [("point", COLORS["sparse"], "sparse_allgather (exact top-k)"),
                   ("text", "", "  open: with MPI_Iallgatherv" if gatherv else ""),
                   ("dash", COLORS["sparse"], f"its model ({per_pair:.1f} B/pair, "
                    + ("own calibration)" if "sparse_calibrated" in d else "ring-calibrated)")),
                   ("point", COLORS[RING], "dense: gradcomp ring"),
                   ("point", COLORS[IALL], "dense: MPI_Iallreduce"),
                   ("point", COLORS[ALL], "dense: MPI_Allreduce"),
                   ("text", "", "labels: MPI_Allreduce / sparse")])
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def ratio_plot(runs, path):
    cols = [("ring", "gradcomp, ring"), ("iallreduce", "MPI_, Iallreduce"),
            ("allreduce", "MPI_, Allreduce"), ("sparse", "sparse, d=0.1"),
            ("ps-old", "PS, old model"), ("ps", "PS, new model"), ("leader-old", "leader, old model"),
            ("leader", "leader, new model"), ("rs", "reduce_, scatter")]
    marks = {"local2": "#9467bd", "local4": "#8c564b", "emu2-1g": "#2ca02c", "emu4-1g": "#1f77b4",
             "emu2-10g": "#ff7f0e"}
    w, h, ml, mr, mt, mb = 820, 420, 60, 170, 34, 70
    lo, hi = 0.125, 16.0

    def Y(v):
        v = min(max(v, lo), hi)
        return mt + (h - mt - mb) * (1 - (math.log2(v) - math.log2(lo)) / (math.log2(hi) - math.log2(lo)))

    step = (w - ml - mr) / len(cols)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{ml}" y="20" font-size="14">Measured / model, every row of at least 1 MiB '
           f'(band: within 25 %)</text>',
           f'<rect x="{ml}" y="{Y(1.25):.1f}" width="{w - ml - mr}" height="{Y(0.75) - Y(1.25):.1f}" fill="#e8f4e8"/>']
    for v in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16):
        out.append(f'<line x1="{ml}" x2="{w - mr}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="{"#888" if v == 1 else "#ddd"}"/>')
        out.append(f'<text x="{ml - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for i, (_, name) in enumerate(cols):
        x = ml + step * (i + 0.5)
        out.append(f'<text x="{x:.1f}" y="{h - mb + 16}" text-anchor="middle" font-size="11">'
                   f'{name.split(", ")[0]}</text>')
        if ", " in name:
            out.append(f'<text x="{x:.1f}" y="{h - mb + 30}" text-anchor="middle" font-size="11">'
                       f'{name.split(", ")[1]}</text>')
    out.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" stroke="#333"/>')
    for k, (key, (label, d)) in enumerate(runs.items()):
        p, a, b = params(d)
        for r in large_rows(d):
            c = column(r)
            series = [(c, model(r, p, a, b))]
            if c in ("ps", "leader"):
                series.append((c + "-old", model(r, p, a, b, old=True)))
            for name, m in series:
                i = [n for n, _ in cols].index(name)
                x = ml + step * (i + 0.5) + (k - 2) * 7
                out.append(f'<circle cx="{x:.1f}" cy="{Y(r["median_s"] / m):.1f}" r="3.5" '
                           f'fill="{marks[key]}" fill-opacity="0.8"/>')
    y = mt + 10
    for key, (label, _) in runs.items():
        out.append(f'<circle cx="{w - mr + 20}" cy="{y}" r="4" fill="{marks[key]}"/>')
        out.append(f'<text x="{w - mr + 30}" y="{y + 4}">{label}</text>')
        y += 18
    out.append(f'<text x="{ml}" y="{h - 12}" font-size="11">log scale; values beyond the frame '
               f'are drawn at its edge</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "docs", "img", "transport-benchmarks")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(default_out, "data"),
                    help="folder with CONFIG.json (default: docs/img/transport-benchmarks/data)")
    ap.add_argument("--out", default=default_out,
                    help="folder for the SVGs (default: docs/img/transport-benchmarks)")
    ap.add_argument("--tables", action="store_true", help="print the Markdown ratio tables")
    a = ap.parse_args()
    runs = load(a.data)
    if not runs:
        print(f"plot-transport-benchmarks: no CONFIG.json in {a.data}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    written = []
    for key, (label, d) in runs.items():
        for kind, fn in (("dense", dense_plot), ("sparse", sparse_plot)):
            path = os.path.join(a.out, f"{kind}-{key}.svg")
            fn(label, d, path)
            written.append(path)
    path = os.path.join(a.out, "model-ratios.svg")
    ratio_plot(runs, path)
    written.append(path)
    if a.tables:
        print(tables(runs), end="")
    print("written: " + ", ".join(os.path.relpath(w) for w in written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
