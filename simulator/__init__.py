"""The fractal machine simulator: leaf compute kernels and the machine model.

The kernels are compiled by numba and cached on disk. numba keys a function's cache on its own
source file only, so a kernel that inlines a function of another module (the leaf batches inline
`narrow`'s rounding) would keep running the old one after that module changed. The cache is
therefore kept in a folder named by a digest of every module of this package:
`$NUMBA_CACHE_DIR/fractal-kernels/<digest>`, or `~/.cache/fractal-kernels/<digest>` (under
`$XDG_CACHE_HOME` where it is set); numba falls back to its own places where that folder cannot
be written. Another version's folder that nothing has written for `STALE_DAYS` days is removed
when the package loads (`prune_stale`), so that upgrades do not pile up compiled kernels.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
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


#: another version's kernel folder unwritten for this many days is removed
STALE_DAYS = 30


def prune_stale(current: str, days: float = STALE_DAYS) -> list[str]:
    """Remove the folders beside `current` that hold other versions' kernels (named by a digest)
    and whose contents have not changed in `days` days; return them. A folder that cannot be
    read or removed is left as it is."""
    cutoff, removed = time.time() - days * 86400, []
    try:
        entries = list(os.scandir(os.path.dirname(current)))
    except OSError:
        return removed
    for entry in entries:
        try:
            if (entry.path != current and re.fullmatch(r"[0-9a-f]{16}", entry.name)
                    and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_mtime < cutoff):
                shutil.rmtree(entry.path)
                removed.append(entry.path)
        except OSError:
            pass
    return removed


numba.config.CACHE_DIR = kernel_cache_dir()
prune_stale(numba.config.CACHE_DIR)
