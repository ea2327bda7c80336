"""The closed table of core opcodes: operands, attributes, shape and dtype rules, op counts.

Each entry's `rule` checks the operand types and attributes of one instruction and raises
`RuleBroken` with a message that states what was found and which rule it breaks. `ops` counts
arithmetic operations (a multiply-accumulate counts as two); `op_class` says which leaf compute
unit runs it (`OpClass`): mac, elementwise, compare, or move (data movement, no arithmetic).
"""
from __future__ import annotations

import math
from enum import StrEnum
from dataclasses import dataclass, field
from typing import Callable

from isa.program import DTYPES, FLOAT_DTYPES, TensorType

__all__ = ["OpClass", "OpSpec", "AttrSpec", "RuleBroken", "OPCODES", "REQUIRED", "conv_out", "broadcast_shape",
           "instruction_ops", "sort_ops", "pads",
           "normalize_axis"]

REQUIRED = object()


class RuleBroken(Exception):
    """A shape, dtype or attribute rule of an opcode is broken; `attr` names the attribute at fault."""

    def __init__(self, message: str, attr: str | None = None, operand: int | None = None):
        super().__init__(message)
        self.message = message
        self.attr = attr
        self.operand = operand


class OpClass(StrEnum):
    """Which functional unit runs an opcode."""
    MAC = "mac"                     # multiply-accumulate arrays
    ELEMENTWISE = "elementwise"     # element-wise vector units
    COMPARE = "compare"             # comparators
    MOVE = "move"                   # data movement, no arithmetic


@dataclass(frozen=True)
class AttrSpec:
    kind: str                      # "int", "number", "ints", "pad"
    default: object = REQUIRED

    def accepts(self, v) -> bool:
        if self.kind == "int":
            return isinstance(v, int)
        if self.kind == "number":
            return isinstance(v, (int, float))
        if self.kind == "ints":
            return isinstance(v, tuple) and all(isinstance(x, int) for x in v)
        if self.kind == "pad":
            return isinstance(v, int) or (isinstance(v, tuple) and len(v) == 4
                                          and all(isinstance(x, int) for x in v))
        raise AssertionError(self.kind)

    def describe(self) -> str:
        return {"int": "an integer", "number": "a number", "ints": "a tuple of integers",
                "pad": "an integer or a tuple (top, left, bottom, right)"}[self.kind]


@dataclass(frozen=True)
class OpSpec:
    name: str
    outputs: int
    inputs: int | None                 # None: one or more (variadic)
    rule: Callable
    ops: Callable
    op_class: "OpClass"
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    summary: str = ""
    # extension instructions only (isa/checker.py, `extension_spec`): the declaration, the
    # instantiated body of a use, and the opcode table its body is checked against and runs with
    decl: object = None
    ext_key: tuple | None = None       # (declaration, earlier declarations): rebuilds this entry
    body: Callable | None = None
    work: Callable | None = None       # (op class, ops) of every core instruction a leaf runs
    table: dict | None = None
    expansion: Callable | None = None  # core instructions one use runs on a leaf
    # attributes whose value follows from the operands when left at their default (reduce_mean's
    # count): bind(outs, ins, attrs) gives them their value, so that the pieces a compiler cuts
    # keep the whole instruction's
    bind: Callable | None = None

    def full_attrs(self, given: dict) -> dict:
        """Given attributes with defaults filled in (assumes the instruction was checked)."""
        out = {k: s.default for k, s in self.attrs.items() if s.default is not REQUIRED}
        out.update(given)
        return out


# ---------------------------------------------------------------- shape helpers

def _fmt(t: TensorType) -> str:
    return str(t)


def _same_dtype(types, what="operands"):
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        raise RuleBroken(f"{what} must share one dtype, found " + ", ".join(_fmt(t) for t in types))


def _need_dtype(t: TensorType, allowed, role: str):
    if t.dtype not in allowed:
        listed = ", ".join(allowed[:-1]) + " or " + allowed[-1] if len(allowed) > 1 else allowed[0]
        raise RuleBroken(f"{role} must be {listed}, found {_fmt(t)}")


