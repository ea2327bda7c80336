"""Timing: exact event traces derived by hand, behaviour under parameter changes, and the exact
and symmetric modes agreeing."""
from dataclasses import replace
from pathlib import Path

import pytest

from compiler import compile_program
from machine import machine_from_dict, preset
from isa import load_program, parse_program
from simulator.engine import Engine
from simulator.run import simulate

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def hand_machine(**leaf_compute):
    """Root: fan-out 2, 8 B/cycle memory port, decode 5, LFU 4 ops/cycle.
    Leaf: 4 B/cycle link with latency 10, decode 2, 8 MAC-class ops/cycle, 1 KiB memory."""
    compute = {"mac_ops_per_cycle": 8, "elementwise_ops_per_cycle": 1, "compare_ops_per_cycle": 1,
               "mac_pj_per_op": 1, "elementwise_pj_per_op": 1, "compare_pj_per_op": 1, **leaf_compute}
    return machine_from_dict({"name": "hand", "frequency_hz": 1e9, "level": [
        {"name": "root", "fanout": 2, "memory_bytes": 1 << 20, "memory_bandwidth": 8,
         "link_bandwidth": 8, "link_latency": 0, "decode_cycles": 5, "lfu_ops_per_cycle": 4,
         "memory_pj_per_byte": 1, "link_pj_per_byte": 1, "static_watts": 0},
        {"name": "leaf", "memory_bytes": 1024, "memory_bandwidth": 1024, "link_bandwidth": 4,
         "link_latency": 10, "decode_cycles": 2, "lfu_ops_per_cycle": 1, "memory_pj_per_byte": 1,
         "link_pj_per_byte": 1, "static_watts": 0, "compute": compute}]})


MATMUL = ("tensor a : f32[2, 8] input\ntensor b : f32[8, 4] param\ntensor c : f32[2, 4] output\n"
          "matmul c, a, b\n")


def test_matmul_trace_on_two_levels_by_hand():
    """C[2,4] = A[2,8] B[8,4] on the hand machine.

    The root splits K in two (each leaf: A[2,4] 32 B + B[4,4] 64 B in, C[2,4] 32 B out); splitting
    M instead would broadcast B (128 B) but put 160 B on each leaf's link, 40 cycles against 24.
      ID  root decode                                    0 ->  5
      LD  port 192 B / 8 = 24, link 96 B / 4 = 24; + 10   5 -> 39
      ID  leaf decode                                    39 -> 41
      RUN 2*2*4*4 = 64 ops / 8 per cycle = 8             41 -> 49
      WB  port 64 B / 8 = 8, link 32 B / 4 = 8; + 10     49 -> 67
      RD  8 outputs x (2 partials - 1) / 4 per cycle = 2 67 -> 69
    """
    plan = compile_program(parse_program(MATMUL, "mm.fasm"), hand_machine())
    assert [(s.name, s.pieces, s.ways) for s in plan.roots[0].splits] == [
        ("M", 1, 1), ("N", 1, 1), ("K", 1, 2)]
    engine = Engine(plan, "exact", trace=True)
    assert engine.instruction_cycles() == [69]
    got = sorted((e.start, e.end, e.node, e.stage) for e in engine.events if e.value is None)
    assert got == [
        (0, 5, "0", "ID"), (5, 39, "0", "LD"), (39, 41, "0.0", "ID"), (39, 41, "0.1", "ID"),
        (39, 49, "0", "EX"), (41, 49, "0.0", "RUN"), (41, 49, "0.1", "RUN"), (49, 67, "0", "WB"),
        (67, 69, "0", "RD")]
    assert Engine(plan, "symmetric").instruction_cycles() == [69]


