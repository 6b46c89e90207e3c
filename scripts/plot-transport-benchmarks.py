#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Plots and model/measured tables for docs/transport-benchmarks.md, from recorded runs.

    scripts/plot-transport-benchmarks.py [--data DIR] [--out DIR] [--tables] [--cost-tool PATH]

Reads the JSON files that `gradcomp_bench_transports --json` wrote (one per configuration:
local2, local4, emu2-1g, emu4-1g, emu2-10g; default DIR
lab/results/2026-11-23-transport-benchmarks/data)
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
  variant both under their cost models before and after their correction (the earlier
  forms: ps_before and leader_before below).

With --tables it prints the Markdown tables of the doc (measured / model per row and the count
within 25 %). Nothing is measured here: the runs' own calibrated alpha and beta (gamma folded
into beta, so gamma = 0) and median times are used.

The model numbers come from the C++ functions of include/gradcomp/cost/alpha_beta.hpp
themselves: the script builds one JSON query per number and runs the `gradcomp-cost` tool
(apps/gradcomp-cost) once on all of them (--cost-tool PATH; default
build/bin/gradcomp-cost, else gradcomp-cost on PATH; build it with
`cmake --build build --target gradcomp-cost`). Only the models that are not in the library are
written out below: the parameter server's and the leader variant's models before their
correction (the "before" columns) and the parameter server with push and pull overlapped (a
what-if of the doc).

Needs Python 3 and matplotlib (Debian: python3-matplotlib, for /usr/bin/python3); the SVGs are
reproducible (no date, fixed ids).
"""
import argparse
import io
import json
import math
import os
import shutil
import subprocess
import sys

CONFIGS = [("local2", "2 local ranks"), ("local4", "4 local ranks"),
           ("emu2-1g", "2 hosts, 1 Gbit/s"), ("emu4-1g", "4 hosts, 1 Gbit/s"),
           ("emu2-10g", "2 hosts, 10 Gbit/s")]
MIB = 1 << 20
FULL = 64 * MIB  # the sparse section's tensor: 2^24 floats
RING, IALL, ALL = "gradcomp ring_allreduce", "MPI_Iallreduce + yield", "MPI_Allreduce (blocking)"
PS, LEADER, RS = ("parameter_server S=1 (dense push)", "hierarchical G=2 leader",
                  "hierarchical G=2 reduce_scatter")
GROUP = 2  # the benchmark's hierarchical group size


# ---- the model numbers: queries for gradcomp-cost ------------------------------------------

def params(d):
    return d["ranks"], d["calibrated"]["alpha_s"], d["calibrated"]["beta_s_per_byte"]


def sparse_params(d):
    """alpha and beta for the sparse rows: calibrate_sparse_allgather's, else the ring's."""
    cal = d.get("sparse_calibrated") or d["calibrated"]
    return cal["alpha_s"], cal["beta_s_per_byte"]


def query(d, key):
    """The gradcomp-cost query of model number `key` = (kind, bytes) of run `d`."""
    p, a, b = params(d)
    kind, m = key
    net = {"alpha_seconds": a, "beta_seconds_per_byte": b}
    if kind == "ring":
        return {"model": "ring_allreduce", "bytes": m, "ranks": p, **net}
    if kind == "leaders_ring":  # the ring of the G = ceil(P / g) group leaders
        return {"model": "ring_allreduce", "bytes": m, "ranks": -(-p // GROUP), **net}
    if kind == "sparse":  # one message of m bytes per rank (the largest encoded one)
        sa, sb = sparse_params(d)
        return {"model": "sparse_allgather", "k": 1, "bytes_per_pair": m, "ranks": p,
                "alpha_seconds": sa, "beta_seconds_per_byte": sb}
    if kind == "ps":  # dense push, S = 1 co-located server
        return {"model": "parameter_server", "push_bytes": m, "pull_bytes": m, "workers": p,
                "servers": 1, **net}
    if kind in ("leader", "reduce_scatter"):  # one network for both levels
        return {"model": "hierarchical_allreduce", "bytes": m, "ranks": p, "group": GROUP,
                "variant": kind, **net}
    raise ValueError(f"no model {kind}")


def row_key(r):
    """The model number of a benchmark row."""
    if r["section"] == "sparse":
        return ("sparse", r["wire_bytes"])
    return ({PS: "ps", LEADER: "leader", RS: "reduce_scatter"}.get(r["op"], "ring"), r["bytes"])


def dense_sizes(d):
    """The sizes of the dense plot's model line: four points per octave."""
    sizes = sorted(r["bytes"] for r in d["rows"] if r["section"] == "dense" and r["op"] == RING)
    octaves = int(round(math.log2(max(sizes) / min(sizes))))
    return [min(sizes) * 2 ** (i / 4) for i in range(0, 4 * octaves + 1)]


