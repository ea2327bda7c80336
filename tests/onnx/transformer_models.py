"""A BERT-like encoder block and a GPT-like decoder block, built with onnx.helper in the node
forms that PyTorch's exporter writes for Hugging Face models: embeddings as Gather, shape-derived
Reshape targets (Shape -> Gather -> Unsqueeze -> Concat), position ids from Range, LayerNorm both
as the LayerNormalization op and decomposed (ReduceMean, Sub, Pow, Add, Sqrt, Div, Mul), the
exact GELU written with Erf, the tanh GELU written with Pow, batched MatMul of heads, a padding
mask made from an int64 input, and GPT-2's causal mask sliced from a boolean buffer and applied
with Where. Widths are small, so that a run on a simulated machine takes about a second."""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.onnx.onnx_models import node, rng, weights

INT_MAX = np.iinfo(np.int64).max


class Graph:
    """Nodes and initializers being written; `name()` makes unique value names."""

    def __init__(self):
        self.nodes, self.inits, self._count = [], {}, 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def init(self, stem: str, array) -> str:
        name = self.name(stem)
        self.inits[name] = np.asarray(array)
        return name

    def op(self, op_type: str, inputs, stem: str | None = None, outputs: int = 1, **attrs):
        outs = [self.name(stem or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(node(op_type, list(inputs), outs, name=outs[0] + "_node", **attrs))
        return outs[0] if outputs == 1 else outs

    def ints(self, *values) -> str:
        return self.init("c", np.array(values, np.int64))

    def scalar(self, value) -> str:
        return self.init("c", np.array(value, np.float32))

    # ------------------------------------------------ exporter idioms

    def dim(self, x: str, axis: int) -> str:
        """Shape(x)[axis] as a 1-element int64 tensor: Shape -> Gather -> Unsqueeze."""
        size = self.op("Gather", [self.op("Shape", [x]), self.init("i", np.array(axis, np.int64))],
                       axis=0)
        return self.op("Unsqueeze", [size, self.ints(0)])

    def reshape(self, x: str, *parts) -> str:
        """Reshape to Concat(parts): each part a dim() of another value or a constant int."""
        pieces = [p if isinstance(p, str) else self.ints(p) for p in parts]
        return self.op("Reshape", [x, self.op("Concat", pieces, axis=0)])

    def linear(self, x: str, n_in: int, n_out: int, seed: int) -> str:
        w = self.init("w", weights((n_in, n_out), seed, 1 / math.sqrt(n_in)))
        b = self.init("b", weights((n_out,), seed + 100, 0.1))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, width: int, seed: int, decomposed: bool,
                   axes_input: bool = False) -> str:
        gamma = self.init("gamma", 1 + weights((width,), seed, 0.1))
        beta = self.init("beta", weights((width,), seed + 1, 0.1))
        if not decomposed:
            return self.op("LayerNormalization", [x, gamma, beta], epsilon=1e-5, axis=-1)

        def mean(v):
            if axes_input:                                  # opset 18: axes as an input
                return self.op("ReduceMean", [v, self.ints(-1)], keepdims=1)
            return self.op("ReduceMean", [v], axes=[-1], keepdims=1)
        centred = self.op("Sub", [x, mean(x)])
        var = mean(self.op("Pow", [centred, self.scalar(2.0)]))
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar(1e-5)])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [centred, std]), gamma]), beta])

    def heads(self, x: str, batch: str, seq: str, heads: int, head: int, perm) -> str:
        """[B, S, H*D] -> [B, H, S, D] (perm 0,2,1,3) or [B, H, D, S] (perm 0,2,3,1)."""
        return self.op("Transpose", [self.reshape(x, batch, seq, heads, head)], perm=perm)

    def model(self, inputs: dict, outputs: dict, opset: int):
        def info(n, spec):
            elem, shape = spec
            return helper.make_tensor_value_info(n, elem, shape)
        graph = helper.make_graph(self.nodes, "block", [info(n, s) for n, s in inputs.items()],
                                  [info(n, s) for n, s in outputs.items()],
                                  [numpy_helper.from_array(a, n) for n, a in self.inits.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def bert_block(batch=2, seq=8, width=16, heads=2, ffn=32, vocab=30, positions=16):
    """Embeddings (word, position, token type), one post-LN encoder layer with a padding mask
    and the exact GELU, and the pooler (the first token, Gemm, Tanh). Opset 17."""
    g, head = Graph(), width // heads
    ids = "input_ids"
    words = g.op("Gather", [g.init("word_embeddings", weights((vocab, width), 1)), ids])
    seq_len = g.op("Gather", [g.op("Shape", [ids]), g.init("i", np.array(1, np.int64))], axis=0)
    position_ids = g.op("Unsqueeze", [g.op("Range", [g.init("i", np.array(0, np.int64)), seq_len,
                                                     g.init("i", np.array(1, np.int64))]),
                                      g.ints(0)])
    where_pos = g.op("Gather", [g.init("position_embeddings", weights((positions, width), 2)),
                                position_ids])
    types = g.op("ConstantOfShape", [g.op("Shape", [ids])],
                 value=numpy_helper.from_array(np.array([0], np.int64)))
    type_emb = g.op("Gather", [g.init("token_type_embeddings", weights((2, width), 3)), types])
    x = g.op("Add", [g.op("Add", [words, type_emb]), where_pos])
    x = g.layer_norm(x, width, 10, decomposed=False)
    # the extended attention mask: (1 - mask[:, None, None, :]) * -10000
    mask = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.ints(1, 2)])], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.scalar(1.0), mask]), g.scalar(-10000.0)])
    b, s = g.dim(x, 0), g.dim(x, 1)
    q = g.heads(g.linear(x, width, width, 20), b, s, heads, head, [0, 2, 1, 3])
    kt = g.heads(g.linear(x, width, width, 21), b, s, heads, head, [0, 2, 3, 1])
    v = g.heads(g.linear(x, width, width, 22), b, s, heads, head, [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, kt]), g.scalar(math.sqrt(head))])
    probs = g.op("Softmax", [g.op("Add", [scores, mask])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = g.reshape(context, b, s, width)
    x = g.layer_norm(g.op("Add", [g.linear(context, width, width, 23), x]), width, 11,
                     decomposed=True)
    h = g.linear(x, width, ffn, 24)                    # exact GELU as the exporter writes it
    erf = g.op("Erf", [g.op("Div", [h, g.scalar(math.sqrt(2.0))])])
    h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.scalar(1.0)])]), g.scalar(0.5)])
    x = g.layer_norm(g.op("Add", [g.linear(h, ffn, width, 25), x]), width, 12, decomposed=False)
    g.nodes.append(node("Identity", [x], ["last_hidden_state"]))
    first = g.op("Gather", [x, g.init("i", np.array(0, np.int64))], axis=1)     # [B, H]
    pooled = g.op("Gemm", [first, g.init("pool_w", weights((width, width), 26, 0.25)),
                           g.init("pool_b", weights((width,), 27, 0.1))], transB=1)
    g.nodes.append(node("Tanh", [pooled], ["pooler_output"]))
    m = g.model({"input_ids": (TensorProto.INT64, [batch, seq]),
                 "attention_mask": (TensorProto.INT64, [batch, seq])},
                {"last_hidden_state": (TensorProto.FLOAT, [batch, seq, width]),
                 "pooler_output": (TensorProto.FLOAT, [batch, width])}, opset=17)
    r = rng(3)
    valid = np.ones((batch, seq), np.int64)
    valid[1, seq - 3:] = 0                             # the second sequence is padded
    feeds = {"input_ids": r.integers(0, vocab, (batch, seq)).astype(np.int64),
             "attention_mask": valid}
    return m, feeds


