"""Attainable bounds: floors derived by hand here, a bound that never depends on the plan, the
invariant that no run beats its bound, and the bound reported by compile and run. That no
shipped program beats its bound on tiny, f1 and f100 is checked beside the estimates, on the
same runs (tests/golden/test_estimates.py)."""
import math
from dataclasses import replace

import pytest

import fractal
from compiler.bounds import instruction_bound, pebbling_words
from compiler.rules import task_of
from isa import parse_program
from isa.checker import opcode_table
from isa.errors import InternalError
from machine import preset
from simulator import report as report_module


def root_task(text: str):
    prog = parse_program(text, "t.fasm")
    return task_of(prog.instructions[0], prog.types, opcode_table(prog))


def floors(text: str, machine) -> dict:
    return dict(instruction_bound(root_task(text), machine).floors)


MATMUL = ("tensor a : f32[{m}, {k}] input\ntensor b : f32[{k}, {n}] input\n"
          "tensor c : f32[{m}, {n}] output\nmatmul c, a, b\n")
N = 65_536
ADD = (f"tensor x : f32[{N}] input\ntensor y : f32[{N}] input\ntensor z : f32[{N}] output\n"
       "add z, x, y\n")


def tiny_leaf(**changes):
    m = preset("tiny")
    return replace(m, levels=(m.levels[0], replace(m.levels[1], **changes)))


def test_compute_floor_is_the_ops_over_every_leaf_at_its_rate():
    """tiny: 4 leaves of 32 mac ops/cycle; a 64x784x256 matmul is 2 x 64 x 784 x 256 =
    25,690,112 ops: 200,704 cycles at the least."""
    f = floors(MATMUL.format(m=64, k=784, n=256), preset("tiny"))
    assert f["compute"] == 25_690_112 / (4 * 32) == 200_704


def test_compute_floor_counts_the_best_fill_of_the_array():
    """A 32x32 array (2,048 ops/cycle) given K = 16: at most half its rows are ever busy."""
    m = preset("tiny")
    m = replace(m, compute=replace(m.compute, mac_array=(32, 32), mac_ops_per_cycle=2048.0))
    f = floors(MATMUL.format(m=64, k=16, n=64), m)
    assert f["compute"] == pytest.approx(2 * 64 * 16 * 64 / (4 * 2048 * 0.5))


def test_link_floor_of_an_add_on_slow_leaf_links():
    """Each of 4 leaves receives at least a quarter of both inputs over a 1 byte/cycle link:
    2 x 65,536 x 4 / 4 = 131,072 cycles. The root port (64 B/cycle) carries in and out,
    786,432 bytes: 12,288 cycles; every leaf reads and writes its quarter through its own
    32 B/cycle port: 6,144 cycles."""
    b = instruction_bound(root_task(ADD), tiny_leaf(link_bandwidth=1))
    assert dict(b.floors)["leaf"] == 131_072 and b.bound == "leaf"
    f = floors(ADD, preset("tiny"))      # links of 16 B/cycle: the root's port sets the floor
    assert f["leaf"] == max(131_072 / 16, 786_432 / 64, 786_432 / 4 / 32) == 12_288
    # half duplex: loads and write-backs share the link, 3 x 65,536 x 4 / 4 bytes
    assert floors(ADD, tiny_leaf(link_bandwidth=1, duplex="half"))["leaf"] == 196_608


def test_pebbling_bound_of_irony_toledo_tiskin():
    assert pebbling_words(1e6, 100) == pytest.approx(1e6 / (2 * math.sqrt(2) * 10) - 100)
    assert pebbling_words(10, 1e6) == 0        # everything fits: no capacity-driven traffic
    assert pebbling_words(1e6, 100, reuse=4) == pytest.approx(1e6 / (2 * math.sqrt(2) * 20) - 100)


