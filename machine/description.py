"""Machine descriptions: a fractal machine is a tree whose levels are uniform, root to leaf.

`levels[0]` is the root, `levels[-1]` the leaf level; every level but the leaf has a fan-out
(children per node). `depth` counts the fan-out stages, so a machine has `depth + 1` levels and
`prod(fanouts)` leaves. The leaf level also states its compute throughput per op class.

Machine files are TOML, validated as a whole (every problem reported at once, each with its key
path) and then built into frozen dataclasses; the shipped presets are in `machine/presets/`. The
machine package imports nothing of ours but the error types (`isa/errors.py`), so the compiler,
the simulator and the front end may all use it.
"""
from __future__ import annotations

import math
import os
import re
import stat
import tomllib
import dataclasses
from dataclasses import dataclass, fields, replace
from pathlib import Path

from isa.errors import ErrorGroup, UserError, did_you_mean
from machine.area import DEFAULT_PROCESS_NM, MEMORY_TECHNOLOGIES, PROCESS_NM_RANGE, machine_area
from machine.limits import check_depth, check_machine_shape

__all__ = ["Level", "Compute", "Machine", "load_machine", "machine_from_dict", "preset",
           "read_toml", "PRESETS", "PRESET_DIR", "OP_CLASSES", "DEFAULT_BUFFERING", "DTYPE_NAMES"]

OP_CLASSES = ("mac", "elementwise", "compare")
PRESET_DIR = Path(__file__).parent / "presets"
PRESETS = ("tiny", "f1", "f100")
#: pieces in flight in a node's memory unless its level says otherwise: double buffering
DEFAULT_BUFFERING = 2


#: the element types a machine may give its own MAC rate (the ISA's data types)
DTYPE_NAMES = ("f32", "i32", "f16", "bf16", "i8")


@dataclass(frozen=True)
class Compute:
    """Leaf compute: ops per cycle and energy per op, per op class; optionally the shape of the
    MAC array and the lanes of the vector units (whose unfilled parts a small tile wastes), and
    a MAC rate per data type."""
    mac_ops_per_cycle: float
    elementwise_ops_per_cycle: float
    compare_ops_per_cycle: float
    mac_pj_per_op: float
    elementwise_pj_per_op: float
    compare_pj_per_op: float
    mac_array: tuple = ()           # (rows, columns) of multipliers: rows along the reduction
                                    # (K, input channels), columns along the outputs (N, output
                                    # channels); () for a unit that runs any tile at its full rate
    array_fill_cycles: int = 0      # cycles to fill and drain the array, once per instruction
    vector_width: int = 0           # lanes of the element-wise and compare units; 0: any shape
    mac_ops_per_cycle_by_dtype: tuple = ()  # ((dtype, ops/cycle), ...); others: mac_ops_per_cycle

    def ops_per_cycle(self, op_class: str, dtype: str | None = None) -> float:
        if op_class == "mac" and dtype is not None:
            for name, rate in self.mac_ops_per_cycle_by_dtype:
                if name == dtype:
                    return rate
        return getattr(self, f"{op_class}_ops_per_cycle")

    def pj_per_op(self, op_class: str) -> float:
        return getattr(self, f"{op_class}_pj_per_op")


