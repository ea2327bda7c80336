"""A leaf's compute units run at the rate its tile fills: a MAC array wastes the rows and columns
a small or ragged tile leaves empty, vector units the lanes a short row leaves empty (the formula
and its sources are in compiler/leaf.py and docs/simulator.md). Cycles are derived by hand."""
from dataclasses import replace

import pytest

import fractal
from compiler.leaf import leaf_cycles
from compiler.rules import task_of
from isa import parse_program
from isa.errors import UserError
from machine import machine_from_dict, preset


def array_compute(**extra):
    """A 32 x 32 MAC array (2,048 ops/cycle), 8 vector lanes at 8 ops/cycle."""
    return replace(preset("tiny").compute, mac_ops_per_cycle=2048.0, mac_array=(32, 32),
                   elementwise_ops_per_cycle=8.0, compare_ops_per_cycle=8.0, vector_width=8,
                   **extra)


def task(text):
    p = parse_program(text, "t.fasm")
    return task_of(p.instructions[0], p.types)


def matmul(m, k, n, dtype="f32"):
    return task(f"tensor a : {dtype}[{m}, {k}] input\ntensor b : {dtype}[{k}, {n}] param\n"
                f"tensor c : {dtype}[{m}, {n}] output\nmatmul c, a, b\n")


@pytest.mark.parametrize("m, k, n, cycles", [
    (4, 32, 32, 4),         # a full tile: 4 rows of A, one pass each
    (4, 16, 32, 4),         # K = 16 fills half the rows: the same 4 cycles for half the ops
    (4, 40, 32, 8),         # K = 40: ceil(40 / 32) = 2 passes per row of A
    (4, 32, 8, 4),          # N = 8 fills a quarter of the columns
])
def test_matmul_cycles_follow_the_array(m, k, n, cycles):
    """cycles = M x ceil(K / 32) x ceil(N / 32)."""
    assert leaf_cycles(matmul(m, k, n), array_compute()) == cycles


def test_the_fill_is_paid_once_per_instruction():
    assert leaf_cycles(matmul(4, 32, 32), array_compute(array_fill_cycles=62)) == 4 + 62


@pytest.mark.parametrize("c, o, cycles", [
    (32, 32, 2 * 4 * 4 * 9),        # N Ho Wo kh kw = 2 x 4 x 4 x 9 steps of one full tile
    (16, 16, 2 * 4 * 4 * 9),        # a quarter of the array, the same steps
    (48, 32, 2 * 4 * 4 * 9 * 2),    # C = 48: two passes over the rows
])
def test_conv2d_cycles_follow_the_array(c, o, cycles):
    """Input channels on the rows, output channels on the columns, the rest in time:
    cycles = N x Ho x Wo x kh x kw x ceil(C / 32) x ceil(O / 32)."""
    t = task(f"tensor x : f32[2, {c}, 4, 4] input\ntensor w : f32[{o}, {c}, 3, 3] param\n"
             f"tensor y : f32[2, {o}, 4, 4] output\nconv2d y, x, w, pad=1\n")
    assert leaf_cycles(t, array_compute()) == cycles


@pytest.mark.parametrize("shape, cycles", [
    ("4, 8", 4),            # rows of 8: one pass of the 8 lanes each
    ("4, 5", 4),            # rows of 5: still one pass each, 3 lanes idle
    ("4, 9", 8),            # rows of 9: two passes each
])
def test_elementwise_cycles_follow_the_lanes(shape, cycles):
    t = task(f"tensor x : f32[{shape}] input\ntensor y : f32[{shape}] output\nrelu y, x\n")
    assert leaf_cycles(t, array_compute()) == cycles


@pytest.mark.parametrize("shape, cycles", [
    ("2, 16", 4),           # 32 compares over rows of 16: 2 passes per row
    ("2, 4", 2),            # rows of 4: one pass each, half the lanes idle
    ("2, 12", 4),           # rows of 12: 2 passes each
])
def test_compare_cycles_follow_the_lanes(shape, cycles):
    """reduce_max over the last axis: one compare per input element, rows of the input."""
    rows = shape.split(",")[0]
    t = task(f"tensor x : f32[{shape}] input\ntensor y : f32[{rows}] output\n"
             "reduce_max y, x, axis=1\n")
    assert leaf_cycles(t, array_compute()) == cycles


