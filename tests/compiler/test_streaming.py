"""A split child starts while its load streams in, and its parent's write-back streams out as
its slices finish (docs/simulator.md, "A split child starts while its load streams in"): the
slices a schedule reads and finishes, and the lead and drain a parent derives from them, against
hand derivations; and streamed plans against the simulator."""
from __future__ import annotations

import pytest

import fractal
from compiler.reservation import Reservation
from compiler.rules import access_map
from compiler.schedule import Schedule


def _task(text: str):
    """The root task of a one-instruction program."""
    return fractal.compile(fractal.load_program(text), "tiny").roots[0].task


def _matmul(m, n, k):
    return _task(f"tensor c : f32[{m}, {n}] output\ntensor a : f32[{m}, {k}] input\n"
                 f"tensor b : f32[{k}, {n}] input\nmatmul c, a, b\n")


def test_matmul_cut_along_k_reads_its_operands_half_by_half_and_finishes_at_the_end():
    task = _matmul(8, 4, 8)             # C[8, 4] = A[8, 8] B[8, 4], K cut into 2 serial pieces
    s = Schedule(task, access_map(task), [1, 1, 2], [1, 1, 1], broadcast=True)
    # slice 0 (K 0..3): A[8, 4] = 128 bytes, B[4, 4] = 64; slice 1: all of A (256) and B (128)
    assert s.slices() == ((0, (128, 64)), (1, (256, 128)))
    # C does not vary along K (it is summed over it): final only after the last piece
    assert s.results() == ((0, (0,)), (1, (128,)))


def test_matmul_cut_along_m_finishes_its_output_row_block_by_row_block():
    task = _matmul(8, 4, 8)
    s = Schedule(task, access_map(task), [4, 1, 1], [1, 1, 1], broadcast=True)
    # A's rows arrive 2 at a time (2 x 8 x 4 = 64 bytes); B is read whole by the first slice
    assert s.slices() == tuple((i, (64 * (i + 1), 128)) for i in range(4))
    assert s.results() == tuple((i, (32 * (i + 1),)) for i in range(4))


def test_a_windowed_slice_reads_its_halo():
    # y[1, 2, 8, 4] = conv2d(x[1, 2, 8, 4], w[2, 2, 3, 3]), pad 1: Ho cut in two
    task = _task("tensor y : f32[1, 2, 8, 4] output\ntensor x : f32[1, 2, 8, 4] input\n"
                 "tensor w : f32[2, 2, 3, 3] input\nconv2d y, x, w, stride=1, pad=1\n")
    amap = access_map(task)
    ho = [a.name for a in amap.axes].index("Ho")
    pieces = [1] * len(amap.axes)
    pieces[ho] = 2
    s = Schedule(task, amap, pieces, [1] * len(amap.axes), broadcast=True)
    x, w = 1 * 2 * 8 * 4 * 4, 2 * 2 * 3 * 3 * 4
    # output rows 0..3 read input rows 0..4 (row 4 is the halo): 5 of 8 rows; w whole
    (first, need0), (second, need1) = s.slices()
    assert need0 == (x * 5 // 8, w) and need1 == (x, w)
    # y's rows 0..3 are final after the first slice's piece, the rest after the second
    y = 1 * 2 * 8 * 4 * 4
    assert s.results() == ((0, (y // 2,)), (1, (y,)))


def test_lead_waits_for_the_bytes_of_every_slice():
    r = Reservation(cycles=100, intake=((10, (100, 100)), (70, (200, 100))))
    # both operands sent over 60 cycles + 5 latency: slice 0 needs 200 of 300 bytes, which
    # arrive 40 + 5 cycles after the flow starts, 10 cycles into the task: start after 35;
    # slice 1 needs all by 70: 60 + 5 - 70 < 35
    assert r.lead((True, True), 60, 5) == 35
    # the second operand kept from an earlier piece: slice 0 needs 100 of the 200 sent
    assert r.lead((True, False), 60, 5) == 30 + 5 - 10
    assert r.lead((False, False), 60, 5) == 0           # nothing to wait for
    assert Reservation(cycles=100).lead((True, True), 60, 5) == 65   # a leaf: the whole load


def test_drain_sends_each_slice_after_it_is_final():
    # 60 of 100 output bytes final at 40, the rest at 100; a 50-cycle write-back sends the
    # 40 last bytes (20 cycles) after 100, so it ends at 120 and starts at 70
    r = Reservation(cycles=100, outflow=((40, (60,)), (100, (100,))))
    assert r.drain(50) == 70
    assert Reservation(cycles=100).drain(50) == 100     # a leaf: after its end


CONV = """tensor x : f16[32, 256, 56, 56] input
tensor w : f16[256, 256, 3, 3] input
tensor y : f16[32, 256, 56, 56] output
conv2d y, x, w, stride=1, pad=1
"""


def test_streamed_plans_match_their_estimate_in_both_modes():
    program = fractal.load_program(CONV.replace("32, 256, 56, 56", "2, 64, 28, 28")
                                   .replace("256, 256, 3, 3", "64, 64, 3, 3"))
    plan = fractal.compile(program, "f1")
    assert any(n.stream for n in plan.table.values())
    symmetric = fractal.run(program, "f1", functional=False)
    assert symmetric.cycles == round(plan.roots[0].est_cycles)
    exact = fractal.run(program, "f1", functional=False, exact=True)
    assert exact.cycles == symmetric.cycles


def test_streaming_never_costs_the_root_cycles(monkeypatch):
    """The root keeps the fewer cycles of its two runs: this conv takes fewer cycles than with
    streaming turned off everywhere (here strictly fewer)."""
    import compiler.decompose as decompose
    program = fractal.load_program(CONV.replace("32, 256, 56, 56", "2, 64, 28, 28")
                                   .replace("256, 256, 3, 3", "64, 64, 3, 3"))
    streamed = fractal.run(program, "f1", functional=False).cycles
    monkeypatch.setattr(decompose, "streams", lambda schedule, timing: False)
    plain = fractal.run(program, "f1", functional=False).cycles
    assert streamed < plain