@dataclass(frozen=True)
class Level:
    """One level of the tree; every node of a level is alike."""
    name: str
    fanout: int                 # children per node; 0 on the leaf level
    memory_bytes: int           # local memory capacity
    memory_bandwidth: float     # bytes/cycle of the local memory port, shared by all children
    link_bandwidth: float       # bytes/cycle of the link from this node to its parent
    link_latency: int           # cycles per transfer on that link
    decode_cycles: int          # controller overhead per instruction received
    lfu_ops_per_cycle: float    # local functional unit (reductions) throughput
    memory_pj_per_byte: float   # energy per byte read or written in local memory
    link_pj_per_byte: float     # energy per byte over the link to the parent
    static_watts: float         # static power of one node of this level
    broadcast: bool = True      # the node can send one operand to all children at once
    buffering: int = DEFAULT_BUFFERING  # pieces in flight in a node's memory (2: one executing,
                                        # one loading); the root's is unused: it has no parent
    duplex: str = "full"        # the link to the parent: "full" carries loads and write-backs
                                # at once, each at link_bandwidth; "half" one at a time
    memory: str = "local"       # "local": a memory of its own; "distributed": the union of
                                # shares of its children's memories (below)
    memory_share: float = 0.0   # distributed: the part of each child's memory capacity ...
    bandwidth_share: float = 0.0  # ... and of its memory bandwidth that serve this level
    physical_memory: tuple = () # a child of a distributed level: (bytes, bytes/cycle) of its
                                # whole memory, of which memory_bytes and memory_bandwidth remain
    memory_technology: str = "sram"  # what the local memory is built of, for the area model:
                                     # "sram" on the node's die, or DRAM ("hbm", "ddr") behind
                                     # a PHY and controller on it

    @property
    def link_fraction(self) -> float:
        """Of the bytes this node moves between its memory and a child, the part that crosses
        the child's link: all, or, from a distributed memory interleaved over the children, the
        part not homed in that child (1 - 1/fanout)."""
        if self.memory == "distributed":
            return (self.fanout - 1) / self.fanout
        return 1.0


def _carve(levels: tuple) -> tuple:
    """The levels with each distributed level's memory carved out of its children's: the
    parent gets fanout x the shares, each child keeps the rest of its memory for its own pieces.
    Idempotent (it starts again from each child's physical memory), so a re-scaled machine is
    carved anew."""
    out = [replace(lv, memory_bytes=lv.physical_memory[0], memory_bandwidth=lv.physical_memory[1],
                   physical_memory=()) if lv.physical_memory else lv for lv in levels]
    for i, lv in enumerate(out[:-1]):
        if lv.memory != "distributed":
            continue
        c = out[i + 1]
        lent_bytes = int(c.memory_bytes * lv.memory_share)
        lent_bandwidth = c.memory_bandwidth * lv.bandwidth_share
        out[i + 1] = replace(c, memory_bytes=c.memory_bytes - lent_bytes,
                             memory_bandwidth=c.memory_bandwidth - lent_bandwidth,
                             physical_memory=(c.memory_bytes, c.memory_bandwidth))
        out[i] = replace(lv, memory_bytes=lv.fanout * lent_bytes,
                         memory_bandwidth=lv.fanout * lent_bandwidth,
                         memory_pj_per_byte=c.memory_pj_per_byte)
    return tuple(out)


