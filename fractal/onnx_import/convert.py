"""The import driver: an ONNX graph, node by node, into a fractal program and its param data."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from isa.checker import parse_program
from isa.errors import ErrorGroup, InternalError, UserError, env_limit
from fractal.onnx_import.builder import Builder, Value, onnx_comment
from fractal.onnx_import.load import INTEGER_TYPES, Graph, describe_node, load_graph
from fractal.onnx_import.ops import CONVERTERS
from fractal.onnx_import import ops_index, ops_norm  # noqa: F401 (they register their converters)

__all__ = ["import_model"]

_FLOAT = 1                                        # onnx.TensorProto.FLOAT
_FLOAT16 = 10                                     # onnx.TensorProto.FLOAT16
#: the fractal dtype of each ONNX element type a model can compute in
_DTYPES = {_FLOAT: "f32", _FLOAT16: "f16"}
#: the ones a graph input may have (a .npy of int64 or int32 feeds an i32 tensor)
_INPUT_INTEGER_TYPES = (6, 7)
#: ops never folded at import time: their value is not a function of their inputs
_NOT_FOLDED = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Bernoulli", "Multinomial")
#: ops whose value depends only on their input's static shape
_SHAPE_ONLY = ("Shape", "Size")


class Context:
    """One node being converted: what a converter reads and the destinations it writes."""

    def __init__(self, graph: Graph, b: Builder, node, index: int, ins: list, outputs: dict,
                 used: set):
        self.graph, self.b, self.node, self.ins = graph, b, node, ins
        self.opset = graph.opset
        self.name = describe_node(node, index)
        self._outputs, self._used, self._dests = outputs, used, {}

    def error(self, message: str, hint: str | None = None) -> UserError:
        return UserError(f"{self.name}: {message}", self.graph.where, hint=hint)

    def bad_attr(self, attr: str, why: str) -> UserError:
        return self.error(f"attribute {attr}={self.attr(attr)!r} is not supported: {why}")

    def attr(self, name: str, default=None):
        for a in self.node.attribute:
            if a.name == name:
                v = helper.get_attribute_value(a)
                return v.decode() if isinstance(v, bytes) else v
        return default

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < rank:
            raise self.bad_attr("axis", f"it is out of range for rank {rank}")
        return axis % rank

    def hint(self, suffix: str) -> str:
        return f"{self.node.output[0]}_{suffix}"

    def out_shape(self, i: int = 0) -> tuple:
        name = self.node.output[i]
        if self.graph.shapes.get(name) is None:
            self._infer_locally()
        shape = self.graph.shapes.get(name)
        if shape is None:
            raise self.error(f"the shape of output '{name}' is not static after shape inference",
                             hint="fix every input's shape (--shape NAME=D0,D1,...) and use "
                                  "constant shape arguments")
        self.out_dtype(i)
        return shape

    def _infer_locally(self):
        """The node's output shapes and types inferred again from its inputs alone, whose shapes
        are all static here and whose constants are known (ONNX's shape inference over the
        whole graph can leave a shape open that folding makes static: a Slice whose bounds
        come from a Shape with start and end)."""
        types, data = {}, {}
        for name, v in zip(self.node.input, self.ins):
            if not name or v is None:
                continue
            elem = self.graph.dtypes.get(name) or (
                helper.np_dtype_to_tensor_dtype(v.const.dtype) if v.is_const else
                7 if v.is_int else self.graph.float_type)
            types[name] = helper.make_tensor_type_proto(elem, v.shape)
            if v.is_const and v.const.dtype.kind in "biuf":
                data[name] = numpy_helper.from_array(np.ascontiguousarray(v.const), name)
        try:
            schema = onnx.defs.get_schema(self.node.op_type, self.opset, self.node.domain)
            inferred = onnx.shape_inference.infer_node_outputs(schema, self.node, types, data)
        except Exception:
            return                                # the caller reports the open shape
        for name, t in inferred.items():
            if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
                dims = tuple(d.dim_value if d.HasField("dim_value") else None
                             for d in t.tensor_type.shape.dim)
                if all(d is not None and d >= 1 for d in dims):
                    self.graph.shapes[name] = dims
                    self.graph.dtypes.setdefault(name, t.tensor_type.elem_type)

    def out_dtype(self, i: int = 0) -> str:
        """The fractal dtype of output i: the model's float type, or i32 for integers."""
        name = self.node.output[i]
        elem = self.graph.dtypes.get(name)
        if elem == self.graph.float_type:
            return self.b.dtype
        if elem in INTEGER_TYPES:
            return "i32"
        raise self.error(f"output '{name}' has ONNX element type {_type_name(elem)}; "
                         f"{_computes(self.graph)}")

    def used(self, i: int) -> bool:
        """Whether output i is read by a later node or is a graph output."""
        return i < len(self.node.output) and self.node.output[i] in self._used

    def dest(self, i: int = 0) -> Value:
        """The tensor that receives output i: the graph output of that name, or an internal one."""
        if i not in self._dests:
            name, shape, dtype = self.node.output[i], self.out_shape(i), self.out_dtype(i)
            if name in self._outputs and self._outputs[name][1] is None:
                value = self.b.declare(name, shape, "output", name, name=self._outputs[name][0],
                                       dtype=dtype)
                self._outputs[name] = (value.name, value)
            else:
                value = self.b.declare(name, shape, dtype=dtype)
            self._dests[i] = value
        return self._dests[i]

    def temp(self, suffix: str, shape, dtype: str | None = None) -> Value:
        """An internal tensor named after output 0, of output 0's dtype unless `dtype` says."""
        return self.b.temp(self.hint(suffix), shape, dtype or self.out_dtype(0))

    def unused_outputs(self, i: int, what: str):
        if self.used(i):
            raise self.error(f"output {i} ({what}) is used but not supported")


