"""Transformer graphs: a BERT-like encoder block and a GPT-like decoder block imported and run
on the reference interpreter and on simulated machines give onnxruntime's outputs within the
project's f32 tolerance; each transformer op type on its own, against onnxruntime."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fractal import api
from fractal.onnx_import import SUPPORTED_OPS, import_model
from tests.onnx.onnx_models import (MACHINES, every_op_cnn, model, node, onnxruntime_outputs, rng,
                                    weights, write_program)
from tests.onnx.test_onnx_cli import run_main
from tests.onnx.transformer_models import INT_MAX, bert_block, gpt_block
from tests.strategies import TOLERANCE, close_to_reference


def assert_close(got: dict, want: dict, run: str):
    assert sorted(got) == sorted(want), run
    for name, value in want.items():
        ok = close_to_reference(got[name], value)
        assert got[name].shape == value.shape and ok.all(), (
            f"{name} on {run}: largest difference "
            f"{np.abs(got[name].astype(np.float64) - value).max():.3g}")


def matches_onnxruntime(m, feeds, directory, machines=("tiny", "f1-2x4")) -> str:
    """The program imported from m, run on the reference and on `machines`; its text."""
    assert TOLERANCE["f32"] == 2e-4
    want = onnxruntime_outputs(m, feeds)
    path = write_program(m, directory)
    assert_close(api.reference(path, inputs=feeds).outputs, want, "reference")
    for machine in machines:
        assert_close(api.run(path, MACHINES[machine](), inputs=feeds).outputs, want, machine)
    return path.read_text()


def opcodes(text: str) -> set[str]:
    return {line.split()[0] for line in text.splitlines()
            if line and not line.startswith(("#", "tensor"))}


#: the op types tested on their own below rather than in a whole model
TESTED_ALONE = {"Abs", "And", "GatherND", "Gelu", "Log", "Max", "Min", "Neg", "Not", "Or",
                "Reciprocal", "ReduceMax", "ReduceSum", "Sum"}


def test_every_supported_op_is_tested():
    """The CNN, the two transformer blocks and the op tests below cover every op type."""
    used = set().union(*({n.op_type for n in make()[0].graph.node}
                         for make in (every_op_cnn, bert_block, gpt_block)))
    assert set(SUPPORTED_OPS) - used == TESTED_ALONE


def test_bert_encoder_block(tmp_path):
    m, feeds = bert_block()
    text = matches_onnxruntime(m, feeds, tmp_path)
    # token ids are an i32 input; the shape chains (Concat), position ids and token types folded
    assert re.search(r"^tensor input_ids +: i32\[2, 8\] +input", text, re.M)
    assert {"gather", "matmul", "erf", "rsqrt", "pow", "sqrt", "reduce_mean",
            "cast"} <= opcodes(text)
    assert "concat" not in opcodes(text) and "range" not in text
    # the attention scores are one batched matmul of [2, 2, 8, 8] heads
    assert "f32[2, 2, 8, 8]" in text


def test_gpt_decoder_block_with_causal_mask(tmp_path):
    m, feeds = gpt_block()
    text = matches_onnxruntime(m, feeds, tmp_path)
    assert {"gather", "where", "slice", "matmul", "pow", "tanh"} <= opcodes(text)
    # the causal mask, sliced from the boolean buffer at import time, is an i32 param
    with np.load(tmp_path / "model.npz") as params:
        masks = [params[k] for k in params.files if params[k].dtype == np.int32]
    assert any(a.size == 64 and np.array_equal(a.reshape(8, 8), np.tril(np.ones((8, 8))))
               for a in masks)


def test_the_causal_mask_matters(tmp_path):
    """A later token changes the logits of the later positions only (oracle: the model itself)."""
    m, feeds = gpt_block()
    text, params = import_model(m)
    changed = dict(feeds, input_ids=feeds["input_ids"].copy())
    changed["input_ids"][1, 5] = (changed["input_ids"][1, 5] + 1) % 30
    a, b = (api.reference(text, inputs={**f, **params}).outputs["logits"] for f in (feeds, changed))
    assert np.array_equal(a[:, :5], b[:, :5]) and not np.allclose(a[1, 5:], b[1, 5:])


def test_bert_encoder_block_in_float16(tmp_path):
    """Weights, casts and outputs in float16: an f16 program (ids stay i32), within the f16
    tolerance (8 units of 2^-11 of each output's scale); LayerNorm rounds at every step in f16
    here, where onnxruntime keeps its statistics in float32."""
    m, feeds = bert_block()
    for init in m.graph.initializer:
        if init.data_type == F:
            init.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float16), init.name))
    for n in m.graph.node:
        for a in n.attribute:
            if a.name == "to" and a.i == F:
                a.i = TensorProto.FLOAT16
    for out in m.graph.output:
        out.type.tensor_type.elem_type = TensorProto.FLOAT16
    text = matches_onnxruntime(m, feeds, tmp_path, machines=("tiny",))
    types = {line.split(":")[1].split("[")[0].strip() for line in text.splitlines()
             if line.startswith("tensor ")}
    assert types == {"f16", "i32"}


def test_import_and_run_with_int64_token_ids(tmp_path, capsys):
    m, feeds = gpt_block()
    onnx.save(m, tmp_path / "gpt.onnx")
    assert run_main("import", tmp_path / "gpt.onnx", capsys=capsys)[0] == 0
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)               # int64, as tokenizers write them
    ins = [f"--input={name}={tmp_path / name}.npy" for name in feeds]
    assert run_main("run", tmp_path / "gpt.fasm", "--reference", *ins, "--save-outputs",
                    tmp_path / "out", capsys=capsys)[0] == 0
    want = onnxruntime_outputs(m, feeds)
    assert_close({k: np.load(tmp_path / "out" / f"{k}.npy") for k in want}, want, "fractal run")
    # a token id past the vocabulary is a located error at the gather, exit status 2
    feeds["input_ids"][0, 3] = 30
    np.save(tmp_path / "input_ids.npy", feeds["input_ids"])
    status, _, err = run_main("run", tmp_path / "gpt.fasm", "--reference", *ins, capsys=capsys)
    assert status == 2 and "gather: index 30 is out of range" in err
    assert "gpt.fasm:" in err and "Traceback" not in err


# ---------------------------------------------------------------- op by op

def data(*shape, seed=7, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


def check(m, feeds, tmp_path, machines=()):
    return matches_onnxruntime(m, feeds, tmp_path, machines)


def typed(nodes, inputs, outputs, inits=None, opset=17):
    """A model whose inputs and outputs give their element type: name -> (elem, shape)."""
    info = lambda n, s: helper.make_tensor_value_info(n, s[0], s[1])
    graph = helper.make_graph(nodes, "t", [info(n, s) for n, s in inputs.items()],
                              [info(n, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(np.asarray(a), n)
                               for n, a in (inits or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


F, I64 = TensorProto.FLOAT, TensorProto.INT64


@pytest.mark.parametrize("case", ["embedding", "axis1-const", "scalar", "last-axis-data"])
def test_gather(tmp_path, case):
    if case == "embedding":                  # token ids, negative ones counted from the end
        m = typed([node("Gather", ["table", "ids"], ["y"])], {"ids": (I64, [2, 3])},
                  {"y": (F, [2, 3, 4])}, {"table": weights((6, 4), 1)})
        feeds = {"ids": np.array([[0, 5, -1], [-6, 2, 2]], np.int64)}
    elif case == "axis1-const":              # a permutation with repeats: one gather
        m = model([node("Gather", ["x", "i"], ["y"], axis=1)], {"x": [2, 5, 3]},
                  {"y": [2, 2, 2, 3]}, {"i": np.array([[4, 0], [-1, 4]], np.int64)})
        feeds = {"x": data(2, 5, 3)}
    elif case == "scalar":                   # x[:, 2]: a slice
        m = model([node("Gather", ["x", "i"], ["y"], axis=1)], {"x": [2, 5, 3]}, {"y": [2, 3]},
                  {"i": np.array(2, np.int64)})
        feeds = {"x": data(2, 5, 3)}
    else:
        m = typed([node("Gather", ["x", "i"], ["y"], axis=-1)],
                  {"x": (F, [3, 4]), "i": (I64, [2])}, {"y": (F, [3, 2])})
        feeds = {"x": data(3, 4), "i": np.array([3, -4], np.int64)}
    text = check(m, feeds, tmp_path, machines=("tiny",))
    assert ("gather" in opcodes(text)) == (case != "scalar")


def test_gather_nd_as_the_dynamo_exporter_writes_mask_indexing(tmp_path):
    """mask[:, None, None, :] of a boolean mask as GatherND with constant [B, 1, 1, S, 2]
    indices, and rows of a float tensor picked by index pairs, negative ones too."""
    b, s = 2, 4
    grid = np.stack(np.meshgrid(np.arange(b), np.arange(s), indexing="ij"), -1)
    nodes = [node("Cast", ["mask"], ["m"], to=TensorProto.BOOL),
             node("GatherND", ["m", "grid"], ["m4"]),
             node("Cast", ["m4"], ["y"], to=F),
             node("GatherND", ["x", "rows"], ["z"])]
    m = typed(nodes, {"mask": (I64, [b, s]), "x": (F, [3, 2, 5])},
              {"y": (F, [b, 1, 1, s]), "z": (F, [2, 2, 5])},
              {"grid": grid.reshape(b, 1, 1, s, 2).astype(np.int64),
               "rows": np.array([[[2, 1], [-3, 0]], [[0, -1], [1, 1]]], np.int64)})
    check(m, {"mask": np.array([[1, 1, 0, 1], [0, 1, 1, 1]], np.int64), "x": data(3, 2, 5)},
          tmp_path, machines=("tiny",))


@pytest.mark.parametrize("starts, ends, axes, steps, out", [
    ([1], [INT_MAX], [1], None, [2, 4, 6]),
    ([-2, 0], [INT_MAX, 5], [-1, 1], [1, 2], [2, 3, 2]),
    ([4], [-INT_MAX], [2], [-2], [2, 5, 3]),
    ([0, 1], [1, 4], [0, 2], None, [1, 5, 3]),
])
def test_slice(tmp_path, starts, ends, axes, steps, out):
    ins = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64),
           "a": np.array(axes, np.int64)} | ({"t": np.array(steps, np.int64)} if steps else {})
    m = model([node("Slice", ["x", *ins], ["y"])], {"x": [2, 5, 6]}, {"y": out}, ins)
    check(m, {"x": data(2, 5, 6)}, tmp_path)


def test_slice_of_opset_9_takes_attributes(tmp_path):
    m = model([node("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100], axes=[0, 1])],
              {"x": [4, 5]}, {"y": [2, 3]}, opset=9)
    check(m, {"x": data(4, 5)}, tmp_path)


@pytest.mark.parametrize("opset, attrs, split, outs", [
    (11, dict(axis=1, split=[1, 3]), None, [[2, 1, 4], [2, 3, 4]]),
    (13, dict(axis=-1), [3, 1], [[2, 4, 3], [2, 4, 1]]),
    (18, dict(axis=2, num_outputs=2), None, [[2, 4, 2], [2, 4, 2]]),
    (13, dict(axis=0), None, [[1, 4, 4], [1, 4, 4]]),
])
def test_split(tmp_path, opset, attrs, split, outs):
    names = [f"y{i}" for i in range(len(outs))]
    inits = {"split": np.array(split, np.int64)} if split else {}
    m = model([node("Split", ["x"] + list(inits), names, **attrs)], {"x": [2, 4, 4]},
              dict(zip(names, outs)), inits, opset=opset)
    check(m, {"x": data(2, 4, 4)}, tmp_path)


def test_split_writes_only_the_outputs_used(tmp_path):
    m = model([node("Split", ["x"], ["a", "b", "c"], axis=0), node("Relu", ["b"], ["y"])],
              {"x": [3, 2]}, {"y": [1, 2]}, opset=13)
    text = check(m, {"x": data(3, 2)}, tmp_path)
    assert text.count("slice ") == 1


@pytest.mark.parametrize("x, shape, out", [([3, 1], [2, 3, 4], [2, 3, 4]),
                                           ([1, 3], [3], [1, 3]),
                                           ([2, 1, 1], [1, 5], [2, 1, 5])])
def test_expand(tmp_path, x, shape, out):
    m = model([node("Expand", ["x", "s"], ["y"])], {"x": x}, {"y": out},
              {"s": np.array(shape, np.int64)})
    check(m, {"x": data(*x)}, tmp_path, machines=("tiny",))


def test_where_equal_not_and_or_on_integer_masks(tmp_path):
    """A key-padding mask from int64 data: Equal, Not, Or, And, Cast to BOOL and to FLOAT."""
    nodes = [node("Equal", ["mask", "zero"], ["pad"]),
             node("Not", ["pad"], ["keep"]),
             node("Cast", ["x"], ["xb"], to=TensorProto.BOOL),
             node("Or", ["pad", "xb"], ["either"]),
             node("And", ["keep", "xb"], ["both"]),
             node("Where", ["either", "low", "x"], ["y"]),
             node("Cast", ["both"], ["bf"], to=F),
             node("Cast", ["mask"], ["m32"], to=TensorProto.INT32),
             node("Cast", ["m32"], ["mf"], to=F),
             node("Add", ["bf", "mf"], ["z"])]
    m = typed(nodes, {"mask": (I64, [2, 4]), "x": (F, [3, 2, 4])},
              {"y": (F, [3, 2, 4]), "z": (F, [3, 2, 4])},
              {"zero": np.array(0, np.int64), "low": np.array(-1e9, np.float32)})
    x = data(3, 2, 4)
    x[0, 0, :2] = 0
    check(m, {"mask": np.array([[1, 1, 0, 0], [1, 0, 1, 1]], np.int64), "x": x}, tmp_path,
          machines=("tiny",))


@pytest.mark.parametrize("op, attrs, axes, shape, out, opset", [
    ("ReduceMean", dict(axes=[1], keepdims=0), None, [2, 3, 4], [2, 4], 17),
    ("ReduceMean", dict(axes=[0, 2]), None, [2, 3, 4], [1, 3, 1], 17),
    ("ReduceMean", dict(keepdims=1), [-1, -2], [2, 3, 4], [2, 1, 1], 18),
    ("ReduceSum", dict(keepdims=0), [2, 0], [2, 3, 4], [3], 13),
    ("ReduceSum", dict(noop_with_empty_axes=1), None, [2, 3], [2, 3], 13),
    ("ReduceMax", dict(keepdims=0), None, [2, 3, 4], [], 18),
])
def test_reductions(tmp_path, op, attrs, axes, shape, out, opset):
    inits = {"axes": np.array(axes, np.int64)} if axes is not None else {}
    m = model([node(op, ["x"] + list(inits), ["y"], **attrs)], {"x": shape}, {"y": out}, inits,
              opset=opset)
    check(m, {"x": data(*shape)}, tmp_path)


@pytest.mark.parametrize("axis, scale_shape, bias, stats", [(-1, [6], True, False),
                                                            (1, [4, 6], True, True),
                                                            (2, [1], False, False)])
def test_layer_normalization(tmp_path, axis, scale_shape, bias, stats):
    inits = {"scale": 1 + weights(scale_shape, 1, 0.2)} | (
        {"bias": weights(scale_shape, 2, 0.2)} if bias else {})
    outs = ["y", "mean", "inv_std"] if stats else ["y"]
    kept = [2, 4, 6][:axis % 3] + [1] * (3 - axis % 3)
    m = model([node("LayerNormalization", ["x"] + list(inits), outs, axis=axis, epsilon=1e-3)],
              {"x": [2, 4, 6]}, {"y": [2, 4, 6]} | ({"mean": kept, "inv_std": kept} if stats
                                                    else {}), inits)
    check(m, {"x": data(2, 4, 6, scale=0.05) + 1}, tmp_path, machines=("tiny",))  # var ~ eps


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(tmp_path, approximate):
    m = model([node("Gelu", ["x"], ["y"], approximate=approximate)], {"x": [3, 5]}, {"y": [3, 5]},
              opset=20)
    text = check(m, {"x": data(3, 5, scale=3)}, tmp_path)
    assert ("erf" if approximate == "none" else "tanh") in opcodes(text)


def test_element_wise_ops(tmp_path):
    """Erf, Sqrt, Log, Abs, Neg, Reciprocal, Pow with an integer exponent, variadic Min, Max
    and Sum with broadcasting."""
    nodes = [node("Abs", ["x"], ["a"]), node("Sqrt", ["a"], ["s"]), node("Log", ["a"], ["l"]),
             node("Erf", ["x"], ["e"]), node("Neg", ["e"], ["n"]),
             node("Reciprocal", ["s"], ["r"]), node("Pow", ["x", "three"], ["p"]),
             node("Min", ["l", "n", "row"], ["lo"]), node("Max", ["r", "p"], ["hi"]),
             node("Sum", ["lo", "hi", "row"], ["y"])]
    m = model(nodes, {"x": [3, 4]}, {"y": [3, 4]},
              {"three": np.array(3, np.int64), "row": weights((4,), 1)})
    check(m, {"x": data(3, 4) + 0.1}, tmp_path, machines=("tiny",))


@pytest.mark.parametrize("a, b", [((2, 1, 3, 4), (1, 5, 4, 2)), ((5, 3, 4), (4,)),
                                  ((4,), (2, 4, 3)), ((2, 3, 4), (4, 5))])
def test_batched_matmul_broadcasts(tmp_path, a, b):
    out = list(np.matmul(np.zeros(a), np.zeros(b)).shape)
    m = model([node("MatMul", ["a", "b"], ["y"])], {"a": list(a), "b": list(b)}, {"y": out})
    text = check(m, {"a": data(*a), "b": data(*b, seed=8)}, tmp_path, machines=("tiny",))
    assert sum(line.startswith("matmul") for line in text.splitlines()) == 1


# ---------------------------------------------------------------- refusals

def message(m) -> str:
    from isa.errors import UserError
    with pytest.raises(UserError) as e:
        import_model(m)
    return e.value.format()


@pytest.mark.parametrize("nodes, inputs, outputs, inits, fragment", [
    ([node("Gelu", ["x"], ["y"], name="g", approximate="fast")], {"x": (F, [2])},
     {"y": (F, [2])}, {}, "node 'g' (Gelu): attribute approximate='fast' is not supported: "
                          "ONNX defines 'none' and 'tanh'"),
    ([node("Cast", ["x"], ["y"], name="c", to=I64)], {"x": (F, [2])}, {"y": (I64, [2])}, {},
     "node 'c' (Cast): attribute to=7 is not supported"),
    ([node("Slice", ["x", "s", "e"], ["y"], name="s")],
     {"x": (F, [4]), "s": (I64, [1])}, {"y": (F, [2])}, {"e": np.array([3], np.int64)},
     "node 's' (Slice): starts (input 's') must be a constant"),
    ([node("ReduceMean", ["x", "a"], ["y"], name="r", keepdims=0)],
     {"x": (F, [2, 3]), "a": (I64, [1])}, {"y": (F, [2])}, {},
     "node 'r' (ReduceMean): axes (input 'a') must be a constant"),
    ([node("Equal", ["x", "x"], ["y"], name="eq")], {"x": (F, [2])},
     {"y": (TensorProto.BOOL, [2])}, {},
     "node 'eq' (Equal): input 'x' is float data; Equal is imported for integer and boolean"),
    ([node("Gather", ["x", "i"], ["y"], name="ga")], {"x": (F, [3, 2])}, {"y": (F, [2])},
     {"i": np.array(3, np.int64)}, "node 'ga' (Gather): index 3 is out of range for an axis "
                                   "of length 3"),
    ([node("Div", ["x", "x"], ["y"], name="d")], {"x": (I64, [2])}, {"y": (I64, [2])}, {},
     "node 'd' (Div): input 'x' has ONNX element type INT64; Div is imported for float32 data"),
    ([node("Expand", ["x", "s"], ["y"], name="ex")], {"x": (F, [1]), "s": (I64, [1])},
     {"y": (F, [3])}, {}, "node 'ex' (Expand): shape (input 's') must be a constant"),
    ([node("Add", ["x", "big"], ["y"], name="a")], {"x": (I64, [2])}, {"y": (I64, [2])},
     {"big": np.array([1, 2**40], np.int64)}, "<model>: error: node 'a' (Add): an integer "
     "constant holds values outside the range of i32 (1 .. 1099511627776)"),
])
def test_refusals_name_the_node_and_op(nodes, inputs, outputs, inits, fragment):
    assert fragment in message(typed(nodes, inputs, outputs, inits, opset=20))
