"""16- and 8-bit data (f16, bf16, i8) and `cast`, end to end: the checker's dtype rules, the
reference and the simulated leaves against an oracle written here, data files, and bytes.

The oracle is independent of isa/reference.py and of numpy's float16 / ml_dtypes casts: it
accumulates in float64 (int64 for i8) with plain loops and rounds with `round_to`, which rounds a
float64 to p significant bits by frexp/rint (round half to even) and scales back.

Tolerance. With u the unit roundoff of the destination type (2^-11 for f16, 2^-8 for bf16) and S
the sum of the magnitudes of the terms an element adds (sum_k |a_k b_k| for matmul; |y| for an
element-wise result):
- the reference rounds an exact (or float64) value once, so it is within u*S of the oracle's
  rounded value's own rounding, i.e. equal to it up to one rounding: |ref - oracle| <= u*S;
- simulated leaves accumulate MACs in float32 and a decomposed reduction rounds every leaf's
  partial and every partial sum to the destination type, so the bound is |sim - oracle| <= 8*u*S
  (eight roundings, each at most u times a partial sum, which is at most S);
- i8 products accumulate exactly into i32 and every move or compare is exact: equality.
"""
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fractal
from isa.errors import UserError
from isa.program import DTYPES, TensorType
from isa.reference import cast_array, generate_feeds, load_feeds, run_reference, save_outputs

BF16 = np.dtype(ml_dtypes.bfloat16)
NP = {"f16": np.dtype(np.float16), "bf16": BF16, "f32": np.dtype(np.float32)}
#: significant bits and the exponent of the smallest normal, 2^(emin-1), of each float type
BITS = {"f16": (11, -13), "bf16": (8, -125), "f32": (24, -125)}
U = {"f16": 2.0**-11, "bf16": 2.0**-8}
SIM_FACTOR = 8

MACHINES = [
    ("tiny",), ("f1",), ("tiny", 2, (3, 5)), ("tiny", 3, (2, 2, 4)), ("tiny", 1, (7,)),
    ("f1", 2, (4, 2)),
]


def round_to(x, dtype: str) -> np.ndarray:
    """float64 x rounded to nearest even at `dtype`'s precision (normal and subnormal range)."""
    p, emin = BITS[dtype]
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)
    quantum = np.ldexp(1.0, np.maximum(e, emin) - p)
    return np.rint(x / quantum) * quantum


def as64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


# ---------------------------------------------------------------- oracle

def oracle_matmul(a, b):
    a, b = as64(a), as64(b)
    out, mag = np.zeros((a.shape[0], b.shape[1])), np.zeros((a.shape[0], b.shape[1]))
    for k in range(a.shape[1]):
        out += np.outer(a[:, k], b[k])
        mag += np.abs(np.outer(a[:, k], b[k]))
    return out, mag