def test_pieces_overlap_in_the_pipeline():
    """Two serial pieces: the second loads while the first executes, so the total is less than
    twice one piece, and never less than the busiest stage twice."""
    text = ("tensor a : f32[4, 64] input\ntensor b : f32[64, 8] param\ntensor c : f32[4, 8] output\n"
            "matmul c, a, b\n")
    m = hand_machine()
    m = replace(m, levels=(m.levels[0], replace(m.levels[1], memory_bytes=1200)))
    plan = compile_program(parse_program(text, "p.fasm"), m)
    root = plan.roots[0]
    assert root.pieces >= 2
    engine = Engine(plan, "exact", trace=True)
    total = engine.instruction_cycles()[0]
    ld = [e for e in engine.events if e.node == "0" and e.stage == "LD"]
    ex = [e for e in engine.events if e.node == "0" and e.stage == "EX"]
    assert ld[1].start < ex[0].end          # piece 1 loads while piece 0 executes
    serial = sum(e.end - e.start for e in engine.events if e.node == "0" and e.value is None)
    assert total < serial


def _cycles(program, machine):
    return simulate(compile_program(program, machine))[0].cycles


BIG_MATMUL = parse_program("tensor a : f32[512, 512] input\ntensor b : f32[512, 512] param\n"
                           "tensor c : f32[512, 512] output\nmatmul c, a, b\n", "big.fasm")


def test_doubling_leaf_throughput_nearly_halves_a_compute_bound_matmul():
    m = preset("f1")
    slow = replace(m, compute=replace(m.compute, mac_ops_per_cycle=128))
    fast = replace(m, compute=replace(m.compute, mac_ops_per_cycle=256))
    report = simulate(compile_program(BIG_MATMUL, slow))[0]
    assert report.instructions[0].bottleneck == "compute"
    ratio = _cycles(BIG_MATMUL, fast) / report.cycles
    assert 0.5 <= ratio <= 0.6, ratio


def test_halving_link_bandwidth_nearly_doubles_a_bandwidth_bound_add():
    program = parse_program("tensor a : f32[1024, 1024] input\ntensor b : f32[1024, 1024] input\n"
                            "tensor c : f32[1024, 1024] output\nadd c, a, b\n", "add.fasm")
    m = preset("f1")
    def with_links(scale):
        return replace(m, levels=tuple(replace(lv, link_bandwidth=lv.link_bandwidth * scale,
                                               memory_bandwidth=lv.memory_bandwidth * scale)
                                       for lv in m.levels))
    report = simulate(compile_program(program, with_links(1.0)))[0]
    assert report.instructions[0].bottleneck == "bandwidth"
    ratio = _cycles(program, with_links(0.5)) / report.cycles
    assert 1.8 <= ratio <= 2.05, ratio


def test_adding_leaves_never_slows_a_large_matmul():
    """f1 with 64 MAC-class ops per leaf per cycle, so that compute bounds a 1024^3 matmul until
    the root's memory port does: from 1 to 4096 leaves, every step is at least as fast."""
    program = parse_program("tensor a : f32[1024, 1024] input\ntensor b : f32[1024, 1024] param\n"
                            "tensor c : f32[1024, 1024] output\nmatmul c, a, b\n", "mm.fasm")
    base = preset("f1")
    weak = replace(base, compute=replace(base.compute, mac_ops_per_cycle=64))
    previous = None
    for depth, fanout in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (2, 5), (2, 8), (3, 8),
                          (4, 8)]:
        cycles = _cycles(program, weak.rescaled(depth, fanout))
        if previous is not None:
            assert cycles <= previous, (depth, fanout, cycles, previous)
        previous = cycles


# alexnet_block runs on f1 and f100 only: on tiny it is thousands of 4 KiB pieces per leaf
@pytest.mark.parametrize("name, machine", [
    (name, machine) for name in ["mlp", "cnn", "kmeans_step", "knn", "elementwise", "alexnet_block"]
    for machine in ["tiny", "f1", "f100", "tiny-3x5"]
    if not (name == "alexnet_block" and machine.startswith("tiny"))])
def test_exact_and_symmetric_modes_agree(name, machine):
    m = preset("tiny").rescaled(2, (3, 5)) if machine == "tiny-3x5" else preset(machine)
    plan = compile_program(load_program(PROGRAMS / f"{name}.fasm"), m)
    sym, _ = simulate(plan, "symmetric")
    exact, _ = simulate(plan, "exact")
    assert [i.cycles for i in sym.instructions] == [i.cycles for i in exact.instructions]
    assert sym.traffic_bytes == exact.traffic_bytes
    assert sym.energy_joules == exact.energy_joules