def _float_name(graph: Graph) -> str:
    return "float16" if graph.float_type == _FLOAT16 else "float32"


def _computes(graph: Graph) -> str:
    return (f"fractal programs compute {_float_name(graph)} data, and integers (INT64, INT32, "
            f"BOOL) as i32")


def _float_type(graph: Graph) -> int:
    """FLOAT16 for a model whose float graph inputs and outputs are all float16, else FLOAT."""
    g = graph.model.graph
    initialized = {i.name for i in g.initializer}
    ends = [graph.dtypes.get(v.name) for v in list(g.input) + list(g.output)
            if v.name not in initialized and graph.dtypes.get(v.name) not in INTEGER_TYPES]
    return _FLOAT16 if ends and all(t == _FLOAT16 for t in ends) else _FLOAT


def _type_name(elem_type) -> str:
    return TensorProto.DataType.Name(elem_type) if elem_type is not None else "unknown"


#: the bytes a folded constant may hold beyond 4 times its node's constant inputs
FOLD_LIMIT = ("FRACTAL_MAX_FOLD_BYTES", 64 * 2**20)


def _fold_cap(ins: list) -> int:
    """The most bytes a node of constants may fold into: FRACTAL_MAX_FOLD_BYTES, or 4 times its
    constant inputs when they are larger (a transpose of a large weight folds; a node that
    makes a gigabyte from a few bytes does not)."""
    given = sum(v.const.nbytes for v in ins if v is not None and v.const is not None)
    return max(env_limit(*FOLD_LIMIT), 4 * given)


def _fold_refusal(ctx: Context, nbytes: int, cap: int) -> UserError:
    return ctx.error(f"folding this node of constants at import time gives {nbytes:,} bytes, "
                     f"over the limit of {cap:,} (the larger of {FOLD_LIMIT[0]} and 4 times "
                     f"the node's constant inputs; set {FOLD_LIMIT[0]} to raise it)")


def _fold(graph: Graph, node, ins: list, ctx: Context) -> list[Value]:
    """Evaluate a node of constants with ONNX's reference implementation, when what it makes
    (its inferred output shapes, at 8 bytes an element) stays within the folding cap."""
    cap = _fold_cap(ins)
    planned = 0
    for name in node.output:
        shape = graph.shapes.get(name) if name else None
        if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape):
            planned += 8 * math.prod(shape)
    if planned > cap:
        raise _fold_refusal(ctx, planned, cap)
    feeds = {}
    for name, v in zip(node.input, ins):
        if name:
            if node.op_type in _SHAPE_ONLY:     # the value is never read: a zero-stride view
                feeds[name] = np.broadcast_to(np.float32(0), v.shape)
            else:
                feeds[name] = v.const
    try:
        results = ReferenceEvaluator(node, opsets={"": graph.opset}).run(None, feeds)
    except MemoryError:
        raise _fold_refusal(ctx, planned, cap) from None
    except Exception as e:
        raise ctx.error(f"cannot evaluate this node of constants at import time: {e}") from None
    made = sum(np.asarray(r).nbytes for r in results)
    if made > cap:
        raise _fold_refusal(ctx, made, cap)
    return [ctx.b.const(np.asarray(r), name) for r, name in zip(results, node.output)]


