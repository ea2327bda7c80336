"""The fractal machine simulator: leaf compute kernels and the machine model.

The kernels are compiled by numba and cached on disk. numba keys a function's cache on its own
source file only, so a kernel that inlines a function of another module (the leaf batches inline
`narrow`'s rounding) would keep running the old one after that module changed. The cache is
therefore kept in a folder named by a digest of every module of this package:
`$NUMBA_CACHE_DIR/fractal-kernels/<digest>`, or `~/.cache/fractal-kernels/<digest>` (under
`$XDG_CACHE_HOME` where it is set); numba falls back to its own places where that folder cannot
be written.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba


def kernel_cache_dir() -> str:
    """The folder of this package's compiled kernels, named by a digest of its sources."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    base = os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME") or \
        os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fractal-kernels", digest.hexdigest()[:16])


numba.config.CACHE_DIR = kernel_cache_dir()
