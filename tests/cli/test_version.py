"""Versions and provenance: `fractal --version`, `python -m fractal`, `fractal.__version__`, and
the tool version, schema version and machine parameters every JSON output carries."""
import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fractal
from fractal.cli import main
from fractal.version import SCHEMA_VERSION, tool_version

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs" / "mlp.fasm")


def test_version_flag_module_and_attribute_agree(capsys):
    release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert fractal.__version__ == release
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"fractal {tool_version()}" and tool_version().startswith(release + "+")
    res = subprocess.run([sys.executable, "-m", "fractal", "--version"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == printed
    cff = (ROOT / "CITATION.cff").read_text()
    assert f'version: "{release}"' in cff and (ROOT / "LICENSE").read_text().startswith("MIT")


def _json(*argv):
    out = io.StringIO()
    assert main(list(argv), out) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("argv", [
    ["run", MLP, "--machine", "tiny", "--timing-only", "--json"],
    ["compile", MLP, "--machine", "tiny", "--depth", "2", "--fanout", "3", "--json"],
    ["compare", MLP, MLP, "--machine", "tiny", "--json"],
])
def test_json_reports_carry_the_versions_and_every_machine_parameter(argv):
    report = _json(*argv)
    assert report["tool_version"] == tool_version()
    assert report["schema_version"] == SCHEMA_VERSION
    machine = fractal.build_machine("tiny", *((2, 3) if "--depth" in argv else ()))
    params = report["machine_parameters"]
    assert params["name"] == machine.name and params["frequency_hz"] == machine.frequency_hz
    assert [lv["fanout"] for lv in params["levels"]] == [lv.fanout for lv in machine.levels]
    assert [lv["memory_bytes"] for lv in params["levels"]] == [lv.memory_bytes for lv in machine.levels]


def test_lists_are_stamped_row_by_row():
    rows = _json("machines", "--json")
    assert rows and all(r["tool_version"] == tool_version() for r in rows)
