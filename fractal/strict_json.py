"""Strict JSON for every `--json` output: parsers such as JavaScript's and jq's reject the
`NaN` and `Infinity` that Python's json module writes by default.

A non-finite number (a NaN output of valid data, an infinite statistic) is written as `null`,
and the object that holds it lists where under the key `non_finite` (dotted paths, such as
`outputs.y.mean`), so that a reader can tell a missing value from a non-finite one. A top-level
list flags each of its objects on its own. Output without non-finite numbers is unchanged.
"""
from __future__ import annotations

import json
import math

import numbers

__all__ = ["dump", "dumps", "clean"]

FLAG = "non_finite"


def _clean(x, path: str, found: list):
    if isinstance(x, dict):
        return {k: _clean(v, f"{path}.{k}" if path else str(k), found) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v, f"{path}[{i}]", found) for i, v in enumerate(x)]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        v = float(x)
        if not math.isfinite(v):
            found.append(path or "(value)")
            return None
        return v
    return x


def clean(obj):
    """`obj` with every non-finite number as None, flagged under `non_finite`."""
    if isinstance(obj, list):
        return [clean(v) if isinstance(v, dict) else _clean(v, "", []) for v in obj]
    found: list[str] = []
    out = _clean(obj, "", found)
    if found and isinstance(out, dict):
        out[FLAG] = found
    return out


def dumps(obj, indent: int | None = 2) -> str:
    return json.dumps(clean(obj), indent=indent, allow_nan=False)


def stamped(obj):
    """`obj` with the tool's version and the schema version of the outputs first (each object
    of a top-level list on its own)."""
    from fractal.version import SCHEMA_VERSION, tool_version
    if isinstance(obj, list):
        return [stamped(v) if isinstance(v, dict) else v for v in obj]
    if isinstance(obj, dict):
        return {"tool_version": tool_version(), "schema_version": SCHEMA_VERSION, **obj}
    return obj


def dump(obj, out, indent: int | None = 2):
    """Write `obj` as strict JSON, stamped with the versions (`stamped`), then a newline."""
    out.write(dumps(stamped(obj), indent))
    out.write("\n")
