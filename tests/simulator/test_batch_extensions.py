"""Extension instructions with their leaves run stacked (simulator.extension_batch): every output
equals the per-leaf path's bit for bit (the same leaf kernels on the same regions, combined in
the same order) and numpy's, on machines that cut the operands evenly and unevenly, across
serial pieces, and through attention's online-softmax merge."""
from __future__ import annotations

import numpy as np
import pytest

import fractal
from compiler import compile_program, execute_plan
from compiler.plan import PlanKind
from fractal.workloads import generate
from isa import parse_program
from isa.opcodes import OPCODES
from isa.program import TensorType
from isa.reference import generate_feeds, run_reference
from simulator.batch_kernels import LEAF_BATCH_KERNELS
from simulator.extension_batch import Operand, run_extension_node, run_stacked
from simulator.kernels import LEAF_KERNELS
from simulator.run import compute_outputs
from tests.extensions.test_execution import HERE, OTHERS, TOPK
from tests.extensions.test_transformer_libs import (ATTENTION, LAYERS, attention_oracle, check,
                                                    layers_oracle)

MACHINES = {"tiny": lambda: fractal.build_machine("tiny"),
            "tiny-3x5": lambda: fractal.build_machine("tiny", 2, (3, 5)),
            "f1-2x(3,2)": lambda: fractal.build_machine("f1", 2, (3, 2)),
            "f1-3x4": lambda: fractal.build_machine("f1", 3, 4)}


def _softmax_oracle(f):
    a = f["a"].astype(np.float64)
    e = np.exp(a - a.max(1, keepdims=True))
    return {"b": e / e.sum(1, keepdims=True)}


CASES = {"layers": (LAYERS, layers_oracle), "attention": (ATTENTION, attention_oracle),
         "softmax": (OTHERS, _softmax_oracle)}


def _both(program, machine, feeds):
    """(outputs with extensions stacked, outputs leaf by leaf, the opcodes that ran stacked)."""
    plan = compile_program(program, machine)
    stacked = []

    def counting(plan, root, inputs, cache):
        out = run_extension_node(plan, root, inputs, cache)
        if out is not None:
            stacked.append(root.task.opcode)
        return out
    got = execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS, {}, counting)
    per_leaf = execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS)
    return got, per_leaf, stacked, plan


def _same(got, want):
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("machine", list(MACHINES))
@pytest.mark.parametrize("case", list(CASES))
def test_stacked_extensions_equal_per_leaf_and_numpy(case, machine):
    text, oracle = CASES[case]
    program = parse_program(text, HERE)
    feeds = generate_feeds(program, 5)
    got, per_leaf, stacked, plan = _both(program, MACHINES[machine](), feeds)
    _same(got, per_leaf)
    want = oracle(feeds)
    check({k: got[k] for k in want}, want)
    split = {r.task.opcode for r in plan.roots if r.task.ext and r.kind == PlanKind.SPLIT}
    assert split - {"nb_classify"} <= set(stacked)     # each split extension ran stacked


def test_the_merge_of_key_blocks_runs_stacked():
    # on tiny's 4 KiB leaves attention's keys are cut: the stacked path combines key blocks
    # with attention_merge, itself run on the stack
    program = parse_program(ATTENTION, HERE)
    feeds = generate_feeds(program, 2)
    got, per_leaf, stacked, _ = _both(program, fractal.build_machine("tiny"), feeds)
    assert {"attention", "causal_attention"} <= set(stacked)
    _same(got, per_leaf)


def test_a_node_that_merges_sorted_runs_is_left_to_the_per_leaf_path():
    # topk's split combines with a merge of sorted runs: run_node computes it
    program = parse_program(TOPK, HERE)
    feeds = generate_feeds(program, 1)
    got, per_leaf, stacked, _ = _both(program, fractal.build_machine("tiny"), feeds)
    assert "topk" not in stacked
    _same(got, per_leaf)
    x = feeds["x"]
    np.testing.assert_array_equal(got["i"], np.argsort(x, axis=1, kind="stable")[:, :16])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_small_bert_layer_equals_per_leaf_and_the_reference(dtype):
    program = fractal.load_program(generate("bert_base", batch=1, layers=1, seq=16, hidden=32,
                                            heads=2, ffn=64, dtype=dtype))
    feeds = generate_feeds(program, 4)
    machine = fractal.build_machine("tiny", 2, (3, 5))
    got, per_leaf, stacked, plan = _both(program, machine, feeds)
    assert {"layernorm", "attention", "gelu"} <= set(stacked)
    _same(got, per_leaf)
    _same(compute_outputs(plan, feeds), per_leaf)          # the simulator's functional path
    ref = run_reference(program, feeds)
    tol = 1e-4 if dtype == "f32" else 2e-2
    for name, want in ref.items():
        np.testing.assert_allclose(got[name].astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, err_msg=name)


def test_an_opcode_with_no_stacked_form_runs_call_by_call():
    # causal_mask on a stack of three calls, each with its own positions: each call's leaf value
    qp = np.array([[3, 4], [0, 1], [7, 8]], np.int32)
    kp = np.arange(6, dtype=np.int32)
    out = run_stacked(OPCODES["causal_mask"], [Operand(qp, True), Operand(kp, False)],
                      {"window": 0}, [TensorType("f32", (2, 6))], 3)[0]
    assert out.stacked and out.value.shape == (3, 2, 6)
    for i in range(3):
        want = LEAF_KERNELS["causal_mask"]([qp[i], kp], {"window": 0}, TensorType("f32", (2, 6)))
        np.testing.assert_array_equal(out.value[i], want)


