"""The tool's version: the release (`__version__`, from the installed package's metadata) and
`tool_version()`, the release with a digest of the source that computes results, which every
JSON output and every stored evaluation carries, so that a saved report can be traced to what
made it. `SCHEMA_VERSION` numbers the layout of the JSON outputs: it changes when a key changes
meaning or goes away (new keys do not change it)."""
from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["__version__", "DISTRIBUTION", "SCHEMA_VERSION", "tool_version"]

#: the distribution's name (free on PyPI; `fractal` and the stage names are other projects')
DISTRIBUTION = "fractal-machines"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:            # run from a source tree that was never installed
    __version__ = "0+unknown"

SCHEMA_VERSION = 1
#: the packages whose source the tool version digests (their models make the results)
PACKAGES = ("isa", "machine", "compiler", "simulator", "fractal")


@lru_cache(maxsize=1)
def tool_version() -> str:
    """`VERSION+DIGEST`: the release and the SHA-256 (16 hex digits) of the source files (.py,
    .lark) of the packages that compute results."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).rglob("*")):
                if path.suffix in (".py", ".lark") and "__pycache__" not in path.parts:
                    digest.update(f"{package}/{path.relative_to(folder).as_posix()}\0".encode())
                    digest.update(path.read_bytes())
                    digest.update(b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"
