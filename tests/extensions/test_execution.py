"""Extensions run like built-ins: decomposed on any machine, their outputs equal numpy and their
core-only equivalents; and the topk extension moves far less upward than topk through sort."""
from pathlib import Path

import numpy as np
import pytest

import fractal
from compiler.verify import plan_stats
from compiler import compile_program, execute_plan, verify_plan
from isa import parse_program
from isa.reference import generate_feeds, run_reference
from simulator.kernels import LEAF_KERNELS
from tests.compiler.test_decompose import assert_same_outputs

HERE = str(Path(__file__).resolve().parents[2] / "programs" / "_test.fasm")  # includes resolve from programs/

TOPK = """include "lib/topk.fasm"
tensor x : f32[3, 700] input
tensor v : f32[3, 16] output
tensor i : i32[3, 16] output
topk v, i, x
"""
TOPK_CORE = """tensor x : f32[3, 700] input
tensor s : f32[3, 700]
tensor o : i32[3, 700]
tensor v : f32[3, 16] output
tensor i : i32[3, 16] output
sort s, x
slice v, s, axis=1, start=0
argsort o, x
slice i, o, axis=1, start=0
"""
CONV3D = """include "lib/conv3d.fasm"
tensor x : f32[2, 3, 7, 6, 6] input
tensor w : f32[4, 3, 3, 3, 3] param
tensor y : f32[2, 4, 5, 6, 6] output
conv3d y, x, w, pad=1
"""
OTHERS = """include "lib/softmax.fasm"
include "lib/naive_bayes.fasm"
tensor a : f32[37, 11] input
tensor b : f32[37, 11] output
tensor f : f32[50, 6] input
tensor ll : f32[6, 3] param
tensor lp : f32[1, 3] param
tensor lab : i32[50] output
softmax b, a
nb_classify lab, f, ll, lp
"""

MACHINES = [fractal.build_machine("f1", 1, 1), fractal.build_machine("tiny", 2, (3, 5)),
            fractal.build_machine("f1", 3, 7), fractal.build_machine("f1", 3, 16),
            fractal.build_machine("tiny")]


def numpy_oracles(feeds):
    x = feeds["x"]
    return {"topk": np.argsort(x, axis=1, kind="stable")[:, :16]}


@pytest.mark.parametrize("text", [TOPK, TOPK_CORE, CONV3D, OTHERS], ids=["topk", "topk_core", "conv3d", "softmax_nb"])
def test_same_file_runs_unchanged_on_every_machine(text):
    program = parse_program(text, HERE)
    feeds = generate_feeds(program, 4)
    want = run_reference(program, feeds)
    for machine in MACHINES:
        plan = compile_program(program, machine)
        verify_plan(plan)
        assert_same_outputs(execute_plan(plan, feeds, LEAF_KERNELS), want)


def test_topk_equals_numpy_and_the_sort_program():
    ext, core = parse_program(TOPK, HERE), parse_program(TOPK_CORE, HERE)
    feeds = generate_feeds(ext, 9)
    a, b = run_reference(ext, feeds), run_reference(core, feeds)
    order = np.argsort(feeds["x"], axis=1, kind="stable")[:, :16]
    np.testing.assert_array_equal(a["i"], order)
    np.testing.assert_array_equal(a["v"], np.take_along_axis(feeds["x"], order, 1))
    assert_same_outputs(a, b)


def test_conv3d_equals_a_numpy_loop():
    program = parse_program(CONV3D, HERE)
    feeds = generate_feeds(program, 2)
    x = np.pad(feeds["x"].astype(np.float64), ((0, 0), (0, 0), (0, 0), (1, 1), (1, 1)))
    w = feeds["w"].astype(np.float64)
    want = np.zeros((2, 4, 5, 6, 6))
    for d in range(5):
        for kd in range(3):
            for kh in range(3):
                for kw in range(3):
                    want[:, :, d] += np.einsum("nchw,oc->nohw", x[:, :, d + kd, kh:kh + 6, kw:kw + 6],
                                               w[:, :, kd, kh, kw])
    got = run_reference(program, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_softmax_and_naive_bayes_equal_numpy():
    program = parse_program(OTHERS, HERE)
    f = generate_feeds(program, 1)
    out = run_reference(program, f)
    a = f["a"].astype(np.float64)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out["b"], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(out["lab"], np.argmax(f["f"] @ f["ll"] + f["lp"], 1))


def test_topk_extension_returns_k_per_child_not_n():
    """n = 2^20, k = 16 on f100: both stream the n inputs down; the sort-based program sends
    every element (values and positions) back up through each level, the extension about k
    candidates per child task: k values and k positions, 8 bytes each pair, for every task a
    level receives (each writes back once, keeping its partial candidates across pieces)."""
    n = 1 << 20
    ext = TOPK.replace("3, 700", f"1, {n}").replace("3, 16", "1, 16")
    core = TOPK_CORE.replace("3, 700", f"1, {n}").replace("3, 16", "1, 16")
    a = fractal.run(parse_program(ext, HERE), "f100", functional=False)
    b = fractal.run(parse_program(core, HERE), "f100", functional=False)
    assert a.bytes_down[1] >= 4 * n and b.bytes_down[1] >= 4 * n
    assert sum(b.bytes_up) >= 3 * 8 * n                  # values and positions, every level
    stats, _ = plan_stats(fractal.compile(parse_program(ext, HERE), "f100"))
    for level in stats[1:]:
        assert a.bytes_up[level.level] <= level.instructions * 16 * 8
    assert sum(b.bytes_up) >= 50 * sum(a.bytes_up)
    assert b.reduction_ops >= 100 * a.reduction_ops
    assert a.cycles < b.cycles
