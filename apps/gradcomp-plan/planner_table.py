#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs gradcomp-plan --json over the shipped profiles at 1 and 10 Gbit/s (alpha 50 us), dense
and at density 0.01 (compression off and on the compute stream), and prints the Markdown tables
of docs/planner.md: predicted t_iter of every strategy in ms and what optimal gains. The second
table scales ResNet-50's and VGG-16's compute times (forward and backward) by 1/8, a proxy (an
assumption, not a measurement) for a GPU 8x faster than the one PipeDream profiled.

Usage: planner_table.py PATH/TO/gradcomp-plan [PROFILE_DIR]  (default: apps/gradcomp-plan/profiles)
"""
import json
import pathlib
import subprocess
import sys
import tempfile

STRATEGIES = ["per_layer", "single", "size_threshold", "two_segment", "dlgs_greedy", "mgwfbp",
              "optimal"]
# profile file stem, shown name, forward seconds (see the comments in each CSV)
PROFILES = [("resnet20", "ResNet-20", "0.000325"), ("resnet50", "ResNet-50", "0.2015"),
            ("vgg16", "VGG-16", "0.2519"), ("fashion_mnist_cnn", "Fashion-MNIST CNN", "0.0054")]
NETWORKS = [("1 Gbit/s", "8e-9"), ("10 Gbit/s", "8e-10")]
ALPHA = "5e-5"
# compression of a group: 20 us + 1.5 ns per element (gradcomp's exact_top_k with error
# feedback on the 2-core CPU of docs/benchmarks.md runs at about 0.7 Gelem/s)
COMPRESS = "2e-5,1.5e-9"
REGIMES = [("dense", []),
           ("0.01, own stream", ["--density", "0.01", "--compress-cost", COMPRESS]),
           ("0.01, compute stream", ["--density", "0.01", "--compress-cost", COMPRESS,
                                     "--compression-on-compute-stream"])]


def scaled_profile(path, factor, directory):
    """A copy of the profile CSV at `path` with every backward_seconds times `factor`."""
    lines = []
    for line in pathlib.Path(path).read_text().splitlines():
        fields = line.split(",")
        if line.startswith("#") or fields[0] == "name" or len(fields) != 3:
            lines.append(line)
        else:
            lines.append(",".join(fields[:2] + [repr(float(fields[2]) * factor)]))
    out = pathlib.Path(directory) / pathlib.Path(path).name
    out.write_text("\n".join(lines) + "\n")
    return out


def table(tool, profiles):
    header = (["model", "network", "messages"] + STRATEGIES +
              ["optimal vs dlgs_greedy", "optimal vs per_layer"])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for path, shown, forward in profiles:
        for network, beta in NETWORKS:
            for regime, extra in REGIMES:
                out = subprocess.run(
                    [tool, "--profile", str(path), "--forward-seconds",
                     forward, "--alpha", ALPHA, "--beta", beta, "--json"] + extra,
                    check=True, capture_output=True, text=True).stdout
                s = json.loads(out)["strategies"]
                t = {name: s[name]["t_iter"] * 1e3 for name in STRATEGIES}
                best = t["optimal"]
                cells = [shown, network, regime] + [f"{t[name]:.4g}" for name in STRATEGIES]
                cells += [f"{(1 - best / t['dlgs_greedy']) * 100:.2f} %",
                          f"{(1 - best / t['per_layer']) * 100:.1f} %"]
                print("| " + " | ".join(cells) + " |")


def main():
    tool = sys.argv[1]
    profile_dir = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "apps/gradcomp-plan/profiles")
    table(tool, [(profile_dir / f"{stem}.csv", shown, forward)
                 for stem, shown, forward in PROFILES])
    print()
    with tempfile.TemporaryDirectory() as directory:
        table(tool, [(scaled_profile(profile_dir / f"{stem}.csv", 1 / 8, directory),
                      shown + " x1/8", repr(float(forward) / 8))
                     for stem, shown, forward in PROFILES if stem in ("resnet50", "vgg16")])


if __name__ == "__main__":
    main()
