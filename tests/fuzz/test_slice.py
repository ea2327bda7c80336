"""A seeded slice of the reliability campaign (scripts/campaign.py) on every test run: each kind
of generated case, run in process, breaks no property; a few run through a real subprocess."""
import numpy as np
import pytest

from tests.fuzz.cases import KINDS, Case, check_case, make_case, run_case

CASES_PER_KIND = 30


@pytest.mark.parametrize("kind", KINDS)
def test_generated_cases_keep_every_property(kind, tmp_path):
    failures = []
    for i in range(CASES_PER_KIND):
        case = make_case(np.random.default_rng([2024, KINDS.index(kind), i]), kind)
        outcome = run_case(case, tmp_path / str(i))
        problems = check_case(case, outcome)
        if problems:
            failures.append((case.detail, case.argv, problems))
    assert not failures, failures


@pytest.mark.parametrize("kind", ["program", "data", "args"])
def test_real_subprocess_shows_no_traceback(kind, tmp_path):
    for i in range(2):
        case = make_case(np.random.default_rng([7, KINDS.index(kind), i]), kind)
        outcome = run_case(case, tmp_path / str(i), real=True)
        assert check_case(case, outcome) == [], (case.argv, outcome.stderr)


def test_the_checker_catches_what_it_should(tmp_path):
    """The properties themselves fail on bad outcomes (the oracle is not vacuous)."""
    from tests.fuzz.cases import Outcome
    case = Case("program", "hand", ["check", "p.fasm"], {}, None, "program")
    assert check_case(case, Outcome(0, "", "", 0.1)) == []
    assert check_case(case, Outcome(2, "", "p.fasm:2:5: error: unknown opcode 'x'", 0.1)) == []
    assert check_case(case, Outcome(2, "", "error: unknown opcode 'x'", 0.1))
    assert check_case(case, Outcome(2, "", "--machine: error: bad", 0.1))
    assert check_case(case, Outcome(3, "", "internal error: ValueError: x", 0.1))
    assert check_case(case, Outcome(0, "", "a.py:4: RuntimeWarning: overflow in exp", 0.1))
    assert check_case(case, Outcome(2, "Traceback (most recent call last):\n", "p.fasm:1:1: error: x", 0.1))
    data = Case("data", "hand", [], {}, 2, "data")
    assert check_case(data, Outcome(2, "", "--input x=a.npy: error: x expects f32", 0.1)) == []
    assert check_case(data, Outcome(0, "", "", 0.1))          # expected 2
    model = Case("onnx", "hand", ["import", "m.onnx"], {}, None, "onnx")
    assert check_case(model, Outcome(2, "", "m.onnx: error: node 'e' (Erf): x", 0.1)) == []
    assert check_case(model, Outcome(2, "", "m.fasm: error: x", 0.1))
    rep = Case("valid", "hand", [], {}, 0, "any", repeat=True)
    same = '{\n  "cycles": 5,\n  "wall_seconds": 0.1\n}'
    other = '{\n  "cycles": 5,\n  "wall_seconds": 0.7\n}'
    assert check_case(rep, Outcome(0, same, "", 0.1, other)) == []
    assert check_case(rep, Outcome(0, same, "", 0.1, other.replace("5", "6")))


def test_hypothesis_strategies_give_runnable_programs_and_machines():
    """The hypothesis wrappers of the generators: leaves agree with the reference."""
    from hypothesis import given, settings

    from fractal import api
    from tests.fuzz.cases import compare_outputs
    from tests.strategies import machines, programs

    from hypothesis import assume

    from compiler import CompileError

    @settings(max_examples=15, deadline=None, database=None, derandomize=True)
    @given(programs(), machines(max_leaves=64, huge=True))
    def prop(program, machine):
        try:
            report = api.run(program, machine, seed=1)
        except CompileError:        # the smallest leaf memories may be too small: a located refusal
            assume(False)
        assert compare_outputs(report.outputs, api.reference(program, seed=1).outputs) == []
    prop()