def test_utilization_and_energy_are_consistent():
    r = simulate(compile_program(BIG_MATMUL, preset("f1")))[0]
    assert r.ops == 2 * 512 ** 3
    assert r.utilization == pytest.approx(r.ops / (r.cycles * preset("f1").peak_ops_per_cycle))
    assert r.energy_breakdown["compute"] == pytest.approx(r.ops * 0.3e-12)
    assert r.energy_breakdown["static"] == pytest.approx(24.0 * r.seconds)
    assert r.energy_joules == pytest.approx(sum(r.energy_breakdown.values()))


def test_pipeline_matches_the_closed_form_when_execute_bound():
    """With one child, no latency and execution slower than a load plus a store, consecutive
    pieces execute back to back, and the per-level formula is exact:
        cycles = decode + load (fill) + N x execute + store (drain)."""
    compute = {"mac_ops_per_cycle": 8, "elementwise_ops_per_cycle": 0.25,
               "compare_ops_per_cycle": 1, "mac_pj_per_op": 1, "elementwise_pj_per_op": 1,
               "compare_pj_per_op": 1}
    m = machine_from_dict({"name": "line", "frequency_hz": 1e9, "level": [
        {"fanout": 1, "memory_bytes": 1 << 20, "memory_bandwidth": 4, "link_bandwidth": 4,
         "link_latency": 0, "decode_cycles": 7, "lfu_ops_per_cycle": 1, "memory_pj_per_byte": 1,
         "link_pj_per_byte": 1, "static_watts": 0},
        {"memory_bytes": 1024, "memory_bandwidth": 1 << 16, "link_bandwidth": 4, "link_latency": 0,
         "decode_cycles": 0, "lfu_ops_per_cycle": 1, "memory_pj_per_byte": 1,
         "link_pj_per_byte": 1, "static_watts": 0, "compute": compute}]})
    program = parse_program("tensor x : f32[1024] input\ntensor y : f32[1024] output\n"
                            "relu y, x\n", "line.fasm")
    plan = compile_program(program, m)
    root = plan.roots[0]
    n = root.pieces
    piece = 1024 // n
    assert 1024 % n == 0 and 2 * 4 * piece <= 512          # even pieces that fit half of 1 KiB
    load = store = 4 * piece // 4                           # bytes over a 4 B/cycle port and link
    execute = int(piece / 0.25)                             # the leaf's element-wise rate
    assert execute >= load + store
    assert Engine(plan, "exact").instruction_cycles() == [7 + load + n * execute + store]


def test_node_runs_are_reused_only_for_equal_plans(monkeypatch):
    """A design-space search hands the engine the node runs of earlier simulations (`known`): a
    node whose plan is equal to one run before is not simulated again, one whose plan differs
    is, and either way the report is a fresh simulation's."""
    import simulator.engine as engine
    m, program = preset("tiny"), load_program(PROGRAMS / "lstm.fasm")
    fast, lean = compile_program(program, m), compile_program(program, m, objective="energy")
    changed = [k for k, node in lean.table.items() if fast.table.get(k) != node]
    assert changed, "the two objectives plan some node of this program differently"
    fresh = {id(p): simulate(p)[0].to_json() for p in (fast, lean)}
    known: dict = {}
    simulate(fast, known=known)
    ran = []
    node_run = engine.NodeRun.__init__

    def counted(self, eng, env, node, path):
        ran.append((node.task, node.level))
        node_run(self, eng, env, node, path)
    monkeypatch.setattr(engine.NodeRun, "__init__", counted)
    for plan, simulated in ((fast, []), (lean, changed)):
        ran.clear()
        report, _ = simulate(plan, known=known)
        assert sorted(ran, key=str) == sorted(simulated, key=str)
        got, want = report.to_json(), fresh[id(plan)]
        assert {**got, "wall_seconds": 0} == {**want, "wall_seconds": 0}
