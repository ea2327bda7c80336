"""A float16 ONNX model imports as an f16 program (tensors and params) with float16 params in its
.npz, and `fractal run` (reference and simulated) gives onnxruntime's outputs within f16 rounding:
TOLERANCE["f16"] of tests/strategies.py, 8 units of 2^-11 relative to each output's scale, since
onnxruntime and fractal round the same products in a different order."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fractal.onnx_import import import_model
from tests.onnx.onnx_models import node, onnxruntime_outputs, rng
from tests.onnx.test_onnx_cli import run_main
from tests.strategies import TOLERANCE, close_to_reference


def mlp_f16():
    """MatMul + Add, Relu, Gemm (alpha, transB), Softmax, all in float16."""
    r = rng(7)
    half = lambda shape, scale: (r.standard_normal(shape) * scale).astype(np.float16)
    inits = {"w1": half((20, 32), 0.25), "b1": half((32,), 0.1),
             "w2": half((10, 32), 0.2), "b2": half((10,), 0.1)}
    nodes = [node("MatMul", ["x", "w1"], ["h0"]), node("Add", ["h0", "b1"], ["h1"]),
             node("Relu", ["h1"], ["h"]),
             node("Gemm", ["h", "w2", "b2"], ["logits"], transB=1, alpha=0.5),
             node("Softmax", ["logits"], ["y"])]
    f16 = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT16, shape)
    graph = helper.make_graph(nodes, "f16", [f16("x", [6, 20])],
                              [f16("logits", [6, 10]), f16("y", [6, 10])],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = min(m.ir_version, 8)
    onnx.checker.check_model(m)
    return m, {"x": half((6, 20), 1.0)}


def test_float16_model_imports_as_f16():
    m, _ = mlp_f16()
    text, params = import_model(m)
    decls = [line for line in text.splitlines() if line.startswith("tensor ")]
    assert decls and all(": f16[" in line for line in decls)
    assert params and all(a.dtype == np.float16 for a in params.values())


def test_float16_model_runs_like_onnxruntime(tmp_path, capsys):
    assert TOLERANCE["f16"] == 8 * 2.0 ** -11
    m, feeds = mlp_f16()
    want = onnxruntime_outputs(m, feeds)
    onnx.save(m, tmp_path / "mlp16.onnx")
    assert run_main("import", tmp_path / "mlp16.onnx", capsys=capsys)[0] == 0
    with np.load(tmp_path / "mlp16.npz") as sidecar:
        assert {k: sidecar[k].dtype for k in sidecar.files} == {
            k: np.dtype(np.float16) for k in ("w1", "b1", "w2", "b2", "logits_alpha")}
    np.save(tmp_path / "x.npy", feeds["x"])
    for run, extra in (("reference", ["--reference"]), ("tiny", ["--machine", "tiny"]),
                       ("f1", ["--machine", "f1", "--depth", "2", "--fanout", "4"])):
        assert run_main("run", tmp_path / "mlp16.fasm", *extra, "-i", f"x={tmp_path / 'x.npy'}",
                        "--save-outputs", tmp_path / run, capsys=capsys)[0] == 0
        for name, value in want.items():
            got = np.load(tmp_path / run / f"{name}.npy")
            assert got.dtype == np.float16 and got.shape == value.shape
            assert close_to_reference(got, value).all(), (run, name, np.abs(
                got.astype(np.float64) - value).max())
