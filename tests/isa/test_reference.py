"""The reference interpreter against independent oracles written as explicit loops."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from isa.errors import UserError
from isa.opcodes import OPCODES
from isa.program import Instruction, Program, TensorDecl, TensorType
from isa.reference import (SEMANTICS, execute_instruction, generate_feeds, load_feeds,
                           run_reference, save_outputs)

RNG = np.random.default_rng(1234)
DT = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32"}


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run(opcode, inputs, out_shape, out_dtype="f32", **attrs):
    """Run one instruction through execute_instruction, after checking it against the table."""
    names = [f"s{i}" for i in range(len(inputs))]
    types = {n: TensorType(DT[a.dtype], a.shape) for n, a in zip(names, inputs)}
    types["d"] = TensorType(out_dtype, tuple(out_shape))
    spec = OPCODES[opcode]
    spec.rule([types["d"]], [types[n] for n in names], spec.full_attrs(attrs))
    env = dict(zip(names, inputs))
    before = {n: a.copy() for n, a in env.items()}
    execute_instruction(Instruction(opcode, ("d", *names), tuple(attrs.items())), env, types)
    for n in names:                                   # sources are never modified
        np.testing.assert_array_equal(env[n], before[n])
    out = env["d"]
    assert out.shape == tuple(out_shape) and out.dtype == {"f32": np.float32, "i32": np.int32}[out_dtype]
    return out


def test_every_opcode_has_semantics():
    assert set(SEMANTICS) == set(OPCODES)


# ---------------------------------------------------------------- compute

def test_matmul():
    a, b = f32(3, 4), f32(4, 5)
    want = np.zeros((3, 5))
    for i, j, k in itertools.product(range(3), range(5), range(4)):
        want[i, j] += float(a[i, k]) * float(b[k, j])
    np.testing.assert_allclose(run("matmul", [a, b], (3, 5)), want, rtol=1e-5, atol=1e-6)


def conv_oracle(x, w, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, ho, wo))
    for b, f, i, j in itertools.product(range(n), range(o), range(ho), range(wo)):
        acc = 0.0
        for ch, di, dj in itertools.product(range(c), range(kh), range(kw)):
            r, q = i * stride - pad + di, j * stride - pad + dj
            if 0 <= r < h and 0 <= q < wd:
                acc += float(x[b, ch, r, q]) * float(w[f, ch, di, dj])
        y[b, f, i, j] = acc
    return y


@pytest.mark.parametrize("xs, ws, stride, pad", [
    ((2, 3, 6, 6), (4, 3, 3, 3), 1, 0),
    ((2, 3, 7, 6), (4, 3, 3, 2), 2, 1),     # non-square kernel and input, stride 2, pad 1
    ((1, 2, 5, 9), (3, 2, 1, 4), 3, 2),
    ((1, 1, 4, 4), (2, 1, 4, 4), 1, 1),
])
def test_conv2d(xs, ws, stride, pad):
    x, w = f32(*xs), f32(*ws)
    want = conv_oracle(x, w, stride, pad)
    got = run("conv2d", [x, w], want.shape, stride=stride, pad=pad)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_default_attrs():
    x, w = f32(1, 2, 4, 4), f32(1, 2, 2, 2)
    np.testing.assert_allclose(run("conv2d", [x, w], (1, 1, 3, 3)), conv_oracle(x, w, 1, 0),
                               rtol=1e-5, atol=1e-5)


def pool_oracle(x, k, s, p, kind):
    n, c, h, w = x.shape
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.zeros((n, c, ho, wo))
    for b, ch, i, j in itertools.product(range(n), range(c), range(ho), range(wo)):
        cells = [float(x[b, ch, r, q])
                 for r in range(i * s - p, i * s - p + k) for q in range(j * s - p, j * s - p + k)
                 if 0 <= r < h and 0 <= q < w]
        y[b, ch, i, j] = max(cells) if kind == "maxpool" else sum(cells) / len(cells)
    return y


@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
@pytest.mark.parametrize("shape, k, s, p", [
    ((2, 3, 7, 7), 3, 2, 1),
    ((1, 2, 5, 6), 2, 2, 1),
    ((1, 1, 6, 5), 3, 1, 2),
    ((1, 2, 4, 4), 2, 2, 0),
])
def test_pool(kind, shape, k, s, p):
    x = -np.abs(f32(*shape)) - 1.0          # all negative: a padded zero must never win a max
    want = pool_oracle(x, k, s, p, kind)
    got = run(kind, [x.astype(np.float32)], want.shape, kernel=k, stride=s, pad=p)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if kind == "maxpool":
        assert (got < 0).all()


def test_avgpool_divisor_leaves_out_padding():
    x = np.ones((1, 1, 3, 3), np.float32)
    np.testing.assert_array_equal(run("avgpool", [x], (1, 1, 2, 2), kernel=3, stride=2, pad=1), 1.0)
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    got = run("avgpool", [x], (1, 1, 4, 4), kernel=2, pad=1)     # stride defaults to 1
    assert got[0, 0, 0, 0] == 0.0                       # only x[0,0] is real
    assert got[0, 0, 0, 1] == pytest.approx((0 + 1) / 2)
    assert got[0, 0, 1, 1] == pytest.approx((0 + 1 + 3 + 4) / 4)
    assert got[0, 0, 3, 3] == 8.0


def broadcast_oracle(fn, x, y):
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = np.zeros(shape, dtype=object)

    def pick(a, idx):
        idx = idx[len(idx) - a.ndim:]
        return a[tuple(0 if n == 1 else i for i, n in zip(idx, a.shape))]

    for idx in np.ndindex(*shape):
        out[idx] = fn(pick(x, idx), pick(y, idx))
    return out.astype(x.dtype)


BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
          "mul": lambda a, b: a * b, "div": lambda a, b: a / b}


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("xs, ys", [
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1)), ((3, 4), (1,)),
    ((1, 4), (3, 1)), ((2, 3, 4), (3, 1)), ((1,), (2, 3)),
])
def test_binary_f32_broadcast(op, xs, ys):
    x, y = f32(*xs), f32(*ys)
    if op == "div":
        y = np.where(np.abs(y) < 0.1, np.float32(0.5), y)
    want = broadcast_oracle(BINARY[op], x, y)           # numpy f32 scalars: one rounding each
    got = run(op, [x, y], want.shape)
    np.testing.assert_array_equal(got, want)


def test_binary_i32_wraps_around():
    big = np.array([2**31 - 1, -2**31, 65536], np.int32)
    one = np.array([1, 1, 65536], np.int32)
    assert run("add", [big, one], (3,), "i32").tolist() == [-2**31, -2**31 + 1, 131072]
    assert run("sub", [big, one], (3,), "i32").tolist() == [2**31 - 2, 2**31 - 1, 0]
    assert run("mul", [big, one], (3,), "i32").tolist() == [2**31 - 1, -2**31, 0]
    x = np.array([[1, 2], [3, 4]], np.int32)
    assert run("add", [x, np.array([10], np.int32)], (2, 2), "i32").tolist() == [[11, 12], [13, 14]]


def test_div_by_zero_is_ieee():
    got = run("div", [np.array([1, -1, 0], np.float32), np.zeros(3, np.float32)], (3,))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


@pytest.mark.parametrize("op, fn", [
    ("sigmoid", lambda v: 1 / (1 + math.exp(-v))), ("tanh", math.tanh), ("exp", math.exp),
    ("relu", lambda v: max(v, 0.0)),
])
def test_unary_f32(op, fn):
    x = f32(3, 5) * 3
    want = np.array([[fn(float(v)) for v in row] for row in x])
    np.testing.assert_allclose(run(op, [x], x.shape), want, rtol=1e-6, atol=1e-7)


def test_relu_i32_and_extremes():
    assert run("relu", [np.array([-5, 0, 7], np.int32)], (3,), "i32").tolist() == [0, 0, 7]
    got = run("sigmoid", [np.array([-1000, 1000], np.float32)], (2,))
    assert got.tolist() == [0.0, 1.0]
    assert run("exp", [np.array([1000], np.float32)], (1,))[0] == np.inf


def lrn_oracle(x, size, alpha, beta, k):
    n, c, h, w = x.shape
    y = np.zeros(x.shape)
    for b, ch, i, j in itertools.product(range(n), range(c), range(h), range(w)):
        lo = max(0, ch - math.floor((size - 1) / 2))
        hi = min(c - 1, ch + math.ceil((size - 1) / 2))
        sq = sum(float(x[b, q, i, j]) ** 2 for q in range(lo, hi + 1))
        y[b, ch, i, j] = float(x[b, ch, i, j]) / (k + alpha / size * sq) ** beta
    return y


@pytest.mark.parametrize("c, size", [(6, 1), (6, 2), (6, 3), (6, 4), (5, 5), (3, 5), (4, 8)])
def test_lrn_channel_edges(c, size):
    x = f32(2, c, 2, 3) * 4
    attrs = dict(size=size, alpha=0.5, beta=0.75, k=1.0)
    np.testing.assert_allclose(run("lrn", [x], x.shape, **attrs), lrn_oracle(x, **attrs),
                               rtol=1e-5)


def test_lrn_defaults():
    x = f32(1, 7, 2, 2) * 10
    np.testing.assert_allclose(run("lrn", [x], x.shape), lrn_oracle(x, 5, 0.0001, 0.75, 2.0),
                               rtol=1e-5)


def reduce_oracle(x, axis, fn):
    axis %= x.ndim
    shape = x.shape[:axis] + x.shape[axis + 1:]
    out = np.zeros(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = fn([x[idx[:axis] + (i,) + idx[axis:]] for i in range(x.shape[axis])])
    return out


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_reductions(axis):
    x = f32(2, 3, 4)
    shape = reduce_oracle(x, axis, len).shape
    want_sum = reduce_oracle(x, axis, lambda v: sum(float(e) for e in v)).astype(np.float64)
    np.testing.assert_allclose(run("reduce_sum", [x], shape, axis=axis), want_sum, rtol=1e-5, atol=1e-6)
    want_max = reduce_oracle(x, axis, max).astype(np.float32)
    np.testing.assert_array_equal(run("reduce_max", [x], shape, axis=axis), want_max)
    for op, pick in (("argmax", max), ("argmin", min)):
        want = reduce_oracle(x, axis, lambda v: v.index(pick(v))).astype(np.int32)
        np.testing.assert_array_equal(run(op, [x], shape, "i32", axis=axis), want)


def test_reduce_i32():
    x = np.array([[2**31 - 1, 1, 5], [-3, 4, -7]], np.int32)
    assert run("reduce_sum", [x], (2,), "i32", axis=-1).tolist() == [-2**31 + 5, -6]
    assert run("reduce_max", [x], (3,), "i32", axis=0).tolist() == [2**31 - 1, 4, 5]


def test_argmax_argmin_ties_pick_first():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, 5, -1]], np.float32)
    assert run("argmax", [x], (3,), "i32", axis=1).tolist() == [1, 0, 2]
    assert run("argmin", [x], (3,), "i32", axis=-1).tolist() == [3, 0, 1]
    assert run("argmax", [x], (4,), "i32", axis=0).tolist() == [1, 0, 2, 1]
    xi = np.array([[4, 1, 1], [7, 7, 9]], np.int32)
    assert run("argmin", [xi], (2,), "i32", axis=1).tolist() == [1, 0]


def test_eucdist():
    x, c = f32(5, 3), f32(4, 3)
    want = np.array([[sum((float(x[m, k]) - float(c[n, k])) ** 2 for k in range(3))
                      for n in range(4)] for m in range(5)])
    np.testing.assert_allclose(run("eucdist", [x, c], (5, 4)), want, rtol=1e-5, atol=1e-6)


def test_eucdist_direct_not_expanded():
    # the X^2 + C^2 - 2XC expansion loses everything here in f32; the direct difference is exact
    x = np.array([[3000.0, 3000.0], [3000.5, 2999.75]], np.float32)
    c = np.array([[3000.0, 3000.5]], np.float32)
    assert run("eucdist", [x, c], (2, 1)).tolist() == [[0.25], [0.8125]]


def test_sort():
    x = np.array([[3, -1, 2, -1, 0], [5, 4, 3, 2, 1]], np.float32)
    assert run("sort", [x], x.shape).tolist() == [[-1, -1, 0, 2, 3], [1, 2, 3, 4, 5]]
    xi = RNG.integers(-50, 50, (3, 2, 7)).astype(np.int32)
    want = np.array([[sorted(row) for row in plane] for plane in xi.tolist()], np.int32)
    np.testing.assert_array_equal(run("sort", [xi], xi.shape, "i32"), want)


def argsort_oracle(x):
    """Stable ascending order of every last-axis run, NaN last, by Python's (stable) sorted."""
    y = np.zeros(x.shape, np.int64)
    for lead in np.ndindex(*x.shape[:-1]):
        row = [x[lead + (k,)].item() for k in range(x.shape[-1])]
        key = [(True, 0) if math.isnan(v) else (False, v) for v in row]
        order = sorted(range(len(row)), key=key.__getitem__)
        for j, k in enumerate(order):
            y[lead + (j,)] = k
    return y


