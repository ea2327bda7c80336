"""One timing-only run of each shipped program on each preset, shared by the tests that read
it (the golden reports, the estimates against the simulation, the bounds): a program is compiled
and simulated once per machine in a test session, not once per test that looks at it."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import fractal
from isa.errors import UserError
from simulator.run import simulate

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


@lru_cache(maxsize=None)
def timing_run(name: str, machine: str):
    """(plan, report, engine) of programs/<name>.fasm on a preset, symmetric and timing only
    (what `fractal.run(..., functional=False)` gives), or the UserError it raises (a program
    too large for the machine)."""
    try:
        plan = fractal.compile(PROGRAMS / f"{name}.fasm", machine)
        report, engine = simulate(plan, "symmetric", False, None)
    except UserError as e:
        return e
    return plan, report, engine
