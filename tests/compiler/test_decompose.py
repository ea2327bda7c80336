"""The decomposition is right: executing a plan gives the reference's outputs, ops are conserved,
pieces fit, traffic is at least compulsory, and identical sub-problems are planned once."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compiler import CompileError, compile_program, execute_plan, plan_stats, verify_plan
from machine import preset
from isa import load_program, parse_program
from isa.checker import program_ops
from isa.reference import generate_feeds, run_reference
from tests.strategies import CORE_OPCODES, close_to_reference, random_machine, random_program

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def assert_same_outputs(got, want):
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        if want[k].dtype in (np.int32, np.int8):
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        elif want[k].dtype == np.float32:
            np.testing.assert_allclose(got[k], want[k], rtol=2e-4, atol=2e-4, err_msg=k)
        else:                       # f16, bf16: their own rounding unit (tests/strategies.py)
            assert close_to_reference(got[k], want[k]).all(), k


@settings(max_examples=60, deadline=None)
@given(opcode=st.sampled_from(CORE_OPCODES), seed=st.integers(0, 2**32 - 1))
def test_plan_execution_equals_reference(opcode, seed):
    rng = np.random.default_rng(seed)
    program = random_program(rng, opcode)
    machine = random_machine(rng)
    plan = compile_program(program, machine)
    verify_plan(plan)
    feeds = generate_feeds(program, seed % 1000)
    assert_same_outputs(execute_plan(plan, feeds), run_reference(program, feeds))


@pytest.mark.parametrize("opcode", CORE_OPCODES)
def test_every_opcode_on_1_and_4096_leaves(opcode):
    rng = np.random.default_rng(sum(map(ord, opcode)))
    program = random_program(rng, opcode)
    feeds = generate_feeds(program, 1)
    want = run_reference(program, feeds)
    one_leaf = preset("tiny").rescaled(1, 1)
    wide = random_machine(np.random.default_rng(5), leaf_memory=4096)
    wide = replace(wide, levels=preset("tiny").rescaled(3, 16).levels)
    for machine in (one_leaf, wide):
        plan = compile_program(program, machine)
        verify_plan(plan)
        assert_same_outputs(execute_plan(plan, feeds), want)


SMALL_PROGRAMS = ["mlp", "cnn", "kmeans_step", "knn", "elementwise"]


@pytest.mark.parametrize("name", SMALL_PROGRAMS)
@pytest.mark.parametrize("machine", ["tiny", "f1", "tiny-3x5x7", "tiny-1"])
def test_programs_on_machines(name, machine):
    m = {"tiny-3x5x7": lambda: preset("tiny").rescaled(3, (3, 5, 7)),
         "tiny-1": lambda: preset("tiny").rescaled(2, 1)}.get(machine, lambda: preset(machine))()
    program = load_program(PROGRAMS / f"{name}.fasm")
    feeds = generate_feeds(program, 0)
    plan = compile_program(program, m)
    verify_plan(plan)
    assert_same_outputs(execute_plan(plan, feeds), run_reference(program, feeds))


def test_alexnet_block_on_f1():
    program = load_program(PROGRAMS / "alexnet_block.fasm")
    feeds = generate_feeds(program, 0)
    plan = compile_program(program, preset("f1"))
    assert_same_outputs(execute_plan(plan, feeds), run_reference(program, feeds))


@pytest.mark.parametrize("name", SMALL_PROGRAMS + ["alexnet_block"])
@pytest.mark.parametrize("machine", ["tiny", "f1", "f100"])
def test_conservation(name, machine):
    m = preset(machine)
    program = load_program(PROGRAMS / f"{name}.fasm")
    plan = compile_program(program, m)
    stats, leaf_ops = plan_stats(plan)
    sorts = [r for r in plan.roots if r.task.opcode in ("sort", "argsort")]
    if sorts:       # leaves sort shorter runs; merging them is reduction work, counted apart
        assert leaf_ops <= program_ops(program)
    else:
        assert leaf_ops == program_ops(program)
    # each decomposed instruction's inputs reach the leaves and its output comes back (these
    # programs' windows touch every input element, so the compulsory bytes are the tensors')
    down = sum(t.nbytes for r in plan.roots if r.kind == "split" for t in r.task.inputs)
    up = sum(t.nbytes for r in plan.roots if r.kind == "split" for t in r.task.outputs)
    for s in stats[1:]:
        assert s.bytes_in >= down and s.bytes_out >= up
    # no working set exceeds its memory
    for (task, level), node in plan.table.items():
        assert task.nbytes <= (m.levels[level].memory_bytes if level == 0
                               else m.levels[level].memory_bytes // m.levels[level].buffering)


def test_matmul_k_split_reduction_by_hand():
    """A [4, 64] x [64, 4] matmul on 2 leaves whose memory holds half of K: the root cuts K.

    Leaf budget 1024/2 = 512 bytes. The whole task needs (16 + 256 + 256) * 4 = 2112 bytes; a
    child with K = 16 needs (16 + 64 + 64) * 4 = 576 > 512, with K = 8: (16 + 32 + 32) * 4 = 320.
    """
    text = ("tensor a : f32[4, 64] input\ntensor b : f32[64, 4] param\n"
            "tensor c : f32[4, 4] output\nmatmul c, a, b\n")
    program = parse_program(text, "k.fasm")
    base = preset("tiny").rescaled(1, 2)
    m = replace(base, levels=(base.levels[0], replace(base.levels[1], memory_bytes=1024)))
    plan = compile_program(program, m)
    verify_plan(plan)
    root = plan.roots[0]
    for (task, level), node in plan.table.items():
        if level == 1:
            assert task.nbytes <= 512
    assert sum(n for _, n in root.children) * (root.children[0][0].types[1].shape[1]) >= 64
    leaf_ops = sum(n * t.ops for t, n in root.children)
    assert leaf_ops == 2 * 4 * 4 * 64
    k_split = {s.name: s for s in root.splits}["K"]
    if k_split.pieces * k_split.ways > 1:
        # 16 outputs, one partial per K range; each child keeps its partial across the serial
        # pieces (adding 16 per piece after the first) and the root adds the children's results
        runs = k_split.pieces * k_split.ways
        assert root.reduction_ops == 16 * (k_split.ways - 1) and root.reduce == "add"
        assert root.child_reduction_ops == 16 * (runs - k_split.ways)
        assert root.bytes_up == 16 * 4 * k_split.ways       # each child writes C back once
    feeds = generate_feeds(program, 3)
    assert_same_outputs(execute_plan(plan, feeds), run_reference(program, feeds))


def test_leaf_too_small_is_a_located_compile_error():
    """The smallest conv2d piece is one output element: Y 1 float, the 9x9 window of X and all of
    W (81 floats each): (1 + 81 + 81) * 4 = 652 bytes, against 512 / 2 = 256 per piece."""
    text = ("tensor x : f32[1, 1, 9, 9] input\ntensor w : f32[1, 1, 9, 9] param\n"
            "tensor y : f32[1, 1, 1, 1] output\nconv2d y, x, w\n")
    program = parse_program(text, "big.fasm")
    base = preset("tiny")
    m = replace(base, levels=(base.levels[0], replace(base.levels[1], memory_bytes=512)))
    with pytest.raises(CompileError) as info:
        compile_program(program, m)
    assert info.value.format() == (
        "big.fasm:4:1: error: conv2d cannot be fitted on level 1 (leaf) of machine 'tiny': its "
        "smallest piece needs 652 bytes, a leaf has 512 bytes (256 bytes per piece with 2 pieces "
        "in flight)\n    conv2d y, x, w\n    ^\n    hint: give that level more memory, or use "
        "smaller tensors")


def test_program_larger_than_root_memory():
    program = parse_program("tensor x : f32[4096, 4096] input\ntensor y : f32[4096, 4096] output\n"
                            "relu y, x\n", "huge.fasm")
    with pytest.raises(CompileError, match="more than the 16,777,216 bytes of the root"):
        compile_program(program, preset("tiny"))


def test_memoized_plan_size_grows_with_levels_not_leaves():
    """A VGG-16 layer on 4 levels of fan-out 2 and of fan-out 32 (about a million leaves)."""
    text = ("tensor x : f32[1, 256, 56, 56] input\ntensor w : f32[256, 256, 3, 3] param\n"
            "tensor y : f32[1, 256, 56, 56] output\nconv2d y, x, w, pad=1\n")
    program = parse_program(text, "vgg.fasm")
    small = compile_program(program, preset("f1").rescaled(4, 2))
    large = compile_program(program, preset("f1").rescaled(4, 32))
    assert large.machine.leaves == 32 ** 4
    assert len(large.table) <= 4 * len(small.table) + 16
    verify_plan(large)


@pytest.mark.parametrize("name", ["cnn", "attention"])
def test_a_plan_does_not_depend_on_the_order_its_instructions_are_planned_in(name):
    """The explorer's workers plan a program's instructions among them, in any order, into one
    table; every root plan and every entry it reaches is the program-order compile's."""
    from compiler.decompose import plan_instructions
    program = load_program(PROGRAMS / f"{name}.fasm")
    m = preset("tiny")
    plan = compile_program(program, m)
    n = len(program.instructions)
    table: dict = {}
    back, reached = plan_instructions(program, m, reversed(range(n)), table=table)
    assert tuple(back) == plan.roots and reached == plan.table
    half, reached = plan_instructions(program, m, range(1, n, 2))
    assert half[0] is None and half[1] == plan.roots[1]
    assert reached.items() <= plan.table.items()


@pytest.mark.parametrize("name", ["tiny", "f1", "f100"])
def test_keys_derived_from_a_levels_plan_inputs_equal_the_machines_own(name):
    """A design-space search derives the level below's plan key and a level's price key from a
    plan key it holds; they are the keys the machine itself gives."""
    from compiler.decompose import child_plan_inputs, plan_inputs, pricing_inputs, pricing_of
    m = preset(name).rescaled(3, (2, 2, 2)) if name == "tiny" else preset(name)
    for level in range(m.depth):
        inputs = plan_inputs(m, level)
        assert child_plan_inputs(inputs) == plan_inputs(m, level + 1)
        assert pricing_of(inputs) == pricing_inputs(m, level)