#: the types a multiply-accumulate (matmul, conv2d, eucdist) takes: one float type for sources and
#: destination, or i8 sources accumulating into an i32 destination
_MAC_SOURCES = FLOAT_DTYPES + ("i8",)
#: element-wise arithmetic: the float types and i32 (i8 has no arithmetic but MACs and cast)
_ARITH = ("f32", "i32", "f16", "bf16")
#: compare and move opcodes take every type
DTYPES_ALL = tuple(DTYPES)


def _mac_dtypes(name: str, srcs, dst: TensorType, roles):
    """Sources of one dtype out of _MAC_SOURCES; the destination that dtype, or i32 for i8."""
    for t, role in zip(srcs, roles):
        _need_dtype(t, _MAC_SOURCES, f"{name} {role}")
    _same_dtype(srcs, f"{name} sources")
    want = "i32" if srcs[0].dtype == "i8" else srcs[0].dtype
    if dst.dtype != want:
        why = " (i8 products accumulate in i32)" if want == "i32" else ""
        raise RuleBroken(f"{name} destination must be {want} for {srcs[0].dtype} sources{why}, "
                         f"found {_fmt(dst)}", operand=0)


def _need_rank(t: TensorType, rank: int, role: str, layout: str = ""):
    if t.rank != rank:
        lay = f" ({layout})" if layout else ""
        raise RuleBroken(f"{role} must have rank {rank}{lay}, found {_fmt(t)}")


def _expect_shape(out: TensorType, shape: tuple, rule: str):
    if out.shape != tuple(shape):
        raise RuleBroken(f"destination is {_fmt(out)} but {rule} gives "
                         f"[{', '.join(map(str, shape))}]", operand=0)


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise RuleBroken(f"axis={axis} is out of range for rank {rank} (valid: {-rank}..{rank - 1})",
                         attr="axis")
    return axis % rank


def broadcast_shape(a: tuple, b: tuple) -> tuple | None:
    """numpy's broadcast of two shapes, or None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 1 not in (x, y) else x * y)
    return tuple(reversed(out))


def conv_out(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int | None = None) -> int:
    """Output length of a window op along one spatial axis (floor mode)."""
    pad_hi = pad_lo if pad_hi is None else pad_hi
    return (size + pad_lo + pad_hi - kernel) // stride + 1


def pads(attrs: dict) -> tuple[int, int, int, int]:
    """The `pad` attribute as (top, left, bottom, right); an integer pads all four sides."""
    p = attrs["pad"]
    return (p, p, p, p) if isinstance(p, int) else tuple(p)


def _check_pad(a, kernel=None):
    for v in pads(a):
        if v < 0:
            raise RuleBroken(f"pad={a['pad']} must not be negative", attr="pad")
        if kernel is not None and v >= kernel:
            raise RuleBroken(f"pad={a['pad']} must be smaller than kernel={kernel}", attr="pad")


def _window_out(x: TensorType, kh: int, kw: int, a) -> tuple[int, int]:
    t, l, b, r = pads(a)
    return conv_out(x.shape[2], kh, a["stride"], t, b), conv_out(x.shape[3], kw, a["stride"], l, r)


def _positive(attrs, *names):
    for n in names:
        if attrs[n] < 1:
            raise RuleBroken(f"{n}={attrs[n]} must be at least 1", attr=n)


def _nonnegative(attrs, *names):
    for n in names:
        if attrs[n] < 0:
            raise RuleBroken(f"{n}={attrs[n]} must not be negative", attr=n)


# ---------------------------------------------------------------- rules per opcode

def _eucdist(outs, ins, a):
    """eucdist: X[M,K] against C[N,K], the two matrices sharing the K axis."""
    out, (x, w) = outs[0], ins
    _mac_dtypes("eucdist", (x, w), out, ("X", "C"))
    for t, role in zip((x, w, out), ("X", "C", "D")):
        _need_rank(t, 2, f"eucdist {role}")
    if x.shape[1] != w.shape[1]:
        raise RuleBroken(f"eucdist needs X[M,K] and C[N,K] with equal K, found X {_fmt(x)} and "
                         f"C {_fmt(w)}", operand=2)
    _expect_shape(out, (x.shape[0], w.shape[0]), f"distances of X {_fmt(x)} to C {_fmt(w)}")


def matmul_batch(a: TensorType, b: TensorType) -> tuple | None:
    """The batch shape of a matmul of A[..., M, K] and B[..., K, N]: their leading axes
    broadcast like numpy's (None when they do not)."""
    return broadcast_shape(a.shape[:-2], b.shape[:-2])


