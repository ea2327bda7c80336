"""Reconfigurable extension instructions (FRISA): their declarations, and the checks of those.

An extension declaration gives a signature whose shapes use size symbols (bound from the operands
of each use), attributes with defaults, split rules (which axes split; whether results
concatenate or combine with a reduction instruction; a window halo; a cap on the extent a leaf
receives), and a leaf body of core or earlier-declared extension instructions with local
temporaries. This module holds what a declaration is and means on its own: the declaration
objects, `check_declarations`, the size symbols a use binds (`bind_sizes`) and the pieces a leaf
runs its body on (`leaf_pieces`). Each use is instantiated with concrete sizes and its body
checked like a program in `isa/checker.py` (`extension_spec`, `opcode_table`), so an extension
is as safe as a built-in; its body is executed by the reference interpreter (`isa/reference.py`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from isa.errors import SourceLocation, UserError, did_you_mean, env_limit
from isa.opcodes import OPCODES, RuleBroken
from isa.program import DTYPES, Instruction, TensorType, format_value

__all__ = ["Dim", "SigOperand", "SplitRule", "Temp", "ExtDecl", "bind_sizes", "check_declarations",
           "eval_dim", "dim_symbols", "dim_text", "leaf_pieces", "piece_count", "EXT_LIMITS",
           "ext_limits"]

#: name -> (environment variable, default, what it bounds)
EXT_LIMITS = {
    "extensions": ("FRACTAL_MAX_EXTENSIONS", 1000, "extension declarations of one program"),
    "ext_depth": ("FRACTAL_MAX_EXT_DEPTH", 32, "extensions nested in one another's bodies"),
    "expansion": ("FRACTAL_MAX_EXPANSION", 10_000,
                  "core instructions one use of an extension runs on a leaf"),
}


def ext_limits() -> dict[str, int]:
    """The extension limits in force (environment variables, else defaults)."""
    return {k: env_limit(var, default) for k, (var, default, _) in EXT_LIMITS.items()}


def _over(name: str, what: str) -> str:
    var, _, bounds = EXT_LIMITS[name]
    return f"{what}, over the limit of {ext_limits()[name]:,} ({bounds}; set {var} to raise it)"

#: a size expression: an int, a symbol (str), or (op, left, right) with op in + - *
Dim = object


def eval_dim(d, sizes: dict) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, str):
        return sizes[d]
    op, a, b = d
    a, b = eval_dim(a, sizes), eval_dim(b, sizes)
    return a + b if op == "+" else a - b if op == "-" else a * b


def dim_symbols(d) -> set[str]:
    if isinstance(d, int):
        return set()
    if isinstance(d, str):
        return {d}
    return dim_symbols(d[1]) | dim_symbols(d[2])


def dim_text(d, top: bool = True) -> str:
    if isinstance(d, (int, str)):
        return str(d)
    text = f"{dim_text(d[1], False)} {d[0]} {dim_text(d[2], False)}" if d[0] != "*" else \
        f"{dim_text(d[1], False)}*{dim_text(d[2], False)}"
    return text if top or d[0] == "*" else f"({text})"


@dataclass(frozen=True)
class SigOperand:
    name: str
    dtype: str
    dims: tuple
    output: bool
    index: str | None = None        # an output holding positions along this (split) axis
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)

    def text(self) -> str:
        idx = f" index {self.index}" if self.index else ""
        return f"{self.name}: {self.dtype}[{', '.join(dim_text(d) for d in self.dims)}]{idx}"


@dataclass(frozen=True)
class SplitRule:
    axis: str
    reduce: str | None = None       # instruction combining two partial results; None: concatenate
    window: tuple | None = None     # (source size symbol, kernel size symbol): a halo, stride 1
    leaf: int | None = None         # the most a leaf may receive along the axis
    least: int | str | None = None  # the least any child may receive along the axis (a size)
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)

    def text(self) -> str:
        parts = [f"split {self.axis}"]
        if self.reduce:
            parts.append(f"reduce {self.reduce}")
        if self.window:
            parts.append(f"window {self.window[0]} kernel {self.window[1]}")
        if self.leaf:
            parts.append(f"leaf {self.leaf}")
        if self.least is not None:
            parts.append(f"min {self.least}")
        return " ".join(parts)


@dataclass(frozen=True)
class Temp:
    name: str
    dtype: str
    dims: tuple
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ExtDecl:
    name: str
    operands: tuple[SigOperand, ...]          # outputs first
    attrs: tuple[tuple[str, object], ...]
    splits: tuple[SplitRule, ...]
    temps: tuple[Temp, ...]
    body: tuple[Instruction, ...]
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)
    source: str = field(default="", compare=False, repr=False)

    def __hash__(self) -> int:
        # declarations key the opcode-table caches, in tuples of every earlier declaration:
        # hash the deep fields once
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.name, self.operands, self.attrs, self.splits, self.temps, self.body))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def outputs(self) -> tuple[SigOperand, ...]:
        return tuple(o for o in self.operands if o.output)

    @property
    def inputs(self) -> tuple[SigOperand, ...]:
        return tuple(o for o in self.operands if not o.output)

    def symbols(self) -> set[str]:
        return set().union(*(dim_symbols(d) for o in self.operands for d in o.dims))

    def to_text(self) -> str:
        outs = ", ".join(o.text() for o in self.outputs)
        ins = ", ".join(o.text() for o in self.inputs)
        attrs = ", ".join(f"{k}={format_value(v)}" for k, v in self.attrs)
        lines = [f"extension {self.name}({outs} <- {ins}){' ' + attrs if attrs else ''}"]
        lines += ["  " + s.text() for s in self.splits]
        lines += [f"  tensor {t.name} : {t.dtype}[{', '.join(dim_text(d) for d in t.dims)}]"
                  for t in self.temps]
        lines += ["  " + i.to_text() for i in self.body]
        return "\n".join(lines + ["end"])


# ---------------------------------------------------------------- declaration checks

def _err(errors, decl, message, loc, hint=None):
    lines = decl.source.splitlines()
    line = lines[loc.line - 1] if loc and 0 < loc.line <= len(lines) else None
    errors.append(UserError(message, loc, line, hint))


def check_declarations(decls: tuple[ExtDecl, ...]) -> list[UserError]:
    """Problems of the declarations themselves, in order; each may use only earlier ones."""
    errors: list[UserError] = []
    known: dict[str, tuple] = {k: (s.outputs, s.inputs) for k, s in OPCODES.items()}
    later = {d.name for d in decls}
    caps = ext_limits()
    if len(decls) > caps["extensions"]:
        d = decls[caps["extensions"]]
        _err(errors, d, _over("extensions", f"the program declares {len(decls):,} extensions"),
             d.loc)
        return errors
    depth: dict[str, int] = {}          # extensions nested, this one included
    size: dict[str, int] = {}           # core instructions of one piece, nested uses expanded
    for d in decls:
        if d.name in known:
            what = "a core opcode" if d.name in OPCODES else "an extension declared earlier"
            _err(errors, d, f"extension '{d.name}' is already {what}", d.loc)
        symbols = d.symbols()
        names = [o.name for o in d.operands] + [t.name for t in d.temps]
        for i, n in enumerate(names):
            if n in names[:i]:
                loc = (d.operands + tuple(d.temps))[i].loc if i < len(d.operands) + len(d.temps) else d.loc
                _err(errors, d, f"'{n}' is declared twice in extension '{d.name}'", loc)
        for o in d.operands + tuple(d.temps):
            if o.dtype not in DTYPES:
                _err(errors, d, f"unknown dtype '{o.dtype}' (known: {', '.join(DTYPES)})", o.loc)
        for o in d.operands:
            for dim in o.dims:
                if not isinstance(dim, (int, str)):
                    _err(errors, d, f"signature dimensions are sizes or symbols; '{dim_text(dim)}' of "
                                    f"'{o.name}' is an expression (use one in a temporary)", o.loc)
            if o.index is not None and o.index not in symbols:
                _err(errors, d, f"'{o.name}' holds positions along '{o.index}', which no operand has",
                     o.loc, did_you_mean(o.index, symbols))
        for t in d.temps:
            for dim in t.dims:
                for sym in dim_symbols(dim) - symbols:
                    _err(errors, d, f"size '{sym}' of temporary '{t.name}' is not a size of the "
                                    f"signature", t.loc, did_you_mean(sym, symbols))
        _check_splits(errors, d, symbols, known)
        cut = {s.axis for s in d.splits} | {s.window[0] for s in d.splits if s.window}
        attr_names = {k for k, _ in d.attrs}
        for k in sorted(attr_names & symbols):
            _err(errors, d, f"attribute '{k}' of extension '{d.name}' has the name of a size "
                            f"symbol: rename one of them", d.loc)
        for ins in d.body:
            for key, v in ins.attrs:
                if isinstance(v, str) and v in cut and v not in attr_names:
                    _err(errors, d, f"attribute {key}={v} names size '{v}', which a split rule "
                                    f"cuts: each piece would see its own size", ins.attr_loc(key))
        for ins in d.body:
            if ins.opcode == d.name:
                _err(errors, d, f"extension '{d.name}' uses itself: recursive definitions are not "
                                f"allowed", ins.loc)
            elif ins.opcode in later and ins.opcode not in known:
                _err(errors, d, f"extension '{d.name}' uses '{ins.opcode}', which is declared "
                                f"later: declare it first", ins.loc)
            elif ins.opcode not in known:
                _err(errors, d, f"unknown opcode '{ins.opcode}' in extension '{d.name}'", ins.loc,
                     did_you_mean(ins.opcode, known))
            for i, n in enumerate(ins.operands):
                if n not in names:
                    _err(errors, d, f"undefined name '{n}' in extension '{d.name}' (not an operand "
                                    f"or temporary)", ins.operand_loc(i), did_you_mean(n, names))
        uses = [i.opcode for i in d.body] + [s.reduce for s in d.splits if s.reduce]
        depth[d.name] = 1 + max((depth.get(u, 0) for u in uses), default=0)
        size[d.name] = sum(size.get(i.opcode, 1) for i in d.body)
        if depth[d.name] > caps["ext_depth"]:
            _err(errors, d, _over("ext_depth", f"extension '{d.name}' nests {depth[d.name]} "
                                               f"extensions deep"), d.loc)
            return errors
        if size[d.name] > caps["expansion"]:
            _err(errors, d, _over("expansion", f"one use of extension '{d.name}' runs at least "
                                               f"{size[d.name]:,} core instructions on a leaf"),
                 d.loc)
            return errors
        known[d.name] = (len(d.outputs), len(d.inputs))
    return errors


def _check_splits(errors, d: ExtDecl, symbols: set, known: dict):
    out_syms = set().union(*(dim_symbols(x) for o in d.outputs for x in o.dims))
    seen = set()
    for s in d.splits:
        if s.axis not in symbols:
            _err(errors, d, f"split rule on '{s.axis}', which is not a size of any operand of "
                            f"'{d.name}'", s.loc, did_you_mean(s.axis, symbols))
            continue
        if s.axis in seen:
            _err(errors, d, f"'{s.axis}' has two split rules", s.loc)
        seen.add(s.axis)
        if s.reduce is None and s.axis not in set.intersection(
                *[set().union(*(dim_symbols(x) for x in o.dims)) for o in d.outputs]):
            _err(errors, d, f"splitting '{s.axis}' concatenates results, but not every output has "
                            f"'{s.axis}': give a reduction (split {s.axis} reduce INSTRUCTION)", s.loc)
        if s.reduce is not None:
            if s.axis in out_syms:
                _err(errors, d, f"'{s.axis}' is an axis of an output, so its pieces concatenate: "
                                f"remove 'reduce {s.reduce}'", s.loc)
            if s.reduce not in known:
                _err(errors, d, f"unknown reduction instruction '{s.reduce}'", s.loc,
                     did_you_mean(s.reduce, known))
            elif known[s.reduce] != (len(d.outputs), 2 * len(d.outputs)):
                outs, ins = known[s.reduce]
                _err(errors, d, f"reduction '{s.reduce}' takes {outs} destination(s) and "
                                f"{'any number of' if ins is None else ins} source(s); it must "
                                f"combine two sets of {len(d.outputs)} partial result(s) into one "
                                f"({len(d.outputs)} destination(s), {2 * len(d.outputs)} sources)",
                     s.loc)
            if s.leaf is not None:
                _err(errors, d, f"'leaf' caps a split whose pieces concatenate; '{s.axis}' is "
                                f"reduced", s.loc)
        if s.window is not None:
            for sym in s.window:
                if sym not in symbols:
                    _err(errors, d, f"window size '{sym}' is not a size of any operand", s.loc)
        if s.leaf is not None and s.leaf < 1:
            _err(errors, d, f"leaf {s.leaf} must be at least 1", s.loc)
        if isinstance(s.least, str) and s.least not in symbols:
            _err(errors, d, f"min size '{s.least}' is not a size of any operand", s.loc,
                 did_you_mean(s.least, symbols))


# ---------------------------------------------------------------- uses

def bind_sizes(decl: ExtDecl, types) -> dict[str, int]:
    """The size symbols' values for operands of these types, or RuleBroken."""
    sizes: dict[str, int] = {}
    for i, (o, t) in enumerate(zip(decl.operands, types)):
        if t.dtype != o.dtype:
            raise RuleBroken(f"{decl.name} operand '{o.name}' must be {o.dtype}, found {t}", operand=i)
        if t.rank != len(o.dims):
            raise RuleBroken(f"{decl.name} operand '{o.name}' must have rank {len(o.dims)} "
                             f"({o.text()}), found {t}", operand=i)
        for dim, n in zip(o.dims, t.shape):
            if isinstance(dim, int) and dim != n:
                raise RuleBroken(f"{decl.name} operand '{o.name}' must be {o.text()}, found {t}",
                                 operand=i)
            if isinstance(dim, str):
                if sizes.setdefault(dim, n) != n:
                    raise RuleBroken(f"{decl.name}: size {dim} is {sizes[dim]} by an earlier operand "
                                     f"but {n} in '{o.name}' ({t})", operand=i)
    for s in decl.splits:
        if s.window:
            src, k = sizes[s.window[0]], sizes[s.window[1]]
            if src != sizes[s.axis] + k - 1:
                raise RuleBroken(f"{decl.name}: the window of {s.axis} needs {s.window[0]} = "
                                 f"{s.axis} + {s.window[1]} - 1, found {src} against "
                                 f"{sizes[s.axis]} + {k} - 1")
    return sizes


