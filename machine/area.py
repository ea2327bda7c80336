"""The area model: the silicon area of each level of a machine, from its memories, leaf compute,
local functional units and links, at the machine's process node (docs/machines.md, "Area").

A level's area is that of all its nodes together, in mm2, split into components:

- `sram`: a node's own on-die memory, `memory_bytes` at SRAM_MM2_PER_MIB;
- `memory_phy`: for a memory in DRAM (`memory_technology = "hbm"` or `"ddr"`), the PHY and
  controller on the node's die, by its bandwidth; the DRAM dies themselves are not counted
  (GPU die areas count no memory stacks either);
- `mac_array`: the leaf's multiply-accumulators, `mac_ops_per_cycle / 2` MAC cells;
- `vector`: the leaf's element-wise and compare lanes and every node's LFU lanes, one lane per
  op per cycle, each the size of a 16-bit MAC cell;
- `links`: the link from each node to its parent: an on-die network port, or, from a node that
  holds (or lies above) a DRAM memory and so is a chip or card of its own, off-chip transceivers.

Every constant carries its source; "ours" marks our own estimate with its reasoning. Logic and
SRAM are given at one published node each and scaled to the machine's node by two published
tables (logic: transistor density of NVIDIA's flagship GPU dies; SRAM: TSMC's high-density
bit cell), interpolated as a power law between tabulated nodes; PHYs and off-chip transceivers do
not scale. Like the rest of the machine package, the module imports nothing of ours but the
error types.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from isa.errors import InternalError

__all__ = ["LevelArea", "MachineArea", "machine_area", "logic_scale", "sram_scale",
           "sram_mm2_per_mib", "mac_um2", "PROCESS_NM_RANGE", "DEFAULT_PROCESS_NM", "COMPONENTS"]

#: the process node a machine file that states none is built in: TSMC 16 nm, the node of
#: Cambricon's own 2018 server chip (MLU-100) and of the GTX 1080 Ti the f1 preset is compared to
DEFAULT_PROCESS_NM = 16.0

# ---------------------------------------------------------------- scaling between nodes

#: logic density, million transistors per mm2, of NVIDIA's flagship data-centre GPU die at each
#: node (the vendor's transistor count over its die area): the same kind of chip, logic and SRAM
#: mixed, at every node, and the kind the fractal presets are compared to
LOGIC_MTR_PER_MM2 = {
    40: 3.0e3 / 529,    # GF100 (Fermi), TSMC 40 nm: 3.0 billion transistors, 529 mm2
                        # (NVIDIA Fermi compute architecture whitepaper, 2009; die from public GPU databases)
    28: 7.08e3 / 561,   # GK110 (Kepler), TSMC 28 nm: 7.08 billion, 561 mm2 (NVIDIA Kepler GK110 whitepaper,
                        # 2012, rounds to 7.1 billion; count and die from public GPU databases)
    16: 15.3e3 / 610,   # GP100 (Pascal), TSMC 16 nm FinFET: 15.3 billion, 610 mm2 (NVIDIA Tesla P100 whitepaper, 2016)
    12: 21.1e3 / 815,   # GV100 (Volta), TSMC 12 nm FFN: 21.1 billion, 815 mm2 (NVIDIA Tesla V100 whitepaper, 2017)
    7: 54.2e3 / 826,    # GA100 (Ampere), TSMC N7: 54.2 billion, 826 mm2 (NVIDIA A100 Tensor Core GPU whitepaper, 2020)
    5: 80.0e3 / 814,    # GH100 (Hopper), TSMC 4N, an N5-family node: 80 billion, 814 mm2 (NVIDIA H100 whitepaper, 2022)
}

#: TSMC's high-density 6T SRAM bit cell, um2, at each node
SRAM_BITCELL_UM2 = {
    40: 0.127 / 0.52,   # derived: WikiChip, "28 nm lithography process": TSMC 28 nm's cell is 0.52x of 40 nm's
    28: 0.127,          # WikiChip, "28 nm lithography process": TSMC 28 nm high-density cell
    16: 0.074,          # WikiChip, "16 nm lithography process": TSMC 16FF+ high-density cell (16FF's was
                        # 0.07 um2: Chen et al., "A 16 nm 128 Mb SRAM in HKMG FinFET", JSSC 50(1), 2015)
    12: 0.074,          # WikiChip lists 12FFC/12FFN as 16 nm-family processes with 16FF+'s cell
    7: 0.027,           # TSMC N7: Wu et al., "A 7nm CMOS platform technology", IEDM 2016
    5: 0.021,           # TSMC N5: Yeap et al., "5nm CMOS production technology platform", IEDM 2019
}

#: the nodes the model accepts: the span of both tables (it does not extrapolate)
PROCESS_NM_RANGE = (min(LOGIC_MTR_PER_MM2), max(LOGIC_MTR_PER_MM2))


def _interpolate(table: dict, nm: float) -> float:
    """The table's value at `nm`: exact at a tabulated node, a power law in the node between the
    two tabulated nodes around it (straight on a log-log plot)."""
    lo, hi = PROCESS_NM_RANGE
    if not lo <= nm <= hi:          # machine files are checked against the same range
        raise InternalError("the area model's process node lies in its tables' span",
                            "machine/area.py", f"{nm} nm, outside {lo} to {hi} nm")
    nodes = sorted(table)
    if nm in table:
        return table[nm]
    a = max(n for n in nodes if n < nm)
    b = min(n for n in nodes if n > nm)
    t = math.log(nm / a) / math.log(b / a)
    return table[a] * (table[b] / table[a]) ** t


def logic_scale(from_nm: float, to_nm: float) -> float:
    """How much larger the same logic is at `to_nm` than at `from_nm`."""
    return _interpolate(LOGIC_MTR_PER_MM2, from_nm) / _interpolate(LOGIC_MTR_PER_MM2, to_nm)


def sram_scale(from_nm: float, to_nm: float) -> float:
    """How much larger the same SRAM is at `to_nm` than at `from_nm`."""
    return _interpolate(SRAM_BITCELL_UM2, to_nm) / _interpolate(SRAM_BITCELL_UM2, from_nm)


# ---------------------------------------------------------------- SRAM

#: mm2 per MiB of SRAM at TSMC N7, macros with their periphery (decoders, sense amplifiers,
#: redundancy) as built: AMD's 3D V-Cache die holds 64 MiB of L3 in 41 mm2 at TSMC N7 (Wuu et al.,
#: "3D V-Cache: the implementation of a hybrid-bonded 64MB stacked cache for a 7nm x86-64 CPU",
#: ISSCC 2022). Its bit cells alone would take 64 x 2^23 x 0.027 um2 = 14.5 mm2:
#: the periphery, through-silicon vias and control make up the rest (35% array efficiency)
SRAM_MM2_PER_MIB_7NM = 41.0 / 64


def sram_mm2_per_mib(nm: float) -> float:
    return SRAM_MM2_PER_MIB_7NM * sram_scale(7, nm)


# ---------------------------------------------------------------- MAC cells and lanes

#: arithmetic area, um2 at 45 nm, of one multiplier and one accumulating adder per data type
#: (Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014: 8b mult 282, 32b add 137,
#: 32b mult 3495, 16b FP mult 1640, 32b FP add 4184, 32b FP mult 7700), with the register bits a
#: cell of a weight-stationary array holds (weight, passing operand, partial sum). Integer types
#: accumulate in 32 bits and 16-bit floats in 32-bit floats, as TPU v1 and tensor cores do; bf16
#: takes f16's figures (ours: its 8-bit multiplier is smaller, so this over-counts a little)
MAC_ARITHMETIC_UM2_45NM = {"i8": 282 + 137, "i32": 3495 + 137, "f16": 1640 + 4184,
                           "bf16": 1640 + 4184, "f32": 7700 + 4184}
MAC_REGISTER_BITS = {"i8": 8 + 8 + 32, "i32": 32 + 32 + 32, "f16": 16 + 16 + 32,
                     "bf16": 16 + 16 + 32, "f32": 32 + 32 + 32}
#: Horowitz's 45 nm figures are placed at the table's 40 nm point (TSMC's 40 nm is the half-node
#: shrink of 45 nm; ours: this under-states them by at most the half-node's ~20%)
HOROWITZ_NM = 40

#: TPU v1 (Jouppi et al., "In-datacenter performance analysis of a tensor processing unit",
#: ISCA 2017, the die's floor plan and its table of servers): the 256 x 256 8-bit matrix unit takes 24% of a die of at most
#: 331 mm2 at 28 nm: 1,212 um2 per MAC cell as built, arithmetic, registers and wiring together
TPU_MAC_CELL_UM2_28NM = 0.24 * 331e6 / 65536
#: what the TPU's cell holds beyond Horowitz's arithmetic, per register bit of an 8-bit cell
#: (ours: registers and wiring grow with the bits a cell holds, the arithmetic with its type)
REGISTER_UM2_PER_BIT_28NM = ((TPU_MAC_CELL_UM2_28NM - MAC_ARITHMETIC_UM2_45NM["i8"]
                              * logic_scale(HOROWITZ_NM, 28)) / MAC_REGISTER_BITS["i8"])

#: the type of the MAC cells and of vector and LFU lanes: the presets' arrays are 16-bit (machine
#: files state no MAC type yet)
MAC_DTYPE = "f16"


def mac_um2(nm: float, dtype: str = MAC_DTYPE) -> float:
    """One MAC cell of an array at `nm`: arithmetic plus the registers and wiring of its bits."""
    return (MAC_ARITHMETIC_UM2_45NM[dtype] * logic_scale(HOROWITZ_NM, nm)
            + MAC_REGISTER_BITS[dtype] * REGISTER_UM2_PER_BIT_28NM * logic_scale(28, nm))


# ---------------------------------------------------------------- memory PHYs and links

#: PHY and controller area per GB/s of a DRAM memory port, mm2; they do not scale with the node
#: (ours: a PHY's size is set by its bump field and drivers, not by its transistors)
MEMORY_PHY_MM2_PER_GBPS = {
    # ours: 12 mm2 per HBM2 stack of 256 GB/s (JESD235A: 1024 pins at 2 Gb/s). The PHY lies under
    # the stack's ~1,900 signal microbumps at 55 um pitch (JEDEC HBM2 ballout), about 6 mm2;
    # the controller of its 8 channels (queues, refresh, ECC) about as much again
    "hbm": 12.0 / 256,
    # ours: 4 mm2 per 32-bit GDDR5/DDR channel at 8 Gb/s per pin, 32 GB/s: a PHY along ~2 mm of die
    # edge with its pads (~2.5 mm2) and a controller (~1.5 mm2)
    "ddr": 4.0 / 32,
}
MEMORY_TECHNOLOGIES = ("sram", *MEMORY_PHY_MM2_PER_GBPS)

#: off-chip link transceivers, mm2 per GB/s each way; they do not scale with the node. Ours: a
#: 25 Gb/s transceiver (NVLink 2.0's signalling rate, NVIDIA Tesla V100 whitepaper, 2017), transmit
#: and receive with its share of clocking, takes about 0.5 mm2 in a 16 nm-class process; it
#: carries 3.125 GB/s each way
OFFCHIP_LINK_MM2_PER_GBPS = 0.5 / 3.125

#: an on-die link: register bits per bit of its width (ours: a two-entry buffer at each end, the
#: least a credit-based network port holds); its wires run over logic in the upper metal layers
#: and take no area of their own
NOC_REGISTER_BITS_PER_LINK_BIT = 4


# ---------------------------------------------------------------- the model

COMPONENTS = ("sram", "memory_phy", "mac_array", "vector", "links")


@dataclass(frozen=True)
class LevelArea:
    """The area of all the nodes of one level, mm2, by component."""
    name: str
    nodes: int
    sram: float
    memory_phy: float
    mac_array: float
    vector: float
    links: float

    @property
    def total(self) -> float:
        return sum(getattr(self, c) for c in COMPONENTS)

    def breakdown(self) -> dict:
        return {c: getattr(self, c) for c in COMPONENTS}


@dataclass(frozen=True)
class MachineArea:
    process_nm: float
    levels: tuple[LevelArea, ...]

    @property
    def total(self) -> float:
        return sum(lv.total for lv in self.levels)

    def to_json(self) -> dict:
        """The keys a machine's listing carries (`fractal machines --json`)."""
        return {"process_nm": self.process_nm, "area_mm2": self.total,
                "area_mm2_per_level": [lv.total for lv in self.levels],
                "area_breakdown_mm2_per_level": [lv.breakdown() for lv in self.levels]}


