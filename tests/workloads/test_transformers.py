"""The transformer workloads (bert_base, gpt2, llama_block) against closed forms written here, a
numpy model written here, and the machines.

Op counts. `isa.checker` counts a multiply-accumulate as 2 ops, so the matrix products of a layer
do 2 x W x N ops for the layer's weight elements W (its projection matrices; biases and norm
gains are not multiplied with anything) and the N tokens it processes (batch x S in a prefill,
batch in a decode step). Attention adds two products per query head, QK^T and AV, each of
2 x queries x keys x head width ops: 2 x 2 x S x S x d per head and sequence in a prefill (the
library scores every key of a query's block, the masked ones too: it skips no block) and
2 x 2 x (L + 1) x d in a decode step (the L cached keys and the new token's own). GPT-2 adds its
language-model head on each sequence's last token, 2 x hidden x vocab.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import erf

import fractal
from fractal.workloads import generate
from isa.checker import leaf_work, opcode_table, program_ops
from isa.errors import UserError
from tests.strategies import close_to_reference
from tests.workloads.helpers import feeds

#: small models: the numpy model, the decode chain and the machines run these
GPT_SMALL = dict(batch=2, layers=2, hidden=16, heads=2, ffn=32, vocab=24)
LLAMA_SMALL = dict(batch=2, layers=2, hidden=32, heads=4, kv_heads=2, ffn=48)
BERT_SMALL = dict(batch=2, layers=2, seq=8, hidden=16, heads=2, ffn=32)
MACHINES = {"tiny": ("tiny", None, None), "4096 leaves": ("f1", 3, 16)}


def _program(name, **params):
    return fractal.load_program(generate(name, **params))


def _mac_ops(program) -> int:
    """Ops of class mac, the bodies of extension instructions included."""
    table, types = opcode_table(program), program.types
    total = 0
    for ins in program.instructions:
        spec = table[ins.opcode]
        ts = [types[n] for n in ins.operands]
        total += sum(ops for cls, ops in leaf_work(spec, ts[:spec.outputs], ts[spec.outputs:],
                                                    spec.full_attrs(ins.attr)) if cls == "mac")
    return total


# ---------------------------------------------------------------- closed forms

def closed_form(model, batch=1, layers=12, seq=128, hidden=768, heads=12, kv_heads=None, ffn=3072,
                vocab=0, mode="prefill"):
    """(weight elements of the matrix products, mac ops) from the architecture's description."""
    kv, d = kv_heads or heads, hidden // heads
    attention = 2 * hidden * hidden + 2 * hidden * kv * d          # q and o; k and v
    feed_forward = (3 if model == "llama" else 2) * hidden * ffn   # SwiGLU has a third matrix
    weights = layers * (attention + feed_forward)
    queries, keys = (seq, seq) if mode == "prefill" else (1, seq + 1)
    ops = 2 * weights * batch * queries + layers * 2 * 2 * batch * heads * queries * keys * d
    return weights + hidden * vocab, ops + 2 * hidden * vocab * batch


def _weights(program) -> int:
    """Elements of the weight matrices: the params that matrix products multiply by (but the KV
    cache, which attention multiplies by)."""
    params = {t.name: t.type.size for t in program.params}
    return sum(params[n] for n in {i.operands[2] for i in program.instructions
                                   if i.opcode == "matmul" and i.operands[2] in params})