@dataclass(frozen=True)
class Machine:
    name: str
    frequency_hz: float
    levels: tuple[Level, ...]
    compute: Compute
    description: str = ""
    process_nm: float = DEFAULT_PROCESS_NM  # the process node, for the area model (machine/area.py)

    def __post_init__(self):
        object.__setattr__(self, "levels", _carve(self.levels))

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    @property
    def leaf(self) -> Level:
        return self.levels[-1]

    @property
    def fanouts(self) -> tuple[int, ...]:
        return tuple(lv.fanout for lv in self.levels[:-1])

    def nodes_at(self, level: int) -> int:
        """Number of nodes at a level (root = 0)."""
        return math.prod(self.fanouts[:level])

    @property
    def leaves(self) -> int:
        return self.nodes_at(self.depth)

    @property
    def peak_ops_per_cycle(self) -> float:
        return self.leaves * max(self.compute.ops_per_cycle(c) for c in OP_CLASSES)

    @property
    def peak_ops_per_second(self) -> float:
        return self.peak_ops_per_cycle * self.frequency_hz

    @property
    def static_watts(self) -> float:
        return sum(lv.static_watts * self.nodes_at(i) for i, lv in enumerate(self.levels))

    def rescaled(self, depth: int | None = None, fanout: int | tuple[int, ...] | None = None,
                 ) -> "Machine":
        """The same machine with `depth` fan-out stages and the given fan-out(s).

        The root and leaf levels are kept; the levels in between are the template's middle levels,
        the deepest one repeated (or the root's parameters when the template has none). `fanout`
        is one number for every stage or a tuple with one per stage.
        """
        depth = self.depth if depth is None else depth
        if depth < 1:
            raise UserError(f"depth must be at least 1, got {depth}", "--depth")
        check_depth(depth, "--depth")
        middles = list(self.levels[1:-1]) or [self.levels[0]]
        inner = [middles[min(i, len(middles) - 1)] for i in range(depth - 1)]
        levels = [self.levels[0], *inner, self.levels[-1]]
        if fanout is None:
            fans = [lv.fanout for lv in levels[:-1]]
        elif isinstance(fanout, int):
            fans = [fanout] * depth
        else:
            fans = list(fanout)
            if len(fans) != depth:
                raise UserError(f"{len(fans)} fan-outs given for depth {depth}", "--fanout")
        for f in fans:
            if not isinstance(f, int) or isinstance(f, bool) or f < 1:
                raise UserError(f"fan-out must be a positive integer, got {f}", "--fanout")
        check_machine_shape(fans, "--depth", "--fanout")
        levels = [replace(lv, fanout=f) for lv, f in zip(levels, fans)] + [levels[-1]]
        tag = "x".join(map(str, fans)) if len(set(fans)) > 1 else str(fans[0])
        return replace(self, name=f"{self.name}-d{depth}f{tag}", levels=tuple(levels))

    def summary(self) -> str:
        lines = [f"{self.name}: {self.depth + 1} levels, {self.leaves} leaves, "
                 f"{self.peak_ops_per_second / 1e12:.3g} Tops/s peak at "
                 f"{self.frequency_hz / 1e9:.3g} GHz"]
        area = machine_area(self)
        for i, lv in enumerate(self.levels):
            fan = f"fan-out {lv.fanout}" if lv.fanout else "leaf"
            memory = f"memory {_bytes(lv.memory_bytes)}"
            if lv.memory == "distributed":
                memory += " distributed over its children"
            elif lv.physical_memory:
                memory += f" of {_bytes(lv.physical_memory[0])}"
            lines.append(f"  level {i} {lv.name:<8} x{self.nodes_at(i):<8} {fan:<12} {memory:<44} "
                         f"area {area.levels[i].total:,.4g} mm2")
        return "\n".join(lines)


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.4g} {unit}"
        n /= 1024
    raise AssertionError


# ---------------------------------------------------------------- validation

_INT, _NUM, _BOOL, _STR = "an integer", "a number", "true or false", "a string"
# key: (kind, must be positive (True) or non-negative (False))
_LEVEL_KEYS = {
    "fanout": (_INT, True), "memory_bytes": (_INT, True), "memory_bandwidth": (_NUM, True),
    "link_bandwidth": (_NUM, True), "link_latency": (_INT, False), "decode_cycles": (_INT, False),
    "lfu_ops_per_cycle": (_NUM, True), "memory_pj_per_byte": (_NUM, False),
    "link_pj_per_byte": (_NUM, False), "static_watts": (_NUM, False),
}
# key: kind, or (kind, must be positive) for an optional number
_LEVEL_OPTIONAL = {"name": _STR, "broadcast": _BOOL, "buffering": (_INT, True), "duplex": _STR,
                   "note": _STR, "compute": "a table", "memory": _STR,
                   "memory_share": (_NUM, True), "bandwidth_share": (_NUM, True),
                   "memory_technology": _STR}
DUPLEX = ("full", "half")
MEMORY_KINDS = ("local", "distributed")
#: a distributed level's memory keys: derived from its children's memories
_CARVED_KEYS = ("memory_bytes", "memory_bandwidth", "memory_pj_per_byte", "memory_technology")
_SHARE_KEYS = ("memory_share", "bandwidth_share")
_COMPUTE_KEYS = {f.name: (_NUM, not f.name.endswith("pj_per_op")) for f in fields(Compute)
                 if f.default is dataclasses.MISSING}
