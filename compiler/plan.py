"""The decomposition plan: a frozen tree of node plans, shared through a memo table.

A `NodePlan` says what one node does with one task it receives: a leaf computes it, a node that
receives a data-movement instruction runs it with its own DMA (`local`), any other node cuts it
into serial pieces and each piece into parallel parts for its children (`split`), and combines
partial results with the reduction g on its local functional unit. Identical sub-problems
(same task at the same level) share one NodePlan, so a plan's size grows with levels times
distinct shapes, never with the number of leaves.
"""
from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Mapping

from compiler.rules import ExtensionReduction, Reduction, Task
from compiler.tables import frame, html_table
from machine import Machine
from isa.program import Program

__all__ = ["AxisSplit", "NodePlan", "Plan", "PlanKind", "level_counts"]


class PlanKind(StrEnum):
    """What a node does with a task it receives."""
    LEAF = "leaf"           # computes it
    LOCAL = "local"         # moves data with its own DMA in its local memory
    SPLIT = "split"         # cuts it into serial pieces and parallel parts for its children


@dataclass(frozen=True, kw_only=True)
class AxisSplit:
    """How one axis of the iteration space is cut: into `pieces` serially, each `ways` in parallel."""
    name: str
    size: int
    pieces: int
    ways: int
    reduce: Reduction | ExtensionReduction | None = None

    def text(self) -> str:
        g = (f" (g={self.reduce})" if self.reduce and self.pieces * self.ways > 1
             else "")
        return f"{self.name}={self.size}: {self.pieces} serial x {self.ways} parallel{g}"


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    task: Task
    level: int
    kind: PlanKind
    splits: tuple[AxisSplit, ...] = ()
    order: tuple[int, ...] = ()                     # loop order over the splits' axes, outermost first
    children: tuple[tuple[Task, int], ...] = ()     # distinct child tasks, and how many receive each
    pieces: int = 1                                 # serial pieces
    busy: int = 0                                   # children given work in a full piece
    bytes_down: int = 0                             # read from this node's memory, sent to children
    bytes_up: int = 0                               # written back to this node's memory by children
    local_bytes: int = 0                            # moved by this node's own DMA (local kind)
    reduction_ops: int = 0                          # g work on this node's LFU
    reduce: Reduction | ExtensionReduction | None = None    # the g used, if any
    child_reduction_ops: int = 0                    # g work on the children's LFUs (kept partials)
    est_cycles: float = 0.0                         # the compile-time cost estimate of the choice
    est_joules: float = 0.0                         # dynamic energy of one run of its subtree
    why: str = ""
    # the children start while a piece's load streams in, each slice of theirs once its bytes
    # have arrived (compiler.pipeline); otherwise when the whole load has
    stream: bool = False
    # what the task holds and when, by the compiler's node model: how its parent may overlap
    # consecutive tasks on it (compiler.reservation); None: the whole node for est_cycles
    reservation: object = field(default=None, compare=False, repr=False)

    @property
    def child_instructions(self) -> int:
        return sum(n for _, n in self.children)


@dataclass(frozen=True)
class Plan:
    program: Program
    machine: Machine
    roots: tuple[NodePlan, ...]                     # one per program instruction, in order
    table: Mapping = field(repr=False)              # (task, level) -> NodePlan
    objective: str = "cycles"                       # what each node's choice minimised

    def node(self, task: Task, level: int) -> NodePlan:
        return self.table[(task, level)]

    def rows(self) -> list[dict]:
        """One row per program instruction and level: the distinct tasks planned there, how
        many nodes run them, and what they move (the table of `to_frame()`)."""
        out = []
        for ins, root in zip(self.program.instructions, self.roots):
            per_level: dict = defaultdict(lambda: [0, 0, 0, 0])
            for (task, lv), c in level_counts(self, (root,)).items():
                n = self.table[(task, lv)]
                row = per_level[lv]
                row[0] += 1
                row[1] += c
                row[2] += c * n.bytes_down
                row[3] += c * n.bytes_up
            for lv in sorted(per_level):
                tasks, runs, down, up = per_level[lv]
                out.append({"line": ins.loc.line if ins.loc else None, "instruction": ins.to_text(),
                            "level": lv, "level_name": self.machine.levels[lv].name,
                            "distinct_tasks": tasks, "node_runs": runs, "bytes_down": down,
                            "bytes_up": up, "estimated_cycles": root.est_cycles if lv == 0 else None})
        return out

    def to_frame(self):
        """The plan as a pandas DataFrame (`rows()`)."""
        return frame(self.rows())

    def _repr_html_(self) -> str:
        head = (f"<p><b>{html.escape(self.program.file)}</b> on {html.escape(self.machine.name)}: "
                f"{len(self.roots)} instructions, {self.machine.leaves:,} leaves, estimated "
                f"{sum(r.est_cycles for r in self.roots):,.0f} cycles (objective "
                f"{html.escape(self.objective)})</p>")
        return head + html_table(self.rows())

    def __post_init__(self):
        if not isinstance(self.table, MappingProxyType):
            object.__setattr__(self, "table", MappingProxyType(dict(self.table)))


def level_counts(plan: Plan, roots: tuple[NodePlan, ...] | None = None) -> dict:
    """How many times each (task, level) entry runs, for the given root plans (default: all)."""
    counts: dict = defaultdict(int)
    for r in roots if roots is not None else plan.roots:
        counts[(r.task, r.level)] += 1
    for level in range(plan.machine.depth + 1):
        for (task, lv), c in list(counts.items()):
            if lv != level:
                continue
            for child, n in plan.table[(task, lv)].children:
                counts[(child, lv + 1)] += c * n
    return counts