def test_argsort_ties_are_stable():
    x = np.array([[3, -1, 2, -1, 0, 3], [5, 5, 5, 5, 5, 5]], np.float32)
    assert run("argsort", [x], x.shape, "i32").tolist() == [[1, 3, 4, 2, 0, 5], [0, 1, 2, 3, 4, 5]]
    xi = np.array([2, 1, 2, 1, 0], np.int32)
    assert run("argsort", [xi], xi.shape, "i32").tolist() == [4, 1, 3, 0, 2]
    xn = np.array([np.nan, 1.0, -0.0, np.nan, 0.0, -1.0], np.float32)   # -0.0 == 0.0: a tie
    assert run("argsort", [xn], xn.shape, "i32").tolist() == [5, 2, 4, 1, 0, 3]


@pytest.mark.parametrize("shape", [(1,), (9,), (4, 7), (2, 3, 13), (3, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_argsort(shape, dtype):
    x = RNG.integers(-3, 4, shape).astype(dtype)                 # few values: many ties
    np.testing.assert_array_equal(run("argsort", [x], shape, "i32"), argsort_oracle(x))
    if dtype == np.float32:
        x = f32(*shape)
        x[RNG.random(shape) < 0.2] = np.nan
        np.testing.assert_array_equal(run("argsort", [x], shape, "i32"), argsort_oracle(x))


def gather_oracle(x, idx):
    y = np.zeros(idx.shape, x.dtype)
    for pos in np.ndindex(*idx.shape):
        y[pos] = x[pos[:-1] + (int(idx[pos]),)]
    return y


@pytest.mark.parametrize("xs, m", [((10,), 4), ((5,), 12), ((3, 6), 6), ((3, 6), 2),
                                   ((2, 3, 5), 7), ((2, 1, 1), 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_gather(xs, m, dtype):
    x = (f32(*xs) if dtype == np.float32 else RNG.integers(-99, 99, xs)).astype(dtype)
    idx = RNG.integers(0, xs[-1], xs[:-1] + (m,)).astype(np.int32)   # repeats, any order
    got = run("gather", [x, idx], idx.shape, DT[np.dtype(dtype)])
    np.testing.assert_array_equal(got, gather_oracle(x, idx))


def test_gather_of_argsort_is_sort():
    x = RNG.integers(-5, 5, (3, 4, 9)).astype(np.int32)
    order = run("argsort", [x], x.shape, "i32")
    np.testing.assert_array_equal(run("gather", [x, order], x.shape, "i32"),
                                  run("sort", [x], x.shape, "i32"))


@pytest.mark.parametrize("bad", [10, 12, -1, 2**31 - 1, -2**31])
def test_gather_index_out_of_range(bad):
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    idx = np.array([[0, 9, 3], [bad, 1, 11]], np.int32)       # `bad` comes first in row-major order
    with pytest.raises(UserError) as e:
        run("gather", [x, idx], idx.shape)
    assert e.value.message == f"gather: index {bad} is out of range for a last axis of length 10"
    assert "gather d, s0, s1" in str(e.value)                 # located at the instruction
    with pytest.raises(UserError, match="index 12 is out of range for a last axis of length 10"):
        SEMANTICS["gather"]([x[:, :], np.array([[1, 12], [2, 3]], np.int32)], {},
                            TensorType("f32", (2, 2)))


def test_count():
    xi = np.array([[1, 2, 2, 3], [2, 2, 2, 2], [0, 0, 0, 1]], np.int32)
    assert run("count", [xi], (3,), "i32", value=2).tolist() == [2, 4, 0]
    xf = np.array([[0.5, 1.0, 0.5], [1.0, 1.0, 1.0]], np.float32)
    assert run("count", [xf], (2,), "i32", value=0.5).tolist() == [2, 0]
    assert run("count", [xf], (2,), "i32", value=1).tolist() == [1, 3]


# ---------------------------------------------------------------- data movement

def test_transpose_copy_reshape():
    x = f32(2, 3, 4)
    got = run("transpose", [x], (4, 2, 3), perm=(2, 0, 1))
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert got[k, i, j] == x[i, j, k]
    np.testing.assert_array_equal(run("copy", [x], x.shape), x)
    flat = [float(v) for v in x.flatten()]
    r = run("reshape", [x], (6, 4))
    assert [float(r[i // 4, i % 4]) for i in range(24)] == flat
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert run("reshape", [xi], (12,), "i32").tolist() == list(range(12))


def test_slice():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = run("slice", [x], (2, 3, 2), axis=-1, start=1)
    for i, j, k in itertools.product(range(2), range(3), range(2)):
        assert got[i, j, k] == x[i, j, k + 1]
    got = run("slice", [x], (2, 2, 4), axis=1)                         # start defaults to 0
    assert got.tolist() == x[:, :2].tolist()
    got = run("slice", [x], (1, 3, 4), axis=0, start=1)
    assert got.tolist() == x[1:].tolist()


def test_concat():
    a, b, c = f32(2, 1, 3), f32(2, 2, 3), f32(2, 3, 3)
    got = run("concat", [a, b, c], (2, 6, 3), axis=1)
    for i, k in itertools.product(range(2), range(3)):
        column = [a[i, 0, k], *b[i, :, k], *c[i, :, k]]
        assert got[i, :, k].tolist() == [float(v) for v in column]
    xi = np.array([[1, 2]], np.int32)
    assert run("concat", [xi, xi], (1, 4), "i32", axis=-1).tolist() == [[1, 2, 1, 2]]
    assert run("concat", [xi], (1, 2), "i32", axis=0).tolist() == [[1, 2]]


# ---------------------------------------------------------------- programs

def decl(name, dtype, shape, role=None):
    return TensorDecl(name, TensorType(dtype, tuple(shape)), role)


def mlp():
    return Program(
        (decl("x", "f32", (4, 3), "input"), decl("w", "f32", (3, 2), "param"),
         decl("b", "f32", (2,), "param"), decl("h", "f32", (4, 2)),
         decl("y", "f32", (4, 2), "output"), decl("k", "i32", (4,), "output")),
        (Instruction("matmul", ("h", "x", "w")), Instruction("add", ("h", "h", "b")),
         Instruction("relu", ("h", "h")), Instruction("copy", ("y", "h")),
         Instruction("argmax", ("k", "h"), (("axis", 1),))),
        file="mlp.fr")


def test_run_reference_in_place_and_outputs_only():
    p = mlp()
    feeds = generate_feeds(p, seed=3)
    kept = {k: v.copy() for k, v in feeds.items()}
    out = run_reference(p, feeds)
    assert set(out) == {"y", "k"}
    want = np.maximum(feeds["x"].astype(np.float64) @ feeds["w"] + feeds["b"], 0)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    assert out["y"].dtype == np.float32 and out["k"].dtype == np.int32
    assert out["k"].tolist() == [int(np.argmax(r)) for r in out["y"]]
    for k in feeds:
        np.testing.assert_array_equal(feeds[k], kept[k])


def test_generate_feeds_deterministic_per_name():
    p = mlp()
    a, b = generate_feeds(p, 7), generate_feeds(p, 7)
    assert set(a) == {"x", "w", "b"}
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
        assert a[k].dtype == np.float32 and a[k].shape == p.tensor(k).type.shape
    assert not np.array_equal(a["x"], generate_feeds(p, 8)["x"])
    assert not np.array_equal(a["w"][:2], a["x"][:2, :2])
    bigger = Program(p.tensors[:1] + (decl("z", "i32", (50,), "input"),) + p.tensors[1:],
                     p.instructions)
    c = generate_feeds(bigger, 7)
    for k in a:
        np.testing.assert_array_equal(a[k], c[k])
    assert c["z"].dtype == np.int32 and c["z"].min() >= 0 and c["z"].max() < 10


# ---------------------------------------------------------------- loading and saving data

def fails(p, specs=(), npz=None, match=""):
    with pytest.raises(UserError, match=match) as e:
        load_feeds(p, list(specs), npz, 0)
    return e.value


def test_load_feeds_overrides(tmp_path):
    p = mlp()
    x = f32(4, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "all.npz", x=np.zeros((4, 3), np.float32), b=np.ones(2, np.float64))
    feeds = load_feeds(p, [f"x={tmp_path / 'x.npy'}"], str(tmp_path / "all.npz"), 0)
    np.testing.assert_array_equal(feeds["x"], x)          # --input wins over --inputs
    assert feeds["b"].dtype == np.float32 and feeds["b"].tolist() == [1, 1]
    np.testing.assert_array_equal(feeds["w"], generate_feeds(p, 0)["w"])


def test_load_feeds_dtype_rules(tmp_path):
    p = Program((decl("x", "f32", (2,), "input"), decl("n", "i32", (2,), "input")), (),)
    np.save(tmp_path / "f64ok.npy", np.array([0.5, -3.0]))
    np.save(tmp_path / "f64bad.npy", np.array([0.1, 1.0]))
    np.save(tmp_path / "i64ok.npy", np.array([3, -4], np.int64))
    np.save(tmp_path / "i64bad.npy", np.array([2**40, 1], np.int64))
    np.save(tmp_path / "i32.npy", np.array([1, 2], np.int32))
    feeds = load_feeds(p, [f"x={tmp_path / 'f64ok.npy'}", f"n={tmp_path / 'i64ok.npy'}"], None, 0)
    assert feeds["x"].dtype == np.float32 and feeds["x"].tolist() == [0.5, -3.0]
    assert feeds["n"].dtype == np.int32 and feeds["n"].tolist() == [3, -4]
    e = fails(p, [f"x={tmp_path / 'f64bad.npy'}"], match="float64")
    assert "float32" in e.message and e.where == f"--input x={tmp_path / 'f64bad.npy'}"
    fails(p, [f"n={tmp_path / 'i64bad.npy'}"], match="int64")
    e = fails(p, [f"x={tmp_path / 'i32.npy'}"], match="int32")
    assert "f32" in e.message
    fails(p, [f"n={tmp_path / 'f64ok.npy'}"], match="float64")


def test_load_feeds_errors(tmp_path):
    p = mlp()
    good = tmp_path / "x.npy"
    np.save(good, f32(4, 3))
    e = fails(p, [f"x={tmp_path / 'nope.npy'}"], match="no such file")
    assert e.where == f"--input x={tmp_path / 'nope.npy'}"
    (tmp_path / "text.npy").write_text("hello")
    fails(p, [f"x={tmp_path / 'text.npy'}"], match="cannot read")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    fails(p, [f"x={tmp_path / 'obj.npy'}"], match="cannot read")
    e = fails(p, [f"xx={good}"], match="no tensor named 'xx'")
    assert e.hint == "did you mean 'x'?"
    e = fails(p, [f"qqq={good}"], match="qqq")
    assert "x" in e.hint and "w" in e.hint
    fails(p, [f"y={good}"], match="'y' is an output tensor")
    fails(p, [f"h={good}"], match="'h' is an internal tensor")
    np.save(tmp_path / "small.npy", np.zeros((3, 4), np.float32))
    e = fails(p, [f"x={tmp_path / 'small.npy'}"], match="shape")
    assert e.message == "x expects f32[4, 3], file has shape (3, 4)"
    e = fails(p, [str(good)], match="NAME=PATH")
    assert e.where == f"--input {good}"
    fails(p, [f"={good}"], match="NAME=PATH")
    np.savez(tmp_path / "a.npz", x=f32(4, 3))
    fails(p, [f"x={tmp_path / 'a.npz'}"], match="archive")


def test_load_feeds_npz_errors(tmp_path):
    p = mlp()
    where = f"--inputs {tmp_path / 'x.npy'}"
    np.save(tmp_path / "x.npy", f32(4, 3))
    assert fails(p, npz=str(tmp_path / "x.npy"), match="not an .npz").where == where
    fails(p, npz=str(tmp_path / "missing.npz"), match="no such file")
    np.savez(tmp_path / "bad.npz", ww=f32(3, 2))
    e = fails(p, npz=str(tmp_path / "bad.npz"), match="'ww'")
    assert e.hint == "did you mean 'w'?" and e.where == f"--inputs {tmp_path / 'bad.npz'}"
    np.savez(tmp_path / "shape.npz", w=f32(2, 2))
    fails(p, npz=str(tmp_path / "shape.npz"), match=r"w expects f32\[3, 2\]")
    np.savez(tmp_path / "obj.npz", w=np.array([None, 1], dtype=object))
    fails(p, npz=str(tmp_path / "obj.npz"), match="cannot read")


def test_save_outputs(tmp_path):
    outs = {"y": f32(2, 2), "k": np.array([1, 2], np.int32)}
    save_outputs(outs, tmp_path / "out" / "deep")
    for name, v in outs.items():
        got = np.load(tmp_path / "out" / "deep" / f"{name}.npy")
        np.testing.assert_array_equal(got, v)
        assert got.dtype == v.dtype
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="file") as e:
        save_outputs(outs, tmp_path / "file")
    assert str(tmp_path / "file") in e.value.message


def test_asymmetric_padding_matches_a_symmetric_run_cropped():
    """pad=(top, left, bottom, right) pads each side by its own amount (the compiler's pieces)."""
    from isa.reference import SEMANTICS
    from isa.program import TensorType
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    full = SEMANTICS["conv2d"]([x, w], {"stride": 1, "pad": 1}, TensorType("f32", (1, 3, 7, 6)))
    # rows 0..3 of the output need input rows 0..4 with one padded row on top and none below
    top = SEMANTICS["conv2d"]([x[:, :, 0:5], w], {"stride": 1, "pad": (1, 1, 0, 1)},
                              TensorType("f32", (1, 3, 4, 6)))
    np.testing.assert_allclose(top, full[:, :, 0:4], rtol=1e-5, atol=1e-5)
    for op in ("maxpool", "avgpool"):
        attrs = {"kernel": 3, "stride": 2, "pad": 1}
        whole = SEMANTICS[op]([x], attrs, TensorType("f32", (1, 2, 4, 3)))
        # output rows 2..3 read input rows 3..6 (window 3, stride 2, pad 1): no top pad, one below
        part = SEMANTICS[op]([x[:, :, 3:7]], dict(attrs, pad=(0, 1, 1, 1)),
                             TensorType("f32", (1, 2, 2, 3)))
        np.testing.assert_allclose(part, whole[:, :, 2:4], rtol=1e-6)


def test_mergepos_orders_two_sorted_runs_stably():
    """An independent two-pointer merge: A's element first when equal."""
    from isa.reference import SEMANTICS
    from isa.program import TensorType
    rng = np.random.default_rng(5)
    a = np.sort(rng.integers(0, 6, (4, 7)).astype(np.float32), axis=1)
    b = np.sort(rng.integers(0, 6, (4, 5)).astype(np.float32), axis=1)
    got = SEMANTICS["mergepos"]([a, b], {}, TensorType("i32", (4, 12)))
    for r in range(4):
        i = j = 0
        want = []
        while i < 7 or j < 5:
            if j == 5 or (i < 7 and a[r, i] <= b[r, j]):
                want.append(i)
                i += 1
            else:
                want.append(7 + j)
                j += 1
        assert got[r].tolist() == want
