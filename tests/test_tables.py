"""Results in notebooks: a run report, a plan and a sweep's rows render as HTML tables
(`_repr_html_`, what Jupyter shows) and convert to pandas DataFrames (`to_frame()`), with the
numbers of the objects themselves."""
from pathlib import Path

import pytest

import fractal
from compiler.tables import html_table
from fractal.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "programs" / "mlp.fasm"
pandas = pytest.importorskip("pandas")


def test_a_report_is_a_table_of_its_instructions():
    r = fractal.run(MLP, "tiny", functional=False)
    df = r.to_frame()
    assert list(df["cycles"]) == [i.cycles for i in r.instructions]
    assert df["cycles"].sum() == r.cycles
    page = r._repr_html_()
    assert page.count("<table>") == 3 and f"{r.cycles:,}" in page
    assert all(i.text in page for i in r.instructions)


def test_a_plan_is_a_table_per_instruction_and_level():
    plan = fractal.compile(MLP, "tiny")
    df = plan.to_frame()
    assert len(df) == len(plan.roots) * len(plan.machine.levels)
    root_rows = df[df["level"] == 0]
    assert list(root_rows["bytes_down"]) == [r.bytes_down for r in plan.roots]
    assert "<table>" in plan._repr_html_()


def test_sweep_rows_are_a_frame(tmp_path):
    rows = sweep([str(MLP)], "tiny", [1], [2, 4], out=tmp_path / "r.csv", workers=1,
                 progress=False)
    df = rows.to_frame()
    assert list(df["leaves"]) == [2, 4] and list(df["cycles"]) == [r["cycles"] for r in rows]
    assert "2 sweep rows" in rows._repr_html_()


def test_cells_are_escaped():
    page = html_table([{"text": "<script>x</script>", "n": 1234, "f": 0.5}])
    assert "<script>" not in page and "1,234" in page and "0.5" in page
