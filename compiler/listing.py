"""Readable and JSON listings of a plan: per instruction, per level, what a node receives and
what it emits, with sub-instruction counts, bytes moved, reduction ops and the chosen splits."""
from __future__ import annotations

from compiler.bounds import plan_bounds, program_bound
from compiler.plan import NodePlan, Plan, PlanKind, level_counts
from compiler.verify import plan_stats
from isa.checker import program_ops

__all__ = ["plan_text", "plan_json"]

SHOW_TASKS = 4      # distinct tasks listed per level and instruction in the text listing


def _name(reduce) -> str | None:
    return None if reduce is None else str(reduce)


def _node_json(node: NodePlan, count: int, names) -> dict:
    return {
        "receives": node.task.text(names), "count": count, "kind": node.kind,
        "splits": [{"axis": s.name, "size": s.size, "serial": s.pieces, "parallel": s.ways,
                    "reduce": _name(s.reduce)} for s in node.splits if s.pieces * s.ways > 1],
        "loop_order": [node.splits[a].name for a in node.order if node.splits[a].pieces > 1],
        "pieces": node.pieces, "busy_children": node.busy,
        "emits": [{"instruction": t.text(names), "count": n} for t, n in node.children],
        "sub_instructions": node.child_instructions,
        "bytes_down": node.bytes_down, "bytes_up": node.bytes_up,
        "local_bytes": node.local_bytes, "reduction_ops": node.reduction_ops,
        "child_reduction_ops": node.child_reduction_ops,
        "reduction": _name(node.reduce), "why": node.why,
    }


def _by_level(plan: Plan, root: NodePlan):
    counts = level_counts(plan, (root,))
    levels = [[] for _ in plan.machine.levels]
    for (task, lv), c in counts.items():
        levels[lv].append((plan.table[(task, lv)], c))
    return levels


def _stats_json(plan: Plan, roots=None) -> dict:
    stats, leaf_ops = plan_stats(plan, roots)
    return {"levels": [{"level": s.level, "name": s.name, "nodes": s.nodes,
                        "instructions": s.instructions, "bytes_in": s.bytes_in,
                        "bytes_out": s.bytes_out, "reduction_ops": s.reduction_ops,
                        "local_bytes": s.local_bytes} for s in stats],
            "leaf_ops": leaf_ops}


def plan_json(plan: Plan) -> dict:
    prog, m = plan.program, plan.machine
    bounds = plan_bounds(plan)
    total, name = program_bound(bounds)
    out = {"program": prog.file, "machine": m.name, "leaves": m.leaves,
           **_stats_json(plan), "program_ops": program_ops(prog),
           "plan_entries": len(plan.table), "bound": name, "bound_cycles": total,
           "bound_seconds": total / m.frequency_hz,
           "estimated_cycles": sum(r.est_cycles for r in plan.roots),
           "estimated_dynamic_joules": sum(r.est_joules for r in plan.roots),
           "objective": plan.objective, "instructions": []}
    for ins, root, bound in zip(prog.instructions, plan.roots, bounds):
        row = {"line": ins.loc.line if ins.loc else None, "text": ins.to_text(),
               "ops": root.task.ops, "estimated_cycles": root.est_cycles,
               "estimated_dynamic_joules": root.est_joules, **bound.to_json(m),
               **_stats_json(plan, (root,)), "per_level": []}
        for lv, nodes in enumerate(_by_level(plan, root)):
            row["per_level"].append({"level": lv, "name": m.levels[lv].name,
                                     "tasks": [_node_json(n, c, ins.operands) for n, c in nodes]})
        out["instructions"].append(row)
    return out


def plan_text(plan: Plan, detail: bool = True) -> str:
    prog, m = plan.program, plan.machine
    lines = [f"{prog.file} on {m.name}: {len(prog.instructions)} instructions, {m.depth + 1} levels, "
             f"{m.leaves:,} leaves; {len(plan.table)} distinct sub-problems planned"]
    if detail:
        for ins, root, bound in zip(prog.instructions, plan.roots, plan_bounds(plan)):
            where = f"{prog.file}:{ins.loc.line}" if ins.loc else prog.file
            lines += ["", f"{where}  {ins.to_text()}    ({root.task.ops:,} ops)",
                      f"  estimated {root.est_cycles:,.0f} cycles; attainable bound "
                      f"{bound.cycles:,.0f} cycles, set by {bound.bound} ("
                      + ", ".join(f"{n} {c:,.0f}" for n, c in bound.floors) + ")"]
            for lv, nodes in enumerate(_by_level(plan, root)):
                for node, count in nodes[:SHOW_TASKS]:
                    lines += _node_lines(node, count, lv, m, ins.operands)
                if len(nodes) > SHOW_TASKS:
                    lines.append(f"  level {lv}: ... and {len(nodes) - SHOW_TASKS} more distinct tasks")
    stats, leaf_ops = plan_stats(plan)
    lines += ["", f"{'level':<6}{'name':<10}{'nodes':>10}{'instructions':>14}{'bytes in':>16}"
                  f"{'bytes out':>16}{'reduction ops':>16}"]
    for s in stats:
        lines.append(f"{s.level:<6}{s.name:<10}{s.nodes:>10,}{s.instructions:>14,}{s.bytes_in:>16,}"
                     f"{s.bytes_out:>16,}{s.reduction_ops:>16,}")
    lines.append(f"leaf ops {leaf_ops:,}; program ops {program_ops(prog):,} "
                 f"(a multiply-accumulate counts as two)")
    total, name = program_bound(plan_bounds(plan))
    lines.append(f"estimated {sum(r.est_cycles for r in plan.roots):,.0f} cycles; attainable bound "
                 f"{total:,.0f} cycles ({total / m.frequency_hz * 1e6:,.3f} us), mostly set by {name}")
    if plan.objective != "cycles":
        lines.append(f"objective {plan.objective}: estimated dynamic energy "
                     f"{sum(r.est_joules for r in plan.roots):.4g} J")
    return "\n".join(lines)


def _node_lines(node: NodePlan, count: int, lv: int, m, names) -> list[str]:
    head = f"  level {lv} {m.levels[lv].name} x{count:,}: "
    if node.kind == PlanKind.LEAF:
        return [head + "computes " + node.task.text(names)]
    if node.kind == PlanKind.LOCAL:
        return [head + "DMA " + node.task.text(names) + f"  ({node.local_bytes:,} bytes)"]
    cuts = "; ".join(s.text() for s in node.splits if s.pieces * s.ways > 1) or "not cut"
    out = [head + "receives " + node.task.text(names),
           f"      split {cuts} -> {node.pieces:,} serial piece{'s' if node.pieces > 1 else ''}, "
           f"{node.busy} of {m.levels[lv].fanout} children busy"
           + (f"; loop order {', '.join(o)} (outermost first)" if len(o := [
               node.splits[a].name for a in node.order if node.splits[a].pieces > 1]) > 1 else ""),
           f"      emits {node.child_instructions:,} sub-instructions:"]
    for t, n in node.children[:SHOW_TASKS]:
        out.append(f"        {n:,} x {t.text(names)}")
    if len(node.children) > SHOW_TASKS:
        out.append(f"        ... and {len(node.children) - SHOW_TASKS} more shapes")
    red = (f", reduction ops {node.reduction_ops:,} here and {node.child_reduction_ops:,} in the "
           f"children (g={node.reduce})" if node.reduce else "")
    out.append(f"      bytes down {node.bytes_down:,}, up {node.bytes_up:,}{red}")
    out.append(f"      why: {node.why}")
    return out