@pytest.mark.parametrize("name, model, params", [
    ("bert_base", "bert", {}),
    ("bert_base", "bert", dict(batch=2, layers=3, seq=512, hidden=64, heads=4, ffn=96)),
    ("gpt2", "gpt2", {}),
    ("gpt2", "gpt2", dict(mode="decode", seq=1024)),
    ("gpt2", "gpt2", dict(batch=3, layers=2, seq=40, hidden=48, heads=3, ffn=80, vocab=100,
                          mode="decode")),
    ("llama_block", "llama", {}),
    ("llama_block", "llama", dict(mode="decode", seq=8192, layers=2)),
    ("llama_block", "llama", dict(batch=2, layers=3, seq=24, hidden=64, heads=8, kv_heads=2,
                                  ffn=80)),
])
def test_mac_ops_are_twice_the_weights_per_token_plus_attention(name, model, params):
    defaults = {"bert": dict(layers=12, seq=128, hidden=768, heads=12, ffn=3072),
                "gpt2": dict(layers=12, seq=128, hidden=768, heads=12, ffn=3072, vocab=50257),
                "llama": dict(layers=1, seq=128, hidden=4096, heads=32, kv_heads=8,
                              ffn=14336)}[model]
    program = _program(name, **params)
    weights, ops = closed_form(model, **(defaults | params))
    assert _weights(program) == weights
    assert _mac_ops(program) == ops


def test_parameters_are_the_published_models():
    """GPT-2 small has 124,439,808 parameters (Hugging Face's gpt2, the head tied to the token
    embeddings), BERT-base 109,482,240 (bert-base-uncased) and Llama 3 8B 8,030,261,248, of which
    the programs leave to the caller the embedding lookups (position embeddings 1024 x 768 in
    GPT-2; word, position and type embeddings 30522, 512 and 2 x 768 in BERT, and its pooler);
    llama_block is one of the 32 blocks, without the embeddings and head (2 x 128256 x 4096) and
    the final norm."""
    params = lambda p: sum(t.type.size for t in p.params)
    assert params(_program("gpt2")) + 1024 * 768 == 124_439_808
    assert params(_program("bert_base")) + (30522 + 512 + 2) * 768 + 768 * 768 + 768 \
        == 109_482_240
    block = params(_program("llama_block")) - 2 * 128 * 64           # less the rotary tables
    assert 32 * block + 2 * 128256 * 4096 + 4096 == 8_030_261_248


# ---------------------------------------------------------------- the numpy model

def _layernorm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def _rmsnorm(x, g, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g


def _rotate(x, cos, sin):
    """Rotate-half RoPE of x [..., S, d] with tables [S, d/2]."""
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _attend(q, k, v, causal, first):
    """q [B, heads, S, d] attending to k, v [B, kv_heads, T, d]; query i sits at position
    first + i, key j at j."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(k.shape[2])[None, :] <= first + np.arange(q.shape[2])[:, None],
                     s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def model(kind, p, x, layers, heads, kv_heads, cache=None):
    """Hidden states [B, S, H] after the layers, and each layer's keys and values [B, kv, S, d];
    `cache`: each layer's (keys, values) [B, kv, L, d] before these tokens."""
    b, s, h = x.shape
    d = h // heads
    first = 0 if cache is None else cache[0][0].shape[2]
    bias = lambda name: p[name] if kind != "llama" else 0
    norm = (lambda t, n: _rmsnorm(t, p[f"{n}_g"], 1e-5)) if kind == "llama" else \
        (lambda t, n: _layernorm(t, p[f"{n}_g"], p[f"{n}_beta"], 1e-12 if kind == "bert" else 1e-5))
    act = {"bert": lambda t: t / 2 * (1 + erf(t / math.sqrt(2))),
           "gpt2": lambda t: t / 2 * (1 + np.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3))),
           }.get(kind)
    hs = norm(x, "embed_ln") if kind == "bert" else x
    keys, values = [], []
    for i in range(layers):
        n = f"l{i}"
        a = hs if kind == "bert" else norm(hs, f"{n}_ln1")
        q, k, v = (np.einsum("bsh,nhd->bnsd", a, p[f"{n}_w{w}"])
                   + (p[f"{n}_b{w}"] if kind != "llama" else 0) for w in "qkv")
        if kind == "llama":
            q, k = _rotate(q, p["rope_cos"], p["rope_sin"]), _rotate(k, p["rope_cos"], p["rope_sin"])
        keys.append(k), values.append(v)
        if cache is not None:
            k, v = np.concatenate([cache[i][0], k], 2), np.concatenate([cache[i][1], v], 2)
        o = _attend(q, k, v, kind != "bert", first).transpose(0, 2, 1, 3).reshape(b, s, h)
        o = o @ p[f"{n}_o_w"] + bias(f"{n}_o_b")
        if kind == "bert":
            hs = norm(hs + o, f"{n}_ln1")
            f = act(hs @ p[f"{n}_1_w"] + p[f"{n}_1_b"]) @ p[f"{n}_2_w"] + p[f"{n}_2_b"]
            hs = norm(hs + f, f"{n}_ln2")
            continue
        hs = hs + o
        a = norm(hs, f"{n}_ln2")
        if kind == "llama":
            g = a @ p[f"{n}_1_w"]
            f = (g / (1 + np.exp(-g)) * (a @ p[f"{n}_3_w"])) @ p[f"{n}_2_w"]
        else:
            f = act(a @ p[f"{n}_1_w"] + p[f"{n}_1_b"]) @ p[f"{n}_2_w"] + p[f"{n}_2_b"]
        hs = hs + f
    return hs, keys, values


