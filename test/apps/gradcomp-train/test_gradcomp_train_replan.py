# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --replan-after W (docs/train.md): the pipeline re-plans the merge once, after W
iterations, from the backward times it measured with the exchange running, on rank 0, agreed by
every rank. A re-plan changes which layers travel together, not what is summed: over the sparse
allgather (sums in rank order per element, error feedback per layer) the run must end with the
same parameters as without it. The report names the new groups and the iteration the merge
model predicts from the measured times; --replan-mode keep measures and predicts the same way but
keeps the initial groups. Bad combinations and values exit with status 2.
"""
from train_runner import load, needs_train
from train_runner import run as run_train

pytestmark = needs_train

COMMON = ["--method", "exact_topk", "--density", "0.05", "--transport", "allgather", "--merge",
          "optimal"]
CNN_TENSORS = 8
CNN_PARAMETERS = 1_663_370


def run(tmp_path, name, ranks, *args):
    return run_train(tmp_path, name, ranks, *args, evals_per_epoch=1)


def test_replan_reports_its_groups_and_changes_no_value(tmp_path):
    p, plain = run(tmp_path, "plain", 2, *COMMON)
    assert p.returncode == 0, p.stdout + p.stderr
    p, replanned = run(tmp_path, "replan", 2, *COMMON, "--replan-after", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = load(plain), load(replanned)
    assert a["replan"] is None
    r = b["replan"]
    assert r["after_iterations"] == 3 and r["replanned"]
    assert len(r["measured_backward_seconds_rank0"]) == CNN_TENSORS
    assert all(t >= 0 for t in r["measured_backward_seconds_rank0"])
    assert sum(g["elements"] for g in r["groups"]) == CNN_PARAMETERS
    assert r["predicted_iteration_seconds"] > 0
    assert r["initial_groups_predicted_iteration_seconds"] >= r["predicted_iteration_seconds"] * 0.999
    assert b["replicas_identical"]
    assert b["replica_hashes"] == a["replica_hashes"]  # the same values, whatever the groups
    assert "re-planned after 3 iterations" in p.stdout


def test_keep_mode_measures_and_predicts_but_keeps_the_plan(tmp_path):
    # --replan-mode keep: the pipeline measures the warm-up as when re-planning, but the groups
    # stay the initial plan's, so the prediction is the plan in use's, from measured times
    p, kept = run(tmp_path, "keep", 2, "--method", "dense", "--transport", "ring", "--merge",
                  "optimal", "--replan-after", "3", "--replan-mode", "keep")
    assert p.returncode == 0, p.stdout + p.stderr
    b = load(kept)
    r = b["replan"]
    assert r["mode"] == "keep" and r["after_iterations"] == 3
    assert [g["layers"] for g in r["groups"]] == [g["layers"] for g in b["plan"]["groups"]]
    assert len(r["measured_backward_seconds_rank0"]) == CNN_TENSORS
    assert r["predicted_iteration_seconds"] == r["initial_groups_predicted_iteration_seconds"]
    assert r["predicted_iteration_seconds"] > 0
    # forward and update (outside the merge model) measured over the same 3 iterations
    assert 0 < r["measured_forward_seconds_rank0"] < r["predicted_iteration_seconds"]
    assert 0 < r["measured_update_seconds_rank0"] < r["predicted_iteration_seconds"]
    assert b["replicas_identical"]
    assert "plan kept after 3 iterations" in p.stdout
    assert "iteration predicted for the plan in use" in p.stdout


def test_replan_refuses_what_has_no_merge_plan(tmp_path):
    p, _ = run(tmp_path, "powersgd", 2, "--method", "powersgd", "--transport", "ring",
               "--replan-after", "2")
    assert p.returncode == 2 and "--replan-after" in p.stderr
    p, _ = run(tmp_path, "coded", 3, "--transport", "coded", "--redundancy", "2",
               "--replan-after", "2")
    assert p.returncode == 2 and "--replan-after" in p.stderr
    p, _ = run(tmp_path, "negative", 2, "--replan-after", "-1")
    assert p.returncode == 2 and "--replan-after" in p.stderr
    p, _ = run(tmp_path, "mode", 2, "--replan-after", "2", "--replan-mode", "later")
    assert p.returncode == 2 and "--replan-mode" in p.stderr and "later" in p.stderr
    p, _ = run(tmp_path, "keep-alone", 2, "--replan-mode", "keep")  # nothing to measure
    assert p.returncode == 2 and "--replan-mode" in p.stderr and "--replan-after W > 0" in p.stderr


def test_plan_prices_messages_after_backward_with_a_second_calibration(tmp_path):
    # under load (the default) the ring is calibrated twice: with forward and backward passes
    # beside it (messages that overlap backward) and without (messages after backward)
    p, loaded = run(tmp_path, "loaded", 2, *COMMON)
    assert p.returncode == 0, p.stdout + p.stderr
    plan = load(loaded)["plan"]
    assert plan["calibrated_under_load"]
    assert plan["after_backward_alpha_seconds"] >= 0
    assert plan["after_backward_beta_seconds_per_byte"] > 0
    assert plan["predicted_iteration_seconds"] > 0
    p, idle = run(tmp_path, "idle", 2, *COMMON, "--calibrate-under-load", "false")
    assert p.returncode == 0, p.stdout + p.stderr
    plan = load(idle)["plan"]
    assert not plan["calibrated_under_load"]
    assert "after_backward_alpha_seconds" not in plan  # one calibration, used throughout
