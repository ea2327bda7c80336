"""Transformers: a BERT-base encoder, GPT-2 (the prefill of a prompt, or one decode step against
a KV cache) and a stack of LLaMA decoder blocks (RMSNorm, SwiGLU, RoPE, grouped-query attention).

The layers are the transformer libraries of programs/lib/ (layernorm, rmsnorm, gelu, silu, rope,
attention), declared in each program at its float type (`ProgramBuilder.library`). Every
sequence of the batch has the same length. Activations flow as rows, one per token: `hs`
[batch x tokens, hidden], the residual stream. The input `x` [batch, tokens, hidden] holds the
tokens' embeddings (the lookup and the position embeddings are the caller's). Per layer i:

* the query, key and value projections are batched matrix products over heads, `l{i}_wq`
  [heads, hidden, head] and `l{i}_wk`, `l{i}_wv` [kv_heads, hidden, head] (a framework's
  [hidden, heads x head] weight reshaped to [hidden, heads, head] and transposed), so that every
  head comes out in the [batch x kv_heads, heads / kv_heads, tokens, head] layout `attention`
  takes; the output projection `l{i}_wo` [hidden, hidden] takes the heads' outputs in order;
* the feed-forward network is `l{i}_w1` [hidden, ffn] then `l{i}_w2` [ffn, hidden], with GELU
  between them; SwiGLU adds the up projection `l{i}_w3` and computes silu(h w1) * (h w3) w2;
* biases end in `_b`, normalization gains in `_g`, LayerNorm offsets in `_beta`.

A prefill computes the keys and values of every token and returns them as `k{i}`
[batch x kv_heads, 1, head, tokens] and `v{i}` [batch x kv_heads, 1, tokens, head]: the KV cache.
A decode step takes a cache of L tokens in that layout (`k_cache{i}`, `v_cache{i}`), computes the
new token's query, key and value, and attends to the cache and to itself: one `attention` over
the cache, one over the new key, and `attention_merge` (the online-softmax merge) joins the two,
so that the cache is read once and never copied. The new token's key and value are outputs
(`k{i}`, `v{i}`), for the caller to append. The cache is a `param`: read-only state this step is
given, like the weights, so that a multi-GPU baseline splits the batch by the input `x`
(docs/baseline.md: the batch is the leading dimension of the inputs).
"""
from __future__ import annotations

from dataclasses import dataclass

from fractal.workloads.base import Param, Workload, param_error
from fractal.workloads.builder import ProgramBuilder

__all__ = ["BERT_BASE", "GPT2", "LLAMA_BLOCK", "MAX_LAYERS", "Dims"]

#: the most layers a program holds (one block of instructions per layer; 128 layers of a
#: LLaMA are about 40,000 of the 100,000 tokens a program file may have)
MAX_LAYERS = 128
MODES = ("prefill", "decode")


@dataclass(frozen=True)
class _Arch:
    """What distinguishes the three models' layers."""
    norm: str               # layernorm or rmsnorm
    eps: float              # the normalization's epsilon
    pre_norm: bool          # normalize each sublayer's input (GPT-2, LLaMA), else its output (BERT)
    bias: bool              # biases on every projection
    ffn: str                # gelu, gelu_tanh or swiglu
    rope: bool              # rotary position embeddings on queries and keys
    causal: bool            # each token attends to the tokens before it only


BERT = _Arch("layernorm", 1e-12, False, True, "gelu", False, False)
GPT = _Arch("layernorm", 1e-5, True, True, "gelu_tanh", False, True)
LLAMA = _Arch("rmsnorm", 1e-5, True, False, "swiglu", True, True)


@dataclass(frozen=True)
class Dims:
    """The sizes of one run: `tokens` processed per sequence (the prompt's S in a prefill, 1 in a
    decode step) against `cache` tokens already in the KV cache (L in a decode step, else 0)."""
    batch: int
    tokens: int
    cache: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int

    @property
    def head(self) -> int:
        return self.hidden // self.heads

    @property
    def group(self) -> int:           # query heads per key-value head
        return self.heads // self.kv_heads

    @property
    def rows(self) -> int:            # tokens of the whole batch
        return self.batch * self.tokens

    @property
    def groups(self) -> int:          # key-value heads of the whole batch
        return self.batch * self.kv_heads


