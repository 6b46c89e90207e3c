# SPDX-License-Identifier: Apache-2.0
"""Builds the Python package gradcomp for the interpreter that runs this file (pip's, a venv's):
the pure-Python modules from python/gradcomp/ and the extension gradcomp._core from
python/src/core.cpp against the headers in include/ (C++20, -O3 -DNDEBUG like CMake's Release
build). The metadata is in pyproject.toml; the version is read here from
include/gradcomp/version.hpp, the one place it is written.

Usage (no network: build dependencies from Debian, see pyproject.toml)::

    pip install --no-build-isolation --no-index .

setuptools' own temporaries (compiled objects, the staged wheel, the egg-info) go to
build-setuptools/, not build/ (CMake's build tree of the release preset), or to the directory
named by the environment variable GRADCOMP_SETUPTOOLS_BUILD_BASE (scripts/pip-install-test.sh:
a temporary one). The extension is recompiled when a header under include/gradcomp/ or this
file is newer than the build's.
"""
import os
import pathlib
import re

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

ROOT = pathlib.Path(__file__).resolve().parent
# setuptools' build_base and egg_base, outside CMake's build/ (ignored by git: /build*/)
BUILD_BASE = os.environ.get("GRADCOMP_SETUPTOOLS_BUILD_BASE") or "build-setuptools"


def read_version(header=ROOT / "include" / "gradcomp" / "version.hpp"):
    """Returns "MAJOR.MINOR.PATCH" from the #defines GRADCOMP_VERSION_MAJOR, _MINOR and _PATCH
    of `header`. Raises RuntimeError naming the header and the missing #define."""
    text = header.read_text(encoding="utf-8")
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"^[ \t]*#[ \t]*define[ \t]+GRADCOMP_VERSION_{part}[ \t]+(\d+)[ \t]*$",
                      text, re.MULTILINE)
        if m is None:
            raise RuntimeError(f"{header}: no '#define GRADCOMP_VERSION_{part} <number>'")
        parts.append(str(int(m.group(1))))
    return ".".join(parts)


# setuptools wants paths relative to the project root (pip and PEP 517 frontends run there)
os.chdir(ROOT)
os.makedirs(BUILD_BASE, exist_ok=True)

core = Pybind11Extension(
    "gradcomp._core",
    ["python/src/core.cpp"],
    include_dirs=["include"],
    # setuptools' build_ext compares only these with the built extension's time
    depends=sorted(str(p.relative_to(ROOT)) for p in (ROOT / "include" / "gradcomp").rglob("*")
                   if p.suffix in (".hpp", ".h", ".cuh", ".inl")) + ["setup.py"],
    cxx_std=20,
    define_macros=[
        ("NDEBUG", None),
        # reported by gradcomp._core.build_info() (python -m gradcomp.info)
        ("GRADCOMP_PYTHON_BUILD_SYSTEM", '"setuptools"'),
        ("GRADCOMP_PYTHON_BUILD_TYPE", '"Release"'),
    ],
    # after Python's own CFLAGS (Debian's: -O2): the last -O wins
    extra_compile_args=["-O3", "-pthread"],
    extra_link_args=["-pthread"],
)

setup(
    version=read_version(),
    packages=["gradcomp"],
    package_dir={"gradcomp": "python/gradcomp"},
    ext_modules=[core],
    cmdclass={"build_ext": build_ext},
    zip_safe=False,
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
