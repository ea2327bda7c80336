"""Imported ONNX models compute what onnxruntime computes, on the reference interpreter and on
simulated machines of several shapes."""
import numpy as np
import pytest

from fractal.onnx_import import import_model
from tests.onnx.onnx_models import (assert_matches_onnxruntime, every_op_cnn, mlp, model, node,
                         onnxruntime_outputs, rng, weights)


def data(*shape, seed=7):
    return rng(seed).standard_normal(shape).astype(np.float32)


def test_cnn_with_every_op(tmp_path):
    m, feeds = every_op_cnn()
    path = assert_matches_onnxruntime(m, feeds, tmp_path)
    text = path.read_text()
    # the Shape -> Gather -> Concat chain was folded: no int64 tensor became a param
    assert "image_shape" not in text and "target" not in text
    assert "conv2d" in text and "lrn " in text and "avgpool" in text


def test_mlp(tmp_path):
    assert_matches_onnxruntime(*mlp(), tmp_path)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("alpha, beta, c_shape", [(1.0, 1.0, (5,)), (0.5, 2.0, (4, 5)),
                                                  (-1.5, 0.25, (1,)), (2.0, 0.0, (4, 1)),
                                                  (1.0, 1.0, None)])
def test_gemm(tmp_path, trans_a, trans_b, alpha, beta, c_shape):
    a = (3, 4) if trans_a else (4, 3)
    b = (5, 3) if trans_b else (3, 5)
    inits = {"b": weights(b, 1)} | ({"c": weights(c_shape, 2)} if c_shape else {})
    m = model([node("Gemm", ["a", "b"] + (["c"] if c_shape else []), ["y"], alpha=alpha,
                    beta=beta, transA=trans_a, transB=trans_b)], {"a": list(a)}, {"y": [4, 5]},
              inits)
    assert_matches_onnxruntime(m, {"a": data(*a)}, tmp_path, machines=("tiny",))


def test_gemm_with_every_operand_an_input(tmp_path):
    m = model([node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=3.0, transA=1, transB=1)],
              {"a": [3, 4], "b": [5, 3], "c": [1, 5]}, {"y": [4, 5]})
    feeds = {"a": data(3, 4), "b": data(5, 3, seed=8), "c": data(1, 5, seed=9)}
    assert_matches_onnxruntime(m, feeds, tmp_path, machines=("tiny",))


@pytest.mark.parametrize("a, b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                  ((2, 2, 3, 4), (2, 2, 4, 5)), ((3, 4), (2, 4, 5)),
                                  ((4,), (4, 5)), ((3, 4), (4,)), ((2, 3, 4), (1, 4, 5))])
def test_matmul(tmp_path, a, b):
    out = list(np.matmul(np.zeros(a), np.zeros(b)).shape)
    m = model([node("MatMul", ["a", "b"], ["y"])], {"a": list(a), "b": list(b)}, {"y": out})
    assert_matches_onnxruntime(m, {"a": data(*a), "b": data(*b, seed=8)}, tmp_path,
                               machines=("tiny",))


@pytest.mark.parametrize("shape, target", [((2, 3, 4), (0, -1)), ((2, 3, 4), (4, 6)),
                                           ((2, 3, 4), (-1,))])
def test_reshape(tmp_path, shape, target):
    out = list(np.zeros(shape).reshape([s if t == 0 else t for s, t in zip(shape, target)]
                                       if 0 in target else target).shape)
    m = model([node("Reshape", ["x", "shape"], ["y0"]), node("Relu", ["y0"], ["y"])],
              {"x": list(shape)}, {"y": out}, {"shape": np.array(target, np.int64)})
    assert_matches_onnxruntime(m, {"x": data(*shape)}, tmp_path, machines=("tiny",))


@pytest.mark.parametrize("axis, opset", [(0, 13), (1, 13), (-1, 13), (None, 17), (1, 11),
                                         (0, 11), (None, 11)])
def test_softmax(tmp_path, axis, opset):
    attrs = {} if axis is None else {"axis": axis}
    m = model([node("Softmax", ["x"], ["y"], **attrs)], {"x": [2, 3, 5]}, {"y": [2, 3, 5]},
              opset=opset)
    assert_matches_onnxruntime(m, {"x": data(2, 3, 5) * 3}, tmp_path, machines=("tiny",))


