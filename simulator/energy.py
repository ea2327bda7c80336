"""Energy from the machine description: leaf compute per op class, memory and link bytes per level,
reduction work on the LFUs, and static power over the run's time."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.plan import Plan, PlanKind, level_counts
from compiler.verify import plan_stats
from isa.opcodes import OpClass

__all__ = ["Energy", "plan_energy"]

PJ = 1e-12


@dataclass(frozen=True)
class Energy:
    compute: float      # joules at the leaves' compute units
    reduction: float    # joules on the LFUs (charged at the leaf's element-wise energy per op)
    memory: float       # joules reading and writing local memories
    link: float         # joules moving bytes over links
    static: float       # static power times time

    @property
    def total(self) -> float:
        return self.compute + self.reduction + self.memory + self.link + self.static

    def to_json(self) -> dict:
        return {"compute": self.compute, "reduction": self.reduction, "memory": self.memory,
                "link": self.link, "static": self.static}


def plan_energy(plan: Plan, seconds: float, roots=None) -> Energy:
    """Energy of running the plan's instructions (or the given roots) for `seconds`."""
    m = plan.machine
    c = m.compute
    counts = level_counts(plan, roots)
    compute = reduction = memory = 0.0
    leaf = m.levels[-1]
    for (task, level), n in counts.items():
        node = plan.table[(task, level)]
        if node.kind == PlanKind.LEAF:
            compute += n * sum(ops * c.pj_per_op(cls) for cls, ops in task.work if cls != OpClass.MOVE) * PJ
            memory += n * task.nbytes * leaf.memory_pj_per_byte * PJ   # operands read, result written
        reduction += n * (node.reduction_ops + node.child_reduction_ops) * c.elementwise_pj_per_op * PJ
        memory += n * node.local_bytes * m.levels[level].memory_pj_per_byte * PJ
    stats, _ = plan_stats(plan, roots)
    link = 0.0
    for s in stats[1:]:
        moved = s.bytes_in + s.bytes_out
        parent, child = m.levels[s.level - 1], m.levels[s.level]
        link += moved * child.link_pj_per_byte * PJ
        memory += moved * (parent.memory_pj_per_byte + child.memory_pj_per_byte) * PJ
    return Energy(compute, reduction, memory, link, m.static_watts * seconds)
