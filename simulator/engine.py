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

The pieces, what each moves and runs, and its stage times come from the node's piece schedule
(`compiler.schedule`), the same one the compiler's cost model estimates. Consecutive serial pieces
overlap: the memory port, the children and the LFU are each held by one piece at a time, in order
(a transfer holds the port for its port time; its link time beyond that and its latency overlap
other work), and at most `buffering` pieces are in flight (the children's memories hold that many,
a property of the children's level). A leaf runs
its task in max(ops / its rate for the op class, bytes / its memory bandwidth) cycles; a node that
receives a data-movement instruction runs it with its DMA at its memory port's bandwidth.

Two modes give identical cycles: `exact` runs a process for every node of the machine in one
environment (and can record a trace of every stage of every node); `symmetric` simulates each
distinct (task, level) once and reuses its duration for every sibling that receives the same task,
so its cost grows with levels times distinct shapes, not with the number of leaves (and its trace
holds the root and one representative node, "r<k>", of each distinct task below it, each from the
time its first instance starts).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import simpy

from compiler.plan import NodePlan, Plan, PlanKind, level_counts
from compiler.leaf import leaf_cycles
from compiler.pipeline import NodePipeline, NodeTotals, lfu_free, piece_timing
from compiler.reservation import Reservation
from compiler.rules import ceil_cycles
from compiler.schedule import Schedule
from isa.errors import InternalError
from isa.limits import check_sim_pieces

__all__ = ["Engine", "StageEvent", "NodeTotals"]


@dataclass(frozen=True, kw_only=True)
class StageEvent:
    """One stage of one piece at one node: the unit of a trace."""
    node: str           # path from the root: "0", "0.2", "0.2.1"
    level: int
    opcode: str
    piece: int
    stage: str          # ID, LD, EX, RD, WB, RUN (leaf or DMA); or a counter's name
    start: int
    end: int
    value: int | None = None    # a counter's contribution over [start, end): "port busy" (1
                                # while the port is held), "bytes in flight" (a piece's load
                                # bytes, from its first byte loaded to its buffer's release)


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
    """Runs a plan: every node is a `NodeRun` process (exact), or each distinct (task, level)
    once with its duration reused for every sibling that receives the same task (symmetric)."""

    def __init__(self, plan: Plan, mode: str = "symmetric", trace: bool = False, known=None):
        """`known`, in symmetric mode untraced: a mapping (task, level) -> (node, cycles,
        reservation table, totals) of node runs to reuse, to which this engine adds its own. A
        node's run depends only on its plan, its children's runs and the levels from its own
        down, and not on its own memory capacity: a design-space search keeps one per
        `compiler.decompose.plan_inputs` (fractal.explore.evaluate)."""
        if mode not in ("symmetric", "exact"):
            raise ValueError(mode)
        check_sim_pieces(_pieces_per_root(plan, mode), plan.program)
        self.plan = plan
        self.machine = plan.machine
        self.mode = mode
        self.events: list[StageEvent] | None = [] if trace else None
        self.totals: dict = {}          # (task, level) -> NodeTotals
        self._durations: dict = {}      # (task, level) -> cycles, symmetric mode
        self._reservations: dict = {}   # (task, level) -> its reservation table
        self._pending: dict = {}        # (task, level) -> trace events not yet placed
        self._usage: dict = {}          # exact mode: (node path, resource) -> intervals held
        # the reservation tables a parent places its children's tasks by: each (task, level)
        # simulated once on its own, in both modes
        self._timer = self if mode == "symmetric" else Engine(plan, "symmetric")
        self._schedules: dict = {}      # (task, level) -> Schedule
        self._violations: list[InternalError] = []
        self._known = known if mode == "symmetric" and not trace else None

    # ------------------------------------------------------------ public
    def instruction_cycles(self) -> list[int]:
        """Cycles of each program instruction, run one after another at the root."""
        if self.mode == "symmetric":
            return [self.duration(r) for r in self.plan.roots]
        env = simpy.Environment()
        ends = []

        def program():
            for r in self.plan.roots:
                yield env.process(NodeRun(self, env, r, "0").run())
                ends.append(int(env.now))
        env.process(program())
        self._run(env)
        self._check_one_task_at_a_time()
        return [b - a for a, b in zip([0] + ends[:-1], ends)]

    def use(self, path: str, resource: str, start: int, end: int):
        """Exact mode: a node held a resource (a leaf or a DMA: "node", the whole of it) over
        [start, end), for the check that overlapping tasks never share one."""
        self._usage.setdefault((path, resource), []).append((start, end))

    def _check_one_task_at_a_time(self):
        """Consecutive tasks on one node overlap only where their reservation tables allow: no
        port, link, LFU, controller, children or leaf serves two at once, and no more pieces
        are in flight in a node's children's memories than their `buffering`."""
        for (path, resource), spans in self._usage.items():
            spans.sort()
            level = path.count(".")
            cap = 1
            if resource == "buffers":
                cap = self.machine.levels[level + 1].buffering
            ends: list[int] = []
            for a, b in spans:
                ends = [e for e in ends if e > a] + [b]
                if len(ends) > cap:
                    raise InternalError(
                        "a resource serves no more tasks at once than its capacity",
                        f"level {level} ({self.machine.levels[level].name}), node {path}",
                        f"the {resource} held {len(ends)} at cycle {a:,} (capacity {cap})")

    def duration(self, node: NodePlan, at: int | None = 0) -> int:
        """Cycles a node takes for its task, simulated once per (task, level). Traced, the run is
        a representative node of its level, its events placed from `at` (the first time the node
        is placed; None: not yet, as when a parent only reads the task's reservation table)."""
        key = (node.task, node.level)
        d = self._durations.get(key)
        if d is None and self._known is not None and self._adopt(node):
            d = self._durations[key]
        if d is None:
            env = simpy.Environment()
            path = "0" if node.level == 0 else f"r{len(self._durations)}"
            saved = self.events
            if saved is not None:
                self.events = []
            run = NodeRun(self, env, node, path)
            env.process(run.run())
            self._run(env)
            d = self._durations[key] = int(env.now)
            self._reservations[key] = run.reservation or Reservation.whole(d)
            if saved is not None:
                self._pending[key], self.events = self.events, saved
            if self._known is not None:
                self._known[key] = (node, d, self._reservations[key], self.totals[key])
        if at is not None and self.events is not None and key in self._pending:
            self.events.extend(dataclasses.replace(e, start=e.start + at, end=e.end + at)
                               for e in self._pending.pop(key))
        return d

    def _adopt(self, node: NodePlan) -> bool:
        """Take a node's run and its subtree's from `known`, if all are there for these plans."""
        key = (node.task, node.level)
        if key in self._durations:
            return True
        run = self._known.get(key)
        if run is None or not (run[0] is node or run[0] == node):
            return False
        if not all(self._adopt(self.plan.node(t, node.level + 1)) for t, _ in node.children):
            return False
        _, self._durations[key], self._reservations[key], self.totals[key] = run
        return True

    def reservation(self, node: NodePlan) -> Reservation:
        """The reservation table of a node's task, run on its own (symmetric mode)."""
        self.duration(node, None)
        return self._reservations[(node.task, node.level)]

    def schedule(self, node: NodePlan) -> Schedule:
        key = (node.task, node.level)
        s = self._schedules.get(key)
        if s is None:
            s = self._schedules[key] = Schedule.of(node, self.machine.levels[node.level].broadcast)
        return s

    def violation(self, error: InternalError):
        """Note a broken invariant; raised when the simulation returns (SimPy re-creates an
        exception raised inside a process from its arguments alone)."""
        self._violations.append(error)

    def _run(self, env: simpy.Environment):
        env.run()
        if self._violations:
            raise self._violations[0]

    def record(self, path, node, piece, stage, start, end, value=None):
        if self.events is not None and end > start:
            self.events.append(StageEvent(node=path, level=node.level, opcode=node.task.opcode,
                                          piece=piece, stage=stage, start=int(start), end=int(end),
                                          value=value))

    # ------------------------------------------------------------ analysis
    def bound(self, node: NodePlan) -> str:
        """What bounds a node's time: compute, bandwidth, latency or reduction (the busiest
        stage; when the children's execution is, what bounds the slowest child)."""
        t = self.totals.get((node.task, node.level))
        if t is None:
            return "latency"
        if node.kind == PlanKind.LEAF:
            return "compute" if t.leaf_compute >= t.leaf_memory else "bandwidth"
        if node.kind == PlanKind.LOCAL:
            return "bandwidth"
        stages = {"execute": t.execute, "bandwidth": t.transfer, "latency": t.latency,
                  "reduction": t.reduce}
        top = max(stages, key=stages.get)
        if top == "execute" and t.slowest_child is not None:
            return self.bound(self.plan.node(*t.slowest_child[0]))
        return top


class NodeRun:
    """One node running one task, in SimPy's machine-shop shape: its shared resources (the memory
    port, the children, the LFU, and the piece buffers of the children's memories) and the
    processes that hold them, one per serial piece."""

    def __init__(self, engine: Engine, env: simpy.Environment, node: NodePlan, path: str):
        self.engine, self.env, self.node, self.path = engine, env, node, path
        machine = engine.machine
        self.level = machine.levels[node.level]
        self.child = machine.levels[node.level + 1] if node.kind == PlanKind.SPLIT else None
        self.totals = NodeTotals()
        self.reservation: Reservation | None = None

    def run(self):
        """ID, then the node's own run (leaf or DMA) or its pipeline of pieces."""
        env, lv = self.env, self.level
        if self.node.kind == PlanKind.SPLIT:
            engine, node, path = self.engine, self.node, self.path
            schedule = engine.schedule(node)
            kids = [engine.plan.node(t, node.level + 1) for t, _ in node.children]
            timer, below = engine._timer, node.level + 1
            timing = piece_timing(schedule, lambda t: (
                timer.duration(engine.plan.node(t, below), None),
                timer.reservation(engine.plan.node(t, below))))
            pipe = NodePipeline(env, schedule, lv, self.child, timing, self._execute,
                                lambda i, stage, a, b, v=None:
                                engine.record(path, node, i, stage, a, b, v),
                                lfu_free=lfu_free(kids), stream=node.stream)
            pipe.totals = self.totals
            yield from pipe.run()
            self.reservation = pipe.reservation
            self._check_capacity()
            if engine.mode == "exact":
                for resource, spans in pipe.rows.items():
                    if resource == "children":      # each child's own resources are checked
                        continue
                    for a, b in spans:
                        engine.use(path, resource, pipe.t0 + a, pipe.t0 + b)
                for a, b in pipe.holds:
                    engine.use(path, "buffers", pipe.t0 + a, pipe.t0 + b)
        else:
            start = env.now
            yield env.timeout(lv.decode_cycles)
            self.engine.record(self.path, self.node, -1, "ID", start, env.now)
            yield from self._run_locally()
            self.totals.cycles = int(env.now - start)
            self.totals.latency += lv.decode_cycles
            if self.engine.mode == "exact":
                self.engine.use(self.path, "node", int(start), int(env.now))
        self.engine.totals.setdefault((self.node.task, self.node.level), self.totals)

    def _check_capacity(self):
        """No port, link or LFU was busy longer than the node ran, nor carried more than its
        bandwidth allows in that time."""
        t, lv, child = self.totals, self.level, self.child
        busy = {"memory port": (t.port_busy, t.port_bytes, lv.memory_bandwidth),
                "children's links in": (t.link_in_busy, t.link_in_bytes, child.link_bandwidth),
                "children's links out": (t.link_out_busy, t.link_out_bytes, child.link_bandwidth),
                "LFU": (t.lfu_busy, None, None),
                "children's LFUs": (t.kids_lfu_busy, None, None)}
        if child.duplex == "half":
            both = t.link_in_busy + t.link_out_busy
            busy["children's half-duplex links"] = (both, t.link_in_bytes + t.link_out_bytes,
                                                    child.link_bandwidth)
        for what, (cycles, nbytes, bandwidth) in busy.items():
            where = f"level {self.node.level} ({lv.name}), node {self.path}, {self.node.task.text()}"
            if cycles > t.cycles:
                self.engine.violation(InternalError(
                    "a resource is busy no longer than the node runs", where,
                    f"the {what} was busy {cycles:,} of {t.cycles:,} cycles"))
            if nbytes is not None and nbytes > bandwidth * t.cycles + 1e-6 * nbytes:
                self.engine.violation(InternalError(
                    "a port or link carries no more than its bandwidth", where,
                    f"the {what} carried {nbytes:,} bytes in {t.cycles:,} cycles at "
                    f"{bandwidth:g} bytes/cycle"))

    def _run_locally(self):
        node, task = self.node, self.node.task
        memory = ceil_cycles((node.local_bytes or task.nbytes) / self.level.memory_bandwidth)
        compute = 0
        if node.kind == PlanKind.LEAF:
            compute = leaf_cycles(task, self.engine.machine.compute)
        self.totals.leaf_compute, self.totals.leaf_memory = compute, memory
        start = self.env.now
        yield self.env.timeout(max(compute, memory))
        self.engine.record(self.path, node, 0, "RUN", start, self.env.now)
        if node.kind == PlanKind.LOCAL:         # the DMA streams through the node's port
            self.engine.record(self.path, node, 0, "port busy", start, start + memory, 1)

    def _execute(self, i: int, kind: tuple):
        engine, env = self.engine, self.env
        children = engine.schedule(self.node).children(kind)
        plans = [engine.plan.node(task, self.node.level + 1) for task, _ in children]
        if engine.mode == "symmetric":
            durations = [engine.duration(c, int(env.now)) for c in plans]
            yield env.timeout(max(durations))
        else:
            procs, j = [], 0
            for c, (_, n) in zip(plans, children):
                for _ in range(n):
                    procs.append(env.process(NodeRun(engine, env, c, f"{self.path}.{j}").run()))
                    j += 1
            yield simpy.AllOf(env, procs)
            durations = [engine.totals[(c.task, c.level)].cycles for c in plans]
        # both modes name the same slowest child: the first of the longest, over all pieces
        slowest = max(range(len(plans)), key=durations.__getitem__)
        if self.totals.slowest_child is None or durations[slowest] > self.totals.slowest_child[1]:
            self.totals.slowest_child = ((plans[slowest].task, plans[slowest].level),
                                         durations[slowest])
