"""`fractal import` then `fractal run`: the program reads its params from the .npz beside it."""
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from fractal.cli import main
from fractal.commands.import_ import write_npz
from tests.onnx.onnx_models import every_op_cnn, mlp, model, node, onnxruntime_outputs

ROOT = Path(__file__).resolve().parents[2]


def fractal(*args):
    """The real command in a subprocess."""
    env = dict(os.environ)
    env.pop("FRACTAL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "fractal.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)


def run_main(*args, capsys=None):
    """`fractal ARGS` in this process: (exit status, stdout, stderr)."""
    out = io.StringIO()
    status = main([str(a) for a in args], out)
    err = capsys.readouterr().err if capsys else ""
    return status, out.getvalue(), err


def test_import_then_run_with_the_sidecar_npz(tmp_path):
    m, feeds = every_op_cnn()
    onnx.save(m, tmp_path / "cnn.onnx")
    np.save(tmp_path / "image.npy", feeds["image"])
    (tmp_path / "out").mkdir()         # import writes into an existing folder, never creates one
    res = fractal("import", tmp_path / "cnn.onnx", "-o", tmp_path / "out" / "cnn.fasm")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "cnn.npz").is_file() and "params" in res.stdout
    res = fractal("run", tmp_path / "out" / "cnn.fasm", "--machine", "f1", "--depth", "2",
                  "--fanout", "4", "--input", f"image={tmp_path / 'image.npy'}",
                  "--save-outputs", tmp_path / "got")
    assert res.returncode == 0, res.stderr
    for name, want in onnxruntime_outputs(m, feeds).items():
        got = np.load(tmp_path / "got" / f"{name}.npy", allow_pickle=False)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_unsupported_op_exits_2_without_traceback(tmp_path):
    m = model([node("HardSwish", ["x"], ["y"], name="hs1")], {"x": [2]}, {"y": [2]})
    onnx.save(m, tmp_path / "hs.onnx")
    res = fractal("import", tmp_path / "hs.onnx")
    assert res.returncode == 2 and "Traceback" not in res.stderr + res.stdout
    assert f"{tmp_path / 'hs.onnx'}: error: node 'hs1' (HardSwish): op type HardSwish is not " \
           f"supported" in res.stderr
    assert not (tmp_path / "hs.fasm").exists()


def test_import_writes_beside_the_model_by_default(tmp_path, capsys):
    m, _ = mlp()
    onnx.save(m, tmp_path / "mlp.onnx")
    status, out, _ = run_main("import", tmp_path / "mlp.onnx", capsys=capsys)
    assert status == 0
    # tensors: x, 4 params, h0, h1, h, Gemm's product and logits, Softmax's 5 temporaries, y;
    # instructions: matmul add relu, matmul add, reduce_max reshape sub exp reduce_sum reshape div;
    # params: (20*32 + 32 + 32*10 + 10) floats
    assert out.splitlines() == [f"{tmp_path / 'mlp.fasm'}: 16 tensors, 12 instructions",
                                f"{tmp_path / 'mlp.npz'}: 4 params, "
                                f"{4 * (640 + 32 + 320 + 10):,} bytes"]


@pytest.mark.parametrize("args, fragment", [
    (["{d}/absent.onnx"], "{d}/absent.onnx: error: no such file: {d}/absent.onnx"),
    (["{d}/corrupt.onnx"],
     "{d}/corrupt.onnx: error: cannot read {d}/corrupt.onnx as an ONNX model"),
    (["{d}/dyn.onnx"], "hint: fix the batch size and other free sizes, e.g. --shape x=1,3"),
    (["{d}/dyn.onnx", "--shape", "x=0,3"], "expected NAME=D0,D1,... with every size at least 1"),
    (["{d}/dyn.onnx", "-o", "{d}/dyn.npz"], "--output: error: the program cannot be written to"),
])
def test_bad_import_input_exits_2(tmp_path, capsys, args, fragment):
    (tmp_path / "corrupt.onnx").write_bytes(b"\x0a\xff\xff\xff")
    onnx.save(model([node("Relu", ["x"], ["y"])], {"x": ["n", 3]}, {"y": ["n", 3]}),
              tmp_path / "dyn.onnx")
    status, _, err = run_main("import", *(a.format(d=tmp_path) for a in args), capsys=capsys)
    assert status == 2 and fragment.format(d=tmp_path) in err, err


