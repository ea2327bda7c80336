"""fractal: an architecture simulator and compiler for fractal machines (Cambricon-F style).

The script API lives in `fractal.api`; its names are re-exported here lazily, so that the small
modules every layer imports (`fractal.machine`) load without pulling in the whole tool.
"""
from importlib import import_module

__all__ = ["load_program", "build_machine", "compile", "run", "reference", "Machine", "Level", "Compute"]

_LAZY = {"load_program": "fractal.api", "build_machine": "fractal.api", "reference": "fractal.api",
         "compile": "fractal.api", "run": "fractal.api",
         "Machine": "fractal.machine", "Level": "fractal.machine", "Compute": "fractal.machine"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fractal' has no attribute {name!r}")
