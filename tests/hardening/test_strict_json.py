"""Every `--json` output is strict JSON: no NaN or Infinity, which JavaScript's and jq's parsers
reject. Each command with a --json option is found by walking the parser, so that a new one
without a case here fails the completeness test."""
import argparse
import contextlib
import io
import json
import math
from pathlib import Path

import pytest

from fractal.cli import build_parser, main
from fractal.strict_json import clean, dumps

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs" / "mlp.fasm")
# a valid program whose outputs are inf and NaN (x / (x - x))
NAN_PROGRAM = ("tensor x : f32[2, 2] input\ntensor z : f32[2, 2]\ntensor y : f32[2, 2] output\n"
               "sub z, x, x\ndiv y, x, z\n")


def strict_loads(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")
    return json.loads(text, parse_constant=refuse)


def json_commands() -> set[str]:
    found = set()

    def walk(p, words):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, words + [name])
            elif "--json" in a.option_strings:
                found.add(" ".join(words))
    walk(build_parser(), [])
    return found


def cases(tmp: Path, write: bool = True) -> dict[str, list[list[str]]]:
    nan = tmp / "nan.fasm"
    if write:
        nan.write_text(NAN_PROGRAM)
    return {
        "run": [["run", str(nan), "--reference", "--json"],
                ["run", str(nan), "--machine", "tiny", "--json"],
                ["run", MLP, "--machine", "tiny", "--timing-only", "--json"]],
        "compile": [["compile", MLP, "--machine", "tiny", "--json"]],
        "compare": [["compare", MLP, MLP, "--machine", "tiny", "--json"]],
        "machines": [["machines", "--json"]],
        "baseline estimate": [["baseline", "estimate", MLP, "--gpu", "v100", "--json"]],
        "baseline gpus": [["baseline", "gpus", "--json"]],
        "baseline measure": [["baseline", "measure", str(nan), "--device", "cpu", "--json"]],
        "reproduce": [["reproduce", "--programs", "logreg", "--no-scaling", "--json"]],
        "sensitivity": [["sensitivity", MLP, "--machine", "tiny", "--gpu", "dgx1-v100",
                         "--json"]],
    }


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(argv, out)
    return status, out.getvalue(), err.getvalue()


def test_every_json_command_has_a_case(tmp_path):
    assert json_commands() == set(cases(tmp_path))


@pytest.mark.parametrize("command", sorted(cases(Path("/nonexistent"), write=False)))
def test_json_output_is_strict(command, tmp_path):
    for argv in cases(tmp_path)[command]:
        status, out, err = run(argv)
        if command == "baseline measure" and status == 2 and "torch" in err.lower():
            pytest.skip("PyTorch (the .[gpu] extra) is not installed")
        assert status == 0, err
        data = strict_loads(out)
        if argv[1:2] == [str(tmp_path / "nan.fasm")] and command == "run":
            flagged = data["non_finite"]
            assert "outputs.y.max" in flagged or "outputs.y.mean" in flagged
            assert all(_at(data, p) is None for p in flagged)


def _at(data, path: str):
    for part in path.replace("]", "").replace("[", ".").split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def test_clean_replaces_and_flags_exactly_the_non_finite_numbers():
    obj = {"a": 1.5, "b": float("nan"), "c": [1, float("inf"), {"d": -float("inf")}],
           "e": "NaN", "f": True, "g": None}
    got = clean(obj)
    assert got == {"a": 1.5, "b": None, "c": [1, None, {"d": None}], "e": "NaN", "f": True,
                   "g": None, "non_finite": ["b", "c[1]", "c[2].d"]}
    assert strict_loads(dumps(obj)) == got
    assert clean({"a": 1.0}) == {"a": 1.0}                   # nothing to flag: unchanged
    rows = clean([{"x": math.nan}, {"x": 2.0}])             # a list flags each object
    assert rows == [{"x": None, "non_finite": ["x"]}, {"x": 2.0}]
    import numpy as np
    assert clean({"v": np.float32("nan"), "n": np.int64(3)}) == {"v": None, "n": 3,
                                                                 "non_finite": ["v"]}


def test_non_finite_machine_values_never_reach_json_as_infinity(tmp_path):
    """A machine whose energy per byte overflows the report: refused by the machine file's
    ranges, or reported with null and the flag; never `Infinity`."""
    from machine import preset
    from tests.strategies import machine_toml
    text = machine_toml(preset("tiny"))
    path = tmp_path / "m.toml"
    path.write_text(text.replace("memory_pj_per_byte = ", "memory_pj_per_byte = 1e308 #", 1))
    status, out, err = run(["run", MLP, "--machine", str(path), "--timing-only", "--json"])
    assert status in (0, 2), err
    if status == 0:
        strict_loads(out)
    else:
        assert "m.toml" in err
