"""`fractal sensitivity`: every assumed constant at the ends of its range, checked against hand
derivations on the `tiny` machine, and the command's outputs and located errors."""
import csv
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fractal import api, cli
from fractal import sensitivity as sn
from fractal.baseline import estimate, load_gpu

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs/mlp.fasm")


@pytest.fixture(scope="module")
def analysis():
    """mlp.fasm on tiny against the DGX-1 (a system: it has host power and an interconnect)."""
    machine, gpu = api.build_machine("tiny"), load_gpu("dgx1-v100")
    runs = sn.run_programs({"mlp": api.load_program(MLP)}, machine, gpu)
    return runs, machine, gpu, sn.sensitivity(runs, machine, gpu)


def _row(s, key):
    return next(r for r in s.rows if r.constant.key() == key)


def test_the_ranges_contain_the_comparison(analysis):
    runs, _, _, s = analysis
    (run,) = runs
    assert s.base.speedup == pytest.approx(run.speedup)
    assert s.base.efficiency == pytest.approx(run.efficiency)
    for ratio in ("speedup", "efficiency"):
        lo, hi = s.range(ratio)
        base = getattr(s.base, ratio)
        assert lo <= base <= hi and lo < hi
        for r in s.rows:                        # the range covers every row's ends
            assert lo <= min(r.span(ratio)) and max(r.span(ratio)) <= hi
        jlo, jhi = s.joint[ratio]               # all at once reaches at least as far
        assert jlo <= lo * (1 + 1e-9) and jhi >= hi * (1 - 1e-9)


def test_launch_overhead_moves_the_gpu_time_by_its_kernels(analysis):
    runs, _, gpu, s = analysis
    (run,) = runs
    kernels = sum(i.kernels for i in run.gpu.instructions)
    row = _row(s, "GPU: launch overhead")
    assert (row.constant.low, row.constant.high) == (1e-6, 10e-6)
    for value, at in ((row.constant.low, row.low), (row.constant.high, row.high)):
        # hand derivation: GPU time = kernels x overhead + the kernels' busy time
        gpu_seconds = run.gpu.seconds + kernels * (value - gpu.launch_overhead_s)
        assert at.speedup == pytest.approx(gpu_seconds / run.report.seconds)


def test_doubling_launch_overhead_doubles_a_launch_bound_gpu_time():
    text = "tensor x : f32[4] input\ntensor y : f32[4] output\nrelu y, x\nrelu y, y\n"
    gpu = load_gpu("v100")
    base = estimate(text, gpu)
    assert base.time_breakdown["launch"] / base.seconds > 0.99       # launch-bound
    doubled = estimate(text, replace(gpu, launch_overhead_s=2 * gpu.launch_overhead_s))
    assert doubled.seconds == pytest.approx(2 * base.seconds, rel=1e-2)
    assert doubled.seconds - base.seconds == pytest.approx(2 * gpu.launch_overhead_s)


def test_static_power_and_host_power_move_energy_as_derived(analysis):
    runs, machine, gpu, s = analysis
    (run,) = runs
    t_f, t_g = run.report.seconds, run.gpu.seconds
    e_f, e_g = run.report.energy_joules, run.gpu.energy_joules
    # fractal static power of the 4 leaves: energy += (value - 0.05 W) x 4 nodes x seconds
    row = _row(s, "fractal: static power, leaf")
    assert (row.constant.low, row.constant.high) == (0.025, 0.1)
    for value, at in ((0.025, row.low), (0.1, row.high)):
        assert at.efficiency == pytest.approx(e_g / (e_f + (value - 0.05) * 4 * t_f))
        assert at.speedup == pytest.approx(run.speedup)                # timing unchanged
    # the DGX-1's host draws its power the whole run: energy += (value - 1100 W) x seconds
    row = _row(s, "GPU: host power")
    for value, at in ((row.constant.low, row.low), (row.constant.high, row.high)):
        assert at.efficiency == pytest.approx((e_g + (value - gpu.host_watts) * t_g) / e_f)
    assert row.high.efficiency == pytest.approx(run.efficiency)        # high end: the file's


def test_energy_constants_reprice_without_resimulating(analysis):
    """Re-pricing a plan equals compiling and simulating the changed machine."""
    runs, machine, gpu, s = analysis
    row = _row(s, "fractal: memory pJ/byte, root")
    changed = row.constant.apply(machine, gpu, None, row.constant.high)[0]
    report = api.run(MLP, changed, functional=False)
    assert row.high.efficiency == pytest.approx(runs[0].gpu.energy_joules / report.energy_joules)


def test_unused_constants_are_named_not_tabled(analysis):
    *_, s = analysis
    keys = {r.constant.key() for r in s.rows}
    assert "GPU: efficiency compute.irregular" in s.unmoved      # mlp sorts nothing
    assert not keys & set(s.unmoved)
    assert all(r.constant.source for r in s.rows)
    assert "fractal: link bandwidth, root" not in keys | set(s.unmoved)   # the root's host link


def _main(*argv):
    out = io.StringIO()
    return cli.main(list(map(str, argv)), out), out.getvalue()


def test_command_writes_table_csv_and_tornado(tmp_path):
    table, figure = tmp_path / "s.csv", tmp_path / "fig" / "t.png"
    code, text = _main("sensitivity", MLP, "--machine", "tiny", "--gpu", "1080ti",
                       "--launch", "graphs", "-o", table, "--figure", figure)
    assert code == 0, text
    assert "launch overhead" in text and "sources of the ranges:" in text
    rows = list(csv.DictReader(table.open()))
    launch = next(r for r in rows if r["constant"] == "launch overhead")
    assert float(launch["base"]) == 1e-6 and "CUDA graph" in launch["source"]
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, text = _main("sensitivity", "logreg", "--machine", "tiny", "--json")
    data = json.loads(text)
    lo, hi = data["speedup_range"]
    assert lo <= data["speedup"] <= hi and data["programs"] == ["logreg"]


@pytest.mark.parametrize("argv, where, message", [
    (["missing.fasm"], "missing.fasm", "no such file"),
    ([MLP, "--gpu", "v1000"], "--gpu", "unknown GPU 'v1000'"),
    ([MLP, "--machine", "f2"], "--machine", "unknown machine 'f2'"),
    ([MLP, "--launch", "lazy"], "fractal sensitivity", "--launch"),
    ([MLP, "--factors", "nothing.toml"], "--factors", "factors file not found"),
])
def test_bad_arguments_are_located(capsys, argv, where, message):
    code, _ = _main("sensitivity", *argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith(where) and message in err


def test_bad_machine_and_figure_files_are_located(capsys, tmp_path):
    machine = tmp_path / "m.toml"
    machine.write_text((ROOT / "machine/presets/tiny.toml").read_text()
                       .replace("static_watts = 0.05", "static_watts = -1"))
    code, _ = _main("sensitivity", MLP, "--machine", machine)
    err = capsys.readouterr().err
    assert code == 2 and re.search(rf"{re.escape(str(machine))}: level\[1\]\.static_watts", err)
    (tmp_path / "dir.png").mkdir()
    for option, path in (("--figure", tmp_path / "dir.png"), ("-o", tmp_path / "no" / "t.csv")):
        code, _ = _main("sensitivity", MLP, "--machine", "tiny", option, path)
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(("--figure", "--output")) and "Traceback" not in err
