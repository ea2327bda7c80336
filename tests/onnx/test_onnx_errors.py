"""What the importer cannot map is a located UserError naming the node, never a wrong program."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from isa.errors import ErrorGroup, UserError
from fractal import api
from fractal.onnx_import import import_model
from tests.onnx.onnx_models import model, node, onnxruntime_outputs, weights


def message(m, **kw) -> str:
    with pytest.raises(UserError) as e:
        import_model(m, **kw)
    return e.value.format()


def test_every_unsupported_node_is_listed_at_once():
    m = model([node("Einsum", ["x"], ["a"], name="sum1", equation="ij->ij"),
               node("Relu", ["a"], ["b"]),
               node("HardSwish", ["x"], ["c"]), node("Add", ["b", "c"], ["y"])],
              {"x": [2, 3]}, {"y": [2, 3]})
    with pytest.raises(ErrorGroup) as e:
        import_model(m)
    text = e.value.format()
    assert [err.message for err in e.value.errors] == [
        "node 'sum1' (Einsum): op type Einsum is not supported",
        "node #2 (HardSwish, output 'c'): op type HardSwish is not supported"]
    assert "supported op types: Abs, Add, And, AveragePool," in text and "2 errors found" in text


@pytest.mark.parametrize("op, attrs, shapes, fragment", [
    ("Conv", dict(dilations=[2, 2]), ([1, 2, 9, 9], [1, 4, 5, 5]),
     "attribute dilations=[2, 2] is not supported: the instructions have no dilation"),
    ("Conv", dict(strides=[1, 2]), ([1, 2, 9, 9], [1, 4, 7, 4]),
     "attribute strides=[1, 2] is not supported: the instructions take one stride"),
    ("MaxPool", dict(kernel_shape=[2, 3]), ([1, 2, 9, 9], [1, 2, 8, 7]),
     "attribute kernel_shape=[2, 3] is not supported: the instructions take a square 2-D window"),
    ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
     ([1, 2, 9, 9], [1, 2, 5, 5]),
     "attribute ceil_mode=1 is not supported: ONNX keeps a partial window at the end "
     "(output 5x5, floor mode gives 4x4)"),
    ("AveragePool", dict(kernel_shape=[2, 2], pads=[2, 0, 0, 0]), ([1, 2, 9, 9], [1, 2, 10, 8]),
     "attribute pads=[2, 0, 0, 0] is not supported: every pad must be smaller than the kernel"),
    ("Dropout", {}, ([1, 2, 3, 3], [1, 2, 3, 3]),
     "only inference is supported: training_mode must be a constant false"),
    ("Cast", dict(to=TensorProto.INT32), ([2, 3], None), "attribute to=6 is not supported"),
    ("LRN", dict(size=3), ([2, 3], [2, 3]), "only NCHW inputs (rank 4) are supported"),
])
def test_unsupported_attribute_names_node_op_and_attribute(op, attrs, shapes, fragment):
    x, y = shapes
    extra = {"Conv": ["w"], "Dropout": ["ratio", "training"]}.get(op, [])
    inits = {"w": weights((4, 2, 3, 3), 1), "ratio": np.array(0.5, np.float32),
             "training": np.array(True)}
    out = helper.make_tensor_value_info("y", TensorProto.INT32 if y is None else TensorProto.FLOAT,
                                        y or x)
    graph = helper.make_graph([node(op, ["x"] + extra, ["y"], name="n1", **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)], [out],
                              [onnx.numpy_helper.from_array(inits[k], k) for k in extra])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    text = message(m)
    assert text.startswith(f"<model>: error: node 'n1' ({op}): ") and fragment in text


def test_dynamic_batch_size_needs_a_fixed_shape(tmp_path):
    m = model([node("Relu", ["x"], ["y"])], {"x": ["batch", 3]}, {"y": ["batch", 3]})
    text = message(m)
    assert "input 'x' has a dynamic dimension at axis 0 (batch)" in text
    assert "hint: fix the batch size and other free sizes, e.g. --shape x=1,3" in text
    program, _ = import_model(m, input_shapes={"x": (4, 3)})
    assert "tensor x  : f32[4, 3]  input" in program
    assert "no input named 'z'" in message(m, input_shapes={"z": (4, 3)})
    assert "has rank 2, the shape given for it has 3" in message(m, input_shapes={"x": (4, 3, 1)})


def test_missing_and_corrupt_files_name_the_path(tmp_path):
    missing = tmp_path / "absent.onnx"
    assert message(missing) == f"{missing}: error: no such file: {missing}"
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x0a\xff\xff\xff not protobuf")
    assert message(corrupt).startswith(f"{corrupt}: error: cannot read {corrupt} as an ONNX model")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert message(empty).startswith(f"{empty}: error: not a valid ONNX model")


def test_data_of_other_types_is_refused():
    graph = helper.make_graph([node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert "input 'x' has ONNX element type DOUBLE; fractal programs take float32 and integer " \
           "(INT64, INT32, read as i32) inputs" in message(m)


def test_integer_data_where_an_op_takes_floats_names_the_input():
    graph = helper.make_graph([node("Sqrt", ["x"], ["y"], name="root")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert "node 'root' (Sqrt): input 'x' has ONNX element type INT64; Sqrt is imported for " \
           "float32 data" in message(m)


@pytest.mark.parametrize("op, inputs, size", [
    ("Mul", ["x", "i"], 2), ("Add", ["x", "i"], 2), ("Sum", ["x", "i"], 2),
    ("Concat", ["x", "i"], 4), ("Where", ["c", "x", "i"], 2)])
def test_integer_and_float_operands_of_one_op_are_refused(op, inputs, size):
    # not valid ONNX (one type for every data operand), so no program can mean it
    attrs = {"axis": 0} if op == "Concat" else {}
    graph = helper.make_graph(
        [node("Cast", ["n"], ["i"], name="to_int", to=TensorProto.INT32),
         node("Cast", ["n"], ["c"], name="to_bool", to=TensorProto.BOOL),
         node(op, inputs, ["y"], name="mixed", **attrs)], "g",
        [helper.make_tensor_value_info("n", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert f"node 'mixed' ({op}): its operands mix integer and float data (float, integer); " \
           f"ONNX's {op} takes operands of one type" in message(m)


def test_count_include_pad_is_mapped_exactly_not_ignored(tmp_path):
    """The padded average differs between the two settings; both match onnxruntime."""
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4)).astype(np.float32)
    results = []
    for include in (0, 1):
        m = model([node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                        count_include_pad=include)], {"x": [1, 1, 4, 4]}, {"y": [1, 1, 4, 4]})
        text, params = import_model(m)
        got = api.reference(text, inputs={"x": x, **params}).outputs["y"]
        np.testing.assert_allclose(got, onnxruntime_outputs(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)
        results.append(got)
    assert not np.allclose(results[0], results[1])
