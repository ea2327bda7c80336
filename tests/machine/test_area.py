"""The area model (machine/area.py): hand-derived areas of small machines, scaling between process
nodes, the area keys of a machine file and their located errors, and the reports that carry it."""
import json
import math
import tomllib

import pytest

from machine import PRESETS, machine_from_dict, preset
from machine.area import machine_area
from isa.errors import UserError
from tests.cli.test_cli import assert_clean_failure, fractal

# A two-level machine at 7 nm (a tabulated node: no interpolation): a root with 2 MiB of SRAM and
# two leaves with 1 MiB each, 4 MAC cells, 4 vector lanes and 2 LFU lanes.
TWO = """\
name = "two"
frequency_hz = 2.0e9
process_nm = 7

[[level]]
name = "root"
fanout = 2
memory_bytes = 2_097_152
memory_bandwidth = 64
link_bandwidth = 16
link_latency = 100
decode_cycles = 4
lfu_ops_per_cycle = 4
memory_pj_per_byte = 20.0
link_pj_per_byte = 10.0
static_watts = 0.5

[[level]]
name = "leaf"
memory_bytes = 1_048_576
memory_bandwidth = 32
link_bandwidth = 8
link_latency = 10
decode_cycles = 2
lfu_ops_per_cycle = 2
memory_pj_per_byte = 1.0
link_pj_per_byte = 2.0
static_watts = 0.05

[level.compute]
mac_ops_per_cycle = 8
elementwise_ops_per_cycle = 4
compare_ops_per_cycle = 2
mac_pj_per_op = 0.5
elementwise_pj_per_op = 1.0
compare_pj_per_op = 0.5
"""

# The published figures, written out again (docs/machines.md, "Area"): logic density of NVIDIA's
# GF100 (40 nm), GK110 (28 nm), GP100 (16 nm) and GA100 (7 nm) dies, in transistors per um2 ...
D40, D28, D16, D7 = 3.0e9 / 529e6, 7.08e9 / 561e6, 15.3e9 / 610e6, 54.2e9 / 826e6
# ... TSMC's high-density SRAM cells, um2, and AMD's V-Cache die: 64 MiB in 41 mm2 at 7 nm
CELL16, CELL7 = 0.074, 0.027
SRAM7 = 41 / 64
# TPU v1's 8-bit MAC cell at 28 nm, um2, less Horowitz's 8-bit multiplier and 32-bit adder
# (282 + 137 um2 at 45 nm, placed at 40 nm), per register bit of its 48
TPU_CELL = 0.24 * 331e6 / 65536
REG28 = (TPU_CELL - 419 * D40 / D28) / 48
# a 16-bit MAC cell: 16-bit FP multiplier + 32-bit FP adder (1640 + 4184 um2 at 45 nm), 64 bits
CELL_F16_7 = 5824 * D40 / D7 + 64 * REG28 * D28 / D7


def test_two_level_area_by_hand():
    a = machine_area(machine_from_dict(tomllib.loads(TWO)))
    root, leaf = a.levels
    assert a.process_nm == 7.0
    # SRAM: the root's 2 MiB and the two leaves' 1 MiB each
    assert root.sram == pytest.approx(2 * SRAM7)
    assert leaf.sram == pytest.approx(2 * 1 * SRAM7)
    # leaf compute: 8 MAC ops/cycle = 4 cells per leaf; lanes: max(4, 2) vector + 2 LFU per leaf
    assert leaf.mac_array == pytest.approx(2 * 4 * CELL_F16_7 * 1e-6)
    assert leaf.vector == pytest.approx(2 * (4 + 2) * CELL_F16_7 * 1e-6)
    assert root.vector == pytest.approx(4 * CELL_F16_7 * 1e-6)
    assert root.mac_array == 0 and root.memory_phy == leaf.memory_phy == 0
    # on-die links (no DRAM anywhere): 4 register bits per bit of width, 16 and 2 x 8 bytes wide
    assert root.links == pytest.approx(16 * 8 * 4 * REG28 * D28 / D7 * 1e-6)
    assert leaf.links == pytest.approx(2 * 8 * 8 * 4 * REG28 * D28 / D7 * 1e-6)
    assert a.total == pytest.approx(root.total + leaf.total)
    assert a.total == pytest.approx(4 * SRAM7 + (8 + 16) * CELL_F16_7 * 1e-6
                                    + 32 * 8 * 4 * REG28 * D28 / D7 * 1e-6)