def check_dims(hidden: int, heads: int, kv_heads: int, rope: bool):
    """Heads divide the width, key-value heads divide the heads, a rotary head has pairs."""
    if hidden % heads:
        raise param_error("heads", f"hidden={hidden} must be a multiple of heads={heads}")
    if heads % kv_heads:
        raise param_error("kv_heads", f"heads={heads} must be a multiple of kv_heads={kv_heads}")
    if rope and (hidden // heads) % 2:
        raise param_error("heads", f"the head width hidden/heads = {hidden // heads} must be even "
                                   f"for the rotary embedding (its features turn in pairs)")


def _check_layers(layers: int):
    if layers > MAX_LAYERS:
        raise param_error("layers", f"layers must be at most {MAX_LAYERS} (the program holds one "
                                    f"block of instructions per layer), got {layers}")


# ---------------------------------------------------------------- one layer

def _norm(b: ProgramBuilder, arch: _Arch, dst: str, src: str, name: str) -> str:
    width = b.shapes[src][-1]
    gain = b.tensor(f"{name}_g", (width,), "param")
    if arch.norm == "layernorm":
        beta = b.tensor(f"{name}_beta", (width,), "param")
        return b.op("layernorm", dst, src, gain, beta, eps=arch.eps)
    return b.op("rmsnorm", dst, src, gain, eps=arch.eps)


def _linear(b: ProgramBuilder, arch: _Arch, dst: str, src: str, name: str, note: str = "") -> str:
    """dst = src @ `{name}_w` (+ `{name}_b`)."""
    k, n = b.shapes[src][-1], b.shapes[dst][-1]
    b.op("matmul", dst, src, b.tensor(f"{name}_w", (k, n), "param"), note=note)
    if arch.bias:
        b.op("add", dst, dst, b.tensor(f"{name}_b", (n,), "param"))
    return dst


def _heads(b: ProgramBuilder, arch: _Arch, d: Dims, h4: str, layer: str, which: str,
           count: int) -> str:
    """Every head's projection of the normalized tokens h4 [B, 1, S, H]: [B, count, S, head]."""
    out = b.scratch(which, (d.batch, count, d.tokens, d.head))
    weight = b.tensor(f"{layer}_w{which}", (count, d.hidden, d.head), "param")
    b.op("matmul", out, h4, weight, note=f"{which} of every head")
    if arch.bias:
        b.op("add", out, out, b.tensor(f"{layer}_b{which}", (count, 1, d.head), "param"))
    return out


def _rope(b: ProgramBuilder, d: Dims, x: str, heads: int, name: str) -> str:
    """The rotary embedding of [B, heads, S, head] with the tables `rope_cos`, `rope_sin`."""
    flat = b.scratch(f"{name}_rows", (d.batch * heads, d.tokens, d.head))
    b.op("reshape", flat, x)
    b.op("rope", flat, flat, "rope_cos", "rope_sin")
    return flat


def _attention(b: ProgramBuilder, arch: _Arch, d: Dims, i: int, h: str, mode: str) -> str:
    """Self-attention of the normalized tokens h [B*S, H]; returns its output projection."""
    layer, g, r, s, e = f"l{i}", d.groups, d.group, d.tokens, d.head
    h4 = b.scratch("h4", (d.batch, 1, s, d.hidden))
    b.op("reshape", h4, h)
    q, k, v = (_heads(b, arch, d, h4, layer, w, n)
               for w, n in (("q", d.heads), ("k", d.kv_heads), ("v", d.kv_heads)))
    if arch.rope:
        q, k = _rope(b, d, q, d.heads, "q"), _rope(b, d, k, d.kv_heads, "k")
    qg = b.scratch("qg", (g, r, s, e))
    b.op("reshape", qg, q)
    kg = b.scratch("kg", (g, 1, s, e))
    b.op("reshape", kg, k)
    kt = b.tensor(f"k{i}", (g, 1, e, s), "output", note=f"layer {i} keys, transposed")
    b.op("transpose", kt, kg, perm=(0, 1, 3, 2))
    vg = b.tensor(f"v{i}", (g, 1, s, e), "output", note=f"layer {i} values")
    b.op("reshape", vg, v)
    o, m, l = (b.scratch("o", (g, r, s, e)), b.scratch("m", (g, r, s)), b.scratch("l", (g, r, s)))
    if mode == "decode":
        kc = b.tensor(f"k_cache{i}", (g, 1, e, d.cache), "param",
                      note=f"layer {i} keys of the {d.cache} cached tokens, transposed")
        vc = b.tensor(f"v_cache{i}", (g, 1, d.cache, e), "param", note=f"layer {i} cached values")
        parts = [(b.scratch(f"o_{w}", (g, r, s, e)), b.scratch(f"m_{w}", (g, r, s)),
                  b.scratch(f"l_{w}", (g, r, s))) for w in ("cache", "new")]
        b.op("attention", *parts[0], qg, kc, vc, note="over the cache")
        b.op("attention", *parts[1], qg, kt, vg, note="over the new token itself")
        b.op("attention_merge", o, m, l, *parts[0], *parts[1], note="online-softmax merge")
    elif arch.causal:
        b.op("causal_attention", o, m, l, qg, kt, vg, "pos", "pos")
    else:
        b.op("attention", o, m, l, qg, kt, vg)
    heads = b.scratch("o_heads", (d.batch, d.heads, s, e))
    b.op("reshape", heads, o)
    tokens = b.scratch("o_tokens", (d.batch, s, d.heads, e))
    b.op("transpose", tokens, heads, perm=(0, 2, 1, 3))
    rows = b.scratch("o_rows", (d.rows, d.hidden))
    b.op("reshape", rows, tokens)
    return _linear(b, arch, b.scratch("proj", (d.rows, d.hidden)), rows, f"{layer}_o",
                   note="output projection")


def _ffn(b: ProgramBuilder, arch: _Arch, d: Dims, i: int, h: str) -> str:
    """The feed-forward network of the normalized tokens h [B*S, H]."""
    layer = f"l{i}"
    f = b.scratch("ffn", (d.rows, d.ffn))
    _linear(b, arch, f, h, f"{layer}_1")
    if arch.ffn == "swiglu":
        b.op("silu", f, f, note="gate")
        up = _linear(b, arch, b.scratch("ffn_up", (d.rows, d.ffn)), h, f"{layer}_3")
        b.op("mul", f, f, up)
    else:
        b.op(arch.ffn, f, f)
    return _linear(b, arch, b.scratch("proj", (d.rows, d.hidden)), f, f"{layer}_2")


def _layer(b: ProgramBuilder, arch: _Arch, d: Dims, i: int, hs: str, mode: str):
    h = b.scratch("h", (d.rows, d.hidden))
    b.section(f"layer {i}: attention")
    if arch.pre_norm:
        out = _attention(b, arch, d, i, _norm(b, arch, h, hs, f"l{i}_ln1"), mode)
        b.op("add", hs, hs, out, note="residual")
        b.section(f"layer {i}: feed-forward")
        out = _ffn(b, arch, d, i, _norm(b, arch, h, hs, f"l{i}_ln2"))
        b.op("add", hs, hs, out, note="residual")
    else:
        b.op("add", h, hs, _attention(b, arch, d, i, hs, mode), note="residual")
        _norm(b, arch, hs, h, f"l{i}_ln1")
        b.section(f"layer {i}: feed-forward")
        b.op("add", h, hs, _ffn(b, arch, d, i, hs), note="residual")
        _norm(b, arch, hs, h, f"l{i}_ln2")


def _stack(b: ProgramBuilder, arch: _Arch, d: Dims, layers: int, mode: str) -> str:
    """The input, the libraries, position tables and `layers` layers; returns the residual stream."""
    for lib in ("layernorm" if arch.norm == "layernorm" else "rmsnorm", "attention",
                "silu" if arch.ffn == "swiglu" else "gelu") + (("rope",) if arch.rope else ()):
        b.library(lib)
    what = "the new token" if mode == "decode" else f"{d.tokens} tokens"
    x = b.tensor("x", (d.batch, d.tokens, d.hidden), "input",
                 note=f"embeddings of {what} of each of {d.batch} sequence(s)")
    if arch.rope:
        first = d.cache if mode == "decode" else 0
        for table in ("cos", "sin"):
            b.tensor(f"rope_{table}", (d.tokens, d.head // 2), "param",
                     note=f"{table} of each rotary angle at positions {first}.."
                          f"{first + d.tokens - 1}")
    hs = b.tensor("hs", (d.rows, d.hidden), note="the residual stream, a row per token")
    if arch.causal and mode == "prefill":
        b.tensor("pos", (d.tokens,), dtype="i32", note="token positions 0 .. S-1")
        b.op("fill", "pos", value=0, step=1)
    if arch.pre_norm:
        b.op("reshape", hs, x)
    else:
        flat = b.tensor("x_rows", (d.rows, d.hidden))
        b.op("reshape", flat, x)
        _norm(b, arch, hs, flat, "embed_ln")
    for i in range(layers):
        _layer(b, arch, d, i, hs, mode)
    return hs


def _output(b: ProgramBuilder, d: Dims, hs: str, note: str) -> str:
    y = b.tensor("y", (d.batch, d.tokens, d.hidden), "output", note=note)
    return b.op("reshape", y, hs)


# ---------------------------------------------------------------- the models

def _bert(b: ProgramBuilder, batch, layers, seq, hidden, heads, ffn) -> list[str]:
    _check_layers(layers)
    check_dims(hidden, heads, heads, False)
    d = Dims(batch, seq, 0, hidden, heads, heads, ffn)
    b.section("embedding LayerNorm")
    _output(b, d, _stack(b, BERT, d, layers, "prefill"), "the last layer's hidden states")
    return [f"BERT encoder inference (Devlin et al. 2019): {layers} post-LN layers of "
            f"bidirectional self-attention ({heads} heads of {d.head}) and a GELU feed-forward "
            f"network ({hidden} -> {ffn} -> {hidden}), LayerNorm after each; {batch} sequence(s) "
            f"of {seq} tokens."]


BERT_BASE = Workload(
    "bert_base", "BERT encoder: post-LN layers of bidirectional attention and GELU feed-forward",
    {"batch": Param(1, "sequences per run"),
     "layers": Param(12, "encoder layers"),
     "seq": Param(128, "tokens per sequence (BERT: 128 or 512)"),
     "hidden": Param(768, "width of the hidden states"),
     "heads": Param(12, "attention heads (they divide hidden)"),
     "ffn": Param(3072, "width of the feed-forward network")},
    _bert, dtype="f16")


def _decoder(b: ProgramBuilder, arch: _Arch, batch, layers, seq, hidden, heads, kv_heads, ffn,
             mode) -> Dims:
    _check_layers(layers)
    check_dims(hidden, heads, kv_heads, arch.rope)
    if mode == "prefill":
        return Dims(batch, seq, 0, hidden, heads, kv_heads, ffn)
    return Dims(batch, 1, seq, hidden, heads, kv_heads, ffn)


def _step(mode: str, seq: int, batch: int) -> str:
    return (f"a prefill of {seq} tokens (causal attention) for {batch} sequence(s)"
            if mode == "prefill" else
            f"one decode step of {batch} sequence(s) against a KV cache of {seq} tokens")


def _gpt2(b: ProgramBuilder, batch, layers, seq, hidden, heads, ffn, vocab, mode) -> list[str]:
    d = _decoder(b, GPT, batch, layers, seq, hidden, heads, heads, ffn, mode)
    hs = _stack(b, GPT, d, layers, mode)
    b.section("final LayerNorm and the language-model head, on each sequence's last token")
    last = hs
    if mode == "prefill":
        seqs = b.tensor("hs_seq", (batch, seq, hidden))
        b.op("reshape", seqs, hs)
        one = b.tensor("hs_last", (batch, 1, hidden))
        b.op("slice", one, seqs, axis=1, start=seq - 1, note="the last token")
        last = b.tensor("last", (batch, hidden))
        b.op("reshape", last, one)
    h = b.tensor("h_last", (batch, hidden))
    _norm(b, GPT, h, last, "ln_f")
    logits = b.tensor("logits", (batch, vocab), "output", note="next-token scores")
    b.op("matmul", logits, h, b.tensor("lm_head_w", (hidden, vocab), "param",
                                       note="the token embeddings, transposed (tied)"))
    return [f"GPT-2 inference (Radford et al. 2019): {_step(mode, seq, batch)}; {layers} pre-LN "
            f"decoder layers ({heads} heads of {d.head}, feed-forward {hidden} -> {ffn} with "
            f"tanh GELU), the final LayerNorm and the language-model head over {vocab} tokens "
            f"for each sequence's last token. Keys and values of the new tokens are outputs."]


GPT2 = Workload(
    "gpt2", "GPT-2 decoder stack and LM head: a causal prefill of S tokens or a decode step "
            "against a KV cache of L tokens",
    {"batch": Param(1, "sequences per run"),
     "layers": Param(12, "decoder layers"),
     "seq": Param(128, "prefill: tokens of the prompt (S); decode: tokens in the KV cache (L)"),
     "hidden": Param(768, "width of the hidden states"),
     "heads": Param(12, "attention heads (they divide hidden)"),
     "ffn": Param(3072, "width of the feed-forward network"),
     "vocab": Param(50257, "vocabulary of the language-model head"),
     "mode": Param("prefill", "prefill (the prompt at once) or decode (one token)",
                   choices=MODES)},
    _gpt2, dtype="f16")


def _llama(b: ProgramBuilder, batch, layers, seq, hidden, heads, kv_heads, ffn, mode) -> list[str]:
    d = _decoder(b, LLAMA, batch, layers, seq, hidden, heads, kv_heads, ffn, mode)
    _output(b, d, _stack(b, LLAMA, d, layers, mode), "the last block's hidden states")
    return [f"LLaMA decoder blocks (Touvron et al. 2023): {_step(mode, seq, batch)}; {layers} "
            f"pre-norm block(s) of RMSNorm, grouped-query attention ({heads} query heads of "
            f"{d.head} over {kv_heads} key-value heads) with rotary position embeddings, and a "
            f"SwiGLU feed-forward network ({hidden} -> {ffn} -> {hidden}), no biases.",
            "The rotary tables rope_cos and rope_sin hold cos and sin of each position's angles "
            "(position p, pair i: p * 500000^(-2i/head) in LLaMA 3)."]


LLAMA_BLOCK = Workload(
    "llama_block", "LLaMA decoder blocks: RMSNorm, grouped-query attention with RoPE, SwiGLU; "
                   "prefill or decode",
    {"batch": Param(1, "sequences per run"),
     "layers": Param(1, "decoder blocks (LLaMA 3 8B: 32)"),
     "seq": Param(128, "prefill: tokens of the prompt (S); decode: tokens in the KV cache (L)"),
     "hidden": Param(4096, "width of the hidden states"),
     "heads": Param(32, "query heads (they divide hidden)"),
     "kv_heads": Param(8, "key-value heads (they divide heads; = heads: multi-head attention)"),
     "ffn": Param(14336, "width of the SwiGLU feed-forward network"),
     "mode": Param("prefill", "prefill (the prompt at once) or decode (one token)",
                   choices=MODES)},
    _llama, dtype="f16")