def gpt_block(batch=2, seq=8, width=16, heads=2, vocab=30, positions=16):
    """GPT-2: token and position embeddings, one pre-LN decoder layer with the causal mask of a
    boolean buffer sliced to the sequence and a padding mask expanded over queries, the fused
    QKV projection (Gemm on flattened rows, Split), the tanh GELU, the final LayerNorm, the
    language-model head tied to the embeddings and the last position's logits. Opset 18."""
    g, head = Graph(), width // heads
    ids = "input_ids"
    wte = g.init("wte", weights((vocab, width), 1))
    s_len = g.op("Gather", [g.op("Shape", [ids]), g.init("i", np.array(-1, np.int64))], axis=0)
    pos = g.op("Range", [g.init("i", np.array(0, np.int64)), s_len,
                         g.init("i", np.array(1, np.int64))])
    x = g.op("Add", [g.op("Gather", [wte, ids]),
                     g.op("Gather", [g.init("wpe", weights((positions, width), 2)),
                                     g.op("Unsqueeze", [pos, g.ints(0)])])])
    b, s = g.dim(x, 0), g.dim(x, 1)
    h = g.layer_norm(x, width, 10, decomposed=True, axes_input=True)
    rows = g.reshape(h, -1, width)                                  # [B*S, H]
    qkv = g.op("Gemm", [rows, g.init("c_attn_w", weights((width, 3 * width), 20, 0.25)),
                        g.init("c_attn_b", weights((3 * width,), 21, 0.1))])
    qkv = g.reshape(qkv, b, s, 3 * width)
    q, k, v = g.op("Split", [qkv, g.ints(width, width, width)], outputs=3, axis=2)
    q = g.heads(q, b, s, heads, head, [0, 2, 1, 3])
    kt = g.heads(k, b, s, heads, head, [0, 2, 3, 1])
    v = g.heads(v, b, s, heads, head, [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, kt]), g.scalar(math.sqrt(head))])
    # causal: bias[:, :, k - q : k, :k] of a lower-triangular boolean buffer, then Where
    buffer = g.init("bias", np.tril(np.ones((positions, positions), bool))[None, None])
    q_len, k_len = g.op("Shape", [q], start=2, end=3), g.op("Shape", [kt], start=3, end=4)
    causal = g.op("Slice", [buffer, g.op("Sub", [k_len, q_len]), k_len, g.ints(2), g.ints(1)])
    causal = g.op("Slice", [causal, g.ints(0), k_len, g.ints(3), g.ints(1)])
    low = g.scalar(np.finfo(np.float32).min)
    scores = g.op("Where", [causal, scores, low])
    # padding: keys where attention_mask == 0 are masked, the mask expanded over queries
    padded = g.op("Equal", ["attention_mask", g.init("i", np.array(0, np.int64))])
    padded = g.op("Unsqueeze", [padded, g.ints(1, 2)])                # [B, 1, 1, S]
    padded = g.op("Expand", [padded, g.op("Concat", [b, g.ints(1), s, s], axis=0)])
    scores = g.op("Where", [padded, low, scores])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.reshape(g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                        b, s, width)
    x = g.op("Add", [x, g.linear(context, width, width, 22)])
    h = g.linear(g.layer_norm(x, width, 11, decomposed=False), width, 4 * width, 23)
    # gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    inner = g.op("Add", [h, g.op("Mul", [g.op("Pow", [h, g.scalar(3.0)]), g.scalar(0.044715)])])
    t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi))])])
    h = g.op("Mul", [g.op("Mul", [g.scalar(0.5), h]), g.op("Add", [g.scalar(1.0), t])])
    x = g.op("Add", [x, g.linear(h, 4 * width, width, 24)])
    x = g.layer_norm(x, width, 12, decomposed=False)
    logits = g.op("MatMul", [x, g.op("Transpose", [wte], perm=[1, 0])])   # tied to wte
    g.nodes.append(node("Identity", [logits], ["logits"]))
    last = g.op("Slice", [logits, g.ints(-1), g.ints(INT_MAX), g.ints(1)])
    g.nodes.append(node("Softmax", [last], ["next_token"], axis=-1))
    m = g.model({"input_ids": (TensorProto.INT64, [batch, seq]),
                 "attention_mask": (TensorProto.INT64, [batch, seq])},
                {"logits": (TensorProto.FLOAT, [batch, seq, vocab]),
                 "next_token": (TensorProto.FLOAT, [batch, 1, vocab])}, opset=18)
    r = rng(4)
    valid = np.ones((batch, seq), np.int64)
    valid[0, :2] = 0                                   # left padding, as batched generation has
    feeds = {"input_ids": r.integers(0, vocab, (batch, seq)).astype(np.int64),
             "attention_mask": valid}
    return m, feeds