def test_tiny_area_by_hand():
    """`tiny` at the default 16 nm: SRAM scaled from 7 nm by TSMC's bit cells, logic by the
    GP100/GA100 densities; the root's 16 MiB and 8 LFU lanes, four leaves of 4 KiB with 16 MAC
    cells (32 ops/cycle), max(8, 8) vector + 4 LFU lanes, and 16-byte links throughout."""
    a = machine_area(preset("tiny"))
    root, leaf = a.levels
    sram16 = SRAM7 * CELL16 / CELL7
    cell16 = 5824 * D40 / D16 + 64 * REG28 * D28 / D16
    reg16 = REG28 * D28 / D16
    assert root.sram == pytest.approx(16 * sram16)
    assert leaf.sram == pytest.approx(4 * (4096 / 2**20) * sram16)
    assert root.vector == pytest.approx(8 * cell16 * 1e-6)
    assert leaf.mac_array == pytest.approx(4 * 16 * cell16 * 1e-6)
    assert leaf.vector == pytest.approx(4 * (8 + 4) * cell16 * 1e-6)
    assert root.links == pytest.approx(16 * 8 * 4 * reg16 * 1e-6)
    assert leaf.links == pytest.approx(4 * 16 * 8 * 4 * reg16 * 1e-6)
    assert a.total == pytest.approx(root.total + leaf.total)


def test_dram_memory_counts_its_phy_and_its_links_leave_the_die():
    text = TWO.replace("memory_bandwidth = 64\n", 'memory_bandwidth = 64\nmemory_technology = "hbm"\n')
    root, leaf = machine_area(machine_from_dict(tomllib.loads(text))).levels
    # 64 bytes/cycle at 2 GHz = 128 GB/s of HBM at 12 mm2 per 256 GB/s stack; no SRAM
    assert root.sram == 0 and root.memory_phy == pytest.approx(128 * 12 / 256)
    # the root holds DRAM, so it is a chip: its 32 GB/s link is off-chip, 0.5 mm2 per 3.125 GB/s
    assert root.links == pytest.approx(32 * 0.5 / 3.125)
    # the leaves are on its die
    assert leaf.links == pytest.approx(2 * 8 * 8 * 4 * REG28 * D28 / D7 * 1e-6)


def test_area_scales_with_the_process_node_as_stated():
    at7 = machine_area(machine_from_dict(tomllib.loads(TWO)))
    at16 = machine_area(machine_from_dict(tomllib.loads(TWO.replace("process_nm = 7", "process_nm = 16"))))
    for a, b in zip(at16.levels, at7.levels):
        assert a.sram / b.sram == pytest.approx(CELL16 / CELL7)         # SRAM: the bit cell
        assert a.vector / b.vector == pytest.approx(D7 / D16)           # logic: the density
        assert a.links / b.links == pytest.approx(D7 / D16)
    assert at16.levels[1].mac_array / at7.levels[1].mac_array == pytest.approx(D7 / D16)
    # between tabulated nodes, a power law: 10 nm lies between 12 nm (cell 0.074) and 7 nm
    at10 = machine_area(machine_from_dict(tomllib.loads(TWO.replace("process_nm = 7", "process_nm = 10"))))
    t = math.log(10 / 12) / math.log(7 / 12)
    assert at10.levels[0].sram == pytest.approx(2 * SRAM7 * 0.074 * (CELL7 / 0.074) ** t / CELL7)
    # a DRAM PHY does not scale
    hbm = TWO.replace("memory_bandwidth = 64\n", 'memory_bandwidth = 64\nmemory_technology = "hbm"\n')
    phys = [machine_area(machine_from_dict(tomllib.loads(hbm.replace("process_nm = 7", f"process_nm = {n}"))))
            .levels[0].memory_phy for n in (5, 16, 40)]
    assert phys[0] == phys[1] == phys[2] > 0


def test_more_leaves_more_area_and_the_default_node():
    tiny = preset("tiny")
    assert tiny.process_nm == 16.0                      # the documented default
    wide = tiny.rescaled(1, 8)
    assert machine_area(wide).total > machine_area(tiny).total
    assert machine_area(wide).levels[1].total == pytest.approx(2 * machine_area(tiny).levels[1].total)