def _convert(graph: Graph, b: Builder, node, ctx: Context) -> list[Value]:
    ins = ctx.ins
    present = [v for v in ins if v is not None]
    if node.op_type not in _NOT_FOLDED and node.domain in ("", "ai.onnx") and (
            all(v.is_const for v in present) or node.op_type in _SHAPE_ONLY):
        return _fold(graph, node, ins, ctx)
    entry = CONVERTERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if entry is None:
        op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
        raise ctx.error(f"op type {op} is not supported",
                        hint="supported op types: " + ", ".join(sorted(CONVERTERS)))
    fn, known, ints = entry
    for a in node.attribute:
        if a.name not in known:
            raise ctx.bad_attr(a.name, f"{node.op_type} is imported without it")
    for position, (name, v) in enumerate(zip(node.input, ins)):
        if v is None or v.is_const:
            continue
        elem = graph.dtypes.get(name, graph.float_type)
        if elem in INTEGER_TYPES and (ints is True or position in ints):
            continue
        if elem != graph.float_type:
            takes = " (it takes integer data only as " + ", ".join(
                f"input {p}" for p in sorted(ints)) + ")" if ints and ints is not True else ""
            raise ctx.error(f"input '{name}' has ONNX element type {_type_name(elem)}; "
                            f"{node.op_type} is imported for {_float_name(graph)} data{takes}")
    b.node = (f"{node.op_type} {node.name!r}" if node.name else
              f"{node.op_type} -> {node.output[0]!r}").replace("\n", " ")
    try:
        outs = fn(ctx)
    except UserError as e:
        if e.where is not None:
            raise
        raise ctx.error(e.message, e.hint) from None    # the builder's: located at this node
    finally:
        b.node = ""
    return outs


def import_model(source, input_shapes: dict | None = None) -> tuple[str, dict[str, np.ndarray]]:
    """An ONNX model (a path or a ModelProto) as fractal program text and its param arrays.

    `input_shapes` fixes graph inputs' shapes ({name: (d0, d1, ...)}), for models whose batch
    size or other sizes are dynamic. Every unsupported node is reported at once.
    """
    graph = load_graph(source, input_shapes)
    graph.float_type = _float_type(graph)
    g, b = graph.model.graph, Builder(_DTYPES[graph.float_type])
    initializers = {i.name: i for i in g.initializer}
    values: dict[str, Value] = {}
    # graph inputs and outputs first, so that they keep their names when others would collide
    for inp in g.input:
        if inp.name in initializers:
            continue
        elem = graph.dtypes.get(inp.name)
        if elem != graph.float_type and elem not in _INPUT_INTEGER_TYPES:
            raise UserError(f"input '{inp.name}' has ONNX element type {_type_name(elem)}; "
                            f"fractal programs take {_float_name(graph)} and integer (INT64, "
                            f"INT32, read as i32) inputs", graph.where)
        values[inp.name] = b.declare(inp.name, graph.shapes[inp.name], "input", inp.name,
                                     dtype=b.dtype if elem == graph.float_type else "i32")
    outputs = {o.name: (b.fresh(o.name), None) for o in g.output}
    for name, init in initializers.items():
        values[name] = b.const(numpy_helper.to_array(init), name, onnx_comment(name))
    used = {i for n in g.node for i in n.input} | set(outputs)
    errors, failed = [], set()
    for index, node in enumerate(g.node):
        if any(i in failed for i in node.input):
            failed.update(node.output)            # reported where it first went wrong
            continue
        ins = [values[i] if i else None for i in node.input]
        ctx = Context(graph, b, node, index, ins, outputs, used)
        try:
            outs = _convert(graph, b, node, ctx)
        except UserError as e:
            errors.append(e)
            failed.update(node.output)
            continue
        values.update((name, v) for name, v in zip(node.output, outs) if name)
    for name, (ident, written) in outputs.items():
        if name in failed or written is values.get(name):
            continue
        v = values[name]                          # an alias, a constant or an input: copy it
        out = b.declare(name, v.shape, "output", name, name=ident, dtype=v.dtype)
        b.emit("copy", out, v)
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    text = b.text(_header(graph))
    _verify(text, graph.where)
    return text, b.params


def _header(graph: Graph) -> str:
    m = graph.model
    producer = (f", produced by {m.producer_name} {m.producer_version}".rstrip()
                if m.producer_name else "")
    return (f"imported from ONNX model {graph.where} (opset {graph.opset}{producer}); "
            f"param data in the .npz beside this file")


def _verify(text: str, where: str):
    try:
        parse_program(text, "<imported>")
    except UserError as e:
        raise InternalError("an imported program passes the checker", where, e.format()) from None
