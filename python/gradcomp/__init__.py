# SPDX-License-Identifier: Apache-2.0
"""gradcomp for Python: gradient compression for data-parallel training.

``gradcomp.torch`` holds the PyTorch DDP communication hooks (``import gradcomp.torch as gc``).
The compressors, their error feedback and the wire format are gradcomp's C++ headers, compiled
into ``gradcomp._core``.
"""
from ._core import version as __version__

__all__ = ["__version__"]
