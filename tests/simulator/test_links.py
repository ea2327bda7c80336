"""Links and memory ports are shared resources: no transfer goes faster than the bandwidth of
every link and port it crosses, a full-duplex link carries loads and write-backs at once and a
half-duplex one in turn, and every run checks that no port, link or LFU carried more than its
capacity. Reports give each level's busy fractions and its energy by class."""
from dataclasses import replace

import pytest

import fractal
from isa import parse_program
from isa.errors import InternalError
from machine import preset
from compiler.pipeline import NodePipeline

N = 65_536
ADD = (f"tensor x : f32[{N}] input\ntensor y : f32[{N}] input\ntensor z : f32[{N}] output\n"
       "add z, x, y\n")


def tiny_with_leaf_link(bandwidth, duplex="full"):
    m = preset("tiny")
    levels = list(m.levels)
    levels[1] = replace(levels[1], link_bandwidth=bandwidth, duplex=duplex)
    return replace(m, levels=tuple(levels))


def run_add(machine):
    return fractal.run(parse_program(ADD, "add.fasm"), machine, functional=False)


def test_a_slow_leaf_link_bounds_an_add_from_below():
    """z = x + y on tiny's 4 leaves, each leaf link at 1 byte/cycle. Whatever the split, the 4
    leaves together receive both inputs, 2 x 65,536 x 4 = 524,288 bytes, so the busiest link
    carries at least a quarter of them inward: 131,072 bytes, 131,072 cycles at 1 byte/cycle."""
    report = run_add(tiny_with_leaf_link(1))
    assert report.cycles >= 2 * N * 4 // 4
    # and the link, not the port or the compute, is what the leaves' level is busy with
    busy = report.levels[1]["busy"]
    assert busy["link_in"] > 0.9 and busy["link_in"] >= busy["port"]


def test_a_half_duplex_link_carries_loads_and_write_backs_in_turn():
    """Half duplex: the leaves' links also carry the result back, 65,536 x 4 / 4 = 65,536 bytes
    per link, after or between the loads: at least 131,072 + 65,536 cycles."""
    full = run_add(tiny_with_leaf_link(1))
    half = run_add(tiny_with_leaf_link(1, "half"))
    assert half.cycles >= (2 * N * 4 + N * 4) // 4
    assert half.cycles > full.cycles


def test_an_oversubscribed_link_fires_the_capacity_invariant(monkeypatch):
    """A fault injected into the engine: transfers that hold neither the link nor the port,
    and take only the port's time, let a 1 byte/cycle link carry more than it can."""
    def transfer(self, link, port_cycles, link_cycles, latency, began=None):
        start = self.env.now
        if began is not None:
            began.succeed((start, start))
        yield self.env.timeout(port_cycles + latency)
        return start
    monkeypatch.setattr(NodePipeline, "_transfer", transfer)
    with pytest.raises(InternalError, match="carries no more than its bandwidth") as e:
        run_add(tiny_with_leaf_link(1))
    assert "level 0 (root)" in str(e.value) and "children's links in" in str(e.value)


def test_levels_report_busy_fractions_and_energy_by_class():
    report = run_add(preset("tiny"))
    for lv in report.levels:
        assert set(lv["busy"]) == {"port", "link_in", "link_out", "lfu", "compute"}
        assert all(0 <= f <= 1 for f in lv["busy"].values())
    # the leaves compute and the root does not; the link into the leaves carries every byte the
    # leaves load and store, at the leaf level's link_pj_per_byte (2 pJ on tiny); the root's
    # static energy is its 0.5 W over the run, the leaves' 4 x 0.05 W
    assert report.levels[0]["energy_joules"]["compute"] == 0
    leaf = report.levels[1]
    assert leaf["energy_joules"]["link"] == pytest.approx(
        (leaf["bytes_in"] + leaf["bytes_out"]) * 2e-12, rel=1e-12)
    assert report.levels[0]["energy_joules"]["static"] == pytest.approx(0.5 * report.seconds, rel=1e-12)
    assert leaf["energy_joules"]["static"] == pytest.approx(4 * 0.05 * report.seconds, rel=1e-12)
    assert report.levels[1]["busy"]["compute"] > 0


def test_the_invariant_fires_below_the_root_too(monkeypatch):
    """The same fault on a three-level machine: the broken capacity is found in a node whose
    duration the symmetric mode simulates inside its parent's, and reported as such."""
    def transfer(self, link, port_cycles, link_cycles, latency, began=None):
        start = self.env.now
        if began is not None:
            began.succeed((start, start))
        yield self.env.timeout(port_cycles + latency)
        return start
    monkeypatch.setattr(NodePipeline, "_transfer", transfer)
    m = preset("tiny").rescaled(2, (2, 2))
    levels = list(m.levels)
    levels[2] = replace(levels[2], link_bandwidth=1)
    with pytest.raises(InternalError, match="carries no more than its bandwidth") as e:
        run_add(replace(m, levels=tuple(levels)))
    assert "level 1" in str(e.value)