def test_shape_option_fixes_a_dynamic_input(tmp_path, capsys):
    onnx.save(model([node("Relu", ["x"], ["y"])], {"x": ["n", 3]}, {"y": ["n", 3]}),
              tmp_path / "dyn.onnx")
    status, _, err = run_main("import", tmp_path / "dyn.onnx", "--shape", "x=5,3", capsys=capsys)
    assert status == 0, err
    assert "tensor x  : f32[5, 3]  input" in (tmp_path / "dyn.fasm").read_text()


# ---------------------------------------------------------------- the sidecar .npz of `fractal run`

@pytest.fixture
def affine(tmp_path):
    """y = x * w + b, imported, with w and b in the sidecar; and the ONNX model."""
    m = model([node("Mul", ["x", "w"], ["xw"]), node("Add", ["xw", "b"], ["y"])], {"x": [2, 3]},
              {"y": [2, 3]}, {"w": np.full((1, 3), 2.0, np.float32),
                              "b": np.array([1.0, 2.0, 3.0], np.float32)})
    onnx.save(m, tmp_path / "affine.onnx")
    assert run_main("import", tmp_path / "affine.onnx")[0] == 0
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, x


def saved_y(directory):
    return np.load(directory / "y.npy", allow_pickle=False)


def test_run_loads_the_sidecar_and_explicit_inputs_win(affine, capsys):
    d, x = affine
    program = d / "affine.fasm"
    for extra in ([], ["--reference"], ["--machine", "tiny"]):
        assert run_main("run", program, *extra, "-i", f"x={d / 'x.npy'}", "--save-outputs",
                        d / "a", capsys=capsys)[0] == 0
        np.testing.assert_allclose(saved_y(d / "a"), x * 2 + [1, 2, 3])
    # --input NAME=FILE replaces one tensor of the sidecar
    np.save(d / "w.npy", np.full((1, 3), -1.0, np.float32))
    run_main("run", program, "--reference", "-i", f"x={d / 'x.npy'}", "-i", f"w={d / 'w.npy'}",
             "--save-outputs", d / "b", capsys=capsys)
    np.testing.assert_allclose(saved_y(d / "b"), -x + [1, 2, 3])
    # --inputs FILE replaces the whole sidecar: tensors it lacks come from the seed
    write_npz(d / "other.npz", {"x": x, "w": np.zeros((1, 3), np.float32)})
    run_main("run", program, "--reference", "--inputs", d / "other.npz", "--save-outputs",
             d / "c", capsys=capsys)
    from isa import load_program
    from isa.reference import generate_feeds
    b = generate_feeds(load_program(program), 0)["b"]
    np.testing.assert_allclose(saved_y(d / "c"), np.broadcast_to(b, (2, 3)))


@pytest.mark.parametrize("array, fragment", [
    ({"w": np.zeros((3, 1), np.float32)},
     "w expects f32[1, 3], array 'w' of {npz} has shape (3, 1)"),
    ({"nope": np.zeros(3, np.float32)}, "the program has no tensor named 'nope'"),
    ({"w": np.zeros((1, 3), np.int32)},
     "w expects f32 (float32) data, array 'w' of {npz} has dtype int32"),
    ({"w": np.array([None, 1], dtype=object)}, "cannot read array 'w' of {npz}"),
])
def test_a_sidecar_array_that_does_not_fit_names_file_and_tensor(affine, capsys, array, fragment):
    d, _ = affine
    npz = d / "affine.npz"
    np.savez(npz, **array)
    status, _, err = run_main("run", d / "affine.fasm", "--reference", capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert err.startswith(f"{npz} (the data beside {d / 'affine.fasm'}): error: ")
    assert fragment.format(npz=npz) in err, err


def test_a_sidecar_that_is_not_an_archive(affine, capsys):
    d, _ = affine
    (d / "affine.npz").write_bytes(b"not numpy data")
    status, _, err = run_main("run", d / "affine.fasm", "--reference", capsys=capsys)
    assert status == 2 and f"cannot read {d / 'affine.npz'} as .npz data" in err
