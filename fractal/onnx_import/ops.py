"""One converter per ONNX op type: ONNX semantics written as core fractal instructions.

A converter takes the node's `Context` (its input values, attributes, inferred output shapes and
destinations) and returns one value per ONNX output. It maps the op exactly or raises a
`UserError` naming the node and the attribute it cannot map: an ONNX attribute outside the set a
converter declares is rejected before the converter runs, so nothing is silently ignored, and so
is integer data at an input the converter does not declare for it. Nodes whose inputs are all
constants never reach a converter: they are folded at import time.

This module holds the registry, the element-wise ops, layout, matrix products, windows and the
CNN normalizations; ops_index.py the indexing ops (Gather, Slice, Split, Expand, Where) and
ops_norm.py the reductions, LayerNormalization and GELU.
"""
from __future__ import annotations

import math

import numpy as np

from isa.opcodes import broadcast_shape, conv_out
from fractal.onnx_import.load import INTEGER_TYPES

__all__ = ["CONVERTERS"]

#: op type -> (converter, the ONNX attributes it maps, the input positions that may hold
#: integer data: a set, or True for every input)
CONVERTERS: dict[str, tuple] = {}


def converter(*op_types: str, attrs=(), ints=()):
    def register(fn):
        for op in op_types:
            CONVERTERS[op] = (fn, frozenset(attrs), True if ints is True else frozenset(ints))
        return fn
    return register


# ---------------------------------------------------------------- element-wise

#: ONNX op -> opcode; the ops of the first line take integer data too
_UNARY = {"Relu": "relu", "Abs": "abs", "Neg": "neg",
          "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Erf": "erf", "Sqrt": "sqrt",
          "Log": "log"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}


@converter("Relu", "Abs", "Neg", ints=True)
@converter("Sigmoid", "Tanh", "Exp", "Erf", "Sqrt", "Log")
def unary(ctx):
    return [ctx.b.emit(_UNARY[ctx.node.op_type], ctx.dest(), ctx.ins[0])]


@converter("Reciprocal")
def reciprocal(ctx):
    return [ctx.b.emit("div", ctx.dest(), ctx.b.const(np.float32(1), ctx.hint("one")),
                       ctx.ins[0])]


@converter("Add", "Sub", "Mul", ints=True)
@converter("Div")
@converter("Pow", ints={1})
def binary(ctx):
    x, y = ctx.ins
    if ctx.node.op_type == "Pow":                 # the exponent may be an integer: as a float
        y = (ctx.b.const(y.const.astype(np.float64), y.hint, y.comment) if y.is_const else
             y if not y.is_int else ctx.b.emit("cast", ctx.temp("exponent", y.shape), y))
    _check_types(ctx, x, y)
    _check_broadcast(ctx, x, y)
    return [ctx.b.emit(_BINARY[ctx.node.op_type], ctx.dest(), x, y)]


def _check_types(ctx, *values):
    """The operands of an element-wise op are all integer or all float (ONNX gives them one
    type; a model that mixes them is not valid ONNX)."""
    if len({v.is_int for v in values}) > 1:
        kinds = ", ".join("integer" if v.is_int else "float" for v in values)
        raise ctx.error(f"its operands mix integer and float data ({kinds}); ONNX's "
                        f"{ctx.node.op_type} takes operands of one type")


def _check_broadcast(ctx, *values):
    shape = ()
    for v in values:
        shape = shape if shape is None else broadcast_shape(shape, v.shape)
    if shape != ctx.out_shape():
        raise ctx.error(f"operand shapes {', '.join(str(list(v.shape)) for v in values)} do not "
                        f"broadcast to the output shape {list(ctx.out_shape())}")