def machine_area(m) -> MachineArea:
    """The area of every level of machine `m` (a `machine.Machine`) at its process node."""
    nm = m.process_nm
    cell = mac_um2(nm) * 1e-6                   # a MAC cell, and a vector or LFU lane
    register = REGISTER_UM2_PER_BIT_28NM * logic_scale(28, nm) * 1e-6
    gbps = m.frequency_hz / 1e9                 # GB/s per byte/cycle
    # a level holding a DRAM memory is a chip or card of its own: its link, and every link
    # above it, leaves the die
    dram = [i for i, lv in enumerate(m.levels) if lv.memory_technology != "sram"
            and lv.memory == "local"]
    offchip_to = max(dram, default=-1)
    out = []
    for i, lv in enumerate(m.levels):
        nodes = m.nodes_at(i)
        own_bytes, own_bandwidth = lv.physical_memory or (lv.memory_bytes, lv.memory_bandwidth)
        sram = phy = 0.0
        if lv.memory == "local":                # a distributed memory is its children's
            if lv.memory_technology == "sram":
                sram = own_bytes / 2**20 * sram_mm2_per_mib(nm)
            else:
                phy = own_bandwidth * gbps * MEMORY_PHY_MM2_PER_GBPS[lv.memory_technology]
        leaf = i == m.depth
        c = m.compute
        macs = c.mac_ops_per_cycle / 2 if leaf else 0.0
        lanes = lv.lfu_ops_per_cycle + (max(c.elementwise_ops_per_cycle, c.compare_ops_per_cycle)
                                        if leaf else 0.0)
        if i <= offchip_to:
            link = lv.link_bandwidth * gbps * OFFCHIP_LINK_MM2_PER_GBPS
        else:
            link = lv.link_bandwidth * 8 * NOC_REGISTER_BITS_PER_LINK_BIT * register
        out.append(LevelArea(lv.name, nodes, sram=nodes * sram, memory_phy=nodes * phy,
                             mac_array=nodes * macs * cell, vector=nodes * lanes * cell,
                             links=nodes * link))
    return MachineArea(nm, tuple(out))