def sparse_rows(d):
    """The pairwise sparse rows and the MPI_Iallgatherv ones (newer runs), by density."""
    sparse = [r for r in d["rows"] if r["section"] == "sparse"]
    pairwise = sorted((r for r in sparse if "Iallgatherv" not in r["op"]), key=density)
    return pairwise, sorted((r for r in sparse if "Iallgatherv" in r["op"]), key=density)


def density(r):
    return float(r["op"].split("d=")[1])


def sparse_line(d):
    """(densities, message bytes per rank, bytes per pair, dense switch) of the sparse model line.

    Bytes per (index, value) pair of the encoded messages, averaged over the rows. The
    transport's dense switch: a ring allreduce once a rank would receive more than the ring's
    2 (P-1)/P x 64 MiB, i.e. (P-1) x message > 2 (P-1)/P x 4 n: density 8 / (P per_pair)."""
    rows, _ = sparse_rows(d)
    per_pair = sum(r["wire_bytes"] / (density(r) * FULL / 4) for r in rows) / len(rows)
    switch = 8 / (d["ranks"] * per_pair)
    grid = [10 ** (-3 + i / 8) for i in range(0, 25) if 10 ** (-3 + i / 8) < switch] + [switch]
    return grid, [dn * FULL / 4 * per_pair for dn in grid], per_pair, switch


def model_keys(d):
    """Every model number the tables and plots of run `d` use."""
    keys = [row_key(r) for r in d["rows"] if r["wire_bytes"] >= MIB]
    keys += [("leaders_ring", r["bytes"]) for r in d["rows"]
             if r["wire_bytes"] >= MIB and r["op"] == LEADER]
    keys += [("ring", m) for m in dense_sizes(d)] + [("ring", FULL)]
    keys += [("sparse", m) for m in sparse_line(d)[1]]
    for m in (4 * MIB, 64 * MIB):
        keys += [("ps", m), ("leader", m), ("reduce_scatter", m), ("leaders_ring", m)]
    return list(dict.fromkeys(keys))


def run_cost_tool(tool, runs):
    """Evaluates every run's model numbers with one call of gradcomp-cost; sets d["model"]."""
    batch = [(d, key) for _, d in runs.values() for key in model_keys(d)]
    queries = [query(d, key) for d, key in batch]
    done = subprocess.run([tool, "-"], input=json.dumps(queries), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"plot-transport-benchmarks: {tool} failed (exit {done.returncode}): "
                 f"{done.stderr.strip()}")
    answers = json.loads(done.stdout)
    for _, d in runs.values():
        d["model"] = {}
    for (d, key), answer in zip(batch, answers, strict=True):
        d["model"][key] = answer["seconds"]


def find_cost_tool(path):
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "build", "bin", "gradcomp-cost")
    if os.access(built, os.X_OK):
        return os.path.normpath(built)
    found = shutil.which("gradcomp-cost")
    if found:
        return found
    sys.exit("plot-transport-benchmarks: no gradcomp-cost in build/bin/ or on PATH; build it "
             "(cmake --build build --target gradcomp-cost) or pass --cost-tool PATH")


# ---- the models that are not in the library (alpha a, beta b; gamma 0 as calibrated) ------

def ps_before(m, w, a, b):
    """The parameter server model before its correction, S = 1: 2 alpha W + W beta (push +
    pull)."""
    return 2 * w * a + w * b * (m + m)


def leader_before(d, m):
    """The leader model before its correction: intra-group terms (g-1)/g M each way, plus the
    ring of the G leaders (ring_allreduce_seconds, from gradcomp-cost)."""
    _, a, b = params(d)
    g = GROUP
    return 2 * ((g - 1) * a + (g - 1) / g * m * b) + d["model"][("leaders_ring", m)]


