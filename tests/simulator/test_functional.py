"""Functional mode: the leaves' numba kernels, driven by the plan, give the reference's outputs;
the run report carries the fields scripts rely on and obeys its invariants."""
from pathlib import Path

import pytest

import fractal
from isa import InternalError, load_program
from isa.checker import program_ops
from isa.reference import generate_feeds, run_reference
from simulator.report import check_report
from tests.compiler.test_decompose import assert_same_outputs

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"

#: 1 leaf, 6 leaves (non-power-of-two), 125 leaves, 4096 leaves, and the tiny test machine
SHAPES = [("f1", 1, 1), ("f1", 2, (2, 3)), ("f1", 3, 5), ("f1", 3, 16), ("tiny", None, None)]
#: programs of more ops (full-size VGG-16, ResNet-18, AlexNet) run timing-only here; small
#: variants of them run functionally in tests/workloads
HEAVY_OPS = 10**9


@pytest.mark.parametrize("name", sorted(p.stem for p in PROGRAMS.glob("*.fasm")))
def test_functional_outputs_equal_the_reference(name):
    program = load_program(PROGRAMS / f"{name}.fasm")
    if name == "lstm":
        # 8 recurrent f16 steps compound rounding past one step's tolerance; the f32 program
        # checks the decomposition here, tests/workloads/test_workload_runs.py the f16 one
        from fractal.workloads import generate
        program = fractal.load_program(generate("lstm", dtype="f32"))
    if program_ops(program) > HEAVY_OPS:
        assert fractal.run(program, "f1", functional=False).ops == program_ops(program)
        return
    want = run_reference(program, generate_feeds(program, 2))
    for preset, depth, fanout in SHAPES:
        if name == "alexnet_block" and preset == "tiny":
            continue        # 4 KiB leaves would cut a 224x224 image into ~10^5 pieces
        machine = fractal.build_machine(preset, depth, fanout)
        report = fractal.run(program, machine, seed=2)
        assert_same_outputs(report.outputs, want)


def test_run_report_fields():
    r = fractal.run(PROGRAMS / "mlp.fasm", "tiny", functional=False)
    j = r.to_json()
    for key in ("cycles", "seconds", "ops", "peak_ops_per_second", "utilization", "energy_joules",
                "traffic_bytes", "leaves", "instructions", "bytes_down", "bytes_up", "reduction_ops"):
        assert key in j
    assert j["leaves"] == 4 and len(j["traffic_bytes"]) == 2
    assert j["seconds"] == pytest.approx(j["cycles"] / 1e9)
    assert j["ops"] == 2 * 64 * 256 * (784 + 10) + 64 * 256
    assert [row["bottleneck"] for row in j["instructions"]] and all(
        row["bottleneck"] in ("compute", "bandwidth", "latency", "reduction") for row in j["instructions"])
    assert sum(row["cycles"] for row in j["instructions"]) == j["cycles"]
    assert not r.outputs


def test_violated_invariant_names_itself():
    r = fractal.run(PROGRAMS / "mlp.fasm", "tiny", functional=False)
    r.utilization = 1.5
    with pytest.raises(InternalError, match="invariant 'utilization is at most 1' violated at "
                                            ".*mlp.fasm on tiny, whole program"):
        check_report(r)
    r = fractal.run(PROGRAMS / "mlp.fasm", "tiny", functional=False)
    r.levels[1]["bytes_in"] = 0
    with pytest.raises(InternalError, match="traffic is at least the compulsory traffic"):
        check_report(r)


def test_trace_is_chrome_trace_json(tmp_path):
    import json
    fractal.run(PROGRAMS / "kmeans_step.fasm", "tiny", functional=False, trace=tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    stages = {e["name"] for e in events if e["ph"] == "X"}
    assert {"ID", "LD", "EX", "WB", "RUN"} <= stages
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
