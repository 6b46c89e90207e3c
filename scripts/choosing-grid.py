#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The predicted grid of docs/choosing.md: for 4, 64 and 1024 ranks, 1, 10 and 100 Gbit/s links
and three layer profiles, the iteration time of each candidate exchange with its optimal merge
plan, from gradcomp-plan (S1 eqs. 2-7), and the one to use.

    scripts/choosing-grid.py [--plan build/bin/gradcomp-plan] [--check]

Prints a markdown table. Every number comes from gradcomp-plan with explicit arguments (print
them with --commands, on stderr); nothing is measured here. The model, as docs/choosing.md
states it:

* profiles: apps/gradcomp-plan/profiles/ (the Fashion-MNIST CNN, estimated for one CPU core;
  gradcomp-train's VGG-style model, measured in a short gradcomp-train run of 4 ranks on 2 CPU
  cores; ResNet-50, PipeDream's measured per-module backward times), each with the forward time
  its header gives;
* a link of R bit/s: beta = 8 / R seconds per byte, alpha = 50 us per message step;
* per merged group, one message priced alpha' + beta' x bytes: the dense ring allreduce
  (fp32, 4 bytes per element) with alpha' = 2 (P - 1) alpha and beta' = 2 (P - 1) / P beta;
  top-k 1 % over the sparse allgather (8 bytes per pair) with 2 (P - 1) alpha and (P - 1) beta;
  top-k 1 % over gTop-k, ceil(log2 P) (9 alpha + 24 k beta) (cost::gtopk_allreduce_seconds),
  so 9 ceil(log2 P) alpha and 3 ceil(log2 P) beta per pair byte;
* compression (top-k only) 20 us + 1.5 ns per element on its own stream (about exact_top_k
  with error feedback on 2 cores);
* use the fastest; a compressed exchange only when it is at least 10 % faster than the dense
  ring (the min_saving of gradcomp::schedule::choose_exchange): below that, its accuracy cost is
  not worth it.

--check predicts the main job's dense ring and compressed runs from their own reports
(lab/results/2026-12-02-main-job: rank 0's profiled backward times, forward time and the alpha
and beta calibrated in training) with the same conventions, next to what was measured.
Standard library only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PROFILES = [  # (name, profile, forward seconds from the profile's header)
    ("Fashion-MNIST CNN", "apps/gradcomp-plan/profiles/fashion_mnist_cnn.csv", 0.0054),
    ("VGG-style", "apps/gradcomp-plan/profiles/vgg-style.csv", 0.0447),
    ("ResNet-50", "apps/gradcomp-plan/profiles/resnet50.csv", 0.2015),
]
RANKS = [4, 64, 1024]
LINKS_GBIT = [1, 10, 100]
ALPHA = 50e-6      # seconds per message step
DENSITY = 0.01
COMPRESS = "2e-5,1.5e-9"
MIN_SAVING = 0.10
MAIN_JOB = "lab/results/2026-12-02-main-job"
CNN_LAYERS = [("conv1.weight", 800), ("conv1.bias", 32), ("conv2.weight", 51200),
              ("conv2.bias", 64), ("fc1.weight", 1605632), ("fc1.bias", 512),
              ("fc2.weight", 5120), ("fc2.bias", 10)]


def plan(tool, profile, forward, alpha, beta, sparse, commands):
    """The optimal merge plan's predicted iteration, in seconds."""
    args = [tool, "--profile", profile, "--forward-seconds", repr(forward), "--alpha",
            f"{alpha:.6g}", "--beta", f"{beta:.6g}", "--json"]
    if sparse:
        args += ["--density", repr(DENSITY), "--compress-cost", COMPRESS]
    if commands:
        print(" ".join(os.path.relpath(a, ROOT) if os.path.isabs(a) else a for a in args),
              file=sys.stderr)
    out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)["strategies"]["optimal"]["t_iter"]


def compute_seconds(profile, forward):
    """Forward + backward: the iteration without any exchange (the floor)."""
    with open(os.path.join(ROOT, profile), encoding="utf-8") as f:
        rows = [line.strip().split(",") for line in f if line.strip() and not line.startswith("#")]
    return forward + sum(float(r[2]) for r in rows[1:])


