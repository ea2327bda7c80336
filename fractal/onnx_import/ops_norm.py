"""Reductions (ReduceMean, ReduceSum, ReduceMax), LayerNormalization and GELU as core
instructions.

LayerNormalization becomes the core sequence of the `layernorm` library's body (reduce_mean,
sub, mul, reduce_mean, add, rsqrt, mul, then the scale and bias), and the form exporters write
in its place (ReduceMean, Sub, Pow, Add, Sqrt, Div, Mul) is imported node by node, each node to
its instruction: no pattern is recognised. Both keep ONNX's semantics for every axis, scale and
bias shape and float type; the library takes f32 rows only (docs/onnx.md says more).
"""
from __future__ import annotations

import math

import numpy as np

from fractal.onnx_import.ops import converter

__all__ = ["reduce_axes"]

_REDUCE = {"ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max"}


def reduce_axes(ctx, opcode: str, x, axes: list[int], out_shape, dst=None):
    """One `opcode` over `axes` of x: the axes moved together (a `transpose` when they are not
    next to each other) and merged into one (a `reshape`), the result reshaped to `out_shape`."""
    b, rank = ctx.b, len(x.shape)
    if axes != list(range(axes[0], axes[0] + len(axes))):
        kept = [a for a in range(rank) if a not in axes]
        x = b.transpose(x, kept + axes)
        axes = list(range(len(kept), rank))
    first, last = axes[0], axes[-1]
    merged = x.shape[:first] + (math.prod(x.shape[first:last + 1]),) + x.shape[last + 1:]
    x = b.reshape(x, merged)
    reduced = merged[:first] + merged[first + 1:]
    if tuple(out_shape) == reduced and dst is not None:
        return b.emit(opcode, dst, x, axis=first)
    y = b.emit(opcode, ctx.temp(opcode, reduced, x.dtype), x, axis=first)
    return b.reshape(y, out_shape, dst=dst)


@converter("ReduceSum", "ReduceMax", attrs={"axes", "keepdims", "noop_with_empty_axes"},
           ints=True)
@converter("ReduceMean", attrs={"axes", "keepdims", "noop_with_empty_axes"}, ints={1})
def reduce(ctx):
    x = ctx.ins[0]
    rank = len(x.shape)
    if len(ctx.ins) > 1 and ctx.ins[1] is not None:       # axes as an input (opset 13 / 18 on)
        if not ctx.ins[1].is_const:
            raise ctx.error(f"axes (input '{ctx.node.input[1]}') must be a constant")
        axes = [int(a) for a in ctx.ins[1].const.reshape(-1)]
    else:
        axes = list(ctx.attr("axes", []))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    for a in axes:
        if not -rank <= a < rank:
            raise ctx.error(f"axis {a} is out of range for rank {rank}")
    axes = sorted({a % rank for a in axes})
    return [reduce_axes(ctx, _REDUCE[ctx.node.op_type], x, axes, ctx.out_shape(), ctx.dest())]


def _scalar(ctx, value: float, suffix: str):
    return ctx.b.const(np.float64(value), ctx.hint(suffix))


@converter("LayerNormalization", attrs={"axis", "epsilon", "stash_type"})
def layer_norm(ctx):
    """y = (x - mean) * rsqrt(var + epsilon) * scale + bias over the axes from `axis` on, as
    rows of their product's length; Mean and InvStdDev are written when used."""
    b, x, scale = ctx.b, ctx.ins[0], ctx.ins[1]
    bias = ctx.ins[2] if len(ctx.ins) > 2 else None
    axis = ctx.axis(ctx.attr("axis", -1), len(x.shape))
    lead, n = x.shape[:axis], math.prod(x.shape[axis:])
    rows = b.reshape(x, lead + (n,))
    kept = lead + (1,)
    mean = b.emit("reduce_mean", ctx.temp("mean", lead), rows, axis=axis)
    mean = b.reshape(mean, kept)
    centred = b.emit("sub", ctx.temp("centred", rows.shape), rows, mean)
    var = b.emit("mul", ctx.temp("square", rows.shape), centred, centred)
    var = b.reshape(b.emit("reduce_mean", ctx.temp("var", lead), var, axis=axis), kept)
    b.emit("add", var, var, _scalar(ctx, ctx.attr("epsilon", 1e-5), "epsilon"))
    b.emit("rsqrt", var, var)
    y = b.emit("mul", ctx.temp("normalized", rows.shape), centred, var)
    y = b.reshape(y, x.shape)
    y = b.emit("mul", ctx.dest() if bias is None else ctx.temp("scaled", x.shape), y, scale)
    if bias is not None:
        y = b.emit("add", ctx.dest(), y, bias)
    outs = [y]
    for i, stat in ((1, mean), (2, var)):                  # Mean, InvStdDev: [lead, 1, ..., 1]
        if ctx.used(i):
            outs.append(b.reshape(stat, ctx.out_shape(i), dst=ctx.dest(i)))
        elif i < len(ctx.node.output):
            outs.append(None)
    return outs


@converter("Gelu", attrs={"approximate"})
def gelu(ctx):
    """Exact: x / 2 * (1 + erf(x / sqrt(2))); tanh: x / 2 * (1 + tanh(sqrt(2 / pi) *
    (x + 0.044715 x^3))), in the order of the `gelu` library's bodies."""
    b, x = ctx.b, ctx.ins[0]
    form = ctx.attr("approximate", "none")
    t = ctx.temp("t", x.shape)
    if form == "none":
        b.emit("mul", t, x, _scalar(ctx, 1 / math.sqrt(2), "sqrt1_2"))
        b.emit("erf", t, t)
    elif form == "tanh":
        b.emit("mul", t, x, x)
        b.emit("mul", t, t, x)
        b.emit("mul", t, t, _scalar(ctx, 0.044715, "cubic"))
        b.emit("add", t, t, x)
        b.emit("mul", t, t, _scalar(ctx, math.sqrt(2 / math.pi), "sqrt2_pi"))
        b.emit("tanh", t, t)
    else:
        raise ctx.bad_attr("approximate", "ONNX defines 'none' and 'tanh'")
    b.emit("add", t, t, _scalar(ctx, 1, "one"))
    b.emit("mul", t, t, x)
    return [b.emit("mul", ctx.dest(), t, _scalar(ctx, 0.5, "half"))]
