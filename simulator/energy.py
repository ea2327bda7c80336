"""Energy from the machine description: leaf compute per op class, memory and link bytes per level,
reduction work on the LFUs, and static power over the run's time."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.plan import Plan, PlanKind, level_counts
from compiler.verify import plan_stats
from isa.opcodes import OpClass

__all__ = ["CLASSES", "Energy", "plan_energy"]

PJ = 1e-12


CLASSES = ("compute", "reduction", "memory", "link", "static")


@dataclass(frozen=True)
class Energy:
    compute: float      # joules at the leaves' compute units
    reduction: float    # joules on the LFUs (charged at the leaf's element-wise energy per op)
    memory: float       # joules reading and writing local memories
    link: float         # joules moving bytes over links
    static: float       # static power times time
    levels: tuple = ()  # per level, root first: {class: joules} spent by that level's nodes
                        # (a link's energy is its child level's: the link into that level)

    @property
    def total(self) -> float:
        return self.compute + self.reduction + self.memory + self.link + self.static

    def to_json(self) -> dict:
        return {"compute": self.compute, "reduction": self.reduction, "memory": self.memory,
                "link": self.link, "static": self.static}


def plan_energy(plan: Plan, seconds: float, roots=None) -> Energy:
    """Energy of running the plan's instructions (or the given roots) for `seconds`, by class
    and by level."""
    m = plan.machine
    c = m.compute
    counts = level_counts(plan, roots)
    levels = [dict.fromkeys(CLASSES, 0.0) for _ in m.levels]
    for (task, level), n in counts.items():
        node = plan.table[(task, level)]
        here = levels[level]
        if node.kind == PlanKind.LEAF:
            here["compute"] += n * sum(ops * c.pj_per_op(cls) for cls, ops in task.work
                                       if cls != OpClass.MOVE) * PJ
            here["memory"] += n * task.nbytes * m.levels[level].memory_pj_per_byte * PJ  # operands read, result written
        here["reduction"] += n * node.reduction_ops * c.elementwise_pj_per_op * PJ
        if node.child_reduction_ops:    # on the children's LFUs, adding into the partials they keep
            levels[level + 1]["reduction"] += n * node.child_reduction_ops * c.elementwise_pj_per_op * PJ
        here["memory"] += n * node.local_bytes * m.levels[level].memory_pj_per_byte * PJ
    stats, _ = plan_stats(plan, roots)
    for s in stats[1:]:
        moved = s.bytes_in + s.bytes_out
        parent, child = m.levels[s.level - 1], m.levels[s.level]
        crossing = moved * parent.link_fraction     # the rest is homed in the child already
        levels[s.level]["link"] += crossing * child.link_pj_per_byte * PJ
        levels[s.level - 1]["memory"] += moved * parent.memory_pj_per_byte * PJ
        levels[s.level]["memory"] += crossing * child.memory_pj_per_byte * PJ
    for i, lv in enumerate(m.levels):
        levels[i]["static"] = lv.static_watts * m.nodes_at(i) * seconds
    totals = {k: sum(lv[k] for lv in levels) for k in CLASSES}
    return Energy(**totals, levels=tuple(levels))
