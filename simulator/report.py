"""The report of a simulated run, its text and JSON forms, and the invariants checked on it."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np

from compiler.tables import frame, html_table
from isa.errors import InternalError
from isa.reference import nonfinite, nonfinite_note

__all__ = ["InstructionReport", "Report", "check_report"]


@dataclass(frozen=True)
class InstructionReport:
    line: int | None
    text: str
    cycles: int
    ops: int
    utilization: float
    bottleneck: str             # what the run spent its time on: compute, bandwidth, latency
                                # or reduction (the busiest stage, down the slowest children)
    energy_joules: float
    estimated_cycles: float = 0.0   # the compiler's estimate of the chosen plan
    bound: str = ""                 # the floor that sets the attainable bound: compute, a level, latency
    bound_seconds: float = 0.0      # the attainable bound: no plan on this machine runs faster
    fraction_of_bound: float = 0.0  # bound_seconds / the simulated seconds: at most 1


@dataclass
class Report:
    program: str
    machine: str
    mode: str                   # symmetric or exact
    functional: bool
    cycles: int
    seconds: float
    ops: int
    peak_ops_per_second: float
    utilization: float
    energy_joules: float
    energy_breakdown: dict
    leaves: int
    levels: list                # per level, root first: name, nodes, instructions, bytes, reduction ops
    instructions: list          # InstructionReport per program instruction
    compulsory_bytes: tuple     # (down, up) every level below the root must move at least
    leaf_compute_joules: float
    bound: str = ""                 # the floor that sets most of the program's attainable bound
    bound_seconds: float = 0.0      # the sum of the instructions' bounds (they run one by one)
    fraction_of_bound: float = 0.0
    estimated_cycles: float = 0.0
    objective: str = "cycles"       # what the plan's choices minimised
    wall_seconds: float = 0.0
    area_mm2: float = 0.0           # the machine's silicon area (machine/area.py)
    process_nm: float = 0.0         # at its process node
    outputs: dict = field(default_factory=dict, repr=False)
    first_nonfinite: dict | None = None     # the instruction whose results first held NaN or inf

    @property
    def traffic_bytes(self) -> list[int]:
        return [lv["bytes_in"] + lv["bytes_out"] for lv in self.levels]

    @property
    def bytes_down(self) -> list[int]:
        return [lv["bytes_in"] for lv in self.levels]

    @property
    def bytes_up(self) -> list[int]:
        return [lv["bytes_out"] for lv in self.levels]

    @property
    def reduction_ops(self) -> int:
        return sum(lv["reduction_ops"] for lv in self.levels)

    @property
    def ops_per_joule(self) -> float:
        return self.ops / self.energy_joules if self.energy_joules else 0.0

    def to_json(self) -> dict:
        out = {
            "program": self.program, "machine": self.machine, "mode": self.mode,
            "functional": self.functional, "cycles": self.cycles, "seconds": self.seconds,
            "ops": self.ops, "peak_ops_per_second": self.peak_ops_per_second,
            "utilization": self.utilization, "bound": self.bound,
            "bound_seconds": self.bound_seconds, "fraction_of_bound": self.fraction_of_bound,
            "estimated_cycles": self.estimated_cycles, "objective": self.objective,
            "energy_joules": self.energy_joules,
            "energy_breakdown_joules": self.energy_breakdown, "ops_per_joule": self.ops_per_joule,
            "traffic_bytes": self.traffic_bytes, "bytes_down": self.bytes_down,
            "bytes_up": self.bytes_up, "reduction_ops": self.reduction_ops, "leaves": self.leaves,
            "levels": self.levels,
            "root_instructions": len(self.instructions),
            "leaf_instructions": self.levels[-1]["instructions"],
            "instructions": [vars(i).copy() for i in self.instructions],
            "wall_seconds": self.wall_seconds,
            "area_mm2": self.area_mm2, "process_nm": self.process_nm,
        }
        if self.outputs:
            out["outputs"] = {k: {"shape": list(v.shape), "dtype": str(v.dtype),
                                  "mean": float(np.mean(v, dtype=np.float64)) if v.size else 0.0,
                                  **dict(zip(("nan", "inf"), nonfinite(v)))}
                              for k, v in self.outputs.items()}
            out["first_nonfinite"] = self.first_nonfinite
        return out

    def rows(self) -> list[dict]:
        """One row per program instruction (the table of `to_frame()`)."""
        return [{"line": i.line, "instruction": i.text, "cycles": i.cycles, "ops": i.ops,
                 "utilization": i.utilization, "bottleneck": i.bottleneck, "bound": i.bound,
                 "fraction_of_bound": i.fraction_of_bound, "energy_joules": i.energy_joules,
                 "estimated_cycles": i.estimated_cycles} for i in self.instructions]

    def to_frame(self):
        """The run's instructions as a pandas DataFrame (`rows()`)."""
        return frame(self.rows())

    def _repr_html_(self) -> str:
        summary = [{"cycles": self.cycles, "seconds": self.seconds,
                    "utilization": self.utilization, "fraction_of_bound": self.fraction_of_bound,
                    "energy_joules": self.energy_joules, "ops_per_joule": self.ops_per_joule,
                    "leaves": self.leaves}]
        levels = [{"level": lv["level"], "name": lv["name"], "nodes": lv["nodes"],
                   "bytes_in": lv["bytes_in"], "bytes_out": lv["bytes_out"],
                   **{f"busy_{k}": v for k, v in lv.get("busy", {}).items()}}
                  for lv in self.levels]
        return (f"<p><b>{html.escape(self.program)}</b> on {html.escape(self.machine)} "
                f"({self.mode}{', functional' if self.functional else ', timing only'})</p>"
                + html_table(summary) + html_table(levels, "levels")
                + html_table(self.rows(), "instructions"))

    def text(self) -> str:
        lines = [
            f"{self.program} on {self.machine} ({self.leaves:,} leaves, {self.mode} simulation"
            f"{', functional' if self.functional else ', timing only'})",
            f"  cycles        {self.cycles:,}  ({self.seconds * 1e6:,.3f} us)",
            f"  ops           {self.ops:,}  ({self.ops / self.seconds / 1e12 if self.seconds else 0:,.3f}"
            f" Tops/s of {self.peak_ops_per_second / 1e12:,.3f} peak, utilization "
            f"{self.utilization:.1%})",
            f"  bound         {self.bound_seconds * 1e6:,.3f} us attainable, mostly set by "
            f"{_floor_name(self.bound)}: this run reaches {self.fraction_of_bound:.1%} of it",
            f"  energy        {self.energy_joules * 1e3:,.4g} mJ  ({self.ops_per_joule / 1e12:,.4g} "
            f"Tops/J; " + ", ".join(f"{k} {v * 1e3:.3g}" for k, v in self.energy_breakdown.items())
            + " mJ)",
            "",
            f"  {'level':<6}{'name':<10}{'nodes':>10}{'instructions':>14}{'bytes in':>16}"
            f"{'bytes out':>16}{'reduction ops':>15}",
        ]
        for lv in self.levels:
            lines.append(f"  {lv['level']:<6}{lv['name']:<10}{lv['nodes']:>10,}{lv['instructions']:>14,}"
                         f"{lv['bytes_in']:>16,}{lv['bytes_out']:>16,}{lv['reduction_ops']:>15,}")
        if all("busy" in lv for lv in self.levels):
            lines += ["", f"  {'level':<6}{'name':<10}{'busy:':>6}{'port':>7}{'link in':>8}"
                      f"{'out':>6}{'LFU':>6}{'compute':>8}   energy mJ:"
                      + "".join(f"{k:>10}" for k in self.levels[0]["energy_joules"])]
            for lv in self.levels:
                b = lv["busy"]
                lines.append(f"  {lv['level']:<6}{lv['name']:<10}{'':>6}{b['port']:>7.1%}"
                             f"{b['link_in']:>8.1%}{b['link_out']:>6.1%}{b['lfu']:>6.1%}"
                             f"{b['compute']:>8.1%}   {'':10}"
                             + "".join(f"{j * 1e3:>10.4g}" for j in lv["energy_joules"].values()))
        lines += ["", f"  {'line':>5}  {'cycles':>12} {'util':>6} {'of bound':>9}  {'bound':<10} "
                      f"{'bottleneck':<11} instruction"]
        for i in self.instructions:
            lines.append(f"  {i.line or '':>5}  {i.cycles:>12,} {i.utilization:>6.1%} "
                         f"{i.fraction_of_bound:>9.1%}  {i.bound:<10} {i.bottleneck:<11} "
                         f"{i.text}")
        if self.outputs:
            lines += ["", f"  {'output':<12} {'type':<24} {'min':>12} {'max':>12} {'mean':>12}"]
            for name, v in self.outputs.items():
                kind = f"{v.dtype}[{', '.join(map(str, v.shape))}]"
                stats = ([float(np.min(v)), float(np.max(v)), float(np.mean(v, dtype=np.float64))]
                         if v.size else [])
                lines.append(f"  {name:<12} {kind:<24} " + " ".join(f"{x:>12.6g}" for x in stats))
            lines += nonfinite_note(self.outputs, self.first_nonfinite)
        return "\n".join(lines)


