"""Generated ONNX models for `fractal import`: random chains of transformer blocks in the node
forms exporters write (LayerNorm fused and decomposed, GELU, attention with causal and padding
masks, projections, Split and Concat, Slice and Expand, Gather of data and of token ids,
reductions, element-wise ops), over a float input and an int64 token-id input, in opsets 17, 18
and 20. Four in ten get one fault: an op type the importer lacks, an unknown attribute, an
attribute value out of range, a dynamic or mistyped input, a steering constant turned into an
input, a constant index out of range, or the file cut short.

A model without a fault must import (status 0) and its program must compute onnxruntime's
outputs on the reference interpreter (and, for a third of them, on `tiny`); a faulted model must
import or be refused with an error located at the model file.
"""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper

from tests.onnx.onnx_models import node
from tests.onnx.transformer_models import INT_MAX, Graph

F, I64 = TensorProto.FLOAT, TensorProto.INT64
FAULTS = ("unsupported-op", "unknown-attribute", "attribute-value", "dynamic", "type",
          "control-input", "index", "truncated")


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


class State:
    """The graph being built and the current value: x of shape [B, S, H]."""

    def __init__(self, rng, opset):
        self.rng, self.opset, self.g = rng, opset, Graph()
        self.b, self.s = int(rng.integers(1, 3)), int(rng.integers(2, 7))
        self.h = _pick(rng, [4, 6, 8])
        self.vocab = int(rng.integers(3, 12))
        self.x, self.seed, self.used_ids = "x", 0, False

    def seed_next(self) -> int:
        self.seed += 1
        return self.seed


def _layer_norm(st):
    st.x = st.g.layer_norm(st.x, st.h, st.seed_next(), decomposed=bool(st.rng.integers(2)),
                           axes_input=st.opset >= 18)


def _gelu(st):
    g, x = st.g, st.x
    form = _pick(st.rng, ["erf", "pow"] + (["op-none", "op-tanh"] if st.opset >= 20 else []))
    if form.startswith("op-"):
        st.x = g.op("Gelu", [x], approximate=form[3:])
    elif form == "erf":
        erf = g.op("Erf", [g.op("Div", [x, g.scalar(math.sqrt(2.0))])])
        st.x = g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, g.scalar(1.0)])]), g.scalar(0.5)])
    else:
        inner = g.op("Add", [x, g.op("Mul", [g.op("Pow", [x, g.scalar(3.0)]),
                                            g.scalar(0.044715)])])
        t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi))])])
        st.x = g.op("Mul", [g.op("Mul", [g.scalar(0.5), x]), g.op("Add", [g.scalar(1.0), t])])


