"""Machines written out as machine files: the table a machine file holds (`machine_dict`), and its
TOML text (`machine_toml`), which `load_machine` reads back to an equal machine.

A level whose memory is carved out of its children's (`memory = "distributed"`) is written as
its file states it: without the memory keys it derives, and each child with its whole memory.
Like the rest of the machine package, the module imports nothing of ours but the machine's own
modules.
"""
from __future__ import annotations

import json
import math
from dataclasses import fields

from machine.area import DEFAULT_PROCESS_NM
from machine.description import DEFAULT_BUFFERING, Compute, Machine

__all__ = ["machine_dict", "machine_toml"]

#: level keys written only where they differ from the default a file may leave out
_LEVEL_DEFAULTS = {"broadcast": True, "buffering": DEFAULT_BUFFERING, "duplex": "full",
                   "memory": "local", "memory_technology": "sram"}


def machine_dict(m: Machine) -> dict:
    """The table of a machine file that loads back to `m`."""
    out = {"name": m.name}
    if m.description:
        out["description"] = m.description
    out["frequency_hz"] = m.frequency_hz
    if m.process_nm != DEFAULT_PROCESS_NM:
        out["process_nm"] = m.process_nm
    levels = []
    for i, lv in enumerate(m.levels):
        t = {}
        for f in fields(lv):
            v = getattr(lv, f.name)
            if f.name == "physical_memory" or (f.name == "fanout" and i == m.depth):
                continue
            if lv.physical_memory and f.name in ("memory_bytes", "memory_bandwidth"):
                v = lv.physical_memory[0 if f.name == "memory_bytes" else 1]  # the whole memory
            if lv.memory == "distributed" and f.name in ("memory_bytes", "memory_bandwidth",
                                                         "memory_pj_per_byte",
                                                         "memory_technology"):
                continue                        # derived from the children's memories
            if lv.memory == "local" and f.name in ("memory_share", "bandwidth_share"):
                continue
            if f.name in _LEVEL_DEFAULTS and v == _LEVEL_DEFAULTS[f.name]:
                continue
            t[f.name] = v
        levels.append(t)
    compute = {}
    for f in fields(Compute):
        v = getattr(m.compute, f.name)
        if f.name == "mac_ops_per_cycle_by_dtype":
            if v:
                compute[f.name] = dict(v)
        elif f.name == "mac_array":
            if v:
                compute[f.name] = list(v)
        elif f.name in ("array_fill_cycles", "vector_width"):
            if v != f.default:
                compute[f.name] = v
        else:
            compute[f.name] = v
    levels[-1]["compute"] = compute
    out["level"] = levels
    return out


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)        # a JSON string is a TOML basic string
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"a machine file holds finite numbers, got {v}")
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def machine_toml(m: Machine, comment: str = "") -> str:
    """The TOML text of `m`'s machine file; `comment` lines head it."""
    data = machine_dict(m)
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += [f"{k} = {_value(v)}" for k, v in data.items() if k != "level"]
    for lv in data["level"]:
        lines.append("\n[[level]]")
        lines += [f"{k} = {_value(v)}" for k, v in lv.items() if k != "compute"]
        if "compute" in lv:
            lines.append("\n[level.compute]")
            lines += [f"{k} = {_value(v)}" for k, v in lv["compute"].items()]
    return "\n".join(lines) + "\n"
