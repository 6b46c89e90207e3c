# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --ring-trace and scripts/ring-timeline.py (docs/transport-benchmarks.md,
"Dense ring in training"), end to end on local ranks.

Every rank writes one row per ring step of every merge group of every iteration, 2 (P - 1)
steps per group, whose bytes add up to the ring traffic the report counts; the
iteration and hook files have one row per iteration and per parameter and iteration (the
profile's hooks first). The wait policies and segment sizes change no result bit.
ring-timeline.py reads the files.
"""
import csv
import pathlib
import subprocess
import sys

from train_runner import load, needs_train
from train_runner import run as run_train

pytestmark = needs_train

REPO = pathlib.Path(__file__).resolve().parents[3]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_ring_trace_counts_every_step_and_byte(tmp_path):
    prefix = tmp_path / "trace"
    p, report = run_train(tmp_path, "traced", 3, "--method", "dense", "--transport", "ring",
                          "--merge", "per_layer", "--ring-trace", str(prefix),
                          evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    iterations = r["config"]["iterations_per_epoch"]
    tensors = r["config"]["parameter_tensors"]
    traced_sent = 0
    for rank in range(3):
        steps = rows(f"{prefix}.{rank}.csv")
        assert len(steps) == iterations * tensors * 2 * (3 - 1)  # per_layer: a group per tensor
        traced_sent += sum(int(s["bytes_sent"]) for s in steps)
        for s in steps:
            assert float(s["started_s"]) <= float(s["posted_s"]) <= float(s["sent_s"])
        its = rows(f"{prefix}.{rank}.iterations.csv")
        assert len(its) == iterations
        hooks = rows(f"{prefix}.{rank}.layers.csv")
        assert len(hooks) >= iterations * tensors  # the profile's hooks come first
    # the bytes the report counts (mean over ranks of the per-iteration mean)
    per_iteration = r["per_iteration"]["bytes_sent"]["mean_over_ranks"]
    assert abs(traced_sent / (3 * iterations) - per_iteration) <= 1e-9 * per_iteration
    assert r["per_iteration"]["communication_thread_cpu_ms"]["mean_over_ranks"] > 0
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "ring-timeline.py"),
                          str(prefix), "--skip", "2", "--ranks", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "### rank 0" in out.stdout and "| group 0: start()" in out.stdout
    # across the ranks (one clock on one machine): per group, medians of the ranks' first
    # posts' spread and of the spans from the first and from the last first post to the end;
    # in every iteration spread <= span from the first and 0 <= span from the last <= span
    # from the first, so their medians keep that order
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "ring-timeline.py"),
                          str(prefix), "--skip", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "### across ranks 0, 1, 2" in out.stdout
    table = out.stdout[out.stdout.index("### across ranks"):].splitlines()
    groups = [line.split("|")[1:-1] for line in table
              if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    assert len(groups) == tensors  # per_layer: one group per tensor
    for g in groups:
        spread, whole, joined = (float(g[i]) for i in (2, 3, 4))
        assert 0 <= spread <= whole and 0 <= joined <= whole


def test_wait_policies_and_segments_change_no_bit(tmp_path):
    common = ["--method", "dense", "--transport", "ring", "--merge", "per_layer"]
    hashes = set()
    for name, extra in (("sleep", []), ("yield", ["--wait", "yield"]),
                        ("small-segments", ["--wait", "yield", "--segment-kib", "16"]),
                        ("sleep-yields", ["--wait-yield-rounds", "8",
                                          "--wait-max-sleep-us", "500"])):
        p, report = run_train(tmp_path, name, 2, *common, *extra, evals_per_epoch=1)
        assert p.returncode == 0, p.stdout + p.stderr
        r = load(report)
        assert r["replicas_identical"]
        hashes.add(r["replica_hashes"][0])
    assert len(hashes) == 1


def test_bad_wait_options_exit_2(tmp_path):
    p, _ = run_train(tmp_path, "bad", 2, "--wait", "nap")
    assert p.returncode == 2 and "nap" in p.stderr
    p, _ = run_train(tmp_path, "bad", 2, "--wait-max-sleep-us", "0")
    assert p.returncode == 2
