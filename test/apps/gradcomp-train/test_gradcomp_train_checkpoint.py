# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --checkpoint / --resume (docs/checkpoint.md): a run stopped after a few
iterations with a checkpoint and resumed from it ends with exactly the parameters of the
uninterrupted run (the replicas' hash, bit for bit), with error feedback, momentum buffers, loss
scaling and LARS in the state; a checkpoint of another configuration is refused naming the
option."""
import pytest

from train_runner import load, needs_train, run

CASES = [
    # method, transport, extra options (every method over allgather, ring and ps resumes bit for
    # bit at the library level: test/mpi/pipeline_transports_test.cpp; here the program's own state)
    ("reused_threshold", "allgather", ["--loss-scale", "dynamic", "--optimizer", "lars"]),
    ("sampled_topk", "ring", []),  # SGD's momentum buffers through LibTorch's serialization
]


@needs_train
@pytest.mark.parametrize("method,transport,extra", CASES)
def test_resumed_run_ends_bit_identical(tmp_path, method, transport, extra):
    args = ["--method", method, "--density", "0.05", "--transport", transport, "--merge",
            "optimal", "--profile-iterations", "2", *extra]
    whole, whole_report = run(tmp_path, "whole", 2, *args)
    assert whole.returncode == 0, whole.stderr
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    first, first_report = run(tmp_path, "first", 2, *args, "--checkpoint", str(folder),
                              "--stop-after-iterations", "4")
    assert first.returncode == 0, first.stderr
    assert (folder / "rank-0.state").exists() and (folder / "rank-1.state").exists()
    assert not list(folder.glob("*.tmp"))
    resumed, resumed_report = run(tmp_path, "resumed", 2, *args, "--resume", str(folder))
    assert resumed.returncode == 0, resumed.stderr
    w, f, r = load(whole_report), load(first_report), load(resumed_report)
    assert f["config"]["stopped_early"] and f["curve"][-1]["iteration"] <= 4
    assert r["config"]["resumed_at_iteration"] == 4
    assert r["replicas_identical"] and w["replicas_identical"]
    # the checkpoint held everything: the resumed run ends where the uninterrupted one does
    assert r["replica_hashes"] == w["replica_hashes"]
    assert f["replica_hashes"] != w["replica_hashes"]
    assert r["final_test_accuracy"] == w["final_test_accuracy"]


@needs_train
def test_checkpoint_of_another_configuration_is_refused(tmp_path):
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    first, _ = run(tmp_path, "first", 2, "--method", "exact_topk", "--transport", "allgather",
                   "--checkpoint", str(folder), "--stop-after-iterations", "2")
    assert first.returncode == 0, first.stderr
    other, _ = run(tmp_path, "other", 2, "--method", "reused_threshold", "--transport",
                   "allgather", "--resume", str(folder))
    assert other.returncode != 0
    assert "the checkpoint was written with --method exact_topk, this run has reused_threshold" \
        in other.stderr
    denser, _ = run(tmp_path, "denser", 2, "--method", "exact_topk", "--transport", "allgather",
                    "--density", "0.5", "--resume", str(folder))
    assert denser.returncode != 0
    assert "the checkpoint was written with --density 0.01, this run has 0.5" in denser.stderr
    decayed, _ = run(tmp_path, "decayed", 2, "--method", "exact_topk", "--transport",
                     "allgather", "--lr-decay", "step", "--lr-decay-epochs", "1", "--resume",
                     str(folder))
    assert decayed.returncode != 0
    assert "the checkpoint was written with --lr-decay none, this run has step at 1 x 0.1" \
        in decayed.stderr


@needs_train
def test_a_job_killed_while_writing_a_checkpoint_resumes_from_the_previous_one(tmp_path):
    """Rank 1 died before writing the newest checkpoint (its files are one generation behind):
    the ranks agree on the newest iteration every one of them holds and resume there, ending
    where the uninterrupted run does; with no common iteration, every rank refuses."""
    args = ["--method", "exact_topk", "--density", "0.05", "--transport", "allgather"]
    whole, whole_report = run(tmp_path, "whole", 2, *args)
    assert whole.returncode == 0, whole.stderr
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    first, _ = run(tmp_path, "first", 2, *args, "--checkpoint", str(folder),
                   "--checkpoint-every", "2", "--stop-after-iterations", "4")
    assert first.returncode == 0, first.stderr
    # written at iterations 2 and 4: the current and the previous generation on each rank
    assert (folder / "rank-1.state.previous").exists()
    (folder / "rank-1.state.previous").replace(folder / "rank-1.state")
    resumed, resumed_report = run(tmp_path, "resumed", 2, *args, "--resume", str(folder))
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at iteration 2, the newest checkpoint every rank holds" in resumed.stdout
    r, w = load(resumed_report), load(whole_report)
    assert r["config"]["resumed_at_iteration"] == 2
    assert r["replica_hashes"] == w["replica_hashes"]
    (folder / "rank-1.state").unlink()
    lost, _ = run(tmp_path, "lost", 2, *args, "--resume", str(folder))
    assert lost.returncode == 2  # every rank agreed: a clean exit, not MPI_Abort
    assert "no iteration of the checkpoints in" in lost.stderr
    assert "none/none" in lost.stderr