def oracle_conv2d(x, w, pad):
    x, w = as64(x), as64(w)
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out, mag = np.zeros((n, o, ho, wo)), np.zeros((n, o, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + ho, j:j + wo]
            term = np.einsum("nchw,oc->nochw", patch, w[:, :, i, j])
            out += term.sum(axis=2)
            mag += np.abs(term).sum(axis=2)
    return out, mag


def oracle_eucdist(x, c):
    x, c = as64(x), as64(c)
    d = x[:, None, :] - c[None, :, :]
    return (d * d).sum(-1), (d * d).sum(-1)


def oracle_cast_int(x, lo, hi):
    """Round half to even with Python's round, saturate, NaN -> 0."""
    out = []
    for v in as64(x).ravel():
        out.append(0 if v != v else min(hi, max(lo, round(v)) if abs(v) < 1e300 else (hi if v > 0 else lo)))
    return np.array(out, np.int64).reshape(np.shape(x))


# ---------------------------------------------------------------- programs

def float_program(dt: str) -> str:
    return f"""
tensor a  : {dt}[24, 40] input
tensor b  : {dt}[40, 20] param
tensor x  : {dt}[2, 3, 9, 9] input
tensor w  : {dt}[4, 3, 3, 3] param
tensor p  : {dt}[12, 16] input
tensor q  : {dt}[5, 16] param
tensor k  : {dt}[20] param
tensor c  : {dt}[24, 20] output
tensor y  : {dt}[2, 4, 9, 9] output
tensor d  : {dt}[12, 5] output
tensor s  : {dt}[24] output
tensor g  : {dt}[24, 20] output
tensor r  : {dt}[24, 20] output
tensor c8 : i8[24, 20] output
tensor cf : f32[24, 20] output
tensor m  : {dt}[2, 4, 4, 4] output

matmul  c, a, b
conv2d  y, x, w, pad=1
eucdist d, p, q
reduce_sum s, c, axis=1
sigmoid g, c
div     r, c, k
cast    c8, c
cast    cf, c
maxpool m, y, kernel=2, stride=2
"""


I8_PROGRAM = """
tensor a  : i8[24, 40] input
tensor b  : i8[40, 20] param
tensor x  : i8[2, 3, 9, 9] input
tensor w  : i8[4, 3, 3, 3] param
tensor p  : i8[12, 16] input
tensor q  : i8[5, 16] param
tensor c  : i32[24, 20] output
tensor y  : i32[2, 4, 9, 9] output
tensor d  : i32[12, 5] output
tensor c8 : i8[24, 20] output
tensor ch : f16[24, 20] output
tensor mx : i8[24] output
tensor so : i8[24, 40] output

matmul  c, a, b
conv2d  y, x, w, pad=1
eucdist d, p, q
cast    c8, c
cast    ch, c
reduce_max mx, a, axis=1
sort    so, a
"""


def float_oracle(dt: str, feeds: dict, outs: dict) -> dict:
    """(the oracle's value, S) per output. The MACs come from the feeds; every later instruction
    from the checked run's own values of its sources (c and y), so that each instruction is held
    to its own rounding rather than to its sources' errors. S is None where the result must be
    exact (cast to f32, maxpool, a cast to i8 of the run's own c)."""
    c, cmag = oracle_matmul(feeds["a"], feeds["b"])
    y, ymag = oracle_conv2d(feeds["x"], feeds["w"], 1)
    d, dmag = oracle_eucdist(feeds["p"], feeds["q"])
    c_run, y_run = as64(outs["c"]), as64(outs["y"])
    g = 1.0 / (1.0 + np.exp(-c_run))
    r = c_run / as64(feeds["k"])
    m = np.array([[[[y_run[n, o, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max() for j in range(4)]
                    for i in range(4)] for o in range(4)] for n in range(2)])
    return {"c": (round_to(c, dt), cmag), "y": (round_to(y, dt), ymag),
            "d": (round_to(d, dt), dmag),
            "s": (round_to(c_run.sum(axis=1), dt), np.abs(c_run).sum(axis=1)),
            "g": (round_to(g, dt), np.abs(g)), "r": (round_to(r, dt), np.abs(r)),
            "c8": (oracle_cast_int(c_run, -128, 127), None), "cf": (c_run, None), "m": (m, None)}


def check_float(dt, outs, feeds, factor):
    u = U[dt]
    for k, (value, mag) in float_oracle(dt, feeds, outs).items():
        got = outs[k]
        assert got.dtype == {"c8": np.dtype(np.int8), "cf": NP["f32"]}.get(k, NP[dt]), (k, got.dtype)
        if mag is None:
            np.testing.assert_array_equal(as64(got), value, err_msg=k)
            continue
        err = np.abs(as64(got) - value)
        bound = factor * u * mag
        assert (err <= bound).all(), (k, float(err.max()), float(np.max(bound)))


def i8_oracle(feeds):
    a, b = feeds["a"].astype(np.int64), feeds["b"].astype(np.int64)
    c = sum(np.outer(a[:, k], b[k]) for k in range(a.shape[1]))
    y = oracle_conv2d(feeds["x"], feeds["w"], 1)[0].astype(np.int64)
    d = oracle_eucdist(feeds["p"], feeds["q"])[0].astype(np.int64)
    ch = round_to(c.astype(np.float64), "f16")
    return {"c": c, "y": y, "d": d, "c8": np.clip(c, -128, 127), "ch": ch,
            "mx": a.max(axis=1), "so": np.sort(a, axis=1)}


def _feeds(src, seed=3):
    feeds = generate_feeds(fractal.load_program(src), seed)
    if "k" in feeds:                # a divisor away from 0: quotients stay in f16's range
        feeds["k"] = (np.abs(as64(feeds["k"])) + 0.5).astype(feeds["k"].dtype)
    return feeds


# ---------------------------------------------------------------- reference and simulation

@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_reference_matches_the_oracle(dt):
    src = float_program(dt)
    feeds = _feeds(src)
    outs = run_reference(fractal.load_program(src), feeds)
    check_float(dt, outs, feeds, factor=1)


def test_i8_reference_is_exact():
    feeds = _feeds(I8_PROGRAM)
    outs = run_reference(fractal.load_program(I8_PROGRAM), feeds)
    for k, v in i8_oracle(feeds).items():
        np.testing.assert_array_equal(as64(outs[k]), as64(v), err_msg=k)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: "-".join(map(str, m)))
@pytest.mark.parametrize("dt", ["f16", "bf16", "i8"])
def test_simulated_leaves_match_the_oracle(dt, machine):
    src = I8_PROGRAM if dt == "i8" else float_program(dt)
    feeds = _feeds(src)
    report = fractal.run(fractal.load_program(src), fractal.build_machine(*machine), inputs=feeds)
    if dt == "i8":
        for k, v in i8_oracle(feeds).items():
            np.testing.assert_array_equal(as64(report.outputs[k]), as64(v), err_msg=k)
    else:
        check_float(dt, report.outputs, feeds, factor=SIM_FACTOR)


def test_round_to_agrees_with_numpy_and_ml_dtypes():
    """The oracle's rounding is the IEEE one (checked here on hard cases: ties, near-ties)."""
    xs = np.array([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-40, 2**-20, 1 + 2**-8,
                   1 + 2**-8 + 2**-30, 3 * 2**-9, -1.00048828125, 65504.0, 1e-6])
    np.testing.assert_array_equal(round_to(xs, "f16"), xs.astype(np.float16).astype(np.float64))
    small = xs[np.abs(xs) < 3e38]
    np.testing.assert_array_equal(round_to(small, "bf16"), small.astype(BF16).astype(np.float64))


# ---------------------------------------------------------------- cast

def test_cast_rounds_to_nearest_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 127.4, 127.5, 300.0, -129.0, -1e30, np.nan, np.inf,
                  -np.inf], np.float32)
    np.testing.assert_array_equal(cast_array(x, "i8"),
                                  [0, 2, 2, 0, -2, 127, 127, 127, -128, -128, 0, 127, -128])
    assert cast_array(np.array([2.0**31], np.float32), "i32")[0] == 2**31 - 1
    np.testing.assert_array_equal(cast_array(np.array([300, -300, 5], np.int32), "i8"), [127, -128, 5])
    # i32 -> bf16 rounds once (through float32 it would round twice: 2^24 + 2^16 + 1 ties up here)
    v = np.array([2**24 + 2**16 + 1], np.int32)
    assert float(cast_array(v, "bf16")[0]) == round_to(float(v[0]), "bf16")
    assert float(cast_array(np.array([70000.0], np.float32), "f16")[0]) == np.inf