def test_an_instruction_on_shared_operands_runs_once():
    # every call reads the same value: one leaf kernel call, kept unstacked
    x = np.array([4.0, 9.0], np.float32)
    out = run_stacked(OPCODES["rsqrt"], [Operand(x, False)], {}, [TensorType("f32", (2,))], 5)[0]
    assert not out.stacked
    np.testing.assert_array_equal(out.value, np.float32([0.5, 1 / 3]))



@pytest.mark.parametrize("op", ["min", "max", "add", "div", "exp", "erf"])
def test_stacked_f32_elementwise_equals_each_calls_leaf_kernel(op):
    # NaN, signed zeros, ties, infinities, a broadcast shared operand: each call's leaf value
    special = np.float32([np.nan, 0.0, -0.0, 1.5, -np.inf, np.inf, 2.0, -3.0])
    rng = np.random.default_rng(1)
    x = np.stack([special, rng.standard_normal(8).astype(np.float32), special[::-1]])
    y = np.float32([-0.0, 0.0, np.nan, 1.5, 2.0, -np.inf, 2.0, 7.0])
    t = TensorType("f32", (8,))
    ins = [Operand(x, True)] + ([Operand(y, False)] if OPCODES[op].inputs == 2 else [])
    out = run_stacked(OPCODES[op], ins, {}, [t], 3)[0]
    for i in range(3):
        want = LEAF_KERNELS[op]([x[i]] + ([y] if len(ins) == 2 else []), {}, t)
        np.testing.assert_array_equal(out.value[i], want)
        assert np.array_equal(np.signbit(out.value[i]), np.signbit(want))


@pytest.mark.parametrize("a_stacked, b_stacked", [(True, True), (False, True), (True, False)])
def test_a_stacked_matmul_equals_each_calls_leaf_kernel(a_stacked, b_stacked):
    # each call's A is one matrix for its 2 batch elements (the leaf multiplies it with their
    # B side by side); on the stack, no call's product reaches into another call's (a wider
    # sgemm groups some sums differently in OpenBLAS's small-matrix kernels)
    rng = np.random.default_rng(2)
    calls, t = 3, TensorType("f32", (2, 32, 2))
    a = rng.standard_normal((calls, 32, 96) if a_stacked else (32, 96)).astype(np.float32)
    b = rng.standard_normal((calls, 2, 96, 2) if b_stacked else (2, 96, 2)).astype(np.float32)
    out = run_stacked(OPCODES["matmul"], [Operand(a, a_stacked), Operand(b, b_stacked)], {}, [t],
                      calls)[0]
    for i in range(calls):
        want = LEAF_KERNELS["matmul"]([a[i] if a_stacked else a, b[i] if b_stacked else b], {}, t)
        np.testing.assert_array_equal(out.value[i], want)
        np.testing.assert_allclose(want, (a[i] if a_stacked else a).astype(np.float64)
                                   @ (b[i] if b_stacked else b), rtol=1e-5, atol=1e-5)


def test_an_extension_whose_pieces_only_concatenate_runs_once_on_the_whole(monkeypatch):
    # layernorm, rmsnorm, gelu, silu and rope split without a reduction or a halo: each runs its
    # body once on the node's operands, without walking the node's calls; attention, whose key
    # blocks merge, walks them
    import simulator.extension_batch as eb
    walked = []
    real = eb._run
    monkeypatch.setattr(eb, "_run", lambda plan, node, *rest: walked.append(node.task.opcode)
                        or real(plan, node, *rest))
    machine = MACHINES["tiny-3x5"]()
    ran, split = set(), set()
    for text in (LAYERS, ATTENTION):
        program = parse_program(text, HERE)
        got, per_leaf, stacked, plan = _both(program, machine, generate_feeds(program, 3))
        _same(got, per_leaf)
        ran |= set(stacked)
        split |= {r.task.opcode for r in plan.roots if r.task.ext and r.kind == PlanKind.SPLIT}
    assert "attention" in split and "attention" in walked
    assert not {"layernorm", "rmsnorm", "gelu", "gelu_tanh", "silu", "rope"} & set(walked)
    assert {"layernorm", "gelu"} <= split & ran


def test_a_concatenating_extension_with_a_product_in_its_body_walks_its_calls(monkeypatch):
    # a BLAS product's float sums can change with its shape: such a body runs on the leaves'
    # own pieces, stacked, as their values are defined
    import simulator.extension_batch as eb
    text = """extension proj(y: f32[R, N] <- x: f32[R, K], w: f32[K, N])
  split R
  matmul y, x, w
end
tensor x : f32[24, 16] input
tensor w : f32[16, 8] param
tensor y : f32[24, 8] output
proj y, x, w
"""
    walked = []
    real = eb._run
    monkeypatch.setattr(eb, "_run", lambda plan, node, *rest: walked.append(node.task.opcode)
                        or real(plan, node, *rest))
    program = parse_program(text, "<proj>")
    feeds = generate_feeds(program, 1)
    got, per_leaf, stacked, _ = _both(program, MACHINES["tiny-3x5"](), feeds)
    _same(got, per_leaf)
    assert "proj" in walked and "proj" in stacked
    np.testing.assert_allclose(got["y"], feeds["x"].astype(np.float64) @ feeds["w"], rtol=1e-5,
                               atol=1e-5)