def _keys(t, batch):            # a program's keys [B*kv, 1, d, T] as [B, kv, T, d]
    return t.reshape(batch, -1, *t.shape[2:]).swapaxes(-1, -2)


def _values(t, batch):          # a program's values [B*kv, 1, T, d] as [B, kv, T, d]
    return t.reshape(batch, -1, *t.shape[2:])


def _rope_tables(first, count, head, theta=500000.0):
    angle = np.arange(first, first + count)[:, None] * theta ** (-2 * np.arange(head // 2) / head)
    return np.cos(angle), np.sin(angle)


def _reference(name, data=None, seed=0, **params):
    """(the feeds as float64, the reference interpreter's outputs) of an f32 program."""
    program = _program(name, dtype="f32", **params)
    data = feeds(program, seed) | (data or {})
    data = {k: np.asarray(v, np.float32) for k, v in data.items()}
    out = fractal.reference(program, inputs=data).outputs
    return {k: v.astype(np.float64) for k, v in data.items()}, out


def _close(got, want):
    assert np.abs(want).max() > 0.1                          # a signal to compare
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_bert_equals_the_numpy_model():
    d, out = _reference("bert_base", **BERT_SMALL)
    hs, _, _ = model("bert", d, d["x"], 2, 2, 2)
    _close(out["y"], hs)


@pytest.mark.parametrize("kind, name, small", [("gpt2", "gpt2", GPT_SMALL),
                                               ("llama", "llama_block", LLAMA_SMALL)])
def test_prefill_equals_the_numpy_model(kind, name, small):
    tables = {} if kind == "gpt2" else dict(zip(("rope_cos", "rope_sin"), _rope_tables(0, 7, 8)))
    d, out = _reference(name, tables, seq=7, **small)
    hs, keys, values = model(kind, d, d["x"], 2, small["heads"], small.get("kv_heads"))
    for i in range(2):
        _close(_keys(out[f"k{i}"], 2), keys[i])
        _close(_values(out[f"v{i}"], 2), values[i])
    if kind == "gpt2":
        last = _layernorm(hs[:, -1], d["ln_f_g"], d["ln_f_beta"], 1e-5)
        _close(out["logits"], last @ d["lm_head_w"])
    else:
        _close(out["y"], hs)


@pytest.mark.parametrize("kind, name, small", [("gpt2", "gpt2", GPT_SMALL),
                                               ("llama", "llama_block", LLAMA_SMALL)])
def test_a_decode_step_continues_the_prefill(kind, name, small):
    """Prefill 6 tokens, then decode the 7th against their KV cache: the step's output is the
    7th token's output of a prefill of all 7, and its key and value are the 7th's."""
    seq, out_name = 6, "logits" if kind == "gpt2" else "y"
    head = small["hidden"] // small["heads"]
    whole, _ = _reference(name, dict(zip(("rope_cos", "rope_sin"), _rope_tables(0, 7, head)))
                          if kind == "llama" else {}, seed=4, seq=seq + 1, **small)
    weights = {k: v for k, v in whole.items() if k not in ("x", "rope_cos", "rope_sin")}
    tables = lambda first, n: dict(zip(("rope_cos", "rope_sin"), _rope_tables(first, n, head))) \
        if kind == "llama" else {}
    _, full = _reference(name, whole | tables(0, seq + 1), seq=seq + 1, **small)
    _, prompt = _reference(name, weights | {"x": whole["x"][:, :seq]} | tables(0, seq),
                           seq=seq, **small)
    cache = {f"{w}_cache{i}": prompt[f"{w}{i}"] for w in "kv" for i in range(2)}
    _, step = _reference(name, weights | cache | {"x": whole["x"][:, seq:]} | tables(seq, 1),
                         seq=seq, mode="decode", **small)
    want = full[out_name] if kind == "gpt2" else full[out_name][:, seq:]
    _close(step[out_name], want)
    for i in range(2):
        _close(step[f"k{i}"], full[f"k{i}"][..., seq:])
        _close(step[f"v{i}"], full[f"v{i}"][..., seq:, :])


# ---------------------------------------------------------------- on the machines

@pytest.mark.parametrize("name, params", [
    ("gpt2", GPT_SMALL | dict(seq=9, mode="decode")),
    ("llama_block", LLAMA_SMALL | dict(seq=9, mode="decode")),
])
def test_decode_on_the_machines_equals_the_reference(name, params):
    """The prefills run on the machines in test_workload_runs.py; decode steps here (f16)."""
    program = _program(name, **params)
    data = feeds(program, 2)
    want = fractal.reference(program, inputs=data).outputs
    for machine, (preset, depth, fanout) in MACHINES.items():
        got = fractal.run(program, fractal.build_machine(preset, depth, fanout), inputs=data).outputs
        assert got.keys() == want.keys()
        for key in want:
            assert close_to_reference(got[key], want[key]).all(), f"{machine}: {key}"


def test_a_full_size_decode_step_streams_the_weights():
    """GPT-2 decoding one token after 1,024 on f100: every weight crosses into the chips at
    least once, so the step takes at least the weights' bytes over the chips' links, and the
    run is bound by traffic, not compute."""
    program = _program("gpt2", mode="decode", seq=1024)
    report = fractal.run(program, "f100", functional=False)
    assert report.ops == program_ops(program)
    weight_bytes = 2 * sum(t.type.size for t in program.params)
    chip = next(lv for lv in report.levels if lv["name"] == "chip")
    assert chip["bytes_in"] >= weight_bytes
    assert report.bound != "compute" and report.utilization < 0.01


# ---------------------------------------------------------------- parameters

@pytest.mark.parametrize("call, where, fragment", [
    (lambda: generate("gpt2", hidden=100, heads=12), "--heads", "hidden=100 must be a multiple"),
    (lambda: generate("llama_block", kv_heads=5), "--kv-heads", "heads=32 must be a multiple"),
    (lambda: generate("llama_block", hidden=96, heads=32, kv_heads=8), "--heads", "must be even"),
    (lambda: generate("bert_base", layers=129), "--layers", "at most 128"),
    (lambda: generate("gpt2", mode="decod"), "--mode", "did you mean 'decode'?"),
    (lambda: generate("gpt2", mode=1), "--mode", "must be one of prefill, decode"),
    (lambda: generate("llama_block", seq=0), "--seq", "at least 1"),
    (lambda: generate("bert_base", mode="decode"), "--mode", "bert_base has no parameter 'mode'"),
])
def test_bad_parameters_are_located(call, where, fragment):
    with pytest.raises(UserError) as e:
        call()
    assert e.value.where == where and fragment in e.value.format()
