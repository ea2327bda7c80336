"""Leaf batches (simulator/batch_kernels.py): the leaves below a node computed in one call give
what the leaves computed one by one give, and an independent numpy oracle's values.

Where a node's leaves are its own children (a one-level machine), each region's partials are
added in the same order as the per-leaf path adds them, so the results are equal bit for bit,
in every data type, except that a conv2d batch computes its leaves' products in larger BLAS
products, and an f32 matmul batch whose regions each sum the whole of K is one product, whose
float32 sums run in another order: there, float results agree within the error bound of a
float32 sum in any order (`within_sum_order`), integer ones bit for bit. Deeper machines add the partials of a region one by one into the node's
output, where the per-leaf path sums each child's first: equal up to float rounding, checked
against the oracle at the reference's tolerance (tests/compiler/test_decompose.py)."""
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

import fractal
from compiler import compile_program, execute_plan
from compiler.plan import level_counts
from isa.reference import NP_DTYPES, generate_feeds, run_reference
from simulator import batch_kernels
from simulator.batch_kernels import LEAF_BATCH_KERNELS, _whole_sums
from simulator.narrow import narrow
from simulator.kernels import LEAF_KERNELS
from simulator.tile_kernels import groups, join_partials
from tests.compiler.test_decompose import assert_same_outputs

BF16 = np.dtype(ml_dtypes.bfloat16)
#: one level of leaves (bit-for-bit), and deeper trees with 4 KiB or 512 KiB leaves
ONE_LEVEL = [("tiny", 1, (8,)), ("f1", 1, (6,))]
DEEPER = [("tiny",), ("tiny", 3, (2, 2, 4)), ("f1", 2, (4, 2)), ("f1", 3, 4)]


def conv_program(dt: str, stride=1, pad="1", k=3, c=12, o=10, hw=(13, 11), n=2) -> str:
    acc = "i32" if dt == "i8" else dt
    h, w = hw
    top, left, bottom, right = (int(p) for p in pad.split(",")) if "," in pad else (int(pad),) * 4
    ho, wo = (h + top + bottom - k) // stride + 1, (w + left + right - k) // stride + 1
    pad_attr = f"({pad})" if "," in pad else pad
    return (f"tensor x : {dt}[{n}, {c}, {h}, {w}] input\ntensor w : {dt}[{o}, {c}, {k}, {k}] param\n"
            f"tensor y : {acc}[{n}, {o}, {ho}, {wo}] output\n"
            f"conv2d y, x, w, stride={stride}, pad={pad_attr}\n")


def oracle_conv(x, w, stride, pads):
    """float64 (int64 for integers) direct convolution with zero padding, tap by tap."""
    x = x.astype(np.int64 if x.dtype.kind in "iu" else np.float64)
    w = w.astype(x.dtype)
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    o, _, kh, kw = w.shape
    ho = (xp.shape[2] - kh) // stride + 1
    wo = (xp.shape[3] - kw) // stride + 1
    y = np.zeros((x.shape[0], o, ho, wo), x.dtype)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y


def runs(program, machine, feeds):
    """(batched, per-leaf) outputs, and how many batch calls each opcode made."""
    plan = compile_program(program, fractal.build_machine(*machine))
    calls: dict = {}

    def counting(op):
        def run(*args):
            calls[op] = calls.get(op, 0) + 1
            LEAF_BATCH_KERNELS[op](*args)
        return run
    batched = execute_plan(plan, feeds, LEAF_KERNELS, {op: counting(op) for op in LEAF_BATCH_KERNELS})
    return batched, execute_plan(plan, feeds, LEAF_KERNELS), calls


def equal(a, b) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.astype(np.float64), b.astype(np.float64),
                                                  equal_nan=True)


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i8"])
@pytest.mark.parametrize("case", [dict(), dict(stride=2, pad="2,0,1,3", k=5),
                                  dict(k=1, pad="0", c=40, o=24), dict(stride=3, pad="0", k=3)])
