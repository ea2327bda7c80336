"""The mapping objective (`--objective cycles|energy|edp`): one energy formula for the compiler's
estimate and the simulator's report, and each objective winning on its own measure."""
import math

import pytest

import fractal
from fractal.cli import main

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("program, saves", [("knn", False), ("lstm", True)])
def test_each_objective_wins_on_its_own_measure(program, saves):
    """On tiny, where the leaves' dynamic energy is not swamped by static power, the energy
    objective's plan never spends more energy than the cycles objective's, and takes at least as
    many cycles (measured by the simulator, not by the estimates that chose them). On lstm the
    two objectives choose different plans and energy's spends less; on knn they choose one."""
    runs = {o: fractal.run(ROOT / "programs" / f"{program}.fasm", "tiny", functional=False,
                           objective=o) for o in ("cycles", "energy", "edp")}
    cyc, en, edp = (runs[o] for o in ("cycles", "energy", "edp"))
    assert en.energy_joules <= cyc.energy_joules
    assert (en.energy_joules < cyc.energy_joules) == saves
    assert cyc.cycles <= en.cycles
    assert edp.energy_joules * edp.cycles <= cyc.energy_joules * cyc.cycles


@pytest.mark.parametrize("objective", ["cycles", "energy"])
def test_the_estimated_dynamic_energy_is_the_simulated_one(objective):
    """The plan's estimate (compiler.energy.node_joules over its nodes) and the report's
    dynamic energy (everything but static power) are one formula, so they agree to rounding."""
    for program in ("mlp", "knn", "cnn"):
        plan = fractal.compile(ROOT / "programs" / f"{program}.fasm", "tiny", objective=objective)
        report = fractal.run(ROOT / "programs" / f"{program}.fasm", "tiny", functional=False,
                             objective=objective)
        dynamic = report.energy_joules - report.energy_breakdown["static"]
        assert math.isclose(sum(r.est_joules for r in plan.roots), dynamic, rel_tol=1e-9)


def test_the_objective_is_reported_and_checked(tmp_path, capsys):
    import io
    import json
    out = io.StringIO()
    assert main(["compile", str(ROOT / "programs" / "mlp.fasm"), "--machine", "tiny",
                 "--objective", "edp", "--json"], out) == 0
    assert json.loads(out.getvalue())["objective"] == "edp"
    assert main(["compile", str(ROOT / "programs" / "mlp.fasm"), "--objective", "power"],
                io.StringIO()) == 2
    assert "--objective" in capsys.readouterr().err
    from isa.errors import UserError
    with pytest.raises(UserError, match="unknown objective"):
        fractal.compile(ROOT / "programs" / "mlp.fasm", "tiny", objective="power")


def test_the_cli_offers_the_compilers_objectives():
    from compiler.decompose import OBJECTIVES
    from fractal.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("run", "compile"):
        action = next(a for a in sub[name]._actions if a.dest == "objective")
        assert tuple(action.choices) == OBJECTIVES
