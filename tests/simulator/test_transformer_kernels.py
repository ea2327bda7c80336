"""Leaf kernels of the transformer instructions against the numpy reference, every type they take,
with the special values (NaN, infinities, signed zeros, negative arguments) and broadcasting."""
from __future__ import annotations

import numpy as np
import pytest

import fractal
from isa import parse_program
from isa.opcodes import OPCODES
from isa.program import TensorType
from isa.reference import NP_DTYPES, SEMANTICS, dtype_name, generate_feeds, run_reference
from simulator.kernels import LEAF_KERNELS

RNG = np.random.default_rng(77)
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.25, 9.0, 1e-20, 3e38, np.inf, -np.inf, np.nan],
                   np.float32)


def same(op, ins, out: TensorType, **attrs):
    """The kernel and the reference on one legal instruction: equal type, shape and values
    (exactly, or within float32 rounding of a float64 computation for f32 math)."""
    spec = OPCODES[op]
    full = spec.full_attrs(attrs)
    spec.rule([out], [TensorType(dtype_name(a.dtype), a.shape) for a in ins], full)
    with np.errstate(over="ignore"):            # a power past f16's or bf16's range is inf
        got, want = LEAF_KERNELS[op](ins, full, out), SEMANTICS[op](ins, full, out)
    assert got.dtype == want.dtype and got.shape == want.shape == out.shape
    assert got.flags.c_contiguous
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(g, w, rtol=1e-7 if out.dtype == "f32" else 0, atol=0)
    return got


def floats(dtype, n=40, scale=3.0):
    with np.errstate(over="ignore"):
        x = np.concatenate([SPECIAL, RNG.standard_normal(n).astype(np.float32) * scale])
        return x.astype(NP_DTYPES[dtype])