def _matmul(outs, ins, a):
    c, (x, w) = outs[0], ins
    _mac_dtypes("matmul", (x, w), c, ("A", "B"))
    for t, role in ((x, "A"), (w, "B"), (c, "C")):
        if t.rank < 2:
            raise RuleBroken(f"matmul {role} must have rank at least 2 ([..., rows, columns]), "
                             f"found {_fmt(t)}")
    if x.shape[-1] != w.shape[-2]:
        lead = "" if x.rank == w.rank == 2 else "..., "
        raise RuleBroken(f"matmul needs A[{lead}M,K] and B[{lead}K,N] with equal K, found "
                         f"A {_fmt(x)} and B {_fmt(w)}", operand=1)
    batch = matmul_batch(x, w)
    if batch is None:
        raise RuleBroken(f"matmul batch axes do not broadcast: A {_fmt(x)} and B {_fmt(w)} "
                         f"(leading dimensions must be equal or 1)", operand=2)
    _expect_shape(c, batch + (x.shape[-2], w.shape[-1]), f"A {_fmt(x)} times B {_fmt(w)}")


def _matmul_ops(outs, ins, a):
    c, k = outs[0], ins[0].shape[-1]
    return 2 * c.size * k


def _conv2d(outs, ins, a):
    y, (x, w) = outs[0], ins
    _mac_dtypes("conv2d", (x, w), y, ("X", "W"))
    for t, role, lay in ((x, "X", "NCHW"), (w, "W", "OIHW"), (y, "Y", "NCHW")):
        _need_rank(t, 4, f"conv2d {role}", lay)
    _positive(a, "stride")
    _check_pad(a)
    if x.shape[1] != w.shape[1]:
        raise RuleBroken(f"conv2d input channels differ: X {_fmt(x)} has C={x.shape[1]}, "
                         f"W {_fmt(w)} has I={w.shape[1]}", operand=2)
    ho, wo = _window_out(x, w.shape[2], w.shape[3], a)
    if ho < 1 or wo < 1:
        raise RuleBroken(f"conv2d kernel {w.shape[2]}x{w.shape[3]} does not fit input "
                         f"{x.shape[2]}x{x.shape[3]} with pad={a['pad']}", operand=2)
    _expect_shape(y, (x.shape[0], w.shape[0], ho, wo),
                  f"conv2d of X {_fmt(x)} with W {_fmt(w)}, stride={a['stride']}, pad={a['pad']}")


def _conv2d_ops(outs, ins, a):
    y, w = outs[0], ins[1]
    return 2 * y.size * w.shape[1] * w.shape[2] * w.shape[3]


def _pool(name):
    def rule(outs, ins, a):
        y, x = outs[0], ins[0]
        _same_dtype([y, x])
        for t, role in ((x, "X"), (y, "Y")):
            _need_dtype(t, FLOAT_DTYPES, f"{name} {role}")
            _need_rank(t, 4, f"{name} {role}", "NCHW")
        _positive(a, "kernel", "stride")
        _check_pad(a, a["kernel"])
        ho, wo = _window_out(x, a["kernel"], a["kernel"], a)
        if ho < 1 or wo < 1:
            raise RuleBroken(f"{name} window {a['kernel']} does not fit input "
                             f"{x.shape[2]}x{x.shape[3]} with pad={a['pad']}", attr="kernel")
        _expect_shape(y, (x.shape[0], x.shape[1], ho, wo),
                      f"{name} of X {_fmt(x)} with kernel={a['kernel']}, stride={a['stride']}, "
                      f"pad={a['pad']}")
    return rule


