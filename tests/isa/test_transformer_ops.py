"""The transformer instructions: the reference against oracles written as explicit loops over
Python's math module, and every kind of bad use refused with one located message."""
from __future__ import annotations

import itertools
import math
import textwrap

import ml_dtypes
import numpy as np
import pytest

from isa import UserError, parse_program
from isa.opcodes import OPCODES
from isa.program import Instruction, TensorType
from isa.reference import NP_DTYPES, SEMANTICS, dtype_name, execute_instruction

RNG = np.random.default_rng(2024)


def run(opcode, inputs, out_type: TensorType, **attrs):
    """One checked instruction through execute_instruction; sources are never modified."""
    names = [f"s{i}" for i in range(len(inputs))]
    types = {n: TensorType(dtype_name(a.dtype), a.shape) for n, a in zip(names, inputs)}
    types["d"] = out_type
    spec = OPCODES[opcode]
    spec.rule([out_type], [types[n] for n in names], spec.full_attrs(attrs))
    env = dict(zip(names, inputs))
    before = [a.copy() for a in inputs]
    execute_instruction(Instruction(opcode, ("d", *names), tuple(attrs.items())), env, types)
    for a, b in zip(inputs, before):
        np.testing.assert_array_equal(a, b)
    out = env["d"]
    assert out.shape == out_type.shape and out.dtype == NP_DTYPES[out_type.dtype]
    return out


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def elementwise(fn, *arrays, shape):
    """fn applied element by element after numpy-style broadcasting, written out index by index."""
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        args = []
        for a in arrays:
            sub = idx[len(idx) - a.ndim:]
            args.append(a[tuple(0 if n == 1 else i for i, n in zip(sub, a.shape))])
        out[idx] = fn(*args)
    return out


# ---------------------------------------------------------------- batched matmul

@pytest.mark.parametrize("a_shape, b_shape, c_shape", [
    ((3, 4), (4, 5), (3, 5)),
    ((2, 3, 4), (2, 4, 5), (2, 3, 5)),
    ((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2)),     # A's batch 1 and B's missing axis broadcast
    ((3, 4), (6, 4, 2), (6, 3, 2)),              # a plain matrix against a batch
])
def test_batched_matmul(a_shape, b_shape, c_shape):
    a, b = f32(*a_shape), f32(*b_shape)
    want = np.zeros(c_shape)
    batch = c_shape[:-2]
    for idx in itertools.product(*map(range, batch)):
        ia = tuple(0 if n == 1 else i for i, n in zip(idx[len(idx) - (a.ndim - 2):], a.shape[:-2]))
        ib = tuple(0 if n == 1 else i for i, n in zip(idx[len(idx) - (b.ndim - 2):], b.shape[:-2]))
        for m, n in itertools.product(range(c_shape[-2]), range(c_shape[-1])):
            want[idx + (m, n)] = sum(float(a[ia + (m, k)]) * float(b[ib + (k, n)])
                                     for k in range(a_shape[-1]))
    got = run("matmul", [a, b], TensorType("f32", c_shape))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batched_matmul_ops_and_i8():
    spec = OPCODES["matmul"]
    ts = [TensorType("f32", (7, 3, 5)), TensorType("f32", (3, 4)), TensorType("f32", (4, 5))]
    assert spec.ops(ts[:1], ts[1:], {}) == 2 * 7 * 3 * 5 * 4
    a = RNG.integers(-128, 128, (2, 3, 64)).astype(np.int8)
    b = RNG.integers(-128, 128, (64, 2)).astype(np.int8)
    got = run("matmul", [a, b], TensorType("i32", (2, 3, 2)))
    np.testing.assert_array_equal(got, np.einsum("bmk,kn->bmn", a.astype(np.int64), b.astype(np.int64)))


# ---------------------------------------------------------------- element-wise math

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 4.0, 1e-30, 3e38, np.inf, -np.inf, np.nan], np.float32)


