"""One CLI grammar: the shared options spelt alike in every subcommand that takes them, one
syntax for fan-outs and ranges, documented exit statuses."""
import io
from pathlib import Path

import pytest

from fractal.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs" / "mlp.fasm")

#: subcommand -> the shared options it takes (the table a user reads in docs/sweeps.md and --help)
TABLE = {
    "check": set(),
    "run": {"--machine", "--depth", "--fanout", "--json"},
    "compile": {"--machine", "--depth", "--fanout", "--json"},
    "compare": {"--machine", "--depth", "--fanout", "--json"},
    "machines": {"--json"},
    "gen": {"--output"},
    "import": {"--output"},
    "sweep": {"--machine", "--depth", "--fanout", "--gpu", "--precision", "--factors", "--output"},
    "plot": {"--gpu", "--output"},
    "reproduce": {"--output"},
    "baseline estimate": {"--gpu", "--precision", "--factors", "--json"},
    "baseline measure": {"--output", "--json"},
    "baseline gpus": {"--json"},
    "store export": {"--output"},
    "explore": {"--machine", "--output"},
}
SHARED = {"--machine": "-m", "--depth": None, "--fanout": None, "--gpu": None,
          "--precision": None, "--factors": None, "--json": None, "--output": "-o"}


def _subparsers(parser, prefix=""):
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield from _subparsers(sub, f"{prefix}{name} ")
            return
    yield prefix.strip(), parser


PARSERS = dict(_subparsers(build_parser()))


@pytest.mark.parametrize("command", sorted(TABLE))
def test_every_subcommand_spells_the_shared_options_alike(command):
    options = {s: a for a in PARSERS[command]._actions for s in a.option_strings}
    have = {o for o in SHARED if o in options}
    assert have >= TABLE[command], (command, TABLE[command] - have)
    for long, short in SHARED.items():
        if long in options and short is not None:
            assert options.get(short) is options[long], f"{command}: {short} is not {long}"
    assert "--out" not in options, f"{command}: --out is spelt --output (-o) everywhere"


def test_subcommands_in_the_table_are_all_there_are():
    assert {c for c in PARSERS if c} >= set(TABLE)


def run_cli(*argv):
    import contextlib
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv], out)
    return status, out.getvalue(), err.getvalue()


def test_one_machine_takes_one_fan_out_per_stage_as_3x5x7(tmp_path):
    status, out, err = run_cli("compile", MLP, "--machine", "tiny", "--depth", "3", "--fanout",
                               "3x5x7", "--summary")
    assert status == 0 and "tiny-d3f3x5x7" in out, err
    status, _, err = run_cli("compile", MLP, "--machine", "tiny", "--fanout", "3,5,7")
    assert status == 2 and "--fanout" in err and "fractal sweep" in err and "3x5x7" in err


def test_a_sweep_lists_alternatives_and_refuses_per_stage_fan_outs(tmp_path):
    status, _, err = run_cli("sweep", MLP, "--machine", "tiny", "--fanout", "3x5x7",
                             "-o", tmp_path / "r.csv")
    assert status == 2 and "--fanout" in err and "one machine" in err


def test_a_sweep_with_failed_points_exits_1_and_gen_says_what_it_wrote(tmp_path):
    big = tmp_path / "big.fasm"
    big.write_text("tensor x : f32[4096, 4096] input\ntensor y : f32[4096, 4096] output\n"
                   "relu y, x\n")
    status, out, _ = run_cli("sweep", big, "--machine", "tiny", "--depth", "1", "--fanout", "2",
                             "--workers", "1", "-o", tmp_path / "r.csv")
    assert status == 1 and "1 with an error" in out
    status, out, _ = run_cli("gen", "logreg", "-o", tmp_path / "l.fasm")
    assert status == 0 and "wrote" in out and (tmp_path / "l.fasm").exists()
    status, _, err = run_cli("gen", "logreg", "--out", tmp_path / "l.fasm")
    assert status == 2 and "did you mean '--output'" in err
