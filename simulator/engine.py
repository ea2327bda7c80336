"""A simpy model of the fractal von Neumann node, in integer cycles.

Every node runs the pipeline of the instructions it receives:

    ID  decode and decompose (the level's controller overhead, once per instruction)
    LD  load a piece's operands from this node's memory to its children: the memory port is shared
        by all children (contention) and held for bytes / port bandwidth, each child's link takes
        bytes / link bandwidth, plus the link latency; operands every child needs go once when the
        level broadcasts
    EX  the children run their sub-instructions (the slowest child ends the stage)
    WB  the children's results come back over the links and through the port
    RD  the local functional unit combines partial results (g ops / LFU throughput)

Consecutive serial pieces overlap: the memory port, the children and the LFU are each held by one
piece at a time, in order (a transfer holds the port for its port time; its link time beyond that
and its latency overlap other work), and at most BUFFERING pieces are in flight (the children's
memories hold that many). A leaf runs
its task in max(ops / its rate for the op class, bytes / its memory bandwidth) cycles; a node that
receives a data-movement instruction runs it with its DMA at its memory port's bandwidth.

Two modes give identical cycles: `exact` runs a process for every node of the machine in one
environment (and can record a trace of every stage); `symmetric` simulates each distinct
(task, level) once and reuses its duration for every sibling that receives the same task, so its
cost grows with levels times distinct shapes, not with the number of leaves.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import simpy

from compiler.decompose import BUFFERING
from compiler.plan import NodePlan, Plan, level_counts
from isa.limits import check_sim_pieces
from simulator.pieces import NodePieces

__all__ = ["Engine", "StageEvent", "NodeTotals"]


@dataclass(frozen=True)
class StageEvent:
    """One stage of one piece at one node: the unit of a trace."""
    node: str           # path from the root: "0", "0.2", "0.2.1"
    level: int
    opcode: str
    piece: int
    stage: str          # ID, LD, EX, RD, WB, RUN (leaf or DMA)
    start: int
    end: int


@dataclass
class NodeTotals:
    """Cycles a node's stages were busy, summed over its pieces (to name what bounds it)."""
    cycles: int = 0
    transfer: int = 0
    latency: int = 0
    execute: int = 0
    reduce: int = 0
    leaf_compute: int = 0
    leaf_memory: int = 0
    slowest_child: tuple | None = None


def _ceil(x: float) -> int:
    return int(math.ceil(x - 1e-9))


def _pieces_per_root(plan: Plan, mode: str) -> list[int]:
    """Serial pieces the simulation steps through for each root instruction: each distinct node
    task once (symmetric), or every node that runs one (exact)."""
    out = []
    for root in plan.roots:
        counts = level_counts(plan, (root,))
        out.append(sum(plan.table[k].pieces * (n if mode == "exact" else 1)
                       for k, n in counts.items()))
    return out