_COMPUTE_OPTIONAL = {"note": _STR, "mac_array": "an array of two positive integers",
                     "array_fill_cycles": (_INT, False), "vector_width": (_INT, True),
                     "mac_ops_per_cycle_by_dtype": "a table of data type = ops/cycle"}
_TOP_KEYS = {"name": _STR, "frequency_hz": _NUM, "description": _STR, "level": "an array of tables",
             "note": _STR, "process_nm": _NUM}


#: the physically sane range of each number a machine file states, (least, most, in words), in
#: the key's own unit (docs/machines.md, "Value ranges"): wider than any machine built or planned
#: (a 1 kHz test clock to a 100 GHz one; a byte of memory to an exbibyte), narrow enough that no
#: product of them overflows or vanishes in a report
RANGES = {
    "frequency_hz": (1e3, 1e11, "1 kHz to 100 GHz"),
    "process_nm": (*PROCESS_NM_RANGE, f"{PROCESS_NM_RANGE[0]} to {PROCESS_NM_RANGE[1]} nm, the "
                   "nodes whose published densities the area model rests on"),
    "memory_bytes": (1, 2**60, "1 byte to 1 EiB"),
    "memory_bandwidth": (1e-6, 1e9, "1e-6 to 1e9 bytes/cycle"),
    "link_bandwidth": (1e-6, 1e9, "1e-6 to 1e9 bytes/cycle"),
    "link_latency": (0, 10**9, "0 to 1e9 cycles"),
    "decode_cycles": (0, 10**9, "0 to 1e9 cycles"),
    "lfu_ops_per_cycle": (1e-6, 1e9, "1e-6 to 1e9 ops/cycle"),
    "memory_pj_per_byte": (0, 1e6, "0 to 1e6 pJ/byte"),
    "link_pj_per_byte": (0, 1e6, "0 to 1e6 pJ/byte"),
    "static_watts": (0, 1e6, "0 to 1e6 W per node"),
    "buffering": (1, 64, "1 to 64 pieces"),
    "mac_ops_per_cycle": (1e-6, 1e9, "1e-6 to 1e9 ops/cycle"),
    "elementwise_ops_per_cycle": (1e-6, 1e9, "1e-6 to 1e9 ops/cycle"),
    "compare_ops_per_cycle": (1e-6, 1e9, "1e-6 to 1e9 ops/cycle"),
    "mac_pj_per_op": (0, 1e6, "0 to 1e6 pJ/op"),
    "elementwise_pj_per_op": (0, 1e6, "0 to 1e6 pJ/op"),
    "compare_pj_per_op": (0, 1e6, "0 to 1e6 pJ/op"),
    "array_fill_cycles": (0, 10**9, "0 to 1e9 cycles"),
    "vector_width": (1, 2**20, "1 to 1,048,576 lanes"),
    **{d: (1e-6, 1e9, "1e-6 to 1e9 ops/cycle") for d in DTYPE_NAMES},
}


def _kind_ok(v, kind) -> bool:
    if kind == _INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == _NUM:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if kind == _BOOL:
        return isinstance(v, bool)
    if kind == _STR:
        return isinstance(v, str)
    return True


def _check_table(table: dict, required: dict, optional: dict, path: str, where, errors: list):
    for key in table:
        if key not in required and key not in optional:
            errors.append(UserError(f"unknown key '{key}'", where(f"{path}{key}"),
                                    hint=did_you_mean(key, [*required, *optional])))
    for key, (kind, positive) in required.items():
        if key not in table:
            errors.append(UserError(f"missing key '{key}' ({kind})", where(f"{path}{key}")))
            continue
        _check_value(key, table[key], kind, positive, where(f"{path}{key}"), errors)
    for key, spec in optional.items():
        if key in table and key != "compute":
            kind, positive = spec if isinstance(spec, tuple) else (spec, None)
            _check_value(key, table[key], kind, positive, where(f"{path}{key}"), errors)


