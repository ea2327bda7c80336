"""Leaf kernels (numba) against the numpy reference `isa.reference.SEMANTICS`, opcode by opcode."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from isa.errors import UserError
from isa.opcodes import OPCODES, conv_out
from isa.program import TensorType
from isa.reference import SEMANTICS
from simulator.kernels import LEAF_KERNELS, warm_up

DT = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32"}
FEW = settings(max_examples=15, deadline=None)
seeds = st.integers(0, 2**32 - 1)
dims = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


def check(op, ins, out_shape, out_dtype="f32", rtol=1e-6, atol=1e-7, **attrs):
    """Run `op` through LEAF_KERNELS and SEMANTICS on the same legal instruction; compare."""
    spec = OPCODES[op]
    out_t = TensorType(out_dtype, tuple(out_shape))
    full = spec.full_attrs(attrs)
    spec.rule([out_t], [TensorType(DT[a.dtype], a.shape) for a in ins], full)
    before = [a.copy() for a in ins]
    got = LEAF_KERNELS[op](ins, full, out_t)
    want = SEMANTICS[op](ins, full, out_t)
    for a, b in zip(ins, before):                      # sources are never modified
        np.testing.assert_array_equal(a, b)
    assert got.shape == want.shape == tuple(out_shape)
    assert got.dtype == want.dtype and got.flags.c_contiguous
    if out_dtype == "f32":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    return got


def f32(rng, shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale, np.float32)


def i32(rng, shape, lo=-2**31, hi=2**31):
    return np.asarray(rng.integers(lo, hi, shape, dtype=np.int32))


def ties(rng, shape, dtype):
    """Values from a tiny range, so that maxima, minima and sort keys repeat."""
    return np.asarray(rng.integers(-2, 3, shape), dtype)


pad_of = lambda hi: st.one_of(st.integers(0, hi), st.tuples(*[st.integers(0, hi)] * 4))


def padding(p):
    return (p, p, p, p) if isinstance(p, int) else p


def test_every_opcode_has_a_kernel_and_warm_up_runs():
    assert LEAF_KERNELS.keys() == OPCODES.keys() == SEMANTICS.keys()
    warm_up()


# ---------------------------------------------------------------- mac

@FEW
@given(seeds, st.integers(1, 40), st.integers(1, 70), st.integers(1, 40))
def test_matmul(seed, m, k, n):
    rng = np.random.default_rng(seed)
    check("matmul", [f32(rng, (m, k)), f32(rng, (k, n))], (m, n), rtol=1e-4, atol=1e-4)


@FEW
@given(seeds, st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.integers(1, 12),
       st.integers(1, 12), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), pad_of(2))
def test_conv2d(seed, n, c, o, h, w, kh, kw, stride, pad):
    t, l, b, r = padding(pad)
    ho, wo = conv_out(h, kh, stride, t, b), conv_out(w, kw, stride, l, r)
    assume(ho >= 1 and wo >= 1)
    rng = np.random.default_rng(seed)
    check("conv2d", [f32(rng, (n, c, h, w)), f32(rng, (o, c, kh, kw))], (n, o, ho, wo),
          rtol=1e-4, atol=1e-4, stride=stride, pad=pad)


@FEW
@given(seeds, st.integers(1, 6), st.integers(1, 9), st.integers(1, 6))
def test_eucdist(seed, m, k, n):
    rng = np.random.default_rng(seed)
    check("eucdist", [f32(rng, (m, k)), f32(rng, (n, k))], (m, n))


# ---------------------------------------------------------------- windows and channels

@FEW
@pytest.mark.parametrize("op", ["maxpool", "avgpool"])
@given(seed=seeds, shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 9),
                                   st.integers(1, 9)),
       kernel=st.integers(1, 4), stride=st.integers(1, 3), data=st.data())
def test_pool(op, seed, shape, kernel, stride, data):
    pad = data.draw(pad_of(kernel - 1), label="pad")
    t, l, b, r = padding(pad)
    ho, wo = conv_out(shape[2], kernel, stride, t, b), conv_out(shape[3], kernel, stride, l, r)
    assume(ho >= 1 and wo >= 1)
    rng = np.random.default_rng(seed)
    x = f32(rng, shape) - 3.0                          # all negative: a padded 0 must never win
    check(op, [x], shape[:2] + (ho, wo), kernel=kernel, stride=stride, pad=pad)


@FEW
@given(seeds, st.tuples(st.integers(1, 2), st.integers(1, 8), st.integers(1, 4), st.integers(1, 4)),
       st.integers(1, 9), st.floats(1e-4, 1.0), st.floats(0.25, 1.0), st.floats(0.5, 3.0))
def test_lrn(seed, shape, size, alpha, beta, k):
    rng = np.random.default_rng(seed)
    check("lrn", [f32(rng, shape, 3.0)], shape, size=size, alpha=alpha, beta=beta, k=k)


# ---------------------------------------------------------------- elementwise

@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: a common shape with leading axes dropped and some axes set to 1."""
    base = draw(st.lists(st.integers(1, 5), max_size=4))
    def one():
        cut = draw(st.integers(0, len(base)))
        return tuple(1 if draw(st.booleans()) else d for d in base[cut:])
    return one(), one()


