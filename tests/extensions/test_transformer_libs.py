"""The transformer libraries of programs/lib/ (layernorm, rmsnorm, gelu, gelu_tanh, silu, rope,
attention, causal_attention): the reference and the leaves of five machines against numpy
written here; attention's keys cut with the online-softmax merge, and no node holding the whole
score matrix."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import fractal
from compiler import compile_program, execute_plan, verify_plan
from compiler.plan import PlanKind
from compiler.rules import ExtensionReduction
from isa import parse_program
from isa.reference import generate_feeds, run_reference
from simulator.kernels import LEAF_KERNELS
from tests.compiler.test_transformer_decompose import MACHINES

HERE = str(Path(__file__).resolve().parents[2] / "programs" / "_test.fasm")  # includes resolve from programs/

LAYERS = """include "lib/layernorm.fasm"
include "lib/rmsnorm.fasm"
include "lib/gelu.fasm"
include "lib/silu.fasm"
include "lib/rope.fasm"
tensor x    : f32[10, 48] input
tensor g    : f32[48]     param
tensor b    : f32[48]     param
tensor r3   : f32[6, 5, 8] input
tensor cos  : f32[5, 4]   param
tensor sin  : f32[5, 4]   param
tensor ln   : f32[10, 48] output
tensor rms  : f32[10, 48] output
tensor ge   : f32[10, 48] output
tensor gt   : f32[10, 48] output
tensor si   : f32[10, 48] output
tensor ro   : f32[6, 5, 8] output
layernorm ln, x, g, b
rmsnorm   rms, x, g, eps=0.001
gelu      ge, x
gelu_tanh gt, x
silu      si, x
rope      ro, r3, cos, sin
"""

G, R, S, T, D, E = 2, 2, 12, 72, 8, 6
ATTENTION = f"""include "lib/attention.fasm"
tensor q  : f32[{G}, {R}, {S}, {D}] input
tensor kt : f32[{G}, 1, {D}, {T}] input
tensor v  : f32[{G}, 1, {T}, {E}] input
tensor qp : i32[{S}]
tensor kp : i32[{T}]
tensor o  : f32[{G}, {R}, {S}, {E}] output
tensor m  : f32[{G}, {R}, {S}] output
tensor l  : f32[{G}, {R}, {S}] output
tensor oc : f32[{G}, {R}, {S}, {E}] output
tensor ow : f32[{G}, {R}, {S}, {E}] output
tensor m2 : f32[{G}, {R}, {S}]
tensor l2 : f32[{G}, {R}, {S}]
attention o, m, l, q, kt, v
fill qp, value={T - S}, step=1
fill kp, value=0, step=1
causal_attention oc, m2, l2, q, kt, v, qp, kp
causal_attention ow, m2, l2, q, kt, v, qp, kp, window=5
"""


def layers_oracle(f):
    x, g, b = (f[n].astype(np.float64) for n in ("x", "g", "b"))
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    gelu = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    r3, c, s = (f[n].astype(np.float64) for n in ("r3", "cos", "sin"))
    rot = np.empty_like(r3)
    for i in range(4):                              # pair (i, i + 4) turned by angle i
        rot[..., i] = r3[..., i] * c[:, i] - r3[..., i + 4] * s[:, i]
        rot[..., i + 4] = r3[..., i + 4] * c[:, i] + r3[..., i] * s[:, i]
    return {"ln": (x - mu) / np.sqrt(var + 1e-5) * g + b,
            "rms": x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-3) * g,
            "ge": gelu, "gt": tanh, "si": x / (1 + np.exp(-x)), "ro": rot}


def attention_oracle(f):
    q, kt, v = (f[n].astype(np.float64) for n in ("q", "kt", "v"))
    scores = np.einsum("grsd,gdt->grst", q, kt[:, 0]) / math.sqrt(D)
    qp, kp = np.arange(T - S, T), np.arange(T)
    dist = qp[:, None] - kp[None, :]

    def attend(mask):
        s = np.where(mask, scores, -np.inf)
        mx = s.max(-1, keepdims=True)
        p = np.exp(s - mx)
        return np.einsum("grst,gte->grse", p / p.sum(-1, keepdims=True), v[:, 0]), mx[..., 0], p.sum(-1)
    o, m, l = attend(np.ones((S, T), bool))
    return {"o": o, "m": m, "l": l, "oc": attend(dist >= 0)[0],
            "ow": attend((dist >= 0) & (dist < 5))[0]}


def check(got, want):
    assert got.keys() == want.keys()
    for name, w in want.items():
        np.testing.assert_allclose(got[name].astype(np.float64), w, rtol=1e-4, atol=1e-5,
                                   err_msg=name)


@pytest.fixture(scope="module")
def cases():
    out = {}
    for name, text, oracle in (("layers", LAYERS, layers_oracle), ("attention", ATTENTION, attention_oracle)):
        program = parse_program(text, HERE)
        feeds = generate_feeds(program, 3)
        want = oracle(feeds)
        check(run_reference(program, feeds), want)
        out[name] = (program, feeds, want)
    return out


@pytest.mark.parametrize("machine", list(MACHINES))
@pytest.mark.parametrize("case", ["layers", "attention"])
def test_libraries_on_five_machines(case, machine, cases):
    program, feeds, want = cases[case]
    plan = compile_program(program, MACHINES[machine]())
    verify_plan(plan)
    check(execute_plan(plan, feeds, LEAF_KERNELS), want)


def test_keys_are_cut_with_the_online_softmax_merge(cases):
    """On tiny's 4 KiB leaves the keys of one query block are cut: attention_merge combines the
    partial results, and no leaf receives all keys with all queries of a head."""
    program, _, _ = cases["attention"]
    plan = compile_program(program, MACHINES["tiny"]())
    merges = [n for (t, _), n in plan.table.items() if t.opcode == "attention"
              and n.kind == PlanKind.SPLIT and n.reduce == ExtensionReduction("attention_merge")
              and any(s.name == "T" and s.pieces * s.ways > 1 for s in n.splits)]
    assert merges
    for (task, level), node in plan.table.items():
        if task.opcode == "attention" and node.kind == PlanKind.LEAF:
            q, kt = task.inputs[0], task.inputs[1]
            assert q.shape[2] * kt.shape[3] < S * T


def test_no_level_holds_the_score_matrix_at_sequence_2048():
    """One head, S = T = 2048 on f1: every node below the root receives a piece whose score
    block is a small part of S x T (the leaves' at most 1/64), while the core form's scores are
    one 16 MiB tensor in root memory; the extension sends far fewer bytes up."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from frisa_programs import attention_pair
    ext, core = attention_pair(2048, 2048, heads=1, dim=64, causal=True)
    plan = compile_program(parse_program(ext, HERE), fractal.build_machine("f1"))
    full = 2048 * 2048
    for (task, level), node in plan.table.items():
        if task.opcode == "causal_attention" and level > 0:
            q, kt = task.inputs[0], task.inputs[1]
            block = q.shape[0] * q.shape[1] * q.shape[2] * kt.shape[3]
            assert block <= full // (4 if level == 1 else 64), (level, task.text())
    core_program = parse_program(core, HERE)
    assert max(t.type.size for t in core_program.tensors) == full
    a = fractal.run(parse_program(ext, HERE), "f1", functional=False)
    b = fractal.run(core_program, "f1", functional=False)
    assert sum(b.bytes_up) > 10 * sum(a.bytes_up)
    assert b.cycles > a.cycles


def test_a_run_on_data_counts_the_score_temporaries():
    """A 32k-token causal attention holds 32768^2 scores in its body: a run on data is refused
    up front (located at the instruction), while timing-only simulation is free to run it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from frisa_programs import attention_pair
    from isa.errors import UserError
    ext, _ = attention_pair(32768, 32768)
    program = parse_program(ext, HERE)
    with pytest.raises(UserError) as info:
        generate_feeds(program, 0)
    text = info.value.format()
    assert ":20:1: error: a run on data needs about" in text and "FRACTAL_MAX_DATA_BYTES" in text


def test_attention_study_runs_from_one_command(tmp_path):
    """scripts/frisa_study.py --only attention (quick points): its table, figures and summary,
    and the advantage they show, growing with the sequence length."""
    import csv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import frisa_study
    assert frisa_study.main(["--quick", "--only", "attention", "--out", str(tmp_path)]) == 0
    for name in ("attention_runs.csv", "attention.png", "attention_ratio.png", "attention_summary.md"):
        assert (tmp_path / name).stat().st_size > 0
    with open(tmp_path / "attention_runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    at = {(r["machine"], int(r["n"]), r["form"]): r for r in rows}
    for machine in {r["machine"] for r in rows}:
        up = {n: float(at[machine, n, "core"]["bytes_up_total_B"]) / float(at[machine, n, "extension"]["bytes_up_total_B"])
              for n in (512, 2048)}
        cycles = {n: float(at[machine, n, "core"]["cycles"]) / float(at[machine, n, "extension"]["cycles"])
                  for n in (512, 2048)}
        assert 1 < up[512] < up[2048] and 1 < cycles[512] < cycles[2048], (machine, up, cycles)
        core = at[machine, 2048, "core"]
        assert int(core["scores_held_B"]) == 4 * 2048 * 2048
        assert int(at[machine, 2048, "extension"]["scores_held_B"]) <= int(core["scores_held_B"]) // 64
    assert "Causal prefill of S queries" in (tmp_path / "attention_summary.md").read_text()