def _check_value(key: str, v, kind: str, positive: bool | None, at: str, errors: list):
    """`v` is of `kind` and, for a number, positive (True) or non-negative (False)."""
    if not _kind_ok(v, kind):
        errors.append(UserError(f"'{key}' must be {kind}, got {v!r}", at))
    elif positive is True and v <= 0:
        errors.append(UserError(f"'{key}' must be positive, got {v}", at))
    elif positive is False and v < 0:
        errors.append(UserError(f"'{key}' must not be negative, got {v}", at))
    elif key in RANGES and not RANGES[key][0] <= v <= RANGES[key][1]:
        errors.append(UserError(f"'{key}' must lie in the range {RANGES[key][2]}, got {v:g}", at,
                                hint="see docs/machines.md, \"Value ranges\""))


def _check_compute(c: dict, path: str, where, errors: list):
    """The optional array, vector and per-type keys of [level.compute]."""
    if "mac_array" in c:
        shape = c["mac_array"]
        if not (isinstance(shape, list) and len(shape) == 2
                and all(_kind_ok(n, _INT) and n > 0 for n in shape)):
            errors.append(UserError(f"'mac_array' must be [rows, columns] of positive integers, "
                                    f"got {shape!r}", where(path + "mac_array")))
        elif _kind_ok(c.get("mac_ops_per_cycle"), _NUM) and c["mac_ops_per_cycle"] != 2 * shape[0] * shape[1]:
            errors.append(UserError(
                f"a {shape[0]} x {shape[1]} MAC array runs {2 * shape[0] * shape[1]:,} ops per cycle "
                f"(a multiply-accumulate is two ops), but 'mac_ops_per_cycle' is "
                f"{c['mac_ops_per_cycle']:g}", where(path + "mac_array")))
    rates = c.get("mac_ops_per_cycle_by_dtype")
    if rates is not None:
        if not isinstance(rates, dict):
            errors.append(UserError("'mac_ops_per_cycle_by_dtype' must be a table of data type = "
                                    f"ops/cycle, got {rates!r}", where(path + "mac_ops_per_cycle_by_dtype")))
            return
        for k, v in rates.items():
            at = where(f"{path}mac_ops_per_cycle_by_dtype.{k}")
            if k not in DTYPE_NAMES:
                errors.append(UserError(f"unknown data type '{k}' (one of {', '.join(DTYPE_NAMES)})",
                                        at, hint=did_you_mean(k, DTYPE_NAMES)))
            else:
                _check_value(k, v, _NUM, True, at, errors)


def _check_memory(lv: dict, i: int, raw_levels: list, required: dict, path: str, where, errors):
    """A level's memory kind and, for a distributed memory, its shares of the children's."""
    kind = lv.get("memory", "local")
    if isinstance(kind, str) and kind not in MEMORY_KINDS:
        errors.append(UserError(f"'memory' must be \"local\" or \"distributed\", got {kind!r}",
                                where(path + "memory"), hint=did_you_mean(kind, MEMORY_KINDS)))
    if kind != "distributed":
        for k in _SHARE_KEYS:
            if k in lv:
                errors.append(UserError(f"'{k}' applies only to a distributed memory "
                                        f"(memory = \"distributed\")", where(path + k)))
        return
    below = raw_levels[i + 1] if i + 1 < len(raw_levels) else None
    if below is None:
        errors.append(UserError("the leaf level has no children to distribute its memory over",
                                where(path + "memory")))
    elif isinstance(below, dict) and below.get("memory") == "distributed":
        errors.append(UserError(f"the children of a distributed memory need memories of their own, "
                                f"but level[{i + 1}] is distributed too", where(path + "memory")))
    for k in _CARVED_KEYS:
        required.pop(k, None)
        if k in lv:
            errors.append(UserError(f"a distributed memory's '{k}' comes from its children's "
                                    f"memories and shares: remove it", where(path + k)))
    for k in _SHARE_KEYS:
        v = lv.get(k)
        if v is None:
            errors.append(UserError(f"missing key '{k}' (a number between 0 and 1: the part of "
                                    f"each child's memory that serves this level)", where(path + k)))
        elif _kind_ok(v, _NUM) and v >= 1:
            errors.append(UserError(f"'{k}' must be below 1 (each child keeps the rest for its own "
                                    f"pieces), got {v}", where(path + k)))