def milliseconds(seconds):
    """Milliseconds, 3-4 significant digits, no exponent."""
    ms = 1e3 * seconds
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def grid(tool, commands):
    print("| model | ranks | link | dense ring, ms | top-k 1 %, sparse allgather, ms | top-k 1 %, "
          "gTop-k, ms | forward + backward, ms | use | speed-up over the dense ring |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, profile, forward in PROFILES:
        floor = compute_seconds(profile, forward)
        for p in RANKS:
            for gbit in LINKS_GBIT:
                beta = 8.0 / (gbit * 1e9)
                levels = math.ceil(math.log2(p))
                times = {
                    "dense ring": plan(tool, profile, forward, 2 * (p - 1) * ALPHA,
                                       2 * (p - 1) / p * beta, False, commands),
                    "top-k 1 %, sparse allgather": plan(tool, profile, forward, 2 * (p - 1) * ALPHA,
                                                        (p - 1) * beta, True, commands),
                    "top-k 1 %, gTop-k": plan(tool, profile, forward, 9 * levels * ALPHA,
                                              3 * levels * beta, True, commands),
                }
                dense = times["dense ring"]
                best = min(times, key=times.get)
                if best != "dense ring" and times[best] > (1 - MIN_SAVING) * dense:
                    best = "dense ring"
                cells = [milliseconds(times[k]) for k in times]
                gain = dense / times[best]
                verdict = "-" if best == "dense ring" else f"{gain:.2f}x"
                print(f"| {name} | {p} | {gbit} Gbit/s | " + " | ".join(cells) +
                      f" | {milliseconds(floor)} | **{best}** | {verdict} |")


def check(tool, commands):
    """The main job's runs predicted from their own reports, next to the measured times."""
    print("| run (4 ranks, 1 Gbit/s, the CNN) | predicted, ms | measured, ms | error |")
    print("|---|---|---|---|")
    measured = {"dense-ring.json": (190.2, "190.2 (mean of both epochs)"),
                "compressed.json": (92.3, "92.3 (the 1 % epoch)")}
    for report, label, sparse in [("dense-ring.json", "dense ring, optimal merge", False),
                                  ("compressed.json", "top-k 1 % (reused threshold), sparse "
                                   "allgather, optimal merge", True)]:
        with open(os.path.join(ROOT, MAIN_JOB, report), encoding="utf-8") as f:
            p = json.load(f)["plan"]
        ranks = 4
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as csv:
            csv.write("name,numel,backward_seconds\n")
            for (layer, numel), seconds in zip(CNN_LAYERS, p["backward_seconds_rank0"]):
                csv.write(f"{layer},{numel},{seconds!r}\n")
        try:
            alpha = 2 * (ranks - 1) * p["alpha_seconds"]
            beta = ((ranks - 1) if sparse else 2 * (ranks - 1) / ranks) * p["beta_seconds_per_byte"]
            args = [tool, "--profile", csv.name, "--forward-seconds", repr(p["forward_seconds"]),
                    "--alpha", repr(alpha), "--beta", repr(beta), "--json"]
            if sparse:
                args += ["--density", repr(DENSITY)]
            if commands:
                print(" ".join(args), file=sys.stderr)
            out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        finally:
            os.unlink(csv.name)
        predicted = 1e3 * json.loads(out)["strategies"]["optimal"]["t_iter"]
        value, text = measured[report]
        error = 100 * (predicted - value) / value
        print(f"| {label} | {predicted:.1f} | {text} | {error:+.1f} % |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", default=os.path.join(ROOT, "build", "bin", "gradcomp-plan"),
                    help="the gradcomp-plan program (default: build/bin/gradcomp-plan)")
    ap.add_argument("--check", action="store_true",
                    help="predict the main job's runs from their reports instead of the grid")
    ap.add_argument("--commands", action="store_true",
                    help="print each gradcomp-plan command (on stderr)")
    a = ap.parse_args()
    if not os.path.isfile(a.plan):
        print(f"choosing-grid: no {a.plan}: build gradcomp-plan first "
              "(cmake --build --preset release --target gradcomp-plan)", file=sys.stderr)
        return 2
    if a.check:
        check(a.plan, a.commands)
    else:
        grid(a.plan, a.commands)
    return 0


if __name__ == "__main__":
    sys.exit(main())
