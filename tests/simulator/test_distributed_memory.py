"""A distributed memory: a level whose memory is the union of shares of its children's memories
(f100's server memory is its chips' HBM). Its capacity and port are carved out of the
children's, and of the bytes a child loads or stores, the part homed in that child does not
cross its link."""
import pytest

import fractal
from isa import parse_program
from isa.errors import ErrorGroup, UserError
from machine import machine_from_dict, preset

N = 65_536
ADD = (f"tensor x : f32[{N}] input\ntensor y : f32[{N}] input\ntensor z : f32[{N}] output\n"
       "add z, x, y\n")

LEAF = {"name": "leaf", "memory_bytes": 1_048_576, "memory_bandwidth": 32, "link_bandwidth": 1,
        "link_latency": 10, "decode_cycles": 2, "lfu_ops_per_cycle": 4,
        "memory_pj_per_byte": 1.0, "link_pj_per_byte": 2.0, "static_watts": 0.05,
        "compute": {"mac_ops_per_cycle": 32, "elementwise_ops_per_cycle": 8,
                    "compare_ops_per_cycle": 8, "mac_pj_per_op": 0.5,
                    "elementwise_pj_per_op": 1.0, "compare_pj_per_op": 0.5}}
ROOT = {"name": "root", "fanout": 4, "link_bandwidth": 16, "link_latency": 100,
        "decode_cycles": 4, "lfu_ops_per_cycle": 8, "link_pj_per_byte": 10.0,
        "static_watts": 0.5}
LOCAL = {"memory_bytes": 16_777_216, "memory_bandwidth": 64, "memory_pj_per_byte": 20.0}
SHARES = {"memory": "distributed", "memory_share": 0.75, "bandwidth_share": 0.5}


def machine(root_memory: dict):
    return machine_from_dict({"name": "m", "frequency_hz": 1e9,
                              "level": [ROOT | root_memory, dict(LEAF)]}, "m.toml")


def errors(root_memory: dict, leaf: dict | None = None) -> list[str]:
    data = {"name": "m", "frequency_hz": 1e9, "level": [ROOT | root_memory, leaf or dict(LEAF)]}
    with pytest.raises((UserError, ErrorGroup)) as e:
        machine_from_dict(data, "m.toml")
    return str(e.value).splitlines()


def test_the_memory_is_carved_out_of_the_childrens():
    """4 leaves of 1 MiB and 32 B/cycle lend three quarters of their capacity and half their
    bandwidth: the root holds 4 x 768 KiB at 4 x 16 B/cycle; each leaf keeps 256 KiB at 16."""
    m = machine(SHARES)
    root, leaf = m.levels
    assert root.memory_bytes == 4 * 786_432 and root.memory_bandwidth == 64
    assert leaf.memory_bytes == 262_144 and leaf.memory_bandwidth == 16
    assert leaf.physical_memory == (1_048_576, 32)
    assert root.memory_pj_per_byte == leaf.memory_pj_per_byte == 1.0    # the same memories
    # re-scaling carves anew from the leaves' whole memories, never twice
    assert m.rescaled(1, 8).levels[0].memory_bytes == 8 * 786_432
    assert m.rescaled(1, 8).rescaled(1, 4).levels == m.rescaled(1, 4).levels
    assert "distributed over its children" in m.summary()


def test_only_the_bytes_homed_elsewhere_cross_the_links():
    """z = x + y with every leaf link at 1 byte/cycle. Each leaf loads a quarter of both
    inputs, 2 x 65,536 x 4 / 4 = 131,072 bytes; from a local root memory all of them cross its
    link, from a memory interleaved over the 4 leaves only the 3/4 homed in other leaves do:
    98,304 cycles at least, and fewer than the 131,072 the local root needs at least."""
    local = fractal.run(parse_program(ADD, "add.fasm"), machine(LOCAL), functional=False)
    spread = fractal.run(parse_program(ADD, "add.fasm"), machine(SHARES), functional=False)
    assert local.cycles >= 131_072
    assert 98_304 <= spread.cycles < 131_072
    # link energy: the bytes that cross, 3/4 of the 12 bytes per element moved, at 2 pJ/byte
    leaf = spread.levels[1]
    assert leaf["bytes_in"] + leaf["bytes_out"] == 12 * N
    assert leaf["energy_joules"]["link"] == pytest.approx(12 * N * 0.75 * 2e-12, rel=1e-12)
    assert 0 < leaf["busy"]["link_in"] <= 1


def test_outputs_are_the_same_as_from_a_local_memory():
    prog = parse_program(ADD, "add.fasm")
    rng = __import__("numpy").random.default_rng(0)
    feeds = {"x": rng.standard_normal(N, dtype="float32"), "y": rng.standard_normal(N, dtype="float32")}
    out = fractal.run(prog, machine(SHARES), inputs=feeds).outputs["z"]
    assert (out == feeds["x"] + feeds["y"]).all()


def test_f100_keeps_the_program_in_its_chips_hbm():
    """f100: 8 chips of 32 GiB HBM2 (four 8 GiB stacks) at 1 TB/s; the server's 192 GiB and
    2 TB/s are 24 GiB and 256 B/cycle of each."""
    server, chip = preset("f100").levels[:2]
    assert server.memory == "distributed"
    assert server.memory_bytes == 8 * 24 * 2**30 and server.memory_bandwidth == 8 * 256
    assert chip.physical_memory == (32 * 2**30, 1024)
    assert chip.memory_bytes == 8 * 2**30 and chip.memory_bandwidth == 768


def test_distributed_memory_errors_are_located():
    msgs = errors(SHARES | LOCAL)
    for key in ("memory_bytes", "memory_bandwidth", "memory_pj_per_byte"):
        assert any(m.startswith(f"m.toml: level[0].{key}: error: a distributed memory's") for m in msgs)
    assert errors({"memory": "distributed"} | {"memory_share": 1.0, "bandwidth_share": 0.5})[0] \
        .startswith("m.toml: level[0].memory_share: error: 'memory_share' must be below 1")
    assert any("level[0].bandwidth_share: error: missing key" in m
               for m in errors({"memory": "distributed", "memory_share": 0.5}))
    assert errors(LOCAL | {"memory_share": 0.5})[0].startswith(
        "m.toml: level[0].memory_share: error: 'memory_share' applies only to a distributed memory")
    assert errors(LOCAL | {"memory": "shared"})[0].startswith(
        "m.toml: level[0].memory: error: 'memory' must be \"local\" or \"distributed\"")
    leaf = {k: v for k, v in LEAF.items() if not k.startswith("memory_")} | SHARES
    assert any(m.startswith("m.toml: level[1].memory: error: the leaf level has no children")
               for m in errors(LOCAL, leaf))
    three = {"name": "m", "frequency_hz": 1e9,
             "level": [ROOT | SHARES, ROOT | SHARES, dict(LEAF)]}
    with pytest.raises((UserError, ErrorGroup), match=r"level\[0\].memory: error: the children "
                                                       r"of a distributed memory need memories"):
        machine_from_dict(three, "m.toml")
