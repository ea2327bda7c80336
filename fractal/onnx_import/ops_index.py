"""Indexing and selection ops: Gather, GatherND, Slice, Split, Expand, Where, and the boolean
ops that make masks (Equal, Not, And, Or).

Integer and boolean data is i32 (booleans 0 and 1). Indices, starts, ends, axes and shapes that
steer a node must be constants: the importer folds shape-derived values (Shape -> Gather ->
Unsqueeze -> Concat chains, Range, ConstantOfShape) before a converter sees them. Gather's
indices may be data (token ids): they become a `gather` along the last axis.
"""
from __future__ import annotations

import math

import numpy as np

from fractal.onnx_import.ops import _check_broadcast, _check_types, converter

__all__ = ["take"]


def _constant(ctx, position: int, what: str) -> np.ndarray | None:
    """Input `position` as a constant array (None when absent), or a located refusal."""
    v = ctx.ins[position] if position < len(ctx.ins) else None
    if v is None:
        return None
    if not v.is_const:
        raise ctx.error(f"{what} (input '{ctx.node.input[position]}') must be a constant: "
                        f"values computed from data are not imported",
                        hint="shape-derived values (Shape, Gather, Concat, Range, ...) fold when "
                             "every input's shape is fixed")
    return v.const


def take(ctx, x, axis: int, indices, dst=None):
    """numpy's take(x, indices, axis) with ONNX's negative indices (counted from the end):
    a `slice` when the indices are a constant ascending run; otherwise a `gather` along the
    last axis of x with `axis` moved last, its i32 indices repeated over the other axes."""
    b, n = ctx.b, x.shape[axis]
    lead, tail = x.shape[:axis], x.shape[axis + 1:]
    out = lead + indices.shape + tail
    q = math.prod(indices.shape)
    if indices.is_const:
        flat = indices.const.reshape(-1).astype(np.int64)
        bad = flat[(flat < -n) | (flat >= n)]
        if bad.size:
            raise ctx.error(f"index {int(bad[0])} is out of range for an axis of length {n}")
        flat = np.where(flat < 0, flat + n, flat)
        if q and np.all(np.diff(flat) == 1):
            return b.reshape(b.slice(x, axis, int(flat[0]), q), out, dst=dst)
    rows = lead + tail
    xt = b.transpose(x, tuple(i for i in range(len(x.shape)) if i != axis) + (axis,))
    if indices.is_const:
        index = b.const(np.broadcast_to(flat.astype(np.int32), rows + (q,)), ctx.hint("index"))
    else:
        index = _wrap_negative(ctx, b.reshape(indices, (q,)), n)
        if rows:
            zeros = b.emit("fill", ctx.temp("rows", rows + (1,), "i32"), value=0)
            index = b.emit("add", ctx.temp("index", rows + (q,), "i32"), zeros,
                           b.reshape(index, (1,) * len(rows) + (q,)))
    picked = b.emit("gather", ctx.temp("gathered", rows + (q,), x.dtype), xt, index)
    k = len(lead)
    moved = b.transpose(picked, tuple(range(k)) + (len(rows),) + tuple(range(k, len(rows))))
    return b.reshape(moved, out, dst=dst)


def _wrap_negative(ctx, index, n: int):
    """index + n where index < 0, in i32: n * min(relu(-index), 1) added."""
    b, shape = ctx.b, index.shape
    t = b.emit("neg", ctx.temp("negative", shape, "i32"), index)
    b.emit("relu", t, t)
    b.emit("min", t, t, b.const(np.int32(1), ctx.hint("one")))
    b.emit("mul", t, t, b.const(np.int32(n), ctx.hint("length")))
    return b.emit("add", ctx.temp("wrapped", shape, "i32"), index, t)


@converter("Gather", attrs={"axis"}, ints=True)
def gather(ctx):
    x, indices = ctx.ins
    axis = ctx.axis(ctx.attr("axis", 0), len(x.shape))
    return [take(ctx, x, axis, indices, dst=ctx.dest())]


@converter("GatherND", attrs={"batch_dims"}, ints={0})
def gather_nd(ctx):
    """Constant indices of the first k axes (PyTorch's exporter writes advanced indexing so,
    `mask[:, None, None, :]`): each index tuple made a position in those axes merged into one,
    then a `take` along it."""
    x, b = ctx.ins[0], ctx.b
    if ctx.attr("batch_dims", 0) != 0:
        raise ctx.bad_attr("batch_dims", "only batch_dims=0 is imported")
    indices = _constant(ctx, 1, "indices")
    k = indices.shape[-1]
    if not 1 <= k <= len(x.shape):
        raise ctx.error(f"indices of {k} axes do not fit data of rank {len(x.shape)}")
    lead = np.array(x.shape[:k], np.int64)
    tuples = indices.reshape(-1, k).astype(np.int64)
    bad = (tuples < -lead) | (tuples >= lead)
    if bad.any():
        row, axis = np.argwhere(bad)[0]
        raise ctx.error(f"index {int(tuples[row, axis])} is out of range for axis {axis} of "
                        f"length {int(lead[axis])}")
    tuples = np.where(tuples < 0, tuples + lead, tuples)
    flat = np.ravel_multi_index(tuples.T, x.shape[:k]).reshape(indices.shape[:-1])
    merged = b.reshape(x, (math.prod(x.shape[:k]),) + x.shape[k:])
    return [take(ctx, merged, 0, b.const(flat), dst=ctx.dest())]