@pytest.mark.parametrize("op", ["sqrt", "rsqrt", "erf", "log", "abs", "neg"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_unary(op, dtype):
    x = floats(dtype)
    got = same(op, [x], TensorType(dtype, x.shape))
    if op in ("abs", "neg"):        # exact: the sign of zero too
        np.testing.assert_array_equal(np.signbit(got), np.signbit(SEMANTICS[op]([x], {}, TensorType(dtype, x.shape))))


@pytest.mark.parametrize("op", ["abs", "neg"])
def test_unary_i32_wraps(op):
    x = np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32)
    same(op, [x], TensorType("i32", x.shape))


@pytest.mark.parametrize("op", ["pow", "min", "max"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "i8"])
def test_binary_broadcast(op, dtype):
    if op == "pow" and dtype in ("i32", "i8"):
        pytest.skip("pow takes the float types")
    if dtype in ("i32", "i8"):
        a = RNG.integers(-100, 100, (3, 1, 5)).astype(NP_DTYPES[dtype])
        b = RNG.integers(-100, 100, (4, 1)).astype(NP_DTYPES[dtype])
    else:
        a = floats(dtype, 4)[:15].reshape(3, 1, 5)
        b = floats(dtype, 4)[-4:].reshape(4, 1)
        if op == "pow":
            a = np.abs(a)
    same(op, [a, b], TensorType(dtype, (3, 4, 5)))
    same(op, [b, a], TensorType(dtype, (3, 4, 5)))


@pytest.mark.parametrize("dtype", ["f32", "i32", "f16", "bf16", "i8"])
def test_where(dtype):
    vals = (RNG.integers(-9, 9, (2, 3, 4)) if dtype in ("i32", "i8")
            else RNG.standard_normal((2, 3, 4))).astype(NP_DTYPES[dtype])
    other = vals[:1, :1].copy()
    for mask in (np.array([[0], [1], [7]], np.int32), np.array([0.0, np.nan, -0.0, 2.0], np.float32),
                 np.array([1, 0, 0, 1], np.int8).astype(NP_DTYPES["bf16"])):
        same("where", [mask, vals, other], TensorType(dtype, (2, 3, 4)))
        same("where", [mask, other, vals], TensorType(dtype, (2, 3, 4)))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_reduce_mean(dtype):
    x = (RNG.standard_normal((4, 6, 33)) * 5).astype(NP_DTYPES[dtype])
    for axis in (0, 1, 2, -1):
        shape = tuple(n for i, n in enumerate(x.shape) if i != axis % 3)
        same("reduce_mean", [x], TensorType(dtype, shape), axis=axis)
        same("reduce_mean", [x], TensorType(dtype, shape), axis=axis, count=100)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("window", [0, 1, 5])
def test_causal_mask(dtype, window):
    qp = RNG.integers(-3, 40, 17).astype(np.int32)
    kp = np.concatenate([np.arange(30), [-2**31, 2**31 - 1]]).astype(np.int32)
    same("causal_mask", [qp, kp], TensorType(dtype, (17, 32)), window=window)


@pytest.mark.parametrize("dtype", ["f32", "i32", "f16", "bf16", "i8"])
def test_fill(dtype):
    for shape, attrs in (((3, 4, 5), dict(value=-7, step=3, axis=1)), ((6,), dict(value=2)),
                         ((), dict(value=5)), ((2, 9), dict(value=-4, step=1, axis=-1))):
        same("fill", [], TensorType(dtype, shape), **attrs)
    if dtype in ("f32", "f16", "bf16"):
        same("fill", [], TensorType(dtype, (4, 7)), value=0.1, step=-0.3, axis=0)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i8"])
def test_batched_matmul(dtype):
    out = "i32" if dtype == "i8" else dtype
    for a_shape, b_shape, c_shape in (((2, 3, 5, 7), (3, 7, 4), (2, 3, 5, 4)),
                                      ((1, 5, 7), (4, 7, 2), (4, 5, 2)),
                                      ((6, 5, 7), (7, 3), (6, 5, 3))):
        if dtype == "i8":
            a = RNG.integers(-100, 100, a_shape).astype(np.int8)
            b = RNG.integers(-100, 100, b_shape).astype(np.int8)
        else:
            a = RNG.standard_normal(a_shape).astype(NP_DTYPES[dtype])
            b = RNG.standard_normal(b_shape).astype(NP_DTYPES[dtype])
        spec = OPCODES["matmul"]
        t = TensorType(out, c_shape)
        got, want = LEAF_KERNELS["matmul"]([a, b], {}, t), SEMANTICS["matmul"]([a, b], {}, t)
        assert got.dtype == want.dtype and got.shape == c_shape
        if dtype == "i8":
            np.testing.assert_array_equal(got, want)
        else:                           # float32 BLAS against the float64 reference, rounded
            tol = {"f32": 1e-5, "f16": 2.0**-9, "bf16": 2.0**-6}[dtype]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=tol, atol=tol * 8)
        assert spec.ops([t], [TensorType(dtype, a_shape), TensorType(dtype, b_shape)], {}) \
            == 2 * np.prod(c_shape) * a_shape[-1]


def test_functional_run_of_a_batched_matmul_uses_its_leaves():
    """A functional run (leaves batched per node) of matmuls with batch axes equals the reference."""
    text = ("tensor a : f32[6, 1, 20, 24] input\ntensor b : f32[5, 24, 16] param\n"
            "tensor c : f32[6, 5, 20, 16] output\ntensor h : f16[3, 20, 24] input\n"
            "tensor g : f16[24, 8] param\ntensor d : f16[3, 20, 8] output\n"
            "matmul c, a, b\nmatmul d, h, g\n")
    program = parse_program(text, "bmm.fasm")
    feeds = generate_feeds(program, 5)
    want = run_reference(program, feeds)
    for machine in ("tiny", fractal.build_machine("f1", 2, 3)):
        got = fractal.run(program, machine, inputs=feeds).outputs
        np.testing.assert_allclose(got["c"], want["c"], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["d"].astype(np.float32), want["d"].astype(np.float32),
                                   rtol=2.0**-8, atol=2.0**-6)