@pytest.mark.parametrize("machine", MACHINES[:3], ids=lambda m: "-".join(map(str, m)))
def test_cast_kernels_equal_the_reference(machine):
    src = """
tensor x : f32[6, 50] input
tensor k : f32[50] param
tensor t : f32[6, 50]
tensor a : i8[6, 50] output
tensor b : f16[6, 50] output
tensor c : bf16[6, 50] output
tensor d : i32[6, 50] output
tensor e : f32[6, 50] output
tensor f : i8[6, 50] output
mul t, x, k
cast a, t
cast b, t
cast c, t
cast d, t
cast e, c
cast f, d
"""
    program = fractal.load_program(src)
    feeds = generate_feeds(program, 1)
    feeds["k"] = np.linspace(-400, 400, 50).astype(np.float32)
    feeds["x"][0, :3] = [np.nan, np.inf, -np.inf]
    want = run_reference(program, feeds)
    got = fractal.run(program, fractal.build_machine(*machine), inputs=feeds).outputs
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(as64(got[name]), as64(want[name]), err_msg=name)


# ---------------------------------------------------------------- the checker

@pytest.mark.parametrize("text, message", [
    ("tensor a : f64[2, 2] input", "unknown dtype 'f64' (known: f32, i32, f16, bf16, i8)"),
    ("tensor a : i8[2, 2] input\ntensor c : i8[2, 2] output\nmatmul c, a, a",
     "matmul destination must be i32 for i8 sources (i8 products accumulate in i32)"),
    ("tensor a : f16[2, 2] input\ntensor b : f32[2, 2] input\ntensor c : f16[2, 2] output\nmatmul c, a, b",
     "matmul sources must share one dtype"),
    ("tensor a : f16[2, 2] input\ntensor c : f32[2, 2] output\nmatmul c, a, a",
     "matmul destination must be f16 for f16 sources"),
    ("tensor a : i8[2, 2] input\ntensor c : i8[2, 2] output\nrelu c, a",
     "relu operands must be f32, i32, f16 or bf16, found i8[2, 2]"),
    ("tensor a : i32[2, 2] input\ntensor c : i32[2, 2] output\nsigmoid c, a",
     "sigmoid operands must be f32, f16 or bf16, found i32[2, 2]"),
    ("tensor a : i8[2, 3] input\ntensor c : i8[2] output\nreduce_sum c, a, axis=1",
     "reduce_sum source must be f32, i32, f16 or bf16, found i8[2, 3]"),
    ("tensor a : f16[2, 3] input\ntensor c : i8[3, 2] output\ncast c, a",
     "destination is i8[3, 2] but cast of f16[2, 3] gives [2, 3]"),
])
def test_bad_dtypes_are_located_errors(text, message):
    with pytest.raises(UserError) as e:
        fractal.load_program(text + "\n")
    out = str(e.value)
    assert message in out, out
    assert "<string>:" in out                     # located: file:line:col


