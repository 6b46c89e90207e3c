# SPDX-License-Identifier: Apache-2.0
"""Tests of ``python -m gradcomp.info``, run in a subprocess under this interpreter: its JSON
report against include/gradcomp/version.hpp, gradcomp.__version__, gradcomp._core.build_info(),
torch.__version__ and the hooks of gradcomp.torch; and the text report's exit status.

Imports the build tree's package (GRADCOMP_PYTHON_PACKAGE_DIR, default <build>/python) or, with
GRADCOMP_TEST_INSTALLED=1, the installed one (package_under_test.py)."""
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import package_under_test  # noqa: E402  (which gradcomp: the build tree's or the installed)

sys.path[:0] = package_under_test.search_path()
if package_under_test.INSTALLED:
    gradcomp = importlib.import_module("gradcomp")
    core = importlib.import_module("gradcomp._core")
    package_under_test.check_installed(gradcomp)
else:
    gradcomp = pytest.importorskip("gradcomp")
    core = pytest.importorskip("gradcomp._core")


def header_version():
    """"MAJOR.MINOR.PATCH" from the three #defines of include/gradcomp/version.hpp."""
    text = (package_under_test.ROOT / "include" / "gradcomp" / "version.hpp").read_text()
    return ".".join(
        re.search(rf"^\s*#\s*define\s+GRADCOMP_VERSION_{p}\s+(\d+)\s*$", text, re.M).group(1)
        for p in ("MAJOR", "MINOR", "PATCH"))


def run_info(tmp_path, *args):
    """`python -m gradcomp.info ARGS` under this interpreter, from an empty directory (nothing
    importable by accident); returns the completed process (stdout, stderr as text)."""
    env = package_under_test.subprocess_env(dict(os.environ))
    return subprocess.run([sys.executable, "-m", "gradcomp.info", *args], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    p = run_info(tmp_path_factory.mktemp("info"), "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_version_is_the_headers(report):
    assert report["gradcomp"]["version"] == header_version() == gradcomp.__version__
    assert report["build"]["gradcomp_version"] == header_version()


def test_location_is_the_imported_package(report):
    # the subprocess imports the same package as this process (same interpreter and path)
    location = pathlib.Path(report["gradcomp"]["location"]).resolve()
    assert location == pathlib.Path(gradcomp.__file__).resolve().parent
    assert pathlib.Path(report["gradcomp"]["core"]).resolve() == pathlib.Path(
        core.__file__).resolve()
    assert report["python"]["executable"] == sys.executable
    if package_under_test.INSTALLED:
        for folder in package_under_test.repository_copies():
            assert not location.is_relative_to(folder.resolve()), location


def test_build_options_are_the_extensions(report):
    build = core.build_info()
    assert report["build"] == build
    assert build["cplusplus"] >= 202002  # C++20
    # the extension compiles gradcomp's core headers only
    assert (build["mpi"], build["blas"], build["cuda"]) == (False, False, False)
    assert build["build_system"] in ("cmake", "setuptools")
    assert build["compiler"] in ("GCC", "Clang", "MSVC", "unknown") and build["compiler_version"]
    if package_under_test.INSTALLED:
        assert build["build_system"] == "setuptools" and build["build_type"] == "Release"
    if build["build_type"] == "Debug":  # CMake's debug preset: -g, no NDEBUG
        assert not build["optimized"] and build["assertions"]
    elif build["build_type"] in ("Release", "RelWithDebInfo", "MinSizeRel"):  # -O3/-O2/-Os
        assert build["optimized"] and not build["assertions"]  # and NDEBUG


def test_torch_and_hooks(report):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    assert report["torch"]["version"] == str(torch.__version__)
    assert report["torch"]["distributed"] == dist.is_available()
    gc = importlib.import_module("gradcomp.torch")
    hooks = report["torch_hooks"]
    assert hooks["importable"]
    assert {"sparse_allgather_hook", "ring_allreduce_hook", "fp16_hook"} <= set(hooks["hooks"])
    for name in hooks["hooks"]:
        assert callable(getattr(gc, name)), name
        assert hooks["descriptions"][name]
    assert report["methods"] == {"sparse": list(gc.SPARSE_METHODS),
                                 "quantizer": list(gc.QUANTIZER_METHODS),
                                 "dense": list(gc.DENSE_METHODS)}


def test_text_report(tmp_path):
    p = run_info(tmp_path)
    assert p.returncode == 0, p.stderr
    assert re.search(rf"^gradcomp version\s+{re.escape(header_version())}$", p.stdout, re.M)
    assert re.search(r"^gradcomp\.torch hooks\s+.*sparse_allgather_hook", p.stdout, re.M)
    assert run_info(tmp_path, "--no-such-option").returncode == 2