def piece_count(decl: ExtDecl, types: tuple) -> int:
    """How many pieces `leaf_pieces` yields, computed without yielding them."""
    sizes = bind_sizes(decl, types)
    n = 1
    for s in decl.splits:
        if s.leaf and sizes[s.axis] > s.leaf:
            n *= -(-sizes[s.axis] // s.leaf)
    return n


def leaf_pieces(decl: ExtDecl, types: tuple, distinct: bool = False):
    """The pieces an extension's body runs on: the whole operands, or, along axes whose split
    rule caps what a leaf receives (`leaf N`), consecutive pieces of at most N (with the halo of
    a window). Yields (piece operand types, slices of each operand)."""
    sizes = bind_sizes(decl, types)
    capped = [s for s in decl.splits if s.leaf and sizes[s.axis] > s.leaf]
    ranges = [[(lo, min(s.leaf, sizes[s.axis] - lo)) for lo in range(0, sizes[s.axis], s.leaf)]
              for s in capped]
    seen = set()
    for combo in itertools.product(*ranges):
        at = {s.axis: r for s, r in zip(capped, combo)}
        halo = {s.window[0]: (at[s.axis][0], at[s.axis][1] + sizes[s.window[1]] - 1)
                for s in capped if s.window}
        slices, piece = [], []
        for o, t in zip(decl.operands, types):
            sl = tuple(slice(at[d][0], sum(at[d])) if d in at else
                       slice(halo[d][0], sum(halo[d])) if d in halo else slice(None) for d in o.dims)
            shape = tuple(len(range(*s.indices(n))) for s, n in zip(sl, t.shape))
            slices.append(sl)
            piece.append(TensorType(t.dtype, shape))
        piece = tuple(piece)
        if distinct and piece in seen:
            continue
        seen.add(piece)
        yield piece, tuple(slices)

