"""Pinned mappings: a user's constraints on how instructions are cut, for experiments.

A mapping file (TOML) holds `[[pin]]` tables; each constrains the nodes of one level that work on
one instruction of the program:

    [[pin]]
    line = 4                    # the instruction on this line of the program
    level = 0                   # the level whose nodes it constrains (default 0, the root)
    parallel = { N = 4, K = 2 } # parallel ways of these axes (the others are searched)
    serial = { M = 32 }         # serial pieces of these axes (the others are searched)
    order = ["M", "N", "K"]     # the loop order, outermost first (default: searched)

Axes are named as `fractal compile` lists them (matmul: M, N, K). A pin is validated as a whole:
the file here (keys, kinds, duplicates, lines that hold no instruction, levels that do not
split), the axes and numbers when the instruction is compiled (`compiler.decompose`), where a pin
that cannot hold (more ways than the fan-out, a piece that does not fit the child's memory, a
reduction axis outside the loop) is an error located at its table in the file.

A pinned instruction's tasks carry their pins (`Task.pin`), so they are planned apart from any
unpinned task of the same shape: the pin constrains the plan, never the bound
(`compiler.bounds`), which depends on the instruction and the machine alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from isa.errors import ErrorGroup, UserError, did_you_mean
from isa.program import Program
from machine import Machine
from machine.description import read_toml

__all__ = ["Pin", "Mapping", "load_mapping", "mapping_from_dict"]

_PIN_KEYS = ("line", "level", "parallel", "serial", "order")
#: the most pins one file may hold
MAX_PINS = 10_000


@dataclass(frozen=True)
class Pin:
    """One level's constraints for one instruction (hashable: it is part of a task's key)."""
    level: int
    parallel: tuple[tuple[str, int], ...] = ()
    serial: tuple[tuple[str, int], ...] = ()
    order: tuple[str, ...] = ()
    where: str = ""             # "map.toml: pin[1]", for errors

    def text(self) -> str:
        parts = [f"{k} {', '.join(f'{a}={n}' for a, n in v)}"
                 for k, v in (("parallel", self.parallel), ("serial", self.serial)) if v]
        if self.order:
            parts.append("order " + ", ".join(self.order))
        return "; ".join(parts) or "no constraint"


@dataclass(frozen=True)
class Mapping:
    """Pins by program line."""
    file: str
    pins: dict                  # line -> tuple[Pin, ...]

    def for_line(self, line: int | None) -> tuple[Pin, ...]:
        return self.pins.get(line, ())


def _axes(table, where: str, errors: list) -> tuple:
    if not isinstance(table, dict):
        errors.append(UserError("expected a table of axis = count, e.g. { M = 4 }", where))
        return ()
    out = []
    for axis, n in table.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 2**31:
            errors.append(UserError(f"axis '{axis}': expected a whole number from 1 to 2**31, "
                                    f"got {n!r}", f"{where}.{axis}"))
        else:
            out.append((str(axis), n))
    return tuple(out)


def mapping_from_dict(data: dict, file: str, program: Program, machine: Machine) -> Mapping:
    """Validate a parsed mapping file against a program and a machine, as a whole."""
    errors: list[UserError] = []
    for key in data:
        if key != "pin":
            errors.append(UserError(f"unknown key '{key}' (a mapping file holds [[pin]] tables)",
                                    f"{file}: {key}", hint=did_you_mean(key, ["pin"])))
    raw = data.get("pin", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        errors.append(UserError("'pin' must be an array of tables ([[pin]])", f"{file}: pin"))
        raw = []
    if len(raw) > MAX_PINS:
        raise UserError(f"{len(raw):,} pins, over the limit of {MAX_PINS:,}", f"{file}: pin")
    lines = {ins.loc.line: ins for ins in program.instructions if ins.loc is not None}
    pins: dict = {}
    seen: dict = {}
    for i, t in enumerate(raw, 1):
        where = f"{file}: pin[{i}]"
        before = len(errors)
        for key in t:
            if key not in _PIN_KEYS:
                errors.append(UserError(f"unknown key '{key}'", f"{where}.{key}",
                                        hint=did_you_mean(key, _PIN_KEYS)))
        line, level = t.get("line"), t.get("level", 0)
        if "line" not in t:
            errors.append(UserError("missing key 'line' (the program line of the instruction)",
                                    f"{where}.line"))
        elif isinstance(line, bool) or not isinstance(line, int) or line not in lines:
            errors.append(UserError(f"line {line!r} of {program.file} holds no instruction",
                                    f"{where}.line",
                                    hint="instructions are on lines " + ", ".join(
                                        map(str, sorted(lines)[:10])) + (" ..." if len(lines) > 10 else "")))
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < machine.depth:
            errors.append(UserError(f"level {level!r}: machine '{machine.name}' splits at levels "
                                    f"0 to {machine.depth - 1} (its leaves compute)",
                                    f"{where}.level"))
        parallel = _axes(t.get("parallel", {}), f"{where}.parallel", errors)
        serial = _axes(t.get("serial", {}), f"{where}.serial", errors)
        order = t.get("order", [])
        if not isinstance(order, list) or not all(isinstance(a, str) for a in order):
            errors.append(UserError("expected a list of axis names, outermost first",
                                    f"{where}.order"))
            order = []
        elif len(set(order)) != len(order):
            errors.append(UserError("an axis is named twice", f"{where}.order"))
        if len(errors) == before and (line, level) in seen:    # both whole numbers by now
            errors.append(UserError(f"line {line}, level {level} is pinned already by "
                                    f"pin[{seen[(line, level)]}]", where))
        if len(errors) == before:
            seen[(line, level)] = i
            pins.setdefault(line, []).append(Pin(level, parallel, serial, tuple(order), where))
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return Mapping(file, {k: tuple(sorted(v, key=lambda p: p.level)) for k, v in pins.items()})


def load_mapping(path: str | Path, program: Program, machine: Machine) -> Mapping:
    """Load and validate a mapping file (TOML) for a program on a machine."""
    return mapping_from_dict(read_toml(path, "mapping file", "--mapping"), str(path), program,
                             machine)
