# SPDX-License-Identifier: Apache-2.0
"""Which gradcomp the tests in this directory import.

By default the build tree's: GRADCOMP_PYTHON_PACKAGE_DIR (ctest sets it; default
<repository>/build/python) goes first on sys.path and on the rank processes' PYTHONPATH, and a
package that is not built there skips the tests. With GRADCOMP_TEST_INSTALLED=1 the installed
gradcomp (pip install, scripts/pip-install-test.sh): sys.path is left alone, a missing package
is an error, and the imported package must not come from the repository's python/ folder nor
from a build tree (build/, build-*/) in it."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTALLED = os.environ.get("GRADCOMP_TEST_INSTALLED") == "1"
PACKAGE_DIR = os.environ.get("GRADCOMP_PYTHON_PACKAGE_DIR", str(ROOT / "build" / "python"))


def search_path():
    """The directories to put first on sys.path to import gradcomp: [PACKAGE_DIR], or [] for
    the installed package (GRADCOMP_TEST_INSTALLED=1)."""
    return [] if INSTALLED else [PACKAGE_DIR]


def subprocess_env(env):
    """`env` (a dict, changed and returned) for a process that imports gradcomp: PYTHONPATH set
    to PACKAGE_DIR for the build tree's package, left as it is for the installed one."""
    if not INSTALLED:
        env["PYTHONPATH"] = PACKAGE_DIR
    return env


def repository_copies():
    """The repository's folders an installed gradcomp must not be imported from: python/ and
    every top-level build tree (build/, build-setuptools/, the presets' build-*/)."""
    return [ROOT / "python"] + sorted(p for p in ROOT.glob("build*") if p.is_dir())


def check_installed(module):
    """With GRADCOMP_TEST_INSTALLED=1: raises AssertionError if the imported `module` (the
    gradcomp package or one of its modules) lies under one of repository_copies(). Does
    nothing otherwise."""
    if not INSTALLED:
        return
    where = pathlib.Path(module.__file__).resolve()
    for folder in repository_copies():
        assert not where.is_relative_to(folder.resolve()), (
            f"GRADCOMP_TEST_INSTALLED=1 but {module.__name__} was imported from {where}, under "
            f"the repository's {folder}: not the installed package")
