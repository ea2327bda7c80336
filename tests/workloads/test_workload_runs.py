"""Every workload, generated small through `fractal gen`, runs through `fractal run` on `tiny` and
on a 4096-leaf machine with the outputs of the reference interpreter; the full-size networks
compile and run timing-only on f1 and f100."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fractal
from fractal.workloads import WORKLOADS, generate
from isa.checker import program_ops
from tests.strategies import close_to_reference
from tests.workloads.helpers import SMALL, cli, feeds, gen_args

ROOT = Path(__file__).resolve().parents[2]
MACHINES = {"tiny": ["--machine", "tiny"],
            "4096 leaves": ["--machine", "f1", "--depth", "3", "--fanout", "16"]}


def test_every_workload_has_a_small_variant():
    assert set(SMALL) == set(WORKLOADS)


def _outputs(folder: Path) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p) for p in sorted(folder.glob("*.npy"))}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_simulated_outputs_equal_the_reference(name, tmp_path):
    path = tmp_path / f"{name}.fasm"
    cli(*gen_args(name, SMALL[name]), "-o", path)
    program = fractal.load_program(path)
    np.savez(tmp_path / "data.npz", **feeds(program, seed=3))
    data = ["--inputs", tmp_path / "data.npz"]
    cli("run", path, "--reference", *data, "--save-outputs", tmp_path / "reference")
    want = _outputs(tmp_path / "reference")
    assert set(want) == {t.name for t in program.outputs}
    for machine, args in MACHINES.items():
        cli("run", path, *args, *data, "--save-outputs", tmp_path / machine)
        got = _outputs(tmp_path / machine)
        assert got.keys() == want.keys()
        for key in want:
            assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
            if want[key].dtype == np.int32:
                np.testing.assert_array_equal(got[key], want[key], err_msg=f"{machine}: {key}")
            else:                      # within the rounding of the program's float type
                assert close_to_reference(got[key], want[key]).all(), f"{machine}: {key}"


@pytest.mark.parametrize("name", ["vgg16", "resnet18"])
@pytest.mark.parametrize("machine", ["f1", "f100"])
def test_full_size_networks_run_timing_only(name, machine):
    program = fractal.load_program(generate(name))
    report = fractal.run(program, machine, functional=False)
    assert report.ops == program_ops(program)
    assert report.cycles > 0 and 0 < report.utilization <= 1
    assert not report.outputs


def test_gen_in_a_subprocess(tmp_path):
    """The installed entry point: generate, then run the file on the reference."""
    def fractal_cmd(*args):
        return subprocess.run([sys.executable, "-m", "fractal.cli", *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    res = fractal_cmd(*gen_args("logreg", SMALL["logreg"]), "-o", tmp_path / "lr.fasm")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "lr.fasm").read_text() == generate("logreg", **SMALL["logreg"])
    res = fractal_cmd("run", tmp_path / "lr.fasm", "--reference")
    assert res.returncode == 0, res.stderr
    assert "probs" in res.stdout
    res = fractal_cmd("gen", "resnet", "--batch", "2")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "unknown workload 'resnet'" in res.stderr and "did you mean 'resnet18'?" in res.stderr
