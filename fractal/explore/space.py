"""Design points: the machines of an explore spec's space, each named by its content.

A design point is one value per parameter. Its machine is the base machine with those values
(`spec.apply`), named `BASE-x` and eight hex digits of the SHA-256 of all its other fields, so
that the same machine has the same name (and so the same store keys) whichever spec or search
reached it. A combination the machine file's validation refuses (a MAC array whose rate another
parameter overrides, a machine over the size limits) is a design point without a machine, and
its reason is recorded. The base machine itself is always a point, under its own name.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
from dataclasses import dataclass

from fractal.explore.spec import Spec, apply
from fractal.store import canonical, plain
from isa.errors import ErrorGroup, UserError
from machine import Machine

__all__ = ["DesignPoint", "design_point", "grid", "base_point", "DESIGN_POINT", "fingerprint",
           "base_value"]

#: the store's kind for a design point's outcome on a spec's workloads and budgets
DESIGN_POINT = "design-point"


@dataclass(frozen=True)
class DesignPoint:
    values: tuple               # ((parameter, value), ...) in the spec's order; () for the base
    machine: Machine | None     # None: the values make no valid machine (see `invalid`)
    invalid: str = ""           # why the values make no machine
    is_base: bool = False

    @property
    def name(self) -> str:
        return self.machine.name if self.machine is not None else ""


def fingerprint(m: Machine) -> str:
    """The digest of every field of a machine but its name and description."""
    fields = plain(dataclasses.replace(m, name="", description=""))
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


def design_point(spec: Spec, values: dict) -> DesignPoint:
    """The design point of one value per parameter."""
    pairs = tuple((p.name, values[p.name]) for p in spec.parameters)
    try:
        m = apply(spec.base, values, name=spec.base.name,
                  description=f"a design point explored from {spec.base.name}")
    except UserError as e:
        errors = e.errors if isinstance(e, ErrorGroup) else [e]
        return DesignPoint(pairs, None, "invalid machine: " + "; ".join(
            f"{x.where.split(': ', 1)[-1] if isinstance(x.where, str) else x.where}: {x.message}"
            for x in errors[:3]))
    m = dataclasses.replace(m, name=f"{spec.base.name}-x{fingerprint(m)[:8]}")
    return DesignPoint(pairs, m)


def base_point(spec: Spec) -> DesignPoint:
    """The base machine as a point: every parameter at the base's own value."""
    values = []
    for p in spec.parameters:
        v = base_value(spec.base, p.name)
        if isinstance(v, float) and v.is_integer() and all(isinstance(x, int) for x in p.values):
            v = int(v)          # 32.0 ops/cycle as the spec writes its values, 32
        values.append((p.name, v))
    return DesignPoint(tuple(values), spec.base, is_base=True)


def base_value(m: Machine, name: str):
    """The base machine's own value of a parameter (None where its levels differ)."""
    parts = name.split(".")
    if name == "depth":
        return m.depth
    if name == "fanout":
        return m.fanouts[0] if len(set(m.fanouts)) == 1 else None
    if parts[0] == "compute":
        v = getattr(m.compute, parts[1])
        if parts[1] == "mac_ops_per_cycle_by_dtype":
            return dict(v).get(parts[2])
        return v
    if len(parts) == 1:
        return getattr(m, name)
    sel, field = parts[1], parts[2]
    levels = {"root": m.levels[:1], "leaf": m.levels[-1:], "all": m.levels}.get(sel)
    if levels is None:
        levels = m.levels[int(sel):int(sel) + 1] if sel.isdigit() else \
            [lv for lv in m.levels if lv.name == sel]
    if field == "fanout":
        levels = [lv for lv in levels if lv.fanout]
    seen = {getattr(lv, field) for lv in levels}
    return seen.pop() if len(seen) == 1 else None


def grid(spec: Spec):
    """Every design point of the space, in the order of the parameters' values."""
    names = [p.name for p in spec.parameters]
    for combo in itertools.product(*(p.values for p in spec.parameters)):
        yield design_point(spec, dict(zip(names, combo)))