def test_presets_load_with_their_nodes_and_memories():
    for name in PRESETS:
        m = preset(name)
        a = machine_area(m)
        assert m.process_nm == 16.0 and a.total > 0 and all(lv.total > 0 for lv in a.levels)
    assert preset("f1").levels[0].memory_technology == "ddr"
    assert preset("f100").levels[1].memory_technology == "hbm"
    # f100's server memory is its chips': only their PHYs count, none at the server
    server = machine_area(preset("f100")).levels[0]
    assert server.sram == server.memory_phy == 0


@pytest.mark.parametrize("snippet, key, message", [
    ("process_nm = 3", "process_nm", "'process_nm' must lie in the range 5 to 40 nm"),
    ("process_nm = 400", "process_nm", "'process_nm' must lie in the range 5 to 40 nm"),
    ('process_nm = "16"', "process_nm", "'process_nm' must be a number"),
    ("process_nm = -7", "process_nm", "'process_nm' must be positive"),
    ("process_nm = nan", "process_nm", "'process_nm' must be a number"),
])
def test_bad_process_node_is_a_located_error(snippet, key, message):
    with pytest.raises(UserError) as e:
        machine_from_dict(tomllib.loads(TWO.replace("process_nm = 7", snippet)), "m.toml")
    assert e.value.where == f"m.toml: {key}" and message in str(e.value)


def test_bad_memory_technology_is_a_located_error():
    with pytest.raises(UserError) as e:
        machine_from_dict(tomllib.loads(TWO.replace("memory_bandwidth = 32\n",
                                                    'memory_bandwidth = 32\nmemory_technology = "hmb"\n')),
                          "m.toml")
    assert e.value.where == "m.toml: level[1].memory_technology"
    assert "'memory_technology' must be one of 'sram', 'hbm', 'ddr'" in str(e.value)
    assert "hbm" in (e.value.hint or "")


def test_cli_bad_process_node_exits_2(tmp_path):
    (tmp_path / "m.toml").write_text(TWO.replace("process_nm = 7", "process_nm = 2"))
    res = fractal("run", "programs/mlp.fasm", "--machine", tmp_path / "m.toml", "--timing-only")
    assert_clean_failure(res, "m.toml: process_nm", "5 to 40 nm")


def test_run_and_machines_json_carry_the_area(tmp_path):
    (tmp_path / "m.toml").write_text(TWO)
    res = fractal("run", "programs/elementwise.fasm", "--machine", tmp_path / "m.toml",
                  "--timing-only", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    a = machine_area(machine_from_dict(tomllib.loads(TWO)))
    assert report["process_nm"] == 7.0
    assert report["area_mm2"] == pytest.approx(a.total)
    assert [lv["area_mm2"] for lv in report["levels"]] == pytest.approx([lv.total for lv in a.levels])
    rows = {r["name"]: r for r in json.loads(fractal("machines", "--json").stdout)}
    assert rows["f1"]["area_mm2"] == pytest.approx(machine_area(preset("f1")).total)
    assert rows["f1"]["area_mm2"] == pytest.approx(sum(rows["f1"]["area_mm2_per_level"]))
    assert len(rows["f100"]["area_breakdown_mm2_per_level"]) == 4


def test_a_distributed_memory_states_no_technology():
    """A distributed level's memory is its children's: it has no technology of its own."""
    text = TWO.replace("memory_bytes = 2_097_152\nmemory_bandwidth = 64\n",
                       'memory = "distributed"\nmemory_share = 0.5\nbandwidth_share = 0.5\n'
                       'memory_technology = "hbm"\n').replace("memory_pj_per_byte = 20.0\n", "")
    with pytest.raises(UserError) as e:
        machine_from_dict(tomllib.loads(text), "m.toml")
    assert e.value.where == "m.toml: level[0].memory_technology"
    m = machine_from_dict(tomllib.loads(text.replace('memory_technology = "hbm"\n', "")), "m.toml")
    root, leaf = machine_area(m).levels
    # the root's SRAM is the leaves' (counted at the leaves, whole): 2 x 1 MiB, none at the root
    assert root.sram == 0 and leaf.sram == pytest.approx(2 * SRAM7)
