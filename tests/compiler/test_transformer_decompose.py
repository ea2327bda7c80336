"""The transformer instructions decomposed on five machine shapes: the leaves' results (numba
kernels, through the plan executor) equal numpy written here, and the reference equals it too;
batch axes are cut across children, and a mean's pieces add into one mean."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from compiler import compile_program, execute_plan, verify_plan
from compiler.plan import PlanKind
from compiler.rules import Reduction, access_map
from isa import parse_program
from isa.reference import generate_feeds, run_reference
from machine import preset
from simulator.batch_kernels import LEAF_BATCH_KERNELS
from simulator.kernels import LEAF_KERNELS


def _small_custom():
    """A 2-level machine of fan-outs 2 x 3 with 8 KiB leaves and 64 KiB middle nodes."""
    m = preset("tiny").rescaled(2, (2, 3))
    levels = list(m.levels)
    levels[1] = replace(levels[1], memory_bytes=65536)
    levels[2] = replace(levels[2], memory_bytes=8192)
    return replace(m, name="custom-2x3", levels=tuple(levels))


MACHINES = {"tiny": lambda: preset("tiny"), "f1": lambda: preset("f1"),
            "tiny-3x5x7": lambda: preset("tiny").rescaled(3, (3, 5, 7)),
            "tiny-fanout-1": lambda: preset("tiny").rescaled(2, 1), "custom-2x3": _small_custom}

PROGRAM = """\
tensor a    : f32[3, 1, 9, 12]  input
tensor b    : f32[4, 12, 10]    param
tensor x    : f32[6, 40]        input
tensor e    : f32[1, 40]        param
tensor c    : i32[6, 1]         input
tensor r    : f32[3, 700]       input
tensor kp   : i32[37]           input
tensor mm   : f32[3, 4, 9, 10]  output
tensor ax   : f32[6, 40]
tensor u1   : f32[6, 40]        output
tensor u2   : f32[6, 40]        output
tensor u3   : f32[6, 40]        output
tensor u4   : f32[6, 40]        output
tensor u5   : f32[6, 40]        output
tensor b1   : f32[6, 40]        output
tensor b2   : f32[6, 40]        output
tensor b3   : f32[6, 40]        output
tensor w    : f32[6, 40]        output
tensor mean : f32[3]            output
tensor mean0: f32[700]          output
tensor qp   : i32[29]
tensor msk  : f32[29, 37]       output
tensor ramp : f32[5, 8]         output
matmul      mm, a, b
abs         ax, x
sqrt        u1, ax
rsqrt       u2, ax
log         u3, ax
erf         u4, x
neg         u5, x
pow         b1, ax, e
min         b2, x, e
max         b3, e, x
where       w, c, x, e
reduce_mean mean, r, axis=1
reduce_mean mean0, r, axis=0
fill        qp, value=10, step=1
causal_mask msk, qp, kp, window=6
fill        ramp, value=0.5, step=-0.25, axis=0
"""


def oracle(f: dict) -> dict:
    """Every output, from the feeds, in float64 numpy (erf through math.erf)."""
    a, b, x, e = (f[n].astype(np.float64) for n in ("a", "b", "x", "e"))
    r = f["r"].astype(np.float64)
    ax = np.abs(x)
    qp = np.arange(10, 39)
    dist = qp[:, None] - f["kp"].astype(np.int64)[None, :]
    return {"mm": np.einsum("bhmk,hkn->bhmn", np.broadcast_to(a, (3, 4, 9, 12)), b),
            "u1": np.sqrt(ax), "u2": 1 / np.sqrt(ax), "u3": np.log(ax),
            "u4": np.vectorize(math.erf)(x), "u5": -x, "b1": ax ** e,
            "b2": np.minimum(x, e), "b3": np.maximum(e, x), "w": np.where(f["c"] != 0, x, e),
            "mean": r.mean(axis=1), "mean0": r.mean(axis=0),
            "msk": np.where((dist >= 0) & (dist < 6), 0.0, np.finfo(np.float32).min),
            "ramp": np.broadcast_to((0.5 - 0.25 * np.arange(5))[:, None], (5, 8))}


def check(got: dict, want: dict):
    assert got.keys() == want.keys()
    for k, w in want.items():
        np.testing.assert_allclose(got[k].astype(np.float64), w, rtol=2e-5, atol=2e-5, err_msg=k)


@pytest.fixture(scope="module")
def program_and_feeds():
    program = parse_program(PROGRAM, "transformer_ops.fasm")
    feeds = generate_feeds(program, 11)
    feeds["kp"] = np.arange(37, dtype=np.int32)[::-1].copy()      # key positions out of order
    check(run_reference(program, feeds), oracle(feeds))
    return program, feeds


@pytest.mark.parametrize("name", list(MACHINES))
def test_every_instruction_on_five_machines(name, program_and_feeds):
    program, feeds = program_and_feeds
    plan = compile_program(program, MACHINES[name]())
    verify_plan(plan)
    check(execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS), oracle(feeds))


def _cuts(plan, opcode):
    """(axis name, pieces times ways, reduction) of every cut axis of every split node of `opcode`."""
    out = set()
    for (task, _), node in plan.table.items():
        if task.opcode == opcode and node.kind == PlanKind.SPLIT:
            for s in node.splits:
                if s.pieces * s.ways > 1:
                    out.add((s.name, s.ways, s.reduce))
    return out


def test_batch_axes_are_cut_across_children():
    """Many small products: the batch axes are what spreads them over the children."""
    text = ("tensor q : f32[16, 8, 4, 8] input\ntensor k : f32[16, 1, 8, 4] input\n"
            "tensor s : f32[16, 8, 4, 4] output\nmatmul s, q, k\n")
    program = parse_program(text, "heads.fasm")
    plan = compile_program(program, preset("f1").rescaled(2, 8))
    cuts = _cuts(plan, "matmul")
    assert any(axis.startswith("B") and ways > 1 for axis, ways, _ in cuts), cuts
    amap = access_map(plan.roots[0].task)
    assert [a.name for a in amap.axes] == ["B0", "B1", "M", "N", "K"]
    assert amap.depends(2) == frozenset({0, 3, 4})       # B0, N, K: k is shared across B1 and M


def test_a_mean_cut_along_its_axis_adds_partial_means():
    text = "tensor r : f32[2, 5000] input\ntensor m : f32[2] output\nreduce_mean m, r, axis=1\n"
    program = parse_program(text, "mean.fasm")
    plan = compile_program(program, preset("tiny"))
    root = plan.roots[0]
    assert root.task.attr["count"] == 5000                 # bound at the root, kept by pieces
    assert any(axis == "n" and red == Reduction.ADD for axis, _, red in _cuts(plan, "reduce_mean"))
    assert all(task.attr["count"] == 5000 for task, _ in plan.table)
    feeds = generate_feeds(program, 1)
    got = execute_plan(plan, feeds, LEAF_KERNELS)["m"]
    np.testing.assert_allclose(got, feeds["r"].astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)
