# SPDX-License-Identifier: Apache-2.0
"""scripts/s1-table.py: classification of gradcomp-train reports into S1's methods, the time
split and the speedups, on hand-made reports whose numbers are known."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "s1-table.py")


def report(tmp_path, name, method, transport, merge, density, iteration, forward, backward,
           compression, wait, accuracy):
    r = {"label": name, "final_test_accuracy": accuracy,
         "config": {"method": method, "transport": transport, "merge": merge, "density": density},
         "per_iteration": {"iteration_ms": {"mean_over_ranks": iteration},
                           "forward_ms": {"mean_over_ranks": forward},
                           "backward_ms": {"mean_over_ranks": backward},
                           "compression_ms": {"mean_over_ranks": compression},
                           "exchange_wait_ms": {"mean_over_ranks": wait},
                           "bytes_sent": {"mean_over_ranks": 2.5e6}}}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(r))
    return str(p)


def test_methods_split_and_speedups(tmp_path):
    files = [
        report(tmp_path, "d", "dense", "ps", "size_threshold", 0.01, 400.0, 20, 30, 0, 340, 0.80),
        report(tmp_path, "r", "dense", "ring", "optimal", 0.01, 200.0, 20, 30, 0, 140, 0.80),
        report(tmp_path, "g", "exact_topk", "allgather", "single", 0.01, 100.0, 20, 30, 10, 30, 0.78),
        report(tmp_path, "l", "exact_topk", "ps", "per_layer", 0.1, 250.0, 20, 30, 10, 180, 0.79),
        report(tmp_path, "o", "reused_threshold", "ps", "optimal", 0.1, 80.0, 20, 30, 5, 20, 0.81),
        report(tmp_path, "x", "reused_threshold", "ps", "dlgs_greedy", 0.1, 160.0, 20, 30, 5, 100, 0.81),
    ]
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "out"), *files],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "out" / "s1.md").read_text()
    # LAGS over ps: 400 / 250 = 1.60x over dense ps, 200 / 250 = 0.80x over the best dense
    assert "| LAGS | 0.1 | 79.00 % | -1.00 | 250.0 | 50.0 | 10.00 | 180.00 | 10.00 | 2.500 MB | 1.60x | 0.80x |" in text
    assert "| DLGS | 0.1 |" in text and "| DLGS optimal merge | 0.1 | 81.00 % | +1.00 | 80.0 |" in text
    # global top-k over the allgather is compared with the ring (no dense allgather run)
    assert "| global top-k | 0.01 | 78.00 % | -2.00 | 100.0 | 50.0 | 10.00 | 30.00 | 10.00 | 2.500 MB | 2.00x | 2.00x |" in text
    assert "| dense (ring) | 1 |" in text


def test_refuses_reports_of_another_invocation(tmp_path):
    f = report(tmp_path, "d", "dense", "ps", "size_threshold", 0.01, 400.0, 20, 30, 0, 340, 0.8)
    os.utime(f, (time.time() - 100, time.time() - 100))
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "o"), "--since",
                        str(time.time() - 10), f], capture_output=True, text=True)
    assert p.returncode == 2 and "before this invocation" in p.stderr
