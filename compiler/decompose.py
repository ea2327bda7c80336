"""Serial and parallel decomposition at one node, recursively down to the leaves, memoized.

A node at level l receives a task whose operands sit in its local memory. It chooses, per axis of
the task's iteration space, a number of serial pieces n and parallel ways p (the product of the
ways is at most the fan-out), such that one child's share of a piece fits the child's memory with
room for the pieces in flight its level buffers (`buffering`, 2 by default: the next piece loads
while this one runs).

The choice minimises a stated cost: the node's cycles for the whole task. A closed form of the
pipeline of its piece schedule (`compiler.schedule.Schedule.estimate`, the same pieces, bytes and
stage times the simulator runs, with a child's time estimated from the box it receives) ranks
every candidate. Every maximal parallel split (no axis could take one more way within the
fan-out) is searched; serial cuts are found by halving the axis whose cut costs least, until the
piece fits, and, for the cheapest few, a few cuts more while they lower the cost (deeper
pipelining). The cheapest candidates, with every step of the best one's extra cuts, then have
their children planned and their pipeline run in the simulator's own node model
(`compiler.pipeline`), each child timed by its own plan: the fastest is chosen, and its cycles
are the node's estimate, the cycles the simulator will measure. Ties go to fewer bytes moved
plus reduction ops, then to less load imbalance.

The objective (`OBJECTIVES`) decides among that shortlist: `cycles` (the default), `energy` (the
subtree's dynamic energy, `compiler.energy.node_joules` of the node and its children's plans,
plus the static power of its subtree over its cycles) or `edp` (that energy times the cycles).
The closed form still ranks the candidates and orders by cycles.
"""
from __future__ import annotations

import dataclasses
import math

from compiler.energy import node_joules, subtree_watts
from compiler.plan import AxisSplit, NodePlan, Plan, PlanKind
from compiler.rules import (AccessMap, Task, access_map, box_types, ceil_cycles, ceil_div,
                            moved_bytes, task_of)
from compiler.leaf import leaf_cycles
from compiler.pipeline import best_variant, lfu_free, node_cycles, streams
from compiler.reservation import Reservation
from compiler.schedule import Schedule, _Axis, default_order
from isa.checker import opcode_table
from isa.errors import UserError, did_you_mean
from isa.limits import check_plan_pieces
from isa.opcodes import OpClass
from isa.program import Program
from machine import Machine, check_machine_shape

__all__ = ["CompileError", "compile_program", "plan_instructions", "Decomposer", "plan_inputs",
           "child_plan_inputs", "pricing_inputs", "pricing_of"]

#: serial cuts tried beyond the fewest that fit, kept while they lower the cost, at the root and
#: below it (a fourth below the root moves the cycles of the 89 suite cases by 0.34% at most, of
#: re-scaled machines by up to 2%, and costs a quarter of a VGG-16 compile: docs/compiler.md,
#: "Where a compile's time goes now")
EXTRA_CUTS = (4, 3)
EXTRA_CUT_CANDIDATES = 4   # ... on this many of the cheapest parallel splits
#: candidates whose children are planned and whose pipeline is run (the simulator's node model)
#: to choose among, at the root and below it: the cheapest by the closed-form estimate with
#: every step of its extra cuts, then the others with and without theirs
EXACT_CANDIDATES = (3, 2)
#: a candidate with more serial pieces than this is ranked by the closed form alone
EXACT_MAX_PIECES = 4096
#: what a node's choice among its shortlist minimises
OBJECTIVES = ("cycles", "energy", "edp")


class CompileError(UserError):
    """An instruction that cannot be fitted onto the machine."""


def _bytes(n: float) -> str:
    return f"{int(n):,} bytes"


