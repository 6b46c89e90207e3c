# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train's accuracy remedies for sparse gradients (--density-warmup-epochs, --clip-norm,
--adaptive-density, --factor-masking; docs/fidelity.md), end to end on 2 ranks.

The density warm-up's per-epoch densities follow DGC's schedule (d0 (dT/d0)^(e/E), d0 DGC's 0.25
or --warmup-initial-density) and the achieved density follows them down; the learning-rate
warm-up (--warmup-epochs) works with SGD, --lr-decay poly then decays it as (1 - t)^2 and
--lr-decay step multiplies it by --lr-decay-factor from each of --lr-decay-epochs on.
Clipping with a tiny norm clips every iteration and changes the result, while a threshold never
reached gives bit-identical replicas to no clipping (deferring the hooks to the end of backward
changes nothing). Adaptive density sends the same total as the uniform density with unequal
per-layer densities. --residual-stats' per-layer sends add up to the achieved density, values wait
in the residual at a low density and never at density 1. --factor-masking false changes the
result and keeps the replicas identical; --factor-masking-after-warmup true changes it only after
the warm-up. Bad combinations exit with status 2 naming the
problem.
"""
import math
import os
import subprocess

import pytest

from train_runner import GRADCOMP_TRAIN, MPIEXEC, load, needs_train

pytestmark = needs_train

BASE = ["--train-limit", "256", "--test-limit", "200", "--batch-size", "32",
        "--evals-per-epoch", "1", "--profile-iterations", "1"]
ITERATIONS_PER_EPOCH = 4  # 256 samples over 2 ranks, batch 32


def run(tmp_path, name, *args, epochs=1):
    report = tmp_path / f"{name}.json"
    method = [] if "--method" in args else ["--method", "exact_topk"]
    p = subprocess.run([MPIEXEC, "-n", "2", GRADCOMP_TRAIN, *BASE, *method, "--epochs", str(epochs),
                        "--report", str(report), *args], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return p, report


@pytest.mark.parametrize("initial", [None, 0.05])
def test_density_warmup_follows_dgc_schedule(tmp_path, initial):
    more = [] if initial is None else ["--warmup-initial-density", str(initial)]
    d0 = 0.25 if initial is None else initial  # DGC's 25 % unless given
    p, report = run(tmp_path, "warm", "--density", "0.01", "--density-warmup-epochs", "2",
                    "--warmup-epochs", "1", *more, epochs=3)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["config"]["density_warmup_epochs"] == 2
    assert r["config"]["warmup_initial_density"] == d0
    epochs = r["fidelity"]["epochs"]
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    expected = [d0 * (0.01 / d0) ** (e / 2) for e in range(2)] + [0.01]
    for e, d in zip(epochs, expected):
        assert e["density"] == pytest.approx(d, rel=1e-12)
    achieved = [e["achieved_density"] for e in epochs]
    # exact top-k rounds each layer's k up: at least the density asked for, falling with it
    assert all(a >= e["density"] for a, e in zip(achieved, epochs))
    assert achieved[0] > achieved[1] > achieved[2]
    assert achieved[0] < d0 + 0.01 and achieved[2] < 0.012
    # the learning-rate warm-up with SGD: base / W at the first iteration, base from epoch 1 on
    assert epochs[0]["learning_rate"] == pytest.approx(0.04 / ITERATIONS_PER_EPOCH)
    assert epochs[1]["learning_rate"] == pytest.approx(0.04)
    assert r["replicas_identical"]


def test_continuous_density_warmup_sends_less_within_an_epoch(tmp_path):
    # the same schedule, stepped (0.25 for all of epoch 0) and continuous (0.25 falling towards
    # 0.25 (0.01 / 0.25)^(1/2) = 0.05 during epoch 0): both start epoch 0 at 0.25 and epoch 1 at
    # 0.05, the continuous one sends less during epoch 0
    reports = {}
    for stepped in ["true", "false"]:
        p, report = run(tmp_path, f"stepped-{stepped}", "--density", "0.01",
                        "--density-warmup-epochs", "2", "--warmup-stepped", stepped, epochs=2)
        assert p.returncode == 0, p.stdout + p.stderr
        reports[stepped] = load(report)
    for stepped, r in reports.items():
        assert r["config"]["warmup_stepped"] == (stepped == "true")
        assert [e["density"] for e in r["fidelity"]["epochs"]] == pytest.approx([0.25, 0.05])
        assert r["replicas_identical"]
    first = [reports[s]["fidelity"]["epochs"][0]["achieved_density"] for s in ["true", "false"]]
    assert first[0] >= 0.25 and first[1] < 0.2


@pytest.mark.parametrize("decay", ["poly", "none"])
def test_lr_decay_poly_follows_one_minus_t_squared(tmp_path, decay):
    # --warmup-epochs 1 of 3 epochs (4 iterations each): base / 4 at the first iteration, then
    # poly: base (1 - t)^2 with t = (s - 4) / 8 at epoch starts s = 4, 8; none: base
    p, report = run(tmp_path, "decay", "--density", "0.01", "--density-warmup-epochs", "1",
                    "--warmup-epochs", "1", "--lr-decay", decay, epochs=3)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["config"]["lr_decay"] == decay
    rates = [e["learning_rate"] for e in r["fidelity"]["epochs"]]
    expected = [0.04 / 4, 0.04, 0.04 * 0.5 ** 2] if decay == "poly" else [0.01, 0.04, 0.04]
    assert rates == pytest.approx(expected, rel=1e-12)
    assert r["replicas_identical"]


def test_lr_decay_step_multiplies_at_each_epoch(tmp_path):
    # --warmup-epochs 1 of 3 epochs (4 iterations each), then x 0.5 from the first iteration of
    # epochs 1 and 2 on: base / 4, base / 2, base / 4 at the epoch starts
    p, report = run(tmp_path, "step", "--density", "0.01", "--density-warmup-epochs", "1",
                    "--warmup-epochs", "1", "--lr-decay", "step", "--lr-decay-epochs", "1,2", "--lr-decay-factor", "0.5",
                    epochs=3)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["config"]["lr_decay"] == "step at 1,2 x 0.5"
    rates = [e["learning_rate"] for e in r["fidelity"]["epochs"]]
    assert rates == pytest.approx([0.01, 0.02, 0.01], rel=1e-12)
    assert r["replicas_identical"]


def test_lr_decay_step_inside_an_epoch(tmp_path):
    # a drop at epoch 1.5 leaves the first epoch and a half as the constant rate has them, and
    # changes what follows (the density warm-up only for the report's per-epoch rates)
    warm = ["--density", "0.05", "--density-warmup-epochs", "1"]
    p, constant = run(tmp_path, "constant", *warm, epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    p, step = run(tmp_path, "step", *warm, "--lr-decay", "step", "--lr-decay-epochs", "1.5",
                  epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    c, s = load(constant), load(step)
    assert [e["learning_rate"] for e in s["fidelity"]["epochs"]] == pytest.approx([0.04, 0.04])
    first = [[e for e in r["curve"] if e["epochs_done"] == 1.0][0] for r in (c, s)]
    assert first[0]["test_loss"] == first[1]["test_loss"]
    assert s["replicas_identical"]
    assert s["replica_hashes"][0] != c["replica_hashes"][0]


def test_clipping_with_a_tiny_norm_changes_the_result(tmp_path):
    p, plain = run(tmp_path, "plain", "--density", "0.05")
    assert p.returncode == 0, p.stdout + p.stderr
    p, never = run(tmp_path, "never", "--density", "0.05", "--clip-norm", "1e12")
    assert p.returncode == 0, p.stdout + p.stderr
    p, tiny = run(tmp_path, "tiny", "--density", "0.05", "--clip-norm", "1e-3")
    assert p.returncode == 0, p.stdout + p.stderr
    a, n, t = load(plain), load(never), load(tiny)
    assert t["config"]["clip_norm"] == 1e-3
    assert t["fidelity"]["local_clip_threshold"] == pytest.approx(1e-3 / math.sqrt(2))
    assert t["fidelity"]["epochs"][0]["clipped_iterations"] == ITERATIONS_PER_EPOCH
    assert n["fidelity"]["epochs"][0]["clipped_iterations"] == 0
    assert n["replica_hashes"] == a["replica_hashes"]  # a threshold never reached: no change
    assert t["replica_hashes"] != a["replica_hashes"]
    assert t["replicas_identical"]


def test_adaptive_density_keeps_the_total(tmp_path):
    p, uniform = run(tmp_path, "uniform", "--density", "0.05", epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    p, adaptive = run(tmp_path, "adaptive", "--density", "0.05", "--adaptive-density", "true",
                      epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    u, a = load(uniform), load(adaptive)
    f = a["fidelity"]
    assert a["config"]["adaptive_density"] is True
    d, n = f["last_layer_densities"], f["layer_numel"]
    assert len(d) == len(n) == a["config"]["parameter_tensors"]
    assert sum(x * y for x, y in zip(d, n)) == pytest.approx(0.05 * sum(n), rel=1e-9)
    assert all(f["adaptive_min_density"] - 1e-12 <= x <= 1.0 for x in d)
    assert max(d) > 1.5 * min(d)  # not the uniform density
    # the same bytes: achieved densities within the per-layer rounding of k
    assert a["achieved_density"] == pytest.approx(u["achieved_density"], rel=0.03)
    assert a["replicas_identical"]


def test_residual_stats_per_layer(tmp_path):
    p, sparse = run(tmp_path, "sparse", "--density", "0.05", "--residual-stats", "true", epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    p, full = run(tmp_path, "full", "--density", "1", "--residual-stats", "true")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(sparse)
    assert r["config"]["residual_stats"] is True
    epochs = r["fidelity"]["residual"]
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert all(e["iterations"] == ITERATIONS_PER_EPOCH for e in epochs)
    layers = epochs[1]["layers"]
    assert len(layers) == r["config"]["parameter_tensors"]
    numel = [x["numel"] for x in layers]
    # exact top-k sends ceil(0.05 n) per layer and iteration (fewer only for exact zeros)
    for x in layers:
        assert 0 < x["sent_per_iteration"] <= math.ceil(0.05 * x["numel"])
        assert 0.0 <= x["held_fraction"] <= 1.0
    sent = sum(x["sent_per_iteration"] for x in layers) / sum(numel)
    assert sent == pytest.approx(r["achieved_density"], rel=0.02)
    big = max(layers, key=lambda x: x["numel"])
    assert big["held_fraction"] > 0.5          # most of a large layer waits at 5 %
    assert big["mean_sent_staleness"] > 0.5    # and what leaves has waited
    assert big["max_sent_staleness"] >= 2
    assert big["mean_held_age"] > 1.0
    assert big["residual_to_gradient_norm"] > 0.5
    # density 1: everything leaves in the iteration it arrives, nothing is held
    for x in load(full)["fidelity"]["residual"][0]["layers"]:
        assert x["held_fraction"] == 0.0
        assert x["mean_sent_staleness"] == 0.0
        assert x["mean_residual_norm"] == 0.0
        # (elements with a zero gradient, e.g. behind inactive ReLUs, are neither sent nor held)
        assert 0 < x["sent_per_iteration"] <= x["numel"]


def test_factor_masking_off_keeps_the_velocity(tmp_path):
    # --factor-masking false: momentum correction keeps sent elements' velocities, so the run
    # differs from DGC's masking (same seed, same data) and still keeps identical replicas
    p, masked = run(tmp_path, "masked", "--density", "0.05", epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    p, kept = run(tmp_path, "kept", "--density", "0.05", "--factor-masking", "false", epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    m, k = load(masked), load(kept)
    assert m["config"]["factor_masking"] is True and k["config"]["factor_masking"] is False
    assert k["config"]["momentum_correction"] is True
    assert k["replicas_identical"] and m["replicas_identical"]
    assert k["replica_hashes"][0] != m["replica_hashes"][0]
    assert k["achieved_density"] == pytest.approx(m["achieved_density"], rel=0.05)


def test_factor_masking_after_warmup_switches_at_the_warmups_end(tmp_path):
    # with the velocity kept during a 1-epoch density warm-up, masking switched on from epoch 1:
    # the same run as the kept one through epoch 0 (same evaluation after it), another after it
    warm = ["--density", "0.01", "--density-warmup-epochs", "1", "--factor-masking", "false"]
    p, kept = run(tmp_path, "kept", *warm, epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    p, after = run(tmp_path, "after", *warm, "--factor-masking-after-warmup", "true", epochs=2)
    assert p.returncode == 0, p.stdout + p.stderr
    k, a = load(kept), load(after)
    assert a["config"]["factor_masking_after_warmup"] is True
    assert k["config"]["factor_masking_after_warmup"] is False
    epoch1 = [[e for e in r["curve"] if e["epochs_done"] == 1.0][0] for r in (k, a)]
    assert epoch1[0]["test_loss"] == epoch1[1]["test_loss"]
    assert epoch1[0]["train_loss"] == epoch1[1]["train_loss"]
    assert a["replicas_identical"]
    assert a["replica_hashes"][0] != k["replica_hashes"][0]


@pytest.mark.parametrize("args,named", [
    (["--residual-stats", "true", "--precision", "fp16"], "needs --precision fp32"),
    (["--residual-stats", "true", "--method", "dense"], "--residual-stats needs a sparse method"),
    (["--density-warmup-epochs", "1", "--method", "dense"], "need a sparse method"),
    (["--adaptive-density", "true", "--compression-scope", "group"], "--compression-scope layer"),
    (["--clip-norm", "1", "--transport", "coded"], "--transport coded"),
    (["--clip-norm", "1", "--transport", "none"], "need a transport"),
    (["--clip-norm", "-1"], "--clip-norm"),
    (["--density-warmup-epochs", "-2"], "--density-warmup-epochs"),
    (["--density-warmup-epochs", "1", "--warmup-initial-density", "0"], "--warmup-initial-density"),
    (["--warmup-initial-density", "1.5"], "--warmup-initial-density"),
    (["--factor-masking", "maybe"], "--factor-masking"),
    (["--factor-masking-after-warmup", "true", "--factor-masking", "false"],
     "--factor-masking-after-warmup"),
    (["--factor-masking-after-warmup", "true", "--density-warmup-epochs", "1"],
     "--factor-masking false"),
    (["--lr-decay", "step"], "needs --lr-decay-epochs"),
    (["--lr-decay-epochs", "1"], "needs --lr-decay step"),
    (["--lr-decay", "step", "--lr-decay-epochs", "2,1"], "above the one before it"),
    (["--lr-decay", "step", "--lr-decay-epochs", "0.5", "--warmup-epochs", "1"],
     "--warmup-epochs 1"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1", "--lr-decay-factor", "0"],
     "--lr-decay-factor"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1", "--lr-decay-factor", "1.5"],
     "--lr-decay-factor"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1,1.1"], "fall on the same iteration 4"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1e30"], "at most 1e6"),
])
def test_bad_combinations_are_named(tmp_path, args, named):
    p, _ = run(tmp_path, "bad", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert named in p.stderr
