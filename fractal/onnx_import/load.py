"""Reading an ONNX model: the file, its validity, fixed input shapes, and static shape inference.

Every problem is a `UserError` naming the file (and the input or value at fault): a missing or
unreadable file, a model the ONNX checker rejects, a dynamic dimension, a shape inference failure.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import onnx

from isa.errors import UserError

__all__ = ["Graph", "load_graph", "describe_node", "INTEGER_TYPES"]

#: ONNX integer and boolean element types, carried as i32 data (booleans as 0 and 1):
#: INT32, INT64, BOOL
INTEGER_TYPES = (6, 7, 9)


@dataclass
class Graph:
    model: object                       # the ModelProto after shape inference
    where: str                          # the file, or "<model>" for a ModelProto given in memory
    opset: int                          # the default domain's opset version
    shapes: dict[str, tuple | None]     # every typed value: its static shape, or None
    dtypes: dict[str, int]              # every typed value: its ONNX element type
    float_type: int = 1                 # the element type the model computes in: FLOAT or FLOAT16


def describe_node(node, index: int) -> str:
    """How messages name a node: `node 'conv1' (Conv)`, or by position and output if unnamed."""
    if node.name:
        return f"node '{node.name}' ({node.op_type})"
    out = f", output '{node.output[0]}'" if node.output else ""
    return f"node #{index} ({node.op_type}{out})"


def _read(source) -> tuple[object, str]:
    if isinstance(source, onnx.ModelProto):
        return source, "<model>"
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise UserError(f"no such file: {path}", path)
    try:
        return onnx.load(path), path
    except Exception as e:                       # not protobuf, truncated, missing external data
        raise UserError(f"cannot read {path} as an ONNX model: {e}", path) from None


def _fix_input_shapes(model, input_shapes: dict, where: str):
    inputs = {i.name: i for i in model.graph.input}
    for name, shape in input_shapes.items():
        if name not in inputs:
            raise UserError(f"the model has no input named '{name}'", where,
                            hint="its inputs: " + ", ".join(inputs))
        dims = inputs[name].type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise UserError(f"input '{name}' has rank {len(dims)}, the shape given for it has "
                            f"{len(shape)} dimensions", where)
        for d, size in zip(dims, shape):
            d.Clear()
            d.dim_value = int(size)


def _shape(value_info) -> tuple | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return None if any(d is None or d < 1 for d in dims) else dims


def _dynamic_dims(value_info) -> list[str]:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return ["its rank"]
    return [f"axis {i} ({d.dim_param or '?'})" for i, d in enumerate(t.shape.dim)
            if not d.HasField("dim_value") or d.dim_value < 1]


def _check_constant_sizes(model, where: str):
    """Refuse a node whose inputs are all constants (it is folded at import time, and shape
    inference with data propagation computes it) when its inferred output is larger than the
    folding cap (fractal/onnx_import/convert.py `FOLD_LIMIT`)."""
    from fractal.onnx_import.convert import FOLD_LIMIT
    from isa.errors import env_limit
    g = model.graph
    consts = {i.name: i for i in g.initializer}
    sizes = {}
    for vi in list(g.value_info) + list(g.output):
        shape = _shape(vi) if vi.type.HasField("tensor_type") else None
        if shape is not None:
            sizes.setdefault(vi.name, 8 * _prod(shape))
    cap = env_limit(*FOLD_LIMIT)
    for index, node in enumerate(g.node):
        if node.op_type == "Constant":
            consts.update((o, None) for o in node.output)
        if not all(i in consts for i in node.input if i):
            continue
        given = sum(_prod(consts[i].dims) * 8 for i in node.input if i and consts[i] is not None)
        made = sum(sizes.get(o, 0) for o in node.output)
        limit = max(cap, 4 * given)
        if made > limit:
            raise UserError(f"{describe_node(node, index)} of constants would fold into "
                            f"{made:,} bytes at import time, over the limit of {limit:,} (the "
                            f"larger of {FOLD_LIMIT[0]} and 4 times its constant inputs; set "
                            f"{FOLD_LIMIT[0]} to raise it)", where)
        consts.update((o, None) for o in node.output)


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def load_graph(source, input_shapes: dict | None = None) -> Graph:
    """The checked model with every graph input's shape static and every shape inferred."""
    model, where = _read(source)
    model = onnx.ModelProto.FromString(model.SerializeToString())    # never edit the caller's
    if input_shapes:
        _fix_input_shapes(model, input_shapes, where)
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        first_line = str(e).strip().splitlines()[0]
        raise UserError(f"not a valid ONNX model: {first_line}", where) from None
    initialized = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in initialized:
            continue
        dynamic = _dynamic_dims(inp)
        if dynamic:
            dims = [d.dim_value if d.HasField("dim_value") else 1
                    for d in inp.type.tensor_type.shape.dim]
            raise UserError(f"input '{inp.name}' has a dynamic dimension at {', '.join(dynamic)}; "
                            f"fractal programs need static shapes", where,
                            hint=f"fix the batch size and other free sizes, e.g. --shape "
                                 f"{inp.name}={','.join(map(str, dims))}")
    try:
        # first without data propagation, which would compute every value of a node of
        # constants (a gigabyte from a ConstantOfShape of a few bytes): sizes are checked first
        _check_constant_sizes(onnx.shape_inference.infer_shapes(model, data_prop=False), where)
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"ONNX shape inference failed: {str(e).strip()}", where) from None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise UserError("the model imports no version of the default ONNX operator set", where)
    shapes, dtypes = {}, {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and shapes.get(vi.name) is None:
            shapes[vi.name] = _shape(vi)          # the first static shape found (inferred first)
            dtypes[vi.name] = vi.type.tensor_type.elem_type
    return Graph(model, where, opset, shapes, dtypes)
