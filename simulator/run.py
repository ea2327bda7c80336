"""The simulator's driver: a plan on a machine -> cycles, energy, outputs, one checked report."""
from __future__ import annotations

import functools
import time

from threadpoolctl import ThreadpoolController

from compiler.bounds import plan_bounds, program_bound
from compiler.execute import execute_plan
from compiler.plan import Plan, PlanKind, level_counts
from compiler.verify import compulsory_bytes, plan_stats
from isa.errors import InternalError, UserError
from isa.reference import FirstNonFinite
from machine.area import machine_area
from simulator.energy import plan_energy
from simulator.engine import Engine
from simulator.batch_kernels import LEAF_BATCH_KERNELS
from simulator.extension_batch import run_extension_node
from simulator.kernels import LEAF_KERNELS
from simulator.report import InstructionReport, Report, check_report

__all__ = ["simulate", "compute_outputs", "EXACT_MODE_LIMIT"]

#: the most node tasks exact mode will simulate one by one (symmetric mode has no such limit)
EXACT_MODE_LIMIT = 200_000


def simulate(plan: Plan, mode: str = "symmetric", functional: bool = False, feeds: dict | None = None,
             trace: bool = False, progress=None, known=None) -> tuple[Report, Engine]:
    """Simulate a plan. `progress(i, n, text)` is called as each root instruction finishes;
    `known` holds node runs of earlier simulations to reuse (`Engine`)."""
    start = time.perf_counter()
    m = plan.machine
    if mode == "exact":
        tasks = sum(level_counts(plan).values())
        if tasks > EXACT_MODE_LIMIT:
            raise UserError(f"exact simulation would run {tasks:,} node tasks one by one (limit "
                            f"{EXACT_MODE_LIMIT:,}); use the symmetric mode", "--exact")
    engine = Engine(plan, mode, trace, known)
    if mode == "symmetric":
        cycles = []
        for i, root in enumerate(plan.roots):
            cycles.append(engine.duration(root, sum(cycles)))
            if progress:
                progress(i + 1, len(plan.roots), root.task.opcode)
    else:
        cycles = engine.instruction_cycles()
    _check_pieces(engine)

    total = sum(cycles)
    seconds = total / m.frequency_hz
    peak = m.peak_ops_per_cycle
    rows = []
    bounds = plan_bounds(plan)
    for ins, root, c, b in zip(plan.program.instructions, plan.roots, cycles, bounds):
        e = plan_energy(plan, c / m.frequency_hz, (root,))
        rows.append(InstructionReport(ins.loc.line if ins.loc else None, ins.to_text(), c,
                                      root.task.ops, root.task.ops / (c * peak) if c else 0.0,
                                      engine.bound(root), e.total, estimated_cycles=root.est_cycles,
                                      bound=b.bound, bound_seconds=b.seconds(m),
                                      fraction_of_bound=b.cycles / c if c else 0.0))
    bound_cycles, bound_name = program_bound(bounds)
    energy = plan_energy(plan, seconds)
    stats, _ = plan_stats(plan)
    ops = sum(r.task.ops for r in plan.roots)
    overflow = FirstNonFinite(feeds)
    outputs = compute_outputs(plan, feeds, watch=overflow) if functional else {}
    area = machine_area(m)
    report = Report(
        program=plan.program.file, machine=m.name, mode=mode, functional=functional,
        cycles=total, seconds=seconds, ops=ops, peak_ops_per_second=m.peak_ops_per_second,
        utilization=ops / (total * peak) if total else 0.0, energy_joules=energy.total,
        energy_breakdown=energy.to_json(), leaves=m.leaves,
        levels=[{"level": s.level, "name": s.name, "nodes": s.nodes,
                 "instructions": s.instructions, "bytes_in": s.bytes_in, "bytes_out": s.bytes_out,
                 "reduction_ops": s.reduction_ops, "local_bytes": s.local_bytes,
                 "energy_joules": e, "busy": b, "area_mm2": a.total,
                 "area_breakdown_mm2": a.breakdown()}
                for s, e, b, a in zip(stats, energy.levels, busy_fractions(plan, engine, total),
                                      area.levels)],
        instructions=rows, compulsory_bytes=compulsory_bytes(plan),
        bound=bound_name, bound_seconds=bound_cycles / m.frequency_hz,
        fraction_of_bound=bound_cycles / total if total else 0.0,
        estimated_cycles=sum(r.est_cycles for r in plan.roots), objective=plan.objective,
        leaf_compute_joules=energy.compute, outputs=outputs, area_mm2=area.total,
        process_nm=m.process_nm, first_nonfinite=overflow.found)
    check_report(report)
    report.wall_seconds = time.perf_counter() - start
    return report, engine


