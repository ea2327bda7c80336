"""The workload registry and `fractal gen`: headers, parameters, errors, committed files."""
from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pytest

import fractal
from fractal.cli import main
from fractal.workloads import WORKLOADS, generate
from isa.errors import UserError
from tests.workloads.helpers import cli

ROOT = Path(__file__).resolve().parents[2]


def _failure(capsys, *args) -> str:
    status = main([str(a) for a in args], io.StringIO())
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_header_names_the_workload_and_its_parameters(name):
    w = WORKLOADS[name]
    text = generate(name)
    header = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        header.append(line[2:])
    header = " ".join(header)
    assert header and text.startswith("# ")
    values = ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
                       for k, v in w.defaults().items())
    assert f"Parameters: {values}." in header
    assert f"fractal gen {name} --batch" in header
    fractal.load_program(text)                               # checks


def test_committed_programs_and_readme_are_current():
    spec = importlib.util.spec_from_file_location("gen_programs", ROOT / "scripts/gen_programs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0
    for name in WORKLOADS:
        assert f"| `{name}.fasm` |" in (ROOT / "programs/README.md").read_text()


def test_batch_and_parameters_change_the_program():
    small = fractal.load_program(generate("vgg16", batch=3, resolution=64, width=8))
    assert small.tensor("images").type.shape == (3, 3, 64, 64)
    assert small.tensor("conv5_3_w").type.shape == (64, 64, 3, 3)
    assert small.tensor("logits").type.shape == (3, 1000)
    assert generate("lstm", batch=4) == generate("lstm", **{"batch": 4})


@pytest.mark.parametrize("call, where, fragments", [
    (lambda: generate("vgg"), "fractal gen", ["unknown workload 'vgg'", "did you mean 'vgg16'?"]),
    (lambda: generate("vgg16", resolution=16), "--resolution", ["at least 32, got 16"]),
    (lambda: generate("vgg16", resolutoin=64), "--resolutoin", ["no parameter 'resolutoin'",
                                                                 "did you mean 'resolution'?"]),
    (lambda: generate("vgg16", batch=0), "--batch", ["at least 1"]),
    (lambda: generate("vgg16", width=2.5), "--width", ["must be an integer"]),
    (lambda: generate("alexnet", width=8), "--width", ["multiple of 6"]),
    (lambda: generate("knn_classifier", points=4, k=5), "--k", ["k=5 must not exceed points=4"]),
    (lambda: generate("kmeans_iteration", batch=4, clusters=8), "--clusters", ["not exceed batch=4"]),
    (lambda: generate("mlp_classifier", layers=(10,)), "--layers", ["at least two sizes"]),
    (lambda: generate("mlp_classifier", layers=(10, 0)), "--layers", ["at least 1, got 0"]),
    (lambda: generate("lstm", steps=1000), "--steps", ["at most 512"]),
])
def test_bad_parameters_are_user_errors(call, where, fragments):
    with pytest.raises(UserError) as e:
        call()
    assert e.value.where == where
    for f in fragments:
        assert f in e.value.format()


@pytest.mark.parametrize("args, fragments", [
    (["gen", "mlp"], ["unknown workload 'mlp'", "did you mean 'mlp_classifier'?"]),
    (["gen", "resnet18", "--widht", "8"], ["no parameter '--widht'", "did you mean '--width'?"]),
    (["gen", "resnet18", "--wid", "8"], ["no parameter '--wid'"]),       # no abbreviations
    (["gen", "resnet18", "--width", "x"], ["argument --width: expected an integer, got 'x'"]),
    (["gen", "mlp_classifier", "--layers", "3,a"], ["expected comma-separated integers"]),
    (["gen", "resnet18", "--resolution", "8"], ["--resolution: error: resolution must be at least 32"]),
    (["gen", "resnet18", "extra"], ["unexpected argument 'extra'"]),
    (["gen"], ["give a workload NAME"]),
    (["gen", "--all"], ["--all needs -o DIR"]),
    (["gen", "--all", "vgg16", "-o", "."], ["give no NAME"]),
    (["gen", "logreg", "-o", "/no/such/dir/x.fasm"], ["cannot write /no/such/dir/x.fasm"]),
])
def test_cli_errors_exit_2(capsys, args, fragments):
    err = _failure(capsys, *args)
    for f in fragments:
        assert f in err, err


def test_cli_list_and_all(tmp_path):
    listing = cli("gen", "--list")
    for name, w in WORKLOADS.items():
        assert name in listing and w.description in listing
    assert "--support-vectors 256" in listing
    cli("gen", "--all", "-o", tmp_path)
    assert sorted(p.stem for p in tmp_path.glob("*.fasm")) == sorted(WORKLOADS)
    for name in WORKLOADS:
        assert (tmp_path / f"{name}.fasm").read_text() == generate(name)


def test_cli_writes_to_stdout_and_accepts_both_spellings():
    text = cli("gen", "svm_rbf", "--support-vectors", "12", "--batch", "3")
    assert text == generate("svm_rbf", batch=3, support_vectors=12)
    assert cli("gen", "--batch", "3", "svm_rbf", "--support_vectors", "12") == text
