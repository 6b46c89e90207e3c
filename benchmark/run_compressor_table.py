#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the compressor benchmarks and turns one run into a results folder of the archive.

Runs gradcomp_bench_torch_topk when it was built (the compressor cases plus torch::topk in one
process), else gradcomp_bench_compressors, with JSON output; prints Markdown tables whose ratios
all come from that one run (ours against std::nth_element, torch::topk and the memory floors),
and writes them with an SVG plot into --out (default lab/results/<today>-compressor-table/:
benchmarks.md and the plot); the headline of docs/benchmarks.md is then updated from it by
hand. Standard library only: run it with any Python 3 (Debian's /usr/bin/python3 is fine).

  benchmark/run_compressor_table.py                 # build-bench/, full sweep (~10 min, 2 cores)
  benchmark/run_compressor_table.py --build         # configure and build first
  benchmark/run_compressor_table.py --json out.json # re-render from a saved run, no benchmark
  benchmark/run_compressor_table.py --quick --no-write   # n <= 2^20 smoke run, print only
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEADLINE_LOG2N = 24
HEADLINE_DENSITY = "0.01"
DISTRIBUTIONS = ["normal", "student_t3"]
DENSITIES = ["0.1", "0.01", "0.001"]
PLAIN = ["exact_top_k", "sampled_threshold", "gaussian_threshold", "lognormal_threshold",
         "reused_threshold_reuse", "reused_threshold_exact", "dense_fp16"]
SHORT = {
    "exact_top_k": "exact", "sampled_threshold": "sampled", "gaussian_threshold": "gaussian",
    "lognormal_threshold": "lognormal", "reused_threshold_reuse": "reused (reuse)",
    "reused_threshold_exact": "reused (exact)", "dense_fp16": "dense fp16",
}
KEEP_MARKER = "<!-- Generated above; hand-written below (kept by run_compressor_table.py). -->\n"
# the cases the targets compare, rerun with repetitions in random interleaved order
HEADLINE_METHODS = ["exact_top_k", "exact_top_k_ef", "reused_threshold_reuse",
                    "reused_threshold_reuse_ef", "nth_element", "torch_topk"]
HEADLINE_REPETITIONS = 7
TARGET_EXACT_VS_TORCH = 20.0   # exact top-k at least 20x faster than torch::topk
TARGET_EXACT_VS_FLOOR = 4.0    # ... and within 4x of the streaming read
TARGET_EF_VS_FLOOR = 1.5       # known-threshold selection + fused EF within 1.5x of r += g


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def capture(cmd):
    try:
        return subprocess.run(cmd, check=True, text=True, capture_output=True,
                              cwd=REPO).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def load_average():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def machine_info():
    lscpu = capture(["lscpu"])
    fields = {}
    for line in lscpu.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    commit = capture(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = capture(["git", "status", "--porcelain", "--untracked-files=no"])
    if not commit:
        commit = "none (repository has no commit yet)"
    elif dirty:
        commit += " (with uncommitted changes)"
    return {
        "cpu": fields.get("Model name", platform.processor() or "unknown"),
        "cpus": fields.get("CPU(s)", "?"),
        "l2": fields.get("L2 cache", "?"),
        "l3": fields.get("L3 cache", "?"),
        "hypervisor": fields.get("Hypervisor vendor", ""),
        "kernel": platform.release(),
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def build(build_dir):
    run(["cmake", "-S", str(REPO), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"],
        stdout=sys.stderr)
    targets = ["gradcomp_bench_compressors"]
    cache = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    if re.search(r"^Torch_DIR:PATH=.*Torch$", cache, re.M):
        targets.append("gradcomp_bench_torch_topk")
    run(["cmake", "--build", str(build_dir), "-j2", "--target", *targets], stdout=sys.stderr)


def find_binary(build_dir):
    bench_dir = build_dir / "benchmark"
    for name in ("gradcomp_bench_torch_topk", "gradcomp_bench_compressors"):
        if (bench_dir / name).exists():
            return bench_dir / name
    sys.exit(f"no benchmark binary in {bench_dir}: build it first (or pass --build)")


def run_benchmarks(binary, min_time, out_json, extra):
    cmd = [str(binary), f"--benchmark_min_time={min_time}", f"--benchmark_out={out_json}",
           "--benchmark_out_format=json", *extra]
    print("running:", " ".join(cmd), file=sys.stderr)
    before = load_average()
    start = datetime.datetime.now()
    run(cmd, stdout=sys.stderr)
    seconds = (datetime.datetime.now() - start).total_seconds()
    return {"load_before": before, "load_after": load_average(), "seconds": round(seconds),
            "binary": binary.name, "min_time": min_time}


def headline_filter():
    n, d = HEADLINE_LOG2N, re.escape(HEADLINE_DENSITY)
    return (f"--benchmark_filter=^((read_floor|ef_floor)/[a-z0-9_]+/{n}/|"
            f"({'|'.join(HEADLINE_METHODS)})/[a-z0-9_]+/{n}/{d}/)")


def parse(results):
    """{(method, dist, log2n, density or None): entry}. Repetitions of a case merge into one
    entry: min_ms = best call over all of them, median_ms = median of their medians, and
    median_range = (lowest, highest) of their medians."""
    runs = {}
    for b in results["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        parts = b["name"].split("/")
        if parts[-1] == "real_time":
            parts = parts[:-1]
        method, dist, log2n = parts[0], parts[1], int(parts[2])
        density = parts[3] if len(parts) > 3 else None
        runs.setdefault((method, dist, log2n, density), []).append(b)
    table = {}
    for key, entries in runs.items():
        merged = dict(entries[0])
        if len(entries) > 1:
            medians = sorted(e.get("median_ms", e["real_time"]) for e in entries)
            merged["min_ms"] = min(e.get("min_ms", e["real_time"]) for e in entries)
            merged["median_ms"] = medians[len(medians) // 2]
            merged["median_range"] = (medians[0], medians[-1])
            merged["repetitions"] = len(entries)
        table[key] = merged
    return table


class Results:
    def __init__(self, table, stat):
        self.table = table
        self.stat = stat  # "min_ms" or "median_ms"
        self.sizes = sorted({k[2] for k in table})

    def entry(self, method, dist, log2n, density=None):
        if method in ("read_floor", "ef_floor", "dense_fp16", "dense_fp16_ef"):
            density = None
        return self.table.get((method, dist, log2n, density))

    def ms(self, method, dist, log2n, density=None, stat=None):
        e = self.entry(method, dist, log2n, density)
        if e is None:
            return None
        return e.get(stat or self.stat, e["real_time"])

    def floor_of(self, method):
        return "ef_floor" if method.endswith("_ef") else "read_floor"


def fmt_ms(v):
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_x(v):
    if v is None:
        return "–"
    return f"{v:.0f}×" if v >= 100 else f"{v:.1f}×" if v >= 10 else f"{v:.2f}×"


def ratio(a, b):
    return a / b if a is not None and b else None


def flag(entry):
    """† when the estimator fell back to exact top-k in some timed call."""
    return "†" if entry is not None and entry.get("fallback", 0) > 0 else ""


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def targets_table(res, sweep=None):
    """The issue's targets at n = 2^24, density 0.01, from `res` (the repeated, interleaved
    headline pass when there is one). Verdicts use the median call; the best-call ratio and the
    ratio the sweep measured are shown beside it."""
    n, d = HEADLINE_LOG2N, HEADLINE_DENSITY
    sweep = sweep if sweep is not None and sweep is not res else None
    rows = ["| Target (n = 2^24, density 0.01) | Data | Median call, ms | Ratio (median) "
            "| Ratio (best calls) | Ratio in the sweep (median) | Goal | Verdict |",
            "|---|---|---|---|---|---|---|---|"]

    def line(label, dist, num, den, bigger_is_better, goal, limit, num_density=d, den_density=d):
        a_med = res.ms(num, dist, n, num_density, "median_ms")
        b_med = res.ms(den, dist, n, den_density, "median_ms")
        a_best = res.ms(num, dist, n, num_density, "min_ms")
        b_best = res.ms(den, dist, n, den_density, "min_ms")
        r_med, r_best = ratio(a_med, b_med), ratio(a_best, b_best)
        r_sweep = None
        if sweep is not None:
            r_sweep = ratio(sweep.ms(num, dist, n, num_density, "median_ms"),
                            sweep.ms(den, dist, n, den_density, "median_ms"))
        ok = None
        if limit is not None and r_med is not None:
            ok = r_med >= limit if bigger_is_better else r_med <= limit
        rows.append(f"| {label} | {dist} | {fmt_ms(a_med)} / {fmt_ms(b_med)} | {fmt_x(r_med)} | "
                    f"{fmt_x(r_best)} | {fmt_x(r_sweep)} | {goal} | "
                    f"{verdict(ok) if limit is not None else '–'} |")

    for dist in DISTRIBUTIONS:
        if res.entry("exact_top_k", dist, n, d) is None:
            continue
        line("torch::topk / exact_top_k", dist, "torch_topk", "exact_top_k", True,
             f"≥ {TARGET_EXACT_VS_TORCH:.0f}×", TARGET_EXACT_VS_TORCH)
        line("exact_top_k / streaming read", dist, "exact_top_k", "read_floor", False,
             f"≤ {TARGET_EXACT_VS_FLOOR:.0f}×", TARGET_EXACT_VS_FLOOR, den_density=None)
        line("reused_threshold reuse call + fused EF / (r += g)", dist,
             "reused_threshold_reuse_ef", "ef_floor", False, f"≤ {TARGET_EF_VS_FLOOR}×",
             TARGET_EF_VS_FLOOR, den_density=None)
        line("std::nth_element / exact_top_k", dist, "nth_element", "exact_top_k", True, "–",
             None)
        line("exact_top_k + fused EF / (r += g)", dist, "exact_top_k_ef", "ef_floor", False,
             "–", None, den_density=None)
    return "\n".join(rows)


def headline_throughput_table(res):
    n, d = HEADLINE_LOG2N, HEADLINE_DENSITY
    methods = (["read_floor", "ef_floor"] + [m for p in PLAIN for m in (p, p + "_ef")] +
               ["nth_element", "torch_topk"])
    rows = ["| Case | Data | Median call ms | Best call ms | Gelem/s | GB/s (min traffic) "
            "| × floor "
            "| k sent / k | exact calls | fallbacks |", "|---|---|---|---|---|---|---|---|---|---|"]
    for dist in DISTRIBUTIONS:
        for m in methods:
            e = res.entry(m, dist, n, d)
            if e is None:
                continue
            median = res.ms(m, dist, n, d, "median_ms")
            best = res.ms(m, dist, n, d, "min_ms")
            per_elem_bytes = 12 if (m.endswith("_ef") or m == "ef_floor") else 4
            n_el = 2 ** n
            gel = n_el / (median * 1e-3) / 1e9 if median else None
            gbs = n_el * per_elem_bytes / (median * 1e-3) / 1e9 if median else None
            floor = None if m in ("read_floor", "ef_floor") else ratio(
                median, res.ms(res.floor_of(m), dist, n, None, "median_ms"))
            k_ratio = f"{e['k_ratio']:.3f}" if "k_ratio" in e else "–"
            exact = f"{e['exact']:.0%}" if "exact" in e else "–"
            fallback = f"{e['fallback']:.0%}" if "fallback" in e else "–"
            rows.append(f"| {m} | {dist} | {fmt_ms(median)} | {fmt_ms(best)} | "
                        f"{gel:.2f} | {gbs:.1f} | {fmt_x(floor)} | {k_ratio} | {exact} | "
                        f"{fallback} |")
    return "\n".join(rows)


def exact_vs_baselines_table(res, dist):
    rows = [f"| log2 n | density | read floor ms | exact_top_k ms | exact / floor "
            f"| nth_element ms | nth / exact | torch::topk ms | torch / exact |",
            "|---|---|---|---|---|---|---|---|---|"]
    for n in res.sizes:
        for d in DENSITIES:
            exact = res.ms("exact_top_k", dist, n, d)
            floor = res.ms("read_floor", dist, n)
            nth = res.ms("nth_element", dist, n, d)
            torch = res.ms("torch_topk", dist, n, d)
            rows.append(f"| {n} | {d} | {fmt_ms(floor)} | {fmt_ms(exact)} | "
                        f"{fmt_x(ratio(exact, floor))} | {fmt_ms(nth)} | "
                        f"{fmt_x(ratio(nth, exact))} | {fmt_ms(torch)} | "
                        f"{fmt_x(ratio(torch, exact))} |")
    return "\n".join(rows)


def compressors_table(res, dist, error_feedback):
    suffix = "_ef" if error_feedback else ""
    floor_name = "ef_floor" if error_feedback else "read_floor"
    head = "r += g" if error_feedback else "read floor"
    cols = [p + suffix for p in PLAIN]
    rows = [f"| log2 n | density | {head} ms | " +
            " | ".join(SHORT[p] for p in PLAIN) + " |",
            "|---|---|---|" + "---|" * len(cols)]
    for n in res.sizes:
        for d in DENSITIES:
            floor = res.ms(floor_name, dist, n)
            cells = []
            for m in cols:
                v = res.ms(m, dist, n, d)
                mark = flag(res.entry(m, dist, n, d))
                cells.append(f"{fmt_ms(v)} ({fmt_x(ratio(v, floor))}){mark}")
            rows.append(f"| {n} | {d} | {fmt_ms(floor)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def svg_plot(res, dist, density, path):
    """Time per call against n, log-log, for the main cases (hand-written SVG)."""
    series = [("read_floor", "streaming read (floor)", "#7f7f7f", "4 3"),
              ("ef_floor", "r += g (EF floor)", "#bcbd22", "4 3"),
              ("exact_top_k", "gradcomp exact_top_k", "#1f77b4", ""),
              ("reused_threshold_reuse", "gradcomp reused_threshold (reuse)", "#2ca02c", ""),
              ("reused_threshold_reuse_ef", "reused_threshold (reuse) + fused EF", "#17becf", ""),
              ("nth_element", "std::nth_element on |x| copy", "#ff7f0e", ""),
              ("torch_topk", "torch::topk(x.abs(), k)", "#d62728", "")]
    points = {}
    for m, *_ in series:
        pts = [(n, res.ms(m, dist, n, density)) for n in res.sizes]
        pts = [(n, v) for n, v in pts if v]
        if pts:
            points[m] = pts
    if not points:
        return False
    width, height, left, right, top, bottom = 760, 460, 70, 250, 40, 50
    xs = res.sizes
    all_v = [v for pts in points.values() for _, v in pts]
    y_lo = math.floor(math.log10(min(all_v)))
    y_hi = math.ceil(math.log10(max(all_v)))
    pw, ph = width - left - right, height - top - bottom

    def px(n):
        return left + (n - xs[0]) / max(1, xs[-1] - xs[0]) * pw

    def py(v):
        return top + (y_hi - math.log10(v)) / max(1, y_hi - y_lo) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14">Time per call, {dist} data, density '
           f'{density} (median call, both cores)</text>']
    for e in range(y_lo, y_hi + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
                   f'stroke="#ddd"/>')
        label = f"{10 ** e:g} ms"
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for n in xs:
        x = px(n)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">2^{n}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">'
               f'n (fp32 elements)</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#333"/>')
    ly = top + 10
    for m, label, color, dash in series:
        if m not in points:
            continue
        coords = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in points[m])
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                   f'stroke-width="2"{dash_attr}/>')
        for n, v in points[m]:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="2.5" fill="{color}"/>')
        x0 = left + pw + 15
        out.append(f'<line x1="{x0}" y1="{ly}" x2="{x0 + 25}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{x0 + 31}" y="{ly + 4}">{label}</text>')
        ly += 20
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    return True


def render(res, head, context, info, run_info, out_dir):
    n_h = HEADLINE_LOG2N
    lines = []
    add = lines.append
    add("# Compressor benchmarks (CPU)")
    add("")
    add("Generated by `benchmark/run_compressor_table.py` from one invocation of "
        f"`{run_info.get('binary', '?')}` (a sweep over every case, then a repeated pass over "
        "the cases the targets compare); every ratio compares cases measured in the same "
        "process, on the same buffers. Rerun with the commands under [Reproduce](#reproduce); "
        "do not edit the numbers above the hand-written section by hand.")
    add("")
    add("## Setup")
    add("")
    add(f"- Date: {info['date']}; gradcomp commit: {info['commit']}; "
        f"gradcomp {context.get('gradcomp_version', '?')}.")
    add(f"- CPU: {info['cpu']}, {info['cpus']} CPUs"
        f"{' (' + info['hypervisor'] + ' guest)' if info['hypervisor'] else ''}; "
        f"L2 {info['l2']}, L3 {info['l3']}; Linux {info['kernel']}.")
    add(f"- Threads: gradcomp {context.get('gradcomp_threads', '?')} (its pool: "
        f"std::thread::hardware_concurrency() = {context.get('hardware_concurrency', '?')}, "
        f"the default); torch::get_num_threads() = {context.get('torch_threads', '?')} "
        f"(LibTorch {context.get('torch_version', 'not built')}'s default here, left as a user "
        "gets it: a 1-D topk on CPU runs on one thread whatever the setting, as it parallelises "
        "across slices only, and raising it to 2 made torch slower on this loaded machine); "
        "std::nth_element: 1.")
    add(f"- Build: {context.get('gradcomp_bench_build', '?')}, {context.get('compiler', '?')} "
        "(no `-march`: the library as a default Release build compiles it, SSE2 only); Google "
        "Benchmark "
        f"{context.get('library_version', '1.7.1') or '1.7.1'}, "
        f"`--benchmark_min_time={run_info.get('min_time', '?')}`; the sweep took "
        f"{run_info.get('seconds', '?')} s. (Its banner's \"Library was built as DEBUG\" is "
        "about Debian's libbenchmark package, not about this code.)")
    add(f"- Load average before / after the run: {run_info.get('load_before', '?')} / "
        f"{run_info.get('load_after', '?')}. **This 2-core machine is shared** with other "
        "engineers' builds and tests (see the load averages), so absolute times are noisy: "
        "tables report the **median call** of a case (the median of its timed calls' wall "
        "times; Google Benchmark's own figure is their mean, which preemption inflates), and "
        "ratios only compare cases run in the same process, close in time. The raw JSON "
        "(mean, median and best call of every case) is written next to the binaries.")
    add(f"- Data: {context.get('data', '?')}. n = 2^16 … 2^26 in steps of ×4; density "
        "0.1 / 0.01 / 0.001 (k = ceil(density·n)).")
    add("")
    add("## Targets at n = 2^24, density 0.01")
    add("")
    add(targets_table(head, res))
    add("")
    if head is not res:
        h = run_info.get("headline", {})
        add(f"These cases were run again after the sweep, {HEADLINE_REPETITIONS} repetitions "
            "each in random interleaved order (`--benchmark_repetitions`, "
            "`--benchmark_enable_random_interleaving`), so that the machine's load drifts over "
            "all of them alike (load average before / after: "
            f"{h.get('load_before', '?')} / {h.get('load_after', '?')}). Verdicts use the "
            "median of the repetitions' median calls; *best calls* is the ratio of the "
            "fastest single calls, what the code does when the machine leaves it alone. "
            "Spread of the repetitions' medians, ms:")
        add("")
        spread = []
        for key in sorted(head.table):
            e = head.table[key]
            if "median_range" in e:
                lo, hi = e["median_range"]
                spread.append(f"{key[0]}/{key[1]}: {fmt_ms(lo)}–{fmt_ms(hi)}")
        add("; ".join(spread) + ".")
        add("")
    add("Floors: *streaming read* is one vectorised pass over the same 64 MiB buffer (a sum "
        "with 16 accumulators) on gradcomp's thread pool with gradcomp's 64 Ki-element "
        "chunks, both cores; *r += g* is the error-feedback floor (read g and r, write r: 12 "
        "bytes per element), same pool. *reused_threshold (reuse)* is a call that applies "
        "the threshold remembered from the last exact call (interval = max, so every timed "
        "call reuses it); its EF variant is `compress_accumulate(residual, grad, out)` with "
        "the residual restored to the same start before every call (outside the timed "
        "region; the floor is timed the same way).")
    add("")
    add(f"## Every case at n = 2^{n_h}, density {HEADLINE_DENSITY}")
    add("")
    add("GB/s counts the minimum traffic (4 bytes per element for compress and the read floor, "
        "12 for error feedback and its floor), so it reads as a fraction of memory bandwidth. "
        "× floor: against the read floor (compress) or r += g (`_ef`). *k sent / k*, *exact "
        "calls* and *fallbacks* are averages over the timed calls (a fallback is the guard "
        "rejecting an estimate and running exact top-k).")
    add("")
    add(headline_throughput_table(res))
    add("")
    plot = out_dir / "compressor_time_normal_d0.01.svg"
    if svg_plot(res, "normal", HEADLINE_DENSITY, plot):
        add(f"![time per call against n]({plot.name})")
        add("")
    add("## exact_top_k against the baselines, all sizes")
    add("")
    add("× columns: exact / floor is how far exact top-k is from one read of the input; "
        "nth / exact and torch / exact are speed-ups of gradcomp over the baseline. "
        "n ≤ 2^22 fits the 32 MiB L3, so the floor there is cache, not DRAM, bandwidth and "
        "thread-pool wake-up dominates the smallest sizes.")
    for dist in DISTRIBUTIONS:
        add("")
        add(f"### {dist}")
        add("")
        add(exact_vs_baselines_table(res, dist))
    add("")
    add("## All compressors, median call in ms (× read floor)")
    add("")
    add("† = the guard rejected the estimate in some timed calls and exact top-k ran "
        "(gaussian_threshold on heavy tails, lognormal_threshold on these symmetric "
        "distributions: see docs/compressors.md, 'Estimator accuracy'); such a cell costs the fit plus an exact top-k. "
        "dense fp16 does not depend on the density.")
    for dist in DISTRIBUTIONS:
        add("")
        add(f"### {dist}")
        add("")
        add(compressors_table(res, dist, False))
    add("")
    add("## With fused error feedback, median call in ms (× r += g floor)")
    add("")
    add("`compress_accumulate(residual, grad, out)`; the floor reads g and r and writes r.")
    for dist in DISTRIBUTIONS:
        add("")
        add(f"### {dist}")
        add("")
        add(compressors_table(res, dist, True))
    add("")
    add("## Reproduce")
    add("")
    add("```sh")
    add("cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release")
    add("cmake --build build-bench -j2 --target gradcomp_bench_compressors "
        "gradcomp_bench_torch_topk")
    add("/usr/bin/python3 benchmark/run_compressor_table.py   # runs, prints, rewrites this file")
    add("# one case family by hand, e.g.:")
    add("build-bench/benchmark/gradcomp_bench_compressors "
        "--benchmark_filter='exact_top_k/normal/24/'")
    add("```")
    add("")
    add("`gradcomp_bench_torch_topk` is built only when LibTorch is found and is a superset "
        "of `gradcomp_bench_compressors` (same source, plus torch::topk). The benchmarks are "
        "not part of ctest.")
    add("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", type=Path, default=REPO / "build-bench")
    ap.add_argument("--build", action="store_true", help="configure and build the benchmarks")
    ap.add_argument("--min-time", default="0.1", help="--benchmark_min_time, seconds")
    ap.add_argument("--quick", action="store_true", help="only n <= 2^20 (smoke run)")
    ap.add_argument("--json", type=Path, help="render from this saved run instead of running")
    ap.add_argument("--stat", default="median_ms", choices=["median_ms", "min_ms"],
                    help="per-call statistic of the sweep tables (default: median call)")
    ap.add_argument("--no-write", action="store_true", help="print only; write no files")
    ap.add_argument("--out", type=Path, default=None,
                    help="results folder (default lab/results/<today>-compressor-table)")
    args = ap.parse_args()

    if args.json:
        json_path = args.json
    else:
        if args.build:
            build(args.build_dir)
        binary = find_binary(args.build_dir)
        json_path = args.build_dir / "benchmark" / "compressor_results.json"
        extra = ["--benchmark_filter=/(16|18|20)/"] if args.quick else []
        run_info = run_benchmarks(binary, args.min_time, json_path, extra)
        if not args.quick:
            headline_info = run_benchmarks(
                binary, args.min_time, json_path.with_name("compressor_headline.json"),
                [headline_filter(), f"--benchmark_repetitions={HEADLINE_REPETITIONS}",
                 "--benchmark_enable_random_interleaving=true"])
            run_info["headline"] = headline_info
        json_path.with_suffix(".run.json").write_text(json.dumps(run_info))
    meta = json_path.with_suffix(".run.json")
    run_info = json.loads(meta.read_text()) if meta.exists() else {}
    results = json.loads(json_path.read_text())
    res = Results(parse(results), args.stat)
    head_path = json_path.with_name("compressor_headline.json")
    head = res
    if head_path.exists() and "headline" in run_info:
        head = Results(parse(json.loads(head_path.read_text())), args.stat)
    context = dict(results.get("context", {}))
    info = machine_info()
    if "date" in context:
        info["date"] = context["date"]

    print(targets_table(head, res))
    print()
    for dist in DISTRIBUTIONS:
        print(f"exact_top_k against the baselines ({dist}):")
        print(exact_vs_baselines_table(res, dist))
        print()
    if not args.no_write:
        out_dir = args.out or (REPO / "lab" / "results" /
                               f"{datetime.date.today().isoformat()}-compressor-table")
        out_dir.mkdir(parents=True, exist_ok=True)
        doc = out_dir / "benchmarks.md"
        # the hand-written analysis after the marker survives regeneration
        kept = ""
        if doc.exists():
            old = doc.read_text()
            if KEEP_MARKER in old:
                kept = old[old.index(KEEP_MARKER) + len(KEEP_MARKER):]
        doc.write_text(render(res, head, context, info, run_info, out_dir) + KEEP_MARKER + kept)
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
