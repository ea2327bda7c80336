"""The real `fractal` command in a subprocess: every shipped program runs, bad input exits 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "programs").glob("*.fasm"))


def fractal(*args, cwd=ROOT):
    env = dict(os.environ)
    env.pop("FRACTAL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "fractal.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


def assert_clean_failure(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout
    for f in fragments:
        assert f in res.stderr, res.stderr


#: programs of more ops (full-size VGG-16, ResNet-18, AlexNet) run timing-only here
HEAVY_OPS = 10**9


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_every_program_runs_on_the_reference(path):
    from isa import load_program
    from isa.checker import program_ops
    if program_ops(load_program(path)) > HEAVY_OPS:
        res = fractal("run", path, "--timing-only", "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["ops"] == program_ops(load_program(path))
        return
    res = fractal("run", path, "--reference", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["mode"] == "reference" and report["outputs"]


def test_check_many_files_ok():
    res = fractal("check", *PROGRAMS)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count(": ok (") == len(PROGRAMS)


def test_reference_outputs_saved_and_inputs_loaded(tmp_path):
    x = np.random.default_rng(1).standard_normal((64, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    res = fractal("run", "programs/mlp.fasm", "--reference", "--input", f"x={tmp_path / 'x.npy'}",
                  "--save-outputs", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    y = np.load(tmp_path / "out" / "y.npy", allow_pickle=False)
    # an independent numpy evaluation of the same perceptron, with the same generated weights
    from isa import load_program
    from isa.reference import generate_feeds
    feeds = generate_feeds(load_program(ROOT / "programs/mlp.fasm"), 0)
    want = np.maximum(x.astype(np.float64) @ feeds["w1"], 0) @ feeds["w2"]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_seed_changes_generated_data():
    a = json.loads(fractal("run", "programs/mlp.fasm", "--reference", "--json").stdout)
    b = json.loads(fractal("run", "programs/mlp.fasm", "--reference", "--json", "--seed", "7").stdout)
    a2 = json.loads(fractal("run", "programs/mlp.fasm", "--reference", "--json").stdout)
    assert a == a2
    assert a["outputs"]["y"]["mean"] != b["outputs"]["y"]["mean"]


def test_machines_lists_presets():
    res = fractal("machines", "--json")
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["tiny"]["leaves"] == 4 and rows["f1"]["leaves"] == 16 and rows["f100"]["leaves"] == 512
    assert rows["f1"]["peak_ops_per_second"] == 16 * 2048 * 1e9


def test_compile_json_fields():
    res = fractal("compile", "programs/mlp.fasm", "--machine", "tiny", "--depth", "2", "--fanout", "3",
                  "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert [lv["nodes"] for lv in plan["levels"]] == [1, 3, 9]
    assert plan["leaf_ops"] == plan["program_ops"] == 2 * 64 * 256 * (784 + 10) + 64 * 256
    for lv in plan["levels"]:
        assert {"instructions", "bytes_in", "bytes_out", "reduction_ops"} <= set(lv)


BAD_PROGRAM = "tensor x : f32[2] input\ntensor y : f32[3] output\nrelu y, x\n"


@pytest.mark.parametrize("args, fragments", [
    (["check", "{bad}"], ["bad.fasm:3:6: error: relu: destination is f32[3]"]),
    (["run", "{bad}", "--reference"], ["bad.fasm:3:6"]),
    (["run", "missing.fasm", "--reference"], ["no such file: missing.fasm"]),
    (["run", "{binary}", "--reference"], ["not UTF-8 text"]),
    (["run", "programs/mlp.fasm", "--reference", "--input", "x=nope.npy"], ["--input x=nope.npy", "no such file"]),
    (["run", "programs/mlp.fasm", "--reference", "--input", "x={wrong}"], ["x expects f32[64, 784]"]),
    (["run", "programs/mlp.fasm", "--reference", "--input", "q={wrong}"], ["no tensor named 'q'"]),
    (["run", "programs/mlp.fasm", "--reference", "--inputs", "{wrong}"], ["not an .npz archive"]),
    (["run", "programs/mlp.fasm", "--reference", "--seed", "abc"], ["argument --seed"]),
    (["run", "programs/mlp.fasm", "--machine", "f10"], ["unknown machine 'f10'", "did you mean"]),
    (["run", "programs/mlp.fasm", "--machine", "{badmachine}"], ["missing key 'memory_bytes'"]),
    (["compile", "programs/mlp.fasm", "--fanout", "0"], ["argument --fanout"]),
    (["compile", "programs/mlp.fasm", "--depth", "x"], ["argument --depth"]),
    (["store", "export", "{binary}", "-o", "{csv}"],
     ["{binary}: error: cannot read the results store {binary}: file is not a database"]),
    (["sweep", "programs/mlp.fasm", "--machine", "tiny", "--store", "{binary}", "-o", "{csv}"],
     ["--store: error: cannot read the results store {binary}: file is not a database"]),
    (["frobnicate"], ["invalid choice"]),
    ([], ["the following arguments are required"]),
])
def test_bad_input_exits_2_without_traceback(tmp_path, args, fragments):
    (tmp_path / "bad.fasm").write_text(BAD_PROGRAM)
    (tmp_path / "binary.fasm").write_bytes(b"\xff\xfe\x00tensor")
    np.save(tmp_path / "wrong.npy", np.zeros((3, 4), np.float32))
    (tmp_path / "m.toml").write_text('name = "m"\nfrequency_hz = 1e9\n[[level]]\nfanout = 2\n')
    subst = {"bad": tmp_path / "bad.fasm", "binary": tmp_path / "binary.fasm",
             "wrong": tmp_path / "wrong.npy", "badmachine": tmp_path / "m.toml",
             "csv": tmp_path / "r.csv"}
    res = fractal(*[a.format(**subst) for a in args])
    assert_clean_failure(res, *[f.format(**subst) for f in fragments])


def test_simulated_run_reports_and_computes_what_the_reference_does(tmp_path):
    sim = fractal("run", "programs/mlp.fasm", "--machine", "tiny", "--json", "--save-outputs",
                  tmp_path / "sim")
    ref = fractal("run", "programs/mlp.fasm", "--reference", "--save-outputs", tmp_path / "ref")
    assert sim.returncode == 0 and ref.returncode == 0, sim.stderr + ref.stderr
    report = json.loads(sim.stdout)
    assert report["leaves"] == 4 and report["cycles"] > 0
    assert sum(row["cycles"] for row in report["instructions"]) == report["cycles"]
    np.testing.assert_allclose(np.load(tmp_path / "sim" / "y.npy"), np.load(tmp_path / "ref" / "y.npy"),
                               rtol=1e-4, atol=1e-3)