def test_conv2d_batches_equal_the_leaves_on_one_level(dt, case):
    program = fractal.load_program(conv_program(dt, **case))
    feeds = generate_feeds(program, 5)
    stride, pad = case.get("stride", 1), case.get("pad", "1")
    pads = tuple(int(p) for p in pad.split(",")) if "," in pad else (int(pad),) * 4
    magnitude = oracle_conv(np.abs(feeds["x"].astype(np.float64)),
                            np.abs(feeds["w"].astype(np.float64)), stride, pads)
    for machine in ONE_LEVEL:
        batched, per_leaf, calls = runs(program, machine, feeds)
        assert calls.get("conv2d") == 1
        if dt == "i8":
            assert equal(batched["y"], per_leaf["y"]), machine
        else:
            within_sum_order(batched["y"], per_leaf["y"], magnitude, feeds["w"][0].size)


def within_sum_order(got, want, magnitude, terms):
    """got and want are two float32 sums of the same `terms` products in different orders,
    each rounded to their type (the same): they differ by at most twice the bound of one such
    sum, 2 n u sum|x w| (u = 2^-24), and, rounded to a narrower type, by one unit in its last
    place of the larger more."""
    assert got.dtype == want.dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    ulp = np.spacing(np.maximum(np.abs(got), np.abs(want))).astype(np.float64)
    bound = 2 * terms * 2.0 ** -24 * magnitude + (ulp if got.dtype != np.float32 else 0)
    assert np.all(np.abs(g - w) <= bound), float(np.max(np.abs(g - w) - bound))


@pytest.mark.parametrize("dt", ["f32", "f16", "i8"])
@pytest.mark.parametrize("case", [dict(c=24, o=20, hw=(17, 15)), dict(stride=2, pad="1,2,0,1", k=3)])
def test_conv2d_batches_on_deeper_machines_match_the_oracle(dt, case):
    program = fractal.load_program(conv_program(dt, **case))
    feeds = generate_feeds(program, 6)
    pad = case.get("pad", "1")
    pads = tuple(int(p) for p in pad.split(",")) if "," in pad else (int(pad),) * 4
    want = oracle_conv(feeds["x"], feeds["w"], case.get("stride", 1), pads)
    reference = run_reference(program, feeds)
    for machine in DEEPER:
        batched, per_leaf, calls = runs(program, machine, feeds)
        assert calls.get("conv2d", 0) <= 1            # the root's call covers every leaf
        assert_same_outputs(batched, reference)
        got = batched["y"].astype(np.float64)
        if dt == "i8":
            np.testing.assert_array_equal(batched["y"], want)
            np.testing.assert_array_equal(per_leaf["y"], want)
        elif dt == "f32":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["f16", "bf16", "i8"])
def test_matmul_batches_of_narrow_types_equal_the_leaves(dt):
    acc = "i32" if dt == "i8" else dt
    program = fractal.load_program(f"tensor a : {dt}[40, 300] input\ntensor b : {dt}[300, 36] param\n"
                                   f"tensor c : {acc}[40, 36] output\nmatmul c, a, b\n")
    feeds = generate_feeds(program, 7)
    for machine in ONE_LEVEL:
        batched, per_leaf, calls = runs(program, machine, feeds)
        assert calls == {"matmul": 1} and equal(batched["c"], per_leaf["c"]), machine
    reference = run_reference(program, feeds)
    for machine in DEEPER[:2]:
        assert_same_outputs(runs(program, machine, feeds)[0], reference)


ELEMENTWISE = """
tensor x : {dt}[3, 10, 9, 14] input
tensor b : {dt}[1, 10, 1, 1] param
tensor v : {dt}[14] param
tensor k : {dt}[9, 14] param
tensor s : {dt}[3, 10, 9, 14] output
tensor d : {dt}[3, 10, 9, 14] output
tensor m : {dt}[3, 10, 9, 14] output
tensor q : {dt}[3, 10, 9, 14] output
tensor r : {dt}[3, 10, 9, 14] output
tensor g : {dt}[3, 10, 9, 14] output
tensor t : {dt}[3, 10, 9, 14] output
tensor e : {dt}[3, 10, 9, 14] output
tensor p : {dt}[3, 10, 4, 7] output
tensor a : {dt}[3, 10, 5, 8] output
tensor f : {dt}[5, 14] output
tensor f2 : {dt}[5, 14] input
tensor u1 : {dt}[3, 10, 9, 14] output
tensor u2 : {dt}[3, 10, 9, 14] output
tensor u3 : {dt}[3, 10, 9, 14] output
tensor u4 : {dt}[3, 10, 9, 14] output
tensor u5 : {dt}[3, 10, 9, 14] output
tensor u6 : {dt}[3, 10, 9, 14] output
tensor u7 : {dt}[3, 10, 9, 14] output
tensor u8 : {dt}[3, 10, 9, 14] output
tensor u9 : {dt}[3, 10, 9, 14] output
add s, x, b
sub d, x, v
mul m, x, k
div q, x, k
relu r, x
sigmoid g, x
tanh t, x
exp e, x
maxpool p, x, kernel=3, stride=2, pad=(0, 1, 1, 0)
avgpool a, x, kernel=2, stride=2, pad=1
add f, f2, v
sqrt u1, x
rsqrt u2, x
erf u3, x
log u4, x
abs u5, x
neg u6, x
pow u7, k, x
min u8, x, b
max u9, v, x
"""


