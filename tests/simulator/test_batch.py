"""The batched leaf path: all leaf children of one node run in one kernel call, computing each
leaf's product from its own regions and combining them exactly as the per-leaf path does."""
import numpy as np
import pytest

import fractal
from compiler import compile_program, execute_plan
from isa.checker import parse_program
from isa.reference import generate_feeds
from simulator.kernels import LEAF_BATCH_KERNELS, LEAF_KERNELS


def _matmul(m, k, n):
    return parse_program(f"tensor a : f32[{m}, {k}] input\ntensor b : f32[{k}, {n}] param\n"
                         f"tensor c : f32[{m}, {n}] output\nmatmul c, a, b\n", "<matmul>")


@pytest.mark.parametrize("shape", [(96, 200, 72), (130, 33, 257), (64, 512, 64)])
@pytest.mark.parametrize("machine", [("tiny", None, None), ("f1", 2, (3, 2)), ("f1", 3, 4)])
def test_batched_leaves_equal_per_leaf_and_numpy(shape, machine):
    program = _matmul(*shape)
    plan = compile_program(program, fractal.build_machine(*machine))
    feeds = generate_feeds(program, 1)
    calls = []

    def counting(ins, attrs, tiles, out):
        calls.append(len(tiles))
        LEAF_BATCH_KERNELS["matmul"](ins, attrs, tiles, out)

    batched = execute_plan(plan, feeds, LEAF_KERNELS, {"matmul": counting})["c"]
    per_leaf = execute_plan(plan, feeds, LEAF_KERNELS)["c"]
    if plan.machine.depth > 0 and any(n.kind == "split" for n in plan.roots):
        assert calls, "the batched path was not taken"
    # the same products added in the same order: the per-leaf result up to float32 rounding
    # (BLAS may fuse the addition of a later partial into its product)
    np.testing.assert_allclose(batched, per_leaf, rtol=1e-5, atol=1e-5)
    want = feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64)
    np.testing.assert_allclose(batched, want, rtol=1e-4, atol=1e-3)


def test_a_serial_reduction_split_accumulates_partials():
    # K = 512 split into serial pieces on tiny (4 KiB leaves): later pieces add to the first
    program = _matmul(8, 512, 8)
    plan = compile_program(program, fractal.build_machine("tiny"))
    tiles = []
    feeds = generate_feeds(program, 3)
    execute_plan(plan, feeds, LEAF_KERNELS,
                 {"matmul": lambda i, a, t, o: (tiles.append(t), LEAF_BATCH_KERNELS["matmul"](i, a, t, o))})
    firsts = np.concatenate([t[:, -1] for t in tiles])
    assert 0 < firsts.sum() < len(firsts)       # some calls start a region, others add to it