def ps_overlapped(m, p, a, b):
    """The parameter server, S = 1, with push and pull overlapped (full duplex): every alpha
    term as in the sum, the beta term of the larger phase, (P-1) beta M."""
    return (p - 1) * a + (p - 1) * a + (p - 1) * 2 * a + (p - 1) * b * m


def model(d, r, before=False):
    """The model seconds of a benchmark row (before=True: the models before their correction,
    PS and leader rows only)."""
    if before and r["op"] == PS:
        _, a, b = params(d)
        return ps_before(r["bytes"], d["ranks"], a, b)
    if before and r["op"] == LEADER:
        return leader_before(d, r["bytes"])
    return d["model"][row_key(r)]


# ---- data ---------------------------------------------------------------------------------

def load(folder):
    runs = {}
    for key, label in CONFIGS:
        path = os.path.join(folder, key + ".json")
        if os.path.exists(path):
            with open(path) as f:
                runs[key] = (label, json.load(f))
    return runs


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
        cells = {c: [] for c in cols}
        ok = n = 0
        for r in large_rows(d):
            ratio = r["median_s"] / model(d, r)
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
        for m in (4 * MIB, 64 * MIB):
            cells = []
            for op in (PS, LEADER):
                r = find(d, "others", op, m)
                cells += [plain(r["median_s"] / model(d, r, before=True)),
                          plain(r["median_s"] / model(d, r)), f"{model(d, r):.3f}"]
            r = find(d, "others", RS, m)
            cells += [plain(r["median_s"] / model(d, r)), f"{model(d, r):.3f}"]
            out.append(f"| {label} | {m // MIB} MiB | " + " | ".join(cells) + " |")
    out.append("")
    # the full-duplex alternative for the parameter server: push and pull overlapped
    out.append("| set-up | size | parameter_server: max(push, pull) model s | measured / that |")
    out.append("|---|---|---|---|")
    for key, (label, d) in runs.items():
        p, a, b = params(d)
        for m in (4 * MIB, 64 * MIB):
            r = find(d, "others", PS, m)
            t = ps_overlapped(m, p, a, b)
            out.append(f"| {label} | {m // MIB} MiB | {t:.3f} | {r['median_s'] / t:.2f} |")
    return "\n".join(out) + "\n"


# ---- plots --------------------------------------------------------------------------------

COLORS = {RING: "#1f77b4", IALL: "#ff7f0e", ALL: "#d62728", "model": "#1f77b4",
          "bound": "#555555", "sparse": "#2ca02c"}