@converter("Slice", attrs={"starts", "ends", "axes"}, ints=True)
def slice_(ctx):
    x, b = ctx.ins[0], ctx.b
    if ctx.opset < 10:
        starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
        steps = None
    else:
        starts, ends = _constant(ctx, 1, "starts"), _constant(ctx, 2, "ends")
        axes, steps = _constant(ctx, 3, "axes"), _constant(ctx, 4, "steps")
    starts, ends = [int(s) for s in starts], [int(e) for e in ends]
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    cuts = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if not -len(x.shape) <= axis < len(x.shape):
            raise ctx.error(f"axis {axis} is out of range for rank {len(x.shape)}")
        if step == 0:
            raise ctx.error("a step of 0 is not allowed")
        axis %= len(x.shape)
        picked = range(*slice(start, end, step).indices(x.shape[axis]))
        if len(picked) != x.shape[axis] or step != 1:
            cuts.append((axis, picked))
    v = x
    for i, (axis, picked) in enumerate(cuts):
        dst = ctx.dest() if i == len(cuts) - 1 else None
        if picked.step == 1:
            v = b.slice(v, axis, picked.start, len(picked), dst=dst)
        else:
            v = take(ctx, v, axis, b.const(np.array(picked, np.int64)), dst=dst)
    return [v]


@converter("Split", attrs={"axis", "split", "num_outputs"}, ints=True)
def split(ctx):
    """One `slice` per output; the lengths are the outputs' inferred sizes along the axis."""
    x = ctx.ins[0]
    axis = ctx.axis(ctx.attr("axis", 0), len(x.shape))
    _constant(ctx, 1, "split")
    outs, start = [], 0
    for i, name in enumerate(ctx.node.output):
        length = ctx.out_shape(i)[axis] if name else 0
        outs.append(ctx.b.slice(x, axis, start, length, dst=ctx.dest(i))
                    if name and ctx.used(i) else None)
        start += length
    if start != x.shape[axis]:
        raise ctx.error(f"the outputs' lengths add up to {start}, not to the input's "
                        f"{x.shape[axis]} along axis {axis}")
    return outs


@converter("Expand", ints=True)
def expand(ctx):
    """x broadcast to the output's shape: `where M, X, X` with M a `fill`ed i32 mask of ones
    whose shape has the output's size where x broadcasts and 1 elsewhere (exact for any data)."""
    b, x = ctx.b, ctx.ins[0]
    _constant(ctx, 1, "shape")
    out = ctx.out_shape()
    if math.prod(out) == math.prod(x.shape):
        return [b.reshape(x, out, dst=ctx.dest())]
    pad = len(out) - len(x.shape)
    grow = tuple(d if i < pad or x.shape[i - pad] != d else 1 for i, d in enumerate(out))
    ones = b.emit("fill", ctx.temp("ones", grow, "i32"), value=1)
    return [b.emit("where", ctx.dest(), ones, x, x)]


@converter("Where", ints=True)
def where(ctx):
    _check_types(ctx, *ctx.ins[1:])             # the condition may be either
    _check_broadcast(ctx, *ctx.ins)
    return [ctx.b.emit("where", ctx.dest(), *ctx.ins)]


def _ints(ctx, what: str):
    for name, v in zip(ctx.node.input, ctx.ins):
        if not v.is_int:
            raise ctx.error(f"input '{name}' is float data; {ctx.node.op_type} is imported for "
                            f"integer and boolean data only ({what})")


@converter("Equal", ints=True)
def equal(ctx):
    """Integers: `where X - Y, 0, 1` (i32 differences are 0 exactly where the values are equal)."""
    _ints(ctx, "a float difference is NaN for equal infinities")
    x, y = ctx.ins
    _check_broadcast(ctx, x, y)
    diff = ctx.b.emit("sub", ctx.temp("diff", ctx.out_shape()), x, y)
    zero, one = (ctx.b.const(np.int32(v), ctx.hint(n)) for v, n in ((0, "zero"), (1, "one")))
    return [ctx.b.emit("where", ctx.dest(), diff, zero, one)]


@converter("Not", ints=True)
def not_(ctx):
    _ints(ctx, "booleans are 0 and 1")
    return [ctx.b.emit("sub", ctx.dest(), ctx.b.const(np.int32(1), ctx.hint("one")), ctx.ins[0])]


@converter("And", "Or", ints=True)
def and_or(ctx):
    """Booleans 0 and 1: And is their `min`, Or their `max`."""
    _ints(ctx, "booleans are 0 and 1")
    _check_broadcast(ctx, *ctx.ins)
    return [ctx.b.emit("min" if ctx.node.op_type == "And" else "max", ctx.dest(), *ctx.ins)]