@FEW
@pytest.mark.parametrize("op,dtype", [("add", "f32"), ("add", "i32"), ("sub", "f32"),
                                      ("sub", "i32"), ("mul", "f32"), ("mul", "i32"),
                                      ("div", "f32")])
@given(seed=seeds, shapes=broadcast_pair(), fortran=st.booleans())
def test_binary(op, dtype, seed, shapes, fortran):
    rng = np.random.default_rng(seed)
    if dtype == "i32":                                 # full int32 range: add, sub, mul wrap around
        x, y = i32(rng, shapes[0]), i32(rng, shapes[1])
    else:
        x, y = f32(rng, shapes[0]), f32(rng, shapes[1])
        y[rng.random(y.shape) < 0.2] = 0.0             # x / 0 gives inf or nan
    if fortran:                                        # sources need not be C-contiguous
        x, y = np.asfortranarray(x), np.asfortranarray(y)
    check(op, [x, y], np.broadcast_shapes(x.shape, y.shape), dtype)


def test_binary_read_only_broadcast_views():
    rng = np.random.default_rng(1)
    x = np.broadcast_to(f32(rng, (1, 4)), (3, 4))
    check("add", [x, f32(rng, (3, 1))], (3, 4))


@FEW
@pytest.mark.parametrize("op,dtype", [("relu", "f32"), ("relu", "i32"), ("sigmoid", "f32"),
                                      ("tanh", "f32"), ("exp", "f32")])
@given(seed=seeds, shape=st.lists(st.integers(1, 6), max_size=4).map(tuple))
def test_unary(op, dtype, seed, shape):
    rng = np.random.default_rng(seed)
    x = i32(rng, shape) if dtype == "i32" else f32(rng, shape, 40.0)   # exp overflows to inf
    check(op, [x], shape, dtype)


# ---------------------------------------------------------------- reductions, compare

@FEW
@pytest.mark.parametrize("op,dtype", [(op, dt) for op in ("reduce_sum", "reduce_max", "argmax",
                                                           "argmin") for dt in ("f32", "i32")])
@given(seed=seeds, shape=dims, data=st.data())
def test_reduce(op, dtype, seed, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    rng = np.random.default_rng(seed)
    np_dt = np.float32 if dtype == "f32" else np.int32
    if op.startswith("arg") or data.draw(st.booleans(), label="ties"):
        x = ties(rng, shape, np_dt)
    else:
        x = f32(rng, shape) if dtype == "f32" else i32(rng, shape)  # i32 sums wrap around
    out_dtype = "i32" if op.startswith("arg") else dtype
    check(op, [x], shape[:axis % len(shape)] + shape[axis % len(shape) + 1:], out_dtype, axis=axis)


@FEW
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@given(seed=seeds, shape=dims, tied=st.booleans())
def test_sort(dtype, seed, shape, tied):
    rng = np.random.default_rng(seed)
    x = ties(rng, shape, dtype) if tied else (f32(rng, shape) if dtype == np.float32
                                              else i32(rng, shape))
    check("sort", [x], shape, DT[np.dtype(dtype)])


@FEW
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@given(seed=seeds, shape=dims, tied=st.booleans())
def test_argsort(dtype, seed, shape, tied):
    rng = np.random.default_rng(seed)
    x = ties(rng, shape, dtype) if tied else (f32(rng, shape) if dtype == np.float32
                                              else i32(rng, shape))
    check("argsort", [x], shape, "i32")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 33, 100])
def test_argsort_long_rows_with_ties(dtype, n):
    # rows longer than `dims` gives: several merge passes, odd run lengths, ties across runs
    rng = np.random.default_rng(n)
    x = ties(rng, (3, n), dtype)
    if dtype == np.float32:
        x[rng.random(x.shape) < 0.1] = np.nan
    got = check("argsort", [x], x.shape, "i32")
    check("sort", [x], x.shape, DT[np.dtype(dtype)])
    np.testing.assert_array_equal(np.take_along_axis(x, got, -1), np.sort(x, kind="stable"))