@converter("Min", "Max", "Sum", ints=True)
def variadic(ctx):
    """min, max or add of every input in turn, each partial result broadcast so far."""
    b, values = ctx.b, [v for v in ctx.ins if v is not None]
    _check_types(ctx, *values)
    _check_broadcast(ctx, *values)
    opcode = {"Min": "min", "Max": "max", "Sum": "add"}[ctx.node.op_type]
    if len(values) == 1:
        return [b.emit("copy", ctx.dest(), values[0])]
    acc = values[0]
    for i, v in enumerate(values[1:], 2):
        shape = broadcast_shape(acc.shape, v.shape)
        acc = b.emit(opcode, ctx.dest() if i == len(values) else ctx.temp(f"{i}", shape), acc, v)
    return [acc]


@converter("Identity", ints=True)
def identity(ctx):
    return [ctx.ins[0]]


@converter("Cast", attrs={"to", "saturate", "round_mode"}, ints=True)
def cast(ctx):
    """To the model's float type (a `cast` of integer data), to an integer type from integer
    data (nothing to do: all are i32), or to BOOL (nonzero: `where X, 1, 0`)."""
    x, to = ctx.ins[0], ctx.attr("to")
    if to == 9:                                   # BOOL
        one, zero = (ctx.b.const(np.int32(v), ctx.hint(n)) for v, n in ((1, "one"), (0, "zero")))
        return [ctx.b.emit("where", ctx.dest(), x, one, zero)]
    if to == ctx.graph.float_type:                # FLOAT, or FLOAT16 in a float16 model
        return [ctx.b.emit("cast", ctx.dest(), x) if x.is_int else x]
    if to in INTEGER_TYPES and x.is_int:
        return [x]
    raise ctx.bad_attr("to", "only casts to the model's float type (float32, or float16 in a "
                             "float16 model), to BOOL, and between integer types are supported "
                             "(ONNX truncates a float to an integer, the cast instruction rounds)")


@converter("Dropout", attrs={"ratio", "seed", "is_test"})
def dropout(ctx):
    if ctx.opset < 7 and ctx.attr("is_test", 0) != 1:
        raise ctx.bad_attr("is_test", "only inference (is_test=1) is supported")
    training = ctx.ins[2] if len(ctx.ins) > 2 else None
    if training is not None and (not training.is_const or bool(training.const)):
        raise ctx.error("only inference is supported: training_mode must be a constant false")
    ctx.unused_outputs(1, "the dropout mask")
    return [ctx.ins[0]]


# ---------------------------------------------------------------- shapes and layout

@converter("Reshape", "Flatten", "Squeeze", "Unsqueeze", attrs={"allowzero", "axis", "axes"},
           ints=True)
def reshape(ctx):
    # the output shape is the inferred one; shape inference has applied allowzero, axis and axes
    return [ctx.b.reshape(ctx.ins[0], ctx.out_shape(), dst=ctx.dest())]


@converter("Transpose", attrs={"perm"}, ints=True)
def transpose(ctx):
    x = ctx.ins[0]
    perm = ctx.attr("perm", list(reversed(range(len(x.shape)))))
    return [ctx.b.transpose(x, perm, dst=ctx.dest())]


@converter("Concat", attrs={"axis"}, ints=True)
def concat(ctx):
    _check_types(ctx, *(v for v in ctx.ins if v is not None))
    parts = [v for v in ctx.ins if v is not None and math.prod(v.shape) > 0]
    axis = ctx.axis(ctx.attr("axis"), len(ctx.out_shape()))
    if len(parts) == 1:
        return [ctx.b.emit("copy", ctx.dest(), parts[0])]
    return [ctx.b.emit("concat", ctx.dest(), *parts, axis=axis)]


# ---------------------------------------------------------------- matrix products

@converter("MatMul")
def matmul(ctx):
    """One `matmul`: its batch axes broadcast as numpy's. A 1-D operand becomes a matrix of one
    row (A) or column (B), and the product is reshaped to the output's shape."""
    b, (x, w) = ctx.b, ctx.ins
    if len(x.shape) == 1:
        x = b.reshape(x, (1,) + x.shape)
    if len(w.shape) == 1:
        w = b.reshape(w, w.shape + (1,))
    shape = broadcast_shape(x.shape[:-2], w.shape[:-2])
    if shape is None:
        raise ctx.error(f"the batch axes of {list(ctx.ins[0].shape)} and "
                        f"{list(ctx.ins[1].shape)} do not broadcast")
    return [_into(ctx, "matmul", shape + (x.shape[-2], w.shape[-1]), x, w)]


