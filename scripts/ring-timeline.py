#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises the ring timelines that `gradcomp-train --ring-trace PREFIX` writes (one set of
files per rank: PREFIX.<rank>.csv, .iterations.csv, .layers.csv; docs/transport-benchmarks.md,
"Dense ring in training"). Medians over the iterations after --skip, per rank:

* when each merge group's allreduce started (start(), before any length check), first posted
  and ended, in ms since the iteration started, and when backward started and ended;
* each group's steps: bytes, duration, wire rate (bytes sent / step duration);
* the rate while backward runs: bytes of the steps of at least --min-step-kib that ended
  before backward did, over the time the link was theirs (smaller steps mostly wait for
  peers), against --link-gbit (the nominal link) and --beta-ns (a calibrated beta); and the
  same rate for the steps that ended after backward, with the cores otherwise idle. A step's
  link time runs from when it could first use the link, its post or the previous step's end
  (whichever is later), to its end: with one step in flight that is its duration, with two it
  leaves out the time a posted step waits behind the one before it;
* when each gradient hook ran and how long it took (compression included);
* across the ranks (their trace clocks are the machine's steady clock, so they agree on one
  machine, as on the emulated cluster): per group, how far apart the ranks' first posts were
  and the group's rate from the last rank's first post to the last rank's end, when every rank
  is in the ring (until then the ring waits for the slowest rank's gradient, not for the link).

With two ring steps in flight (gradcomp-train's default, --ring-steps-in-flight 2) a step is
posted while the one before it still runs, so its duration (the step table's "ms") includes
waiting for that step's segments and the per-step rates of that table understate the link;
the rates of the lines below it and the group's span (first post to end) are the figures to
compare.

    scripts/ring-timeline.py PREFIX [--skip 10] [--link-gbit 1] [--beta-ns B] [--min-step-kib 256]
"""
import argparse
import csv
import glob
import statistics


def rows(path):
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def med(values):
    return statistics.median(values) if values else float("nan")


def summarise(prefix, rank, skip, link_gbit, beta_ns, min_step_bytes):
    steps = rows(f"{prefix}.{rank}.csv")
    iterations = rows(f"{prefix}.{rank}.iterations.csv")
    hooks = rows(f"{prefix}.{rank}.layers.csv")
    if not steps or not iterations:
        print(f"rank {rank}: no steps or no iterations traced")
        return
    operations = {}
    for s in steps:
        operations.setdefault(int(s["operation"]), []).append(s)
    groups = len(operations) // len(iterations)
    if groups * len(iterations) != len(operations):
        print(f"rank {rank}: {len(operations)} operations for {len(iterations)} iterations; "
              "the groups per iteration are not constant (re-planned?), not summarised")
        return
    # the hooks of the training iterations are the last ones (the profile's come first)
    layers = len({int(h["parameter"]) for h in hooks}) if hooks else 0
    hooks = hooks[len(hooks) - len(iterations) * layers:] if layers else []
    kept = range(min(skip, len(iterations) - 1), len(iterations))
    print(f"### rank {rank}: {len(iterations)} iterations ({len(kept)} summarised), "
          f"{groups} groups per iteration")
    print()
    print("| event | ms since the iteration started (median) |")
    print("|---|---|")
    for name, key in (("backward starts", "backward_start_s"), ("backward ends", "backward_end_s"),
                      ("finish() returns", "finish_end_s"), ("optimizer step ends", "step_end_s")):
        print(f"| {name} | {1e3 * med([iterations[i][key] - iterations[i]['start_s'] for i in kept]):.1f} |")
    for g in range(groups):
        ops = [operations[i * groups + g] for i in kept]
        t0 = [iterations[i]["start_s"] for i in kept]
        start = med([o[0]["started_s"] - t for o, t in zip(ops, t0)])
        post = med([o[0]["posted_s"] - t for o, t in zip(ops, t0)])
        end = med([max(s["sent_s"] for s in o) - t for o, t in zip(ops, t0)])
        sent = med([sum(s["bytes_sent"] for s in o) for o in ops])
        print(f"| group {g}: start(), first post, end ({sent / 1e6:.3f} MB sent) | "
              f"{1e3 * start:.1f}, {1e3 * post:.1f}, {1e3 * end:.1f} |")
    print()
    print("| group | step | MB sent | segments | ms (median) | Gbit/s | polls | reduce ms |")
    print("|---|---|---|---|---|---|---|---|")
    for g in range(groups):
        ops = [operations[i * groups + g] for i in kept]
        for k in range(len(ops[0])):
            d = [o[k]["sent_s"] - o[k]["posted_s"] for o in ops]
            b = ops[0][k]["bytes_sent"]
            m = med(d)
            rate = 8 * b / m / 1e9 if m > 0 else float("inf")
            print(f"| {g} | {k} | {b / 1e6:.3f} | {int(ops[0][k]['segments'])} | {1e3 * m:.2f} | "
                  f"{rate:.2f} | {med([o[k]['polls'] for o in ops]):.0f} | "
                  f"{1e3 * med([o[k]['reduce_s'] for o in ops]):.2f} |")
    # the wire while backward runs, and after it
    during = [0.0, 0.0]  # bytes, link seconds of the steps that ended while backward ran
    after = [0.0, 0.0]
    for i in kept:
        end = iterations[i]["backward_end_s"]
        for g in range(groups):
            previous_end = float("-inf")
            for s in sorted(operations[i * groups + g], key=lambda s: s["step"]):
                link_seconds = s["sent_s"] - max(s["posted_s"], previous_end)
                previous_end = s["sent_s"]
                if s["bytes_sent"] >= min_step_bytes:
                    into = during if s["sent_s"] <= end else after
                    into[0] += s["bytes_sent"]
                    into[1] += link_seconds
    print()
    for (sent_bytes, seconds), when in ((during, "while backward ran"),
                                        (after, "after backward")):
        if seconds <= 0:
            print(f"No step of at least {min_step_bytes / 1024:g} KiB ended {when}.")
            continue
        rate = 8 * sent_bytes / seconds / 1e9
        text = f"{rate:.2f} Gbit/s ({rate / link_gbit:.2f}x the {link_gbit:g} Gbit/s link"
        if beta_ns:
            text += f", {rate / (8 / beta_ns):.2f}x the calibrated {8 / beta_ns:.2f} Gbit/s"
        print(f"Steps of at least {min_step_bytes / 1024:g} KiB that ended {when}: "
              f"{sent_bytes / len(kept) / 1e6:.2f} MB per iteration at {text}) over their "
              f"link time.")
    if hooks:
        print()
        print("| parameter | hook entered, ms since the iteration started | ms in the hook |")
        print("|---|---|---|")
        per = {}
        for n, i in enumerate(kept):
            for h in hooks[i * layers:(i + 1) * layers]:
                per.setdefault(int(h["parameter"]), []).append(
                    (h["entered_s"] - iterations[i]["start_s"], h["left_s"] - h["entered_s"]))
        for p, v in sorted(per.items(), key=lambda kv: med([a for a, _ in kv[1]])):
            print(f"| {p} | {1e3 * med([a for a, _ in v]):.1f} | {1e3 * med([b for _, b in v]):.2f} |")
    print()


def across_ranks(prefix, ranks, skip, link_gbit, beta_ns):
    """Per group: the spread of the ranks' first posts and the rate once every rank posted."""
    operations = {}
    iterations = 0
    for r in ranks:
        per = {}
        for s in rows(f"{prefix}.{r}.csv"):
            per.setdefault(int(s["operation"]), []).append(s)
        operations[r] = per
        n = len(rows(f"{prefix}.{r}.iterations.csv"))
        iterations = n if not iterations else min(iterations, n)
    counts = {len(operations[r]) for r in ranks}
    if not iterations or len(counts) != 1 or counts.pop() % iterations:
        print("Across ranks: not summarised (the ranks traced different operations)")
        return
    groups = len(operations[ranks[0]]) // iterations
    print(f"### across ranks {', '.join(map(str, ranks))} (medians over iterations "
          f"{min(skip, iterations - 1)}-{iterations - 1})")
    print()
    print("| group | MB sent per rank | first posts: spread, ms | first post of the first rank to "
          "the end, ms | last rank's first post to the end, ms | Gbit/s from the last first post |")
    print("|---|---|---|---|---|---|")
    for g in range(groups):
        spread, whole, joined, sent = [], [], [], []
        for i in range(min(skip, iterations - 1), iterations):
            ops = [operations[r][i * groups + g] for r in ranks]
            posts = [min(s["posted_s"] for s in o) for o in ops]
            end = max(max(s["sent_s"] for s in o) for o in ops)
            spread.append(max(posts) - min(posts))
            whole.append(end - min(posts))
            joined.append(end - max(posts))
            sent.append(max(sum(s["bytes_sent"] for s in o) for o in ops))
        b, t = med(sent), med(joined)
        rate = 8 * b / t / 1e9 if t > 0 else float("inf")
        text = f"{rate:.2f} ({rate / link_gbit:.2f}x the link"
        if beta_ns:
            text += f", {rate / (8 / beta_ns):.2f}x the calibrated {8 / beta_ns:.2f} Gbit/s"
        print(f"| {g} | {b / 1e6:.3f} | {1e3 * med(spread):.1f} | {1e3 * med(whole):.1f} | "
              f"{1e3 * t:.1f} | {text}) |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("--skip", type=int, default=10, help="first iterations left out")
    ap.add_argument("--link-gbit", type=float, default=1.0, help="nominal link rate")
    ap.add_argument("--beta-ns", type=float, default=0.0,
                    help="a calibrated beta (ns per byte) to compare the rate with")
    ap.add_argument("--min-step-kib", type=float, default=256,
                    help="smallest step counted in the rate while backward runs")
    ap.add_argument("--ranks", type=int, nargs="*", help="ranks to show (default: all)")
    a = ap.parse_args()
    found = sorted(int(p.split(".")[-2]) for p in glob.glob(f"{a.prefix}.*.csv")
                   if p.split(".")[-2].isdigit())
    for r in a.ranks if a.ranks else found:
        summarise(a.prefix, r, a.skip, a.link_gbit, a.beta_ns, 1024 * a.min_step_kib)
    if len(found) > 1:
        across_ranks(a.prefix, found, a.skip, a.link_gbit, a.beta_ns)


if __name__ == "__main__":
    main()