class Engine:
    def __init__(self, plan: Plan, mode: str = "symmetric", trace: bool = False):
        if mode not in ("symmetric", "exact"):
            raise ValueError(mode)
        check_sim_pieces(_pieces_per_root(plan, mode), plan.program)
        self.plan = plan
        self.machine = plan.machine
        self.mode = mode
        self.events: list[StageEvent] | None = [] if trace else None
        self.totals: dict = {}          # (task, level) -> NodeTotals
        self._durations: dict = {}      # (task, level) -> cycles, symmetric mode
        self._pieces: dict = {}         # (task, level) -> NodePieces

    # ------------------------------------------------------------ public
    def instruction_cycles(self) -> list[int]:
        """Cycles of each program instruction, run one after another at the root."""
        if self.mode == "symmetric":
            return [self.duration(r) for r in self.plan.roots]
        env = simpy.Environment()
        ends = []

        def program():
            for r in self.plan.roots:
                yield env.process(self._node(env, r, "0"))
                ends.append(int(env.now))
        env.process(program())
        env.run()
        return [b - a for a, b in zip([0] + ends[:-1], ends)]

    def duration(self, node: NodePlan) -> int:
        """Cycles a node takes for its task, simulated once per (task, level)."""
        key = (node.task, node.level)
        d = self._durations.get(key)
        if d is None:
            env = simpy.Environment()
            env.process(self._node(env, node, "0"))
            env.run()
            d = self._durations[key] = int(env.now)
        return d

    def simulated_pieces(self):
        """The piece kinds of every split node simulated so far."""
        return self._pieces.values()

    def pieces(self, node: NodePlan) -> NodePieces:
        key = (node.task, node.level)
        p = self._pieces.get(key)
        if p is None:
            p = self._pieces[key] = NodePieces(node, self.machine.levels[node.level].broadcast)
        return p

    # ------------------------------------------------------------ processes
    def _record(self, path, node, piece, stage, start, end):
        if self.events is not None and end > start:
            self.events.append(StageEvent(path, node.level, node.task.opcode, piece, stage,
                                          int(start), int(end)))

    def _node(self, env: simpy.Environment, node: NodePlan, path: str):
        level = self.machine.levels[node.level]
        key = (node.task, node.level)
        totals = NodeTotals()
        start = env.now
        yield env.timeout(level.decode_cycles)
        self._record(path, node, -1, "ID", start, env.now)
        if node.kind != "split":
            yield from self._run_locally(env, node, path, totals)
        else:
            yield from self._pipeline(env, node, path, totals)
        totals.cycles = int(env.now - start)
        totals.latency += level.decode_cycles
        self.totals.setdefault(key, totals)

    def _run_locally(self, env, node: NodePlan, path, totals: NodeTotals):
        level = self.machine.levels[node.level]
        task = node.task
        memory = _ceil((node.local_bytes or task.nbytes) / level.memory_bandwidth)
        compute = 0
        if node.kind == "leaf":
            compute = sum(_ceil(ops / self.machine.compute.ops_per_cycle(c))
                          for c, ops in task.work if c != "move")
        totals.leaf_compute, totals.leaf_memory = compute, memory
        start = env.now
        yield env.timeout(max(compute, memory))
        self._record(path, node, 0, "RUN", start, env.now)

    def _pipeline(self, env, node: NodePlan, path, totals: NodeTotals):
        lv, child = self.machine.levels[node.level], self.machine.levels[node.level + 1]
        pieces = self.pieces(node)
        port, lfu, kids = simpy.Resource(env), simpy.Resource(env), simpy.Resource(env)
        slots = simpy.Resource(env, capacity=BUFFERING)
        running = []
        for i, kind in enumerate(pieces.sequence()):
            slot = slots.request()
            yield slot
            running.append(env.process(self._piece(env, node, path, i, pieces.work(kind), port, lfu,
                                                   kids, slots, slot, lv, child, totals)))
        yield simpy.AllOf(env, running)
        if pieces.final_reduce_ops:
            start = env.now
            cycles = _ceil(pieces.final_reduce_ops / lv.lfu_ops_per_cycle)
            yield env.timeout(cycles)
            totals.reduce += cycles
            self._record(path, node, len(running), "RD", start, env.now)

    def _transfer(self, env, port, port_bytes, link_bytes, lv, child, totals):
        port_cycles = _ceil(port_bytes / lv.memory_bandwidth)
        link_cycles = _ceil(link_bytes / child.link_bandwidth)
        with port.request() as req:
            yield req
            yield env.timeout(port_cycles)
        yield env.timeout(max(0, link_cycles - port_cycles) + child.link_latency)
        totals.transfer += max(port_cycles, link_cycles)
        totals.latency += child.link_latency

    def _piece(self, env, node, path, i, work, port, lfu, kids, slots, slot, lv, child, totals):
        start = env.now
        yield from self._transfer(env, port, work.load_bytes, work.load_link_bytes, lv, child, totals)
        self._record(path, node, i, "LD", start, env.now)
        with kids.request() as req:
            yield req
            start = env.now
            yield from self._execute(env, node, path, i, work, totals)
            totals.execute += int(env.now - start)
            if work.child_reduce_max:       # each child adds this partial to the one it keeps
                cycles = _ceil(work.child_reduce_max / child.lfu_ops_per_cycle)
                yield env.timeout(cycles)
                totals.reduce += cycles
            self._record(path, node, i, "EX", start, env.now)
        if work.store_bytes:
            start = env.now
            yield from self._transfer(env, port, work.store_bytes, work.store_link_bytes, lv, child,
                                      totals)
            self._record(path, node, i, "WB", start, env.now)
        if work.reduce_ops:
            with lfu.request() as req:
                yield req
                start = env.now
                cycles = _ceil(work.reduce_ops / lv.lfu_ops_per_cycle)
                yield env.timeout(cycles)
                totals.reduce += cycles
                self._record(path, node, i, "RD", start, env.now)
        slots.release(slot)

    def _execute(self, env, node: NodePlan, path, i, work, totals: NodeTotals):
        children = [self.plan.node(t, node.level + 1) for t, _ in work.children]
        if self.mode == "symmetric":
            durations = [self.duration(c) for c in children]
            yield env.timeout(max(durations))
        else:
            procs, j = [], 0
            for c, (_, n) in zip(children, work.children):
                for _ in range(n):
                    procs.append(env.process(self._node(env, c, f"{path}.{j}")))
                    j += 1
            yield simpy.AllOf(env, procs)
            durations = [self.totals[(c.task, c.level)].cycles for c in children]
        # both modes name the same slowest child: the first of the longest, over all pieces
        slowest = max(range(len(children)), key=durations.__getitem__)
        if totals.slowest_child is None or durations[slowest] > totals.slowest_child[1]:
            totals.slowest_child = ((children[slowest].task, children[slowest].level),
                                    durations[slowest])

    # ------------------------------------------------------------ analysis
    def bound(self, node: NodePlan) -> str:
        """What bounds a node's time: compute, bandwidth, latency or reduction (the busiest
        stage; when the children's execution is, what bounds the slowest child)."""
        t = self.totals.get((node.task, node.level))
        if t is None:
            return "latency"
        if node.kind == "leaf":
            return "compute" if t.leaf_compute >= t.leaf_memory else "bandwidth"
        if node.kind == "local":
            return "bandwidth"
        stages = {"execute": t.execute, "bandwidth": t.transfer, "latency": t.latency,
                  "reduction": t.reduce}
        top = max(stages, key=stages.get)
        if top == "execute" and t.slowest_child is not None:
            return self.bound(self.plan.node(*t.slowest_child[0]))
        return top