def _attention(st):
    g, x, h = st.g, st.x, st.h
    heads = _pick(st.rng, [d for d in (1, 2, h // 2, h) if d >= 1 and h % d == 0])
    head = h // heads
    b, s = g.dim(x, 0), g.dim(x, 1)
    q = g.heads(g.linear(x, h, h, st.seed_next()), b, s, heads, head, [0, 2, 1, 3])
    kt = g.heads(g.linear(x, h, h, st.seed_next()), b, s, heads, head, [0, 2, 3, 1])
    v = g.heads(g.linear(x, h, h, st.seed_next()), b, s, heads, head, [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, kt]), g.scalar(math.sqrt(head))])
    mask = _pick(st.rng, ["none", "causal", "padding"])
    if mask == "causal":
        buffer = g.init("bias", np.tril(np.ones((16, 16), bool))[None, None])
        k_len = g.op("Shape", [kt], start=3, end=4)
        causal = g.op("Slice", [buffer, g.ints(0), k_len, g.ints(2), g.ints(1)])
        causal = g.op("Slice", [causal, g.ints(0), k_len, g.ints(3), g.ints(1)])
        scores = g.op("Where", [causal, scores, g.scalar(np.finfo(np.float32).min)])
    elif mask == "padding":
        st.used_ids = True
        padded = g.op("Unsqueeze", [g.op("Equal", ["ids", g.init("i", np.array(0, np.int64))]),
                                    g.ints(1, 2)])
        additive = g.op("Mul", [g.op("Cast", [padded], to=F), g.scalar(-1e4)])
        scores = g.op("Add", [scores, additive])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    st.x = g.op("Add", [x, g.reshape(context, b, s, h)])


def _projection(st):
    g = st.g
    if st.rng.integers(2):
        st.x = g.linear(st.x, st.h, st.h, st.seed_next())
        return
    b, s = g.dim(st.x, 0), g.dim(st.x, 1)
    rows = g.reshape(st.x, -1, st.h)
    w = g.init("w", np.random.default_rng(st.seed_next()).standard_normal((st.h, st.h))
               .astype(np.float32) / st.h)
    st.x = g.reshape(g.op("Gemm", [rows, w], transB=int(st.rng.integers(2))), b, s, st.h)


def _split(st):
    g, half = st.g, st.h // 2
    if st.opset >= 18 and st.rng.integers(2):
        a, c = g.op("Split", [st.x], outputs=2, axis=2, num_outputs=2)
    else:
        a, c = g.op("Split", [st.x, g.ints(half, st.h - half)], outputs=2, axis=-1)
    st.x = g.op("Concat", [c, g.op("Tanh", [a])], axis=2)


def _slice_expand(st):
    """x + expand(x[:, start::step][:, :1]) over the sequence."""
    g, step = st.g, _pick(st.rng, [1, 2, -1])
    start = int(st.rng.integers(-st.s, st.s))
    part = g.op("Slice", [st.x, g.ints(start), g.ints(INT_MAX if step > 0 else -INT_MAX),
                          g.ints(1), g.ints(step)])
    first = g.op("Slice", [part, g.ints(0), g.ints(1), g.ints(1)])
    st.x = g.op("Add", [st.x, g.op("Expand", [first, g.op("Shape", [st.x])])])


def _gather(st):
    g = st.g
    if st.rng.integers(2):                               # token embeddings of the ids
        st.used_ids = True
        table = g.init("emb", np.random.default_rng(st.seed_next())
                       .standard_normal((st.vocab, st.h)).astype(np.float32))
        st.x = g.op("Add", [st.x, g.op("Gather", [table, "ids"])])
    else:                                                # positions picked, negatives too
        idx = st.rng.integers(-st.s, st.s, st.s).astype(np.int64)
        st.x = g.op("Gather", [st.x, g.init("i", idx)], axis=1)


def _reduce(st):
    g = st.g
    op = _pick(st.rng, ["ReduceMean", "ReduceSum", "ReduceMax"])
    axes = sorted(set(int(a) for a in st.rng.integers(0, 3, int(st.rng.integers(1, 3)))))
    if op == "ReduceSum" or st.opset >= 18:
        r = g.op(op, [st.x, g.ints(*axes)], keepdims=1)
    else:
        r = g.op(op, [st.x], axes=axes, keepdims=1)
    st.x = g.op("Sub", [st.x, r])


def _element_wise(st):
    g, x = st.g, st.x
    one = g.scalar(1.0)
    a = g.op("Add", [g.op("Abs", [x]), one])
    choice = _pick(st.rng, ["sqrt", "log", "reciprocal", "neg-min", "max-sum"])
    if choice == "sqrt":
        st.x = g.op("Sqrt", [a])
    elif choice == "log":
        st.x = g.op("Log", [a])
    elif choice == "reciprocal":
        st.x = g.op("Reciprocal", [a])
    elif choice == "neg-min":
        st.x = g.op("Min", [g.op("Neg", [x]), x, g.init("row", np.linspace(-1, 1, st.h,
                                                                         dtype=np.float32))])
    else:
        st.x = g.op("Sum", [g.op("Max", [x, g.scalar(0.0)]), x, one])


BLOCKS = {"layernorm": _layer_norm, "gelu": _gelu, "attention": _attention,
          "projection": _projection, "split": _split, "slice-expand": _slice_expand,
          "gather": _gather, "reduce": _reduce, "element-wise": _element_wise}


def random_model(rng):
    """(model, feeds, block names)."""
    st = State(rng, _pick(rng, [17, 18, 20]))
    names = [_pick(rng, sorted(BLOCKS)) for _ in range(int(rng.integers(1, 5)))]
    for name in names:
        BLOCKS[name](st)
    st.g.nodes.append(node("Identity", [st.x], ["y"]))
    inputs = {"x": (F, [st.b, st.s, st.h])}
    if st.used_ids:
        inputs["ids"] = (I64, [st.b, st.s])
    m = st.g.model(inputs, {"y": (F, [st.b, st.s, st.h])}, opset=st.opset)
    feeds = {"x": rng.standard_normal((st.b, st.s, st.h)).astype(np.float32)}
    if st.used_ids:
        feeds["ids"] = rng.integers(0, st.vocab, (st.b, st.s)).astype(np.int64)
    return m, feeds, names


def add_fault(rng, m) -> str:
    """One fault in m (edited in place), by name."""
    g = m.graph
    fault = _pick(rng, FAULTS)
    target = _pick(rng, list(g.node))
    if fault == "unsupported-op":
        target.op_type = _pick(rng, ["HardSwish", "Einsum", "LpNormalization", "Attention"])
    elif fault == "unknown-attribute":
        target.attribute.append(helper.make_attribute("fused", 1))
    elif fault == "attribute-value":
        with_ints = [n for n in g.node if any(a.type == a.INT for a in n.attribute)] or [target]
        n = _pick(rng, with_ints)
        for a in n.attribute:
            if a.type == a.INT:
                a.i = int(_pick(rng, [-9, 7, 2**31, -1, 3]))
                break
        else:
            n.attribute.append(helper.make_attribute("axis", 5))
    elif fault == "dynamic":
        dim = g.input[0].type.tensor_type.shape.dim[int(rng.integers(3))]
        dim.Clear()
        dim.dim_param = "batch"
    elif fault == "type":
        g.input[0].type.tensor_type.elem_type = _pick(rng, [TensorProto.DOUBLE, TensorProto.UINT8,
                                                            TensorProto.INT64])
    elif fault == "control-input":
        ints = [i for i in g.initializer if i.data_type == TensorProto.INT64]
        if ints:
            init = _pick(rng, ints)
            g.input.append(helper.make_tensor_value_info(init.name, I64, list(init.dims)))
            g.initializer.remove(init)
    elif fault == "index":
        ints = [i for i in g.initializer if i.data_type == TensorProto.INT64]
        if ints:
            init = _pick(rng, ints)
            init.CopyFrom(helper.make_tensor(init.name, I64, list(init.dims),
                                             [int(rng.integers(50, 2**40))] *
                                             max(1, math.prod(init.dims))))
    return fault


def onnx_case(rng):
    from tests.fuzz.cases import Case
    m, feeds, names = random_model(rng)
    fault = add_fault(rng, m) if rng.random() < 0.4 else None
    data = m.SerializeToString()
    if fault == "truncated":
        data = data[:int(rng.integers(0, len(data)))]
    machine = "tiny" if fault is None and rng.random() < 1 / 3 else None
    argv = ["import", "m.onnx", "-o", "m.fasm"]
    return Case("onnx", f"{fault or 'valid'}:{'+'.join(names)}", argv, {"m.onnx": data},
                0 if fault is None else None, "onnx", program=None if fault else feeds,
                machine=machine)


def check_onnx(case) -> list[str]:
    """A model without a fault: the imported program computes onnxruntime's outputs."""
    import onnx
    import onnxruntime

    from fractal import api
    from fractal.onnx_import import import_model
    from tests.fuzz.cases import compare_outputs
    m = onnx.ModelProto.FromString(case.files["m.onnx"])
    feeds = case.program
    try:
        session = onnxruntime.InferenceSession(m.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        text, params = import_model(m)
        problems = compare_outputs(api.reference(text, inputs={**feeds, **params}).outputs, want)
        if case.machine:
            got = api.run(text, api.build_machine(case.machine), inputs={**feeds, **params})
            problems += [f"on {case.machine}: {p}" for p in compare_outputs(got.outputs, want)]
    except Exception as e:
        problems = [f"checking against onnxruntime raised {type(e).__name__}: {str(e)[:200]}"]
    return problems
