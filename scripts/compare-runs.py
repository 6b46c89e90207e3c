#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Side-by-side comparison of training runs measured in one invocation (the main job's last step).

    scripts/compare-runs.py --out DIR [--since UNIX_SECONDS]
                            [--target-accuracy A | --target-label LABEL] REPORT.json...

Each report is a gradcomp-train --report or a scripts/ddp_train.py --report (PyTorch DDP, same
layout, "peer": "pytorch-ddp"). Every figure comes from these reports: no number recorded on
another day or machine enters a ratio. With --since, a report file older than that moment is
refused (the main job passes the moment it started, so every ratio is between runs of that
invocation).

Roles are read from each report's config: transport "none" is a no-communication floor; method
"dense" (gradcomp) or DDP's "dense" exchange is a dense baseline; everything else is compared with
every dense baseline (iteration time) and with the target accuracy (time to reach it). The target
is --target-accuracy A (a fraction: the runs trained to it, each stopping when it got there; the
headline is every run's time to it against every other run's), else the final test accuracy of
the run labelled --target-label (default: the PyTorch DDP dense run, else the first dense run). Prints a Markdown table and summary (also DIR/comparison.md) and writes
DIR/accuracy-vs-time.svg (with --x epochs: DIR/accuracy-vs-epochs.svg, the curves against epochs
trained, for runs whose iterations differ in cost; with --bars also DIR/per-iteration.svg, ms per
iteration and bytes sent per rank per iteration as bars). Python 3 and matplotlib (Debian:
python3-matplotlib, for /usr/bin/python3; only the plot needs it).
"""
import argparse
import io
import json
import math
import os
import sys


def get(report, *path, default=None):
    node = report
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def mean_ms(report, key):
    return get(report, "per_iteration", key, "mean_over_ranks")


def is_floor(r):
    return get(r, "config", "transport") == "none"


def is_dense(r):
    return not is_floor(r) and get(r, "config", "method") == "dense"


def is_ddp(r):
    return r.get("peer") == "pytorch-ddp"


def time_to_accuracy(report, target):
    """Training seconds at the first evaluation reaching `target`, or None."""
    for point in report["curve"]:
        if point["test_accuracy"] >= target:
            return point["train_seconds"]
    return None


def noncritical_ms(report):
    """--method auto: ms per iteration (rank 0's training time) over the intervals in which no
    merge group was in a critical regime, or None (no such interval, or not an auto run)."""
    intervals = get(report, "auto", "intervals")
    if not intervals or any("train_seconds" not in i for i in intervals):
        return None
    ends = [(i["iteration"], i["train_seconds"]) for i in intervals[1:]]
    ends.append((report["curve"][-1]["iteration"], report["train_seconds"]))
    seconds, iterations = 0.0, 0
    for start, (end_it, end_s) in zip(intervals, ends):
        if not any(start["critical"]) and end_it > start["iteration"]:
            seconds += end_s - start["train_seconds"]
            iterations += end_it - start["iteration"]
    return 1000 * seconds / iterations if iterations else None


def epoch_accuracy(report, epoch):
    for point in report["curve"]:
        if point["epoch"] == epoch and abs(point["epochs_done"] - epoch) < 1e-9:
            return point["test_accuracy"]
    return None


def fmt(v, spec, unit=""):
    return "-" if v is None else f"{v:{spec}}{unit}"


def fmt_pct(a):
    return "-" if a is None else f"{100 * a:.2f} %"


def pick_target(reports, label, common=False, accuracy=0.0):
    """The run whose final accuracy is the target, or a stand-in whose final accuracy is
    `accuracy` (a fixed target) or with `common` the highest accuracy every run with
    communication reaches."""
    if accuracy > 0:
        return {"label": "the target", "final_test_accuracy": accuracy, "curve": [],
                "config": {}, "per_iteration": {}, "fixed_target": True}
    if common:
        reached = min(max(p["test_accuracy"] for p in r["curve"]) for r in reports
                      if not is_floor(r))
        return {"label": "every run's common", "final_test_accuracy": reached, "curve": [],
                "config": {}, "per_iteration": {}}
    if label:
        for r in reports:
            if r["label"] == label:
                return r
        raise SystemExit(f"compare-runs: no report labelled '{label}'")
    for r in reports:
        if is_ddp(r) and is_dense(r):
            return r
    for r in reports:
        if is_dense(r):
            return r
    return reports[0]


def table(reports, target_run):
    target = target_run["final_test_accuracy"]
    rows = []

    def row(name, values):
        rows.append([name] + values)

    row("exchange", ["PyTorch DDP (gloo)" if is_ddp(r) else "gradcomp-train" for r in reports])
    row("ms per iteration (mean over ranks)", [fmt(mean_ms(r, "iteration_ms"), ".1f") for r in reports])
    outside = [noncritical_ms(r) for r in reports]
    if any(v is not None for v in outside):
        row("ms per iteration outside critical phases (method auto; rank 0)",
            [fmt(v, ".1f") for v in outside])
    row("test accuracy before training (same initial weights)",
        [fmt_pct(r["curve"][0]["test_accuracy"]) for r in reports])
    epochs = max(get(r, "config", "epochs", default=0) for r in reports)
    for e in range(1, epochs + 1):
        row(f"test accuracy after epoch {e}", [fmt_pct(epoch_accuracy(r, e)) for r in reports])
    row("training seconds (evaluation excluded)", [f"{r['train_seconds']:.1f}" for r in reports])
    row("evaluation seconds", [fmt(r.get("eval_seconds"), ".1f") for r in reports])
    row("wall seconds (the whole run: start-up and evaluations included)",
        [f"{r['wall_seconds']:.1f} ({r['wall_seconds'] / r['train_seconds']:.2f}x training)"
         if r["train_seconds"] > 0 else f"{r['wall_seconds']:.1f}" for r in reports])
    fixed = target_run.get("fixed_target", False)
    target_name = ("the target" if fixed
                   else "the highest accuracy every run reaches" if not target_run["curve"]
                   else f"{target_run['label']}'s final accuracy")
    row(f"training seconds to reach {100 * target:.2f} % ({target_name})",
        [fmt(time_to_accuracy(r, target), ".1f", " s") if not is_floor(r) else "-"
         for r in reports])
    exchanging = [r for r in reports if not is_floor(r)]
    common = min(max(p["test_accuracy"] for p in r["curve"]) for r in exchanging) if exchanging else 0
    if target_run["curve"] and exchanging and common < target:
        row(f"training seconds to reach {100 * common:.2f} % (the highest accuracy every run reaches)",
            [fmt(time_to_accuracy(r, common), ".1f", " s") if not is_floor(r) else "-"
             for r in reports])

    def compute(r):
        f, b = mean_ms(r, "forward_ms"), mean_ms(r, "backward_ms")
        if f is None or b is None:
            return "-"
        return f"{f + b:.1f}" + (" (backward includes DDP's exchange)" if is_ddp(r) and not is_floor(r) else "")

    row("forward + backward per iteration, ms", [compute(r) for r in reports])
    row("compression per iteration, ms", [fmt(mean_ms(r, "compression_ms"), ".2f") for r in reports])
    row("communication not overlapped per iteration, ms",
        [fmt(mean_ms(r, "exchange_wait_ms"), ".2f") for r in reports])
    row("optimizer step per iteration, ms", [fmt(mean_ms(r, "optimizer_step_ms"), ".2f") for r in reports])

    def sent(r):
        b = get(r, "per_iteration", "bytes_sent", "mean_over_ranks")
        if b is None:
            return "not measured"
        where = get(r, "config", "bytes_measured_on")
        return f"{b / 1e6:.3f} MB" + (f" (wire, {where})" if where else " (payload)")

    row("bytes sent per rank per iteration", [sent(r) for r in reports])
    row("achieved density", [fmt(r.get("achieved_density"), ".4f") for r in reports])

    def plan(r):
        groups = get(r, "plan", "groups")
        merge = get(r, "config", "merge", default="-")
        return f"{merge}: {len(groups)} groups" if groups is not None else merge

    row("merge plan / buckets", [plan(r) for r in reports])

    def predicted(r):
        # the merge model's iteration: from rank 0's profile, and (--replan-after) from the
        # forward, backward and update times measured in training's first iterations, for the
        # plan that ran after them
        profile = get(r, "plan", "predicted_iteration_seconds")
        measured = get(r, "replan", "predicted_iteration_seconds")
        if profile is None:
            return "-"
        text = f"{1e3 * profile:.1f} (profile)"
        if measured is not None:
            text += f" / {1e3 * measured:.1f} (measured in training)"
        return text

    predictions = [predicted(r) for r in reports]
    if any(p != "-" for p in predictions):
        row("iteration predicted by the merge model, ms", predictions)
    row("replicas identical", ["independent (no exchange)" if is_floor(r)
                               else "yes" if r.get("replicas_identical") else "NO" for r in reports])
    lines = ["| | " + " | ".join(r["label"] for r in reports) + " |",
             "|---" * (len(reports) + 1) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n\n"

    dense = [r for r in reports if is_dense(r)]
    floors = [r for r in reports if is_floor(r)]
    # the run whose time to the target the others are divided by: the target's own run, or with a
    # common target the first report
    if fixed:  # the headline: every run's time to the target against every other run's
        text += time_to_target_matrix(reports, target)
        ref = next((r for r in reports if is_ddp(r) and is_dense(r)), reports[0])
    else:
        ref = target_run if target_run["curve"] else reports[0]
    target_time = time_to_accuracy(ref, target)
    for r in reports:
        if is_floor(r) or r is ref:
            continue
        ms = mean_ms(r, "iteration_ms")
        parts = []
        for d in dense:
            if d is not r:
                parts.append(f"{mean_ms(d, 'iteration_ms') / ms:.2f}x as fast as **{d['label']}**")
        acc = r["final_test_accuracy"]
        text += (f"* **{r['label']}**: iteration {ms:.1f} ms; "
                 + (", ".join(parts) if parts else "-")
                 + f"; final accuracy {100 * acc:.2f} % ({100 * (acc - target):+.2f} points against "
                 f"{target_name}).\n")
        t = time_to_accuracy(r, target)
        if t is None:
            text += f"  It does not reach {100 * target:.2f} % in this run.\n"
        elif target_time:
            text += (f"  It reaches {100 * target:.2f} % after {t:.1f} s of training: "
                     f"{t / target_time:.2f}x of {ref['label']}'s {target_time:.1f} s.\n")
        else:
            text += f"  It reaches {100 * target:.2f} % after {t:.1f} s of training.\n"
    for f in floors:
        f_ms = mean_ms(f, "iteration_ms")
        kin = [r for r in reports if not is_floor(r) and is_ddp(r) == is_ddp(f)]
        for r in kin:
            outside = noncritical_ms(r)
            text += (f"* {r['label']}: iteration {mean_ms(r, 'iteration_ms') / f_ms:.2f}x of "
                     f"{f['label']} ({f_ms:.1f} ms)"
                     + (f"; outside critical phases {outside / f_ms:.2f}x" if outside else "")
                     + ".\n")
    blas = {get(r, "config", "blas", default="?") for r in reports}
    text += f"* BLAS: {', '.join(sorted(blas))}\n"
    return text


def time_to_target_matrix(reports, target):
    """Markdown: each run's training time to `target` and its ratio to every other run's (the
    row run's time / the column run's; "-" where either does not reach it)."""
    runs = [r for r in reports if not is_floor(r)]
    times = [time_to_accuracy(r, target) for r in runs]
    text = (f"**Time to {100 * target:.2f} % test accuracy** (training seconds, evaluations "
            "excluded; each cell: the row's time / the column's):\n\n")
    text += "| run | time to target | " + " | ".join(r["label"] for r in runs) + " |\n"
    text += "|---" * (len(runs) + 2) + "|\n"
    for r, t in zip(runs, times):
        cells = [("-" if t is None or u is None or s is r else f"{t / u:.2f}x")
                 for s, u in zip(runs, times)]
        text += (f"| {r['label']} | " + (f"{t:.1f} s" if t is not None else
                                        f"not reached in {get(r, 'config', 'epochs')} epoch"
                                        + ("" if get(r, "config", "epochs") == 1 else "s"))
                 + " | " + " | ".join(cells) + " |\n")
    return text + "\n"


def accuracy_plot(reports, path, x_key="train_seconds", target=None):
    """Test accuracy against training seconds (or epochs) per run, as an SVG (matplotlib, Agg);
    DDP runs dashed. The vertical range starts at the lowest accuracy above 50 % (rounded down
    to 5 %); lower points are drawn at the frame's edge."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("compare-runs: the plot needs matplotlib (Debian: apt-get install "
                         "python3-matplotlib, then run it with /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    plt.rcParams.update({"svg.hashsalt": "gradcomp", "svg.fonttype": "none", "font.size": 9,
                         "font.family": "sans-serif", "axes.titlesize": 11})
    points = [(p[x_key], p["test_accuracy"]) for r in reports for p in r["curve"]]
    xmax = max(x for x, _ in points) * 1.05 or 1
    high = [y for _, y in points if y > 0.5]
    ymin = max(0.0, math.floor(min(high) * 20) / 20) if high else 0.0
    ymax = 1.0 if ymin < 0.8 else 0.95
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#ff7f0e", "#17becf",
              "#7f7f7f", "#bcbd22", "#e377c2"]
    fig, ax = plt.subplots(figsize=(8.2, 4.6))
    for i, r in enumerate(reports):
        xs = [p[x_key] for p in r["curve"]]
        ys = [min(max(p["test_accuracy"], ymin), ymax) for p in r["curve"]]
        ax.plot(xs, ys, "--" if is_ddp(r) else "-", marker="o", markersize=3.5, linewidth=2,
                color=colors[i % len(colors)], label=r["label"])
    if target:
        ax.axhline(target, color="#444444", linewidth=1, linestyle=":")
        ax.annotate(f"target {100 * target:.1f} %", (xmax, target), xytext=(-4, 3),
                    textcoords="offset points", ha="right", fontsize=8, color="#444444")
    ax.set_xlim(0, xmax)
    ax.set_ylim(ymin, ymax)
    step = 0.05 if ymax - ymin <= 0.3 else 0.1  # ticks at round percentages
    ax.set_yticks([k * step for k in range(math.ceil(ymin / step - 1e-9),
                                           math.floor(ymax / step + 1e-9) + 1)])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{100 * y:.0f} %"))
    ax.grid(True, color="#dddddd", linewidth=0.8)
    ax.set_xlabel("training seconds (evaluation excluded)" if x_key == "train_seconds"
                  else "epochs")
    ax.set_title("Test accuracy vs "
                 f"{'training time' if x_key == 'train_seconds' else 'epochs'} (same invocation)",
                 loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    write_svg(fig, path)
    plt.close(fig)


def bars_plot(reports, path):
    """Ms per iteration and MB sent per rank per iteration (mean over ranks), one bar per run,
    as an SVG (matplotlib, Agg); runs without a figure get no bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.hashsalt": "gradcomp", "svg.fonttype": "none", "font.size": 9,
                         "font.family": "sans-serif", "axes.titlesize": 11})
    labels = [r["label"] for r in reports][::-1]
    panels = [("ms per iteration (mean over ranks)", [mean_ms(r, "iteration_ms") for r in reports]),
              ("MB sent per rank per iteration", [
                  None if (b := get(r, "per_iteration", "bytes_sent", "mean_over_ranks")) is None
                  else b / 1e6 for r in reports])]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 0.45 * len(reports) + 1.2), sharey=True)
    for ax, (title, values) in zip(axes, panels):
        values = values[::-1]
        ax.barh(range(len(values)), [v or 0 for v in values], color="#1f77b4")
        for i, v in enumerate(values):
            ax.text(v or 0, i, " -" if v is None else f" {v:.3g}", va="center")
        ax.set_title(title, loc="left")
        ax.set_xlim(0, max((v for v in values if v is not None), default=1) * 1.25)
        ax.grid(True, axis="x", color="#dddddd", linewidth=0.8)
    axes[0].set_yticks(range(len(labels)), labels)
    write_svg(fig, path)
    plt.close(fig)


def write_svg(fig, path):
    """Saves `fig` as a reproducible SVG (no date, fixed ids) that starts with <svg (matplotlib's
    XML declaration and DOCTYPE left out, as in the hand-written SVGs before)."""
    text = io.StringIO()
    fig.savefig(text, format="svg", metadata={"Date": None}, bbox_inches="tight")
    svg = text.getvalue()
    with open(path, "w") as f:
        f.write(svg[svg.index("<svg"):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for comparison.md and accuracy-vs-time.svg")
    ap.add_argument("--since", type=float, default=None,
                    help="refuse reports written before this moment (seconds since the epoch)")
    ap.add_argument("--target-label", default="", help="the run whose final accuracy is the target")
    ap.add_argument("--target-accuracy", type=float, default=0.0,
                    help="a fixed target test accuracy (fraction) that the runs trained to")
    ap.add_argument("--target-common", action="store_true",
                    help="target: the highest accuracy that every run with communication reaches")
    ap.add_argument("--title", default="", help="a line printed above the table")
    ap.add_argument("--x", choices=["time", "epochs"], default="time",
                    help="the plot's horizontal axis: training seconds or epochs trained")
    ap.add_argument("--bars", action="store_true",
                    help="also DIR/per-iteration.svg: ms per iteration and bytes sent as bars")
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    reports = []
    for p in a.reports:
        try:
            if a.since is not None and os.path.getmtime(p) < a.since:
                print(f"compare-runs: {p} was written before this invocation started: refusing to "
                      "compare runs of different invocations", file=sys.stderr)
                return 2
            with open(p) as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"compare-runs: cannot read {p}: {e}", file=sys.stderr)
            return 2
    os.makedirs(a.out, exist_ok=True)
    if not 0.0 <= a.target_accuracy <= 1.0:
        print(f"compare-runs: --target-accuracy {a.target_accuracy} is outside [0, 1]",
              file=sys.stderr)
        return 2
    target = pick_target(reports, a.target_label, a.target_common, a.target_accuracy)
    text = (a.title + "\n\n" if a.title else "") + table(reports, target)
    print(text, end="")
    with open(os.path.join(a.out, "comparison.md"), "w") as f:
        f.write(text)
    svg_name = "accuracy-vs-time.svg" if a.x == "time" else "accuracy-vs-epochs.svg"
    accuracy_plot(reports, os.path.join(a.out, svg_name),
                  "train_seconds" if a.x == "time" else "epochs_done",
                  a.target_accuracy or None)
    written = [os.path.join(a.out, n) for n in ("comparison.md", svg_name)]
    if a.bars:
        written.append(os.path.join(a.out, "per-iteration.svg"))
        bars_plot(reports, written[-1])
    print(f"\n(written: {', '.join(written)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
