"""The numpy reference interpreter: the meaning of every opcode, and of whole programs.

`SEMANTICS[opcode](inputs, attrs, out_type)` computes the destination value of one instruction
from its source arrays, its attributes (defaults already filled in) and the destination's
declared `TensorType`; the result has the destination's shape and dtype (`NP_DTYPES`: float32,
float16, ml_dtypes.bfloat16, int32, int8). i32 arithmetic wraps around. Float sums, products and
transcendental functions are computed in float64 (i8 products in int64) and rounded once to the
destination type; `cast` rounds to nearest even, and saturates when the destination is an integer.
A gather index outside the source's last axis raises `UserError` (`gather_index_error`), which
`execute_instruction` locates at the instruction.

`run_reference` executes a checked program instruction by instruction; `generate_feeds`,
`load_feeds` and `save_outputs` move data in and out (bad data files raise `UserError`). A .npy
file holds an f16 tensor as float16 and an i8 tensor as int8 (wider arrays are accepted where they
hold the values exactly); .npy has no bfloat16, so a bf16 tensor is stored as its raw bit patterns,
a uint16 array (`x.view(np.uint16)` of an ml_dtypes.bfloat16 array), and outputs are saved so.
"""
from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from isa import datafiles
from isa.checker import opcode_table
from isa.errors import InternalError, UserError, did_you_mean
from isa.extensions import leaf_pieces
from isa.limits import check_data_run
from isa.opcodes import OPCODES, OpSpec, conv_out, pads
from isa.program import FLOAT_DTYPES, Instruction, Program, TensorType

__all__ = ["SEMANTICS", "NP_DTYPES", "lowest", "dtype_name", "cast_array", "execute_instruction", "run_reference", "generate_feeds",
           "load_feeds", "read_npz_feeds", "conform_feed", "save_outputs", "gather_index_error",
           "nonfinite", "FirstNonFinite", "nonfinite_note"]

_NATIVE = {"f32": np.dtype(np.float32), "i32": np.dtype(np.int32), "f16": np.dtype(np.float16),
           "i8": np.dtype(np.int8)}


class _NumpyDtypes(Mapping):
    """The numpy dtype of each ISA type. bf16's is ml_dtypes.bfloat16; ml_dtypes takes about
    half a second to import, so it is imported at the first use of bf16 (or of the whole
    mapping), not by a timing-only run that never needs it."""

    def __init__(self):
        self._all = None

    def _load(self) -> dict:
        if self._all is None:
            import ml_dtypes
            self._all = {**_NATIVE, "bf16": np.dtype(ml_dtypes.bfloat16)}
        return self._all

    def __getitem__(self, name: str) -> np.dtype:
        dt = _NATIVE.get(name)
        return dt if dt is not None else self._load()[name]

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


NP_DTYPES = _NumpyDtypes()
_NAME_OF = {v: k for k, v in _NATIVE.items()}


def dtype_name(dt) -> str:
    """The ISA name of a numpy dtype that NP_DTYPES holds (any other integer kind counts as i32,
    any other float as f32)."""
    dt = np.dtype(dt)
    name = _NAME_OF.get(dt)
    if name is None and "ml_dtypes" in sys.modules and dt == NP_DTYPES["bf16"]:
        name = "bf16"       # a bfloat16 array exists only once ml_dtypes is imported
    return name or ("i32" if dt.kind in "iub" else "f32")


def _wide(x: np.ndarray) -> np.ndarray:
    """x in a type that holds every value of its own exactly and that numpy compares and sorts
    natively: float32 for the float types, int32 for the integer types."""
    x = np.asarray(x)
    if x.dtype == np.float32 or x.dtype == np.int32:
        return x
    return x.astype(np.int32 if x.dtype.kind in "iu" else np.float32)


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def cast_array(x: np.ndarray, dtype: str) -> np.ndarray:
    """`cast`: x converted to `dtype`. To a float type: one rounding to nearest even (overflow
    gives +-inf). To an integer type: round to nearest even, saturate at the type's range, NaN
    gives 0. Integer to integer saturates too; widening is exact."""
    x = np.asarray(x)
    target = NP_DTYPES[dtype]
    if dtype in FLOAT_DTYPES:
        # float64 holds every f32, f16, bf16 and i32 value exactly: this rounds once
        with np.errstate(over="ignore"):          # overflow gives +-inf by definition
            return _f64(x).astype(target)
    info = np.iinfo(target)
    if x.dtype.kind in "iu":
        return np.clip(x.astype(np.int64), info.min, info.max).astype(target)
    v = np.rint(_f64(x))
    v = np.where(np.isnan(v), 0.0, np.clip(v, info.min, info.max))
    return v.astype(target)