@pytest.mark.parametrize("size, alpha, beta, bias", [(1, 1e-4, 0.75, 1.0), (2, 0.5, 0.5, 2.0),
                                                     (3, 0.1, 0.75, 1.0), (4, 0.3, 1.0, 1.5),
                                                     (5, 2e-4, 0.75, 2.0)])
def test_lrn(tmp_path, size, alpha, beta, bias):
    m = model([node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)],
              {"x": [2, 6, 3, 3]}, {"y": [2, 6, 3, 3]})
    # onnxruntime runs odd sizes only: even ones are checked against the ONNX operator spec
    spec = lambda m, feeds: {"y": lrn_as_specified(feeds["x"], size, alpha, beta, bias)}
    assert_matches_onnxruntime(m, {"x": data(2, 6, 3, 3) * 2}, tmp_path, machines=("tiny",),
                               oracle=onnxruntime_outputs if size % 2 else spec)


def lrn_as_specified(x, size, alpha, beta, bias):
    """ONNX LRN as its operator page defines it, one channel at a time."""
    x = x.astype(np.float64)
    y = np.empty_like(x)
    channels = x.shape[1]
    for c in range(channels):
        lo = max(0, c - (size - 1) // 2)
        hi = min(channels - 1, c + int(np.ceil((size - 1) / 2)))
        square_sum = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        y[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    return y


@pytest.mark.parametrize("op, attrs, out", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER"), [1, 2, 4, 4]),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 2, 0]), [1, 2, 4, 3]),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), [1, 2, 3, 3]),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER",
                         count_include_pad=1), [1, 2, 4, 4]),
    ("AveragePool", dict(kernel_shape=[2, 2], pads=[1, 0, 1, 1]), [1, 2, 8, 7]),
    ("AveragePool", dict(kernel_shape=[2, 2], pads=[1, 0, 1, 1], count_include_pad=1),
     [1, 2, 8, 7]),
    ("AveragePool", dict(kernel_shape=[3, 3], auto_pad="VALID"), [1, 2, 5, 5]),
])
def test_pooling_windows(tmp_path, op, attrs, out):
    m = model([node(op, ["x"], ["y"], **attrs)], {"x": [1, 2, 7, 7]}, {"y": out})
    assert_matches_onnxruntime(m, {"x": data(1, 2, 7, 7)}, tmp_path, machines=("tiny",))


@pytest.mark.parametrize("attrs, out", [
    (dict(strides=[2, 2], pads=[2, 0, 1, 1]), [1, 4, 4, 3]),
    (dict(auto_pad="SAME_LOWER", strides=[2, 2]), [1, 4, 4, 4]),
    (dict(group=2), [1, 4, 5, 5]),
])
def test_conv_windows(tmp_path, attrs, out):
    groups = attrs.get("group", 1)
    m = model([node("Conv", ["x", "w"], ["y"], **attrs)], {"x": [1, 2, 7, 7]}, {"y": out},
              {"w": weights((4, 2 // groups, 3, 3), 1)})
    assert_matches_onnxruntime(m, {"x": data(1, 2, 7, 7)}, tmp_path, machines=("tiny",))


def test_names_are_made_into_identifiers(tmp_path):
    """ONNX names that are not identifiers, reserved words or that collide once mangled."""
    m = model([node("Add", ["input:0", "1st"], ["relu"]),
               node("Relu", ["relu"], ["out/put"]),
               node("Identity", ["relu"], ["out.put"]),
               node("Mul", ["input:0", "tensor"], ["y"])],
              {"input:0": [2, 3], "1st": [2, 3]},
              {"out/put": [2, 3], "out.put": [2, 3], "y": [2, 3], "relu": [2, 3]},
              {"tensor": weights((2, 3), 1)})
    text, params = import_model(m)
    decls = [line for line in text.splitlines() if line.startswith("tensor ")]
    names = {line.split()[1]: line.split("# ")[-1] for line in decls}
    assert names == {"input_0": 'onnx "input:0"', "t1st": 'onnx "1st"',
                     "tensor_": 'onnx "tensor"', "out_put": 'onnx "out/put"',
                     "out_put_1": 'onnx "out.put"', "y": 'onnx "y"', "relu_": 'onnx "relu"'}
    assert list(params) == ["tensor_"]
    rename = {"input:0": "input_0", "1st": "t1st", "out/put": "out_put", "out.put": "out_put_1",
              "relu": "relu_"}
    assert_matches_onnxruntime(m, {"input:0": data(2, 3), "1st": data(2, 3, seed=8)}, tmp_path,
                               machines=("tiny",), names=rename)