def _into(ctx, opcode, shape, *srcs, **attrs):
    """`opcode` of `srcs` into the node's output, through a reshape when its shape differs."""
    b = ctx.b
    if tuple(shape) == ctx.out_shape():
        return b.emit(opcode, ctx.dest(), *srcs, **attrs)
    value = b.emit(opcode, ctx.temp(opcode, shape), *srcs, **attrs)
    return b.reshape(value, ctx.out_shape(), dst=ctx.dest())


@converter("Gemm", attrs={"alpha", "beta", "transA", "transB"})
def gemm(ctx):
    b = ctx.b
    x, w = ctx.ins[:2]
    c = ctx.ins[2] if len(ctx.ins) > 2 else None
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if ctx.attr("transA", 0):
        x = b.transpose(x, (1, 0))
    if ctx.attr("transB", 0):
        w = b.transpose(w, (1, 0))
    if c is not None and beta == 0:               # beta * C is left out, as onnxruntime does
        c = None
    steps = ["matmul"] + (["mul"] if alpha != 1 else []) + (["add"] if c is not None else [])
    out = ctx.out_shape()
    dst = lambda step: ctx.dest() if step == steps[-1] else b.temp(ctx.hint(step), out)
    y = b.emit("matmul", dst("matmul"), x, w)
    if alpha != 1:
        y = b.emit("mul", dst("mul"), y, b.const(np.float32(alpha), ctx.hint("alpha")))
    if c is not None:
        if beta != 1:
            c = (b.const(c.const * np.float32(beta), ctx.hint("beta_c")) if c.is_const else
                 b.emit("mul", b.temp(ctx.hint("beta_c"), c.shape), c,
                        b.const(np.float32(beta), ctx.hint("beta"))))
        y = b.emit("add", dst("add"), y, c)
    return [y]


# ---------------------------------------------------------------- windows