def machine_from_dict(data: dict, file: str = "<machine>") -> Machine:
    """Validate a parsed machine file as a whole and build the frozen machine."""
    def where(key):
        return f"{file}: {key}"
    errors: list[UserError] = []
    for key in data:
        if key not in _TOP_KEYS:
            errors.append(UserError(f"unknown key '{key}'", where(key),
                                    hint=did_you_mean(key, _TOP_KEYS)))
    for key in ("name", "frequency_hz"):
        if key not in data:
            errors.append(UserError(f"missing key '{key}' ({_TOP_KEYS[key]})", where(key)))
    if "name" in data and not (isinstance(data["name"], str) and re.fullmatch(r"[\w.+-]+", data["name"])):
        errors.append(UserError(f"'name' must be a word (letters, digits, . + - _), "
                                f"got {data['name']!r}", where("name")))
    freq = data.get("frequency_hz")
    if freq is not None and (not _kind_ok(freq, _NUM) or freq <= 0):
        errors.append(UserError(f"'frequency_hz' must be a positive number, got {freq!r}",
                                where("frequency_hz")))
    elif freq is not None:
        _check_value("frequency_hz", freq, _NUM, True, where("frequency_hz"), errors)
    if "process_nm" in data:
        _check_value("process_nm", data["process_nm"], _NUM, True, where("process_nm"), errors)
    raw_levels = data.get("level")
    if not isinstance(raw_levels, list) or len(raw_levels) < 2:
        errors.append(UserError("a machine needs at least two [[level]] tables (a root and a leaf)",
                                where("level")))
        raw_levels = raw_levels if isinstance(raw_levels, list) else []
    last = len(raw_levels) - 1
    shaped = len(raw_levels) >= 2       # with one level, root or leaf is unknown
    for i, lv in enumerate(raw_levels):
        path = f"level[{i}]."
        if not isinstance(lv, dict):
            errors.append(UserError("each level must be a table", where(f"level[{i}]")))
            continue
        required = dict(_LEVEL_KEYS)
        if not shaped:                  # already reported above: check the common keys only
            del required["fanout"]
            lv = {k: v for k, v in lv.items() if k not in ("fanout", "compute")}
        elif i == last:
            del required["fanout"]
            if "fanout" in lv:
                errors.append(UserError("the leaf level (the last) has no children: remove 'fanout'",
                                        where(path + "fanout")))
            if not isinstance(lv.get("compute"), dict):
                errors.append(UserError("the leaf level needs a [level.compute] table",
                                        where(path + "compute")))
            else:
                _check_table(lv["compute"], _COMPUTE_KEYS, _COMPUTE_OPTIONAL, path + "compute.",
                             where, errors)
                _check_compute(lv["compute"], path + "compute.", where, errors)
        elif "compute" in lv:
            errors.append(UserError("only the leaf level (the last) computes: remove its "
                                    "[level.compute] table", where(path + "compute")))
        tech = lv.get("memory_technology")
        if isinstance(tech, str) and tech not in MEMORY_TECHNOLOGIES:
            errors.append(UserError(f"'memory_technology' must be one of "
                                    f"{', '.join(map(repr, MEMORY_TECHNOLOGIES))}, got {tech!r}",
                                    where(path + "memory_technology"),
                                    hint=did_you_mean(tech, MEMORY_TECHNOLOGIES)))
        if isinstance(lv.get("duplex"), str) and lv["duplex"] not in DUPLEX:
            errors.append(UserError(f"'duplex' must be \"full\" or \"half\", got {lv['duplex']!r}",
                                    where(path + "duplex")))
        _check_memory(lv, i, raw_levels, required, path, where, errors)
        leaf_fanout = {"fanout": None} if i == last else {}
        _check_table({k: v for k, v in lv.items() if k not in leaf_fanout}, required,
                     _LEVEL_OPTIONAL, path, where, errors)
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    fans = [lv["fanout"] for lv in raw_levels[:-1]]
    widest = max(range(len(fans)), key=lambda i: fans[i])
    check_machine_shape(fans, where("level"), where(f"level[{widest}].fanout"))

    levels = []
    for i, lv in enumerate(raw_levels):
        levels.append(Level(
            name=lv.get("name", "leaf" if i == last else f"level{i}"),
            fanout=0 if i == last else lv["fanout"],
            broadcast=lv.get("broadcast", True),
            buffering=lv.get("buffering", DEFAULT_BUFFERING),
            duplex=lv.get("duplex", "full"),
            memory=lv.get("memory", "local"),
            memory_share=float(lv.get("memory_share", 0.0)),
            bandwidth_share=float(lv.get("bandwidth_share", 0.0)),
            memory_technology=lv.get("memory_technology", "sram"),
            **{k: lv.get(k, 0) for k in _LEVEL_KEYS if k != "fanout"}))   # carved: Machine
    raw = raw_levels[-1]["compute"]
    compute = Compute(**{k: float(raw[k]) for k in _COMPUTE_KEYS},
                      mac_array=tuple(raw.get("mac_array", ())),
                      array_fill_cycles=raw.get("array_fill_cycles", 0),
                      vector_width=raw.get("vector_width", 0),
                      mac_ops_per_cycle_by_dtype=tuple(
                          (k, float(v)) for k, v in raw.get("mac_ops_per_cycle_by_dtype", {}).items()))
    return Machine(name=data["name"], frequency_hz=float(freq), levels=tuple(levels),
                   compute=compute, description=data.get("description", ""),
                   process_nm=float(data.get("process_nm", DEFAULT_PROCESS_NM)))


