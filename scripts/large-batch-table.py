#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown table of scripts/large-batch.sh's reports: final test accuracy per optimizer and
global batch (per-rank batch x ranks), with the learning rate, warm-up and iterations run, and
each run's accuracy against the batch-128 run of the same optimizer. Standard library only.

    scripts/large-batch-table.py REPORT.json...
"""
import json
import sys


def main() -> None:
    rows = []
    for path in sys.argv[1:]:
        with open(path) as f:
            r = json.load(f)
        c = r["config"]
        ranks = c.get("ranks", 1)
        rows.append({
            "optimizer": c.get("optimizer", "sgd"),
            "batch": c["batch_size_per_rank"] * ranks,
            "lr": c["lr"],
            "warmup": c.get("warmup_epochs", 0),
            "iterations": c["iterations_per_epoch"] * c["epochs"],
            "accuracy": r["final_test_accuracy"],
            "best": max(p["test_accuracy"] for p in r["curve"]),
        })
    rows.sort(key=lambda x: (x["optimizer"], x["batch"]))
    small = {x["optimizer"]: x["accuracy"] for x in rows if x["batch"] == min(
        y["batch"] for y in rows if y["optimizer"] == x["optimizer"])}
    print("| optimizer | global batch | lr | warm-up (epochs) | iterations | final test accuracy "
          "| best during the run | vs. its smallest batch (points) |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows:
        delta = 100 * (x["accuracy"] - small[x["optimizer"]])
        print(f"| {x['optimizer']} | {x['batch']} | {x['lr']:g} | {x['warmup']:g} | "
              f"{x['iterations']} | {100 * x['accuracy']:.2f} % | {100 * x['best']:.2f} % | "
              f"{delta:+.2f} |")


if __name__ == "__main__":
    main()