#: elements of scratch space one chunk of conv2d / eucdist may use
_CHUNK_ELEMS = 1 << 23


def _out(value, out_type: TensorType) -> np.ndarray:
    return np.asarray(value).astype(NP_DTYPES[out_type.dtype], copy=False)


# ---------------------------------------------------------------- compute opcodes

def _acc(x: np.ndarray) -> np.ndarray:
    """A MAC source in its accumulation type: int64 for i8 (exact), float64 for the floats."""
    return x.astype(np.int64) if x.dtype.kind in "iu" else _f64(x)


def _acc_out(value: np.ndarray, t: TensorType) -> np.ndarray:
    """An accumulated MAC result rounded once to the destination; i32 wraps around."""
    if t.dtype == "i32":
        return np.asarray(value).astype(np.int64).astype(np.int32)
    return _out(value, t)


def _matmul(ins, a, t):
    return _acc_out(_acc(ins[0]) @ _acc(ins[1]), t)


def _conv2d(ins, a, t):
    """im2col and one BLAS product per block of output rows of an image: the windows of the
    padded input as a [C*kh*kw, rows*Wo] matrix, multiplied by W as [O, C*kh*kw], which gives
    the output block in its own layout; blocks of at most _CHUNK_ELEMS window elements."""
    x, w = ins
    s, (pt, pl, pb, pr) = a["stride"], pads(a)
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho, wo = conv_out(h, kh, s, pt, pb), conv_out(wd, kw, s, pl, pr)
    # i8 sources: float64 holds every product and sum below 2^53 exactly
    xp = np.pad(_f64(x), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    w2 = _f64(w).reshape(o, c * kh * kw)
    y = np.empty((n, o, ho, wo), np.float64)
    rows = max(1, _CHUNK_ELEMS // max(1, c * kh * kw * wo))
    for b in range(n):
        # [C, Ho, Wo, kh, kw] view of every window of image b
        win = sliding_window_view(xp[b], (kh, kw), axis=(1, 2))[:, ::s, ::s][:, :ho, :wo]
        for r0 in range(0, ho, rows):
            block = win[:, r0:r0 + rows]
            col = np.ascontiguousarray(block.transpose(0, 3, 4, 1, 2)).reshape(c * kh * kw, -1)
            y[b, :, r0:r0 + rows] = (w2 @ col).reshape(o, -1, wo)
    return _acc_out(y, t)


def _windows(x, a, fill):
    """[N, C, Ho, Wo, k, k] view of the pooling windows over x padded with `fill`."""
    k, s, (pt, pl, pb, pr) = a["kernel"], a["stride"], pads(a)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    ho, wo = conv_out(x.shape[2], k, s, pt, pb), conv_out(x.shape[3], k, s, pl, pr)
    return sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :ho, :wo]


def _maxpool(ins, a, t):
    # padded cells are -inf, so they never win (pad < kernel: every window holds a real cell)
    return _out(_windows(_wide(ins[0]), a, -np.inf).max(axis=(4, 5)), t)


def _avgpool(ins, a, t):
    x = ins[0]
    total = _windows(_f64(x), a, 0.0).sum(axis=(4, 5))
    real = _windows(np.ones((1, 1) + x.shape[2:]), a, 0.0).sum(axis=(4, 5))
    return _out(total / real, t)


def _binary(fn):
    def semantics(ins, a, t):
        x, y = ins
        if t.dtype in ("f16", "bf16"):            # exact in float64 (div: innocuous double rounding)
            x, y = _f64(x), _f64(y)
        with np.errstate(all="ignore"):           # i32 wraps around; floats give inf / nan
            return _out(fn(x, y), t)
    return semantics


def _unary_f32(fn):
    def semantics(ins, a, t):
        with np.errstate(all="ignore"):
            return _out(fn(ins[0].astype(np.float64)), t)
    return semantics


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(ins, a, t):
    x = _wide(ins[0])
    return _out(np.maximum(x, x.dtype.type(0)), t)


def _lrn(ins, a, t):
    """ONNX LRN: channels c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped to [0, C-1]."""
    x = ins[0].astype(np.float64)
    size, c = a["size"], x.shape[1]
    cum = np.concatenate([np.zeros_like(x[:, :1]), np.cumsum(x * x, axis=1)], axis=1)
    ch = np.arange(c)
    lo = np.maximum(0, ch - (size - 1) // 2)
    hi = np.minimum(c - 1, ch + (size - 1 - (size - 1) // 2))
    square_sum = cum[:, hi + 1] - cum[:, lo]
    with np.errstate(all="ignore"):
        return _out(x / (a["k"] + a["alpha"] / size * square_sum) ** a["beta"], t)


def _reduce_sum(ins, a, t):
    x = ins[0]
    if x.dtype == np.int32:
        return _out(x.sum(axis=a["axis"], dtype=np.int32), t)
    return _out(_f64(x).sum(axis=a["axis"]), t)


def _eucdist(ins, a, t):
    """(X[m] - C[n])^2 summed over k, directly (no X^2 + C^2 - 2XC), in chunks of rows of X."""
    x, cen = _f64(ins[0]), _f64(ins[1])
    m, k = x.shape
    d = np.empty((m, cen.shape[0]), np.float64)
    rows = max(1, _CHUNK_ELEMS // max(1, cen.shape[0] * k))
    for r in range(0, m, rows):
        diff = x[r:r + rows, None, :] - cen[None, :, :]
        d[r:r + rows] = np.einsum("mnk,mnk->mn", diff, diff)
    return _acc_out(d, t)


def count_value(value, dtype: np.dtype):
    """The value `count` compares with: rounded to a float source's type, exact for integers."""
    if dtype.kind == "f" or dtype == NP_DTYPES["bf16"]:
        return np.float32(np.array(value, np.float64).astype(dtype))
    return value


def _count(ins, a, t):
    x = _wide(ins[0])
    return _out(np.count_nonzero(x == count_value(a["value"], ins[0].dtype), axis=-1), t)


def _binary_f64(fn):
    """A float binary whose result is computed in float64 and rounded once (pow)."""
    def semantics(ins, a, t):
        with np.errstate(all="ignore"):
            return _out(fn(_f64(ins[0]), _f64(ins[1])), t)
    return semantics


def _exact(fn):
    """An element-wise function that only picks or negates values (abs, neg, min, max): computed
    in a type that holds every source value (i32 wraps: -(-2^31) is -2^31)."""
    def semantics(ins, a, t):
        with np.errstate(all="ignore"):
            return _out(fn(*[_wide(x) for x in ins]), t)
    return semantics


def _minimum(a, b):
    """The smaller, the first operand on ties (-0.0 against 0.0) and NaN if either is."""
    return np.where((a <= b) | (a != a), a, b)


def _maximum(a, b):
    """The larger, the first operand on ties and NaN if either is."""
    return np.where((a >= b) | (a != a), a, b)


def _erf(x):
    from scipy.special import erf
    return erf(x)


def _where(ins, a, t):
    c, x, y = ins
    return _out(np.where(np.asarray(c) != 0, _wide(x), _wide(y)), t)


def _reduce_mean(ins, a, t):
    x = ins[0]
    count = a["count"] or x.shape[a["axis"]]
    return _out(_f64(x).sum(axis=a["axis"]) / count, t)


def lowest(dtype: str) -> float:
    """The lowest finite value of a float type: what `causal_mask` adds at a masked position."""
    return float(np.finfo(NP_DTYPES[dtype]).min)


def _causal_mask(ins, a, t):
    """0 where key position <= query position (and, with a window w > 0, closer than w), else the
    type's lowest finite value."""
    qp, kp = (np.asarray(x).astype(np.int64) for x in ins)
    dist = qp[:, None] - kp[None, :]
    keep = dist >= 0
    if a["window"] > 0:
        keep &= dist < a["window"]
    return _out(np.where(keep, 0.0, lowest(t.dtype)), t)


def _fill(ins, a, t):
    """value + step * (position along axis), computed in float64 and rounded once."""
    if not t.shape:
        return _out(np.float64(a["value"]), t)
    ax = a["axis"] % len(t.shape)
    pos = np.arange(t.shape[ax], dtype=np.float64).reshape([-1 if i == ax else 1 for i in range(len(t.shape))])
    return _out(np.broadcast_to(a["value"] + a["step"] * pos, t.shape), t)


# ---------------------------------------------------------------- data movement

def gather_index_error(index: int, n: int) -> UserError:
    """The error of a gather index outside [0, n); the leaf kernels raise the same text."""
    return UserError(f"gather: index {index} is out of range for a last axis of length {n}",
                     hint=f"gather indices must lie in 0 .. {n - 1}" if n else None)


def _gather(ins, a, t):
    """Y[..., j] = X[..., I[..., j]]; the first index (row-major) outside [0, n) is an error."""
    x, idx = ins
    n = x.shape[-1]
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        raise gather_index_error(int(idx.flat[np.argmax(bad)]), n)
    return _out(np.take_along_axis(x, idx.astype(np.intp), axis=-1), t)


def _slice(ins, a, t):
    x, ax = ins[0], a["axis"] % ins[0].ndim
    index = [slice(None)] * x.ndim
    index[ax] = slice(a["start"], a["start"] + t.shape[ax])
    return _out(x[tuple(index)], t)


SEMANTICS: dict[str, Callable[[list, dict, TensorType], np.ndarray]] = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "maxpool": _maxpool,
    "avgpool": _avgpool,
    "add": _binary(np.add),
    "sub": _binary(np.subtract),
    "mul": _binary(np.multiply),
    "div": _binary(np.divide),
    "relu": _relu,
    "sigmoid": _unary_f32(_sigmoid),
    "tanh": _unary_f32(np.tanh),
    "exp": _unary_f32(np.exp),
    "lrn": _lrn,
    "reduce_sum": _reduce_sum,
    "reduce_max": lambda ins, a, t: _out(_wide(ins[0]).max(axis=a["axis"]), t),
    "argmax": lambda ins, a, t: _out(_wide(ins[0]).argmax(axis=a["axis"]), t),
    "argmin": lambda ins, a, t: _out(_wide(ins[0]).argmin(axis=a["axis"]), t),
    "eucdist": _eucdist,
    "sort": lambda ins, a, t: _out(np.sort(_wide(ins[0]), axis=-1, kind="stable"), t),
    "argsort": lambda ins, a, t: _out(np.argsort(_wide(ins[0]), axis=-1, kind="stable"), t),
    # the stable order of the two runs placed end to end: for sorted runs, their merge
    "mergepos": lambda ins, a, t: _out(np.argsort(_wide(np.concatenate(ins, axis=-1)), axis=-1,
                                                  kind="stable"), t),
    "gather": _gather,
    "count": _count,
    "cast": lambda ins, a, t: cast_array(ins[0], t.dtype),
    "transpose": lambda ins, a, t: _out(np.transpose(ins[0], a["perm"]), t),
    "copy": lambda ins, a, t: _out(ins[0], t),
    "reshape": lambda ins, a, t: _out(ins[0].reshape(t.shape), t),
    "slice": _slice,
    "concat": lambda ins, a, t: _out(np.concatenate(ins, axis=a["axis"]), t),
    "sqrt": _unary_f32(np.sqrt),
    "rsqrt": _unary_f32(lambda x: 1.0 / np.sqrt(x)),
    "erf": _unary_f32(_erf),
    "log": _unary_f32(np.log),
    "abs": _exact(np.abs),
    "neg": _exact(np.negative),
    "pow": _binary_f64(np.power),
    "min": _exact(_minimum),
    "max": _exact(_maximum),
    "where": _where,
    "reduce_mean": _reduce_mean,
    "causal_mask": _causal_mask,
    "fill": _fill,
}
assert SEMANTICS.keys() == OPCODES.keys(), "every opcode needs a reference semantics"


def _quiet(fn):
    """`fn` with numpy's floating-point warnings off: f32 overflow gives inf and nan by
    definition, and a Python warning must not reach the user."""
    def semantics(ins, a, t):
        with np.errstate(all="ignore"):
            return fn(ins, a, t)
    semantics.__name__ = getattr(fn, "__name__", "semantics")
    return semantics


SEMANTICS = {name: _quiet(fn) for name, fn in SEMANTICS.items()}


# ---------------------------------------------------------------- programs

def semantics_of(spec: OpSpec, core: dict | None = None) -> Callable:
    """The semantics of an opcode-table entry: a core opcode's function from `core` (numpy's by
    default), or an extension's body run with the same core functions. Either returns one array
    per destination (a tuple for several)."""
    core = SEMANTICS if core is None else core
    if spec.decl is not None:
        return lambda inputs, attrs, out_types: _run_extension(spec, inputs, attrs, out_types, core)
    return core[spec.name]


def _run_extension(spec: OpSpec, inputs, attrs: dict, out_types, core: dict) -> tuple:
    """One use of an extension: its body, instantiated for each piece its caps allow, run on
    that piece of the operands against the table of the extensions declared before it."""
    decl, n_out = spec.decl, spec.outputs
    types = tuple(out_types) + tuple(TensorType(_dtype(x), tuple(x.shape)) for x in inputs)
    outs = [np.zeros(t.shape, NP_DTYPES[t.dtype]) for t in out_types]
    for piece, slices in leaf_pieces(decl, types):
        program = spec.body(piece[:n_out], piece[n_out:], attrs)
        feeds = {o.name: x[s] for o, x, s in zip(decl.inputs, inputs, slices[n_out:])}
        result = run_program(program, feeds, spec.table, core)
        for o, out, s in zip(decl.outputs, outs, slices):
            out[s] = result[o.name]
    return tuple(outs)


def _dtype(x: np.ndarray) -> str:
    return dtype_name(x.dtype)


def execute_instruction(instr: Instruction, env: dict[str, np.ndarray],
                        types: dict[str, TensorType], table: dict | None = None,
                        core: dict | None = None) -> None:
    """Compute one checked instruction from `env` and store fresh copies in its destinations."""
    spec = (OPCODES if table is None else table)[instr.opcode]
    dsts, srcs = instr.operands[:spec.outputs], instr.operands[spec.outputs:]
    want = [types[d] for d in dsts]
    try:
        value = semantics_of(spec, core)([env[s] for s in srcs], spec.full_attrs(instr.attr),
                                         want if spec.decl else want[0])
    except UserError as e:                        # bad data (a gather index): say which instruction
        if e.where is None:
            e.where = instr.loc or f"instruction '{instr.to_text()}'"
        raise
    values = value if isinstance(value, tuple) else (value,)
    for dst, w, v in zip(dsts, want, values):
        if v.shape != w.shape or v.dtype != NP_DTYPES[w.dtype]:
            raise InternalError("reference result matches the destination type", instr.to_text(),
                                f"got {v.dtype}{list(v.shape)}, destination is {w}")
        env[dst] = np.array(v, copy=True, order="C")


def run_program(program: Program, feeds: dict[str, np.ndarray], table: dict,
                core: dict | None = None, watch=None) -> dict[str, np.ndarray]:
    """Run a checked program with the given opcode table (core opcodes computed by `core`,
    numpy's semantics by default); return its outputs. `watch(instruction, values)`, if given,
    sees each instruction's results."""
    types = program.types
    env: dict[str, np.ndarray] = {}
    for t in program.tensors:
        if t.role in ("input", "param"):
            env[t.name] = np.asarray(feeds[t.name], NP_DTYPES[t.type.dtype])
        else:
            env[t.name] = np.zeros(t.type.shape, NP_DTYPES[t.type.dtype])
    for instr in program.instructions:
        try:
            execute_instruction(instr, env, types, table, core)
        except UserError as e:
            if e.source_line is None and e.where == instr.loc:
                e.source_line = program.source_line(instr.loc)
            raise
        if watch is not None:
            watch(instr, [env[d] for d in instr.operands[:table[instr.opcode].outputs]])
    return {t.name: env[t.name] for t in program.outputs}


def run_reference(program: Program, feeds: dict[str, np.ndarray],
                  watch=None) -> dict[str, np.ndarray]:
    """Run a checked program on `feeds` (one array per input and param); return its outputs.
    `watch`: as `run_program`'s."""
    return run_program(program, feeds, opcode_table(program), watch=watch)


# ---------------------------------------------------------------- data in and out

def _fed(program: Program):
    return [t for t in program.tensors if t.role in ("input", "param")]


def generate_feeds(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Random data for every input and param; each depends only on (seed, tensor name).
    A program too big to run on the host's data is refused here (isa/limits.py)."""
    check_data_run(program)
    feeds = {}
    for t in _fed(program):
        rng = np.random.default_rng(np.random.SeedSequence([seed % 2**64, zlib.crc32(t.name.encode())]))
        dtype = t.type.dtype
        if dtype in FLOAT_DTYPES:       # f16 and bf16: the f32 draw, rounded
            feeds[t.name] = rng.standard_normal(t.type.shape, dtype=np.float32).astype(NP_DTYPES[dtype])
        elif dtype == "i8":             # small signed values: MAC results stay far from wrapping
            feeds[t.name] = rng.integers(-8, 8, t.type.shape, dtype=np.int8)
        else:
            feeds[t.name] = rng.integers(0, 10, t.type.shape, dtype=np.int32)
    return feeds


#: lossless-if-exact casts accepted besides the exact dtype
_WIDER = {"f32": (np.dtype(np.float64),), "i32": (np.dtype(np.int64),),
          "f16": (np.dtype(np.float32), np.dtype(np.float64)),
          "bf16": (np.dtype(np.float32), np.dtype(np.float64)),
          "i8": (np.dtype(np.int32), np.dtype(np.int64))}
#: how a bf16 tensor is stored in a .npy file: its raw bit patterns as uint16 (.npy has no bfloat16)
BF16_ON_DISK = np.dtype(np.uint16)


def _on_disk(dtype: str) -> str:
    return "uint16 bit patterns" if dtype == "bf16" else str(NP_DTYPES[dtype])


def conform_feed(program: Program, name: str, arr: np.ndarray, where: str, origin: str,
                 shape_only=False) -> np.ndarray:
    """`arr` as the value of tensor `name`, or a UserError saying why it cannot be. With
    `shape_only` (a shape, or None for the name alone) only the name and that shape are checked:
    what a data file's header tells before its data is read."""
    fed = {t.name for t in _fed(program)}
    if name not in fed:
        if name in program.types:
            role = program.tensor(name).role or "internal"
            raise UserError(f"'{name}' is an {role} tensor; only input and param tensors can be "
                            f"fed", where, hint="inputs and params: " + ", ".join(sorted(fed)))
        raise UserError(f"the program has no tensor named '{name}'", where,
                        hint=did_you_mean(name, fed) or "inputs and params: " + ", ".join(sorted(fed)))
    want = program.tensor(name).type
    if shape_only is not False:
        if shape_only is not None and tuple(shape_only) != want.shape:
            raise UserError(f"{name} expects {want}, {origin} has shape {tuple(shape_only)}", where)
        return None
    if arr.shape != want.shape:
        raise UserError(f"{name} expects {want}, {origin} has shape {arr.shape}", where)
    target = NP_DTYPES[want.dtype]
    if arr.dtype == target:
        return np.array(arr, order="C")
    if want.dtype == "bf16" and arr.dtype == BF16_ON_DISK:      # raw bit patterns
        return np.array(arr, order="C").view(target)
    disk = _on_disk(want.dtype)
    save = ("x.astype(ml_dtypes.bfloat16).view(np.uint16)" if want.dtype == "bf16"
            else f"x.astype(np.{target})")
    if arr.dtype in _WIDER[want.dtype]:
        with np.errstate(all="ignore"):
            if want.dtype in FLOAT_DTYPES:
                cast = arr.astype(target)
            else:                                   # out of range must not wrap into range
                info = np.iinfo(target)
                cast = np.clip(arr, info.min, info.max).astype(target)
            exact = np.array_equal(cast.astype(arr.dtype), arr, equal_nan=want.dtype in FLOAT_DTYPES)
        if exact:
            return cast
        raise UserError(f"{name} expects {want.dtype} ({disk}) data; {origin} has {arr.dtype} values "
                        f"that {want.dtype} cannot hold exactly", where,
                        hint=f"save the array as {save} if rounding is intended")
    raise UserError(f"{name} expects {want.dtype} ({disk}) data, {origin} has dtype {arr.dtype}",
                    where, hint=f"save the array as {save}")


def _early_check(program: Program, name: str, where: str, origin: str):
    """The checks of `conform_feed` that a data file's header answers (name, shape, object
    dtype), as a function of (shape, dtype): run before the data is read."""
    def check(shape, dtype):
        conform_feed(program, name, np.empty((0,), np.float32), where, origin, shape_only=shape)
    return check


def read_npz_feeds(program: Program, path: str, where: str, feeds: dict, skip=(),
                   hint: str | None = "pass a .npy file as --input NAME=PATH"):
    """Every array of an .npz archive into `feeds` (except the names in `skip`), each checked
    from the zip directory and its header before its data is read (isa/datafiles.py)."""
    with datafiles.open_regular(path, where) as f:
        kind = datafiles.file_kind(f)
        if kind == "npy":
            raise UserError(f"{path} is a single .npy array, not an .npz archive", where,
                            hint=hint)
        archive, members = datafiles.npz_members(path, where, f)
        with archive:
            for key, _ in members:              # every name first: nothing read for a bad one
                if key not in skip:
                    _early_name(program, key, where)
            for key, info in members:
                if key in skip:
                    continue
                origin = f"array '{key}' of {path}"
                arr = datafiles.read_member(archive, info, origin, where,
                                            _early_check(program, key, where, origin))
                feeds[key] = conform_feed(program, key, arr, where, origin)


def _early_name(program: Program, name: str, where: str):
    conform_feed(program, name, None, where, "", shape_only=None)


def load_feeds(program: Program, input_specs: list[str], npz_path: str | None,
               seed: int = 0) -> dict[str, np.ndarray]:
    """Generated feeds, overridden by the arrays of `npz_path`, then by each "NAME=path.npy"."""
    specs = []
    for spec in input_specs:                    # every spec's form first, before any data
        where = f"--input {spec}"
        name, eq, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not eq or not name or not path:
            raise UserError(f"expected NAME=PATH.npy, found '{spec}'", where)
        specs.append((name, path, where))
    feeds = generate_feeds(program, seed)
    if npz_path is not None:
        read_npz_feeds(program, npz_path, f"--inputs {npz_path}", feeds)
    for name, path, where in specs:
        _early_name(program, name, where)
        arr = datafiles.read_npy(path, where, _early_check(program, name, where, "file"))
        feeds[name] = conform_feed(program, name, arr, where, "file")
    return feeds


def save_outputs(outputs: dict[str, np.ndarray], directory: str | os.PathLike,
                 where: str | None = None) -> list[Path]:
    """Write DIRECTORY/NAME.npy for every output; return the paths written."""
    directory = Path(directory)
    written = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            path = directory / f"{name}.npy"
            value = np.asarray(value)
            if value.dtype == NP_DTYPES["bf16"]:      # .npy has no bfloat16: raw bit patterns
                value = value.view(BF16_ON_DISK)
            np.save(path, value, allow_pickle=False)
            written.append(path)
    except OSError as e:
        raise UserError(f"cannot write outputs to {e.filename or directory}: {e.strerror or e}",
                        where or str(directory)) from None
    return written


# ---------------------------------------------------------------- where NaN and inf come from

def nonfinite(v: np.ndarray) -> tuple[int, int]:
    """(NaN values, infinite values) of a float array; (0, 0) for integers."""
    if v.dtype.kind in "iub":
        return 0, 0
    x = np.asarray(v, np.float32) if v.dtype.kind != "f" else v
    nan = int(np.count_nonzero(np.isnan(x)))
    return nan, int(np.count_nonzero(np.isinf(x)))


class FirstNonFinite:
    """Watches a run (the `watch` of `run_program` or of `compiler.execute_plan`) for where its
    first NaN or infinity came from (`found`): a fed tensor that holds one ({"input": name}), else the first
    instruction whose results hold one ({"line", "instruction"}), every instruction before it
    having given finite values."""

    def __init__(self, feeds: dict | None = None):
        self.found: dict | None = None
        for name, v in (feeds or {}).items():
            if sum(nonfinite(np.asarray(v))):
                self.found = {"input": name}
                break

    def __call__(self, ins, values) -> None:
        if self.found is None and any(sum(nonfinite(v)) for v in values):
            self.found = {"line": ins.loc.line if ins.loc else None, "instruction": ins.to_text()}


def nonfinite_note(outputs: dict, first: dict | None) -> list[str]:
    """Lines saying which outputs hold NaN or inf, and where the first such value came from."""
    held = [(name, *nonfinite(v), v.size) for name, v in outputs.items()]
    held = [h for h in held if h[1] or h[2]]
    if not held:
        return []
    lines = [""] + [f"  note: {name} holds {nan:,} NaN and {inf:,} infinite values of {n:,}"
                    for name, nan, inf, n in held]
    if first and "input" in first:
        lines.append(f"  the fed tensor {first['input']} holds NaN or infinite values")
    elif first:
        at = f"line {first['line']}, " if first["line"] else ""
        lines.append(f"  the first came from {at}'{first['instruction']}'; every instruction "
                     f"before it gave finite values (a result beyond its type's largest value, "
                     f"65,504 for f16, is infinite; inf - inf is NaN)")
    return lines
