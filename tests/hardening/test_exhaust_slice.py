"""A seeded slice of the campaign's exhaustion class (tests/fuzz/exhaust.py) on every test run:
each case ends with status 0 or 2 as expected, located, within the resource contract (time and
peak memory measured in a forked child), with strict JSON and no content of files outside the
include rules."""
import numpy as np
import pytest

from tests.fuzz.cases import Case, Outcome, check_case
from tests.fuzz.exhaust import GENERATORS, contract_problems, run_contract

CASES_PER_GENERATOR = 6


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_exhaustion_cases_keep_the_contract(name, tmp_path):
    failures = []
    for i in range(CASES_PER_GENERATOR):
        case = GENERATORS[name](np.random.default_rng([2025, sorted(GENERATORS).index(name), i]))
        outcome, peak = run_contract(case, tmp_path / str(i))
        problems = check_case(case, outcome) + contract_problems(case, outcome, peak)
        if problems:
            failures.append((case.detail, case.argv[:6], problems))
    assert not failures, failures


def test_the_contract_oracle_catches_what_it_should():
    case = Case("exhaust", "hand", ["run", "p.fasm", "--json"], {}, None, "program")
    assert contract_problems(case, Outcome(0, "{}", "", 0.5), 10 * 2**20) == []
    assert contract_problems(case, Outcome(0, "{}", "", 11.0), 0)              # too slow
    assert contract_problems(case, Outcome(0, "{}", "", 0.5), 2 * 2**30)       # too much memory
    assert contract_problems(case, Outcome(0, '{"a": NaN}', "", 0.5), 0)       # not strict
    assert contract_problems(case, Outcome(0, '{"a": Infinity}', "", 0.5), 0)
    assert contract_problems(case, Outcome(2, "", "p.fasm:1:9: error: root:x:0:0", 0.5), 0)
    assert contract_problems(case, Outcome(-2, "", "killed", 0.5), 0)


def test_a_child_that_overruns_is_reported(tmp_path, monkeypatch):
    """The runner itself: a case past its time comes back as a timeout (status -1)."""
    import time

    import fractal.cli
    monkeypatch.setattr(fractal.cli, "main", lambda argv, out: time.sleep(5) or 0)
    case = Case("exhaust", "hand", ["check", "p.fasm"], {}, 2, "program")
    outcome, _ = run_contract(case, tmp_path, seconds=1)
    assert outcome.status == -1 and check_case(case, outcome)


def test_subnormal_frequency_is_a_located_refusal(tmp_path):
    from tests.fuzz.exhaust import MLP
    from machine import preset
    from tests.strategies import machine_toml
    text = machine_toml(preset("tiny"))
    lines = [("frequency_hz = 5e-324" if line.strip().startswith("frequency_hz ") else line)
             for line in text.splitlines()]
    case = Case("exhaust", "hand", ["run", MLP, "--machine", "m.toml", "--timing-only", "--json"],
                {"m.toml": "\n".join(lines).encode()}, 2, "machine")
    outcome, peak = run_contract(case, tmp_path)
    assert check_case(case, outcome) + contract_problems(case, outcome, peak) == []
