"""fractal: an architecture simulator and compiler for fractal machines (Cambricon-F style).

The script API lives in `fractal.api`, and the machine description in the `machine` package; their
names are re-exported here lazily, so that `import fractal` (and the command line's start-up)
does not pull in the whole tool.
"""
from importlib import import_module

__all__ = ["__version__", "load_program", "build_machine", "compile", "run", "reference", "Machine", "Level", "Compute"]

_LAZY = {"__version__": "fractal.version", "load_program": "fractal.api", "build_machine": "fractal.api", "reference": "fractal.api",
         "compile": "fractal.api", "run": "fractal.api",
         "Machine": "machine", "Level": "machine", "Compute": "machine"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fractal' has no attribute {name!r}")