#: the largest TOML file read (machine, mapping, explore and factor files are a few KiB)
MAX_TOML_BYTES = 4 * 2**20


def read_toml(path: str | Path, what: str, where: str) -> dict:
    """The table of a TOML file; a missing or unreadable file is located at `where` (the
    argument that named it), a syntax error at file:line:col."""
    path = Path(path)
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise UserError(f"cannot read {what} {path}: it is a directory", where)
        if not stat.S_ISREG(info.st_mode):       # a pipe or device could block or never end
            raise UserError(f"cannot read {what} {path}: not a regular file (a device, pipe or "
                            f"socket)", where)
        if info.st_size > MAX_TOML_BYTES:
            raise UserError(f"{what} {path} has {info.st_size:,} bytes, over the limit of "
                            f"{MAX_TOML_BYTES:,}", where)
        data = path.read_bytes()[:MAX_TOML_BYTES + 1]
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}", where) from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {what} {path}: {getattr(e, 'strerror', None) or e}",
                        where) from None
    try:
        text = data.decode("utf-8-sig")        # a byte-order mark is allowed
    except UnicodeDecodeError as e:
        raise UserError(f"cannot read {what} {path}: not UTF-8 (byte {e.start:,})", where) from None
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise UserError(f"invalid TOML in {path}: arrays or tables nested too deeply",
                        where) from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        if m:
            at = f"{path}:{m.group(1)}:{m.group(2)}"
        else:                   # "(at end of document)": the position after the last character
            lines = text.split("\n")
            at = f"{path}:{len(lines)}:{len(lines[-1]) + 1}"
        raise UserError(f"invalid TOML: {str(e).split(' (at')[0]}", at) from None


def load_machine(path: str | Path) -> Machine:
    """Load and validate a machine file (TOML)."""
    return machine_from_dict(read_toml(path, "machine file", "--machine"), str(path))


def preset(name: str) -> Machine:
    """A shipped machine by name, or a machine file by path."""
    if name in PRESETS:
        return load_machine(PRESET_DIR / f"{name}.toml")
    if name.endswith(".toml") or "/" in name:
        return load_machine(name)
    raise UserError(f"unknown machine '{name}' (presets: {', '.join(PRESETS)}, or a .toml file)",
                    "--machine", hint=did_you_mean(name, PRESETS))