# ---------------------------------------------------------------- data files

def _program():
    return fractal.load_program("""
tensor h : f16[2, 3] input
tensor b : bf16[2, 3] input
tensor q : i8[2, 3] input
tensor y : bf16[2, 3] output
tensor z : f32[2, 3] output
add y, b, b
cast z, h
""")


def test_data_files_of_the_new_types_load(tmp_path):
    program = _program()
    h = np.array([[1, 2, 3], [0.5, -1, 65504]], np.float16)
    b = np.array([[1, 2, 3], [0.5, -1, 1e30]], np.float32).astype(BF16)
    q = np.array([[1, -2, 127], [-128, 0, 5]], np.int8)
    np.save(tmp_path / "h.npy", h)
    np.save(tmp_path / "b.npy", b.view(np.uint16))          # bf16 on disk: uint16 bit patterns
    np.save(tmp_path / "q.npy", q.astype(np.int64))          # wider integers: accepted if exact
    feeds = load_feeds(program, [f"h={tmp_path / 'h.npy'}", f"b={tmp_path / 'b.npy'}",
                                 f"q={tmp_path / 'q.npy'}"], None)
    assert feeds["h"].dtype == np.float16 and np.array_equal(feeds["h"], h)
    assert feeds["b"].dtype == BF16 and np.array_equal(as64(feeds["b"]), as64(b))
    assert feeds["q"].dtype == np.int8 and np.array_equal(feeds["q"], q)
    outs = run_reference(program, feeds)
    written = save_outputs(outs, tmp_path / "out")
    y = np.load(tmp_path / "out" / "y.npy", allow_pickle=False)
    assert y.dtype == np.uint16 and np.array_equal(as64(y.view(BF16)), as64(b) * 2)
    assert len(written) == 2


