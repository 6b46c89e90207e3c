# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train's large-batch options (--precision, --loss-scale, --optimizer, --warmup-epochs;
docs/large-batch.md), end to end.

A fixed power-of-two loss scale is exact (scaling by 2^k and back changes no bit), so it must end
with the same replica hash as no loss scaling: an independent check that the loss is scaled
before backward and the averaged gradient unscaled exactly once. An infinity injected into one
rank's gradients is skipped on every rank (one skipped step, the dynamic scale halved once,
identical replicas); so is one counted by the compressors under --nonfinite skip_step, whose
sent values go back to the residuals, while --nonfinite raise ends the run naming the element.
A run whose training loss becomes NaN stops on every rank with status 5 and a hint naming the
remedies; a NaN refused by the wire format gets the same hint. LARS with a warm-up learns. Bad
values exit with status 2 naming them.
"""
import pytest

from train_runner import load, needs_train
from train_runner import run as run_train

pytestmark = needs_train


def run(tmp_path, name, ranks, *args):
    return run_train(tmp_path, name, ranks, *args, evals_per_epoch=1)


@pytest.mark.parametrize("method", ["dense", "exact_topk"])
def test_power_of_two_static_loss_scale_is_exact(tmp_path, method):
    p, plain = run(tmp_path, "plain", 2, "--method", method, "--density", "0.05")
    assert p.returncode == 0, p.stdout + p.stderr
    p, scaled = run(tmp_path, "scaled", 2, "--method", method, "--density", "0.05",
                    "--loss-scale", "1024")
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = load(plain), load(scaled)
    assert b["config"]["loss_scale"] == "1024" and b["skipped_steps"] == 0
    assert b["loss_scale_final"] == 1024
    assert a["replica_hashes"] == b["replica_hashes"]


def test_injected_overflow_is_skipped_on_every_rank(tmp_path):
    common = ["--method", "exact_topk", "--density", "0.05", "--precision", "fp16",
              "--loss-scale", "dynamic"]
    p, report = run(tmp_path, "inject", 3, *common, "--inject-overflow-at", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["config"]["precision"] == "fp16"
    assert r["skipped_steps"] == 1
    assert r["loss_scale_final"] == 32768  # 2^16 halved once, no 2000 clean steps yet
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    # top-k sends each layer's infinity first and keeps 0 for it: nothing non-finite was left
    assert r["dropped_non_finite"] == 0
    assert r["curve"][-1]["test_accuracy"] > r["curve"][0]["test_accuracy"] + 0.1
    p, clean = run(tmp_path, "clean", 3, *common)
    assert p.returncode == 0, p.stdout + p.stderr
    c = load(clean)
    assert c["skipped_steps"] == 0 and c["loss_scale_final"] == 65536
    assert c["replica_hashes"] != r["replica_hashes"]  # one step fewer changes the result


def test_nonfinite_skip_step_is_agreed_and_loses_nothing(tmp_path):
    # --nonfinite skip_step without loss scaling: the last rank's compressors count the injected
    # infinities, every rank skips that step and gives its sent values back to its residuals
    common = ["--method", "exact_topk", "--density", "0.05", "--nonfinite", "skip_step"]
    p, report = run(tmp_path, "skip", 3, *common, "--inject-overflow-at", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["skipped_steps"] == 1
    assert r["returned_values"] > 0  # rank 0's sent values of the skipped step
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    assert r["curve"][-1]["test_accuracy"] > r["curve"][0]["test_accuracy"] + 0.1
    p, clean = run(tmp_path, "clean", 3, *common)
    assert p.returncode == 0, p.stdout + p.stderr
    c = load(clean)
    assert c["skipped_steps"] == 0 and c["returned_values"] == 0
    assert c["replica_hashes"] != r["replica_hashes"]


def test_nonfinite_raise_names_the_layer(tmp_path):
    p, _ = run(tmp_path, "raise", 2, "--method", "exact_topk", "--density", "0.05",
               "--nonfinite", "raise", "--inject-overflow-at", "2")
    assert p.returncode != 0
    assert "rank 1" in p.stderr and "non-finite value inf at index 0" in p.stderr, p.stderr


def test_divergence_ends_with_a_hint(tmp_path):
    # a learning rate of 1e30 makes the weights infinite after one step and the loss NaN; MPI's
    # allreduce of the densified messages passes NaN on, so without the check the run would end
    # "successfully" with a NaN model: every rank stops at the next evaluation point with
    # status 5, saying what to try
    p, _ = run(tmp_path, "diverge", 2, "--method", "exact_topk", "--density", "0.05",
               "--transport", "allreduce", "--lr", "1e30")
    assert p.returncode == 5, p.stdout + p.stderr
    assert "the training diverged: the training loss over all ranks is" in p.stderr, p.stderr
    assert "at epoch 1.00" in p.stderr, p.stderr
    assert "--nonfinite raise" in p.stderr and "--clip-norm" in p.stderr, p.stderr


def test_nan_refused_by_the_wire_gets_the_hint(tmp_path):
    # the sparse allgather's wire format refuses NaN (top-k selects NaN first): the job ends
    # through MPI_Abort, and the rank that refused says what to try
    p, _ = run(tmp_path, "diverge", 2, "--method", "exact_topk", "--density", "0.05",
               "--transport", "allgather", "--lr", "1e30")
    assert p.returncode != 0
    assert "is NaN" in p.stderr and "hint: a gradient became NaN" in p.stderr, p.stderr


def test_lars_with_warmup_learns(tmp_path):
    p, report = run(tmp_path, "lars", 2, "--optimizer", "lars", "--lr", "2",
                    "--warmup-epochs", "0.5", "--method", "exact_topk", "--density", "0.05")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    c = r["config"]
    assert (c["optimizer"], c["warmup_epochs"]) == ("lars", 0.5)
    assert c["trust_coefficient"] == 0.001 and c["weight_decay"] == 0.0005
    assert r["replicas_identical"]
    assert r["curve"][-1]["test_accuracy"] > r["curve"][0]["test_accuracy"] + 0.1


@pytest.mark.parametrize("args,named", [
    (["--loss-scale", "0"], "--loss-scale '0'"),
    (["--loss-scale", "huge"], "--loss-scale 'huge'"),
    (["--precision", "fp8"], "fp8"),
    (["--optimizer", "adam"], "adam"),
    (["--inject-overflow-at", "2"], "needs --loss-scale"),
    (["--nonfinite", "ignore"], "ignore"),
    (["--sync", "async", "--transport", "ps", "--optimizer", "lars"], "async trains with fp32"),
    (["--lr-decay", "cosine"], "cosine"),
    (["--sync", "async", "--transport", "ps", "--lr-decay", "poly"], "--lr-decay poly"),
    (["--sync", "async", "--transport", "ps", "--lr-decay", "step", "--lr-decay-epochs", "1"],
     "--lr-decay poly and step"),
])
def test_bad_values_are_named(tmp_path, args, named):
    p, _ = run(tmp_path, "bad", 2, *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert named in p.stderr


def test_transport_none_checks_its_own_gradients(tmp_path):
    # no pipeline: the overflow check reads .grad; x1e30 overflows fp16 on every step
    p, report = run(tmp_path, "alone", 2, "--transport", "none", "--merge", "single",
                    "--precision", "fp16", "--loss-scale", "1e30")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["skipped_steps"] == r["config"]["iterations_per_epoch"] == 10
    assert r["curve"][-1]["test_accuracy"] == r["curve"][0]["test_accuracy"]  # nothing applied