I32_ELEMENTWISE = """
tensor x : i32[3, 10, 9, 14] input
tensor b : i32[1, 10, 1, 1] param
tensor v : i32[14] param
tensor s : i32[3, 10, 9, 14] output
tensor m : i32[3, 10, 9, 14] output
tensor r : i32[3, 10, 9, 14] output
tensor n : i32[3, 10, 9, 14] output
tensor u : i32[3, 10, 9, 14] output
add s, x, b
mul m, x, v
relu r, x
neg n, x
max u, x, b
"""


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i32"])
def test_elementwise_and_pooling_batches_equal_the_leaves_bit_for_bit(dt):
    # broadcast sources of lower rank and of extent 1, windows with asymmetric padding; i32
    # elementwise runs each leaf's own kernel in turn
    program = fractal.load_program(I32_ELEMENTWISE if dt == "i32" else ELEMENTWISE.format(dt=dt))
    feeds = generate_feeds(program, 8)
    if dt != "i32":         # a quotient by nonzero values; a NaN among the sources
        feeds["k"] = (np.abs(feeds["k"].astype(np.float32)) + 0.5).astype(feeds["k"].dtype)
        feeds["x"][0, 0, 0, 0] = np.nan
    per_opcode = Counter(ins.opcode for ins in program.instructions)
    for machine in ONE_LEVEL + DEEPER:
        batched, per_leaf, calls = runs(program, machine, feeds)
        assert calls == per_opcode, machine         # one call per instruction
        for name in per_leaf:
            assert equal(batched[name], per_leaf[name]), (machine, name)


def test_a_node_batches_its_leaves_through_every_level():
    # 3 levels of 4-way splits: one call per instruction computes all 64 leaves' pieces
    program = fractal.load_program(conv_program("f32", c=16, o=32, hw=(40, 40)))
    feeds = generate_feeds(program, 9)
    plan = compile_program(program, fractal.build_machine("f1", 3, 4))
    seen = []

    def recording(ins, attrs, tiles, out):
        seen.append(len(tiles))
        LEAF_BATCH_KERNELS["conv2d"](ins, attrs, tiles, out)
    execute_plan(plan, feeds, LEAF_KERNELS, {"conv2d": recording})
    leaves = sum(n for (task, lv), n in level_counts(plan).items() if lv == 3)
    assert seen == [leaves] and leaves >= 16


def test_scratch_chunks_keep_the_order_of_partials(monkeypatch):
    # a table run in chunks of a few leaves' products gives what one call gives
    program = fractal.load_program(conv_program("f16", c=48, o=16, hw=(12, 12)))
    feeds = generate_feeds(program, 10)
    whole = runs(program, ("tiny",), feeds)[0]["y"]
    monkeypatch.setattr(batch_kernels, "SCRATCH_ELEMENTS", 64)
    assert equal(runs(program, ("tiny",), feeds)[0]["y"], whole)


@pytest.mark.parametrize("dt, bits, emin, top", [("f16", 11, -13, 65504.0),
                                                 ("bf16", 8, -125, float(np.finfo(BF16).max))])
