"""Energy of a plan's nodes from the machine description: the one formula that the simulator's
energy report and the compiler's `energy` and `edp` objectives both use.

A node's own run (its children's runs excluded) spends:

- at a leaf: ops x pJ/op of their class on its compute units, and its operands read and results
  written once in its memory (`task.nbytes x memory_pj_per_byte`);
- its reduction work on its LFU (`reduction_ops`), and the children's additions into the partial
  results they keep on theirs (`child_reduction_ops`, charged to the children's level), each at
  the leaf's element-wise energy per op;
- its own DMA's bytes (`local_bytes`) through its memory;
- every byte it sends to or gets from its children (`bytes_down + bytes_up`) once through its
  memory, and, of those, the part that crosses the child's link (all, or `1 - 1/fanout` from a
  distributed memory) over that link and through the child's memory.

Static power is the machine's: `static_watts` of every node, over the time it runs.
"""
from __future__ import annotations

from compiler.plan import NodePlan, PlanKind
from isa.opcodes import OpClass

__all__ = ["CLASSES", "PJ", "node_joules", "subtree_watts"]

PJ = 1e-12
CLASSES = ("compute", "reduction", "memory", "link", "static")


def node_joules(node: NodePlan, machine) -> list[tuple[int, str, float]]:
    """What one run of the node spends itself, as (level, class, joules) entries."""
    level, c = node.level, machine.compute
    lv = machine.levels[level]
    out = []
    if node.kind == PlanKind.LEAF:
        out.append((level, "compute", sum(ops * c.pj_per_op(cls) for cls, ops in node.task.work
                                          if cls != OpClass.MOVE) * PJ))
        out.append((level, "memory", node.task.nbytes * lv.memory_pj_per_byte * PJ))
    if node.reduction_ops:
        out.append((level, "reduction", node.reduction_ops * c.elementwise_pj_per_op * PJ))
    if node.child_reduction_ops:
        out.append((level + 1, "reduction", node.child_reduction_ops * c.elementwise_pj_per_op * PJ))
    if node.local_bytes:
        out.append((level, "memory", node.local_bytes * lv.memory_pj_per_byte * PJ))
    moved = node.bytes_down + node.bytes_up
    if moved:
        child = machine.levels[level + 1]
        crossing = moved * lv.link_fraction
        out += [(level, "memory", moved * lv.memory_pj_per_byte * PJ),
                (level + 1, "link", crossing * child.link_pj_per_byte * PJ),
                (level + 1, "memory", crossing * child.memory_pj_per_byte * PJ)]
    return out


def subtree_watts(machine, level: int) -> float:
    """Static power of one node of `level` and everything below it."""
    watts = 0.0
    for lv in reversed(machine.levels[level:]):
        watts = lv.static_watts + lv.fanout * watts
    return watts