@pytest.mark.parametrize("name, array, message", [
    ("h", np.array([[1, 2, 3], [4, 5, 1.0001]], np.float32),
     "h expects f16 (float16) data; file has float32 values that f16 cannot hold exactly"),
    ("b", np.ones((2, 3), np.float16), "b expects bf16 (uint16 bit patterns) data, file has dtype float16"),
    ("b", np.array([[1, 2, 3], [4, 5, 1.001]]), "b expects bf16 (uint16 bit patterns) data; file has float64 values"),
    ("q", np.array([[1, 2, 3], [4, 5, 300]], np.int32), "q expects i8 (int8) data; file has int32 values"),
    ("q", np.ones((2, 3), np.uint8), "q expects i8 (int8) data, file has dtype uint8"),
])
def test_bad_data_files_are_located_errors(tmp_path, name, array, message):
    path = tmp_path / f"{name}.npy"
    np.save(path, array)
    with pytest.raises(UserError) as e:
        load_feeds(_program(), [f"{name}={path}"], None)
    assert message in str(e.value), str(e.value)
    assert f"--input {name}=" in str(e.value)


def test_a_bfloat16_npy_file_is_refused_with_the_on_disk_form(tmp_path):
    path = tmp_path / "b.npy"
    np.save(path, np.ones((2, 3), BF16))                      # .npy stores it as raw void |V2
    with pytest.raises(UserError) as e:
        load_feeds(_program(), [f"b={path}"], None)
    assert "uint16 bit patterns" in str(e.value) and "view(np.uint16)" in str(e.value)


# ---------------------------------------------------------------- bytes follow element size

MLP = """
tensor x : {d}[64, 256] input
tensor w : {d}[256, 128] param
tensor y : {d}[64, 128] output
matmul y, x, w
"""


def test_sizes_follow_dtypes():
    assert DTYPES == {"f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i8": 1}
    assert TensorType("f16", (3, 5)).nbytes * 2 == TensorType("f32", (3, 5)).nbytes
    assert TensorType("i8", (3, 5)).nbytes * 4 == TensorType("i32", (3, 5)).nbytes


@pytest.mark.parametrize("machine", ["tiny", "f1"])
def test_f16_moves_half_the_bytes_of_f32_where_the_plans_cut_alike(machine):
    """The compiler counts bytes from DTYPES, so the same cuts of an f16 task move exactly half
    the bytes of its f32 version. The planner may cut f16 differently (smaller pieces fit
    differently, and its cost weighs bytes against fixed compute), so every split node of the f32
    plan is scheduled again for the f16 task with the same pieces, ways and loop order."""
    from compiler.rules import access_map
    from compiler.schedule import Schedule
    m = fractal.build_machine(machine)
    f32 = fractal.compile(MLP.format(d="f32"), m)
    nodes = [n for n in f32.table.values() if n.splits]
    assert nodes
    for n in nodes:
        task = replace(n.task, types=tuple(TensorType("f16", t.shape) for t in n.task.types))
        half = Schedule(task, access_map(task), [s.pieces for s in n.splits],
                        [s.ways for s in n.splits], m.levels[n.level].broadcast,
                        order=n.order).totals()
        assert (2 * half["bytes_down"], 2 * half["bytes_up"]) == (n.bytes_down, n.bytes_up)


def test_the_upcast_tables_and_bf16s_largest_are_the_types_own():
    """The kernels' tables of every f16 and bf16 bit pattern as float32, and bf16's largest
    finite value, built without ml_dtypes, are ml_dtypes' and numpy's own, bit for bit (NaN
    payloads included)."""
    from simulator.narrow import BF16_DEST, UPCAST
    bits = np.arange(1 << 16, dtype=np.uint16)
    for dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        own = bits.view(dtype).astype(np.float32)
        assert np.array_equal(UPCAST[dtype.name].view(np.uint32), own.view(np.uint32))
    assert BF16_DEST[2] == float(np.finfo(ml_dtypes.bfloat16).max)


def test_a_timing_only_run_imports_no_bf16_support():
    """ml_dtypes takes about half a second to import: a process that compiles and runs a
    program timing-only never needs it, and bf16 still works once asked for."""
    import subprocess
    import sys
    code = ("import sys, fractal\n"
            "fractal.run('programs/mlp.fasm', 'tiny', functional=False)\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported'\n"
            "from isa.reference import NP_DTYPES, dtype_name\n"
            "assert NP_DTYPES['bf16'].name == 'bfloat16' and dtype_name(NP_DTYPES['bf16']) == 'bf16'\n"
            "assert sorted(NP_DTYPES) == ['bf16', 'f16', 'f32', 'i32', 'i8']\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