def test_narrow_rounds_as_the_type_casts(dt, bits, emin, top):
    # ties to even, subnormals, overflow to inf, around the largest finite value
    rng = np.random.default_rng(0)
    target = np.float16 if dt == "f16" else BF16
    tiny, big = float(np.finfo(target).smallest_subnormal), float(np.finfo(target).max)
    ulp = 2.0 ** (1 - bits)
    edges = [tiny / 2, tiny * 1.5, tiny * 2.5, tiny * 3.5, tiny * 0.75, big, big * (1 + ulp / 2),
             big * (1 + ulp / 4), tiny * 2 ** 7 * (1 + ulp / 2), tiny * 2 ** 10 * (1 + 3 * ulp / 2),
             1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2**-40, -(1 + ulp / 2), 0.0, -0.0]
    # and one float32 bit pattern in 8,191 of all of them (every exponent, both signs, NaN)
    spread = np.arange(0, 1 << 32, 8191, dtype=np.uint64).astype(np.uint32).view(np.float32)
    xs = np.concatenate([edges, rng.standard_normal(20000) * 10.0 ** rng.integers(-9, 6, 20000),
                         tiny * rng.uniform(-2**12, 2**12, 5000)])      # subnormal and near
    with np.errstate(over="ignore", invalid="ignore"):  # beyond top: inf; signaling NaNs
        xs = np.concatenate([xs.astype(np.float32), spread]).astype(np.float64)  # as kernels
        want = xs.astype(np.float32).astype(target).astype(np.float64)          # round them
    got = np.array([narrow(v, bits, emin, top) for v in xs])
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def check_matmul(dt, program, feeds, machine, batched, per_leaf, want) -> None:
    """A batched matmul's output `c`: the per-leaf path's bit for bit on one level (and for i8
    everywhere), except in f32, where a batch whose regions sum the whole of K is one product
    per batch element (`_whole_sums`), its float32 sums in BLAS's order for that shape: within
    the bound of a sum in any order; the float64 product `want` exactly for i8 and closely for
    f32, the reference's at its tolerance for f16 and bf16."""
    if dt == "f32" and machine in ONE_LEVEL:
        a, b = (np.abs(feeds[k].astype(np.float64)) for k in "ab")
        within_sum_order(batched["c"], per_leaf["c"], a @ b, feeds["a"].shape[-1])
    elif machine in ONE_LEVEL or dt == "i8":
        assert equal(batched["c"], per_leaf["c"]), machine
    if dt == "i8":
        np.testing.assert_array_equal(batched["c"], want)
    elif dt == "f32":
        np.testing.assert_allclose(batched["c"], want, rtol=1e-5, atol=1e-5)
    else:
        assert_same_outputs(batched, run_reference(program, feeds))


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i8"])
def test_batched_matmul_batches_equal_the_leaves(dt):
    # batch axes broadcast from a size-1 axis and from a missing one
    acc = "i32" if dt == "i8" else dt
    program = fractal.load_program(
        f"tensor a : {dt}[3, 1, 20, 72] input\ntensor b : {dt}[4, 72, 24] param\n"
        f"tensor c : {acc}[3, 4, 20, 24] output\nmatmul c, a, b\n")
    feeds = generate_feeds(program, 11)
    a, b = (feeds[k].astype(np.float64) for k in "ab")
    want = a @ b
    for machine in ONE_LEVEL + DEEPER[:2]:
        batched, per_leaf, calls = runs(program, machine, feeds)
        assert calls == {"matmul": 1}
        check_matmul(dt, program, feeds, machine, batched, per_leaf, want)


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i8"])
@pytest.mark.parametrize("a_shape, b_shape", [((128, 64), (2, 64, 32)),
                                              ((1, 1, 20, 72), (4, 72, 24)),
                                              ((20, 40), (3, 1, 40, 8))])
def test_a_matmul_whose_a_every_batch_element_shares_batches_equal_the_leaves(dt, a_shape, b_shape):
    # one A for the whole batch: a leaf multiplies it with its batch elements' B side by side;
    # the leaves cover the batch whole (B and C read in place) or in parts (gathered)
    acc = "i32" if dt == "i8" else dt
    out_shape = np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1])
    shape = lambda s: ", ".join(map(str, s))           # noqa: E731
    program = fractal.load_program(
        f"tensor a : {dt}[{shape(a_shape)}] input\ntensor b : {dt}[{shape(b_shape)}] param\n"
        f"tensor c : {acc}[{shape(out_shape)}] output\nmatmul c, a, b\n")
    feeds = generate_feeds(program, 12)
    want = feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64)
    batch = int(np.prod(out_shape[:-2]))
    boxes = Counter()

    def recording(ins, attrs, tiles, out):
        lo = -2 * out.ndim - 1                  # C's region, then the first-partial flag
        extents = tiles[:, lo + 1:-4:2] - tiles[:, lo:-5:2]  # its batch dimensions
        boxes.update(np.prod(extents, axis=1) == batch)
        LEAF_BATCH_KERNELS["matmul"](ins, attrs, tiles, out)
    for machine in ONE_LEVEL + DEEPER:
        plan = compile_program(program, fractal.build_machine(*machine))
        batched = execute_plan(plan, feeds, LEAF_KERNELS, {"matmul": recording})
        per_leaf = execute_plan(plan, feeds, LEAF_KERNELS)
        check_matmul(dt, program, feeds, machine, batched, per_leaf, want)
    assert boxes[True] and boxes[False], boxes          # both kinds of leaf ran