def _pool_ops(outs, ins, a):
    return outs[0].size * a["kernel"] * a["kernel"]


def _binary(name, dtypes):
    def rule(outs, ins, a):
        z, (x, y) = outs[0], ins
        _same_dtype([z, x, y])
        _need_dtype(x, dtypes, f"{name} operands")
        shape = broadcast_shape(x.shape, y.shape)
        if shape is None:
            raise RuleBroken(f"{name} operands do not broadcast: {_fmt(x)} and {_fmt(y)} "
                             f"(trailing dimensions must be equal or 1)", operand=2)
        _expect_shape(z, shape, f"broadcasting {_fmt(x)} with {_fmt(y)}")
    return rule


def _unary(name, dtypes):
    def rule(outs, ins, a):
        y, x = outs[0], ins[0]
        _same_dtype([y, x])
        _need_dtype(x, dtypes, f"{name} operands")
        _expect_shape(y, x.shape, f"{name} of {_fmt(x)}")
    return rule


def _out_size(outs, ins, a):
    return outs[0].size


def _in_size(outs, ins, a):
    return ins[0].size


def _lrn(outs, ins, a):
    y, x = outs[0], ins[0]
    _same_dtype([y, x])
    for t, role in ((x, "X"), (y, "Y")):
        _need_dtype(t, FLOAT_DTYPES, f"lrn {role}")
        _need_rank(t, 4, f"lrn {role}", "NCHW")
    _positive(a, "size")
    _expect_shape(y, x.shape, f"lrn of {_fmt(x)}")


def _lrn_ops(outs, ins, a):
    return outs[0].size * (2 * a["size"] + 4)


def _reduce(name, out_dtype=None, dtypes=tuple(DTYPES)):
    def rule(outs, ins, a):
        y, x = outs[0], ins[0]
        _need_dtype(x, dtypes, f"{name} source")
        if x.rank < 1:
            raise RuleBroken(f"{name} needs a source of rank at least 1, found {_fmt(x)}", operand=1)
        ax = normalize_axis(a["axis"], x.rank)
        want = out_dtype or x.dtype
        if y.dtype != want:
            raise RuleBroken(f"{name} destination must be {want}, found {_fmt(y)}", operand=0)
        _expect_shape(y, x.shape[:ax] + x.shape[ax + 1:], f"{name} of {_fmt(x)} over axis {a['axis']}")
    return rule


def _eucdist_ops(outs, ins, a):
    (m, k), n = ins[0].shape, ins[1].shape[0]
    return 3 * m * n * k


def _sort(outs, ins, a):
    y, x = outs[0], ins[0]
    if x.rank < 1:
        raise RuleBroken(f"sort needs a source of rank at least 1, found {_fmt(x)}", operand=1)
    _same_dtype([y, x])
    _expect_shape(y, x.shape, f"sort of {_fmt(x)}")


def sort_ops(rows: int, n: int) -> int:
    """Compare-exchange count of a sort of `rows` runs of length n: n * ceil(log2 n) each."""
    return rows * n * math.ceil(math.log2(n)) if n > 1 else 0