def test_capacity_sets_the_link_floor_of_a_large_matmul():
    """1024^3 f32 on tiny: each leaf (4 KiB, 1,024 words) does 2^30 / 4 multiply-adds, so it
    moves at least 2^28 / (2 sqrt 2 x 32) - 1,024 words, 4 bytes each, half each way over its
    16 B/cycle link: far above the compulsory quarter of the inputs (2 MiB / 16)."""
    q = (2**28 / (2 * math.sqrt(2) * 32) - 1024) * 4
    f = floors(MATMUL.format(m=1024, k=1024, n=1024), preset("tiny"))
    assert f["leaf"] == pytest.approx(max(q / 2 / 16, q / 64))
    assert f["leaf"] > 2 * 1024 * 1024 * 4 / 4 / 16


def test_latency_floor():
    """f1: decodes 20 + 10 + 4, link latencies 150 + 10 each way: 354 cycles."""
    assert floors(ADD, preset("f1"))["latency"] == 20 + 10 + 4 + 2 * (150 + 10)


def test_a_distributed_memory_lowers_the_link_floor():
    """Below a memory interleaved over 4 leaves, a leaf finds a quarter of its bytes at home."""
    m = tiny_leaf(link_bandwidth=1, memory_bytes=1 << 20)
    root = replace(m.levels[0], memory="distributed", memory_share=0.75, bandwidth_share=0.5)
    spread = replace(m, levels=(root, m.levels[1]))
    assert floors(ADD, spread)["leaf"] == 131_072 * 3 / 4


def test_the_bound_does_not_depend_on_the_plan():
    """Two machines that differ only in the pieces a leaf holds in flight (buffering) get
    different plans, and one bound: no floor depends on how the task is cut."""
    prog = parse_program(MATMUL.format(m=64, k=784, n=256), "t.fasm")
    a = fractal.compile(prog, preset("tiny"))
    b = fractal.compile(prog, tiny_leaf(buffering=1))
    assert a.roots[0].splits != b.roots[0].splits or a.roots[0].pieces != b.roots[0].pieces
    assert instruction_bound(a.roots[0].task, a.machine) == instruction_bound(b.roots[0].task, b.machine)


def test_runs_report_their_bound_and_never_beat_it():
    r = fractal.run(parse_program(ADD, "add.fasm"), tiny_leaf(link_bandwidth=1), functional=False)
    row = r.instructions[0]
    assert row.bound == "leaf" and row.bound_seconds == pytest.approx(131_072 / 1e9)
    assert row.fraction_of_bound == pytest.approx(131_072 / row.cycles) and row.fraction_of_bound <= 1
    assert r.fraction_of_bound == pytest.approx(r.bound_seconds / r.seconds)
    j = r.to_json()
    assert j["bound"] == "leaf" and 0 < j["fraction_of_bound"] <= 1
    assert j["instructions"][0]["estimated_cycles"] > 0


def test_a_run_faster_than_its_bound_fires_the_invariant(monkeypatch):
    """A fault injected into the report: a bound twice the simulated time."""
    real = report_module.check_report

    def doubled(r):
        r.instructions = [replace(i, fraction_of_bound=2.0) for i in r.instructions]
        real(r)
    monkeypatch.setattr("simulator.run.check_report", doubled)
    with pytest.raises(InternalError, match="no run is faster than its attainable bound"):
        fractal.run(parse_program(ADD, "add.fasm"), preset("tiny"), functional=False)


def test_compile_json_gives_bound_and_estimate():
    from compiler.listing import plan_json
    plan = fractal.compile(parse_program(MATMUL.format(m=64, k=784, n=256), "t.fasm"), preset("tiny"))
    j = plan_json(plan)
    row = j["instructions"][0]
    assert row["bound"] == "compute" and row["bound_cycles"] == 200_704
    assert row["bound_seconds"] == pytest.approx(200_704 / 1e9)
    assert set(row["floors_cycles"]) == {"compute", "leaf", "latency"}
    assert row["estimated_cycles"] == plan.roots[0].est_cycles > 0
    assert j["bound_cycles"] == 200_704 and j["bound"] == "compute"