@pytest.mark.parametrize("b_region", [(3, 8), (4, 8)])
def test_a_leaf_that_pads_inside_the_image_keeps_its_own_im2col(b_region):
    # two leaves side by side on one band of output rows: the right one's X region either holds
    # every column its outputs read (3..8, the band's im2col serves both) or stops short of
    # column 3, which the leaf then reads as padding (4..8, its own im2col); oracle: each leaf's
    # convolution of X masked to its region, over its outputs
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    leaves = [((0, 5), (0, 4)), (b_region, (4, 8))]      # X columns, output columns
    tiles = np.array([[0, 1, 0, 4, 0, 8, *xw, 0, 6, 0, 4, 0, 3, 0, 3, 0, 1, 0, 6, 0, 8, *yw, 1]
                      for xw, yw in leaves], np.int64)
    out = np.zeros((1, 6, 8, 8), np.float32)
    LEAF_BATCH_KERNELS["conv2d"]([x, w], {"stride": 1, "pad": 1}, tiles, out)
    want = np.zeros((1, 6, 8, 8))
    for (x0, x1), (y0, y1) in leaves:
        masked = np.zeros_like(x)
        masked[..., x0:x1] = x[..., x0:x1]
        want[..., y0:y1] = oracle_conv(masked, w, 1, (1, 1, 1, 1))[..., y0:y1]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _channel_partials(order, n_out=5, kernel=3):
    """A conv2d tile table (1 image, 8 input channels, 6x6, 3x3 pad 1 when kernel is 3): one
    output region summed over four partials of two input channels each, in the order `order`."""
    pad_hw = (0, 6, 0, 6)
    return np.array([[0, 1, 2 * k, 2 * k + 2, *pad_hw, 0, n_out, 2 * k, 2 * k + 2, 0, kernel, 0, kernel,
                      0, 1, 0, n_out, *pad_hw, int(i == 0)] for i, k in enumerate(order)], np.int64)