class Decomposer:
    """Plans tasks for one machine; identical (task, level) sub-problems are planned once."""

    def __init__(self, machine: Machine, objective: str = "cycles", priced=None):
        self.machine = machine
        self.objective = objective
        self.table: dict = {}       # every (task, level) planned, the alternatives' children too
        # per level above the leaves: what its search priced, keyed by the task and the
        # candidate (`pricing_inputs`: shared with machines that price that level alike)
        self.priced = priced if priced is not None else [{} for _ in range(machine.depth)]
        self.origin = None          # the program instruction being compiled, for error locations
        self.program = None

    # ------------------------------------------------------------ entry
    def plan(self, task: Task, level: int = 0) -> NodePlan:
        """The plan of a task at a level, its children planned first (their estimates price
        the pipeline that chooses among the split's candidates)."""
        key = (task, level)
        node = self.table.get(key)
        if node is None:
            node = self._decompose(task, level)
            for child, _ in node.children:
                self.plan(child, level + 1)
            self.table[key] = node      # with its subtree: a plan in the table is whole
        return node

    def reachable(self, roots) -> dict:
        """The entries the roots' plans use: the alternatives' children are left out."""
        out, todo = {}, [(r.task, r.level) for r in roots]
        while todo:
            key = todo.pop()
            if key not in out:
                node = out[key] = self.table[key]
                todo.extend((t, key[1] + 1) for t, _ in node.children)
        return out

    def _decompose(self, task: Task, level: int) -> NodePlan:
        lv = self.machine.levels[level]
        if level == self.machine.depth:
            est = max(leaf_cycles(task, self.machine.compute),
                      ceil_cycles(task.nbytes / lv.memory_bandwidth))
            return _own_joules(NodePlan(task=task, level=level, kind=PlanKind.LEAF,
                                        est_cycles=lv.decode_cycles + est), self.machine)
        amap = access_map(task)
        if amap is None:
            pin = next((p for p in task.pin if p.level == level), None)
            if pin:
                raise CompileError(f"{task.opcode} moves data on the DMA of a level-{level} node: "
                                   f"it has no cuts to pin", pin.where)
            moved = moved_bytes(task)
            return _own_joules(NodePlan(
                task=task, level=level, kind=PlanKind.LOCAL, local_bytes=moved,
                est_cycles=lv.decode_cycles + ceil_cycles(moved / lv.memory_bandwidth),
                why="data movement: run by this node's DMA in its local memory"), self.machine)
        return self._split(task, level, amap)

    # ------------------------------------------------------------ search
    def _split(self, task: Task, level: int, amap: AccessMap) -> NodePlan:
        m = self.machine
        node, child = m.levels[level], m.levels[level + 1]
        budget = child.memory_bytes // child.buffering
        sizes = [a.size for a in amap.axes]
        least = [a.least for a in amap.axes]
        free = [i for i, a in enumerate(amap.axes) if a.splittable and a.size >= 2 * a.least]
        smallest = [least[i] if i in free else s for i, s in enumerate(sizes)]
        need = amap.footprint(smallest)
        if need > budget:
            self._too_big(task, level, need, budget)
        model = _CostModel(task, amap, m, level, least,
                           self.priced[level].setdefault(("costs", task), {}))
        candidates = 0
        best = None
        caps = [ax.leaf if level + 1 == m.depth else None for ax in amap.axes]
        pin = next((p for p in task.pin if p.level == level), None)
        fixed_ways, fixed_pieces, pinned_order = (_pinned(pin, amap, free, node.fanout, caps, level)
                                                  if pin else ({}, {}, None))
        cuttable = [a for a in free if a not in fixed_pieces]
        fitted = []
        # an axis's ways leave every part of its pieces at least its least (a pinned piece
        # count is fixed: the ways share what each of its pieces holds)
        most = [s // fixed_pieces.get(a, 1) // m for a, (s, m) in enumerate(zip(sizes, least))]
        for ways in _parallel_candidates(most, [a for a in free if a not in fixed_ways],
                                         node.fanout // math.prod(fixed_ways.values())):
            candidates += 1
            for a, n in fixed_ways.items():
                ways[a] = n
            # an axis a leaf may receive only so much of is cut that far from the start
            pieces = [fixed_pieces.get(a) or (1 if cap is None else ceil_div(s, cap * w))
                      for a, (s, cap, w) in enumerate(zip(sizes, caps, ways))]
            cost = model.cost(pieces, ways)
            while (need := model.footprint(model.child_extents(pieces, ways))) > budget:
                steps = [(p, model.cost(p, ways)) for p in model.halvings(pieces, ways, cuttable)]
                if not steps:       # every axis is as small as its split rules allow
                    break
                pieces, cost = min(steps, key=lambda pc: pc[1])
            if need <= budget:
                fitted.append((cost, pieces, ways))
        paths = []
        for cost, pieces, ways in sorted(fitted)[:EXTRA_CUT_CANDIDATES]:
            path = [(cost, pieces)]
            for _ in range(EXTRA_CUTS[min(level, 1)]):     # more cuts while they pay
                steps = [(p, model.cost(p, ways)) for p in model.halvings(pieces, ways, cuttable)]
                if not steps:
                    break
                p, c = min(steps, key=lambda pc: pc[1])
                if c >= cost:
                    break
                pieces, cost = p, c
                path.append((cost, pieces))
            paths.append((cost, path[::-1], ways))
        if not paths and pin:
            raise CompileError(f"the pinned mapping ({pin.text()}) does not fit level {level + 1} "
                               f"({child.name}) of machine '{m.name}': a child's piece needs "
                               f"{_bytes(need)}, more than the {_bytes(budget)} per piece of a "
                               f"{child.name} ({child.buffering} pieces in flight)", pin.where,
                               hint="pin more serial pieces, or leave an axis to the search")
        if not paths:
            self._too_big(task, level, need, budget)
        paths.sort(key=lambda f: f[0])
        # the shortlist: every step of the cheapest candidate's extra cuts, then the others'
        # last and first steps
        shortlist = [(c, p, paths[0][2]) for c, p in paths[0][1]]
        for _, path, ways in paths[1:]:
            shortlist += [(c, p, ways) for c, p in (path[:1] + path[-1:] if len(path) > 1 else path)]
        # the energy objectives choose at every level among as many as the root does
        shortlist = shortlist[:EXACT_CANDIDATES[min(level, 1) if self.objective == "cycles" else 0]]
        best = None
        for cost, pieces, ways in shortlist:
            # the loop order (which operand stays in the children) by the closed form
            orders = [pinned_order] if pinned_order else model.orders(pieces, ways)
            try:
                cost, order = min((model.cost(pieces, ways, o), o) for o in orders)
            except ValueError as e:      # a pinned order that puts a reduction outside
                raise CompileError(str(e), pin.where + ".order") from None
            schedule = model.schedule(pieces, ways, order)
            cycles, reservation, stream = (self._run_pipeline(schedule, level)
                                           if schedule.count <= EXACT_MAX_PIECES
                                           else (None, None, False))
            cycles = cycles if cycles is not None else cost[0]
            key = (self._objective(schedule, level, cycles), cycles, cost)
            if best is None or key < best[0]:
                best = (key, schedule, reservation, stream)
        (_, cycles, cost), schedule, reservation, stream = best
        return self._build(task, level, schedule, (cycles, *cost[1:]), candidates, budget,
                           len(shortlist), reservation, stream)

    def _objective(self, schedule: Schedule, level: int, cycles: float) -> float:
        """The candidate's value under the objective (cycles: 0, the cycles decide)."""
        if self.objective == "cycles":
            return 0
        m = self.machine
        joules = _joules(self._node(schedule, level), m, self.plan) + \
            subtree_watts(m, level) * cycles / m.frequency_hz
        return joules if self.objective == "energy" else joules * cycles

    def _node(self, schedule: Schedule, level: int, **rest) -> NodePlan:
        """The split NodePlan of a schedule (what it moves, reduces and hands its children)."""
        t = schedule.totals()
        return NodePlan(task=schedule.task, level=level, kind=PlanKind.SPLIT,
                        children=t["children"], pieces=schedule.count, bytes_down=t["bytes_down"],
                        bytes_up=t["bytes_up"], reduction_ops=t["reduction_ops"],
                        reduce=schedule.reduce, child_reduction_ops=t["child_reduction_ops"],
                        order=schedule.order, **rest)

    def _run_pipeline(self, schedule: Schedule, level: int):
        """The node's cycles and reservation table under the simulator's node model, its
        children planned (and timed by their own estimates, down to the leaves), and whether
        its children start while a load streams in (`compiler.pipeline.best_variant`)."""
        kids = [self.plan(t, level + 1) for t, _ in schedule.totals()["children"]]
        key = ("pipeline", schedule.task, schedule.pieces, schedule.ways, schedule.order)
        known = self.priced[level].get(key)
        if known is None:
            known = self.priced[level][key] = self._pipeline(schedule, level, kids)
        return known

    def _pipeline(self, schedule: Schedule, level: int, kids: list):
        m = self.machine

        def timing(t):
            kid = self.table[(t, level + 1)]
            return kid.est_cycles, kid.reservation or Reservation.whole(kid.est_cycles)
        runs = {stream: node_cycles(schedule, m.levels[level], m.levels[level + 1], timing,
                                    lfu_free(kids), stream)
                for stream in ((False, True) if streams(schedule, timing) else (False,))}
        stream = best_variant(level, runs)
        return (*runs[stream], stream)

    def _too_big(self, task: Task, level: int, need: int, budget: int):
        m = self.machine
        child = m.levels[level + 1]
        ins = self.origin
        where = ins.loc if ins is not None else None
        line = self.program.source_line(where) if self.program is not None else None
        raise CompileError(
            f"{task.opcode} cannot be fitted on level {level + 1} ({child.name}) of machine "
            f"'{m.name}': its smallest piece needs {_bytes(need)}, a {child.name} has "
            f"{_bytes(child.memory_bytes)} ({_bytes(budget)} per piece with {child.buffering} pieces "
            f"in flight)", where, line,
            hint="give that level more memory, or use smaller tensors")

    # ------------------------------------------------------------ the chosen split
    def _build(self, task, level, schedule: Schedule, cost, candidates, budget, run,
               reservation=None, stream: bool = False) -> NodePlan:
        node, child = self.machine.levels[level], self.machine.levels[level + 1]
        where = self.origin.loc if self.origin is not None else None
        check_plan_pieces(schedule.count, where or f"machine '{self.machine.name}'",
                          self.program.source_line(where) if self.program is not None else None)
        splits = tuple(AxisSplit(name=ax.name, size=ax.size, pieces=sum(n for _, n in sa.runs),
                                 ways=schedule.ways[a], reduce=ax.reduce)
                       for a, (ax, sa) in enumerate(zip(schedule.amap.axes, schedule.axes)))
        cut = ", ".join(s.text() for s in splits if s.pieces * s.ways > 1) or "whole task to one child"
        why = (f"searched {candidates} parallel splits of fan-out {node.fanout}, ran the pipeline of "
               f"the {run} cheapest; a child's piece must fit {budget:,} bytes ({child.buffering} "
               f"pieces in flight); chose {cut}: estimated {cost[0]:,.0f} cycles, "
               f"{cost[1]:,.0f} bytes + reduction ops"
               + ("; its children start while a piece's load streams in" if stream else ""))
        node = self._node(schedule, level, splits=splits, busy=schedule.busy(),
                          est_cycles=cost[0], why=why, reservation=reservation, stream=stream)
        return dataclasses.replace(node, est_joules=_joules(node, self.machine, self.plan))


def _bare(level):
    """A level without its memory capacity."""
    return dataclasses.replace(level, memory_bytes=0, physical_memory=())


def plan_inputs(machine: Machine, level: int) -> tuple:
    """What the plan of any task at `level` depends on: that level without its own memory
    capacity (only its parent's split reads that, to size the pieces it sends), every level
    below it, and the leaf compute. Machines equal here plan every task at `level` alike, so a
    design-space search shares those plans between them (`compile_program`'s `table`)."""
    return level, _bare(machine.levels[level]), machine.levels[level + 1:], machine.compute


def child_plan_inputs(inputs: tuple) -> tuple:
    """`plan_inputs` of the level below, from a level's (above the leaves)."""
    level, _, below, compute = inputs
    return level + 1, _bare(below[0]), below[1:], compute


def pricing_inputs(machine: Machine, level: int) -> tuple:
    """What the search at `level` prices a candidate split by: its closed form, and the node
    model's cycles and table with the children's plans. `plan_inputs` without the children's
    memory capacity either, which decides only which candidates fit (and the budget the plan's
    explanation quotes). Machines equal here price every candidate at `level` alike, so a
    design-space search shares those prices between them (`compile_program`'s `priced`)."""
    return pricing_of(plan_inputs(machine, level))


def pricing_of(inputs: tuple) -> tuple:
    """`pricing_inputs` of a level, from its `plan_inputs` (above the leaves)."""
    level, own, below, compute = inputs
    return level, own, (_bare(below[0]), *below[1:]), compute


def _own_joules(node: NodePlan, machine: Machine) -> NodePlan:
    """A node without children with its dynamic energy estimate."""
    return dataclasses.replace(node, est_joules=sum(j for _, _, j in node_joules(node, machine)))


def _joules(node: NodePlan, machine: Machine, plan) -> float:
    """Dynamic energy of one run of the node and its subtree, its children planned by `plan`."""
    own = sum(j for _, _, j in node_joules(node, machine))
    for t, n in node.children:
        own += n * plan(t, node.level + 1).est_joules      # memoized: planned once
    return own


def _pinned(pin, amap: AccessMap, free, fanout: int, caps, level: int):
    """A pin's parallel ways and serial pieces by axis index, and its loop order, checked
    against the task's axes and the node's fan-out."""
    names = {ax.name: a for a, ax in enumerate(amap.axes)}

    def axes(pairs, what):
        out = {}
        for name, n in pairs:
            a = names.get(name)
            at = f"{pin.where}.{what}.{name}"
            if a is None:
                raise CompileError(f"no axis '{name}': this instruction's axes are "
                                   f"{', '.join(names)}", at, hint=did_you_mean(name, names))
            ax = amap.axes[a]
            if n > 1 and a not in free:
                raise CompileError(f"axis {name} of size {ax.size} cannot be cut", at)
            out[a] = n
        return out

    ways, pieces = axes(pin.parallel, "parallel"), axes(pin.serial, "serial")
    if math.prod(ways.values()) > fanout:
        raise CompileError(f"{math.prod(ways.values())} parallel parts, more than the fan-out of "
                           f"{fanout} at level {level}", f"{pin.where}.parallel")
    for a in set(ways) | set(pieces):
        ax, n = amap.axes[a], ways.get(a, 1) * pieces.get(a, 1)
        if ax.size // n < ax.least or (caps[a] and ceil_div(ax.size, n) > caps[a]):
            what = "parallel" if a in ways else "serial"
            raise CompileError(f"axis {ax.name} of size {ax.size} cut into {n} parts: each must "
                               f"hold at least {ax.least}" + (f" and at most {caps[a]} (the "
                               f"leaf's limit)" if caps[a] else ""),
                               f"{pin.where}.{what}.{ax.name}")
    order = None
    if pin.order:
        if sorted(pin.order) != sorted(names):
            raise CompileError(f"the loop order must name every axis once: {', '.join(names)}",
                               f"{pin.where}.order")
        order = tuple(names[n] for n in pin.order)
    return ways, pieces, order


class _CostModel:
    """Ranks candidate splits by the schedule's pipeline estimate (`Schedule.estimate`), with a
    child's time estimated from the task it receives: its fixed costs, then the larger of that
    task's leaf compute shared by the leaves below the child and one pass of its operands
    through the child's own memory port."""

    def __init__(self, task: Task, amap: AccessMap, machine: Machine, level: int, least,
                 costs: dict | None = None):
        self.task, self.amap, self.least = task, amap, least
        self.sizes = [a.size for a in amap.axes]
        self.node, self.child = machine.levels[level], machine.levels[level + 1]
        self.leaves_below = math.prod(machine.fanouts[level + 1:])
        self.compute = machine.compute
        # what a child spends on any task whatever its size: its decode, and a load's and a
        # store's latency to its own children
        below = machine.levels[level + 2].link_latency if level + 2 <= machine.depth else 0
        self.child_fixed = self.child.decode_cycles + 2 * below
        self._children: dict = {}
        self._footprints: dict = {}
        self._axes: dict = {}
        self._costs: dict = {} if costs is None else costs
        self._schedules: dict = {}
        self._memo: dict = {}

    def footprint(self, ext) -> int:
        key = tuple(ext)
        n = self._footprints.get(key)
        if n is None:
            n = self._footprints[key] = self.amap.footprint(ext)
        return n

    def child_extents(self, pieces, ways):
        return [ceil_div(ceil_div(s, n), p) for s, n, p in zip(self.sizes, pieces, ways)]

    def halvings(self, pieces, ways, free):
        """Piece counts that halve one axis's child extent."""
        ext = self.child_extents(pieces, ways)
        for a in free:
            if ext[a] > 1:
                n = ceil_div(self.sizes[a], ceil_div(ext[a], 2) * ways[a])
                if n > pieces[a] and (self.least[a] == 1 or
                                      self.sizes[a] // n // ways[a] >= self.least[a]):
                    yield pieces[:a] + [n] + pieces[a + 1:]

    def child_cycles(self, starts, ext) -> float:
        key = tuple(ext)        # children of one extent differ at most in border padding
        c = self._children.get(key)
        if c is None:
            child = Task(self.task.opcode, box_types(self.task, self.amap, starts, ext),
                         self.task.attrs, self.task.ext)
            if self.leaves_below == 1:      # a leaf: its compute units at the tile's fill
                compute = leaf_cycles(child, self.compute)
            else:                           # shared by the leaves below, at the full rates
                compute = sum(ops / self.compute.ops_per_cycle(k, child.inputs[0].dtype)
                              for k, ops in child.work if k != OpClass.MOVE) / self.leaves_below
            c = self._children[key] = self.child_fixed + max(
                compute, self.footprint(ext) / self.child.memory_bandwidth)
        return c

    def orders(self, pieces, ways) -> list[tuple]:
        """Loop orders worth trying: the axes in order, and each serially cut axis that is not a
        reduction moved innermost of those (the operands that do not depend on it then stay in
        the children across its pieces)."""
        base = default_order(self.amap)
        serial = self.schedule(pieces, ways).serial
        cut = [a for a in base if serial[a] > 1 and not self.amap.axes[a].reduce]
        out = [base]
        for a in cut[:-1]:
            rest = [b for b in base if b != a]
            at = max(i for i, b in enumerate(rest) if not self.amap.axes[b].reduce) + 1
            out.append(tuple(rest[:at] + [a] + rest[at:]))
        return out

    def schedule(self, pieces, ways, order: tuple | None = None) -> Schedule:
        key = (tuple(pieces), tuple(ways), order)
        s = self._schedules.get(key)
        if s is None:
            axes = []
            for a, (n, p) in enumerate(zip(pieces, ways)):
                ax = self._axes.get((a, n, p))
                if ax is None:
                    ax = self._axes[(a, n, p)] = _Axis(self.amap, a, n, p)
                axes.append(ax)
            s = self._schedules[key] = Schedule(self.task, self.amap, pieces, ways,
                                                self.node.broadcast, axes, self._memo, order)
        return s

    def cost(self, pieces, ways, order: tuple | None = None) -> tuple:
        key = (tuple(pieces), tuple(ways), order)
        c = self._costs.get(key)
        if c is None:
            c = self._costs[key] = self.schedule(pieces, ways, order).estimate(
                self.node, self.child, self.child_cycles)
        return c


def _parallel_candidates(sizes, free, fanout):
    """Every maximal way to give each free axis p_a ways with prod(p) <= fanout and p_a <= size_a."""
    out = []

    def rec(i, ways, prod):
        if i == len(free):
            out.append(list(ways))
            return
        a = free[i]
        top = min(sizes[a], fanout // prod)
        # the last free axis of a maximal split takes every way left: enumerate only that one
        for p in range(top if i == len(free) - 1 else 1, top + 1):
            ways[a] = p
            rec(i + 1, ways, prod * p)
        ways[a] = 1

    rec(0, [1] * len(sizes), 1)
    maximal = []
    for w in out:
        prod = math.prod(w)
        if all(w[a] >= sizes[a] or prod // w[a] * (w[a] + 1) > fanout for a in free):
            maximal.append(w)
    return maximal or [[1] * len(sizes)]


def compile_program(program: Program, machine: Machine, mapping=None,
                    objective: str = "cycles", table=None, priced=None, between=None) -> Plan:
    """Decompose every instruction of a checked program for a machine; `mapping`
    (`compiler.mapping.Mapping`) pins some of their cuts, `objective` (one of `OBJECTIVES`) is
    what each node's choice minimises. `table`, a mapping (task, level) -> NodePlan, holds plans
    made before for a machine whose `plan_inputs` at that level are the same (a design-space
    search shares them across machines); by default the plans start afresh. `priced`, one
    mapping per level above the leaves, holds likewise what the search priced at that level for
    a machine whose `pricing_inputs` there are the same. `between()` is called before each
    instruction (a design-space search's workers share what they plan there)."""
    roots, reached = plan_instructions(program, machine, None, mapping, objective, table,
                                       priced, between)
    return Plan(program, machine, tuple(roots), reached, objective)


def plan_instructions(program: Program, machine: Machine, order=None, mapping=None,
                      objective: str = "cycles", table=None, priced=None,
                      between=None) -> tuple[list, dict]:
    """Plan the instructions of `order` (their indices; by default every one, in program order)
    as `compile_program` does, calling `between()` before each: (per instruction its root plan,
    None where not planned; the plan table's entries they reach). A plan does not depend on
    which instructions were planned before it (a design-space search's workers plan a
    program's instructions among them)."""
    if objective not in OBJECTIVES:
        raise UserError(f"unknown objective '{objective}' (one of {', '.join(OBJECTIVES)})",
                        "--objective", hint=did_you_mean(objective, OBJECTIVES))
    check_machine_shape(machine.fanouts, f"machine '{machine.name}'", f"machine '{machine.name}'")
    dec = Decomposer(machine, objective, priced)
    dec.program = program
    if table is not None:
        dec.table = table
    root = machine.levels[0]
    total = sum(t.type.nbytes for t in program.tensors)
    if total > root.memory_bytes:
        largest = sorted(program.tensors, key=lambda t: -t.type.nbytes)[:3]
        names = ", ".join(f"'{t.name}' ({_bytes(t.type.nbytes)})" for t in largest)
        raise CompileError(f"the program's tensors need {_bytes(total)}, more than the "
                           f"{_bytes(root.memory_bytes)} of the root ({root.name}) memory of "
                           f"machine '{machine.name}'; the largest: {names}", program.file)
    types = program.types
    table = opcode_table(program)
    roots = [None] * len(program.instructions)
    for i in (range(len(roots)) if order is None else order):
        if between is not None:
            between()
        ins = dec.origin = program.instructions[i]
        task = task_of(ins, types, table)
        if mapping is not None and ins.loc is not None:
            task = dataclasses.replace(task, pin=mapping.for_line(ins.loc.line))
        roots[i] = dec.plan(task, 0)
    return roots, dec.reachable([r for r in roots if r is not None])