def _guarded(fn):
    def apply(x):
        try:
            return fn(x)
        except (ValueError, ZeroDivisionError):
            return math.nan
    return apply


def _log(x):
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 or math.isnan(x) else math.nan


def _rsqrt(x):
    if x == 0:
        return math.copysign(math.inf, x)
    return 1.0 / math.sqrt(x) if x > 0 else (math.nan if x < 0 or math.isnan(x) else 0.0)


ORACLES = {"sqrt": _guarded(math.sqrt), "rsqrt": _rsqrt, "erf": math.erf, "log": _log,
           "abs": abs, "neg": lambda x: -x}


@pytest.mark.parametrize("op", list(ORACLES))
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_unary_math(op, dtype):
    with np.errstate(over="ignore"):                   # 3e38 is +inf in f16
        x = np.concatenate([SPECIAL, f32(29) * 3]).astype(NP_DTYPES[dtype])
    want = np.array([ORACLES[op](float(v)) for v in x], np.float64)
    with np.errstate(all="ignore"):
        want = want.astype(NP_DTYPES[dtype])           # rounded once from the exact value
    got = run(op, [x], TensorType(dtype, x.shape))
    if op in ("abs", "neg") or dtype != "f32":
        np.testing.assert_array_equal(got, want)       # exact, or one rounding of float64
    else:
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)
    assert np.array_equal(np.signbit(got[:2]), np.signbit(want[:2]))   # -0.0 kept apart


