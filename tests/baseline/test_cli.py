"""`fractal baseline` through the command's entry point: reports, files written, located errors."""
import json
import tomllib
from pathlib import Path

import pytest

from fractal.baseline import GPUS, estimate, load_factors
from fractal.cli import main

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs/mlp.fasm")


def run(capsys, *args):
    status = main(list(map(str, args)))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def test_estimate_json_matches_the_api(capsys):
    status, out, _ = run(capsys, "baseline", "estimate", MLP, "--gpu", "dgx1-v100", "--json")
    assert status == 0
    report = json.loads(out)
    api = estimate(MLP, "dgx1-v100")
    assert report["seconds"] == api.seconds and report["gpus"] == 8 and report["batch"] == 64
    assert [i["mode"] for i in report["instructions"]] == ["split"] * 3
    assert report["ops_per_joule"] == pytest.approx(report["ops"] / report["energy_joules"])


def test_estimate_text_and_factors_file(capsys, tmp_path):
    factors = tmp_path / "f.toml"
    factors.write_text("[compute]\nmatmul = 0.35\n")
    status, out, _ = run(capsys, "baseline", "estimate", MLP, "--gpu", "1080ti",
                         "--precision", "fp32", "--factors", factors)
    assert status == 0 and "on 1080ti, fp32 roofline estimate" in out
    slow = estimate(MLP, "1080ti", precision="fp32", factors={"compute": {"matmul": 0.35}})
    assert f"{slow.seconds * 1e6:,.3f} us" in out


@pytest.mark.parametrize("args, where, message", [
    (["--gpu", "v1000"], "--gpu", "unknown GPU 'v1000'"),
    (["--precision", "int8"], "--precision", "precision must be one of fp16, fp32"),
    (["--factors", "missing.toml"], "--factors", "factors file not found: missing.toml"),
])
def test_estimate_errors_exit_2(capsys, args, where, message):
    status, _, err = run(capsys, "baseline", "estimate", MLP, *args)
    assert status == 2 and err.startswith(f"{where}: error: {message}")


def test_bad_factors_file_is_located(capsys, tmp_path):
    factors = tmp_path / "f.toml"
    factors.write_text("[bandwidth]\nmove = 0\n")
    status, _, err = run(capsys, "baseline", "estimate", MLP, "--factors", factors)
    assert status == 2
    assert f"{factors}: bandwidth.move: error: an efficiency factor must be a number from 1e-06 to 1, got 0" in err


def test_gpus_lists_every_preset_with_sources(capsys):
    status, out, _ = run(capsys, "baseline", "gpus", "--json")
    rows = json.loads(out)
    assert status == 0 and [r["name"] for r in rows] == list(GPUS)
    for r in rows:
        assert {"fp32_flops", "fp16_flops", "memory_bandwidth", "tdp_watts"} <= set(r["sources"])
    status, out, _ = run(capsys, "baseline", "gpus")
    assert "V100 GPU Architecture whitepaper" in out and "h200: 67 TFLOPS fp32" in out


@pytest.mark.torch
def test_measure_writes_factors_that_estimate_reads(capsys, tmp_path):
    pytest.importorskip("torch")
    factors = tmp_path / "v100-cpu.toml"
    status, out, _ = run(capsys, "baseline", "measure", MLP, "--repeat", "2", "--warmup", "1",
                         "--calibrate-against", "v100", "-o", factors, "--json")
    assert status == 0
    report = json.loads(out)
    assert report["mode"] == "measured" and report["device"] == "cpu"
    assert len(report["instructions"]) == 3
    written = load_factors(factors)
    assert written.compute["matmul"] == pytest.approx(report["calibration"]["factors"]["compute"]["matmul"], rel=1e-5)
    assert tomllib.loads(factors.read_text())["bandwidth"]["move"] == 0.85   # a default kept
    status, out, _ = run(capsys, "baseline", "estimate", MLP, "--precision", "fp32",
                         "--factors", factors, "--json")
    assert json.loads(out)["seconds"] == pytest.approx(report["seconds"], rel=0.02)


def test_measure_usage_errors(capsys):
    status, _, err = run(capsys, "baseline", "measure", MLP, "-o", "f.toml")
    assert status == 2 and "--output: error: -o writes derived factors" in err
    status, _, err = run(capsys, "baseline", "measure", MLP, "--repeat", "0")
    assert status == 2 and "must be at least 1" in err