def busy_fractions(plan: Plan, engine: Engine, cycles: int) -> list[dict]:
    """Per level, root first: the fraction of the run's cycles its nodes' memory ports, the
    links into it (loads in, write-backs out; the busiest child's, as a piece holds every busy
    child's link at once), its LFUs and its compute units were busy, over all its nodes."""
    m = plan.machine
    busy = [dict.fromkeys(("port", "link_in", "link_out", "lfu", "compute"), 0) for _ in m.levels]
    for (task, level), n in level_counts(plan).items():
        t = engine.totals.get((task, level))
        if t is None:
            continue
        here = busy[level]
        if engine.plan.node(task, level).kind == PlanKind.SPLIT:
            here["port"] += n * t.port_busy
            here["lfu"] += n * t.lfu_busy
            busy[level + 1]["link_in"] += n * t.link_in_busy
            busy[level + 1]["link_out"] += n * t.link_out_busy
            # the busy children's LFUs adding into the partial results they keep
            busy[level + 1]["lfu"] += n * t.kids_lfu_busy * engine.plan.node(task, level).busy
        else:                           # a leaf, or a node's own DMA: its memory port
            here["port"] += n * t.leaf_memory
            here["compute"] += n * t.leaf_compute
    for i, here in enumerate(busy):
        nodes = m.nodes_at(i)
        parents = m.nodes_at(i - 1) if i else 1
        for k in here:
            here[k] = here[k] / ((parents if k.startswith("link") else nodes) * cycles) if cycles else 0.0
    return busy


@functools.cache
def _blas_pools() -> ThreadpoolController:
    """The process's BLAS thread pools (found once: a fresh search costs about 1 ms a run)."""
    return ThreadpoolController()


def compute_outputs(plan: Plan, feeds: dict, cache: dict | None = None, watch=None) -> dict:
    """The leaves compute the outputs, each leaf kernel on one thread: a leaf is one accelerator,
    and BLAS thread pools started inside thousands of small leaf products only contend. The
    leaves below a node run in batches: one call per node for matmul, conv2d, pooling and
    elementwise opcodes (`simulator.batch_kernels`), one call per body instruction for an
    extension's (`simulator.extension_batch`). `cache`: see `execute_plan` (a dict kept for
    later runs of the same plan); `watch(instruction, values)` sees each instruction's results."""
    with _blas_pools().limit(limits=1, user_api="blas"):
        return execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS, cache,
                            run_extension_node, watch)


def _check_pieces(engine: Engine) -> None:
    """The pieces the engine stepped through move exactly the bytes and reduction work the plan
    counted for their node (conserved bytes and ops)."""
    for (task, level), t in engine.totals.items():
        node = engine.plan.node(task, level)
        if node.kind != PlanKind.SPLIT:
            continue
        done = (t.bytes_down, t.bytes_up, t.reduction_ops, t.child_reduction_ops)
        planned = (node.bytes_down, node.bytes_up, node.reduction_ops, node.child_reduction_ops)
        if done != planned:
            raise InternalError("simulated traffic and reduction work equal the plan's",
                                f"level {level}, {task.text()}",
                                f"simulated {done}, planned {planned}")