def test_small_channels_waste_the_array_in_simulation():
    """On a leaf with a 32 x 32 array, a conv2d with 16 input and 16 output channels runs at
    most a quarter of the per-op rate of one with 64 and 64."""
    m = preset("tiny")
    m = replace(m, compute=array_compute())
    levels = list(m.levels)
    levels[1] = replace(levels[1], memory_bytes=1 << 22, memory_bandwidth=1 << 16,
                        link_bandwidth=1 << 16)
    levels[0] = replace(levels[0], memory_bandwidth=1 << 16)
    m = replace(m, levels=tuple(levels))

    def rate(ch):
        p = parse_program(f"tensor x : f32[1, {ch}, 16, 16] input\n"
                          f"tensor w : f32[{ch}, {ch}, 3, 3] param\n"
                          f"tensor y : f32[1, {ch}, 16, 16] output\nconv2d y, x, w, pad=1\n", "c.fasm")
        r = fractal.run(p, m, functional=False)
        return r.ops / r.cycles
    assert rate(16) <= rate(64) / 4


def test_a_machine_prices_each_data_type():
    """A 16-bit array that runs f32 at a quarter of its rate."""
    c = array_compute(mac_ops_per_cycle_by_dtype=(("f32", 512.0),))
    assert leaf_cycles(matmul(4, 32, 32), c) == 16


BASE = {"name": "m", "frequency_hz": 1e9, "level": [
    {"name": "root", "fanout": 2, "memory_bytes": 1 << 20, "memory_bandwidth": 8,
     "link_bandwidth": 8, "link_latency": 0, "decode_cycles": 1, "lfu_ops_per_cycle": 1,
     "memory_pj_per_byte": 1, "link_pj_per_byte": 1, "static_watts": 0},
    {"name": "leaf", "memory_bytes": 1024, "memory_bandwidth": 8, "link_bandwidth": 4,
     "link_latency": 1, "decode_cycles": 1, "lfu_ops_per_cycle": 1, "memory_pj_per_byte": 1,
     "link_pj_per_byte": 1, "static_watts": 0,
     "compute": {"mac_ops_per_cycle": 2048, "elementwise_ops_per_cycle": 8,
                 "compare_ops_per_cycle": 8, "mac_pj_per_op": 1, "elementwise_pj_per_op": 1,
                 "compare_pj_per_op": 1}}]}


@pytest.mark.parametrize("extra, message", [
    ({"mac_array": [32, 16]}, "m.toml: level[1].compute.mac_array: error: a 32 x 16 MAC array runs "
     "1,024 ops per cycle (a multiply-accumulate is two ops), but 'mac_ops_per_cycle' is 2048"),
    ({"mac_array": [32]}, "m.toml: level[1].compute.mac_array: error: 'mac_array' must be "
     "[rows, columns] of positive integers, got [32]"),
    ({"vector_width": 0}, "m.toml: level[1].compute.vector_width: error: 'vector_width' must be "
     "positive, got 0"),
    ({"mac_ops_per_cycle_by_dtype": {"fp16": 4096}}, "m.toml: level[1].compute."
     "mac_ops_per_cycle_by_dtype.fp16: error: unknown data type 'fp16' (one of f32, i32, f16, "
     "bf16, i8)"),
    ({"mac_ops_per_cycle_by_dtype": {"f32": -1}}, "m.toml: level[1].compute."
     "mac_ops_per_cycle_by_dtype.f32: error: 'f32' must be positive, got -1"),
])
def test_bad_array_keys_are_located(extra, message):
    data = {**BASE, "level": [BASE["level"][0], {**BASE["level"][1], "compute": {
        **BASE["level"][1]["compute"], **extra}}]}
    with pytest.raises(UserError) as e:
        machine_from_dict(data, "m.toml")
    assert str(e.value).splitlines()[0] == message


def test_array_keys_load():
    data = {**BASE, "level": [BASE["level"][0], {**BASE["level"][1], "compute": {
        **BASE["level"][1]["compute"], "mac_array": [32, 32], "vector_width": 8,
        "array_fill_cycles": 62, "mac_ops_per_cycle_by_dtype": {"f32": 512}}}]}
    c = machine_from_dict(data, "m.toml").compute
    assert (c.mac_array, c.vector_width, c.array_fill_cycles) == ((32, 32), 8, 62)
    assert c.ops_per_cycle("mac", "f32") == 512 and c.ops_per_cycle("mac", "i32") == 2048
