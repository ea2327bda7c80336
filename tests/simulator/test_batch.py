"""The batched leaf path of matmul: all the leaves below a node run in one kernel call, computing
each leaf's product from its own regions and combining them as the per-leaf path does."""
import numpy as np
import pytest

import fractal
from compiler import compile_program, execute_plan
from compiler.plan import level_counts
from isa.checker import parse_program
from isa.reference import generate_feeds
from simulator.batch_kernels import LEAF_BATCH_KERNELS
from simulator.kernels import LEAF_KERNELS
from tests.simulator.test_batch_kernels import within_sum_order


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
    # the same products, their float32 sums perhaps in another order (one product where every
    # region sums the whole of K; BLAS may fuse the addition of a later partial into its
    # product): the per-leaf result within the bound of a float32 sum in any order
    magnitude = np.abs(feeds["a"].astype(np.float64)) @ np.abs(feeds["b"].astype(np.float64))
    within_sum_order(batched, per_leaf, magnitude, shape[1])
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


def test_the_batched_matmul_reads_strided_and_read_only_regions():
    # a column block of a wider matrix (rows not contiguous) and a read-only array
    rng = np.random.default_rng(0)
    a = rng.standard_normal((12, 40)).astype(np.float32)[2:10, 5:25]
    b = rng.standard_normal((20, 6)).astype(np.float32)
    b.setflags(write=False)
    assert not a.flags.c_contiguous
    out = np.zeros((8, 6), np.float32)
    LEAF_BATCH_KERNELS["matmul"]([a, b], {}, np.array([[0, 8, 0, 20, 0, 20, 0, 6, 0, 8, 0, 6, 1]]),
                                 out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, machine", [((96, 200, 72), ("f1", 2, (3, 2))),
                                            ((64, 512, 64), ("f1", 3, 4))])
def test_a_node_runs_all_the_leaves_below_it_in_one_call(shape, machine):
    # the root's children are split nodes; their leaves' regions, moved into the root's
    # coordinates, make one table, and one call computes every leaf's product
    program = _matmul(*shape)
    plan = compile_program(program, fractal.build_machine(*machine))
    assert all(child.kind == "split" for child in plan.table.values() if child.level == 1)
    feeds = generate_feeds(program, 2)
    tables = []

    def recording(ins, attrs, tiles, out):
        tables.append(tiles)
        LEAF_BATCH_KERNELS["matmul"](ins, attrs, tiles, out)

    got = execute_plan(plan, feeds, LEAF_KERNELS, {"matmul": recording})["c"]
    leaves = sum(n for (task, level), n in level_counts(plan).items() if level == plan.machine.depth)
    assert [len(t) for t in tables] == [leaves]
    np.testing.assert_allclose(got, feeds["a"].astype(np.float64) @ feeds["b"], rtol=1e-4, atol=1e-3)


def _widths_copied(monkeypatch) -> list:
    """A list that gets (row length before, after) of every B `_rows_apart` is given; the
    leaves' own products run (not one product of the whole of A and B: `_whole_sums`)."""
    import simulator.batch_kernels as bk
    monkeypatch.setattr(bk, "_whole_sums", lambda *args: False)
    widths = []
    monkeypatch.setattr(bk, "_rows_apart", lambda b, work, apart=bk._rows_apart: widths.append(
        (b.shape[-1], apart(b, work).shape[-1])) or apart(b, work))
    return widths


@pytest.mark.parametrize("a_shape, b_shape", [((40, 96), (96, 1024)), ((3, 40, 64), (3, 64, 2048)),
                                              ((40, 64), (3, 64, 1024))])
def test_a_b_whose_rows_share_cache_sets_gives_the_same_products(a_shape, b_shape, monkeypatch):
    # rows 4 KB apart (1024 f32) are copied further apart for speed: the leaves' values do not
    # change, bit for bit, and still equal the product (the last case: A shared by the batch,
    # B's rows [K, N * 3] are 12 KB apart)
    import simulator.batch_kernels as bk
    out_shape = np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1])
    program = parse_program(
        f"tensor a : f32[{', '.join(map(str, a_shape))}] input\n"
        f"tensor b : f32[{', '.join(map(str, b_shape))}] param\n"
        f"tensor c : f32[{', '.join(map(str, out_shape))}] output\nmatmul c, a, b\n", "<matmul>")
    plan = compile_program(program, fractal.build_machine("f1", 2, (3, 2)))
    feeds = generate_feeds(program, 4)
    widths = _widths_copied(monkeypatch)
    padded = execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS)["c"]
    assert widths and all(after == before + 16 for before, after in widths)
    widths.clear()
    monkeypatch.setattr(bk, "_ALIASED_ROWS", 1 << 40)
    plain = execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS)["c"]
    assert widths and all(after == before for before, after in widths)   # not padded this time
    assert np.array_equal(padded, plain)
    want = feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64)
    np.testing.assert_allclose(padded, want, rtol=1e-4, atol=1e-3)


def test_a_b_each_product_reads_once_is_not_copied(monkeypatch):
    # a matrix-vector product reads each element of B once: copying B would cost more than the
    # product (1 x 512 @ 512 x 1024, rows 4 KB apart)
    program = parse_program("tensor a : f32[1, 512] input\ntensor b : f32[512, 1024] param\n"
                            "tensor c : f32[1, 1024] output\nmatmul c, a, b\n", "<matvec>")
    plan = compile_program(program, fractal.build_machine("f1", 2, (3, 2)))
    feeds = generate_feeds(program, 4)
    widths = _widths_copied(monkeypatch)
    got = execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS)["c"]
    assert widths and all(after == before for before, after in widths)
    np.testing.assert_allclose(got, feeds["a"].astype(np.float64) @ feeds["b"], rtol=1e-4, atol=1e-3)
