# SPDX-License-Identifier: Apache-2.0
"""What this gradcomp installation is: ``python -m gradcomp.info`` (or ``gradcomp-info`` where
pip installed the package) prints gradcomp's version, where the package and its compiled
extension are, the interpreter, how ``gradcomp._core`` was compiled, PyTorch's version and
torch.distributed's backends, and the DDP communication hooks of ``gradcomp.torch`` with the
compressor methods they accept (like DeepSpeed's ``ds_report`` or ``horovodrun --check-build``).

    python -m gradcomp.info [--json]

``--json`` prints the same report as one JSON object (the keys of :func:`report`). The exit
status is 0 whenever the report was printed: a missing PyTorch is reported, not an error.
"""
import argparse
import inspect
import json
import os
import platform
import sys

from . import __version__, _core

__all__ = ["report", "hooks", "format_report", "main"]


def hooks(module):
    """The DDP communication hooks `module` (``gradcomp.torch``) offers: the names of its public
    callables (no leading underscore) whose name ends with ``_hook``, sorted. Raises nothing."""
    return sorted(name for name, value in vars(module).items()
                  if not name.startswith("_") and name.endswith("_hook") and callable(value))


def _torch_report():
    """PyTorch's part of the report: version ("not installed" when ``import torch`` fails),
    whether torch.distributed is available and, if it is, which of its backends are built in."""
    try:
        import torch
    except ImportError as e:
        return {"version": "not installed", "distributed": False, "backends": {},
                "error": f"{type(e).__name__}: {e}"}
    out = {"version": str(torch.__version__), "location": os.path.dirname(torch.__file__),
           "distributed": False, "backends": {}}
    try:
        import torch.distributed as dist
        out["distributed"] = bool(dist.is_available())
        if out["distributed"]:
            out["backends"] = {name: bool(getattr(dist, f"is_{name}_available")())
                               for name in ("gloo", "mpi", "nccl")
                               if hasattr(dist, f"is_{name}_available")}
    except ImportError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def _hooks_report():
    """gradcomp.torch's part of the report: whether it imports (it needs PyTorch), its hooks
    (:func:`hooks`) with the first line of each docstring, and the error when it does not."""
    try:
        from . import torch as gtorch
    except ImportError as e:
        return {"importable": False, "error": f"{type(e).__name__}: {e}", "hooks": [],
                "descriptions": {}}
    names = hooks(gtorch)
    descriptions = {}
    for name in names:
        doc = inspect.getdoc(getattr(gtorch, name)) or ""
        descriptions[name] = doc.split("\n\n")[0].replace("\n", " ")
    return {"importable": True, "hooks": names, "descriptions": descriptions}


def report():
    """The report as a dict of JSON-serialisable values. Keys: ``gradcomp`` (version,
    location: the package's directory, core: the extension's file), ``python`` (executable,
    version, implementation, platform), ``build`` (``gradcomp._core.build_info()``), ``torch``
    (version or "not installed", distributed: bool, backends: {name: bool}), ``torch_hooks``
    (importable: bool, hooks: the hook names, descriptions: {name: first docstring
    paragraph}, error when gradcomp.torch does not import) and ``methods`` (the compressor
    names ``gradcomp.torch.HookState(method=...)`` accepts, by kind: sparse, quantizer, dense;
    sparse_allgather_hook takes them all, ring_allreduce_hook the dense ones, fp16_hook
    "fp16"). Raises nothing for a missing PyTorch (reported instead)."""
    return {
        "gradcomp": {"version": __version__,
                     "location": os.path.dirname(os.path.abspath(__file__)),
                     "core": os.path.abspath(_core.__file__)},
        "python": {"executable": sys.executable, "version": platform.python_version(),
                   "implementation": platform.python_implementation(),
                   "platform": platform.platform()},
        "build": dict(_core.build_info()),
        "torch": _torch_report(),
        "torch_hooks": _hooks_report(),
        "methods": {"sparse": list(_core.sparse_methods),
                    "quantizer": list(_core.quantizer_methods),
                    "dense": list(_core.dense_methods)},
    }


def _yes(flag):
    """"yes" or "no" for the truth of `flag`."""
    return "yes" if flag else "no"


def format_report(r):
    """The report `r` (:func:`report`'s dict) as aligned, human-readable text lines, one string
    ending in a newline. Raises KeyError if `r` lacks one of report()'s keys."""
    g, p, b, t, h, m = (r["gradcomp"], r["python"], r["build"], r["torch"], r["torch_hooks"],
                        r["methods"])
    rows = [
        ("gradcomp version", g["version"]),
        ("gradcomp location", g["location"]),
        ("gradcomp._core", g["core"]),
        ("python", f"{p['executable']} ({p['implementation']} {p['version']})"),
        ("platform", p["platform"]),
        ("compiler", f"{b['compiler']} {b['compiler_version']}".strip()),
        ("C++ standard", f"__cplusplus = {b['cplusplus']}"),
        ("build", f"{b['build_system']}, {b['build_type']} (optimized: {_yes(b['optimized'])}, "
                  f"assertions: {_yes(b['assertions'])})"),
        ("built with MPI", _yes(b["mpi"])),
        ("built with BLAS", _yes(b["blas"])),
        ("built with CUDA", _yes(b["cuda"])),
        ("built with OpenMP", _yes(b["openmp"])),
        ("pybind11", b["pybind11_version"]),
        ("Python headers", b["python_headers"]),
        ("torch version", t["version"]),
        ("torch.distributed", _yes(t["distributed"]) + (
            " (" + ", ".join(f"{k}: {_yes(v)}" for k, v in t["backends"].items()) + ")"
            if t["backends"] else "")),
    ]
    if h["importable"]:
        rows.append(("gradcomp.torch hooks", ", ".join(h["hooks"]) or "none"))
    else:
        rows.append(("gradcomp.torch hooks", f"not importable ({h['error']})"))
    rows += [("sparse methods", ", ".join(m["sparse"])),
             ("quantizer methods", ", ".join(m["quantizer"])),
             ("dense methods", ", ".join(m["dense"]))]
    width = max(len(k) for k, _ in rows)
    lines = ["gradcomp build report", "-" * (width + 2 + 40)]
    lines += [f"{k:<{width}}  {v}" for k, v in rows]
    if h["importable"] and h["descriptions"]:
        lines += ["", "hooks:"]
        lines += [f"  {name}: {desc}" for name, desc in h["descriptions"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """The command line: prints :func:`report` as text, or as JSON with ``--json``. `argv` is
    the argument list without the program name (default: sys.argv[1:]). Returns the exit
    status, 0; argparse exits with 2 on an unknown option."""
    parser = argparse.ArgumentParser(prog="python -m gradcomp.info",
                                     description="Report gradcomp's version, build and hooks.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    r = report()
    if args.json:
        sys.stdout.write(json.dumps(r, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