def _sort_ops(outs, ins, a):
    x = ins[0]
    return sort_ops(x.size // x.shape[-1], x.shape[-1])


def _argsort(outs, ins, a):
    y, x = outs[0], ins[0]
    if x.rank < 1:
        raise RuleBroken(f"argsort needs a source of rank at least 1, found {_fmt(x)}", operand=1)
    if y.dtype != "i32":
        raise RuleBroken(f"argsort destination must be i32, found {_fmt(y)}", operand=0)
    _expect_shape(y, x.shape, f"argsort of {_fmt(x)}")


def _mergepos(outs, ins, a):
    y, (x, z) = outs[0], ins
    if x.rank < 1 or z.rank != x.rank or x.shape[:-1] != z.shape[:-1]:
        raise RuleBroken(f"mergepos needs two runs with equal leading axes, found {_fmt(x)} and "
                         f"{_fmt(z)}", operand=2)
    _same_dtype([x, z], "mergepos runs")
    if y.dtype != "i32":
        raise RuleBroken(f"mergepos destination must be i32, found {_fmt(y)}", operand=0)
    _expect_shape(y, x.shape[:-1] + (x.shape[-1] + z.shape[-1],),
                  f"merging runs {_fmt(x)} and {_fmt(z)}")


def _gather(outs, ins, a):
    y, (x, i) = outs[0], ins
    if x.rank < 1 or i.rank != x.rank:
        raise RuleBroken(f"gather needs indices of the source's rank, found source {_fmt(x)} and "
                         f"indices {_fmt(i)}", operand=2)
    if i.dtype != "i32":
        raise RuleBroken(f"gather indices must be i32, found {_fmt(i)}", operand=2)
    if i.shape[:-1] != x.shape[:-1]:
        raise RuleBroken(f"gather indices must match the source on every axis but the last: "
                         f"source {_fmt(x)}, indices {_fmt(i)}", operand=2)
    if y.dtype != x.dtype:
        raise RuleBroken(f"gather destination must be {x.dtype} like its source, found {_fmt(y)}",
                         operand=0)
    _expect_shape(y, i.shape, f"gathering {_fmt(x)} at indices {_fmt(i)}")


def _count(outs, ins, a):
    y, x = outs[0], ins[0]
    if x.rank < 1:
        raise RuleBroken(f"count needs a source of rank at least 1, found {_fmt(x)}", operand=1)
    if y.dtype != "i32":
        raise RuleBroken(f"count destination must be i32, found {_fmt(y)}", operand=0)
    _expect_shape(y, x.shape[:-1], f"count over the last axis of {_fmt(x)}")


def _transpose(outs, ins, a):
    y, x = outs[0], ins[0]
    _same_dtype([y, x])
    perm = a["perm"]
    if sorted(perm) != list(range(x.rank)):
        raise RuleBroken(f"perm={perm} is not a permutation of the {x.rank} axes of {_fmt(x)}",
                         attr="perm")
    _expect_shape(y, tuple(x.shape[p] for p in perm), f"transpose of {_fmt(x)} by perm={perm}")


def _cast(outs, ins, a):
    y, x = outs[0], ins[0]
    _expect_shape(y, x.shape, f"cast of {_fmt(x)}")


def _copy(outs, ins, a):
    y, x = outs[0], ins[0]
    _same_dtype([y, x])
    _expect_shape(y, x.shape, f"copy of {_fmt(x)}")


def _reshape(outs, ins, a):
    y, x = outs[0], ins[0]
    _same_dtype([y, x])
    if y.size != x.size:
        raise RuleBroken(f"reshape keeps the element count: destination {_fmt(y)} has {y.size}, "
                         f"source {_fmt(x)} has {x.size}", operand=0)


def _slice(outs, ins, a):
    y, x = outs[0], ins[0]
    _same_dtype([y, x])
    if y.rank != x.rank:
        raise RuleBroken(f"slice keeps the rank: destination {_fmt(y)}, source {_fmt(x)}", operand=0)
    ax = normalize_axis(a["axis"], x.rank)
    _nonnegative(a, "start")
    for i, (p, q) in enumerate(zip(y.shape, x.shape)):
        if i != ax and p != q:
            raise RuleBroken(f"slice along axis {ax} keeps the other axes: destination {_fmt(y)}, "
                             f"source {_fmt(x)} differ on axis {i}", operand=0)
    if a["start"] + y.shape[ax] > x.shape[ax]:
        raise RuleBroken(f"slice start={a['start']} plus {y.shape[ax]} elements runs past the end "
                         f"of axis {ax} of {_fmt(x)} (length {x.shape[ax]})", attr="start")


def _concat(outs, ins, a):
    y = outs[0]
    _same_dtype([y, *ins])
    for i, x in enumerate(ins):
        if x.rank != y.rank:
            raise RuleBroken(f"concat keeps the rank: destination {_fmt(y)}, source {_fmt(x)}",
                             operand=i + 1)
    ax = normalize_axis(a["axis"], y.rank)
    total = 0
    for i, x in enumerate(ins):
        for d, (p, q) in enumerate(zip(y.shape, x.shape)):
            if d != ax and p != q:
                raise RuleBroken(f"concat along axis {ax} needs equal sizes on axis {d}: "
                                 f"destination {_fmt(y)}, source {_fmt(x)}", operand=i + 1)
        total += x.shape[ax]
    if total != y.shape[ax]:
        raise RuleBroken(f"concat sources add up to {total} along axis {ax}, destination {_fmt(y)} "
                         f"has {y.shape[ax]}", operand=0)


def _zero(outs, ins, a):
    return 0


def _where(outs, ins, a):
    """Y = A where C is nonzero, else B; C of any type, A, B and Y of one type, all broadcast."""
    y, (c, x, z) = outs[0], ins
    _same_dtype([y, x, z], "where values and destination")
    shape = broadcast_shape(c.shape, x.shape)
    shape = None if shape is None else broadcast_shape(shape, z.shape)
    if shape is None:
        raise RuleBroken(f"where operands do not broadcast: mask {_fmt(c)}, values {_fmt(x)} and "
                         f"{_fmt(z)} (trailing dimensions must be equal or 1)", operand=1)
    _expect_shape(y, shape, f"broadcasting mask {_fmt(c)} with {_fmt(x)} and {_fmt(z)}")


def _reduce_mean(outs, ins, a):
    _reduce("reduce_mean", dtypes=FLOAT_DTYPES)(outs, ins, a)
    _nonnegative(a, "count")


def _reduce_mean_bind(outs, ins, a):
    """count=0 stands for the length of the reduced axis."""
    if a["count"] == 0:
        x = ins[0]
        a = dict(a, count=x.shape[normalize_axis(a["axis"], x.rank)])
    return a


def _causal_mask(outs, ins, a):
    m, (qp, kp) = outs[0], ins
    _need_dtype(m, FLOAT_DTYPES, "causal_mask destination")
    for t, role, i in ((qp, "query positions QP", 1), (kp, "key positions KP", 2)):
        if t.dtype != "i32" or t.rank != 1:
            raise RuleBroken(f"causal_mask {role} must be i32 of rank 1, found {_fmt(t)}",
                             operand=i)
    _nonnegative(a, "window")
    _expect_shape(m, (qp.shape[0], kp.shape[0]),
                  f"causal_mask of query positions {_fmt(qp)} and key positions {_fmt(kp)}")


def _fill(outs, ins, a):
    y = outs[0]
    if y.rank:
        normalize_axis(a["axis"], y.rank)
    if y.dtype not in FLOAT_DTYPES:
        for n in ("value", "step"):
            v = a[n]
            if not float(v).is_integer():
                raise RuleBroken(f"fill of {_fmt(y)}: {n}={v} is not an integer", attr=n)
        info = {"i32": (-2**31, 2**31 - 1), "i8": (-128, 127)}[y.dtype]
        last = a["value"] + a["step"] * (y.shape[normalize_axis(a["axis"], y.rank)] - 1 if y.rank else 0)
        for n, v in (("value", a["value"]), ("step", last)):
            if not info[0] <= v <= info[1]:
                raise RuleBroken(f"fill of {_fmt(y)} reaches {int(v)}, outside the range of "
                                 f"{y.dtype} ({info[0]} .. {info[1]})", attr=n)


# ---------------------------------------------------------------- the table

_I, _N, _T = AttrSpec("int"), AttrSpec("number"), AttrSpec("ints")
_PAD = AttrSpec("pad", 0)
_window = {"kernel": _I, "stride": AttrSpec("int", 1), "pad": _PAD}
_axis = {"axis": _I}

OPCODES: dict[str, OpSpec] = {s.name: s for s in [
    OpSpec("matmul", 1, 2, _matmul, _matmul_ops, OpClass.MAC, {},
           "C[..., M, N] = A[..., M, K] B[..., K, N], leading batch axes broadcast"),
    OpSpec("conv2d", 1, 2, _conv2d, _conv2d_ops, OpClass.MAC,
           {"stride": AttrSpec("int", 1), "pad": _PAD},
           "Y[N,O,Ho,Wo] = X[N,C,H,W] * W[O,C,kh,kw], zero padding"),
    OpSpec("maxpool", 1, 1, _pool("maxpool"), _pool_ops, OpClass.COMPARE, _window,
           "max over kernel x kernel windows; padded cells never win"),
    OpSpec("avgpool", 1, 1, _pool("avgpool"), _pool_ops, OpClass.ELEMENTWISE, _window,
           "mean over kernel x kernel windows; padded cells left out of the divisor"),
    OpSpec("add", 1, 2, _binary("add", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Z = X + Y"),
    OpSpec("sub", 1, 2, _binary("sub", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Z = X - Y"),
    OpSpec("mul", 1, 2, _binary("mul", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Z = X * Y"),
    OpSpec("div", 1, 2, _binary("div", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {}, "Z = X / Y"),
    OpSpec("relu", 1, 1, _unary("relu", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Y = max(X, 0)"),
    OpSpec("sigmoid", 1, 1, _unary("sigmoid", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {},
           "Y = 1 / (1 + exp(-X))"),
    OpSpec("tanh", 1, 1, _unary("tanh", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {}, "Y = tanh(X)"),
    OpSpec("exp", 1, 1, _unary("exp", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {}, "Y = exp(X)"),
    OpSpec("lrn", 1, 1, _lrn, _lrn_ops, OpClass.ELEMENTWISE,
           {"size": AttrSpec("int", 5), "alpha": AttrSpec("number", 0.0001),
            "beta": AttrSpec("number", 0.75), "k": AttrSpec("number", 2.0)},
           "local response normalization across channels (ONNX LRN)"),
    OpSpec("reduce_sum", 1, 1, _reduce("reduce_sum", dtypes=_ARITH), _in_size, OpClass.ELEMENTWISE, _axis,
           "Y = sum of X over axis (axis removed)"),
    OpSpec("reduce_max", 1, 1, _reduce("reduce_max"), _in_size, OpClass.COMPARE, _axis,
           "Y = max of X over axis (axis removed)"),
    OpSpec("argmax", 1, 1, _reduce("argmax", "i32"), _in_size, OpClass.COMPARE, _axis,
           "Y (i32) = index of the first maximum over axis"),
    OpSpec("argmin", 1, 1, _reduce("argmin", "i32"), _in_size, OpClass.COMPARE, _axis,
           "Y (i32) = index of the first minimum over axis"),
    OpSpec("eucdist", 1, 2, _eucdist,
           _eucdist_ops, OpClass.MAC, {},
           "D[m,n] = sum_k (X[m,k] - C[n,k])^2"),
    OpSpec("sort", 1, 1, _sort, _sort_ops, OpClass.COMPARE, {}, "Y = X sorted ascending along the last axis"),
    OpSpec("argsort", 1, 1, _argsort, _sort_ops, OpClass.COMPARE, {},
           "Y (i32) = the positions that sort X ascending along the last axis (stable)"),
    OpSpec("mergepos", 1, 2, _mergepos, _out_size, OpClass.COMPARE, {},
           "Y (i32) = positions in A then B of their merge ascending along the last axis "
           "(stable: A first on ties); A and B are sorted runs, so a merge is one compare per element"),
    OpSpec("gather", 1, 2, _gather, _zero, OpClass.MOVE, {},
           "Y[..., j] = X[..., I[..., j]] along the last axis (indices out of range are an error)"),
    OpSpec("count", 1, 1, _count, _in_size, OpClass.COMPARE, {"value": _N},
           "Y (i32) = number of elements equal to value along the last axis"),
    OpSpec("transpose", 1, 1, _transpose, _zero, OpClass.MOVE, {"perm": _T}, "Y = X with axes permuted"),
    OpSpec("cast", 1, 1, _cast, _out_size, OpClass.ELEMENTWISE, {},
           "Y = X converted to Y's dtype: floats round to nearest even; to an integer type, round "
           "to nearest even and saturate (NaN gives 0)"),
    OpSpec("copy", 1, 1, _copy, _zero, OpClass.MOVE, {}, "Y = X"),
    OpSpec("reshape", 1, 1, _reshape, _zero, OpClass.MOVE, {}, "Y = X in a new shape, row-major order"),
    OpSpec("slice", 1, 1, _slice, _zero, OpClass.MOVE, {"axis": _I, "start": AttrSpec("int", 0)},
           "Y = X[start : start + len(Y)] along axis"),
    OpSpec("concat", 1, None, _concat, _zero, OpClass.MOVE, _axis, "Y = X1, X2, ... joined along axis"),
    # element-wise math of normalization layers and activations (LayerNorm, RMSNorm, GELU)
    OpSpec("sqrt", 1, 1, _unary("sqrt", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {}, "Y = sqrt(X)"),
    OpSpec("rsqrt", 1, 1, _unary("rsqrt", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {},
           "Y = 1 / sqrt(X)"),
    OpSpec("erf", 1, 1, _unary("erf", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {},
           "Y = erf(X), the Gauss error function"),
    OpSpec("log", 1, 1, _unary("log", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {},
           "Y = ln(X), the natural logarithm"),
    OpSpec("abs", 1, 1, _unary("abs", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Y = |X|"),
    OpSpec("neg", 1, 1, _unary("neg", _ARITH), _out_size, OpClass.ELEMENTWISE, {}, "Y = -X"),
    OpSpec("pow", 1, 2, _binary("pow", FLOAT_DTYPES), _out_size, OpClass.ELEMENTWISE, {}, "Z = X ** Y"),
    OpSpec("min", 1, 2, _binary("min", DTYPES_ALL), _out_size, OpClass.COMPARE, {},
           "Z = the smaller of X and Y (NaN if either is)"),
    OpSpec("max", 1, 2, _binary("max", DTYPES_ALL), _out_size, OpClass.COMPARE, {},
           "Z = the larger of X and Y (NaN if either is)"),
    OpSpec("where", 1, 3, _where, _out_size, OpClass.COMPARE, {},
           "Y = A where the mask C is nonzero, else B (all broadcast)"),
    OpSpec("reduce_mean", 1, 1, _reduce_mean, _in_size,
           OpClass.ELEMENTWISE, {"axis": _I, "count": AttrSpec("int", 0)},
           "Y = sum of X over axis / count (count 0: the axis length)", bind=_reduce_mean_bind),
    OpSpec("causal_mask", 1, 2, _causal_mask, _out_size, OpClass.COMPARE, {"window": AttrSpec("int", 0)},
           "M[i,j] = 0 where KP[j] <= QP[i] (and QP[i] - KP[j] < window if window > 0), else "
           "the lowest finite value of M's type: an additive attention mask"),
    OpSpec("fill", 1, 0, _fill, _zero, OpClass.MOVE,
           {"value": AttrSpec("number", 0), "step": AttrSpec("number", 0), "axis": AttrSpec("int", -1)},
           "Y = value + step * i, i the position along axis (step 0: a constant)"),
]}


def instruction_ops(ins, types: dict, opcodes: dict = OPCODES) -> int:
    """Arithmetic ops of one checked instruction (a multiply-accumulate counts as two)."""
    spec = opcodes[ins.opcode]
    ts = [types[n] for n in ins.operands]
    return int(spec.ops(ts[:spec.outputs], ts[spec.outputs:], spec.full_attrs(ins.attr)))