def test_abs_and_neg_of_i32_wrap_around():
    x = np.array([-2**31, -5, 0, 7, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(run("abs", [x], TensorType("i32", (5,))),
                                  [-2**31, 5, 0, 7, 2**31 - 1])
    np.testing.assert_array_equal(run("neg", [x], TensorType("i32", (5,))),
                                  [-2**31, 5, 0, -7, -(2**31 - 1)])


def test_pow_broadcasts_and_rounds_once():
    x = np.abs(f32(3, 4)) * 3
    y = np.array([[0.5, 2.0, -1.0, 3.3]], np.float32)
    want = elementwise(lambda a, b: float(a) ** float(b), x, y, shape=(3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run("pow", [x, y], TensorType("f32", (3, 4))), want)
    neg = np.array([-8.0, -8.0, 0.0], np.float32)
    got = run("pow", [neg, np.array([3.0, 0.5, -1.0], np.float32)], TensorType("f32", (3,)))
    assert got[0] == -512.0 and np.isnan(got[1]) and got[2] == np.inf


@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan_and_broadcast(op):
    x = np.array([[1.0, np.nan, -0.0, 5.0], [2.0, 3.0, np.inf, -np.inf]], np.float32)
    y = np.array([2.0, 1.0, 0.0, np.nan], np.float32)

    def oracle(a, b):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.nan
        if a == b:
            return a                     # ties keep the first operand (-0.0 against 0.0)
        return min(a, b) if op == "min" else max(a, b)
    want = elementwise(oracle, x, y, shape=(2, 4)).astype(np.float32)
    got = run(op, [x, y], TensorType("f32", (2, 4)))
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[0, 2])
    i = np.array([-2**31, 3, 9], np.int32)
    j = np.array([0, 3, -1], np.int32)
    pick = min if op == "min" else max
    np.testing.assert_array_equal(run(op, [i, j], TensorType("i32", (3,))),
                                  [pick(a, b) for a, b in zip(i.tolist(), j.tolist())])
    q = np.array([-128, 5, 127], np.int8)
    np.testing.assert_array_equal(run(op, [q, q[::-1].copy()], TensorType("i8", (3,))),
                                  [pick(a, b) for a, b in zip(q.tolist(), q[::-1].tolist())])


def test_where_selects_by_nonzero_masks_of_any_type():
    a, b = f32(2, 3), f32(3)
    for c in (np.array([[1], [0]], np.int32), np.array([[0.0, np.nan, -2.0]], np.float32),
              np.array([[0, 1, 0], [3, 0, 0]], np.int8)):
        want = elementwise(lambda m, p, q: p if m != 0 else q, c, a, b, shape=(2, 3))
        got = run("where", [c, a, b], TensorType("f32", (2, 3)))
        np.testing.assert_array_equal(got, want.astype(np.float32))
    ints = run("where", [np.array([0, 5], np.int32), np.array([1, 2], np.int32),
                         np.array([-1, -2], np.int32)], TensorType("i32", (2,)))
    np.testing.assert_array_equal(ints, [-1, 2])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_reduce_mean(dtype):
    x = f32(3, 7, 2).astype(NP_DTYPES[dtype])
    for axis in (0, 1, -1):
        ax = axis % 3
        shape = tuple(n for i, n in enumerate(x.shape) if i != ax)
        want = np.zeros(shape)
        for idx in np.ndindex(*shape):
            cells = [float(x[idx[:ax] + (j,) + idx[ax:]]) for j in range(x.shape[ax])]
            want[idx] = math.fsum(cells) / len(cells)
        got = run("reduce_mean", [x], TensorType(dtype, shape), axis=axis)
        np.testing.assert_array_equal(got, want.astype(NP_DTYPES[dtype]))
    # count divides by another length: the mean over 10 positions of which these 7 are present
    got = run("reduce_mean", [x], TensorType(dtype, (3, 2)), axis=1, count=10)
    want = np.array([[math.fsum(float(x[i, j, c]) for j in range(7)) / 10 for c in range(2)]
                     for i in range(3)])
    np.testing.assert_array_equal(got, want.astype(NP_DTYPES[dtype]))


def test_reduce_mean_count_is_bound_to_the_axis_length():
    spec = OPCODES["reduce_mean"]
    ts = [TensorType("f32", (4,)), TensorType("f32", (4, 9))]
    assert spec.bind(ts[:1], ts[1:], spec.full_attrs({"axis": 1}))["count"] == 9
    assert spec.bind(ts[:1], ts[1:], spec.full_attrs({"axis": 1, "count": 3}))["count"] == 3


@pytest.mark.parametrize("dtype, low", [("f32", -3.4028234663852886e38), ("f16", -65504.0),
                                        ("bf16", -3.3895313892515355e38)])
@pytest.mark.parametrize("window", [0, 1, 3])
def test_causal_mask(dtype, low, window):
    qp = np.array([4, 5, 6, 2], np.int32)            # a decode step: queries after 4 cached keys
    kp = np.array([0, 1, 2, 3, 4, 5, 6, -2147483648], np.int32)
    want = np.empty((4, 8))
    for i, j in itertools.product(range(4), range(8)):
        d = int(qp[i]) - int(kp[j])
        want[i, j] = 0.0 if d >= 0 and (window == 0 or d < window) else low
    got = run("causal_mask", [qp, kp], TensorType(dtype, (4, 8)), window=window)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    assert np.isfinite(got.astype(np.float64)).all()


@pytest.mark.parametrize("dtype", ["f32", "i32", "f16", "bf16", "i8"])
def test_fill(dtype):
    got = run("fill", [], TensorType(dtype, (2, 3, 4)), value=-3, step=2, axis=1)
    want = np.array([[[-3 + 2 * j for _ in range(4)] for j in range(3)] for _ in range(2)])
    np.testing.assert_array_equal(got, want.astype(NP_DTYPES[dtype]))
    frac = run("fill", [], TensorType("f32", (3,)), value=0.1, step=0.25)
    np.testing.assert_array_equal(frac, np.array([0.1, 0.35, 0.6], np.float64).astype(np.float32))
    assert run("fill", [], TensorType("bf16", ()), value=0.1) == np.float64(0.1).astype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------- located errors

HEAD = """\
tensor x  : f32[4, 8]  input
tensor n  : i32[4, 8]  input
tensor y  : f32[4, 8]  output
"""


def message(body: str) -> str:
    with pytest.raises(UserError) as info:
        parse_program(HEAD + body + "copy y, x\n", "bad.fasm")
    return info.value.format()


ERRORS = {
    "sqrt of i32": ("tensor m : i32[4, 8]\nsqrt m, n\n", """
        bad.fasm:5:1: error: sqrt operands must be f32, f16 or bf16, found i32[4, 8]
            sqrt m, n
            ^"""),
    "pow of mixed types": ("tensor z : f32[4, 8]\npow z, x, n\n", """
        bad.fasm:5:1: error: pow: operands must share one dtype, found f32[4, 8], f32[4, 8], i32[4, 8]
            pow z, x, n
            ^"""),
    "min that does not broadcast": ("tensor b : f32[3]\ntensor z : f32[4, 8]\nfill b\nmin z, x, b\n", """
        bad.fasm:7:11: error: min operands do not broadcast: f32[4, 8] and f32[3] (trailing dimensions must be equal or 1)
            min z, x, b
                      ^"""),
    "abs of i8": ("tensor q : i8[4]\ntensor r : i8[4]\nfill q\nabs r, q\n", """
        bad.fasm:7:1: error: abs operands must be f32, i32, f16 or bf16, found i8[4]
            abs r, q
            ^"""),
    "where that does not broadcast": ("tensor c : i32[5]\nfill c\nwhere y, c, x, x\n", """
        bad.fasm:6:10: error: where operands do not broadcast: mask i32[5], values f32[4, 8] and f32[4, 8] (trailing dimensions must be equal or 1)
            where y, c, x, x
                     ^"""),
    "where with values of two types": ("where y, x, x, n\n", """
        bad.fasm:4:1: error: where values and destination must share one dtype, found f32[4, 8], f32[4, 8], i32[4, 8]
            where y, x, x, n
            ^"""),
    "reduce_mean of i32": ("tensor m : i32[4]\nreduce_mean m, n, axis=1\n", """
        bad.fasm:5:1: error: reduce_mean source must be f32, f16 or bf16, found i32[4, 8]
            reduce_mean m, n, axis=1
            ^"""),
    "reduce_mean negative count": ("tensor m : f32[4]\nreduce_mean m, x, axis=1, count=-2\n", """
        bad.fasm:5:27: error: reduce_mean: count=-2 must not be negative
            reduce_mean m, x, axis=1, count=-2
                                      ^"""),
    "reduce_mean count not an integer": ("tensor m : f32[4]\nreduce_mean m, x, axis=1, count=2.5\n", """
        bad.fasm:5:27: error: reduce_mean attribute 'count' must be an integer, got 2.5
            reduce_mean m, x, axis=1, count=2.5
                                      ^"""),
    "matmul batch axes": ("tensor a : f32[2, 4, 8] input\ntensor b : f32[3, 8, 5] input\n"
                          "tensor c : f32[3, 4, 5]\nmatmul c, a, b\n", """
        bad.fasm:7:14: error: matmul batch axes do not broadcast: A f32[2, 4, 8] and B f32[3, 8, 5] (leading dimensions must be equal or 1)
            matmul c, a, b
                         ^"""),
    "matmul batched inner sizes": ("tensor a : f32[2, 4, 8] input\ntensor c : f32[2, 4, 8]\n"
                                   "matmul c, a, a\n", """
        bad.fasm:6:11: error: matmul needs A[..., M,K] and B[..., K,N] with equal K, found A f32[2, 4, 8] and B f32[2, 4, 8]
            matmul c, a, a
                      ^"""),
    "matmul batched destination": ("tensor a : f32[2, 4, 8] input\ntensor b : f32[8, 3] input\n"
                                   "tensor c : f32[4, 3]\nmatmul c, a, b\n", """
        bad.fasm:7:8: error: matmul: destination is f32[4, 3] but A f32[2, 4, 8] times B f32[8, 3] gives [2, 4, 3]
            matmul c, a, b
                   ^"""),
    "matmul of a vector": ("tensor a : f32[8] input\ntensor c : f32[4]\nmatmul c, x, a\n", """
        bad.fasm:6:1: error: matmul B must have rank at least 2 ([..., rows, columns]), found f32[8]
            matmul c, x, a
            ^"""),
    "causal_mask positions": ("tensor p : f32[4] input\ntensor m : f32[4, 4]\ncausal_mask m, p, p\n", """
        bad.fasm:6:16: error: causal_mask query positions QP must be i32 of rank 1, found f32[4]
            causal_mask m, p, p
                           ^"""),
    "causal_mask destination type": ("tensor p : i32[4] input\ntensor m : i32[4, 4]\ncausal_mask m, p, p\n", """
        bad.fasm:6:1: error: causal_mask destination must be f32, f16 or bf16, found i32[4, 4]
            causal_mask m, p, p
            ^"""),
    "causal_mask shape": ("tensor p : i32[4] input\ntensor m : f32[4, 5]\ncausal_mask m, p, p\n", """
        bad.fasm:6:13: error: causal_mask: destination is f32[4, 5] but causal_mask of query positions i32[4] and key positions i32[4] gives [4, 4]
            causal_mask m, p, p
                        ^"""),
    "causal_mask window": ("tensor p : i32[4] input\ntensor m : f32[4, 4]\ncausal_mask m, p, p, window=-1\n", """
        bad.fasm:6:22: error: causal_mask: window=-1 must not be negative
            causal_mask m, p, p, window=-1
                                 ^"""),
    "fill with a source": ("fill y, x\n", """
        bad.fasm:4:1: error: fill takes 1 operand (no sources), got 2
            fill y, x
            ^"""),
    "fill of i32 with a fraction": ("tensor p : i32[4]\nfill p, value=0.5\n", """
        bad.fasm:5:9: error: fill of i32[4]: value=0.5 is not an integer
            fill p, value=0.5
                    ^"""),
    "fill of i8 past its range": ("tensor p : i8[200]\nfill p, step=1\n", """
        bad.fasm:5:9: error: fill of i8[200] reaches 199, outside the range of i8 (-128 .. 127)
            fill p, step=1
                    ^"""),
    "fill axis": ("tensor p : f32[4]\nfill p, axis=1\n", """
        bad.fasm:5:9: error: fill: axis=1 is out of range for rank 1 (valid: -1..0)
            fill p, axis=1
                    ^"""),
    "fill of a tuple": ("tensor p : f32[4]\nfill p, value=(1, 2)\n", """
        bad.fasm:5:9: error: fill attribute 'value' must be a number, got (1, 2)
            fill p, value=(1, 2)
                    ^"""),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_located_error(name):
    body, want = ERRORS[name]
    assert message(body) == textwrap.dedent(want).strip("\n")


def test_size_symbols_as_body_attributes():
    """A body attribute may name a size symbol, never one a split rule cuts."""
    ok = ('extension scaled(y: f32[R, D] <- x: f32[R, D])\n  split R\n  tensor c : f32[1]\n'
          '  fill c, value=D\n  mul y, x, c\nend\n'
          'tensor a : f32[3, 5] input\ntensor b : f32[3, 5] output\nscaled b, a\n')
    from isa.reference import generate_feeds, run_reference
    p = parse_program(ok, "ok.fasm")
    f = generate_feeds(p, 0)
    np.testing.assert_array_equal(run_reference(p, f)["b"], f["a"] * np.float32(5))
    with pytest.raises(UserError) as info:
        parse_program(ok.replace("value=D", "value=R"), "cut.fasm")
    assert info.value.format().startswith(
        "cut.fasm:4:11: error: attribute value=R names size 'R', which a split rule cuts: each "
        "piece would see its own size")
    with pytest.raises(UserError) as info:
        parse_program(ok.replace("<- x: f32[R, D])", "<- x: f32[R, D]) D=2"), "clash.fasm")
    assert info.value.format().startswith(
        "clash.fasm:1:11: error: attribute 'D' of extension 'scaled' has the name of a size symbol")
