"""Machine descriptions: presets, whole-file validation with exact messages, re-scaling."""
import dataclasses
import math
import tomllib

import pytest

from machine import (DEFAULT_BUFFERING, OP_CLASSES, PRESET_DIR, PRESETS, Compute, Level, Machine,
                     load_machine, machine_from_dict, preset)
from isa.errors import ErrorGroup, UserError

# A valid two-level machine; each bad case below edits one snippet of it.
BASE = """\
name = "t"
description = "a test machine"
frequency_hz = 1.0e9

[[level]]
name = "root"
fanout = 4
memory_bytes = 65536
memory_bandwidth = 64
link_bandwidth = 16
link_latency = 100
decode_cycles = 4
lfu_ops_per_cycle = 8
memory_pj_per_byte = 20.0
link_pj_per_byte = 10.0
static_watts = 0.5

[[level]]
name = "leaf"
memory_bytes = 4096
memory_bandwidth = 32
link_bandwidth = 16
link_latency = 10
decode_cycles = 2
lfu_ops_per_cycle = 4
memory_pj_per_byte = 1.0
link_pj_per_byte = 2.0
static_watts = 0.05

[level.compute]
mac_ops_per_cycle = 32
elementwise_ops_per_cycle = 8
compare_ops_per_cycle = 8
mac_pj_per_op = 0.5
elementwise_pj_per_op = 1.0
compare_pj_per_op = 0.5
"""

ROOT = '[[level]]\nname = "root"\n'
LEAF = '[[level]]\nname = "leaf"\n'


