"""Small ONNX models built with onnx.helper, and the comparison of fractal's outputs with
onnxruntime's on the same inputs."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fractal import api
from fractal.commands.import_ import write_npz
from fractal.onnx_import import import_model

#: the machines every model runs on: the test machine, f1 re-scaled small, and a deeper tree
MACHINES = {"tiny": lambda: api.build_machine("tiny"),
            "f1-2x4": lambda: api.build_machine("f1", depth=2, fanout=4),
            "f1-4x2": lambda: api.build_machine("f1", depth=4, fanout=2)}


def rng(seed=0):
    return np.random.default_rng(seed)


def weights(shape, seed, scale=0.5):
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


def model(nodes, inputs: dict, outputs: dict, initializers: dict | None = None, opset: int = 17):
    """A model of `nodes`; inputs and outputs map names to shapes (None: a dimension left open)."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 8)           # what the installed onnxruntime reads
    onnx.checker.check_model(m)
    return m


def onnxruntime_outputs(m, feeds: dict) -> dict:
    import onnxruntime
    session = onnxruntime.InferenceSession(m.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def write_program(m, directory, stem="model", input_shapes=None):
    """Import `m` and write STEM.fasm with its params in STEM.npz beside it; return the path."""
    text, params = import_model(m, input_shapes)
    path = directory / f"{stem}.fasm"
    path.write_text(text)
    write_npz(directory / f"{stem}.npz", params)
    return path


def assert_matches_onnxruntime(m, feeds: dict, directory, machines=tuple(MACHINES),
                               names: dict | None = None, rtol=1e-4, atol=1e-5,
                               oracle=onnxruntime_outputs):
    """fractal's reference and simulated runs (params from the .npz beside the program) give
    onnxruntime's outputs. `names` maps ONNX names to program names where they differ."""
    names = names or {}
    want = oracle(m, feeds)
    path = write_program(m, directory)
    given = {names.get(k, k): v for k, v in feeds.items()}
    runs = {"reference": api.reference(path, inputs=given).outputs}
    for machine in machines:
        runs[machine] = api.run(path, MACHINES[machine](), inputs=given).outputs
    for run, outputs in runs.items():
        assert sorted(outputs) == sorted(names.get(k, k) for k in want), run
        for name, value in want.items():
            np.testing.assert_allclose(outputs[names.get(name, name)], value, rtol=rtol, atol=atol,
                                       err_msg=f"output {name} on {run}")
    return path


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def every_op_cnn():
    """A small CNN that uses every op type the importer converts, and folds a Shape chain."""
    c = 8
    inits = {
        "w1": weights((c, 3, 3, 3), 1), "b1": weights((c,), 2),
        "bn_scale": weights((c,), 3) + 1, "bn_bias": weights((c,), 4),
        "bn_mean": weights((c,), 5), "bn_var": np.abs(weights((c,), 6)) + 0.5,
        "w2": weights((c, c // 2, 3, 3), 7, 0.3),
        "shift": weights((1, c, 1, 1), 8), "scale": np.abs(weights((1, c, 1, 1), 9)) + 0.5,
        "squeeze_axes": np.array([2, 3], np.int64), "unsqueeze_axes": np.array([1], np.int64),
        "minus_one": np.array([-1], np.int64), "zero": np.array(0, np.int64),
        "wg": weights((10, 2 * c), 10), "cg": weights((10,), 11),
        "wm": weights((10, 2 * c), 12), "bm": weights((1, 10), 13),
    }
    nodes = [
        node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"],
             epsilon=1e-3),
        node("Relu", ["bn"], ["r1"]),
        node("LRN", ["r1"], ["n1"], size=3, alpha=1e-3, beta=0.75, bias=1.5),
        node("Conv", ["n1", "w2"], ["c2"], group=2, strides=[2, 2], auto_pad="SAME_UPPER",
             kernel_shape=[3, 3]),                                       # [2, 8, 6, 6]
        node("MaxPool", ["c2"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("AveragePool", ["mp"], ["ap1"], kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 0, 0], count_include_pad=1),                   # [2, 8, 3, 3]
        node("AveragePool", ["c2"], ["ap2"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Add", ["ap1", "ap2"], ["sum"]),
        node("Sub", ["sum", "shift"], ["centred"]),
        node("Constant", [], ["half"], value=numpy_helper.from_array(np.float32(0.5))),
        node("Mul", ["centred", "half"], ["halved"]),
        node("Div", ["halved", "scale"], ["a"]),
        node("Sigmoid", ["a"], ["s"]),
        node("Tanh", ["a"], ["t"]),
        node("Mul", ["s", "t"], ["st"]),
        node("Exp", ["st"], ["e"]),
        node("Dropout", ["e", "ratio"], ["d"]),
        node("Identity", ["d"], ["i"]),
        node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        node("GlobalAveragePool", ["f"], ["gap"]),
        node("GlobalMaxPool", ["f"], ["gmp"]),
        node("Concat", ["gap", "gmp"], ["pooled"], axis=1),            # [2, 16, 1, 1]
        node("Squeeze", ["pooled", "squeeze_axes"], ["sq"]),            # [2, 16]
        node("Unsqueeze", ["sq", "unsqueeze_axes"], ["unsq"]),          # [2, 1, 16]
        node("Flatten", ["unsq"], ["flat"], axis=1),                    # [2, 16]
        node("Shape", ["image"], ["image_shape"]),                     # folded: [2, 3, 12, 12]
        node("Gather", ["image_shape", "zero"], ["batch"]),
        node("Unsqueeze", ["batch", "unsqueeze_axes0"], ["batch1"]),
        node("Concat", ["batch1", "minus_one"], ["target"], axis=0),   # folded: [2, -1]
        node("Reshape", ["flat", "target"], ["features"]),
        node("Gemm", ["features", "wg", "cg"], ["g"], transB=1, alpha=0.5, beta=2.0),
        node("Transpose", ["features"], ["features_t"], perm=[1, 0]),  # [16, 2]
        node("MatMul", ["wm", "features_t"], ["m_t"]),                 # [10, 2]
        node("Transpose", ["m_t"], ["m"]),
        node("Add", ["m", "bm"], ["m_b"]),
        node("Add", ["g", "m_b"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    inits["unsqueeze_axes0"] = np.array([0], np.int64)
    inits["ratio"] = np.float32(0.3)
    m = model(nodes, {"image": [2, 3, 12, 12]}, {"logits": [2, 10], "probs": [2, 10]}, inits)
    return m, {"image": rng(20).standard_normal((2, 3, 12, 12)).astype(np.float32)}


def mlp():
    """A perceptron: MatMul + Add, Relu, Gemm with transB, Softmax."""
    inits = {"w1": weights((20, 32), 1), "b1": weights((32,), 2),
             "w2": weights((10, 32), 3), "b2": weights((10,), 4)}
    nodes = [node("MatMul", ["x", "w1"], ["h0"]), node("Add", ["h0", "b1"], ["h1"]),
             node("Relu", ["h1"], ["h"]),
             node("Gemm", ["h", "w2", "b2"], ["logits"], transB=1),
             node("Softmax", ["logits"], ["y"])]
    m = model(nodes, {"x": [6, 20]}, {"y": [6, 10]}, inits)
    return m, {"x": rng(5).standard_normal((6, 20)).astype(np.float32)}