def pyplot():
    """matplotlib's pyplot on the Agg backend, set up for small reproducible SVGs."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot-transport-benchmarks: needs matplotlib (Debian: apt-get install "
                 "python3-matplotlib, then run it with /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.hashsalt": "gradcomp", "svg.fonttype": "none", "font.size": 9,
                         "font.family": "sans-serif", "axes.titlesize": 11})
    return plt


def save(plt, fig, path):
    """Saves `fig` as a reproducible SVG (no date, fixed ids) that starts with <svg (matplotlib's
    XML declaration and DOCTYPE left out)."""
    text = io.StringIO()
    fig.savefig(text, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    svg = text.getvalue()
    with open(path, "w") as f:
        f.write(svg[svg.index("<svg"):])


def seconds_label(s, _pos=None):
    if s >= 1:
        return f"{s:g} s"
    if s >= 1e-3:
        return f"{s * 1e3:g} ms"
    return f"{s * 1e6:g} us"


def bytes_label(b, _pos=None):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:g} {unit}"
    return f"{b:g} B"


def log_axes(plt, ax, xlabel, ylabel, xformat):
    from matplotlib.ticker import FuncFormatter, LogLocator
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, fmt in ((ax.xaxis, xformat), (ax.yaxis, seconds_label)):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(FuncFormatter(fmt))
    ax.grid(True, which="major", color="#dddddd", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def medians(ax, xs, rows, color, label, dx=1.0, filled=True):
    """Median points with a bar down (or up) to the best of N, joined by a thin line."""
    ys = [r["median_s"] for r in rows]
    xs = [x * dx for x in xs]
    ax.vlines(xs, ys, [r["best_s"] for r in rows], color=color, linewidth=1)
    ax.plot(xs, ys, "o", color=color if filled else "none", markeredgecolor=color,
            markersize=5, label=label)


def dense_plot(plt, label, d, path):
    p, a, b = params(d)
    rows = {op: sorted((r for r in d["rows"] if r["section"] == "dense" and r["op"] == op),
                       key=lambda r: r["bytes"]) for op in (RING, IALL, ALL)}
    link = d.get("link_bits_per_s", 0) or 0
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    grid = dense_sizes(d)
    ax.plot(grid, [d["model"][("ring", m)] for m in grid], "--", color=COLORS["model"],
            linewidth=1.5, label="ring model (calibrated)")
    if link > 0:
        ax.plot(grid, [2 * (p - 1) / p * m * 8 / link for m in grid], "--",
                color=COLORS["bound"], linewidth=1, label=f"link bound ({link / 1e9:g} Gbit/s)")
    for i, op in enumerate((RING, IALL, ALL)):
        xs = [r["bytes"] for r in rows[op]]
        ax.plot(xs, [r["median_s"] for r in rows[op]], color=COLORS[op], linewidth=1)
        medians(ax, xs, rows[op], COLORS[op], op, dx=1.06 ** (i - 1))
    log_axes(plt, ax, "message size per rank (bytes)", "median time (bar: best)", bytes_label)
    ax.set_title(f"Dense allreduce, {label} ({p} ranks)", loc="left")
    handles, labels = ax.get_legend_handles_labels()
    n = len(labels)
    order = [i for i in range(n) if labels[i] in (RING, IALL, ALL)]  # points, then the lines
    order += [i for i in range(n) if i not in order]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper left",
              bbox_to_anchor=(1.02, 1), frameon=False,
              title=f"alpha {a * 1e3:.2f} ms, beta {b * 1e9:.2f} ns/B", title_fontsize=8)
    save(plt, fig, path)


def sparse_plot(plt, label, d, path):
    rows, gatherv = sparse_rows(d)
    dens = [density(r) for r in rows]
    dense = {op: find(d, "dense", op, FULL) for op in (RING, IALL, ALL)}
    grid, message, per_pair, switch = sparse_line(d)
    line = [(dn, d["model"][("sparse", m)]) for dn, m in zip(grid, message)]
    if switch < 1:
        ring = d["model"][("ring", FULL)]
        line += [(switch, ring), (1.0, ring)]
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    calibration = "own calibration" if "sparse_calibrated" in d else "ring-calibrated"
    ax.plot(*zip(*line), "--", color=COLORS["sparse"], linewidth=1.5,
            label=f"its model ({per_pair:.1f} B/pair, {calibration})")
    if switch < 1:
        ax.axvline(switch, color="#999999", linestyle=":", linewidth=1)
        ax.annotate(f"dense switch (d = {switch:.2f})", (switch, 0), xycoords=("data", "axes fraction"),
                    xytext=(-4, 6), textcoords="offset points", ha="right", fontsize=8,
                    color="#666666")
    ax.plot(dens, [r["median_s"] for r in rows], color=COLORS["sparse"], linewidth=1)
    medians(ax, dens, rows, COLORS["sparse"], "sparse_allgather (exact top-k)")
    if gatherv:
        ax.plot([density(r) for r in gatherv], [r["median_s"] for r in gatherv], "o",
                color="none", markeredgecolor=COLORS["sparse"], markersize=5,
                label="the same with MPI_Iallgatherv")
    for i, (op, r) in enumerate(dense.items()):
        ax.axhline(r["median_s"], color=COLORS[op], linestyle=(0, (2, 3)), linewidth=1)
        ax.plot([1.0 * 1.06 ** (i - 1)], [r["median_s"]], "o", color=COLORS[op], markersize=5,
                label="dense: " + {RING: "gradcomp ring", IALL: "MPI_Iallreduce",
                                   ALL: "MPI_Allreduce"}[op])
    allreduce = dense[ALL]["median_s"]
    for r, dn in zip(rows, dens):
        ax.annotate(f"{allreduce / r['median_s']:.1f}x", (dn, r["median_s"]),
                    xytext=(6, 6), textcoords="offset points", fontsize=8)
    log_axes(plt, ax, "density (1 = dense 64 MiB)", "median time (bar: best)",
             lambda x, _pos=None: f"{x:g}")
    ax.set_title(f"Sparse allgather vs dense allreduce, 2^24 floats, {label}", loc="left")
    handles, labels = ax.get_legend_handles_labels()
    first = [labels.index("sparse_allgather (exact top-k)")]
    rest = [i for i in range(len(labels)) if i not in first]
    ax.legend([handles[i] for i in first + rest], [labels[i] for i in first + rest],
              loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False,
              title="labels: MPI_Allreduce / sparse", title_fontsize=8)
    save(plt, fig, path)


def ratio_plot(plt, runs, path):
    cols = [("ring", "gradcomp\nring"), ("iallreduce", "MPI_\nIallreduce"),
            ("allreduce", "MPI_\nAllreduce"), ("sparse", "sparse\nd=0.1"),
            ("ps-old", "PS\nold model"), ("ps", "PS\nnew model"), ("leader-old", "leader\nold model"),
            ("leader", "leader\nnew model"), ("rs", "reduce_\nscatter")]
    marks = {"local2": "#9467bd", "local4": "#8c564b", "emu2-1g": "#2ca02c", "emu4-1g": "#1f77b4",
             "emu2-10g": "#ff7f0e"}
    lo, hi = 0.125, 16.0
    names = [n for n, _ in cols]
    fig, ax = plt.subplots(figsize=(8.2, 4.2))
    ax.axhspan(0.75, 1.25, color="#e8f4e8", zorder=0)
    ax.axhline(1.0, color="#888888", linewidth=0.8, zorder=1)
    for k, (key, (label, d)) in enumerate(runs.items()):
        xs, ys = [], []
        for r in large_rows(d):
            c = column(r)
            series = [(c, model(d, r))]
            if c in ("ps", "leader"):
                series.append((c + "-old", model(d, r, before=True)))
            for name, m in series:
                xs.append(names.index(name) + (k - 2) * 0.09)
                ys.append(min(max(r["median_s"] / m, lo), hi))  # beyond the frame: at its edge
        ax.plot(xs, ys, "o", color=marks[key], alpha=0.8, markersize=5, label=label, zorder=2)
    ax.set_yscale("log", base=2)
    ax.set_ylim(lo, hi)
    ticks = [0.125, 0.25, 0.5, 1, 2, 4, 8, 16]
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.minorticks_off()
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_xticks(range(len(cols)), [n for _, n in cols], fontsize=8)
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.8, zorder=0)
    ax.set_axisbelow(True)
    ax.set_title("Measured / model, every row of at least 1 MiB (band: within 25 %)", loc="left")
    ax.set_xlabel("log scale; values beyond the frame are drawn at its edge", fontsize=8,
                  loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    save(plt, fig, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "docs", "img", "transport-benchmarks")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.path.join(here, "..", "lab", "results", "2026-11-23-transport-benchmarks",
                                "data")
    ap.add_argument("--data", default=default_data,
                    help="folder with CONFIG.json (default: the archived run, "
                         "lab/results/2026-11-23-transport-benchmarks/data)")
    ap.add_argument("--out", default=default_out,
                    help="folder for the SVGs (default: docs/img/transport-benchmarks)")
    ap.add_argument("--tables", action="store_true", help="print the Markdown ratio tables")
    ap.add_argument("--cost-tool", metavar="PATH",
                    help="the gradcomp-cost program (default: build/bin/gradcomp-cost, "
                         "else gradcomp-cost on PATH)")
    a = ap.parse_args()
    runs = load(a.data)
    if not runs:
        print(f"plot-transport-benchmarks: no CONFIG.json in {a.data}", file=sys.stderr)
        return 2
    run_cost_tool(find_cost_tool(a.cost_tool), runs)
    plt = pyplot()
    os.makedirs(a.out, exist_ok=True)
    written = []
    for key, (label, d) in runs.items():
        for kind, fn in (("dense", dense_plot), ("sparse", sparse_plot)):
            path = os.path.join(a.out, f"{kind}-{key}.svg")
            fn(plt, label, d, path)
            written.append(path)
    path = os.path.join(a.out, "model-ratios.svg")
    ratio_plot(plt, runs, path)
    written.append(path)
    if a.tables:
        print(tables(runs), end="")
    print("written: " + ", ".join(os.path.relpath(w) for w in written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