@pytest.mark.parametrize("order, joined", [((0, 1, 2, 3), True), ((0, 2, 1, 3), False)])
def test_a_region_s_channel_partials_are_one_product_in_f32(order, joined):
    # partials over consecutive input channels, in plan order, are one row summing all eight
    # channels; out of order they stay apart; oracle: the float64 convolution
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((5, 8, 3, 3)).astype(np.float32)
    tiles = _channel_partials(order)
    rows = join_partials(tiles, groups(tiles, 16, 24), 2, 10)
    if joined:
        assert rows.tolist() == [[0, 1, 0, 8, 0, 6, 0, 6, 0, 5, 0, 8, 0, 3, 0, 3,
                                  0, 1, 0, 5, 0, 6, 0, 6, 1]]
    else:
        assert np.array_equal(rows, tiles)
    out = np.zeros((1, 5, 6, 6), np.float32)
    LEAF_BATCH_KERNELS["conv2d"]([x, w], {"stride": 1, "pad": 1}, tiles, out)
    np.testing.assert_allclose(out, oracle_conv(x, w, 1, (1, 1, 1, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt, want", [("f16", 2048.0), ("bf16", 256.0), ("f32", 2051.0)])
def test_narrow_partials_are_rounded_each_as_the_machine_does(dt, want):
    # a 1x1 convolution of one pixel summed over four input-channel partials in plan order:
    # X = 1, W = (2048, 1, 1, 1) (bf16: (256, 1, 1, 1)). Rounded to f16 after each partial,
    # 2048 + 1 = 2049 is a tie between 2048 and 2050 and goes to the even 2048, three times;
    # bf16 alike at 256 (spacing 2); in f32 the partials join and the sum is exact
    x = np.ones((1, 8, 6, 6), NP_DTYPES[dt])
    w = np.zeros((5, 8, 1, 1), np.float32)
    w[:, 0:2] = (256.0 if dt == "bf16" else 2048.0) / 2    # channels 0, 1 of the first partial
    w[:, 2], w[:, 4], w[:, 6] = 1.0, 1.0, 1.0
    out = np.zeros((1, 5, 6, 6), NP_DTYPES[dt])
    LEAF_BATCH_KERNELS["conv2d"]([x, w.astype(NP_DTYPES[dt])], {"stride": 1, "pad": 0},
                                 _channel_partials((0, 1, 2, 3), kernel=1), out)
    assert np.all(out.astype(np.float64) == want)


@pytest.mark.parametrize("dt", ["f32", "i8"])
@pytest.mark.parametrize("units_each", [0, 1000])
def test_conv2d_batches_in_parts_by_units_or_by_output_channels(monkeypatch, dt, units_each):
    # three parts share out the units (units_each 0) or each unit's output channels (1000),
    # on small units (16 columns); oracle: the direct convolution
    monkeypatch.setattr(batch_kernels, "PARALLEL_MACS", 0)
    monkeypatch.setattr(batch_kernels, "UNIT_COLUMNS", 16)
    monkeypatch.setattr(batch_kernels, "UNITS_EACH", units_each)
    monkeypatch.setattr(batch_kernels.numba.config, "NUMBA_NUM_THREADS", 3)
    program = fractal.load_program(conv_program(dt, c=24, o=20, hw=(17, 15)))
    feeds = generate_feeds(program, 9)
    want = oracle_conv(feeds["x"], feeds["w"], 1, (1, 1, 1, 1))
    for machine in ONE_LEVEL + DEEPER[2:]:
        batched = runs(program, machine, feeds)[0]["y"]
        if dt == "i8":
            np.testing.assert_array_equal(batched, want)
        else:
            np.testing.assert_allclose(batched.astype(np.float64), want, rtol=1e-5, atol=1e-5)


def _matmul_table(regions):
    """A matmul tile table padded to six dimensions (A [40, 300], B [300, 36], C [40, 36]): per
    row, (m0, m1, k0, k1, n0, n1, first)."""
    whole = [0, 1] * 4
    return np.array([whole + [m0, m1, k0, k1] + whole + [k0, k1, n0, n1] + whole + [m0, m1, n0, n1, first]
                     for m0, m1, k0, k1, n0, n1, first in regions], np.int64)


@pytest.mark.parametrize("regions, whole", [
    ([(0, 20, 0, 150, 0, 36, 1), (0, 20, 150, 300, 0, 36, 0), (20, 40, 0, 300, 0, 36, 1)], True),
    ([(0, 20, 0, 150, 0, 36, 1), (20, 40, 0, 300, 0, 36, 1)], False),      # half of K
    ([(0, 20, 150, 300, 0, 36, 1), (0, 20, 0, 150, 0, 36, 0)], False),     # K out of order
    ([(0, 40, 0, 300, 0, 36, 0)], False),                                   # added to the output
    ([(0, 20, 0, 300, 0, 36, 1)], False)])                                  # half of the output
def test_a_matmul_batch_is_one_product_where_its_regions_sum_the_whole_of_k(regions, whole):
    assert _whole_sums(_matmul_table(regions), 300, 40 * 36) is whole


@pytest.mark.parametrize("dt", ["f32", "i8"])
def test_matmul_batches_in_parts_match_the_oracle(monkeypatch, dt):
    # three parts (one product in parts of rows in f32, regions in i8); oracle: float64 product
    monkeypatch.setattr(batch_kernels, "PARALLEL_MACS", 0)
    monkeypatch.setattr(batch_kernels.numba.config, "NUMBA_NUM_THREADS", 3)
    acc = "i32" if dt == "i8" else dt
    program = fractal.load_program(f"tensor a : {dt}[2, 40, 300] input\ntensor b : {dt}[300, 36] param\n"
                                   f"tensor c : {acc}[2, 40, 36] output\nmatmul c, a, b\n")
    feeds = generate_feeds(program, 13)
    want = feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64)
    for machine in ONE_LEVEL + DEEPER:
        batched = runs(program, machine, feeds)[0]["c"]
        if dt == "i8":
            np.testing.assert_array_equal(batched, want)
        else:
            np.testing.assert_allclose(batched.astype(np.float64), want, rtol=1e-5, atol=1e-5)
