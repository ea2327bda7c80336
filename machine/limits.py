"""The size of machine the tool agrees to model, refused up front when exceeded.

A machine too deep, too wide or with too many leaves would exhaust the host's memory or overflow
the numbers of the cost model; it is refused with a located `UserError` that names the limit and
the environment variable that raises it:

    FRACTAL_MAX_DEPTH        fan-out stages of a machine                  (default 64)
    FRACTAL_MAX_FANOUT       children per node                            (default 16384)
    FRACTAL_MAX_LEAVES       leaves of a machine                          (default 2**64)

The limits of a program and of a run on data live with the program side (`isa/limits.py`).
Like the rest of `machine/`, this module imports nothing of ours but the errors.
"""
from __future__ import annotations

import math

from isa.errors import UserError, env_limit

__all__ = ["LIMITS", "limit", "check_depth", "check_machine_shape"]

#: name -> (environment variable, default, what it bounds)
LIMITS = {
    "depth": ("FRACTAL_MAX_DEPTH", 64, "fan-out stages of a machine"),
    "fanout": ("FRACTAL_MAX_FANOUT", 16384, "children per node"),
    "leaves": ("FRACTAL_MAX_LEAVES", 2**64, "leaves of a machine"),
}


def limit(name: str) -> int:
    """The limit in force: its environment variable when set, else the default."""
    var, default, _ = LIMITS[name]
    return env_limit(var, default)


def _over(name: str, what: str, value: int, where) -> UserError:
    var, _, bounds = LIMITS[name]
    return UserError(f"{what} {value:,}, over the limit of {limit(name):,} ({bounds}; "
                     f"set {var} to raise it)", where)


def check_depth(depth: int, where) -> None:
    """Refuse a depth over the limit before anything of that size is built."""
    if depth > limit("depth"):
        raise _over("depth", "the machine's depth is", depth, where)


def check_machine_shape(fanouts, where_depth, where_fanout) -> None:
    """Refuse a machine too deep, too wide or with too many leaves to model."""
    check_depth(len(fanouts), where_depth)
    fanouts = list(fanouts)
    for f in fanouts:
        if f > limit("fanout"):
            raise _over("fanout", "a fan-out is", f, where_fanout)
    leaves = math.prod(fanouts)
    if leaves > limit("leaves"):
        raise _over("leaves", "the machine's leaf count is", leaves, where_depth)
