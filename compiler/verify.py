"""Per-level statistics of a plan, and the invariants every plan must keep.

Kept apart from the passes that build plans: `verify_plan` re-derives what must hold (every
child's piece fits its memory, arithmetic ops are conserved from the program down to the leaves,
every level moves at least the compulsory bytes) and raises an InternalError naming the
invariant and the node where it broke.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.plan import Plan, PlanKind, level_counts
from compiler.rules import MERGES, access_map
from isa.errors import InternalError
from isa.checker import program_ops

__all__ = ["LevelStats", "plan_stats", "verify_plan", "compulsory_bytes"]


@dataclass(frozen=True)
class LevelStats:
    level: int
    name: str
    nodes: int
    instructions: int        # tasks received by this level's nodes, all nodes together
    bytes_in: int            # bytes its nodes load from their parents
    bytes_out: int           # bytes its nodes write back to their parents
    reduction_ops: int       # g work on its nodes' LFUs
    local_bytes: int         # bytes its nodes move with their own DMA (data-movement instructions)


def plan_stats(plan: Plan, roots=None) -> tuple[list[LevelStats], int]:
    """Per-level totals (root first) and the leaf ops, for all instructions or the given roots."""
    m = plan.machine
    counts = level_counts(plan, roots)
    rows = []
    leaf_ops = 0
    for lv, level in enumerate(m.levels):
        inst = red = local = 0
        for (task, l), c in counts.items():
            if l != lv:
                continue
            node = plan.table[(task, l)]
            inst += c
            red += c * node.reduction_ops
            local += c * node.local_bytes
            if node.kind == PlanKind.LEAF:
                leaf_ops += c * task.ops
        down = up = 0
        for (task, l), c in counts.items():
            if l == lv - 1:
                node = plan.table[(task, l)]
                down += c * node.bytes_down
                up += c * node.bytes_up
                red += c * node.child_reduction_ops      # partials kept in this level's nodes
        rows.append(LevelStats(lv, level.name, m.nodes_at(lv), inst, down, up, red, local))
    return rows, leaf_ops


def compulsory_bytes(plan: Plan) -> tuple[int, int]:
    """Bytes every level below the root must load and store at least: what each decomposed
    instruction reads of its inputs reaches some leaf once, and its output comes back once."""
    down = up = 0
    for root in plan.roots:
        if root.kind == PlanKind.SPLIT:
            amap = access_map(root.task)
            n_out = root.task.spec.outputs
            down += sum(amap.touched_bytes(i) for i in range(n_out, len(root.task.types)))
            up += sum(amap.touched_bytes(i) for i in range(n_out))
    return down, up


def verify_plan(plan: Plan) -> None:
    """Raise InternalError if any plan invariant is broken."""
    m = plan.machine
    for (task, level), node in plan.table.items():
        where = f"level {level} ({m.levels[level].name}), {task.text()}"
        if node.kind == PlanKind.LEAF and level != m.depth:
            raise InternalError("leaves are at the last level", where)
        if node.kind != PlanKind.SPLIT:
            continue
        budget = m.levels[level + 1].memory_bytes // m.levels[level + 1].buffering
        child_ops = 0
        for child, n in node.children:
            if (child, level + 1) not in plan.table:
                raise InternalError("every child task has a plan", where, child.text())
            if child.working_set > budget:
                raise InternalError("a child's piece fits its memory", where,
                                    f"{child.text()} needs {child.working_set} bytes, budget {budget}")
            child_ops += n * child.ops
        if node.reduce not in MERGES and not task.ext and child_ops != task.ops:
            raise InternalError("ops are conserved from a node to its children", where,
                                f"children do {child_ops} ops, the task {task.ops}")
        if min(node.bytes_down, node.bytes_up, node.reduction_ops, node.child_reduction_ops) < 0:
            raise InternalError("bytes and reduction ops are non-negative", where)
    stats, leaf_ops = plan_stats(plan)
    total = program_ops(plan.program)
    # leaves that sort do less on shorter runs than the whole; an extension's body may do less
    # (a topk leaf sorts a shorter row) or more (work that does not shrink with the cut axes,
    # such as attention's division of its output, repeats in every piece)
    merged = any(n.reduce in MERGES for n in plan.table.values())
    extended = any(n.task.ext for n in plan.table.values())
    if not extended and (leaf_ops > total or (not merged and leaf_ops != total)):
        raise InternalError("leaf ops equal the program's ops", f"program {plan.program.file}",
                            f"leaves do {leaf_ops}, the program {total}")
    down, up = compulsory_bytes(plan)
    for row in stats[1:]:
        if row.bytes_in < down or row.bytes_out < up:
            raise InternalError("every level moves at least the compulsory bytes",
                                f"level {row.level} ({row.name})",
                                f"in {row.bytes_in} < {down} or out {row.bytes_out} < {up}")