def _floor_name(bound: str) -> str:
    return bound if bound in ("compute", "latency") else f"the traffic into level {bound}"


def check_report(r: Report) -> None:
    """The run-time invariants; a violation names the invariant, the instruction and the node."""
    def fail(invariant, where, detail=""):
        raise InternalError(invariant, f"{r.program} on {r.machine}, {where}", detail)
    for i in r.instructions:
        where = f"line {i.line} '{i.text}' (root node)"
        if not (i.cycles > 0 and math.isfinite(i.cycles)):
            fail("cycles are positive and finite", where, f"{i.cycles} cycles")
        if not 0 <= i.utilization <= 1 + 1e-12:
            fail("utilization is at most 1", where, f"utilization {i.utilization}")
        if not 0 <= i.fraction_of_bound <= 1 + 1e-9:
            fail("no run is faster than its attainable bound", where,
                 f"{i.cycles:,} cycles simulated, bound {i.bound_seconds:.6g} s set by {i.bound}")
    if not (r.cycles > 0 and math.isfinite(r.seconds)):
        fail("cycles are positive and finite", "whole program", f"{r.cycles} cycles")
    if not 0 <= r.utilization <= 1 + 1e-12:
        fail("utilization is at most 1", "whole program", f"utilization {r.utilization}")
    if not 0 <= r.fraction_of_bound <= 1 + 1e-9:
        fail("no run is faster than its attainable bound", "whole program",
             f"{r.seconds:.6g} s simulated, bound {r.bound_seconds:.6g} s")
    for lv in r.levels:
        for what, fraction in lv.get("busy", {}).items():
            if not 0 <= fraction <= 1 + 1e-9:
                fail("a resource is busy at most all of the run", f"level {lv['level']} "
                     f"({lv['name']}), {what}", f"busy fraction {fraction}")
    down, up = r.compulsory_bytes
    for lv in r.levels[1:]:
        if lv["bytes_in"] < down or lv["bytes_out"] < up:
            fail("traffic is at least the compulsory traffic", f"level {lv['level']} ({lv['name']})",
                 f"in {lv['bytes_in']} < {down} or out {lv['bytes_out']} < {up}")
    if r.energy_joules < r.leaf_compute_joules:
        fail("energy is at least the leaf compute energy", "whole program",
             f"{r.energy_joules} J < {r.leaf_compute_joules} J")