def _window(ctx, x, kernel):
    """(stride, pad) of a 2-D window op: strides, pads and auto_pad as the ISA writes them."""
    if len(x.shape) != 4:
        raise ctx.error(f"only 2-D windows over NCHW data are supported; the input has shape "
                        f"{list(x.shape)}")
    if any(d != 1 for d in ctx.attr("dilations", [1, 1])):
        raise ctx.bad_attr("dilations", "the instructions have no dilation")
    strides = ctx.attr("strides", [1, 1])
    if strides[0] != strides[1]:
        raise ctx.bad_attr("strides", "the instructions take one stride for both spatial axes")
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto == "NOTSET":
        top, left, bottom, right = ctx.attr("pads", [0, 0, 0, 0])
    elif auto == "VALID":
        top = left = bottom = right = 0
    else:                                         # SAME_UPPER, SAME_LOWER: output = ceil(in / s)
        pad = []
        for size, k in zip(x.shape[2:], kernel):
            total = max((-(-size // strides[0]) - 1) * strides[0] + k - size, 0)
            small = total // 2
            pad.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        (top, bottom), (left, right) = pad
    pad = (top, left, bottom, right)
    return strides[0], pad[0] if len(set(pad)) == 1 else pad


def _check_window(ctx, x, kernel, stride, pad):
    """The ISA's floor-mode output size must be ONNX's (ceil_mode can make ONNX's larger)."""
    t, l, b, r = (pad,) * 4 if isinstance(pad, int) else pad
    got = (conv_out(x.shape[2], kernel[0], stride, t, b),
           conv_out(x.shape[3], kernel[1], stride, l, r))
    want = ctx.out_shape()[2:]
    if got != want:
        why = (f"ONNX keeps a partial window at the end (output {want[0]}x{want[1]}, floor mode "
               f"gives {got[0]}x{got[1]})")
        raise ctx.bad_attr("ceil_mode", why) if ctx.attr("ceil_mode", 0) else ctx.error(why)


@converter("Conv", attrs={"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
def conv(ctx):
    b, (x, w) = ctx.b, ctx.ins[:2]
    bias = ctx.ins[2] if len(ctx.ins) > 2 else None
    kernel = w.shape[2:]
    if list(ctx.attr("kernel_shape", kernel)) != list(kernel):
        raise ctx.bad_attr("kernel_shape", f"it differs from the weights' kernel {list(kernel)}")
    stride, pad = _window(ctx, x, kernel)
    _check_window(ctx, x, kernel, stride, pad)
    out, groups = ctx.out_shape(), ctx.attr("group", 1)
    y = ctx.dest() if bias is None else b.temp(ctx.hint("conv"), out)
    if groups == 1:
        b.emit("conv2d", y, x, w, stride=stride, pad=pad)
    else:                                         # each group: its channels of X and filters of W
        cin, cout = x.shape[1] // groups, w.shape[0] // groups
        pieces = [b.emit("conv2d", b.temp(ctx.hint(f"g{g}"), (out[0], cout) + out[2:]),
                         b.slice(x, 1, g * cin, cin), b.slice(w, 0, g * cout, cout),
                         stride=stride, pad=pad) for g in range(groups)]
        b.emit("concat", y, *pieces, axis=1)
    if bias is not None:
        y = b.emit("add", ctx.dest(), y, b.reshape(bias, (1, out[1], 1, 1)))
    return [y]


@converter("MaxPool", "AveragePool", attrs={"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                            "pads", "strides", "storage_order",
                                            "count_include_pad"})
def pool(ctx):
    b, x = ctx.b, ctx.ins[0]
    ctx.unused_outputs(1, "the max-pooling indices")
    kernel = tuple(ctx.attr("kernel_shape"))
    if len(kernel) != 2 or kernel[0] != kernel[1]:
        raise ctx.bad_attr("kernel_shape", "the instructions take a square 2-D window")
    stride, pad = _window(ctx, x, kernel)
    if max((pad,) if isinstance(pad, int) else pad) >= kernel[0]:
        raise ctx.bad_attr("pads", f"every pad must be smaller than the kernel ({kernel[0]})")
    _check_window(ctx, x, kernel, stride, pad)
    opcode = "maxpool" if ctx.node.op_type == "MaxPool" else "avgpool"
    attrs = dict(kernel=kernel[0], stride=stride, pad=pad)
    if opcode == "maxpool" or not ctx.attr("count_include_pad", 0) or pad == 0:
        return [b.emit(opcode, ctx.dest(), x, **attrs)]
    # count_include_pad=1: every window divides by kernel^2; avgpool divides by its real cells
    mean = b.emit("avgpool", b.temp(ctx.hint("mean"), ctx.out_shape()), x, **attrs)
    t, l, bt, r = (pad,) * 4 if isinstance(pad, int) else pad
    rows = _real_cells(x.shape[2], kernel[0], stride, t, ctx.out_shape()[2])
    cols = _real_cells(x.shape[3], kernel[0], stride, l, ctx.out_shape()[3])
    ratio = np.outer(rows, cols)[None, None] / float(kernel[0] * kernel[0])
    ratio = b.const(ratio.astype(np.float32), ctx.hint("pad_ratio"))
    return [b.emit("mul", ctx.dest(), mean, ratio)]


def _real_cells(size, k, stride, lo, n):
    """How many cells of each of the n windows along one axis lie inside the input."""
    starts = np.arange(n) * stride - lo
    return np.minimum(starts + k, size) - np.maximum(starts, 0)


@converter("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx):
    b, x = ctx.b, ctx.ins[0]
    n, c, cells = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    flat = b.reshape(x, (n, c, cells))
    if ctx.node.op_type == "GlobalMaxPool":
        y = b.emit("reduce_max", b.temp(ctx.hint("max"), (n, c)), flat, axis=2)
    else:
        total = b.emit("reduce_sum", b.temp(ctx.hint("sum"), (n, c)), flat, axis=2)
        y = b.emit("div", b.temp(ctx.hint("mean"), (n, c)), total,
                   b.const(np.float32(cells), ctx.hint("cells")))
    return [b.reshape(y, ctx.out_shape(), dst=ctx.dest())]


# ---------------------------------------------------------------- normalization

@converter("Softmax", attrs={"axis"})
def softmax(ctx):
    b, x = ctx.b, ctx.ins[0]
    axis = ctx.axis(ctx.attr("axis", -1 if ctx.opset >= 13 else 1), len(x.shape))
    if ctx.opset < 13:                            # before opset 13: over all axes from `axis` on
        x = b.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        axis = 1
    kept = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    reduced = x.shape[:axis] + x.shape[axis + 1:]
    top = b.emit("reduce_max", b.temp(ctx.hint("max"), reduced), x, axis=axis)
    e = b.emit("sub", b.temp(ctx.hint("exp"), x.shape), x, b.reshape(top, kept))
    b.emit("exp", e, e)
    total = b.emit("reduce_sum", b.temp(ctx.hint("sum"), reduced), e, axis=axis)
    return [_into(ctx, "div", x.shape, e, b.reshape(total, kept))]


@converter("LRN", attrs={"size", "alpha", "beta", "bias"})
def lrn(ctx):
    x = ctx.ins[0]
    if len(x.shape) != 4:
        raise ctx.error(f"only NCHW inputs (rank 4) are supported; the input has shape "
                        f"{list(x.shape)}")
    return [ctx.b.emit("lrn", ctx.dest(), x, size=ctx.attr("size"), alpha=ctx.attr("alpha", 1e-4),
                       beta=ctx.attr("beta", 0.75), k=ctx.attr("bias", 1.0))]


@converter("BatchNormalization", attrs={"epsilon", "momentum", "training_mode", "spatial",
                                        "is_test", "consumed_inputs"})
def batch_norm(ctx):
    """Inference form, y = x * a + c with a = scale / sqrt(var + epsilon), c = B - mean * a."""
    b, x = ctx.b, ctx.ins[0]
    if ctx.attr("training_mode", 0):
        raise ctx.bad_attr("training_mode", "only inference is supported")
    if ctx.opset < 7 and ctx.attr("is_test", 0) != 1:
        raise ctx.bad_attr("is_test", "only inference (is_test=1) is supported")
    if ctx.attr("spatial", 1) != 1:
        raise ctx.bad_attr("spatial", "only per-channel statistics (spatial=1) are supported")
    for i in range(1, len(ctx.node.output)):
        ctx.unused_outputs(i, "the running statistics")
    if not all(v is not None and v.is_const for v in ctx.ins[1:5]):
        raise ctx.error("scale, B, mean and var must be constants (initializers)")
    a, c = batch_norm_affine(*(v.const for v in ctx.ins[1:5]), ctx.attr("epsilon", 1e-5))
    shape = (1, x.shape[1]) + (1,) * (len(x.shape) - 2)
    scaled = b.emit("mul", b.temp(ctx.hint("scaled"), x.shape), x,
                    b.const(a.reshape(shape), ctx.hint("bn_scale")))
    return [b.emit("add", ctx.dest(), scaled, b.const(c.reshape(shape), ctx.hint("bn_shift")))]


def batch_norm_affine(scale, bias, mean, var, epsilon):
    """(a, c) with batch normalization = x * a + c, computed in double precision, f32 results."""
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    c = bias.astype(np.float64) - mean.astype(np.float64) * a
    return a.astype(np.float32), c.astype(np.float32)