@FEW
@pytest.mark.parametrize("dtype", ["f32", "i32"])
@given(seed=seeds, shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
       m=st.integers(1, 8))
def test_gather(dtype, seed, shape, m):
    rng = np.random.default_rng(seed)
    x = f32(rng, shape) if dtype == "f32" else i32(rng, shape)
    idx = i32(rng, shape[:-1] + (m,), 0, shape[-1])           # repeats and any order
    check("gather", [x, idx], idx.shape, dtype)


def test_gather_non_contiguous_sources():
    rng = np.random.default_rng(2)
    x = np.asfortranarray(f32(rng, (4, 6)))
    idx = i32(rng, (6, 4), 0, 6).T                              # a transposed view
    check("gather", [x, idx], idx.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("bad", [10, 12, -1, 2**31 - 1, -2**31])
def test_gather_index_out_of_range(dtype, bad):
    x = np.arange(30, dtype=dtype).reshape(3, 10)
    idx = np.array([[0, 9, 3], [5, bad, 11], [-4, 1, 2]], np.int32)   # `bad` is the first bad one
    t = TensorType(DT[np.dtype(dtype)], idx.shape)
    want = f"gather: index {bad} is out of range for a last axis of length 10"
    for impl in (LEAF_KERNELS, SEMANTICS):
        with pytest.raises(UserError) as e:
            impl["gather"]([x, idx], {}, t)
        assert e.value.message == want


@FEW
@given(seed=seeds, shape=dims, value=st.sampled_from([0, 1, 2.0, 0.5, 0.1, 7]))
def test_count_f32(seed, shape, value):
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0, 1, 2, 0.5, 0.1], np.float32), shape)
    check("count", [x], shape[:-1], "i32", value=value)


@FEW
@given(seed=seeds, shape=dims, value=st.sampled_from([1, -2, 2.0, 2.5, 2**40, float("nan")]))
def test_count_i32(seed, shape, value):
    rng = np.random.default_rng(seed)
    check("count", [ties(rng, shape, np.int32)], shape[:-1], "i32", value=value)


def test_nan_propagates_like_numpy():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, -1.0, 0.0, -0.0], [2.0, 5.0, -0.0, 0.0]],
                 np.float32)
    for op in ("reduce_max", "argmax", "argmin"):
        check(op, [x], (3,), "i32" if op.startswith("arg") else "f32", axis=-1)
    got = check("sort", [x], x.shape, "f32")
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.sort(x, kind="stable")))
    check("argsort", [x], x.shape, "i32")
    check("relu", [x], x.shape)
    check("maxpool", [x.reshape(1, 1, 3, 4)], (1, 1, 2, 3), kernel=2)


# ---------------------------------------------------------------- data movement

@FEW
@given(seed=seeds, shape=dims, dtype=st.sampled_from(["f32", "i32"]), data=st.data())
def test_data_movement(seed, shape, dtype, data):
    rng = np.random.default_rng(seed)
    make = (lambda s: f32(rng, s)) if dtype == "f32" else (lambda s: i32(rng, s))
    x = make(shape)
    check("copy", [x], shape, dtype)
    perm = tuple(int(p) for p in rng.permutation(len(shape)))
    check("transpose", [x], tuple(shape[p] for p in perm), dtype, perm=perm)
    check("transpose", [x.T], tuple(reversed(shape)), dtype, perm=tuple(range(len(shape))))
    check("reshape", [x], (math.prod(shape),), dtype)
    check("reshape", [x], tuple(shape[p] for p in perm), dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    ax = axis % len(shape)
    start = data.draw(st.integers(0, shape[ax] - 1), label="start")
    length = data.draw(st.integers(1, shape[ax] - start), label="length")
    check("slice", [x], shape[:ax] + (length,) + shape[ax + 1:], dtype, axis=axis, start=start)
    parts = [make(shape[:ax] + (int(rng.integers(1, 4)),) + shape[ax + 1:])
             for _ in range(int(rng.integers(1, 4)))]
    total = sum(p.shape[ax] for p in parts)
    check("concat", parts, shape[:ax] + (total,) + shape[ax + 1:], dtype, axis=axis)


@FEW
@given(seeds, st.integers(1, 4), st.integers(1, 12), st.integers(1, 12))
def test_mergepos(seed, rows, m, n):
    rng = np.random.default_rng(seed)
    a = np.sort(rng.integers(0, 5, (rows, m)).astype(np.float32), axis=1)
    b = np.sort(rng.integers(0, 5, (rows, n)).astype(np.float32), axis=1)
    check("mergepos", [a, b], (rows, m + n), out_dtype="i32")
