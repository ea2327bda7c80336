"""Golden timing reports: every shipped program on `tiny` and `f1` (timing only, symmetric mode):
cycles, utilization and bound of every instruction, the energy by class, and the bytes and
reduction ops of every level. A program too large for a machine pins its compile error instead.

A change to the cost model, the engine, the energy model or a preset shows up here as a diff of
tests/golden/data/reports/; rewrite the files with `--update-golden` once it is reviewed.
"""
from pathlib import Path

import pytest

from tests.suite_runs import timing_run
from isa.errors import UserError

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p.stem for p in (REPO / "programs").glob("*.fasm"))


def e(x: float) -> str:
    return f"{x:.6e}"


def report_text(report) -> str:
    lines = [f"{report.program} on {report.machine}: {report.leaves} leaves",
             f"cycles {report.cycles}", f"ops {report.ops}",
             f"utilization {e(report.utilization)}",
             f"energy_joules {e(report.energy_joules)}"]
    lines += [f"energy {k} {e(v)}" for k, v in report.energy_breakdown.items()]
    lines += [f"level {lv['level']} {lv['name']}: nodes {lv['nodes']} instructions "
              f"{lv['instructions']} bytes_in {lv['bytes_in']} bytes_out {lv['bytes_out']} "
              f"reduction_ops {lv['reduction_ops']} local_bytes {lv['local_bytes']}"
              for lv in report.levels]
    lines += [f"line {row.line}: cycles {row.cycles} utilization {e(row.utilization)} "
              f"bound {row.bottleneck} energy {e(row.energy_joules)}  | {row.text}"
              for row in report.instructions]
    return "\n".join(lines) + "\n"


def test_every_program_is_covered():
    assert len(PROGRAMS) >= 20 and {"mlp", "cnn", "vgg16", "topk"} <= set(PROGRAMS)


@pytest.mark.parametrize("machine", ["tiny", "f1"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_report(name, machine, golden):
    run = timing_run(name, machine)
    if isinstance(run, UserError):      # the program does not fit the machine
        text = f"error: {run.format()}\n"
    else:
        text = report_text(run[1])
    golden(f"reports/{machine}/{name}.txt", text.replace(f"{REPO}/", ""))
