# SPDX-License-Identifier: Apache-2.0
"""Running gradcomp-train from the pytest files: where the program, mpiexec and the data are
(CMake passes GRADCOMP_TRAIN and GRADCOMP_MPIEXEC), a skip marker for when they are missing, one
small run (640 training samples, one epoch, evaluated on the first 200 test samples, a JSON
report) and reading its report."""
import json
import os
import subprocess

import pytest

DATA = "/usr/share/datasets/fashion-mnist"
MPIEXEC = os.environ.get("GRADCOMP_MPIEXEC", "mpiexec")
GRADCOMP_TRAIN = os.environ.get("GRADCOMP_TRAIN", "")

needs_train = pytest.mark.skipif(not (os.path.isdir(DATA) and GRADCOMP_TRAIN),
                                 reason="needs gradcomp-train (GRADCOMP_TRAIN) and the dataset")


def run(tmp_path, name, ranks, *args, evals_per_epoch=2):
    """mpiexec -n RANKS gradcomp-train on 640 samples for one epoch, evaluated on the first
    200 test samples (an evaluation costs its forward passes: more images would cost most of
    such a run); returns the finished process and the report's path."""
    report = tmp_path / f"{name}.json"
    p = subprocess.run([MPIEXEC, "-n", str(ranks), GRADCOMP_TRAIN, "--train-limit", "640",
                        "--test-limit", "200",
                        "--epochs", "1", "--evals-per-epoch", str(evals_per_epoch), "--report",
                        str(report), *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return p, report


def load(report):
    """The JSON report at `report`."""
    with open(report) as f:
        return json.load(f)
