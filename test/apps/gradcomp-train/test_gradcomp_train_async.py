# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --sync async (ASGD through mpi::async_parameter_server), end to end.

With one worker and staleness 0, ASGD is sequential SGD with momentum on the server: it must
train like the synchronous program on one rank with no exchange at all (PyTorch's SGD with
momentum on the same batches), the independent reference. With several workers: no push is lost
(every server applies every worker's every push), the replicas end identical after finish(), the
staleness bound holds, and bad input exits with status 2 and a message naming the value.
"""
import pytest

from train_runner import load, needs_train
from train_runner import run as run_train

pytestmark = needs_train


def run(tmp_path, name, ranks, *args):
    return run_train(tmp_path, name, ranks, *args, evals_per_epoch=2)


def test_one_worker_equals_sequential_sgd_with_momentum(tmp_path):
    p, report = run(tmp_path, "async", 2, "--sync", "async", "--transport", "ps", "--method",
                    "dense")
    assert p.returncode == 0, p.stdout + p.stderr
    ours = load(report)
    p, report = run(tmp_path, "alone", 1, "--transport", "none", "--merge", "single")
    assert p.returncode == 0, p.stdout + p.stderr
    reference = load(report)
    assert ours["config"]["workers"] == 1 and ours["config"]["servers"] == 1
    assert ours["config"]["iterations_per_epoch"] == reference["config"]["iterations_per_epoch"]
    assert len(ours["curve"]) == len(reference["curve"]) == 3
    for a, b in zip(ours["curve"], reference["curve"]):
        # the same batches and update: equal up to the rounding of the two SGD kernels
        assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-4)
        assert a["test_accuracy"] == pytest.approx(b["test_accuracy"], abs=2e-3)
    assert ours["curve"][-1]["test_accuracy"] > ours["curve"][0]["test_accuracy"] + 0.1
    assert ours["asgd"]["worker_staleness_max"] == 0  # nobody else pushes


@pytest.mark.parametrize("method,bound", [("dense", 0), ("exact_topk", 1)])
def test_workers_lose_no_push_and_end_identical(tmp_path, method, bound):
    p, report = run(tmp_path, f"async-{method}", 4, "--sync", "async", "--transport", "ps",
                    "--servers", "1", "--method", method, "--density", "0.05",
                    "--staleness-bound", str(bound))
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    c = r["config"]
    assert (c["workers"], c["servers"], c["sync"], c["staleness_bound"]) == (3, 1, "async", bound)
    assert c["iterations_per_epoch"] == 7  # ceil(ceil(640 / 3) / 32)
    # every push of every worker applied: 3 workers x 7 iterations
    assert r["asgd"]["pushes_applied_per_server"] == 21
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    assert len(r["replica_hashes"]) == 3
    if bound >= 1:
        assert r["asgd"]["max_clock_gap"] <= bound
    if method == "exact_topk":
        assert r["achieved_density"] == pytest.approx(0.05, rel=0.05)
        # a sparse push carries about 5 % of the model's 4 n bytes
        assert r["per_iteration"]["bytes_sent"]["mean_over_ranks"] < 0.15 * 4 * c["parameters"]
    if method == "dense":
        assert r["curve"][-1]["test_accuracy"] > r["curve"][0]["test_accuracy"]


@pytest.mark.parametrize("ranks,args,message", [
    (2, ["--sync", "async", "--transport", "ring"], "pass --transport ps (not 'ring')"),
    (2, ["--sync", "async", "--transport", "ps", "--servers", "2"], "needs a worker"),
    (2, ["--sync", "bogus"], "--sync: bogus not in {sync,async}"),
    (2, ["--sync", "async", "--transport", "ps", "--staleness-bound", "-1"],
     "--staleness-bound: Value -1 not in range"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, ranks, args, message):
    p, _ = run(tmp_path, "bad", ranks, *args)
    assert p.returncode == 2
    assert message in p.stderr