def edit(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"snippet not unique in BASE: {old!r}"
    return text.replace(old, new)


def write(tmp_path, text: str, name: str = "m.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path, text: str) -> UserError:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_machine(path)
    return info.value


def expect(tmp_path, text: str, message: str):
    """Loading `text` fails with exactly `message`; `{f}` stands for the file's path."""
    err = error_of(tmp_path, text)
    expected = message.format(f=tmp_path / "m.toml")
    assert err.format() == expected
    assert str(err) == expected


# ---------------------------------------------------------------- presets

def test_base_fixture_is_valid(tmp_path):
    m = load_machine(write(tmp_path, BASE))
    assert m.name == "t" and m.description == "a test machine"
    assert m.frequency_hz == 1.0e9
    assert [lv.name for lv in m.levels] == ["root", "leaf"]
    assert m.levels[0] == Level(name="root", fanout=4, memory_bytes=65536, memory_bandwidth=64,
                                link_bandwidth=16, link_latency=100, decode_cycles=4,
                                lfu_ops_per_cycle=8, memory_pj_per_byte=20.0,
                                link_pj_per_byte=10.0, static_watts=0.5, broadcast=True)
    assert m.leaf.fanout == 0
    assert m.compute == Compute(32.0, 8.0, 8.0, 0.5, 1.0, 0.5)
    assert m.compute.ops_per_cycle("mac") == 32 and m.compute.pj_per_op("elementwise") == 1.0


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads(name):
    m = preset(name)
    assert isinstance(m, Machine)
    assert m.name == name
    assert m.description
    assert m.leaf.fanout == 0 and all(f >= 1 for f in m.fanouts)
    assert len(m.levels) == m.depth + 1
    # the file loads to the same machine through every door
    assert load_machine(PRESET_DIR / f"{name}.toml") == m
    with open(PRESET_DIR / f"{name}.toml", "rb") as fh:
        assert machine_from_dict(tomllib.load(fh), str(PRESET_DIR / f"{name}.toml")) == m
    assert preset(str(PRESET_DIR / f"{name}.toml")) == m


def test_tiny():
    m = preset("tiny")
    assert m.leaves == 4
    assert len(m.levels) == 2 and m.depth == 1
    assert m.fanouts == (4,)
    assert m.leaf.memory_bytes == 4096
    assert m.peak_ops_per_second == 4 * 32 * 1.0e9
    assert m.static_watts == pytest.approx(0.5 + 4 * 0.05)


def test_f1_numbers():
    m = preset("f1")
    assert [lv.name for lv in m.levels] == ["card", "cluster", "core"]
    assert m.fanouts == (4, 4)
    assert m.leaves == 16
    assert [m.nodes_at(i) for i in range(3)] == [1, 4, 16]
    assert m.frequency_hz == 1.0e9
    # 16 cores x 2048 ops/cycle x 1 GHz = 32.8 Tops/s
    assert m.peak_ops_per_second == 16 * 2048 * 1.0e9 == 32.768e12
    # card 12 W + 4 clusters x 1 W + 16 cores x 0.5 W
    assert m.static_watts == pytest.approx(12 + 4 * 1.0 + 16 * 0.5) == 24.0
    assert m.levels[0].memory_bytes == 8 * 2**30


def test_f100_numbers():
    m = preset("f100")
    assert [lv.name for lv in m.levels] == ["server", "chip", "cluster", "core"]
    assert m.fanouts == (8, 8, 8)
    assert m.leaves == 512
    # 512 cores x 2048 ops/cycle x 1 GHz = 1.05 Pops/s
    assert m.peak_ops_per_second == 512 * 2048 * 1.0e9
    assert m.peak_ops_per_second == pytest.approx(1.05e15, rel=0.01)
    # server 150 W + 8 chips x 20 W + 64 clusters x 1 W + 512 cores x 0.5 W
    assert m.static_watts == pytest.approx(150 + 8 * 20 + 64 * 1.0 + 512 * 0.5) == 630.0
    # f100's core is f1's core
    assert m.leaf == preset("f1").leaf and m.compute == preset("f1").compute


def test_summary_names_every_level():
    text = preset("f1").summary()
    assert text.splitlines()[0] == "f1: 3 levels, 16 leaves, 32.8 Tops/s peak at 1 GHz"
    assert len(text.splitlines()) == 4
    assert "memory 8 GiB" in text and "memory 512 KiB" in text


def test_machine_from_dict_default_names_and_broadcast():
    data = tomllib.loads(BASE.replace('name = "root"\n', "").replace('name = "leaf"\n', "")
                         .replace("static_watts = 0.05\n", "static_watts = 0.05\nbroadcast = false\n"))
    m = machine_from_dict(data)
    assert [lv.name for lv in m.levels] == ["level0", "leaf"]
    assert m.levels[0].broadcast is True and m.leaf.broadcast is False


def test_buffering_defaults_to_double_buffering_and_is_per_level(tmp_path):
    m = load_machine(write(tmp_path, BASE))
    assert DEFAULT_BUFFERING == 2
    assert [lv.buffering for lv in m.levels] == [2, 2]
    m = load_machine(write(tmp_path, edit(LEAF, LEAF + "buffering = 3\n")))
    assert [lv.buffering for lv in m.levels] == [2, 3]
    assert m.rescaled(3, 2).levels[-1].buffering == 3
    for name in PRESETS:
        assert all(lv.buffering == DEFAULT_BUFFERING for lv in preset(name).levels)


def test_notes_are_allowed(tmp_path):
    text = edit('name = "t"\n', 'name = "t"\nnote = "top"\n')
    text = edit(ROOT, ROOT + 'note = "a level note"\n', text)
    text = edit("[level.compute]\n", '[level.compute]\nnote = "compute note"\n', text)
    assert load_machine(write(tmp_path, text)).name == "t"


# ---------------------------------------------------------------- bad machine files

BAD = {
    "zero memory": (
        edit("memory_bytes = 4096", "memory_bytes = 0"),
        "{f}: level[1].memory_bytes: error: 'memory_bytes' must be positive, got 0"),
    "negative memory": (
        edit("memory_bytes = 65536", "memory_bytes = -65536"),
        "{f}: level[0].memory_bytes: error: 'memory_bytes' must be positive, got -65536"),
    "negative bandwidth": (
        edit("memory_bandwidth = 64", "memory_bandwidth = -1.5"),
        "{f}: level[0].memory_bandwidth: error: 'memory_bandwidth' must be positive, got -1.5"),
    "negative energy": (
        edit("mac_pj_per_op = 0.5", "mac_pj_per_op = -0.5"),
        "{f}: level[1].compute.mac_pj_per_op: error: 'mac_pj_per_op' must not be negative, "
        "got -0.5"),
    "negative latency": (
        edit("link_latency = 10\n", "link_latency = -1\n"),
        "{f}: level[1].link_latency: error: 'link_latency' must not be negative, got -1"),
    "zero compute throughput": (
        edit("compare_ops_per_cycle = 8", "compare_ops_per_cycle = 0"),
        "{f}: level[1].compute.compare_ops_per_cycle: error: 'compare_ops_per_cycle' must be "
        "positive, got 0"),
    "fanout 0": (
        edit("fanout = 4", "fanout = 0"),
        "{f}: level[0].fanout: error: 'fanout' must be positive, got 0"),
    "fanout missing on a non-leaf level": (
        edit("fanout = 4\n", ""),
        "{f}: level[0].fanout: error: missing key 'fanout' (an integer)"),
    "fanout on the leaf": (
        edit(LEAF, LEAF + "fanout = 2\n"),
        "{f}: level[1].fanout: error: the leaf level (the last) has no children: "
        "remove 'fanout'"),
    "missing level key": (
        edit("link_latency = 10\n", ""),
        "{f}: level[1].link_latency: error: missing key 'link_latency' (an integer)"),
    "missing compute key": (
        edit("elementwise_pj_per_op = 1.0\n", ""),
        "{f}: level[1].compute.elementwise_pj_per_op: error: missing key "
        "'elementwise_pj_per_op' (a number)"),
    "missing name": (
        edit('name = "t"\n', ""),
        "{f}: name: error: missing key 'name' (a string)"),
    "missing frequency": (
        edit("frequency_hz = 1.0e9\n", ""),
        "{f}: frequency_hz: error: missing key 'frequency_hz' (a number)"),
    "unknown optional-looking key with hint": (
        edit(LEAF, LEAF + "brodcast = false\n"),
        "{f}: level[1].brodcast: error: unknown key 'brodcast'\n"
        "    hint: did you mean 'broadcast'?"),
    "unknown top-level key without hint": (
        edit('name = "t"\n', 'name = "t"\ncolour = "red"\n'),
        "{f}: colour: error: unknown key 'colour'"),
    "misspelt required key": (
        edit("decode_cycles = 4", "decode_cycle = 4"),
        "{f}: level[0].decode_cycle: error: unknown key 'decode_cycle'\n"
        "    hint: did you mean 'decode_cycles'?\n"
        "{f}: level[0].decode_cycles: error: missing key 'decode_cycles' (an integer)\n"
        "2 errors found"),
    "string for a number": (
        edit("memory_bandwidth = 32", 'memory_bandwidth = "32"'),
        "{f}: level[1].memory_bandwidth: error: 'memory_bandwidth' must be a number, got '32'"),
    "boolean for an int": (
        edit("decode_cycles = 2", "decode_cycles = true"),
        "{f}: level[1].decode_cycles: error: 'decode_cycles' must be an integer, got True"),
    "float for an int": (
        edit("fanout = 4", "fanout = 2.5"),
        "{f}: level[0].fanout: error: 'fanout' must be an integer, got 2.5"),
    "boolean for a number": (
        edit("mac_ops_per_cycle = 32", "mac_ops_per_cycle = false"),
        "{f}: level[1].compute.mac_ops_per_cycle: error: 'mac_ops_per_cycle' must be a number, "
        "got False"),
    "number for a boolean": (
        edit(LEAF, LEAF + "broadcast = 1\n"),
        "{f}: level[1].broadcast: error: 'broadcast' must be true or false, got 1"),
    "zero buffering": (
        edit(LEAF, LEAF + "buffering = 0\n"),
        "{f}: level[1].buffering: error: 'buffering' must be positive, got 0"),
    "negative buffering": (
        edit(ROOT, ROOT + "buffering = -1\n"),
        "{f}: level[0].buffering: error: 'buffering' must be positive, got -1"),
    "float for buffering": (
        edit(LEAF, LEAF + "buffering = 1.5\n"),
        "{f}: level[1].buffering: error: 'buffering' must be an integer, got 1.5"),
    "boolean for buffering": (
        edit(LEAF, LEAF + "buffering = true\n"),
        "{f}: level[1].buffering: error: 'buffering' must be an integer, got True"),
    "string for buffering": (
        edit(ROOT, ROOT + 'buffering = "double"\n'),
        "{f}: level[0].buffering: error: 'buffering' must be an integer, got 'double'"),
    "misspelt buffering": (
        edit(LEAF, LEAF + "bufering = 3\n"),
        "{f}: level[1].bufering: error: unknown key 'bufering'\n"
        "    hint: did you mean 'buffering'?"),
    "infinite number": (
        edit("link_bandwidth = 16\nlink_latency = 100", "link_bandwidth = inf\nlink_latency = 100"),
        "{f}: level[0].link_bandwidth: error: 'link_bandwidth' must be a number, got inf"),
    "zero frequency": (
        edit("frequency_hz = 1.0e9", "frequency_hz = 0"),
        "{f}: frequency_hz: error: 'frequency_hz' must be a positive number, got 0"),
    "string frequency": (
        edit("frequency_hz = 1.0e9", 'frequency_hz = "1 GHz"'),
        "{f}: frequency_hz: error: 'frequency_hz' must be a positive number, got '1 GHz'"),
    "name not a word": (
        edit('name = "t"', 'name = "my machine"'),
        "{f}: name: error: 'name' must be a word (letters, digits, . + - _), got 'my machine'"),
    "missing compute on the leaf": (
        BASE.split("[level.compute]")[0],
        "{f}: level[1].compute: error: the leaf level needs a [level.compute] table"),
    "compute not a table": (
        edit("static_watts = 0.05\n", "static_watts = 0.05\ncompute = 5\n",
             BASE.split("[level.compute]")[0]),
        "{f}: level[1].compute: error: the leaf level needs a [level.compute] table"),
    "compute on a non-leaf level": (
        edit("static_watts = 0.5\n",
             "static_watts = 0.5\n[level.compute]\nmac_ops_per_cycle = 1\n"),
        "{f}: level[0].compute: error: only the leaf level (the last) computes: "
        "remove its [level.compute] table"),
    "one level": (
        BASE.split(LEAF)[0],
        "{f}: level: error: a machine needs at least two [[level]] tables (a root and a leaf)"),
    "one level, a leaf": (
        'name = "t"\nfrequency_hz = 1.0e9\n' + LEAF + BASE.split(LEAF)[1],
        "{f}: level: error: a machine needs at least two [[level]] tables (a root and a leaf)"),
    "no levels": (
        'name = "t"\nfrequency_hz = 1.0e9\n',
        "{f}: level: error: a machine needs at least two [[level]] tables (a root and a leaf)"),
    "levels not tables": (
        'name = "t"\nfrequency_hz = 1.0e9\nlevel = [1, 2]\n',
        "{f}: level[0]: error: each level must be a table\n"
        "{f}: level[1]: error: each level must be a table\n"
        "2 errors found"),
    "invalid TOML: bad statement": (
        edit("link_latency = 100", "link_latency = 100 cycles"),
        "{f}:11:20: error: invalid TOML: Expected newline or end of document after a statement"),
    "invalid TOML: missing value": (
        edit("frequency_hz = 1.0e9", "frequency_hz ="),
        "{f}:3:15: error: invalid TOML: Invalid value"),
    "invalid TOML: duplicate key": (
        edit("fanout = 4\n", "fanout = 4\nfanout = 8\n"),
        "{f}:8:11: error: invalid TOML: Cannot overwrite a value"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_machine_file(tmp_path, case):
    text, message = BAD[case]
    expect(tmp_path, text, message)


def test_error_location_is_the_key_path_or_the_file_position(tmp_path):
    err = error_of(tmp_path, edit("fanout = 4", "fanout = 0"))
    assert type(err) is UserError
    assert err.where == f"{tmp_path / 'm.toml'}: level[0].fanout"
    assert err.message == "'fanout' must be positive, got 0"
    err = error_of(tmp_path, edit("frequency_hz = 1.0e9", "frequency_hz ="))
    assert err.where == f"{tmp_path / 'm.toml'}:3:15"


def test_every_problem_is_reported_at_once(tmp_path):
    text = BASE
    text = edit('name = "t"', 'name = "bad name"', text)
    text = edit("frequency_hz = 1.0e9", "frequency_hz = -1", text)
    text = edit("fanout = 4", "fanout = 0", text)
    text = edit("memory_bandwidth = 64", 'memory_bandwidth = "fast"', text)
    text = edit(LEAF, LEAF + "fanout = 2\nlink_bandwith = 16\n", text)
    text = edit("memory_bytes = 4096", "memory_bytes = 0", text)
    text = edit("mac_pj_per_op = 0.5\n", "", text)
    err = error_of(tmp_path, text)
    assert isinstance(err, ErrorGroup)
    f = tmp_path / "m.toml"
    assert [(e.where, e.message) for e in err.errors] == [
        (f"{f}: name", "'name' must be a word (letters, digits, . + - _), got 'bad name'"),
        (f"{f}: frequency_hz", "'frequency_hz' must be a positive number, got -1"),
        (f"{f}: level[0].fanout", "'fanout' must be positive, got 0"),
        (f"{f}: level[0].memory_bandwidth", "'memory_bandwidth' must be a number, got 'fast'"),
        (f"{f}: level[1].fanout", "the leaf level (the last) has no children: remove 'fanout'"),
        (f"{f}: level[1].compute.mac_pj_per_op", "missing key 'mac_pj_per_op' (a number)"),
        (f"{f}: level[1].link_bandwith", "unknown key 'link_bandwith'"),
        (f"{f}: level[1].memory_bytes", "'memory_bytes' must be positive, got 0"),
    ]
    assert err.errors[6].hint == "did you mean 'link_bandwidth'?"
    assert err.message == "8 errors"
    assert err.format() == "\n".join([
        f"{f}: name: error: 'name' must be a word (letters, digits, . + - _), got 'bad name'",
        f"{f}: frequency_hz: error: 'frequency_hz' must be a positive number, got -1",
        f"{f}: level[0].fanout: error: 'fanout' must be positive, got 0",
        f"{f}: level[0].memory_bandwidth: error: 'memory_bandwidth' must be a number, got 'fast'",
        f"{f}: level[1].fanout: error: the leaf level (the last) has no children: remove 'fanout'",
        f"{f}: level[1].compute.mac_pj_per_op: error: missing key 'mac_pj_per_op' (a number)",
        f"{f}: level[1].link_bandwith: error: unknown key 'link_bandwith'",
        "    hint: did you mean 'link_bandwidth'?",
        f"{f}: level[1].memory_bytes: error: 'memory_bytes' must be positive, got 0",
        "8 errors found",
    ])
    assert str(err) == err.format()


def test_machine_from_dict_names_its_file():
    data = tomllib.loads(edit("fanout = 4", "fanout = -2"))
    with pytest.raises(UserError) as info:
        machine_from_dict(data)
    assert info.value.format() == "<machine>: level[0].fanout: error: 'fanout' must be positive, got -2"
    with pytest.raises(UserError) as info:
        machine_from_dict(data, "x.toml")
    assert info.value.format() == "x.toml: level[0].fanout: error: 'fanout' must be positive, got -2"


def test_missing_file(tmp_path):
    path = tmp_path / "absent.toml"
    with pytest.raises(UserError) as info:
        load_machine(path)
    assert info.value.format() == f"--machine: error: machine file not found: {path}"
    with pytest.raises(UserError) as info:
        preset(str(path))
    assert info.value.format() == f"--machine: error: machine file not found: {path}"


def test_undecodable_file(tmp_path):
    path = tmp_path / "m.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(UserError) as info:
        load_machine(path)
    assert info.value.format().startswith(f"--machine: error: cannot read machine file {path}: ")


@pytest.mark.parametrize("name, hint", [("tinny", "tiny"), ("f10", "f100"), ("F100", "f100")])
def test_unknown_preset_with_hint(name, hint):
    with pytest.raises(UserError) as info:
        preset(name)
    assert info.value.format() == (
        f"--machine: error: unknown machine '{name}' (presets: tiny, f1, f100, or a .toml file)\n"
        f"    hint: did you mean '{hint}'?")


def test_unknown_preset_without_hint():
    with pytest.raises(UserError) as info:
        preset("huge")
    assert info.value.format() == (
        "--machine: error: unknown machine 'huge' (presets: tiny, f1, f100, or a .toml file)")
    assert info.value.hint is None


def test_preset_by_path(tmp_path):
    path = write(tmp_path, BASE, "custom.toml")
    assert preset(str(path)) == load_machine(path)
    assert preset(str(path)).name == "t"


# ---------------------------------------------------------------- rescaled()

def test_rescaled_depth_and_fanout():
    f1 = preset("f1")
    m = f1.rescaled(4, 32)
    assert m.depth == 4 and len(m.levels) == 5
    assert m.fanouts == (32, 32, 32, 32)
    assert m.leaves == 32 ** 4
    assert [m.nodes_at(i) for i in range(5)] == [1, 32, 32 ** 2, 32 ** 3, 32 ** 4]
    assert m.peak_ops_per_second == 32 ** 4 * 2048 * 1.0e9
    assert m.name == "f1-d4f32"


def test_rescaled_tuple_fanouts():
    m = preset("f1").rescaled(3, (3, 5, 7))
    assert m.fanouts == (3, 5, 7)
    assert m.leaves == 105
    assert [m.nodes_at(i) for i in range(4)] == [1, 3, 15, 105]
    assert m.name == "f1-d3f3x5x7"
    assert preset("f1").rescaled(2, [2, 3]).fanouts == (2, 3)


def test_rescaled_repeats_the_middle_levels_and_keeps_root_and_leaf():
    f100 = preset("f100")
    server, chip, cluster, core = f100.levels
    m = f100.rescaled(5, 2)
    assert [lv.name for lv in m.levels] == ["server", "chip", "cluster", "cluster", "cluster",
                                           "core"]
    # the server's memory is distributed over its chips: two chips' shares of 24 GiB and 256 B/cycle
    assert m.levels == (dataclasses.replace(server, fanout=2, memory_bytes=2 * 24 * 2**30,
                                            memory_bandwidth=2 * 256.0),
                        dataclasses.replace(chip, fanout=2),
                        *[dataclasses.replace(cluster, fanout=2)] * 3, core)
    assert m.compute == f100.compute
    assert m.frequency_hz == f100.frequency_hz and m.description == f100.description
    # shallower than the template: the first middle levels are kept
    m = f100.rescaled(2, 4)
    assert m.levels == (dataclasses.replace(server, fanout=4, memory_bytes=4 * 24 * 2**30,
                                            memory_bandwidth=4 * 256.0),
                        dataclasses.replace(chip, fanout=4), core)
    # depth 1: root and leaf only
    m = f100.rescaled(1, 16)   # the server's memory now lies in the cores' scratchpads
    assert m.levels == (dataclasses.replace(server, fanout=16, memory_bytes=16 * 393_216,
                                            memory_bandwidth=16 * 64.0, memory_pj_per_byte=1.5),
                        dataclasses.replace(core, memory_bytes=131_072, memory_bandwidth=192.0,
                                            physical_memory=(524_288, 256))) and m.leaves == 16


def test_rescaled_without_middle_levels_repeats_the_root():
    tiny = preset("tiny")
    root, leaf = tiny.levels
    m = tiny.rescaled(3, 2)
    assert m.levels == (*[dataclasses.replace(root, fanout=2)] * 3, leaf)
    assert m.leaves == 8
    # static power counts every node: 1 + 2 + 4 roots-alike and 8 leaves
    assert m.static_watts == pytest.approx((1 + 2 + 4) * 0.5 + 8 * 0.05)


def test_rescaled_defaults():
    f1 = preset("f1")
    assert f1.rescaled().levels == f1.levels
    assert f1.rescaled().name == "f1-d2f4"
    m = f1.rescaled(fanout=8)          # same depth, new fan-out
    assert m.fanouts == (8, 8) and m.leaves == 64
    m = f1.rescaled(depth=4)           # new depth, the template's own fan-outs
    assert m.fanouts == (4, 4, 4, 4) and m.leaves == 256
    assert f1.rescaled(3, 2).static_watts == pytest.approx(12 + 2 * 1 + 4 * 1 + 8 * 0.5)


@pytest.mark.parametrize("args, message", [
    ((0, 4), "--depth: error: depth must be at least 1, got 0"),
    ((-1, None), "--depth: error: depth must be at least 1, got -1"),
    ((2, 0), "--fanout: error: fan-out must be a positive integer, got 0"),
    ((2, -3), "--fanout: error: fan-out must be a positive integer, got -3"),
    ((None, 0), "--fanout: error: fan-out must be a positive integer, got 0"),
    ((3, (3, 0, 7)), "--fanout: error: fan-out must be a positive integer, got 0"),
    ((3, (3, 5)), "--fanout: error: 2 fan-outs given for depth 3"),
    ((2, True), "--fanout: error: fan-out must be a positive integer, got True"),
    ((2, (2, 2.5)), "--fanout: error: fan-out must be a positive integer, got 2.5"),
])
def test_rescaled_invalid(args, message):
    with pytest.raises(UserError) as info:
        preset("f1").rescaled(*args)
    assert info.value.format() == message


def test_machines_are_frozen_and_hashable():
    m = preset("f1").rescaled(4, 32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.levels[0].fanout = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.compute.mac_ops_per_cycle = 1
    assert isinstance(m.levels, tuple)
    assert isinstance(hash(m), int)
    assert {m: 1}[preset("f1").rescaled(4, 32)] == 1


def test_equal_inputs_give_equal_machines():
    a = preset("f1").rescaled(4, 32)
    b = preset("f1").rescaled(4, 32)
    assert a == b and hash(a) == hash(b)
    assert preset("f1").rescaled(3, (3, 5, 7)) == preset("f1").rescaled(3, (3, 5, 7))
    assert preset("f1").rescaled(3, (2, 2, 2)).levels == preset("f1").rescaled(3, 2).levels
    assert len({preset(p) for p in PRESETS} | {preset(p) for p in PRESETS}) == len(PRESETS)
    assert preset("f1").rescaled(4, 32) != preset("f1").rescaled(4, 16)


def test_rescaled_leaves_the_template_alone():
    f1 = preset("f1")
    before = dataclasses.astuple(f1)
    f1.rescaled(5, 3)
    assert dataclasses.astuple(f1) == before


@pytest.mark.parametrize("name", PRESETS)
def test_peak_uses_the_fastest_op_class(name):
    m = preset(name)
    best = max(m.compute.ops_per_cycle(c) for c in OP_CLASSES)
    assert m.peak_ops_per_cycle == m.leaves * best
    assert math.isclose(m.peak_ops_per_second, m.peak_ops_per_cycle * m.frequency_hz)
