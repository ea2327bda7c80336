"""Energy from the machine description: leaf compute per op class, memory and link bytes per level,
reduction work on the LFUs, and static power over the run's time."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.energy import CLASSES, PJ, node_joules
from compiler.plan import Plan, level_counts

__all__ = ["CLASSES", "PJ", "Energy", "plan_energy"]



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
    and by level: every node run's own energy (`compiler.energy.node_joules`, the formula the
    compiler's energy objective uses) and every node's static power over the time."""
    m = plan.machine
    levels = [dict.fromkeys(CLASSES, 0.0) for _ in m.levels]
    for (task, level), n in level_counts(plan, roots).items():
        for lv, cls, joules in node_joules(plan.table[(task, level)], m):
            levels[lv][cls] += n * joules
    for i, lv in enumerate(m.levels):
        levels[i]["static"] = lv.static_watts * m.nodes_at(i) * seconds
    totals = {k: sum(lv[k] for lv in levels) for k in CLASSES}
    return Energy(**totals, levels=tuple(levels))
